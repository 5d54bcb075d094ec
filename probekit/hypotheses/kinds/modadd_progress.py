"""Grokking progress measures of modular addition as claims (Nanda et al. 2023, §5.1).

Kinds (definitions in :mod:`probekit.circuits.progress_measures`), each on a probekit checkpoint of the
``modular_addition`` testbed (the ``[model]`` one, or ``checkpoint = "DIR"``); the train / held-out
pairs come from the checkpoint's recorded task config:

* ``restricted_loss``, ``excluded_loss``: per-pair loss of the restricted / excluded logits
  (units: pairs of ``split``; bootstrap over pairs); ``path = "neuron"`` (default: the paper's,
  key frequencies of the MLP neuron path only) or ``"logits"`` (the full logits projected);
* ``fourier_gini``: Gini of the Fourier-component norms of ``W_E`` or ``W_L = W_out W_U``
  (bootstrap over the embedding / neuron dimensions the norms are taken over);
* ``weight_norm``: total sum of squared weights (exact: no sampling unit, a degenerate CI);
* ``circuit_efficiency``: parameter norm per mean train logit margin (bootstrap over pairs);
* ``restricted_loss_lead``: over a checkpoint series, the step at which the held-out loss falls
  to ``loss_threshold`` minus the step at which the restricted loss does (> 0: the restricted
  loss falls first; bootstrap over pairs, the whole series resampled with the same pairs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..measurement import Measurement
from ..registry import register_measurement


def _checkpoint_dir(ctx: Any, checkpoint: str | None) -> Any:
    """The claim's checkpoint directory (relative to the file), else the ``[model]`` one."""
    from pathlib import Path

    from ...errors import NotApplicableError

    if checkpoint is not None:
        return ctx.suite.resolve(checkpoint)
    path = getattr(ctx.model, "probekit_checkpoint", None)
    if path is None:
        raise NotApplicableError("this measure needs a modular-addition checkpoint; the model is "
                                 "not a probekit checkpoint: give checkpoint = \"DIR\" or a "
                                 "[model] checkpoint / train spec")
    return Path(path)


def train_mask(checkpoint: Any) -> Any:
    """``(p, p)`` bool grid of the training pairs recorded in a checkpoint's task config."""
    import numpy as np

    from ...errors import NotApplicableError
    from ...models.checkpoint import read_checkpoint_meta
    from ...testbeds import get_task

    extra = read_checkpoint_meta(checkpoint).get("extra", {})
    if extra.get("task") != "modular_addition" or "task_config" not in extra:
        task = extra.get("task")
        raise NotApplicableError(
            f"{checkpoint} was trained on {'task ' + repr(task) if task else 'no recorded task'}"
            ", not the modular_addition testbed: the Fourier / progress measures are defined for "
            "modular addition only (train one with `probekit train modular_addition`)"
        )
    task = get_task("modular_addition", **extra["task_config"])
    train = task.splits()["train"]
    p = task.config.p
    mask = np.zeros((p, p), dtype=bool)
    mask[train.metadata["a"], train.metadata["b"]] = True
    return mask


def _split(name: str, mask: Any) -> Any:
    import numpy as np

    return {"all": np.ones_like(mask), "train": mask, "test": ~mask}[name]


def _grid(ctx: Any, checkpoint: str | None) -> tuple[Any, Any, Any]:
    """(model, logit grid, train mask) of the claim's checkpoint."""
    from ...circuits.progress_measures import modular_logit_grid
    from ...models import load_checkpoint

    path = _checkpoint_dir(ctx, checkpoint)
    model = ctx.model if checkpoint is None else load_checkpoint(path)
    mask = train_mask(path)
    return model, modular_logit_grid(model, mask.shape[0]), mask


def _keys(logits: Any, keys: tuple[int, ...] | None, n_keys: int) -> tuple[int, ...]:
    import numpy as np

    from ...circuits.progress_measures import sum_direction_power

    if keys is not None:
        return tuple(keys)
    power = sum_direction_power(logits)
    return tuple(int(k) for k in (np.argsort(-power[1:], kind="stable") + 1)[:n_keys])


