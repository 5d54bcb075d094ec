"""Train a probekit model on a testbed: AdamW, log-spaced evaluation, resumable checkpoints.

Output layout of ``train(task, model_config, train_config, out_dir)``::

    out_dir/run.json                      task name + task/model/train configs + vocab
    out_dir/history.json, history.csv     one record per evaluation (see History)
    out_dir/curves.png                    accuracy / loss vs step (log x)
    out_dir/checkpoints/step_0000100/     model.safetensors + config.json (probekit checkpoint,
                                          extra = vocab, task, configs, step, metrics) and
                                          optimizer.safetensors + optimizer.json

Loss: mean cross-entropy over all scored target tokens of the batch,
``L = (1/T) sum_{i,j} -log softmax(logits[i, target_positions[i][j]])[targets[i][j]]``.
Dropout (``TrainConfig.dropout``, e.g. An & Du 2026's 0.1) applies to the training steps' forward
passes only, through :func:`probekit.interventions.dropout`; weights a model builds frozen (the
sinusoidal ``W_pos`` of ``ModelConfig.positional_embedding_type="sinusoidal"``) are not
optimised. Determinism: on CPU two runs with the same configs give bit-identical weights; a run resumed from
its last checkpoint continues exactly like an uninterrupted one (stateless minibatch order and lr
schedule, optimizer state restored from the checkpoint).
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from ..capture import record_with_grad
from ..errors import ConfigError
from ..interventions.dropout import dropout, dropout_sites
from ..models.checkpoint import load_checkpoint, read_checkpoint_meta, save_checkpoint
from ..models.config import ModelConfig
from ..models.native import build_model
from ..models.protocol import HookedModel
from ..progress import progress_bar
from ..testbeds.base import IGNORE_INDEX, PaddedBatch, Task
from ..util.device import resolve_device
from ..util.threads import ThreadTuner
from .config import OPTIMISATION_FIELDS, TrainConfig
from .history import History, write_run_meta
from .loss_term import ForwardLossTerm, LossTerm, LossTermFactory, StepBatch, reads_forward
from .optim_state import load_optimizer, save_optimizer
from .schedule import batch_position, checkpoint_schedule, epoch_permutation, eval_schedule, lr_at

#: weights of the loss terms' modules, trained with the model but not part of it (e.g. the HE
#: regulariser's MLPs), keyed ``<term name>.<parameter>``
AUX_FILE = "aux.safetensors"
CHECKPOINTS = "checkpoints"
_STEP_DIR = re.compile(r"^step_(\d{7,})$")


def step_dir(out_dir: str | Path, step: int) -> Path:
    """Checkpoint directory of ``step``: ``<out_dir>/checkpoints/step_0001000``."""
    return Path(out_dir) / CHECKPOINTS / f"step_{step:07d}"


def list_checkpoints(out_dir: str | Path) -> list[tuple[int, Path]]:
    """Complete checkpoints of a run as (step, directory), ascending."""
    root = Path(out_dir) / CHECKPOINTS
    if not root.is_dir():
        return []
    found = []
    for d in root.iterdir():
        m = _STEP_DIR.match(d.name)
        if m and (d / "config.json").is_file() and (d / "optimizer.json").is_file():
            found.append((int(m.group(1)), d))
    return sorted(found)


def masked_loss_and_correct(
    logits: torch.Tensor, labels: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Mean CE over scored tokens, per-token correctness, and the row of each scored token.

    ``logits`` [batch, pos, vocab], ``labels`` [batch, pos] with IGNORE_INDEX where unscored.
    """
    mask = labels != IGNORE_INDEX
    sel = logits[mask]
    tgt = labels[mask]
    loss = F.cross_entropy(sel.float(), tgt)
    correct = sel.argmax(-1) == tgt
    rows = mask.nonzero()[:, 0]
    return loss, correct, rows


