"""Run a probe suite: model -> examples -> capture -> layer sweeps -> hypothesis tests."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..capture import Site, all_layers, collect_activations
from ..capture.fingerprint import model_fingerprint, model_id
from ..capture.positions import parse_position_rule
from ..executor import InProcessExecutor, get_executor
from ..probes import probe_permutation_test, selectivity_sweep, sweep_layers
from ..progress import progress_bar
from ..stats import adjust_pvalues
from ..util.cache import cache_dir
from ..util.device import resolve_device
from ..util.io import atomic_write_text, sha256_bytes
from .check import check_suite_data
from .spec import Suite, SuiteError, TrainSpec


@dataclass
class Examples:
    """Probe examples: token sequences, per-example columns and the probe splits."""

    tokens: list[list[int]]
    columns: dict[str, list[Any]]
    splits: dict[str, np.ndarray]  # "train", "test", "ood:<name>" -> example indices
    vocab: Any = None


@dataclass
class SuiteResult:
    suite: Suite
    model: dict[str, Any]
    data: dict[str, Any]
    probes: list[dict[str, Any]] = field(default_factory=list)
    hypotheses: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite.to_dict(),
            "model": self.model,
            "data": self.data,
            "probes": self.probes,
            "hypotheses": self.hypotheses,
        }


def trained_checkpoint(spec: TrainSpec, *, progress: bool = True) -> Path:
    """Train ``spec`` once into the user cache (keyed by the spec) and return the last checkpoint."""
    from ..train import presets
    from ..train.trainer import list_checkpoints, train

    key = sha256_bytes(json.dumps(vars(spec), sort_keys=True, default=str).encode())[:12]
    out = cache_dir("runs", f"{spec.preset}-{key}")
    preset = presets.get_preset(spec.preset)
    task = _training_task(spec)
    mcfg = task.model_config()
    overrides = {**preset.model_overrides, **spec.model_options, "seed": spec.seed}
    mcfg = type(mcfg)(**{**mcfg.to_dict(), **overrides})
    tcfg = preset.train
    changes: dict[str, Any] = {"seed": spec.seed}
    if spec.steps is not None:
        changes["steps"] = spec.steps
    tcfg = type(tcfg).from_dict({**tcfg.to_dict(), **changes})
    done = out / "DONE"
    if not done.exists():
        train(task, mcfg, tcfg, out, progress=progress)
        atomic_write_text(done, "ok\n")
    return list_checkpoints(out)[-1][1]


def load_suite_model(suite: Suite, *, progress: bool = True) -> Any:
    """The suite's model on ``resolve_device(suite.device)``."""
    from ..models import load_checkpoint, load_model

    spec = suite.model
    device = resolve_device(suite.device)
    if spec.name is not None:
        target = suite.resolve(spec.name)
        name = str(target) if target is not None and target.exists() else spec.name
        kwargs = {"compatibility_mode": True} if spec.compatibility_mode else {}
        return load_model(name, device=device, **kwargs)
    if spec.checkpoint is not None:
        return load_checkpoint(suite.resolve(spec.checkpoint), device=device)
    return load_checkpoint(trained_checkpoint(spec.train, progress=progress), device=device)


def _training_task(spec: TrainSpec) -> Any:
    from ..testbeds import get_task
    from ..train import presets

    preset = presets.get_preset(spec.preset)
    return get_task(preset.task, **{**preset.task_overrides, **spec.task_options, "seed": spec.seed})


def _data_task(suite: Suite) -> Any:
    """The task named in [data], else the model's training task ([model.train], or the task a
    probekit checkpoint records in its config.json)."""
    from ..models.checkpoint import read_checkpoint_meta
    from ..testbeds import get_task, task_from_dict

    if suite.data.task is not None:
        return get_task(suite.data.task, **suite.data.task_options)
    if suite.model.train is not None:
        return _training_task(suite.model.train)
    extra = read_checkpoint_meta(suite.resolve(suite.model.checkpoint))["extra"]
    if "task" not in extra:
        raise SuiteError(
            f"{suite.source}: [data] names no task or file and checkpoint "
            f"{suite.model.checkpoint} records no training task; add [data] task = \"...\""
        )
    return task_from_dict(extra["task"], {**extra["task_config"], **suite.data.task_options})