@dataclass(frozen=True, kw_only=True)
class LogitAblationSpec:
    """Keys of a ``restricted_loss`` / ``excluded_loss`` claim.

    ``checkpoint``: a checkpoint directory (default: ``[model]``); ``keys``: the key frequencies
    (default: the ``n_keys`` with the most sum-direction power in this checkpoint's logits);
    ``split``: ``"all"`` pairs, ``"train"`` or ``"test"`` (held-out); ``path``: ``"neuron"``
    (Nanda et al.: project the MLP activations at ``=`` onto the key frequencies, times
    ``W_out W_U``, plus the mean logits) or ``"logits"`` (project the full logits, so the
    attention / direct paths' key components count too).
    """

    checkpoint: str | None = None
    keys: tuple[int, ...] | None = None
    n_keys: int = 5
    split: Literal["all", "train", "test"] = "all"
    path: Literal["neuron", "logits"] = "neuron"


def _ablation(spec: LogitAblationSpec, ctx: Any, which: str) -> Measurement:
    from ...circuits.progress_measures import ablated_logits, modular_pair_loss, neuron_path

    model, logits, mask = _grid(ctx, spec.checkpoint)
    keys = _keys(logits, spec.keys, spec.n_keys)
    neurons = neuron_path(model, mask.shape[0]) if spec.path == "neuron" else None
    ablated = ablated_logits(logits, keys, which=which, path=spec.path, neurons=neurons)
    loss = modular_pair_loss(ablated)[_split(spec.split, mask)]
    full = modular_pair_loss(logits)[_split(spec.split, mask)]
    what = "neuron path" if spec.path == "neuron" else "full logits"
    return Measurement(
        metric=f"{which} loss", values=loss, unit=f"{spec.split} pairs",
        method=f"cross-entropy of the {which} logits ({what}; key frequencies {list(keys)}; "
        f"Nanda et al. 2023) over {loss.size} {spec.split} pairs; full-logit loss "
        f"{full.mean():.4g}",
        details={"keys": list(keys), "path": spec.path, "full_loss": float(full.mean())},
    )


@register_measurement("restricted_loss", spec=LogitAblationSpec)
def restricted_loss(spec: LogitAblationSpec, ctx: Any) -> Measurement:
    """Loss of the logits restricted to the constant + key sum directions (per pair)."""
    return _ablation(spec, ctx, "restricted")


@register_measurement("excluded_loss", spec=LogitAblationSpec)
def excluded_loss(spec: LogitAblationSpec, ctx: Any) -> Measurement:
    """Loss of the logits with the key sum directions removed (per pair; Nanda: train split)."""
    return _ablation(spec, ctx, "excluded")


@dataclass(frozen=True, kw_only=True)
class FourierGiniSpec:
    """Keys of a ``fourier_gini`` claim: ``source`` ``"embed"`` (``W_E``) or ``"neuron_logit"``."""

    source: Literal["embed", "neuron_logit"] = "embed"
    checkpoint: str | None = None


@register_measurement("fourier_gini", spec=FourierGiniSpec)
def fourier_gini(spec: FourierGiniSpec, ctx: Any) -> Measurement:
    """Gini of the ``p`` Fourier-component norms; norms recomputed on resampled dimensions."""
    import numpy as np

    from ...circuits.fourier import fourier_basis
    from ...circuits.progress_measures import gini
    from ...models import load_checkpoint
    from ...stats.bootstrap import bootstrap_indices

    path = _checkpoint_dir(ctx, spec.checkpoint)
    model = ctx.model if spec.checkpoint is None else load_checkpoint(path)
    p = train_mask(path).shape[0]
    if spec.source == "embed":
        w = model.W_E.detach().double().cpu().numpy()[:p]  # (p, d_model)
    else:
        w = (model.W_out[0].detach().double() @ model.W_U[:, :p].detach().double()).cpu().numpy().T
    sq = (fourier_basis(p) @ w) ** 2  # (component, dim)
    boot = bootstrap_indices(sq.shape[1], ctx.stats.n_bootstrap, ctx.stats.seed)
    counts = np.stack([np.bincount(b, minlength=sq.shape[1]) for b in boot]).astype(np.float64)
    reps = np.array([gini(np.sqrt(sq @ c)) for c in counts])
    return Measurement(
        metric=f"Gini of {spec.source} Fourier norms", estimate=gini(np.sqrt(sq.sum(1))),
        resamples=reps, n=int(sq.shape[1]),
        unit="embedding dimensions" if spec.source == "embed" else "MLP neurons",
        method=f"Gini (Hurley & Rickard 2009) of the {p} Fourier-component L2 norms of "
        f"{'W_E' if spec.source == 'embed' else 'W_L = W_out W_U'} (Nanda et al. 2023 §5.1)",
    )


