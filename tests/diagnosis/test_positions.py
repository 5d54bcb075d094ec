"""Markers read at a capture position some examples lack: those examples left out, else not applicable."""

from __future__ import annotations

import numpy as np

from probekit.diagnosis.positions import (
    missing_split,
    position_column,
    positioned_examples,
    reads_capture_positions,
)
from probekit.hypotheses.kinds.homomorphism_error import HomomorphismErrorSpec
from probekit.hypotheses.kinds.manifold_capacity import CapacitySpec
from probekit.hypotheses.kinds.probe_accuracy import ProbeAccuracySpec
from probekit.hypotheses.kinds.representational_similarity import SimilaritySpec
from probekit.hypotheses.kinds.weight_norm import WeightNormSpec
from tests.hypotheses.helpers import examples


def _examples():
    # rows 0..5; position null on rows 1, 2 (single clauses), 4
    pos = [3, None, None, 5, None, 4]
    return examples([[i] for i in range(6)], {"pos": pos, "label": list("abcdef")},
                    {"train": [0, 1, 2, 3], "test": [4, 5], "ood:len5": [5]})


def test_positioned_examples_keep_the_rows_with_a_position_and_reindex_the_splits():
    sub = positioned_examples(_examples(), "pos")
    assert sub.tokens == [[0], [3], [5]] and sub.columns["label"] == ["a", "d", "f"]
    assert sub.columns["pos"] == [3, 5, 4]
    assert sub.split("train").tolist() == [0, 1] and sub.split("test").tolist() == [2]
    assert sub.split("len5").tolist() == [2]
    full = examples([[1], [2]], {"pos": [0, 1]}, {"train": [0, 1]})
    assert positioned_examples(full, "pos") is None  # nothing to leave out


def test_an_emptied_split_makes_the_marker_not_applicable():
    ex = examples([[0], [1], [2]], {"pos": [None, None, 2]},
                  {"train": [0, 1], "test": [0], "ood:len5": [2]})
    sub = positioned_examples(ex, "pos")
    assert sub.split("train").size == 0 and sub.split("len5").tolist() == [0]
    assert missing_split(ProbeAccuracySpec(site="resid_post@0"), sub) == "train"
    assert missing_split(CapacitySpec(site="resid_post@0", split="test"), sub) == "test"
    assert missing_split(SimilaritySpec(site_a="embed", site_b="embed", split="len5"), sub) is None
    assert missing_split(CapacitySpec(site="resid_post@0", split="nope"), sub) is None


def test_which_kinds_read_the_capture_position():
    assert position_column("column:second_prim_position") == "second_prim_position"
    assert position_column("last") is None
    assert reads_capture_positions(ProbeAccuracySpec(site="resid_post@-1"))
    assert reads_capture_positions(SimilaritySpec(site_a="embed", site_b="embed"))
    assert not reads_capture_positions(HomomorphismErrorSpec(layer=3))  # its own states
    assert not reads_capture_positions(WeightNormSpec())
    assert np.asarray(_examples().split("train")).tolist() == [0, 1, 2, 3]