def _subsample(n: int, cap: int | None, rng: np.random.Generator) -> np.ndarray:
    idx = np.arange(n)
    if cap is not None and n > cap:
        idx = np.sort(rng.choice(n, size=cap, replace=False))
    return idx


def build_examples(suite: Suite, model: Any, *, progress: bool = False) -> Examples:
    """Collect the examples of every split the suite names, with labels and metadata."""
    data = suite.data
    rng = np.random.default_rng(data.seed)
    wanted = [data.train_split, data.test_split, *data.ood_splits]
    per_split: dict[str, tuple[list[list[int]], dict[str, list[Any]]]] = {}
    vocab = None
    if data.task is not None or data.file is None:
        task = _data_task(suite)
        vocab = task.vocab
        splits = task.splits()
        for name in dict.fromkeys(wanted):
            if name not in splits:
                raise SuiteError(
                    f"{suite.source}: [data] split {name!r} is not a split of the task; "
                    f"it has {sorted(splits)}"
                )
            ds = splits[name]
            idx = _subsample(len(ds), data.max_per_split, rng)
            toks = [ds.prompt(i) if data.prompt_only else ds.tokens[i] for i in idx]
            cols = {k: [v[i] for i in idx] for k, v in ds.metadata.items()}
            per_split[name] = (toks, cols)
    else:
        rows = [r.data for r in check_suite_data(suite) or []]
        for name in dict.fromkeys(wanted):
            chosen = [r for r in rows if r.get(data.split_column) == name]
            if not chosen:
                have = sorted({str(r.get(data.split_column)) for r in rows})
                raise SuiteError(
                    f"{suite.source}: [data] split {name!r} has no rows in {data.file} "
                    f"(column {data.split_column!r} holds {have})"
                )
            idx = _subsample(len(chosen), data.max_per_split, rng)
            chosen = [chosen[i] for i in idx]
            toks = []
            for r in chosen:
                if "tokens" in r:
                    toks.append([int(t) for t in r["tokens"]])
                else:
                    toks.append(model.to_tokens(r["text"], prepend_bos=data.prepend_bos)[0].tolist())
            keys = sorted({k for r in chosen for k in r} - {"tokens"})
            per_split[name] = (toks, {k: [r.get(k) for r in chosen] for k in keys})

    tokens: list[list[int]] = []
    columns: dict[str, list[Any]] = {}
    split_idx: dict[str, np.ndarray] = {}
    for name, (toks, cols) in per_split.items():
        start = len(tokens)
        tokens.extend(toks)
        for k, v in cols.items():
            columns.setdefault(k, [None] * start).extend(v)
        for k in columns:
            if len(columns[k]) < len(tokens):
                columns[k].extend([None] * (len(tokens) - len(columns[k])))
        split_idx[name] = np.arange(start, len(tokens))
    if data.answer_column is not None:
        from ..probes.answers import answer_correctness

        if data.answer_column not in columns:
            raise SuiteError(
                f"{suite.source}: [data] answer_column {data.answer_column!r} not in {sorted(columns)}"
            )
        texts, correct = answer_correctness(
            model, tokens, [str(g) for g in columns[data.answer_column]],
            max_new_tokens=data.max_new_tokens, progress=progress,
        )
        columns["greedy_answer"] = texts
        columns["correct"] = [int(c) for c in correct]
    labels_needed = {data.label, *(p.label for p in suite.probes if p.label)}
    for label in labels_needed:
        if label not in columns:
            raise SuiteError(
                f"{suite.source}: label column {label!r} not found; available columns: {sorted(columns)}"
            )
    out: dict[str, np.ndarray] = {}
    if data.train_split == data.test_split:
        idx = rng.permutation(split_idx[data.train_split])
        n_test = max(1, int(round(data.holdout_fraction * len(idx))))
        out["test"], out["train"] = np.sort(idx[:n_test]), np.sort(idx[n_test:])
    else:
        out["train"], out["test"] = split_idx[data.train_split], split_idx[data.test_split]
    for name in data.ood_splits:
        out[f"ood:{name}"] = split_idx[name]
    return Examples(tokens=tokens, columns=columns, splits=out, vocab=vocab)


