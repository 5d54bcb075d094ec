"""``[[similarity]]``: layer x layer representational similarity and checkpoint drift.

A heatmap of every pair of sites of the suite's model (CKA, Procrustes, SVCCA, PWCCA or RSA
from :func:`probekit.similarity.layer_similarity`), optionally against a second checkpoint
(``compare_checkpoint``), and a drift curve over a checkpoint series (``checkpoints``): the
similarity of each checkpoint's representation to the final one and to the previous one
(:func:`probekit.similarity.checkpoint_drift`), e.g. during grokking. Every checkpoint's
activations come from the same examples and ``[capture]`` rule, each captured once into the
activation cache by an executor task.
"""

from __future__ import annotations

import dataclasses
import glob
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from ...context import RunContext
from ...sites import site_label
from ...util.constraints import Distinct, Ge, NonEmpty, Validated
from ..registry import register_analysis
from ..result import AnalysisResult
from ..spec import SuiteError

if TYPE_CHECKING:
    from ...capture import Site

__all__ = ["CheckpointActs", "LayerSimilaritySpec", "capture_checkpoint", "run_similarity"]


@dataclass(frozen=True, kw_only=True)
class LayerSimilaritySpec(Validated):
    """One ``[[similarity]]`` table.

    Attributes:
        measure: ``"cka"``, ``"procrustes"`` (angular distance), ``"svcca"``, ``"pwcca"`` or
            ``"rsa"`` (Spearman of correlation RDMs): a built-in
            :class:`~probekit.similarity.SimilarityMeasure` (the choices are spelled here so
            that validating a suite imports no torch).
        kernel: CKA kernel, ``"linear"`` or ``"rbf"`` (RBF: at most 4096 examples unless
            ``batch_size`` is set).
        debiased: CKA with the unbiased HSIC estimator (Nguyen et al. 2021).
        split: examples compared: ``"all"``, ``"train"``, ``"test"`` or an OOD split name.
        sites: sites of the heatmap (default: the ``[capture]`` sites).
        compare_checkpoint: a second model's checkpoint directory (relative to the suite) for
            a between-model heatmap (rows: this model, columns: the other).
        checkpoints: checkpoint directories or globs (``"runs/x/checkpoints/step_*"``, sorted)
            in training order for the drift curve; the last one is "final".
        drift_sites: sites of the drift curve (default: ``sites``).
        batch_size: minibatch CKA over consecutive batches of this many examples (Nguyen et
            al. 2021; for RBF on more than 4096 examples).
    """

    measure: Literal["cka", "procrustes", "svcca", "pwcca", "rsa"] = "cka"
    kernel: Literal["linear", "rbf"] = "linear"
    debiased: bool = False
    split: Annotated[str, NonEmpty(hint='"all" or a split name')] = "all"
    sites: Annotated[tuple[str, ...], Distinct()] = ()
    compare_checkpoint: str | None = None
    checkpoints: Annotated[tuple[str, ...], Distinct()] = ()
    drift_sites: Annotated[tuple[str, ...], Distinct()] = ()
    batch_size: Annotated[int | None, Ge(1, hint="examples per minibatch, or unset")] = None


#: the name before issue 58 (two classes were called ``SimilaritySpec``); kept for old imports
SimilaritySpec = LayerSimilaritySpec


@dataclass(frozen=True, kw_only=True)
class CheckpointActs:
    """Capture ``sites`` of one checkpoint on the suite's examples (a picklable executor task)."""

    suite: Any
    checkpoint: str
    sites: tuple[str, ...]
    cache_dir: str

# one colour per drift site (accuracy curves are black / grey)
def capture_checkpoint(task: CheckpointActs) -> dict[str, Any]:
    """Activations ``{site name: (example, d)}`` of ``task.checkpoint`` plus its step/metrics."""
    from ...capture import Site
    from ...fingerprint import dataset_fingerprint
    from ..context import AnalysisContext
    from ..spec import ModelSpec

    suite = dataclasses.replace(task.suite, model=ModelSpec(checkpoint=task.checkpoint))
    ctx = AnalysisContext(suite, progress=False, cache_dir=task.cache_dir)
    acts = ctx.activations([Site.parse(s) for s in task.sites])
    config = Path(task.checkpoint) / "config.json"
    extra = json.loads(config.read_text()).get("extra", {}) if config.is_file() else {}
    return {
        "data": dataset_fingerprint(ctx.examples.tokens),
        "acts": {s.name: a for s, a in acts.items()},
        "step": extra.get("step"),
        "metrics": extra.get("metrics", {}),
    }