@torch.no_grad()
def evaluate(model: HookedModel, batch: PaddedBatch, *, batch_size: int = 4096) -> dict[str, float]:
    """``loss`` (mean CE per scored token), ``acc`` (exact match per example), ``token_acc``."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    tot_loss, n_tok, n_tok_ok, n_ex, n_ex_ok = 0.0, 0, 0, 0, 0
    for start in range(0, len(batch), batch_size):
        toks = batch.tokens[start : start + batch_size].to(device)
        labels = batch.labels[start : start + batch_size].to(device)
        loss, correct, rows = masked_loss_and_correct(model(toks), labels)
        wrong = torch.zeros(toks.shape[0], device=device).index_add_(0, rows, (~correct).float())
        k = int(correct.numel())
        tot_loss += float(loss) * k
        n_tok += k
        n_tok_ok += int(correct.sum())
        n_ex += toks.shape[0]
        n_ex_ok += int((wrong == 0).sum())
    if was_training:
        model.train()
    return {
        "loss": tot_loss / max(n_tok, 1),
        "acc": n_ex_ok / max(n_ex, 1),
        "token_acc": n_tok_ok / max(n_tok, 1),
    }


def _eval_batches(task: Task, cfg: TrainConfig) -> dict[str, PaddedBatch]:
    out = {}
    pad = task.vocab.pad_id
    for k, (name, ds) in enumerate(task.splits().items()):
        if len(ds) == 0:
            continue
        if cfg.eval_max_examples is not None and len(ds) > cfg.eval_max_examples:
            rng = np.random.default_rng([cfg.seed, 1_000_003, k])
            idx = np.sort(rng.choice(len(ds), size=cfg.eval_max_examples, replace=False))
            ds = ds.subset(idx.tolist())
        out[name] = ds.to_tensors(pad)
    return out


def _group_means(record: dict[str, Any], splits: list[str]) -> None:
    groups: dict[str, list[str]] = {}
    for s in splits:
        m = re.match(r"^(.*)_(\d+)$", s)
        if m:
            groups.setdefault(m.group(1), []).append(s)
    for prefix, members in groups.items():
        if len(members) < 2:
            continue
        for metric in ("loss", "acc", "token_acc"):
            vals = [record[f"{s}/{metric}"] for s in members]
            record[f"{prefix}/{metric}"] = float(np.mean(vals))


def _run_meta(task: Task, model_config: ModelConfig, cfg: TrainConfig) -> dict[str, Any]:
    return {
        "task": task.name,
        "task_config": dataclasses.asdict(task.config),
        "model_config": model_config.to_dict(),
        "train_config": cfg.to_dict(),
        "vocab": task.vocab.to_dict(),
    }


def _check_resumable(meta: dict[str, Any], saved: dict[str, Any], out_dir: Path) -> None:
    for key in ("task", "task_config", "model_config"):
        if json.loads(json.dumps(meta[key])) != saved[key]:
            raise ConfigError(
                f"{out_dir} holds a run with a different {key} ({saved[key]}); resume needs the "
                "same one. Use a new --out directory, or start over with --no-resume (resume=False)"
            )
    default = TrainConfig().to_dict()
    for f in OPTIMISATION_FIELDS:
        now = json.loads(json.dumps(meta["train_config"][f]))
        before = saved["train_config"].get(f, json.loads(json.dumps(default[f])))
        if now != before:
            raise ConfigError(
                f"{out_dir}: TrainConfig.{f}={now!r} differs from the checkpointed run "
                f"({before!r}); resuming would not be reproducible. Use a new "
                "--out directory, or start over with --no-resume (resume=False)"
            )


def _save(
    out_dir: Path, step: int, model: Any, opt: torch.optim.Optimizer, names: list[str],
    meta: dict[str, Any], model_config: ModelConfig, last: dict[str, Any] | None,
    terms: Sequence[LossTerm | ForwardLossTerm] = (),
) -> Path:
    final = step_dir(out_dir, step)
    tmp = final.with_name(f".{final.name}.tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    extra = {**meta, "step": step, "metrics": last or {}}
    save_checkpoint(model, model_config, tmp, extra=extra)
    save_optimizer(opt, names, tmp)
    if terms:
        aux = {f"{t.name}.{k}": v.contiguous() for t in terms for k, v in t.module.state_dict().items()}
        save_file(aux, str(tmp / AUX_FILE))
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    return final


def train(
    task: Task,
    model_config: ModelConfig | None = None,
    train_config: TrainConfig | None = None,
    out_dir: str | Path | None = None,
    *,
    progress: bool = True,
    resume: bool = True,
    plot: bool = True,
    loss_terms: Sequence[LossTermFactory] = (),
) -> History:
    """Train a fresh model (or resume the run in ``out_dir``) and return its :class:`History`.

    The loss is the cross-entropy plus ``w * term.loss(model, step)`` for each extra loss term,
    ``w`` from ``train_config.loss_term_weights()`` (:mod:`probekit.train.loss_term`); a term that
    reads the training forward pass (:class:`~probekit.train.loss_term.ForwardLossTerm`) gets its
    ``sites`` recorded during the cross-entropy forward and adds
    ``w * term.loss_from_forward(acts, batch, step)`` instead. Terms are added in the order given.

    Args:
        task: a testbed (:func:`probekit.testbeds.get_task`).
        model_config: architecture; default ``task.model_config()``. ``d_vocab`` must equal
            ``len(task.vocab)`` and ``n_ctx`` cover the longest sequence.
        train_config: optimisation and schedules; default ``TrainConfig()``.
        out_dir: where run.json, history, checkpoints and curves.png go (required).
        progress: show a tqdm bar.
        resume: continue from the last complete checkpoint in ``out_dir`` if there is one.
        plot: write ``curves.png`` at the end.
        loss_terms: factories of the extra loss terms ``train_config`` weights, exactly those
            (:func:`probekit.train.build.loss_terms` builds them from the config).
    """
    if out_dir is None:
        raise ConfigError("train() needs out_dir (a directory for checkpoints and history)")
    from .run_dir import check_run_dir

    check_run_dir(out_dir)  # a file, or a folder of the user's own files: refused, nothing written
    out_dir = Path(out_dir)
    run = _prepare_run(task, model_config, train_config, out_dir)
    begin = _start_or_resume(run, out_dir, resume)
    optimisation = _make_optimiser(run, begin, loss_terms)
    data = _training_data(task, run)
    _train_steps(task, run, begin, optimisation, data, out_dir, progress)
    _finish(task, begin, out_dir, plot)
    return begin.history


class _Run(NamedTuple):
    """Phase 1: the checked configs, the task's splits, the device and the run's metadata."""

    model_config: ModelConfig
    config: TrainConfig
    splits: dict[str, Any]
    device: torch.device
    meta: dict[str, Any]


class _Begin(NamedTuple):
    """Phase 2: where training starts: the step, its checkpoint (None: fresh), model, history."""

    step: int
    checkpoint: Path | None
    model: Any
    history: History


class _Optimisation(NamedTuple):
    """Phase 3: AdamW over the trainable weights and the loss terms' weights, by name."""

    optimiser: torch.optim.Optimizer
    names: list[str]
    params: list[torch.nn.Parameter]
    weights: dict[str, float]  # loss term -> its weight in the loss
    terms: list[LossTerm | ForwardLossTerm]


