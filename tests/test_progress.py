"""Progress output (probekit.progress): counts cells/examples, goes to stderr, never changes numbers.

pytest's captured stderr is not a TTY, so every bar here is in its plain-line (log) mode.
"""

import io
import json
import re
from functools import partial

import numpy as np
import pytest
import torch

from probekit.capture import collect_activations
from probekit.circuits import activation_patching, logit_diff
from probekit.circuits.eap import edge_attribution
from probekit.probes import SweepConfig, sweep_layers
from probekit.probes.permutation import probe_permutation_test
from probekit.progress import (
    ProgressSettings,
    progress_bar,
    progress_enabled,
    progress_settings,
    track,
)
from probekit.sites import Site

LINE = re.compile(r"^(?P<desc>.+?): (?P<n>\d+)/(?P<total>\d+) (?P<unit>\S+) \((?P<pct>\d+)%\), "
                  r"(?P<elapsed>\d+\.\d) s elapsed, \S+ left$")


def lines_of(err: str, desc: str) -> list[re.Match]:
    """The parsed progress lines of phase ``desc`` in captured stderr, in order."""
    out = []
    for line in err.splitlines():
        m = LINE.match(line)
        if m and m["desc"] == desc:
            out.append(m)
    return out


def final_count(err: str, desc: str) -> tuple[int, int, str]:
    """``(n, total, unit)`` of the last line of ``desc``; fails when it printed none."""
    found = lines_of(err, desc)
    assert found, f"no progress line for {desc!r} in {err!r}"
    last = found[-1]
    return int(last["n"]), int(last["total"]), last["unit"]


@pytest.fixture
def shown():
    """Every bar shows from its first item, one line per update (no delay, no rate limit)."""
    with progress_settings(enabled=True, delay=0, log_interval=0):
        yield


def _sweep_problem(n: int = 60, d: int = 4, seed: int = 0):
    g = np.random.default_rng(seed)
    y = np.arange(n) % 2
    acts = torch.as_tensor(g.normal(size=(3, n, d)) + y[None, :, None] * np.array([2.0, 0.0, 0.5])[:, None, None])
    return acts, y, np.arange(0, 40), np.arange(40, n)


def test_probe_sweep_counts_cells_and_keeps_numbers(shown, capsys):
    acts, y, tr, te = _sweep_problem()
    # two sites of different width are two batched groups: 3 + 2 cells
    sites = {"a": acts.float(), "b": acts[:2, :, :3].float()}
    res = sweep_layers(sites, y, train_idx=tr, test_idx=te, config=SweepConfig(Cs=3, cv=3, n_bootstrap=1000))
    out, err = capsys.readouterr()
    assert out == ""  # progress never on stdout
    assert "\r" not in err and "\x1b" not in err
    assert final_count(err, "probe sweep") == (5, 5, "cells")
    assert [int(m["n"]) for m in lines_of(err, "probe sweep")] == [0, 3, 5]  # group by group

    with progress_settings(enabled=False):
        quiet = sweep_layers(sites, y, train_idx=tr, test_idx=te, config=SweepConfig(Cs=3, cv=3, n_bootstrap=1000))
    assert capsys.readouterr().err == ""
    for field in ("train", "val", "test", "test_ci_low", "test_ci_high", "hyperparameter", "test_predictions"):
        np.testing.assert_array_equal(getattr(res, field), getattr(quiet, field))


def test_permutation_test_counts_refits(shown, capsys):
    acts, y, tr, te = _sweep_problem()
    res = probe_permutation_test(acts[0], y, train_idx=tr, test_idx=te, probe="diffmeans",
                                 n_permutations=99, batch_size=40)
    err = capsys.readouterr().err
    assert final_count(err, "permutation test") == (100, 100, "refits")  # observed + 99 shuffles
    assert [int(m["n"]) for m in lines_of(err, "permutation test")] == [0, 40, 80, 100]
    with progress_settings(enabled=False):
        quiet = probe_permutation_test(acts[0], y, train_idx=tr, test_idx=te, probe="diffmeans",
                                       n_permutations=99, batch_size=40)
    assert (res.statistic, res.p_value) == (quiet.statistic, quiet.p_value)


