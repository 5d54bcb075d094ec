"""Run the reference MFTMA code on the cases of tests/geometry/mftma_cases.py; write a fixture.

The reference (schung039/neural_manifolds_replicaMFT, ``mftma/manifold_analysis_correlation.py``)
is NOT part of probekit: run this script in a throwaway venv with numpy, scipy, cvxopt, autograd
and ``pymanopt<0.3``, pointing ``--ref`` at a directory holding that file::

    python scripts/mftma_reference_fixtures.py export-activations --out /tmp/modadd_acts.npz  # project venv
    /tmp/refvenv/bin/python scripts/mftma_reference_fixtures.py reference --ref /tmp/mftma \
        --acts /tmp/modadd_acts.npz --out tests/geometry/mftma_reference.json [--slow]

``export-activations`` writes the modadd activations grouped by answer (the "real" cases).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "geometry"))

REAL_SITES = ("resid_mid@0", "mlp_post@0", "resid_post@0")
REAL = {"n_classes": 20, "max_points": 20, "seed": 0, "n_t": 200}


def export_activations(out: str) -> None:
    """Capture the embedded modadd checkpoint's train-pair activations at '=' (project venv)."""
    from mftma_real import modadd_manifolds  # noqa: PLC0415  (tests/geometry helper)

    arrays = {}
    for site in REAL_SITES:
        for i, x in enumerate(modadd_manifolds(site, **{k: REAL[k] for k in
                                                       ("n_classes", "max_points", "seed")})):
            arrays[f"{site}/{i}"] = x
    np.savez(out, **arrays)
    print(f"wrote {out}: {len(arrays)} arrays")


def run_reference(ref: str, acts: str | None, out: str, slow: bool) -> None:
    """Run the reference's manifold_analysis_corr on every case; np.random.seed(0) first."""
    from mftma_cases import CASES, make_manifolds, make_t_vecs  # noqa: PLC0415

    sys.path.insert(0, ref)
    import manifold_analysis_correlation as mac  # noqa: PLC0415

    captured: dict = {}
    fun_fa = mac.fun_FA

    def recording_fun_fa(*args, **kwargs):  # keep the reference's V11 and res_coeff per K
        out = fun_fa(*args, **kwargs)
        captured.update(proj=out[2], v1=out[3], res=out[4])
        return out

    mac.fun_FA = recording_fun_fa

    cases = {k: v for k, v in CASES.items() if slow or not v.get("slow")}
    result: dict = {"reference": "schung039/neural_manifolds_replicaMFT@24ea716 "
                    "mftma/manifold_analysis_correlation.py", "np_random_seed": 0, "cases": {}}
    jobs = [(name, case, make_manifolds(case)) for name, case in cases.items()]
    if acts:
        data = np.load(acts)
        for site in REAL_SITES:
            xs = [data[f"{site}/{i}"] for i in range(REAL["n_classes"])]
            jobs.append((f"modadd_{site}", {"kind": "modadd", "site": site, **REAL}, xs))
    for name, case, xs in jobs:
        t_vecs = make_t_vecs(case, xs)
        np.random.seed(0)
        t0 = time.perf_counter()
        a, r, d, res0, k = mac.manifold_analysis_corr(xs, case.get("kappa", 0.0), case["n_t"],
                                                      t_vecs=t_vecs)
        elapsed = time.perf_counter() - t0
        result["cases"][name] = {
            "case": case, "capacity": float(1 / np.mean(1 / a)), "radius": float(np.mean(r)),
            "dimension": float(np.mean(d)), "capacity_m": a.tolist(), "radius_m": r.tolist(),
            "dimension_m": d.tolist(), "center_correlation": float(res0), "n_common": int(k),
            "seconds": round(elapsed, 2),
            "residual_correlation": [float(v) for v in captured["res"]],
        }
        if case["kind"] == "modadd":  # real data: K and V11 vary with the restarts; keep V11
            basis = captured["proj"] @ captured["v1"][k - 1]
            result["cases"][name]["center_basis"] = np.round(basis, 12).tolist()
        print(name, result["cases"][name]["capacity"], result["cases"][name]["radius"],
              result["cases"][name]["dimension"], int(k), f"{elapsed:.1f}s", flush=True)
    Path(out).write_text(json.dumps(result, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("export-activations")
    ex.add_argument("--out", required=True)
    rf = sub.add_parser("reference")
    rf.add_argument("--ref", required=True, help="directory with manifold_analysis_correlation.py")
    rf.add_argument("--acts", default=None)
    rf.add_argument("--out", required=True)
    rf.add_argument("--slow", action="store_true", help="include the P=100 M=50 N=5000 case")
    args = ap.parse_args(argv)
    if args.cmd == "export-activations":
        export_activations(args.out)
    else:
        run_reference(args.ref, args.acts, args.out, args.slow)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