class _Data(NamedTuple):
    """Phase 4: the training set (on the device when full-batch), eval sets and schedules."""

    train: PaddedBatch
    n_train: int
    full: PaddedBatch | None  # the whole training set on the device (full-batch runs)
    evals: dict[str, PaddedBatch]  # split -> (at most eval_max_examples) examples
    eval_steps: set[int]
    checkpoint_steps: set[int]


class _Clock(NamedTuple):
    """Seconds of the run before this process (``elapsed0``) and this process's start."""

    elapsed0: float
    t0: float

    def elapsed(self) -> float:
        """Run time so far, rounded to ms (the history's ``elapsed_s``)."""
        return round(self.elapsed0 + time.perf_counter() - self.t0, 3)


def _prepare_run(
    task: Task, model_config: ModelConfig | None, train_config: TrainConfig | None, out_dir: Path
) -> _Run:
    """Phase 1: check the task against the configs, pick the device, create ``out_dir``."""
    mcfg = model_config or task.model_config()
    cfg = train_config or TrainConfig()
    splits = task.splits()
    if "train" not in splits or len(splits["train"]) == 0:
        raise ConfigError(f"task {task.name!r} has no training examples (splits: {list(splits)})")
    if mcfg.d_vocab != len(task.vocab):
        raise ConfigError(
            f"ModelConfig.d_vocab={mcfg.d_vocab} but task {task.name!r} has {len(task.vocab)} "
            "tokens; use task.model_config(...) or set d_vocab=len(task.vocab)"
        )
    longest = max(ds.max_len for ds in splits.values())
    if mcfg.n_ctx < longest:
        raise ConfigError(
            f"ModelConfig.n_ctx={mcfg.n_ctx} is shorter than the longest sequence ({longest}) "
            f"of task {task.name!r}; set n_ctx >= {longest}"
        )
    device = resolve_device(cfg.device)  # an unavailable device fails before out_dir exists
    out_dir.mkdir(parents=True, exist_ok=True)
    return _Run(mcfg, cfg, splits, device, _run_meta(task, mcfg, cfg))