def test_patching_grid_counts_every_pair_cell(shown, capsys, small_model):
    g = torch.Generator().manual_seed(1)
    clean = torch.randint(0, 11, (3, 5), generator=g)
    corrupt = clean.clone()
    corrupt[:, 1] = (clean[:, 1] + 3) % 11
    metric = partial(logit_diff, answer=torch.full((3,), 2), foil=torch.full((3,), 7))
    res = activation_patching(small_model, clean, corrupt, metric, by=("layer", "pos"), batch_size=7)
    err = capsys.readouterr().err
    n_cells = 3 * small_model.cfg.n_layers * 5  # pairs x layers x positions
    assert res.per_pair.numel() == n_cells
    assert final_count(err, "patching grid") == (n_cells, n_cells, "cells")
    with progress_settings(enabled=False):
        quiet = activation_patching(small_model, clean, corrupt, metric, by=("layer", "pos"), batch_size=7)
    assert torch.equal(res.per_pair, quiet.per_pair)


def test_eap_counts_pairs(shown, capsys, small_model):
    g = torch.Generator().manual_seed(2)
    clean = torch.randint(0, 11, (3, 4), generator=g)
    corrupt = (clean + 1) % 11
    metric = partial(logit_diff, answer=torch.full((3,), 2), foil=torch.full((3,), 7))
    edge_attribution(small_model, clean, corrupt, metric, method="eap", batch_size=2)
    assert [int(m["n"]) for m in lines_of(capsys.readouterr().err, "eap")] == [0, 2, 3]


def test_a_single_long_prompt_ends_at_one_of_one(shown, capsys, small_model):
    prompt = [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1, 2]]  # n_ctx 12: one prompt, one batch
    collect_activations(small_model, prompt, [Site(1, "resid_post")])
    err = capsys.readouterr().err
    assert final_count(err, "capture") == (1, 1, "examples")
    assert [int(m["n"]) for m in lines_of(err, "capture")] == [0, 1]


def test_capture_counts_examples_not_batches(shown, capsys, small_model):
    prompts = [[1, 2, 3]] * 7
    collect_activations(small_model, prompts, [Site(0, "resid_post")], batch_size=3)
    err = capsys.readouterr().err
    assert [int(m["n"]) for m in lines_of(err, "capture")] == [0, 3, 6, 7]


def test_every_switch_silences(capsys, monkeypatch, small_model):
    acts, y, tr, te = _sweep_problem()
    run = partial(sweep_layers, acts.float(), y, train_idx=tr, test_idx=te, config=SweepConfig(Cs=2, cv=3, n_bootstrap=1000))
    with progress_settings(delay=0, log_interval=0):
        monkeypatch.setenv("PROBEKIT_PROGRESS", "0")
        run()
        collect_activations(small_model, [[1, 2]], [Site(0, "resid_post")])
        assert not progress_enabled() and capsys.readouterr() == ("", "")
        monkeypatch.setenv("PROBEKIT_PROGRESS", "1")
        with progress_settings(enabled=False):
            run()
            with progress_settings(enabled=True):  # an inner scope cannot turn it back on
                assert not progress_enabled()
        collect_activations(small_model, [[1, 2]], [Site(0, "resid_post")], progress=False)
        list(track(range(3), desc="off", unit="item", enabled=False))
        assert capsys.readouterr() == ("", "")
        assert progress_enabled() and progress_enabled(None) and not progress_enabled(False)


def test_a_fast_phase_prints_nothing_by_default(capsys):
    assert ProgressSettings().delay > 0
    for _ in track(range(1000), desc="fast", unit="item"):
        pass
    assert capsys.readouterr().err == ""


def test_lines_are_rate_limited(capsys):
    with progress_settings(delay=0, log_interval=3600):
        for _ in track(range(100), desc="slow", unit="item"):
            pass
    assert [int(m["n"]) for m in lines_of(capsys.readouterr().err, "slow")] == [0, 100]  # first + final


def test_weights_initial_and_unknown_total(shown, capsys):
    list(track([[1, 2], [3], [4, 5, 6]], desc="weighted", unit="cell", total=8, initial=2, weight=len))
    list(track(iter(range(2)), desc="open", unit="batch"))
    err = capsys.readouterr().err
    assert [int(m["n"]) for m in lines_of(err, "weighted")] == [2, 4, 5, 8]
    assert err.splitlines()[-1] == "open: 2 batches, 0.0 s elapsed"


