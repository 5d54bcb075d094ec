"""``measure = "fourier_key_share"``: share of Fourier power in the top-k frequencies (Nanda et al. 2023).

:func:`probekit.grokking.fourier_share.key_share_resamples` of the logits' or the embedding's
Fourier power (:func:`probekit.grokking.fourier.frequency_power`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from ...context import Context
from ...errors import ConfigError, KeyedValueError
from ...util.constraints import Ge, Validated
from ..measurement import Measurement
from ..registry import register_measurement


@dataclass(frozen=True, kw_only=True)
class FourierKeyShareSpec(Validated):
    """Keys of a ``fourier_key_share`` claim.

    ``p``: the modulus (residue tokens ``0..p-1``); ``k``: number of key frequencies;
    ``source``: ``"logits"`` (last-token logits over the answers ``0..p-1`` of the ``split``
    examples, Fourier-transformed over the answer; units = examples) or ``"embedding"`` (rows
    ``0..p-1`` of ``W_E``, transformed over the token; units = embedding dimensions).
    """

    p: Annotated[int, Ge(3, hint="an odd modulus, e.g. 53")]
    k: Annotated[int, Ge(1)] = 5
    source: Literal["logits", "embedding"] = "logits"
    split: str = "test"
    batch_size: Annotated[int, Ge(1)] = 512

    def __post_init__(self) -> None:
        """The declared rules, then ``k`` within p's non-constant frequencies (the run's rule)."""
        super().__post_init__()
        from ...util.list_option import check_top_k

        try:
            check_top_k(self.k, (self.p - 1) // 2, what="the non-constant frequencies")
        except ConfigError as err:
            raise KeyedValueError("k", f"k = {self.k} with p = {self.p}: {err}") from None


@register_measurement("fourier_key_share", spec=FourierKeyShareSpec,
                      needs_testbed="the Fourier key frequencies of a modular-addition checkpoint")
def fourier_key_share(spec: FourierKeyShareSpec, ctx: Context) -> Measurement:
    """Fraction of the non-constant Fourier power in the ``k`` strongest frequencies.

    The key frequencies are chosen on all units, then the share ``sum_keys P / sum_{f>0} P`` is
    bootstrapped over units (examples or embedding dimensions) with the keys held fixed.
    """
    from ...grokking.fourier import frequency_power
    from ...grokking.fourier_share import key_share_plot, key_share_resamples, residue_logits
    from ...grokking.modadd_checkpoints import check_modadd_model

    check_modadd_model(ctx.model, kind="fourier_key_share", p=spec.p)
    if spec.source == "embedding":
        w = ctx.model.W_E.detach().double().cpu().numpy()[: spec.p]  # (p, d)
        units, unit = frequency_power(w, spec.p).T, "embedding dimensions"
    else:
        tokens = [ctx.examples.tokens[i] for i in ctx.examples.split(spec.split)]
        logits = residue_logits(ctx.model, tokens, spec.p, batch_size=spec.batch_size)
        units, unit = frequency_power(logits.T, spec.p).T, f"{spec.split} examples"  # (n, freq)
    res = key_share_resamples(units, spec.k, n_bootstrap=ctx.stats.n_bootstrap, seed=ctx.stats.seed)
    return Measurement(
        metric=f"top-{spec.k} frequency share", estimate=res.share, resamples=res.resamples,
        n=res.n, unit=unit,
        method=f"Fourier power of the {spec.source} over residues 0..{spec.p - 1}; key "
        f"frequencies {res.keys.tolist()} chosen on all {res.n} {unit}, share bootstrapped "
        "over them",
        details={"key_frequencies": res.keys.tolist(), "power_share": res.power_share.tolist(),
                 "source": spec.source},
        blocks=(key_share_plot(res, source=spec.source),),
    )