def _start_or_resume(run: _Run, out_dir: Path, resume: bool) -> _Begin:
    """Phase 2: the last complete checkpoint in ``out_dir`` (checked resumable) or a fresh model."""
    ckpts = list_checkpoints(out_dir) if resume else []
    if ckpts:
        saved = read_checkpoint_meta(ckpts[-1][1])["extra"]
        _check_resumable(run.meta, saved, out_dir)
        start, ck_dir = ckpts[-1]
        model = load_checkpoint(ck_dir, device=run.device)
        try:
            history = History.read(out_dir).truncated(start)
        except FileNotFoundError:
            history = History()
    else:
        start, ck_dir = 0, None
        model = build_model(run.model_config, device=run.device)
        history = History()
    write_run_meta(out_dir, run.meta)  # with its sha256, checked on read
    return _Begin(start, ck_dir, model, history)


def _make_optimiser(
    run: _Run, begin: _Begin, loss_terms: Sequence[LossTermFactory]
) -> _Optimisation:
    """Phase 3: the loss terms and AdamW (its state restored from the checkpoint, if any)."""
    cfg, model = run.config, begin.model
    # frozen weights (e.g. sinusoidal W_pos) stay out of the optimiser
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    params = [p for _, p in model.named_parameters() if p.requires_grad]
    weights = cfg.loss_term_weights()
    terms = _build_terms(loss_terms, weights, model, run.device, begin.checkpoint)
    for term in terms:  # a term's parameters learn jointly, in the same optimiser
        names += [f"{term.name}.{n}" for n, _ in term.module.named_parameters()]
        params += list(term.module.parameters())
    opt = torch.optim.AdamW(
        params, lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps, weight_decay=cfg.weight_decay
    )
    if begin.checkpoint is not None:
        load_optimizer(opt, names, begin.checkpoint)
    return _Optimisation(opt, names, params, weights, terms)


def _training_data(task: Task, run: _Run) -> _Data:
    """Phase 4: training tensors, the eval sets and the eval / checkpoint steps."""
    cfg = run.config
    train_full = run.splits["train"].to_tensors(task.vocab.pad_id)
    n_train = len(train_full)
    evals = set(eval_schedule(cfg))
    ckpt_steps = set(checkpoint_schedule(cfg))
    eval_data = _eval_batches(task, cfg)
    full = train_full.index(torch.arange(n_train)) if cfg.batch_size is None else None
    if full is not None:
        full = PaddedBatch(full.tokens.to(run.device), full.labels.to(run.device))
    return _Data(train_full, n_train, full, eval_data, evals, ckpt_steps)


def _eval_record(
    step: int, clock: _Clock, batch_loss: float | None, model: Any, data: _Data,
    cfg: TrainConfig, history: History, out_dir: Path,
) -> dict[str, Any]:
    """Evaluate every split at ``step``, append the record to the history and write it."""
    split_names = list(data.evals)
    rec: dict[str, Any] = {
        "step": step,
        "elapsed_s": clock.elapsed(),
        "lr": lr_at(max(step, 1), cfg),
        "batch_loss": batch_loss,
    }
    for name in split_names:
        for k, v in evaluate(model, data.evals[name], batch_size=cfg.eval_batch_size).items():
            rec[f"{name}/{k}"] = v
    _group_means(rec, split_names)
    history.append(rec)
    history.write(out_dir)
    return rec