def _sites(suite: Suite, model: Any) -> list[Site]:
    cap = suite.capture
    sites: list[Site] = [Site(None, "embed")] if cap.include_embed else []
    if list(cap.sites) == ["all"]:
        sites += list(all_layers(model, cap.kind))
    else:
        sites += [Site.parse(s) for s in cap.sites]
    return sites


def _positions(suite: Suite, ex: Examples) -> Any:
    try:
        return parse_position_rule(suite.capture.positions, ex.columns)
    except (KeyError, ValueError) as err:
        raise SuiteError(f"{suite.source}: [capture] {err.args[0]}") from None


def _chance(kind: str, y: np.ndarray) -> float:
    if kind == "logistic":
        _, counts = np.unique(y, return_counts=True)
        return float(counts.max() / counts.sum())
    return 0.5 if kind == "diffmeans" else 0.0


@dataclass(frozen=True, kw_only=True)
class PermutationTask:
    """One site's permutation test (labels shuffled, probe refit): a picklable executor task."""

    X: torch.Tensor
    y: np.ndarray
    train_idx: np.ndarray
    test_idx: np.ndarray
    probe: str
    C: float | None
    n_permutations: int
    random_state: int
    device: str


def permutation_p_value(task: PermutationTask) -> float:
    """p-value of ``task`` (:func:`probekit.probes.probe_permutation_test`)."""
    return float(probe_permutation_test(
        task.X, task.y, train_idx=task.train_idx, test_idx=task.test_idx, probe=task.probe,
        C=task.C, n_permutations=task.n_permutations, random_state=task.random_state,
        device=task.device,
    ).p_value)


