"""Part/composite pairs mined from parse metadata (An & Du 2026 [C]).

A pair is two token spans ``a`` and ``b`` of one example; its composite is ``(h(a) + h(b)) / 2``
where ``h(span)`` pools the span's token states [C]. Modifier pairs: a primitive immediately
followed by its modifier (``a = [i, i+1)``, ``b = [i+1, i+2)``; a noise token in between gives no
pair). Sequence pairs: consecutive parts of the input split at each primitive (columns
``prim_positions``, ``mod_positions``, ``modifiers`` and ``part_spans`` of
:func:`probekit.testbeds.scan.parse_metadata`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from jaxtyping import Int

from ..errors import DataError
from ..testbeds.base import TaskDataset

MODIFIER_COLUMNS = ("prim_positions", "mod_positions", "modifiers")
SEQUENCE_COLUMNS = ("part_spans",)


@dataclass(frozen=True, kw_only=True)
class PairIndex:
    """Pairs of token spans, one row per pair, in collection order (example, then position).

    Attributes:
        kind: ``"modifier"`` or ``"sequence"``.
        example: example index of each pair in the dataset the states come from.
        a_span, b_span: ``[start, end)`` token spans of the two parts (unpadded positions).
        label: the modifier (``"twice"``) or connective (``"then"``) of each pair.
    """

    kind: str
    example: Int[np.ndarray, " pair"]
    a_span: Int[np.ndarray, "pair 2"]
    b_span: Int[np.ndarray, "pair 2"]
    label: tuple[str, ...]

    def __post_init__(self) -> None:
        n = len(self.example)
        if self.a_span.shape != (n, 2) or self.b_span.shape != (n, 2) or len(self.label) != n:
            raise DataError(
                f"PairIndex: {n} examples but a_span {self.a_span.shape}, b_span "
                f"{self.b_span.shape}, {len(self.label)} labels; give one (start, end) row per pair"
            )
        for name, arr in (("example", self.example), ("a_span", self.a_span),
                          ("b_span", self.b_span)):
            if n and np.asarray(arr).dtype.kind not in "iu":
                raise DataError(f"PairIndex.{name} has dtype {np.asarray(arr).dtype}; example "
                                "indices and spans must be integers")
        if n and (np.asarray(self.example) < 0).any():
            raise DataError(f"PairIndex.example holds {int(np.min(self.example))}; example "
                            "indices must be >= 0 (a negative index would pick another example)")
        for name, span in (("a_span", self.a_span), ("b_span", self.b_span)):
            if n and ((span[:, 0] < 0).any() or (span[:, 1] <= span[:, 0]).any()):
                raise DataError(
                    f"PairIndex.{name} has an empty or negative span; need 0 <= start < end"
                )

    def __len__(self) -> int:
        return len(self.example)

    @property
    def groups(self) -> tuple[str, ...]:
        """Distinct labels in first-seen order."""
        return tuple(dict.fromkeys(self.label))

    def subset(self, idx: np.ndarray) -> PairIndex:
        """The pairs at ``idx`` (in that order)."""
        return PairIndex(
            kind=self.kind, example=self.example[idx], a_span=self.a_span[idx],
            b_span=self.b_span[idx], label=tuple(self.label[int(i)] for i in idx),
        )


def _need_columns(dataset: TaskDataset, columns: tuple[str, ...], what: str) -> None:
    missing = [c for c in columns if c not in dataset.metadata]
    if missing:
        raise DataError(
            f"dataset {dataset.name!r} lacks the parse column(s) {missing} needed for {what} "
            f"pairs (has {sorted(dataset.metadata)}); use a probekit.testbeds.scan split or add "
            "them as in probekit.testbeds.scan.parse_metadata"
        )


def _build(kind: str, rows: list[tuple[int, int, int, int, int, str]]) -> PairIndex:
    arr = np.asarray([r[:5] for r in rows], dtype=np.int64).reshape(-1, 5)
    return PairIndex(
        kind=kind, example=arr[:, 0], a_span=arr[:, 1:3], b_span=arr[:, 3:5],
        label=tuple(r[5] for r in rows),
    )


def modifier_pairs(dataset: TaskDataset) -> PairIndex:
    """Each primitive immediately followed by its modifier [C] (a = primitive, b = modifier)."""
    _need_columns(dataset, MODIFIER_COLUMNS, "modifier")
    md = dataset.metadata
    rows = []
    n_mod = 0
    for e, (prims, mods, names) in enumerate(
        zip(md["prim_positions"], md["mod_positions"], md["modifiers"])
    ):
        for p, m, name in zip(prims, mods, names):
            if m is None:
                continue
            n_mod += 1
            if m == p + 1:
                rows.append((e, p, p + 1, m, m + 1, str(name)))
    if not rows:
        raise DataError(
            f"dataset {dataset.name!r} has no primitive-modifier pairs: {len(dataset)} examples, "
            f"{n_mod} modified clauses, none with the modifier right after its primitive; use a "
            "split with modifiers (ScanConfig.modifiers) and fewer noise tokens"
        )
    return _build("modifier", rows)


def sequence_pairs(dataset: TaskDataset, *, connective: str = "then") -> PairIndex:
    """Consecutive parts ``(e1, e2)`` of each input split at its primitives [C]."""
    _need_columns(dataset, SEQUENCE_COLUMNS, "sequence")
    rows = []
    for e, parts in enumerate(dataset.metadata["part_spans"]):
        for (s1, t1), (s2, t2) in zip(parts[:-1], parts[1:]):
            rows.append((e, s1, t1, s2, t2, connective))
    if not rows:
        raise DataError(
            f"dataset {dataset.name!r} has no pairs of consecutive parts among {len(dataset)} "
            "examples (every input is a single part); use multi-clause commands "
            "(ScanConfig.train_clauses=(2,))"
        )
    return _build("sequence", rows)
