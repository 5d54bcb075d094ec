"""``probekit patch`` and the ``[[patching]]`` suite section: JSON equals the Python API; bad input is one line."""

import base64
import json
from functools import partial

import pytest
import torch

from probekit.circuits import (
    activation_patching,
    attribution_patching,
    logit_diff,
    patching_correlation,
)
from probekit.cli import main
from probekit.models import build_model, save_checkpoint
from probekit.suites import load_suite, run_suite
from tests.conftest import TINY_CONFIGS

CFG = TINY_CONFIGS["ln_mha"]  # d_vocab 11, n_ctx 12, 2 layers, 2 heads
CLEAN = [[1, 2, 3, 4, 5], [6, 2, 3, 4, 5], [1, 7, 3, 8, 9]]
CORRUPT = [[8, 2, 3, 4, 5], [9, 2, 3, 4, 5], [2, 7, 3, 8, 9]]
ANSWER, FOIL = [3, 4, 5], [6, 7, 8]


def rows(clean=CLEAN, corrupt=CORRUPT):
    out = []
    for i, (c, r) in enumerate(zip(clean, corrupt)):
        out.append({"tokens": c, "pair_id": i, "role": "clean", "answer": ANSWER[i], "split": "pairs"})
        out.append({"tokens": r, "pair_id": i, "role": "corrupt", "answer": FOIL[i], "split": "pairs"})
    return out


def write_jsonl(path, items):
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in items) + "\n")
    return path


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return save_checkpoint(build_model(CFG), CFG, tmp_path_factory.mktemp("m") / "ckpt")


@pytest.fixture(scope="module")
def model(ckpt):
    from probekit.models import load_checkpoint

    return load_checkpoint(ckpt)