def run_suite(
    suite: Suite, *, progress: bool = True, model: Any = None, executor: Any = None
) -> SuiteResult:
    """Run every probe of ``suite``; returns numbers only (see :mod:`probekit.report`).

    ``executor`` (a name or :class:`probekit.executor.Executor`; default in-process with
    progress bars when ``progress``) runs the independent tasks (per-site permutation tests).
    """
    executor = get_executor(executor) if executor is not None else InProcessExecutor(
        progress=None if progress else False
    )
    check_suite_data(suite)  # FILE:LINE errors before the model loads
    if model is None:
        model = load_suite_model(suite, progress=progress)
    ex = build_examples(suite, model, progress=progress)
    if suite.capture.positions == "all":
        raise SuiteError(f"{suite.source}: [capture] positions='all' is not supported by probe suites (one row per example)")
    sites = _sites(suite, model)
    acts = collect_activations(
        model, ex.tokens, sites, positions=_positions(suite, ex),
        batch_size=suite.capture.batch_size, padding_side=suite.capture.padding_side,
        dtype=suite.capture.dtype, progress=progress,
    )
    X = {s.name: acts[s].float().reshape(acts[s].shape[0], -1) for s in sites}
    st = suite.stats
    ood_idx = {k.split(":", 1)[1]: v for k, v in ex.splits.items() if k.startswith("ood:")}
    result = SuiteResult(
        suite=suite,
        model={
            "id": model_id(model),
            "fingerprint": model_fingerprint(model),
            "n_layers": int(model.cfg.n_layers),
            "d_model": int(model.cfg.d_model),
            "compatibility_mode": bool(getattr(model, "probekit_compatibility_mode", False)),
        },
        data={
            "n_examples": len(ex.tokens),
            "splits": {k: int(len(v)) for k, v in ex.splits.items()},
            "sites": [s.name for s in sites],
            "positions": suite.capture.positions,
            "probe_device": str(resolve_device(suite.device)),
        },
    )
    for p in progress_bar(suite.probes, desc="probes", unit="probe", enabled=progress):
        if p.kind == "correctness":
            entry, hypothesis = _correctness_entry(p, suite, ex, X)
            result.probes.append(entry)
            result.hypotheses.append(hypothesis)
            continue
        label = p.label or suite.data.label
        y_raw = ex.columns[label]
        y = np.asarray(y_raw, dtype=float if p.kind == "ridge" else object)
        if p.kind != "ridge":
            y = np.asarray([str(v) for v in y_raw])
        kw = dict(
            train_idx=ex.splits["train"], test_idx=ex.splits["test"], ood_idx=ood_idx, probe=p.kind,
            Cs=p.Cs, alphas=p.alphas, cv=p.cv, n_bootstrap=st.n_bootstrap,
            confidence_level=st.confidence_level, random_state=st.seed, device=suite.device,
        )
        entry: dict[str, Any] = {"kind": p.kind, "label": label}
        if p.control and p.kind != "ridge":
            column = suite.data.control_column or label
            types = [str(v) for v in ex.columns[column]]
            sel = selectivity_sweep(X, y, types, **kw)
            sweep = sel.task
            entry["control"] = sel.control.to_dict()
            entry["selectivity"] = [float(v) for v in sel.selectivity]
            entry["control_column"] = column
        else:
            sweep = sweep_layers(X, y, **kw)
        entry["sweep"] = sweep.to_dict()
        entry["chance"] = _chance(p.kind, y[ex.splits["test"]])
        if p.permutation_test and p.kind in ("logistic", "diffmeans"):
            best = sweep.best_row
            rows = range(len(sweep.sites)) if st.permutation_sites == "all" else [best]
            tasks = [
                PermutationTask(
                    X=X[sweep.sites[row]], y=y, train_idx=ex.splits["train"],
                    test_idx=ex.splits["test"], probe=p.kind,
                    C=float(sweep.hyperparameter[row]) if p.kind == "logistic" else None,
                    n_permutations=st.n_permutations, random_state=st.seed + row,
                    device=suite.device,
                )
                for row in rows
            ]
            pvals = executor.map(permutation_p_value, tasks, desc="permutation tests")
            if st.permutation_sites == "all":
                adj = adjust_pvalues(np.asarray(pvals), method=st.correction, alpha=st.alpha).p_adjusted
                entry["permutation"] = {
                    "n_permutations": st.n_permutations,
                    "p_values": pvals,
                    "p_adjusted": adj.tolist(),
                    "correction": st.correction,
                    "min_achievable_adjusted_p": float(
                        min(1.0, len(pvals) / (1 + st.n_permutations))
                        if st.correction == "holm" else 1 / (1 + st.n_permutations)
                    ),
                }
                entry["n_significant_sites"] = int((adj <= st.alpha).sum())
                floor = entry["permutation"]["min_achievable_adjusted_p"]
                if floor > st.alpha:
                    need = int(np.ceil(len(pvals) / st.alpha))
                    entry.setdefault("warnings", []).append(
                        f"with {st.n_permutations} permutations and {len(pvals)} sites the smallest "
                        f"achievable {st.correction}-adjusted p is {floor:.3g} > alpha={st.alpha}: no "
                        f"site can be significant in the per-site family (the headline test at the "
                        f"validation-selected site is a single test, uncorrected); set [stats] "
                        f"n_permutations >= {need}"
                    )
                p_best = float(pvals[best])
            else:
                p_best = float(pvals[0])
            # The tested site was chosen by CV on the training split only, so its test-split
            # permutation p-value is a single pre-specified test and needs no correction; the
            # per-site family (entry["permutation"]) is corrected.
            result.hypotheses.append({
                "name": f"{label!r} is linearly decodable ({p.kind}) at the validation-selected site",
                "site": sweep.sites[best],
                "statistic": float(sweep.test[best]),
                "metric": sweep.metric,
                "effect_size": float(sweep.test[best]) - entry["chance"],
                "effect_size_name": f"{sweep.metric} - chance",
                "p_value": p_best,
                "method": f"permutation test, {st.n_permutations} label shuffles with refits",
                "verdict": "reject H0 (decodable)" if p_best <= st.alpha else "do not reject H0",
                "alpha": st.alpha,
            })
        for name, gaps in sweep.ood_gap.items():
            best = sweep.best_row
            entry.setdefault("ood_gap_at_best", {})[name] = float(gaps[best])
        result.probes.append(entry)
    return result


