"""The ``ctx`` protocols: satisfied by the suite's context and by stand-ins, checked without side effects."""

from dataclasses import dataclass

import pytest
from jaxtyping import TypeCheckError

from probekit.context import Context, ExamplesView, RunContext, StatsView, SuiteView
from tests.conftest import write_tiny_suite
from tests.hypotheses.helpers import FakeContext

SUITE = """
[suite]
name = "ctx"

[model]
checkpoint = "ckpt"

[data]
file = "data.jsonl"
label = "planted"
train_split = "train"
test_split = "test"

[[probe]]
kind = "diffmeans"
"""


def test_the_suite_context_is_a_run_context_and_checking_it_loads_nothing(tmp_path):
    from probekit.suites import AnalysisContext, load_suite

    suite = load_suite(write_tiny_suite(tmp_path, SUITE, n=12, n_id=10) / "suite.toml")
    ctx = AnalysisContext(suite, progress=False, cache_dir=tmp_path / "cache")
    assert isinstance(ctx, Context) and isinstance(ctx, RunContext)
    # members are looked up statically: the lazy model and examples stay unloaded
    assert ctx._model is None and ctx._examples is None
    # the suite's own classes are what the context's protocols describe
    assert isinstance(ctx.suite, SuiteView) and isinstance(ctx.stats, StatsView)
    assert isinstance(ctx.examples, ExamplesView) and len(ctx.examples) == 10  # the 2 ood rows unused


def test_a_fake_context_is_a_context_but_not_a_run_context():
    ctx = FakeContext()
    assert isinstance(ctx, Context)
    assert not isinstance(ctx, RunContext)  # no device, cache_dir, forward_passes ...


def test_an_object_missing_a_member_is_refused_by_the_annotation_check():
    from probekit.circuits import patch_pairs

    @dataclass
    class NoExecutor:
        model: object = None
        examples: object = None
        stats: object = None
        suite: object = None

        def activations(self, sites=None):
            return {}

    assert not isinstance(NoExecutor(), Context)
    with pytest.raises(TypeCheckError, match="ctx"):  # names the parameter it refuses
        patch_pairs(None, NoExecutor())
