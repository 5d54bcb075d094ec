"""Two-hop knowledge-graph composition: bridge entities (Wang et al. 2024, arXiv 2405.15071).

Analyses specific to the ``kg_composition`` testbed: the logit lens of the bridge entity and the
answer, a linear bridge probe per block (:class:`probekit.probes.LogisticProbe`) and causal
tracing with counterfactual queries (:mod:`.bridge`, built on the generic
:mod:`probekit.circuits`), and the task's entities as tokens (:mod:`.entities`). A testbed row of
``docs/architecture.md``: it may use the method packages; the generic :mod:`probekit.circuits`
never imports it. Guide: ``docs/circuits.md``.
"""

from .bridge import BridgeEntityAnalysis as BridgeEntityAnalysis
from .bridge import BridgeEntityLens as BridgeEntityLens
from .bridge import BridgeProbeResult as BridgeProbeResult
from .bridge import bridge_entity_analysis as bridge_entity_analysis
from .bridge import bridge_entity_lens as bridge_entity_lens
from .bridge import bridge_entity_probe as bridge_entity_probe
from .bridge import bridge_entity_tracing as bridge_entity_tracing
from .bridge import counterfactual_queries as counterfactual_queries
from .entities import entity_token_lookup as entity_token_lookup
from .entities import kg_column as kg_column