@dataclass(frozen=True, kw_only=True)
class WeightNormSpec:
    """Keys of a ``weight_norm`` claim (``checkpoint``: default ``[model]``)."""

    checkpoint: str | None = None


@register_measurement("weight_norm", spec=WeightNormSpec)
def weight_norm(spec: WeightNormSpec, ctx: Any) -> Measurement:
    """Total sum of squared weights: exact, so its CI is the point (no sampling unit)."""
    import numpy as np

    from ...circuits.progress_measures import sum_squared_weights
    from ...models import load_checkpoint

    model = ctx.model if spec.checkpoint is None else load_checkpoint(
        _checkpoint_dir(ctx, spec.checkpoint))
    value = sum_squared_weights(model.parameters())
    return Measurement(
        metric="sum of squared weights", estimate=value,
        resamples=np.full(ctx.stats.n_bootstrap, value), n=1, unit="model",
        method="sum of squares of every parameter (Nanda et al. 2023 §5.1); exact, no resampling",
    )


@dataclass(frozen=True, kw_only=True)
class CircuitEfficiencySpec:
    """Keys of a ``circuit_efficiency`` claim: margins over ``split`` pairs (default train)."""

    checkpoint: str | None = None
    split: Literal["all", "train", "test"] = "train"


@register_measurement("circuit_efficiency", spec=CircuitEfficiencySpec)
def circuit_efficiency(spec: CircuitEfficiencySpec, ctx: Any) -> Measurement:
    """``||theta||_2 / mean logit margin`` (Varma et al. 2023; lower = more efficient)."""
    import numpy as np

    from ...circuits.progress_measures import logit_margin, sum_squared_weights
    from ...errors import NotApplicableError
    from ...stats.bootstrap import bootstrap_indices

    model, logits, mask = _grid(ctx, spec.checkpoint)
    margin = logit_margin(logits)[_split(spec.split, mask)]
    norm = float(np.sqrt(sum_squared_weights(model.parameters())))
    if margin.mean() <= 0:  # e.g. an early checkpoint of a population: undefined, not an error
        raise NotApplicableError(f"mean {spec.split} logit margin is {margin.mean():.3g} <= 0: the "
                                 "model does not fit these pairs, so norm per margin is undefined")
    boot = margin[bootstrap_indices(margin.size, ctx.stats.n_bootstrap, ctx.stats.seed)].mean(1)
    return Measurement(
        metric="parameter norm per logit margin", estimate=norm / float(margin.mean()),
        resamples=norm / np.maximum(boot, 1e-12), n=int(margin.size), unit=f"{spec.split} pairs",
        method=f"||theta||_2 = {norm:.4g} over the mean {spec.split} logit margin "
        f"{margin.mean():.4g} (Varma et al. 2023 circuit efficiency, per checkpoint)",
        details={"param_norm": norm, "mean_margin": float(margin.mean())},
    )


@dataclass(frozen=True, kw_only=True)
class RestrictedLeadSpec:
    """Keys of a ``restricted_loss_lead`` claim.

    ``checkpoints``: ``"run"`` (default: every checkpoint of the training run the ``[model]``
    checkpoint belongs to, e.g. a ``[model.train]`` run in the cache) or a glob of checkpoint
    directories (relative to the file) forming one training run; ``loss_threshold``: the loss (nats) whose first crossing defines each curve's
    drop (linear interpolation between checkpoints); ``keys`` / ``n_keys``: key frequencies
    (default: top ``n_keys`` of the last checkpoint, fixed over the series);
    ``restricted_split``: pairs the restricted loss averages over (default all; the authors'
    training-time curve uses the held-out pairs, ``"test"``); ``path``: ``"neuron"`` (Nanda et
    al.'s restricted loss, default) or ``"logits"`` (full-logit projection).
    """

    checkpoints: str = "run"
    loss_threshold: float = 1.0
    keys: tuple[int, ...] | None = None
    n_keys: int = 5
    restricted_split: Literal["all", "train", "test"] = "all"
    path: Literal["neuron", "logits"] = "neuron"