def _stop_reached(rec: dict[str, Any], cfg: TrainConfig) -> bool:
    """Whether ``cfg.stop_metric`` reached ``cfg.stop_threshold`` (never without a stop metric)."""
    if cfg.stop_metric is None:
        return False
    if cfg.stop_metric not in rec:
        raise ConfigError(
            f"TrainConfig.stop_metric={cfg.stop_metric!r} is not a history key; keys are "
            f"{sorted(rec)}"
        )
    return rec[cfg.stop_metric] >= cfg.stop_threshold


def _step_batch(
    step: int, data: _Data, cfg: TrainConfig, device: torch.device,
    perm_cache: tuple[int, np.ndarray] | None,
) -> tuple[StepBatch, tuple[int, np.ndarray] | None]:
    """The training batch of ``step`` (the epoch's permutation, cached) and the cache."""
    if data.full is not None:
        return StepBatch(data.full.tokens, data.full.labels, np.arange(data.n_train)), perm_cache
    epoch, sl = batch_position(step, data.n_train, cfg.batch_size)
    if perm_cache is None or perm_cache[0] != epoch:
        perm_cache = (epoch, epoch_permutation(data.n_train, cfg.seed, epoch))
    rows = perm_cache[1][sl]
    b = data.train.index(torch.from_numpy(rows))
    return StepBatch(b.tokens.to(device), b.labels.to(device), rows), perm_cache


def _step_loss(
    model: Any, batch: StepBatch, step: int, terms: Sequence[LossTerm | ForwardLossTerm],
    weights: dict[str, float],
) -> torch.Tensor:
    """``CE + sum_t w_t L_t`` of one step; the sites forward terms read are recorded once."""
    sites = list(dict.fromkeys(s for t in terms if reads_forward(t) for s in t.sites))
    record = record_with_grad(model, sites) if sites else nullcontext({})
    with record as acts:
        logits = model(batch.tokens)
    loss, _, _ = masked_loss_and_correct(logits, batch.labels)
    for term in terms:
        extra = (term.loss_from_forward(acts, batch, step) if reads_forward(term)
                 else term.loss(model, step))
        loss = loss + weights[term.name] * extra
    return loss


def _train_steps(
    task: Task, run: _Run, begin: _Begin, optimisation: _Optimisation, data: _Data,
    out_dir: Path, progress: bool,
) -> None:
    """Phase 5: the optimisation steps, with evaluations, checkpoints and the early stop."""
    cfg, device, meta, mcfg = run.config, run.device, run.meta, run.model_config
    model, history, start = begin.model, begin.history, begin.step
    opt, names, params = optimisation.optimiser, optimisation.names, optimisation.params
    weights, terms = optimisation.weights, optimisation.terms
    split_names = list(data.evals)
    clock = _Clock(history.records[-1]["elapsed_s"] if history.records else 0.0,
                   time.perf_counter())
    last = history.records[-1] if history.records else None
    batch_loss: float | None = None  # no step taken yet
    perm_cache: tuple[int, np.ndarray] | None = None
    dropout_step = _dropout_scope(model, cfg, device)
    step_threads = _step_threads(device)

    if start == 0 and not history.records:  # (a run killed after step 0 has its record)
        last = (_eval_record(0, clock, batch_loss, model, data, cfg, history, out_dir)
                if 0 in data.eval_steps else None)
        _save(out_dir, 0, model, opt, names, meta, mcfg, last, terms)
    stopped = last is not None and _stop_reached(last, cfg)
    bar = progress_bar(desc=task.name, total=cfg.steps, initial=start, unit="step", enabled=progress)
    model.train()
    for step in range(start + 1, cfg.steps + 1):
        if stopped:
            break
        batch, perm_cache = _step_batch(step, data, cfg, device, perm_cache)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, cfg)
        with step_threads(batch.tokens.numel()):  # forward, backward and update of the step
            with dropout_step(step):  # every training forward pass of the step, terms' included
                loss = _step_loss(model, batch, step, terms, weights)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
            opt.step()
        batch_loss = float(loss.detach())
        bar.update(1)
        if step in data.eval_steps or step == cfg.steps:
            last = _eval_record(step, clock, batch_loss, model, data, cfg, history, out_dir)
            bar.set_postfix(_postfix(last, split_names))
            stopped = _stop_reached(last, cfg)
        if step in data.checkpoint_steps or stopped:
            _save(out_dir, step, model, opt, names, meta, mcfg, last, terms)
    bar.close()


