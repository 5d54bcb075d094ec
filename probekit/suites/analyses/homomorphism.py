"""``[[homomorphism]]``: modifier and sequence homomorphism error per layer (An & Du 2026).

Reads the whole inputs of a SCAN-style split (``[data] prompt_only = false``) with their parse
columns, captures every block's states in one pass (:func:`probekit.homomorphism.capture_states`;
all tokens, so not the context's one-row-per-example store) and reports, per layer and
composition kind, [C]'s HE (mean over operator families of held-out MSE, bootstrap CI) and the
normalised ``1 - R^2`` (ours). ``parts = "separate"`` ([O]) reads the parts from separate
forward passes (:mod:`probekit.homomorphism.separate`) with one operator per modifier.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ...errors import ConfigError, DataError
from ...sites import site_label
from ..registry import register_analysis
from ..result import AnalysisResult

if TYPE_CHECKING:  # heavy imports happen inside the run function: validation stays fast
    from ...homomorphism import HEConfig, HEResult
    from ...testbeds.base import TaskDataset

PARSE_COLUMNS = ("prim_positions", "mod_positions", "modifiers", "part_spans")


@dataclass(frozen=True, kw_only=True)
class HomomorphismSpec:
    """``[[homomorphism]]`` keys (defaults = the authors' choices [C]).

    Attributes:
        split: examples whose inputs give the pairs ([C]: the training inputs).
        kinds: ``modifier`` (primitive + adjacent modifier) and/or ``sequence`` (``then``).
        families: operator families averaged into HE.
        solver: ``adam`` ([C]'s 50-epoch fit, default) or ``closed_form_ridge`` (exact least
            squares for affine/bilinear: 0 by construction for [C]'s linear target).
        parts: ``same_pass`` ([C]) or ``separate`` ([O]: parts from separate forward passes,
            one operator per modifier; pair with ``families = ["affine"]``,
            ``solver = "closed_form_ridge"`` and read the ``1 - R^2`` column).
        pooling: span pooling, ``mean`` [C] or ``last``.
        site: hook kind read at every block.
        train_fraction, shuffle, seed: operator fit/score split and seeds.
    """

    split: str = "train"
    kinds: tuple[Literal["modifier", "sequence"], ...] = ("modifier", "sequence")
    families: tuple[Literal["affine", "bilinear", "mlp"], ...] = ("affine", "bilinear", "mlp")
    solver: Literal["adam", "closed_form_ridge"] = "adam"
    parts: Literal["same_pass", "separate"] = "same_pass"
    pooling: Literal["mean", "last"] = "mean"
    site: str = "resid_post"
    train_fraction: float = 0.8
    shuffle: bool = False
    seed: int = 0


def parse_dataset(ctx: Any, split: str) -> TaskDataset:
    """The ``split``'s whole inputs with their SCAN parse columns, as a :class:`TaskDataset`."""
    from ...testbeds.base import TaskDataset

    if ctx.suite.data.prompt_only:
        raise ConfigError(
            f"{ctx.suite.source}: [[homomorphism]] reads whole inputs but [data] prompt_only = "
            "true keeps only each prompt; set [data] prompt_only = false"
        )
    ex = ctx.examples
    missing = [c for c in PARSE_COLUMNS if c not in ex.columns]
    if missing:
        raise DataError(
            f"{ctx.suite.source}: [[homomorphism]] needs the parse columns {missing} (have "
            f"{sorted(ex.columns)}); use a SCAN-style testbed ([data] task = \"scan\")"
        )
    idx = ex.split(split)
    n = len(idx)
    return TaskDataset(
        name=split, tokens=[ex.tokens[i] for i in idx], targets=[[] for _ in range(n)],
        target_positions=[[] for _ in range(n)],
        metadata={c: [ex.columns[c][i] for i in idx] for c in PARSE_COLUMNS},
    )


def measure_he(
    ctx: Any, split: str, kinds: tuple[str, ...], config: HEConfig
) -> tuple[tuple[int, ...], dict[str, HEResult]]:
    """``(layers, {kind: HEResult})``: HE of each composition kind on the ``split``'s inputs.

    Captures every block's ``config.site`` states in one pass
    (:func:`probekit.homomorphism.capture_states`) and fits the operators of ``config`` on the
    ``modifier`` (primitive + modifier) and/or ``sequence`` (``then``) pairs (An & Du 2026).
    Shared by ``[[homomorphism]]`` and the ``homomorphism_error`` claim kind.
    """
    from ...homomorphism import (
        capture_states,
        composition_he,
        modifier_he,
        modifier_pairs,
        separate_pass_vectors,
        sequence_he,
        sequence_pairs,
    )

    ds = parse_dataset(ctx, split)
    vocab = ctx.examples.vocab
    pad = vocab.pad_id if vocab is not None else 0
    states = capture_states(ctx.model, ds.tokens, site=config.site, pad_id=pad)
    results: dict[str, HEResult] = {}
    for kind in kinds:
        if config.parts == "separate":
            pairs = modifier_pairs(ds) if kind == "modifier" else sequence_pairs(ds)
            a, b, c, layers = separate_pass_vectors(
                ctx.model, ds.tokens, pairs, site=config.site, pooling=config.pooling,
                pad_id=pad, states=states,
            )
            results[kind] = composition_he(a, b, c, labels=pairs.label, layers=layers,
                                           kind=kind, config=config)
        elif kind == "modifier":
            results[kind] = modifier_he(states=states, pairs=modifier_pairs(ds), config=config)
        else:
            results[kind] = sequence_he(states=states, pairs=sequence_pairs(ds), config=config)
    return tuple(states.layers), results


@register_analysis("homomorphism", spec=HomomorphismSpec)
def run_homomorphism(spec: HomomorphismSpec, ctx: Any) -> AnalysisResult:
    """Modifier / sequence HE per layer with bootstrap CIs (An & Du 2026)."""
    from ...homomorphism import HEConfig
    from ...homomorphism.blocks import he_blocks
    from ...sites import Site

    cfg = HEConfig(
        families=tuple(spec.families), solver=spec.solver, parts=spec.parts,
        pooling=spec.pooling, site=spec.site, train_fraction=spec.train_fraction,
        shuffle=spec.shuffle, seed=spec.seed,
    )
    layers, results = measure_he(ctx, spec.split, tuple(spec.kinds), cfg)
    ctx.forward_passes += 1
    labels = [site_label(Site(layer, spec.site)) for layer in layers]
    blocks = tuple(he_blocks(results, labels, split=spec.split))
    return AnalysisResult(
        section="homomorphism",
        title="Homomorphism error (An & Du 2026)" + (
            "" if spec.parts == "same_pass" else ", parts from separate passes [O]"),
        data={k: r.to_dict() for k, r in results.items()},
        blocks=blocks,
    )
