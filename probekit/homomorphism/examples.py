"""HE on a suite's examples: the SCAN parse columns, the split's inputs, every composition kind.

The suite entry point of the method package, shared by the ``[[homomorphism]]`` analysis and the
``homomorphism_error`` measurement kind: :func:`parse_dataset` turns a split of the context's
examples (whole inputs, ``[data] prompt_only = false``) into a
:class:`~probekit.testbeds.base.TaskDataset` with its parse columns, and :func:`measure_he` fits
and scores the operators of each composition kind at every block (An & Du 2026).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..context import Context
from ..errors import ConfigError, DataError

if TYPE_CHECKING:
    from ..testbeds.base import TaskDataset
    from .config import HEConfig
    from .result import HEResult

__all__ = ["PARSE_COLUMNS", "measure_he", "parse_dataset"]

#: Columns of a SCAN-style example that locate its parts (primitives, modifiers, clauses).
PARSE_COLUMNS = ("prim_positions", "mod_positions", "modifiers", "part_spans")


def parse_dataset(ctx: Context, split: str) -> TaskDataset:
    """The ``split``'s whole inputs with their SCAN parse columns, as a :class:`TaskDataset`.

    Raises:
        ConfigError: the suite keeps only each prompt (``[data] prompt_only = true``).
        DataError: the examples lack a parse column (not a SCAN-style testbed).
    """
    from ..testbeds.base import TaskDataset

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
    ctx: Context, split: str, kinds: tuple[str, ...], config: HEConfig
) -> tuple[tuple[int, ...], dict[str, HEResult]]:
    """``(layers, {kind: HEResult})``: HE of each composition kind on the ``split``'s inputs.

    Captures every block's ``config.site`` states in one pass (:func:`capture_states`) and fits
    the operators of ``config`` on the ``modifier`` (primitive + modifier) and/or ``sequence``
    (``then``) pairs (An & Du 2026); ``config.parts = "separate"`` reads the parts from separate
    forward passes (:func:`separate_pass_vectors`, one operator per group).
    """
    from .api import modifier_he, sequence_he
    from .measure import composition_he
    from .pairs import modifier_pairs, sequence_pairs
    from .separate import separate_pass_vectors
    from .states import capture_states

    ds = parse_dataset(ctx, split)
    vocab = ctx.examples.vocab
    pad = vocab.pad_id if vocab is not None else 0
    states = capture_states(ctx.model, ds.tokens, site=config.site, batch_size=config.batch_size,
                            pad_id=pad)
    results: dict[str, HEResult] = {}
    for kind in kinds:
        if config.parts == "separate":
            pairs = modifier_pairs(ds) if kind == "modifier" else sequence_pairs(ds)
            a, b, c, layers = separate_pass_vectors(
                ctx.model, ds.tokens, pairs, site=config.site, pooling=config.pooling,
                batch_size=config.batch_size, pad_id=pad, states=states,
            )
            results[kind] = composition_he(a, b, c, labels=pairs.label, layers=layers,
                                           kind=kind, config=config)
        elif kind == "modifier":
            results[kind] = modifier_he(states=states, pairs=modifier_pairs(ds), config=config)
        else:
            results[kind] = sequence_he(states=states, pairs=sequence_pairs(ds), config=config)
    return tuple(states.layers), results