def test_cli_writes_heatmaps_and_json_equal_to_the_api(ckpt, model, tmp_path, capsys):
    data = write_jsonl(tmp_path / "pairs.jsonl", rows())
    out = tmp_path / "out"
    code = main(["patch", str(ckpt), str(data), "--out", str(out), "--kinds", "resid_pre,attn_z",
                 "--method", "both"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "resid_pre (activation): largest normalised effect" in printed and "wrote" in printed
    report = json.loads((out / "report.json").read_text())
    (section,) = report["analyses"]
    grids = {(g["kind"], g["method"]): g for g in section["data"]["grids"]}
    assert set(grids) == {(k, m) for k in ("resid_pre", "attn_z") for m in ("activation", "attribution")}
    metric = partial(logit_diff, answer=torch.tensor(ANSWER), foil=torch.tensor(FOIL))
    for kind, by in (("resid_pre", ("layer", "pos")), ("attn_z", ("layer", "head"))):
        exact = activation_patching(model, CLEAN, CORRUPT, metric, kind=kind, by=by)
        attr = attribution_patching(model, CLEAN, CORRUPT, metric, kind=kind, by=by)
        for method, res in (("activation", exact), ("attribution", attr)):
            g = grids[(kind, method)]
            torch.testing.assert_close(torch.tensor(g["values"]), res.values, atol=1e-6, rtol=0)
            torch.testing.assert_close(torch.tensor(g["normalized"]), res.normalized, atol=1e-6, rtol=0)
            assert g["row_labels"] == ["L0", "L1"]
        want_r = patching_correlation(attr, exact)
        assert abs(section["data"]["correlation"][kind] - want_r) < 1e-9
    # position axis labelled with the (corrupt) prompts' tokens, '*' where the pairs differ
    assert grids[("resid_pre", "activation")]["col_labels"] == ["0:8*", "1:2*", "2:3", "3:4*", "4:5*"]
    assert grids[("attn_z", "activation")]["col_labels"] == ["H0", "H1"]
    clean_m = metric(model(torch.tensor(CLEAN))[:, -1].detach(), torch.arange(3))
    torch.testing.assert_close(torch.tensor(section["data"]["clean_metric"]), clean_m, atol=1e-5, rtol=0)
    heatmaps = [b for b in section["blocks"] if b["block"] == "heatmap"]
    assert len(heatmaps) == 4
    assert heatmaps[0]["xlabel"] == "position (token)" and heatmaps[0]["ylabel"] == "layer"
    assert heatmaps[2]["xlabel"] == "head"
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 4 and "<script src" not in html
    png = html.split("data:image/png;base64,")[1].split('"')[0]
    assert base64.b64decode(png)[:4] == b"\x89PNG"


def write_suite(tmp_path, ckpt, patching):
    """Write pairs.jsonl and s.toml (a suite over it with one ``[[patching]]`` section) into tmp_path."""
    write_jsonl(tmp_path / "pairs.jsonl", rows())
    (tmp_path / "s.toml").write_text(f"""
[suite]
name = "patch"
[model]
checkpoint = "{ckpt}"
[data]
file = "pairs.jsonl"
label = "answer"
train_split = "pairs"
test_split = "pairs"
[[patching]]
{patching}
""")
    return tmp_path / "s.toml"


def test_suite_section_gives_the_cli_numbers(ckpt, tmp_path):
    spec = write_suite(tmp_path, ckpt, 'kinds = ["mlp_out"]\ndirection = "noise"')
    result = run_suite(load_suite(spec), progress=False)
    (section,) = result.analyses
    assert main(["patch", str(ckpt), str(tmp_path / "pairs.jsonl"), "--out", str(tmp_path / "o"),
                 "--kinds", "mlp_out", "--direction", "noise"]) == 0
    cli = json.loads((tmp_path / "o" / "report.json").read_text())["analyses"][0]["data"]
    assert cli["grids"][0]["values"] == section.data["grids"][0]["values"]
    assert section.data["direction"] == "noise" and section.data["n_pairs"] == 3


def cli_error(capsys, args):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if ": error: " in line]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    ("items", "extra", "message"),
    [
        (rows(), ["--kinds", "resid_pre,attn_zz"], r"'attn_zz' is not a patching kind; choose from \['resid_pre'"),
        (rows(), ["--layers", "0,x"], r"--layers '0,x': expected comma-separated block indices"),
        (rows(), ["--batch-size", "0"], r"--batch-size 0: must be >= 1"),
        (rows(corrupt=[CORRUPT[0], CORRUPT[1], [2, 7, 3]]), [],
         r"pairs.jsonl:6: corrupt prompt has 3 tokens but its clean prompt \(.*pairs.jsonl:5\) has 5"),
        (rows()[:-1], [], r"pairs.jsonl:5: pair_id '2' has no 'corrupt' row"),
        ([*rows(), {**rows()[0]}], [], r"pairs.jsonl:7:51: a second 'clean' row for pair_id 0 \(first at .*pairs.jsonl:1\)"),
        ([{**rows()[0], "role": "base"}, *rows()[1:]], [], r"pairs.jsonl:1:51: role='base'; expected 'clean' or 'corrupt'"),
        ([{k: v for k, v in rows()[0].items() if k != "answer"}, *rows()[1:]], [], r"pairs.jsonl:1:1: row has no 'answer' column"),
        ([{**rows()[0], "tokens": [1, 2, 3, 4, 11]}, *rows()[1:]], [], r"pairs.jsonl:1:12: token id 11 is outside"),
        ([{**rows()[0], "answer": "Paris"}, *rows()[1:]], [], r"pairs.jsonl:1:70: answer 'Paris': .*no tokenizer"),
        ([{**rows()[0], "answer": 12}, *rows()[1:]], [], r"pairs.jsonl:1:70: answer token id 12 is outside"),
        (rows(), ["--layers", "0,5"], r"layers \[0, 5\]: block index 5 is outside 0..1 \(the model has 2 blocks\)"),
        (rows(), ["--window", "2", "--method", "both"], r"window = 2 needs method = 'activation'"),
        (rows(), ["--window", "0"], r"--window 0: must be >= 1"),
        (rows(), ["--edges", "eap", "--edge-ks", "10,x"], r"--edge-ks '10,x': expected comma-separated"),
    ],
)
def test_bad_input_is_one_line(ckpt, tmp_path, capsys, items, extra, message):
    import re

    data = write_jsonl(tmp_path / "pairs.jsonl", items)
    line = cli_error(capsys, ["patch", str(ckpt), str(data), "--out", str(tmp_path / "o"), *extra])
    assert line.startswith("probekit patch: error: ")
    assert re.search(message, line), line
    assert not (tmp_path / "o" / "report.json").exists()


