"""``[[similarity]]``: layer x layer representational similarity and checkpoint drift.

A heatmap of every pair of sites of the suite's model (CKA, Procrustes, SVCCA or PWCCA from
:func:`probekit.similarity.layer_similarity`), optionally against a second checkpoint
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
from typing import TYPE_CHECKING, Any, Literal

from ...context import RunContext
from ...report.blocks import Text
from ...sites import site_label
from ..registry import register_analysis
from ..result import AnalysisResult
from ..spec import SuiteError

if TYPE_CHECKING:
    from ...capture import Site

__all__ = ["CheckpointActs", "SimilaritySpec", "capture_checkpoint", "run_similarity"]


@dataclass(frozen=True, kw_only=True)
class SimilaritySpec:
    """One ``[[similarity]]`` table.

    Attributes:
        measure: ``"cka"``, ``"procrustes"`` (angular distance), ``"svcca"`` or ``"pwcca"``.
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

    measure: Literal["cka", "procrustes", "svcca", "pwcca"] = "cka"
    kernel: Literal["linear", "rbf"] = "linear"
    debiased: bool = False
    split: str = "all"
    sites: tuple[str, ...] = ()
    compare_checkpoint: str | None = None
    checkpoints: tuple[str, ...] = ()
    drift_sites: tuple[str, ...] = ()
    batch_size: int | None = None


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


def _accuracy_keys(metrics: list[dict[str, Any]]) -> list[str]:
    keys = [k for k in (metrics[0] if metrics else {}) if k.endswith("/acc")]
    return [k for k in keys if all(isinstance(m.get(k), (int, float)) for m in metrics)]


@register_analysis("similarity", spec=SimilaritySpec)
def run_similarity(spec: SimilaritySpec, ctx: RunContext) -> AnalysisResult:
    """Layer x layer similarity heatmap(s) and the checkpoint-drift curve of one table."""
    import numpy as np

    from ...similarity import checkpoint_drift, layer_similarity
    from ...similarity.blocks import drift_blocks
    from ...similarity.blocks import similarity_heatmap as _heatmap

    suite, ex = ctx.suite, ctx.examples
    idx = np.arange(len(ex.tokens)) if spec.split == "all" else ex.split(spec.split)
    sites = _sites(spec.sites, ctx.default_sites())
    opts = {"measure": spec.measure, "kernel": spec.kernel, "debiased": spec.debiased,
            "batch_size": spec.batch_size}
    acts = ctx.activations(sites)
    names = [s.name for s in sites]
    within = layer_similarity([acts[s][idx] for s in sites], labels_a=names, **opts)
    what = f"{within.measure} over {within.n} examples (split {spec.split!r})"
    blocks: list[Any] = [
        Text(text=f"Representational similarity of every pair of sites: {what}. "
                  + ("Lower is more similar (0 = equal up to rotation and scale)."
                     if spec.measure == "procrustes" else "1 = identical up to rotation and scale.")),
        _heatmap(within, f"site x site {within.measure}", "site", "site"),
    ]
    data: dict[str, Any] = {
        "measure": within.measure, "n": within.n, "split": spec.split, "sites": names,
        "matrix": within.values.tolist(),
    }
    warnings: list[str] = []
    items: list[CheckpointActs] = []
    drift_sites = _sites(spec.drift_sites, sites) if spec.checkpoints else []
    checkpoints = _resolve_checkpoints(suite, spec.checkpoints)
    if spec.checkpoints and len(checkpoints) < 2:
        raise SuiteError(f"{suite.source}: [similarity] checkpoints resolves to {checkpoints}; "
                         "the drift curve needs at least 2 checkpoints")
    other = (str(Path(suite.resolve(spec.compare_checkpoint)).resolve())
             if spec.compare_checkpoint else None)
    for path in checkpoints + ([other] if other else []):
        wanted = drift_sites if path != other else sites
        items.append(CheckpointActs(suite=suite, checkpoint=path, cache_dir=str(ctx.cache_dir),
                                    sites=tuple(s.name for s in wanted)))
    captured = ctx.executor.map(capture_checkpoint, items, desc="checkpoints") if items else []
    from ...fingerprint import dataset_fingerprint

    mine = dataset_fingerprint(ex.tokens)
    for item, got in zip(items, captured):
        if got["data"] != mine:
            raise SuiteError(
                f"{suite.source}: [similarity] checkpoint {item.checkpoint} sees different "
                "examples than [model] (its task or vocabulary differs); compare checkpoints "
                "of the same task"
            )
    if other:
        acts_b = captured[-1]["acts"]
        between = layer_similarity([acts[s][idx] for s in sites], [acts_b[n][idx] for n in names],
                                   labels_a=names, labels_b=names, **opts)
        blocks.append(_heatmap(between, f"{within.measure}: this model (rows) vs "
                                        f"{Path(other).name} (columns)", "this model", "other"))
        data["compare"] = {"checkpoint": spec.compare_checkpoint, "matrix": between.values.tolist()}
    if checkpoints:
        series = captured[: len(checkpoints)]
        steps = [c["step"] for c in series]
        x_labels = tuple(str(s) if s is not None else Path(p).name for s, p in zip(steps, checkpoints))
        drifts = {
            s.name: checkpoint_drift([c["acts"][s.name][idx] for c in series], labels=x_labels, **opts)
            for s in drift_sites
        }
        acc_keys = _accuracy_keys([c["metrics"] for c in series])
        blocks.extend(drift_blocks(
            {site_label(s): drifts[s.name] for s in drift_sites}, x_labels,
            measure=within.measure,
            metrics={k: [float(c["metrics"][k]) for c in series] for k in acc_keys},
            xlabel="training step" if all(s is not None for s in steps) else "checkpoint",
            ylim=None if spec.measure == "procrustes" else (0.0, 1.02),
        ))
        data["drift"] = {
            "checkpoints": [Path(p).name for p in checkpoints], "patterns": list(spec.checkpoints),
            "steps": steps,
            "sites": {n: d.to_columns() for n, d in drifts.items()},
            "metrics": [c["metrics"] for c in series],
        }
    return AnalysisResult(section="similarity", title=f"Representational similarity ({within.measure})",
                          data=data, hypotheses=(), blocks=tuple(blocks), warnings=tuple(warnings))