def _step_threads(device: torch.device) -> Callable[[int], AbstractContextManager]:
    """The CPU thread count of each training step, by :class:`~probekit.util.threads.ThreadTuner`.

    A step of these small models is hundreds of short OpenMP regions: beside one busy process on
    2 cores, 450 steps of the ``scan`` preset took 2.66x their quiet time on torch's 2 threads,
    1.38x on one thread and 1.66x with the tuner, which runs the count that is faster now
    (``python scripts/bench_load.py OUT --train 450``, docs/bench).
    Work is the batch's token count. On this box the trained weights are bit-identical under 1
    and 2 threads for every preset tried (tests/train/test_trainer_threads.py), so the choice,
    which depends on the load, does not change a cached run. Off the CPU: no tuning.
    """
    if device.type != "cpu":
        return lambda work: nullcontext()
    tuner = ThreadTuner()
    return lambda work: tuner.run(work=work)


def _finish(task: Task, begin: _Begin, out_dir: Path, plot: bool) -> None:
    """Phase 6: the curves plot (``curves.png``) and the model back in eval mode."""
    if plot and len(begin.history) > 1:
        from .plot import plot_history

        metric = getattr(task, "primary_metric", "acc")
        plot_history(begin.history, out_dir / "curves.png", metric=metric, title=task.name)
    begin.model.eval()


def _dropout_scope(
    model: Any, cfg: TrainConfig, device: torch.device
) -> Callable[[int], AbstractContextManager[None]]:
    """``scope(step)``: the training step's dropout (:func:`probekit.interventions.dropout`).

    The masks come from a generator seeded by ``(cfg.seed, step)``, so a resumed run draws the
    same masks as an uninterrupted one; ``cfg.dropout == 0`` attaches nothing.
    """
    if cfg.dropout == 0:
        return lambda step: nullcontext()
    sites = dropout_sites(int(model.cfg.n_layers), cfg.dropout_kinds)
    gen = torch.Generator(device=device)

    def scope(step: int) -> AbstractContextManager[None]:
        gen.manual_seed(int(np.random.default_rng([cfg.seed, 9_176_131, step]).integers(2**62)))
        return dropout(model, p=cfg.dropout, sites=sites, generator=gen)

    return scope


def _build_terms(
    factories: Sequence[LossTermFactory], weights: dict[str, float], model: Any,
    device: torch.device, ck_dir: Path | None,
) -> list[LossTerm | ForwardLossTerm]:
    """Build the loss terms, check they are the ones the config weights, restore their weights."""
    terms = [make(model, device) for make in factories]
    names = [t.name for t in terms]
    if sorted(names) != sorted(weights):
        raise ConfigError(
            f"the train config weights the loss terms {sorted(weights)} but loss_terms= supplies "
            f"{sorted(names)}; pass loss_terms=probekit.train.build.loss_terms(task, train_config)"
        )
    if terms and ck_dir is not None and (ck_dir / AUX_FILE).is_file():
        saved = load_file(str(ck_dir / AUX_FILE), device=str(device))
        for t in terms:
            own = {k[len(t.name) + 1:]: v for k, v in saved.items() if k.startswith(f"{t.name}.")}
            if not own and len(terms) == 1:  # checkpoints written before the terms were named
                own = saved
            t.module.load_state_dict(own)
    return terms


def _postfix(rec: dict[str, Any], splits: list[str]) -> dict[str, str]:
    out = {"loss": f"{rec['batch_loss']:.3g}"} if rec["batch_loss"] is not None else {}
    for s in splits[:4]:
        out[s] = f"{rec[f'{s}/acc']:.3f}"
    return out
