"""Benchmark: batched logistic layer sweep vs a loop of sklearn LogisticRegressionCV fits.

Usage::

    python scripts/bench_probes.py out.json [--layers 12] [--n 10000] [--d 256] [--classes 4]
        [--baseline-layers K] [--threads T] [--sklearn-threads S] [--device cuda]

Both sides see the same standardised training split, the same C grid (10 values,
``logspace(-4, 4)``), the same 5 stratified folds, accuracy as the CV score and sklearn's
default tolerance (1e-4). The untimed ``agree@C`` column compares the batched predictions with a
fully converged sklearn ``LogisticRegression`` (tol 1e-8) at the C the batched CV selected.
The ``single`` section times one ``LogisticProbe(C=c).fit`` against the same work in sklearn,
``make_pipeline(StandardScaler(), LogisticRegression(C=c)).fit`` (LogisticProbe standardises
inside), on the raw training rows of the peak layer, both ``tol=1e-4``, median process time of 7
runs, for several C, and reports the coefficient error of both against a converged fit.
``--baseline-layers K`` times sklearn on K evenly spaced layers only
and extrapolates its total linearly (reported as such). ``--device cuda`` solves the batched
sweep on the GPU (the host-to-device copy of the activations is inside the timed region);
sklearn always runs on the CPU with ``--sklearn-threads`` BLAS threads (default ``--threads``,
default all cores). Pick its fastest setting: on a 16-core H100 host one layer took 2.98 s at
1 thread, 1.83 s at 4 and 55.5 s at 16 (BLAS oversubscription on n x 4 GEMMs).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def make_data(
    n_layers: int = 12, n: int = 10000, d: int = 256, n_classes: int = 4, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gaussian class clusters with a per-layer signal strength peaking at 2/3 depth."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_classes, n)
    peak = (2 * n_layers) // 3
    strength = 0.18 * np.exp(-0.5 * ((np.arange(n_layers) - peak) / (n_layers / 5)) ** 2)
    mix = rng.normal(size=(d, d)) / np.sqrt(d) + np.eye(d)  # correlated, anisotropic features
    acts = np.empty((n_layers, n, d), dtype=np.float32)
    for ell in range(n_layers):
        mu = rng.normal(size=(n_classes, d)) * strength[ell]
        acts[ell] = (rng.normal(size=(n, d)) + mu[y]) @ mix + 0.5
    return acts, y, strength


def bench_probe_sweep(
    n_layers: int = 12,
    n: int = 10000,
    d: int = 256,
    n_classes: int = 4,
    baseline_layers: int | None = None,
    threads: int | None = None,
    seed: int = 0,
    device: str = "cpu",
    sklearn_threads: int | None = None,
) -> dict:
    """Time ``sweep_layers`` against per-layer ``LogisticRegressionCV``; return a JSON dict."""
    from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
    from sklearn.model_selection import StratifiedKFold
    from threadpoolctl import threadpool_limits

    from probekit.probes import SweepConfig, sweep_layers
    from probekit.util.numeric import standardization, standardize

    if threads is not None:
        torch.set_num_threads(threads)
    acts, y, strength = make_data(n_layers, n, d, n_classes, seed)
    n_train = int(0.8 * n)
    tr, te = np.arange(n_train), np.arange(n_train, n)
    Cs, cv = 10, 5

    if device != "cpu":  # CUDA context, kernels and cuBLAS handles: once per process
        sweep_layers(
            torch.from_numpy(acts[:1, :2000]),
            y[:2000],
            train_idx=tr[:1500],
            test_idx=np.arange(1500, 2000),
            config=SweepConfig(Cs=2, cv=2, device=device),
        )
    t0 = time.perf_counter()
    res = sweep_layers(
        torch.from_numpy(acts), y, train_idx=tr, test_idx=te, config=SweepConfig(Cs=Cs, cv=cv, device=device)
    )
    t_sweep = time.perf_counter() - t0

    layers = list(range(n_layers))
    if baseline_layers is not None and baseline_layers < n_layers:
        layers = sorted({int(round(x)) for x in np.linspace(0, n_layers - 1, baseline_layers)})
    sk_acc, sk_C, agree, per_layer_t, same_c = {}, {}, {}, {}, {}
    sk_threads = sklearn_threads if sklearn_threads is not None else threads
    with warnings.catch_warnings(), threadpool_limits(limits=sk_threads):
        warnings.simplefilter("ignore")
        for ell in layers:
            X = acts[ell].astype(np.float64)
            m, s = standardization(X[tr])
            Xtr, Xte = standardize(X[tr], m, s), standardize(X[te], m, s)
            t1 = time.perf_counter()
            clf = LogisticRegressionCV(
                Cs=Cs,
                cv=StratifiedKFold(cv),
                l1_ratios=(0,),
                scoring="accuracy",
                use_legacy_attributes=False,
                max_iter=100,
                tol=1e-4,
            ).fit(Xtr, y[tr])
            pred = clf.predict(Xte)
            per_layer_t[ell] = time.perf_counter() - t1
            sk_acc[ell] = float((pred == y[te]).mean())
            sk_C[ell] = float(clf.C_)
            agree[ell] = float((pred == res.test_predictions[ell]).mean())
            # Solver check (untimed): converged sklearn at the C the batched CV selected.
            ref = LogisticRegression(C=float(res.hyperparameter[ell]), tol=1e-8, max_iter=5000)
            same_c[ell] = float(
                (ref.fit(Xtr, y[tr]).predict(Xte) == res.test_predictions[ell]).mean()
            )
    t_sk_measured = sum(per_layer_t.values())
    t_sk_total = t_sk_measured * n_layers / len(layers)
    rows = [
        {
            "layer": ell,
            "signal": float(strength[ell]),
            "batched_acc": float(res.test[ell]),
            "batched_C": float(res.hyperparameter[ell]),
            "sklearn_acc": sk_acc.get(ell),
            "sklearn_C": sk_C.get(ell),
            "prediction_agreement": agree.get(ell),
            "same_C_prediction_agreement": same_c.get(ell),
            "sklearn_seconds": per_layer_t.get(ell),
        }
        for ell in range(n_layers)
    ]
    diffs = [abs(r["batched_acc"] - r["sklearn_acc"]) for r in rows if r["sklearn_acc"] is not None]
    return {
        "config": {
            "n_layers": n_layers,
            "n": n,
            "d": d,
            "n_classes": n_classes,
            "n_train": n_train,
            "Cs": Cs,
            "cv": cv,
            "threads": threads or torch.get_num_threads(),
            "sklearn_threads": sk_threads,
            "device": device,
            "device_name": torch.cuda.get_device_name() if device.startswith("cuda") else "cpu",
            "baseline_layers": layers,
            "torch": torch.__version__,
        },
        "batched_seconds": t_sweep,
        "sklearn_seconds_measured": t_sk_measured,
        "sklearn_seconds_total": t_sk_total,
        "sklearn_extrapolated": len(layers) < n_layers,
        "speedup": t_sk_total / t_sweep,
        "max_abs_acc_diff": max(diffs),
        "min_prediction_agreement": min(agree.values()),
        "min_same_C_prediction_agreement": min(same_c.values()),
        "same_C_selected": int(
            sum(abs(np.log(sk_C[e] / res.hyperparameter[e])) < 1e-9 for e in layers)
        ),
        "best_layer": res.best_layer,
        "rows": rows,
    }


def bench_single_fit(
    X: np.ndarray, y: np.ndarray, Cs: tuple[float, ...] = (1e-2, 1.0, 100.0), tol: float = 1e-4
) -> dict:
    """Time single-problem ``LogisticProbe(C=c)`` vs sklearn ``LogisticRegression(C=c)``."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from probekit.probes import LogisticProbe

    Z = (X - X.mean(0)) / X.std(0)
    rows = []
    for C in Cs:
        times = {}
        fits = {}
        for name, make in (
            ("probekit", lambda c=C: LogisticProbe(C=c, tol=tol, max_iter=1000)),
            (
                "sklearn",
                lambda c=C: make_pipeline(
                    StandardScaler(), LogisticRegression(C=c, tol=tol, max_iter=1000)
                ),
            ),
        ):
            runs = []
            for _ in range(7):
                t0 = time.process_time()
                fits[name] = make().fit(X, y)
                runs.append(time.process_time() - t0)
            times[name] = float(np.median(runs))
        ref = LogisticRegression(C=C, tol=1e-10, max_iter=20000).fit(Z, y).coef_
        W = fits["probekit"].coef_ * fits["probekit"].scale_
        if W.shape[0] > 1:
            W = W - W.mean(0)
        scale = np.abs(ref).max()
        rows.append(
            {
                "C": C,
                "probekit_seconds": times["probekit"],
                "sklearn_seconds": times["sklearn"],
                "ratio": times["probekit"] / times["sklearn"],
                "probekit_coef_rel_err": float(np.abs(W - ref).max() / scale),
                "sklearn_coef_rel_err": float(
                    np.abs(fits["sklearn"][-1].coef_ - ref).max() / scale
                ),
            }
        )
    return {"n": int(X.shape[0]), "d": int(X.shape[1]), "tol": tol, "rows": rows}


