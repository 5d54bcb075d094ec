"""``measure = "bridge_entity_probe"``: is the bridge linearly decodable at r1? (Wang et al. 2024).

A multinomial logistic probe for the bridge entity, trained on block ``layer``'s output at the r1
position of the suite's training two-hop queries (those sharing an ``(h, r1)`` prefix with an
evaluated query dropped: their r1 state is identical), scored per query of ``split``
(:func:`probekit.kg.bridge_entity_probe`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...context import Context
from ..keys import two_hop_rows
from ..measurement import Measurement
from ..registry import register_measurement


@dataclass(frozen=True, kw_only=True)
class BridgeEntityProbeSpec:
    """Keys of a ``bridge_entity_probe`` claim.

    ``layer``: the block whose output is probed; ``split``: the evaluated queries (``"test"`` or
    an OOD split name); ``train_split``: where the probe's training queries come from;
    ``position``: the r1 position; ``bridge_column`` / ``entity_token`` as for
    ``bridge_entity_rank``.
    """

    layer: int
    split: str = "test"
    train_split: str = "train"
    position: int = 1
    bridge_column: str = "bridge"
    entity_token: str = "<e{}>"


@register_measurement("bridge_entity_probe", spec=BridgeEntityProbeSpec,
                      needs_testbed="a kg_composition task's two-hop query columns")
def bridge_entity_probe(spec: BridgeEntityProbeSpec, ctx: Context) -> Measurement:
    """Share of ``split`` queries whose bridge a linear probe at (``layer``, r1) predicts."""
    import numpy as np

    from ...kg import bridge_entity_probe as fit_probe
    from ...kg import entity_token_lookup, kg_column

    ex = ctx.examples
    bridges = kg_column(ex, spec.bridge_column, kind="bridge_entity_probe")
    token = entity_token_lookup(ex, spec.entity_token, kind="bridge_entity_probe")
    train = two_hop_rows(ctx, spec.train_split, bridges, column=spec.bridge_column, at_least=0)
    evaluated = two_hop_rows(ctx, spec.split, bridges, column=spec.bridge_column)
    res = fit_probe(ctx.model, [ex.tokens[i] for i in train], [token(bridges[i]) for i in train],
                    {"eval": [ex.tokens[i] for i in evaluated]},
                    {"eval": [token(bridges[i]) for i in evaluated]},
                    position=spec.position, layers=[spec.layer])
    return Measurement(
        metric="probe accuracy", values=res.correct["eval"][:, 0].astype(np.float64),
        unit=f"{spec.split} two-hop queries",
        method=f"logistic probe for the bridge at position {spec.position} after block "
        f"{spec.layer}, trained on {res.n_train} {spec.train_split!r} two-hop queries with unseen "
        f"(h, r1) prefixes ({res.n_classes} bridges)",
        details={"train_accuracy": res.train_accuracy[0], "n_train": res.n_train},
    )
