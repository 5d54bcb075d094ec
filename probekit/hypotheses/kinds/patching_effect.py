"""``measure = "patching_effect"``: normalised denoising effect of patching one cell (Meng et al. 2022)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..measurement import Measurement
from ..registry import register_measurement


@dataclass(frozen=True, kw_only=True)
class PatchingEffectSpec:
    """Keys of a ``patching_effect`` claim (data: clean/corrupt rows paired by ``pair_column``).

    ``layer``, ``site_kind``: the patched site (``resid_pre@layer`` by default); ``window``: patch
    blocks ``layer .. layer + window - 1`` together (e.g. ``layer = 8``, ``window = 8``: blocks
    8-15; clipped at the last block); ``position``:
    ``"last"``, a token index, or ``"column:NAME"`` (per-pair index from the clean row, e.g. the
    subject's last token); ``answer_column``: each row's answer (a token id, or text of one
    token): the clean row's answer against the corrupted row's answer is the logit difference;
    ``answer_tokens``: ``"single"`` refuses a multi-token answer, ``"first"`` scores it by its
    first token (recorded in the claim's details); ``control_position``: the cell patched for
    ``greater_than_control``.
    """

    layer: int
    window: int = 1
    site_kind: str = "resid_pre"
    position: int | str = "last"
    control_position: int | str = 0
    answer_column: str = "answer"
    pair_column: str = "pair_id"
    role_column: str = "role"
    batch_size: int = 64
    answer_tokens: str = "single"


def _positions(rule: int | str, lengths: list[int], columns: dict, clean_idx) -> list[int]:
    from ...errors import ConfigError

    if isinstance(rule, int):
        out = [rule if rule >= 0 else n + rule for n in lengths]
    elif rule == "last":
        out = [n - 1 for n in lengths]
    elif rule.startswith("column:"):
        name = rule.split(":", 1)[1]
        if name not in columns:
            raise ConfigError(f"position column {name!r} not found; columns: {sorted(columns)}")
        out = [int(columns[name][i]) for i in clean_idx]
    else:
        raise ConfigError(f"position {rule!r}: use 'last', a token index or 'column:NAME'")
    bad = [(i, p) for i, (p, n) in enumerate(zip(out, lengths)) if not 0 <= p < n]
    if bad:
        raise ConfigError(f"position {rule!r} is outside pair {bad[0][0]} (index {bad[0][1]})")
    return out


def effect_measurement(
    spec: PatchingEffectSpec, ctx: Any, res: Any, clean: list, clean_idx: Any, *, control: bool,
    how: str,
) -> Measurement:
    """The normalised effect of ``spec``'s cell in a one-layer patching grid ``res``.

    Ratio of sums over pairs, bootstrapped over pairs; the control cell's per-pair values paired.
    """
    import numpy as np

    from ...errors import DataError
    from ...stats.bootstrap import bootstrap_indices

    ex = ctx.examples
    lengths = [len(t) for t in clean]
    rows = np.arange(len(clean))
    grid = res.per_pair[:, 0].double().numpy()  # (pair, pos)
    base, source = res.base.double().numpy(), res.source.double().numpy()
    pos = _positions(spec.position, lengths, ex.columns, clean_idx)
    gain, gap = grid[rows, pos] - base, source - base
    if not abs(gap.mean()) > 0:
        raise DataError("clean and corrupted runs have the same mean logit difference; the "
                        "normalised patching effect is undefined (choose contrasting pairs)")
    boot = bootstrap_indices(len(rows), ctx.stats.n_bootstrap, ctx.stats.seed)
    ctl = None
    if control:
        cpos = _positions(spec.control_position, lengths, ex.columns, clean_idx)
        ctl = (grid[rows, cpos] - base) / gap.mean()
    return Measurement(
        metric="normalised logit difference", values=gain / gap.mean(),
        estimate=float(gain.sum() / gap.sum()),
        resamples=gain[boot].sum(1) / gap[boot].sum(1), control=ctl, n=len(rows),
        unit="prompt pairs",
        method=f"{how} of {spec.site_kind}@{res.labels['layer'][0]} at position "
        f"{spec.position!r} (clean logit diff {source.mean():.3f}, corrupt {base.mean():.3f})",
        details={"answer_tokens": getattr(spec, "answer_tokens", "single"),
                 "clean_logit_diff": source.tolist(), "corrupt_logit_diff": base.tolist(),
                 "patched_logit_diff": grid[rows, pos].tolist(), "positions": pos},
    )


@register_measurement("patching_effect", spec=PatchingEffectSpec, control=True)
def patching_effect(spec: PatchingEffectSpec, ctx: Any, *, control: bool = False) -> Measurement:
    """``sum_p (m_patched - m_corrupt) / sum_p (m_clean - m_corrupt)`` over prompt pairs.

    ``m`` = logit(clean answer) - logit(corrupt answer) at the last token; the clean
    activation at (site, position) — at every block of the window — is patched into the
    corrupted run
    (:func:`probekit.circuits.activation_patching`, denoising). The ratio of sums is
    bootstrapped over pairs; per-pair values (scaled by the mean clean-corrupt gap) pair with the
    control cell's for ``greater_than_control``.
    """
    from ...circuits import activation_patching, patch_pairs

    clean, corrupt, metric, clean_idx = patch_pairs(spec, ctx)
    res = activation_patching(ctx.model, clean, corrupt, metric, kind=spec.site_kind,
                              by=("layer", "pos"), layers=[spec.layer], window=spec.window,
                              batch_size=spec.batch_size)
    return effect_measurement(spec, ctx, res, clean, clean_idx, control=control,
                              how="denoising patch")