def main(argv: list[str] | None = None) -> dict:
    """CLI entry: run the benchmark, print a table, write JSON to the given path."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", help="path of the JSON report")
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--n", type=int, default=10000)
    p.add_argument("--d", type=int, default=256)
    p.add_argument("--classes", type=int, default=4)
    p.add_argument("--baseline-layers", type=int, default=None)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--sklearn-threads", type=int, default=None)
    p.add_argument("--device", default="cpu", help="device of the batched sweep (cpu, cuda)")
    a = p.parse_args(argv)
    r = bench_probe_sweep(
        a.layers,
        a.n,
        a.d,
        a.classes,
        a.baseline_layers,
        a.threads,
        device=a.device,
        sklearn_threads=a.sklearn_threads,
    )
    print(
        f"batched sweep: {r['batched_seconds']:.1f}s  sklearn loop: "
        f"{r['sklearn_seconds_total']:.1f}s{' (extrapolated)' if r['sklearn_extrapolated'] else ''}"
        f"  speedup: {r['speedup']:.1f}x"
    )
    print("layer signal  batched_acc  sklearn_acc   agree  agree@C  C_batched  C_sklearn")

    def fmt(v: float | None, spec: str) -> str:
        return "-" if v is None else format(v, spec)

    for row in r["rows"]:
        print(
            f"{row['layer']:5d} {row['signal']:6.3f}  {row['batched_acc']:11.4f}  "
            f"{fmt(row['sklearn_acc'], '.4f'):>11}  {fmt(row['prediction_agreement'], '.4f'):>6}"
            f"  {fmt(row['same_C_prediction_agreement'], '.4f'):>7}"
            f"  {row['batched_C']:9.3g}  {fmt(row['sklearn_C'], '.3g'):>9}"
        )
    acts, y, strength = make_data(a.layers, a.n, a.d, a.classes)
    peak = int(np.argmax(strength))
    n_train = int(0.8 * a.n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=a.sklearn_threads or a.threads):
            r["single"] = bench_single_fit(acts[peak, :n_train].astype(np.float64), y[:n_train])
            # a wide problem (n < d, as 96 questions x 576 features): first d // 2 rows
            m = a.d // 2
            r["single_wide"] = bench_single_fit(acts[peak, :m].astype(np.float64), y[:m])
    for key in ("single", "single_wide"):
        n_rows = r[key]["n"]
        print(f"{key} fit (layer {peak}, n={n_rows}, d={a.d}): probekit / sklearn CPU time, coef error")
        for row in r[key]["rows"]:
            print(
                f"  C={row['C']:<8g} {row['probekit_seconds'] * 1e3:7.1f} ms / "
                f"{row['sklearn_seconds'] * 1e3:7.1f} ms = {row['ratio']:.2f}x   "
                f"err {row['probekit_coef_rel_err']:.1e} vs {row['sklearn_coef_rel_err']:.1e}"
            )
    with open(a.out, "w") as f:
        json.dump(r, f, indent=2)
    return r


if __name__ == "__main__":
    main()