def _series_dirs(ctx: Any, pattern: str) -> list[tuple[int, Any]]:
    import glob
    import re
    from pathlib import Path

    from ...errors import ConfigError
    from ...models.checkpoint import read_checkpoint_meta

    if pattern == "run":
        model_dir = _checkpoint_dir(ctx, None)
        train_mask(model_dir)  # not applicable to another task: say so before globbing a series
        root = model_dir.parent / "step_*"
    else:
        root = ctx.suite.resolve(pattern)
    found = sorted(Path(p) for p in glob.glob(str(root)) if (Path(p) / "config.json").is_file())
    if len(found) < 2:
        raise ConfigError(f"checkpoints = {pattern!r} matched {len(found)} checkpoint "
                          f"director{'y' if len(found) == 1 else 'ies'} under {root}; a series "
                          "needs >= 2")
    out = []
    for d in found:
        step = read_checkpoint_meta(d).get("extra", {}).get("step")
        if step is None:
            m = re.search(r"(\d+)$", d.name)
            if m is None:
                raise ConfigError(f"{d}: no step in its config.json or name (step_0001000)")
            step = int(m.group(1))
        out.append((int(step), d))
    return sorted(out)


@register_measurement("restricted_loss_lead", spec=RestrictedLeadSpec)
def restricted_loss_lead(spec: RestrictedLeadSpec, ctx: Any) -> Measurement:
    """Steps by which the restricted loss reaches ``loss_threshold`` before the held-out loss.

    Both curves are means over pairs (restricted: ``restricted_split``; held-out: the test
    pairs); the bootstrap resamples pairs once and recomputes both crossing steps over the
    whole series. A resample whose curve never crosses counts as crossing at the last step.
    """
    import numpy as np

    from ...circuits.progress_measures import crossing_step, progress_measures
    from ...errors import DataError
    from ...stats.bootstrap import bootstrap_indices

    dirs = _series_dirs(ctx, spec.checkpoints)
    mask = train_mask(dirs[-1][1])
    series = progress_measures(dirs, train_mask=mask, keys=spec.keys, n_keys=spec.n_keys,
                               restricted_split=spec.restricted_split, path=spec.path,
                               executor=ctx.executor)
    steps = series.steps
    t = spec.loss_threshold
    r_cross = crossing_step(steps, series.curve("restricted_loss"), t)
    t_cross = crossing_step(steps, series.curve("test_loss"), t)
    if not np.isfinite(r_cross) or not np.isfinite(t_cross):
        raise DataError(
            f"over steps {steps[0]}..{steps[-1]} the restricted loss crosses {t:g} at {r_cross} "
            f"and the held-out loss at {t_cross}: a curve never falls to loss_threshold; raise "
            "it or extend the series"
        )
    flat = mask.ravel()
    r_units = _split(spec.restricted_split, mask).ravel()
    R = np.stack([pt.restricted_pair_loss.ravel() for pt in series.points])  # (ckpt, pair)
    T = np.stack([pt.pair_loss.ravel() for pt in series.points])
    boot = bootstrap_indices(flat.size, ctx.stats.n_bootstrap, ctx.stats.seed)
    reps = []
    for b in boot:
        c = np.bincount(b, minlength=flat.size).astype(np.float64)
        cr, ct = c * r_units, c * ~flat
        rc = crossing_step(steps, R @ cr / cr.sum(), t)
        tc = crossing_step(steps, T @ ct / ct.sum(), t)
        reps.append(min(tc, steps[-1]) - min(rc, steps[-1]))
    from ...circuits.blocks import progress_plots

    plot, gini_plot = progress_plots(series, threshold=t)
    return Measurement(
        metric="lead (steps)", estimate=float(t_cross - r_cross), resamples=np.asarray(reps),
        n=int(flat.size), unit="pairs",
        method=f"restricted loss ({spec.path} path, {spec.restricted_split} pairs) reaches {t:g} at step "
        f"{r_cross:.0f}, held-out loss at step {t_cross:.0f}, over {len(steps)} checkpoints "
        f"(steps {steps[0]}..{steps[-1]}; Nanda et al. 2023 §5.1)",
        details={"restricted_step": r_cross, "test_step": t_cross, **series.to_dict()},
        blocks=(plot, gini_plot),
    )
