"""Score two-concept representations with Uselis et al.'s code; write a fixture for the tests.

The reference (oshapio/necessary-compositionality, ``src/complinearity/analyse_embeddings_probes.py``:
``compute_concept_value_means_from_matrix``, ``compute_linear_factorization_r2_from_matrix``,
``compute_means_metrics_and_orthogonality``) is NOT part of probekit. Run it in a throwaway venv
with numpy (their code logs to wandb: a no-op ``wandb`` module is put in its place), pointing
``--ref`` at a directory holding that file::

    python scripts/uselis_reference_fixtures.py export --out /tmp/uselis_inputs   # project venv
    /tmp/uselis/venv/bin/python scripts/uselis_reference_fixtures.py reference \
        --ref /tmp/uselis/ref --inputs /tmp/uselis_inputs --out tests/geometry/uselis_reference.json

Inputs: the synthetic grids of ``tests/geometry/factorization_cases.py`` and the embedded modadd
checkpoint's train-pair activations at '=' (concepts: the operands ``a`` and ``b``).
"""

from __future__ import annotations

import argparse
import json
import sys
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MODADD_SITES = ("resid_mid@0", "mlp_post@0", "resid_post@0")


def export(out: str) -> None:
    """Write ``<name>.npz`` (X, y_a, y_b) per case (project venv)."""
    import torch

    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "tests" / "geometry"))
    from factorization_cases import SYNTHETIC, grid  # noqa: PLC0415  (tests/geometry helper)

    from probekit.capture import LastToken, Site, collect_activations
    from probekit.models import load_checkpoint
    from probekit.testbeds import get_task

    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    for name, opts in SYNTHETIC.items():
        z, a, b = grid(**opts)
        np.savez(folder / f"{name}.npz", X=z.numpy(), y_a=a, y_b=b)
    model = load_checkpoint(ROOT / "probes" / "checkpoints" / "modadd-p53")
    train = get_task("modular_addition", p=53, seed=0, train_fraction=0.6).splits()["train"]
    sites = [Site(int(s.split("@")[1]), s.split("@")[0]) for s in MODADD_SITES]
    with torch.no_grad():
        acts = collect_activations(model, train.tokens, sites, positions=LastToken(),
                                   batch_size=512)
    for name, site in zip(MODADD_SITES, sites):
        np.savez(folder / f"modadd_{name}.npz", X=acts[site].double().numpy(),
                 y_a=np.asarray(train.metadata["a"]), y_b=np.asarray(train.metadata["b"]))


def reference(ref: str, inputs: str, out: str) -> None:
    """Score every ``.npz`` in ``inputs`` with the reference functions (throwaway venv)."""
    sys.modules.setdefault("wandb", types.SimpleNamespace(log=lambda data: None,
                                                          init=lambda **kw: None, run=None))
    sys.path.insert(0, ref)
    import analyse_embeddings_probes as R  # noqa: PLC0415  (the reference module)

    cases = {}
    for path in sorted(Path(inputs).glob("*.npz")):
        data = np.load(path)
        x = np.array(data["X"], dtype=np.float32)  # as their select_embedding_matrix
        x = x - x.mean(axis=0, keepdims=True)
        payload = {"image_embeds": x}
        for head in ("a", "b"):
            y = data[f"y_{head}"]
            payload[f"y_{head}"] = y
            payload[f"values_{head}"] = np.arange(int(y.max()) + 1)
        _, centered = R.compute_concept_value_means_from_matrix(x, payload)
        lf = R.compute_linear_factorization_r2_from_matrix(x, payload, centered)
        met = R.compute_means_metrics_and_orthogonality(centered, "/tmp", "raw")
        cases[path.stem] = {
            "linear_r2": lf["r2"], "linear_r2_whitened": lf["r2_whitened"],
            "k95": [met["k95_means"]["a"], met["k95_means"]["b"]],
            "same_concept_abs_cos": met["avg_same_concept_abs_cos"],
            "cross_concept_abs_cos": met["avg_cross_concept_abs_cos"],
        }
    Path(out).write_text(json.dumps({
        "reference": "oshapio/necessary-compositionality@945876962cc7 "
                     "src/complinearity/analyse_embeddings_probes.py (float32, as released)",
        "cases": cases,
    }, indent=1))


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("--out", required=True)
    r = sub.add_parser("reference")
    r.add_argument("--ref", required=True)
    r.add_argument("--inputs", required=True)
    r.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if args.cmd == "export":
        export(args.out)
    else:
        reference(args.ref, args.inputs, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