def test_cli_windows_and_edge_circuits_equal_the_api(ckpt, model, tmp_path, capsys):
    from probekit.circuits import edge_attribution, faithfulness_curve

    data = write_jsonl(tmp_path / "pairs.jsonl", rows())
    out = tmp_path / "out"
    code = main(["patch", str(ckpt), str(data), "--out", str(out), "--kinds", "mlp_out",
                 "--window", "2", "--edges", "eap", "--edge-ks", "3,10,100000", "--edge-top", "5"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "eap: top edge" in printed and "(k=3)" in printed
    (section,) = json.loads((out / "report.json").read_text())["analyses"]
    metric = partial(logit_diff, answer=torch.tensor(ANSWER), foil=torch.tensor(FOIL))
    (grid,) = section["data"]["grids"]
    want = activation_patching(model, CLEAN, CORRUPT, metric, kind="mlp_out", window=2)
    torch.testing.assert_close(torch.tensor(grid["values"]), want.values, atol=1e-6, rtol=0)
    assert grid["row_labels"] == [f"L{x}" for x in want.labels["layer"]] and grid["row_labels"][0] == "L0-1"
    scores = edge_attribution(model, CLEAN, CORRUPT, metric, method="eap")
    edges = section["data"]["edges"]
    n = scores.graph.n_edges
    assert edges["n_edges"] == n and edges["faithfulness"]["ks"] == [3, 10, n]  # 100000 > n: the graph
    assert [(a, b) for a, b, _ in edges["top"]] == [(a, b) for a, b, _ in scores.top(5)]
    assert [v for *_, v in edges["top"]] == pytest.approx([v for *_, v in scores.top(5)], abs=1e-6)
    curve = faithfulness_curve(model, CLEAN, CORRUPT, metric, scores, [3, 10, n])
    assert edges["faithfulness"]["normalized"] == pytest.approx(curve.normalized.tolist(), abs=1e-5)
    assert edges["faithfulness"]["normalized"][-1] == pytest.approx(1.0, abs=1e-4)  # the whole graph
    html = (out / "report.html").read_text()
    assert "top 5 of" in html and html.count("data:image/png;base64,") == 2  # heatmap + curve


def test_cli_head_grid_by_layer_pos_head_equals_the_api(ckpt, model, tmp_path, capsys):
    data = write_jsonl(tmp_path / "pairs.jsonl", rows())
    out = tmp_path / "out"
    code = main(["patch", str(ckpt), str(data), "--out", str(out), "--kinds", "attn_z",
                 "--head-grid", "layer_pos_head", "--method", "both"])
    assert code == 0, capsys.readouterr().out
    (section,) = json.loads((out / "report.json").read_text())["analyses"]
    metric = partial(logit_diff, answer=torch.tensor(ANSWER), foil=torch.tensor(FOIL))
    for g in section["data"]["grids"]:
        fn = activation_patching if g["method"] == "activation" else attribution_patching
        want = fn(model, CLEAN, CORRUPT, metric, kind="attn_z", by=("layer", "pos", "head"))
        assert g["by"] == ["layer", "pos", "head"] and want.values.shape == (2, 5, 2)
        torch.testing.assert_close(torch.tensor(g["values"]), want.values, atol=1e-6, rtol=0)
        assert g["row_labels"] == ["L0 H0", "L0 H1", "L1 H0", "L1 H1"] and len(g["col_labels"]) == 5
    heat = [b for b in section["blocks"] if b["block"] == "heatmap"][0]
    norm = torch.tensor(section["data"]["grids"][0]["normalized"])  # (layer, pos, head)
    shown = torch.tensor([[float("nan") if v is None else v for v in r] for r in heat["values"]])
    torch.testing.assert_close(shown, norm.permute(0, 2, 1).reshape(4, 5), equal_nan=True)
    assert heat["ylabel"] == "layer, head"


def test_suite_section_rejects_an_unknown_kind(ckpt, tmp_path):
    from probekit.suites import SuiteError

    spec = write_suite(tmp_path, ckpt, 'kinds = ["resid_pree"]')
    with pytest.raises(SuiteError, match=r"s.toml:\d+: \[patching\].*'resid_pree' is not a patching kind"):
        load_suite(spec)


@pytest.mark.slow
def test_smollm2_capital_pairs_subject_token_restores_the_answer(tmp_path):
    """SmolLM2 (GQA, tokenizer): the subject token carries the capital mid-depth, the last token not yet."""
    from pathlib import Path

    data = Path(__file__).resolve().parents[2] / "circuits" / "data" / "capital_pairs.jsonl"
    assert main(["patch", "smollm2-135m", str(data), "--kinds", "resid_pre,attn_v", "--layers", "8",
                 "--answer-tokens", "first",  # " Bangkok" is 2 tokens
                 "--out", str(tmp_path)]) == 0
    grids = json.loads((tmp_path / "report.json").read_text())["analyses"][0]["data"]["grids"]
    resid = grids[0]
    assert resid["col_labels"] == ["0:The", "1: capital", "2: of", "3: Germany*", "4: is"]
    assert abs(resid["normalized"][0][3] - 1.0) < 0.02 and abs(resid["normalized"][0][4]) < 0.02
    assert grids[1]["col_labels"] == ["H0", "H1", "H2"]  # attn_v by KV head (3 KV heads)