def test_settings_are_restored_and_checked():
    before = progress_enabled()
    with pytest.raises(RuntimeError), progress_settings(enabled=False):
        assert not progress_enabled()
        raise RuntimeError
    assert progress_enabled() == before
    with pytest.raises(ValueError, match="delay = -1"):
        ProgressSettings(delay=-1)


def test_a_terminal_gets_a_live_bar(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    monkeypatch.setattr("sys.stderr", tty)
    with progress_settings(delay=0):
        bar = progress_bar(range(4), desc="live", unit="cell")
        list(bar)
    assert "\r" in tty.getvalue() and "4/4" in tty.getvalue()


def test_cli_json_stays_on_stdout_and_population_counts_runs(shown, capsys, tmp_path):
    from probekit.cli import main

    sets = [x for s in ("task.p=7", "d_model=16", "train.n_evals=2") for x in ("--set", s)]
    args = ["train", "modular_addition", "--out", str(tmp_path / "pop"), "--steps", "2",
            "--seeds", "0", "1", "--executor", "inprocess", *sets]
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert [json.loads(line)["step"] for line in out.splitlines()] == [2, 2]  # nothing else on stdout
    assert final_count(err, "trainings") == (2, 2, "tasks")
    assert main([*args[:3], str(tmp_path / "one"), "--steps", "2", "--seed", "0", *sets]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["step"] == 2
    assert final_count(err, "modular_addition")[:2] == (2, 2)  # the single run counts steps


TINY_SUITE = """
[suite]
name = "tiny"
[model]
checkpoint = "ckpt"
[data]
file = "data.jsonl"
label = "planted"
train_split = "train"
test_split = "test"
[capture]
batch_size = 16
[[probe]]
kind = "logistic"
Cs = 3
cv = 3
"""


def test_report_shows_its_phases_unless_quiet_and_numbers_do_not_move(shown, capsys, tmp_path, monkeypatch):
    from probekit.cli import main
    from tests.conftest import write_tiny_suite

    monkeypatch.setenv("PROBEKIT_CACHE", str(tmp_path / "cache"))  # capture runs, not a cache hit

    write_tiny_suite(tmp_path, TINY_SUITE, n=60, hi=8, n_id=60)
    suite = str(tmp_path / "suite.toml")
    assert main(["report", suite, "--out", str(tmp_path / "loud")]) == 0
    out, err = capsys.readouterr()
    assert "probe sweep:" not in out and "capture:" not in out
    assert final_count(err, "capture") == (60, 60, "examples")
    assert final_count(err, "probe sweep") == (2, 2, "cells")  # one probe per layer of the 2-layer model
    assert main(["report", suite, "--out", str(tmp_path / "quiet"), "--quiet"]) == 0
    assert not any(LINE.match(line) for line in capsys.readouterr().err.splitlines())
    loud, quiet = (json.loads((tmp_path / d / "report.json").read_text()) for d in ("loud", "quiet"))
    assert loud["analyses"] == quiet["analyses"] and loud["hypotheses"] == quiet["hypotheses"]


def test_a_redraw_that_only_moves_the_clock_prints_no_line():
    """tqdm's close redraws the last count; a newer elapsed time alone is not a new line."""
    import io

    from probekit.progress import _LineWriter

    sink = io.StringIO()
    w = _LineWriter(sink)
    for text in ["\rx: 2/3 items (67%), 0.1 s elapsed, 00:00 left",
                 "\rx: 3/3 items (100%), 0.1 s elapsed, 00:00 left",
                 "\rx: 3/3 items (100%), 0.2 s elapsed, 00:00 left",  # the close, 0.1 s later
                 "\rx: 4 items, 0.3 s elapsed"]:
        w.write(text)
    assert sink.getvalue().splitlines() == ["x: 2/3 items (67%), 0.1 s elapsed, 00:00 left",
                                            "x: 3/3 items (100%), 0.1 s elapsed, 00:00 left",
                                            "x: 4 items, 0.3 s elapsed"]