def _resolve_checkpoints(suite: Any, patterns: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for pattern in patterns:
        path = str(Path(suite.resolve(pattern)).resolve())  # absolute: re-resolved per task
        matches = sorted(glob.glob(path)) if glob.has_magic(path) else [path]
        matches = [m for m in matches if Path(m).is_dir()]
        if not matches:
            raise SuiteError(
                f"{suite.source}: [similarity] checkpoints entry {pattern!r} matches no "
                f"checkpoint directory (looked for {path})"
            )
        out.extend(matches)
    return out


def _sites(spec_sites: tuple[str, ...], default: list[Site]) -> list[Site]:
    from ...capture import Site

    return [Site.parse(s) for s in spec_sites] if spec_sites else list(default)


def _checkpoint_reps(
    spec: LayerSimilaritySpec, ctx: RunContext, sites: list[Site], drift_sites: list[Site],
) -> tuple[list[Any], Any]:
    """``(series, other)``: the drift checkpoints' and the compared checkpoint's activations.

    Each checkpoint is captured on the suite's examples by one executor task.
    """
    from ...fingerprint import dataset_fingerprint
    from ...similarity import CheckpointReps

    suite = ctx.suite
    checkpoints = _resolve_checkpoints(suite, spec.checkpoints)
    if spec.checkpoints and len(checkpoints) < 2:
        raise SuiteError(f"{suite.source}: [similarity] checkpoints resolves to {checkpoints}; "
                         "the drift curve needs at least 2 checkpoints")
    other = (str(Path(suite.resolve(spec.compare_checkpoint)).resolve())
             if spec.compare_checkpoint else None)
    items = [CheckpointActs(suite=suite, checkpoint=path, cache_dir=str(ctx.cache_dir),
                            sites=tuple(s.name for s in (drift_sites if path != other else sites)))
             for path in checkpoints + ([other] if other else [])]
    captured = ctx.executor.map(capture_checkpoint, items, desc="checkpoints") if items else []
    mine = dataset_fingerprint(ctx.examples.tokens)
    for item, got in zip(items, captured):
        if got["data"] != mine:
            raise SuiteError(
                f"{suite.source}: [similarity] checkpoint {item.checkpoint} sees different "
                "examples than [model] (its task or vocabulary differs); compare checkpoints "
                "of the same task"
            )
    reps = [CheckpointReps(path=item.checkpoint, acts=got["acts"], step=got["step"],
                           metrics=got["metrics"]) for item, got in zip(items, captured)]
    return reps[: len(checkpoints)], (reps[-1] if other else None)


@register_analysis("similarity", spec=LayerSimilaritySpec)
def run_similarity(spec: LayerSimilaritySpec, ctx: RunContext) -> AnalysisResult:
    """Layer x layer similarity heatmap(s) and the checkpoint-drift curve of one table."""
    import numpy as np

    from ...similarity import SimilarityConfig, similarity_section

    ex = ctx.examples
    idx = np.arange(len(ex.tokens)) if spec.split == "all" else ex.split(spec.split)
    sites = _sites(spec.sites, ctx.default_sites())
    drift_sites = _sites(spec.drift_sites, sites) if spec.checkpoints else []
    series, other = _checkpoint_reps(spec, ctx, sites, drift_sites)
    acts = ctx.activations(sites)
    res = similarity_section(
        [acts[s] for s in sites], [s.name for s in sites], idx, split=spec.split,
        config=SimilarityConfig(measure=spec.measure, kernel=spec.kernel, debiased=spec.debiased,
                                batch_size=spec.batch_size),
        other=other, other_name=spec.compare_checkpoint,
        series=series, drift=[(s.name, site_label(s)) for s in drift_sites],
        patterns=spec.checkpoints,
    )
    return AnalysisResult(section="similarity",
                          title=f"Representational similarity ({res.data['measure']})",
                          data=res.data, hypotheses=(), blocks=res.blocks, warnings=())
