"""End-to-end demo on the built-in default (see README): writes everything under --out."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from probekit.capture import all_layers, capture_to_store
from probekit.models import ModelConfig, build_model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="out/demo")
    args = parser.parse_args(argv)
    out = Path(args.out)
    model = build_model(ModelConfig(n_layers=2, d_model=64, n_heads=4, d_head=16, d_vocab=50, n_ctx=16))
    g = torch.Generator().manual_seed(0)
    tokens = [torch.randint(0, 50, (int(n),), generator=g).tolist() for n in torch.randint(4, 16, (256,), generator=g)]
    labels = [int(t[-1] % 2) for t in tokens]
    store = capture_to_store(model, tokens, out / "store", all_layers(model), metadata={"label": labels})
    summary = {"rows": store.n_rows, "sites": store.sites, "store": str(out / "store")}
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