def _correctness_entry(p: Any, suite: Suite, ex: Examples, X: dict[str, torch.Tensor]) -> tuple[dict, dict]:
    """In-advance correctness probe (No Answer Needed, arXiv 2509.10625): diff-of-means
    direction on raw last-token activations, k-fold ID AUROC per site, fold-wise OOD AUROC;
    presented in the sweep layout (val = test = mean CV AUROC, CI = mean +- 1.96 SE over folds)."""
    from ..probes import correctness_probe

    st = suite.stats
    label = p.label or suite.data.label
    names = list(X)
    widths = {X[n].shape[1] for n in names}
    if len(widths) != 1:
        raise SuiteError(f"{suite.source}: correctness probes need sites of one width, got {sorted(widths)}")
    stack = torch.stack([X[n] for n in names])
    y_all = np.asarray(ex.columns[label]).astype(int).astype(bool)
    ids = np.concatenate([ex.splits["train"], ex.splits["test"]])
    ood = {k.split(":", 1)[1]: (stack[:, v], y_all[v]) for k, v in ex.splits.items() if k.startswith("ood:")}
    res = correctness_probe(stack[:, ids], y_all[ids], n_folds=p.cv, ood=ood, random_state=st.seed)
    se = lambda sd: 1.96 * np.asarray(sd) / np.sqrt(p.cv)  # noqa: E731
    rows = []
    for i, name in enumerate(names):
        m, s = float(res.auroc_mean[i]), float(se(res.auroc_std)[i])
        row = {"site": name, "layer": i, "hyperparameter": float("nan"), "train": float("nan"),
               "val": m, "test": m, "test_ci": [m - s, m + s]}
        for k in ood:
            om, os_ = float(res.ood_mean[k][i]), float(se(res.ood_std[k])[i])
            row[f"ood/{k}"], row[f"ood_ci/{k}"], row[f"gap/{k}"] = om, [om - os_, om + os_], m - om
        rows.append(row)
    best = int(res.best_layer)
    entry = {
        "kind": "correctness", "label": label, "chance": 0.5,
        "n_correct": int(res.n_correct), "n_incorrect": int(res.n_incorrect),
        "sweep": {"probe": "correctness", "metric": "auroc", "confidence_level": 0.95,
                  "n_bootstrap": 0, "rows": rows,
                  "best": {"site": names[best], "layer": best, "test": rows[best]["test"]}},
        "ood_gap_at_best": {k: rows[best][f"gap/{k}"] for k in ood},
    }
    test = probe_permutation_test(
        X[names[best]], y_all.astype(int), train_idx=ex.splits["train"], test_idx=ex.splits["test"],
        probe="diffmeans", n_permutations=st.n_permutations, random_state=st.seed,
    )
    hypothesis = {
        "name": "the answer's correctness is predictable from the question alone",
        "site": names[best], "statistic": float(test.statistic), "metric": "auroc (train->test)",
        "effect_size": float(test.statistic) - 0.5, "effect_size_name": "AUROC - 0.5",
        "p_value": float(test.p_value),
        "method": f"permutation test, {st.n_permutations} shuffles, diff-of-means refit",
        "verdict": "reject H0 (predictable)" if test.p_value <= st.alpha else "do not reject H0",
        "alpha": st.alpha,
    }
    return entry, hypothesis
