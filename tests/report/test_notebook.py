"""Results display themselves in a notebook (issue 35): HTML table + plot, frame, plot, repr."""

import subprocess
import sys

import numpy as np
import pytest
import torch

from probekit.errors import ConfigError, ProbekitError
from probekit.report.notebook import NOTEBOOK_INSTALL_HINT, NotebookMixin
from tests.report.notebook_checks import check_display, parse_html


def _sweep(ood: bool = True):
    from probekit.probes import SweepConfig, sweep_layers

    rng = np.random.default_rng(0)
    n, d = 240, 8
    y = rng.integers(0, 2, n)
    acts = rng.normal(size=(3, n, d)).astype(np.float32)
    acts[1] += 1.5 * y[:, None].astype(np.float32)  # planted at layer 1
    split = dict(train_idx=np.arange(120), test_idx=np.arange(120, 180))
    if ood:
        split["ood_idx"] = {"far": np.arange(180, 240)}
    return sweep_layers(torch.from_numpy(acts), y, config=SweepConfig(Cs=3, cv=3, n_bootstrap=1000), **split)


def test_sweep_result_displays_its_report_table_and_plot(single_thread):
    res = _sweep()
    assert res.best_layer == 1
    parsed = check_display(
        res, headers=["site", "C", "train accuracy", "CV validation accuracy", "test accuracy",
                      "test 95% CI", "OOD far", "gap far"],
        numbers={"test": ".3f", "val": ".3f", "train": ".3f", "gap/far": "+.3f"},
    )
    (table,) = parsed.tables
    assert len(table["cells"]) == 3 * len(table["headers"])  # one row per layer
    width = len(table["headers"])
    assert [table["cells"][i * width] for i in range(3)] == ["acts@0", "acts@1", "acts@2"]
    recs = res.to_records()
    assert [r["selected"] for r in recs] == [False, True, False]
    assert recs[1]["test"] == pytest.approx(float(res.test[1]))
    assert f"[{recs[1]['test_ci_low']:.3f}, {recs[1]['test_ci_high']:.3f}]" in table["cells"]
    fig = res.plot()
    assert fig.axes[0].get_ylabel() == "accuracy" and fig.axes[0].get_xlabel() == "site"
    assert "best acts@1" in repr(res) and f"test {res.best_test:.3f}" in repr(res)


def test_sweep_blocks_are_the_suite_report_blocks(single_thread):
    """One renderer: the [[probe]] analysis and the notebook call the same block builder."""
    from probekit.probes.blocks import sweep_blocks

    res = _sweep(ood=False)
    assert res._blocks() == tuple(sweep_blocks(res))
    with_extras = sweep_blocks(res, label="y", chance=0.5, chance_text="coin",
                               permutation={"n_permutations": 9, "p_values": [0.5, 0.1, 0.5],
                                            "p_adjusted": [1.0, 0.3, 1.0], "correction": "holm"})
    assert with_extras[0].text.endswith("0 of 3 sites significant after holm at alpha=0.05.")
    assert [type(b).__name__ for b in with_extras] == ["Text", "LinePlot", "LinePlot", "Table"]


def test_permutation_test_result_displays(single_thread):
    from probekit.probes import probe_permutation_test

    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 80)
    X = rng.normal(size=(80, 4)) + 2.0 * y[:, None]
    res = probe_permutation_test(X, y, train_idx=np.arange(50), test_idx=np.arange(50, 80),
                                 n_permutations=19, random_state=0)
    parsed = check_display(res, headers=["test", "statistic", "p", "n"],
                           numbers={"statistic": ".4g", "p_value": ".3g"}, plot=False)
    assert f"{res.p_value:.3g}" == "0.05"  # the floor 1/(1+19): a planted signal
    assert any("reject H0" in t for t in [res._repr_html_()])
    assert parsed.images == []
    with pytest.raises(ConfigError, match="has no plot"):
        res.plot()


def test_stats_results_display():
    from probekit.stats import adjust_pvalues
    from probekit.stats.result import ConfidenceInterval, StatTestResult

    t = StatTestResult(statistic=2.5, p_value=0.0123, n=20, method="paired t-test",
                       effect_size=0.56, effect_size_name="d_z", ci_low=0.1, ci_high=0.9)
    check_display(t, headers=["statistic", "p", "effect size (d_z)", "95% CI"],
                  numbers={"statistic": ".4g", "p_value": ".3g", "effect_size": ".3g"}, plot=False)
    assert "[0.100, 0.900]" in parse_html(t._repr_html_()).tables[0]["cells"]
    assert repr(t) == "StatTestResult(paired t-test: statistic=2.5, p=0.0123, n=20)"
    m = adjust_pvalues(np.array([0.001, 0.02, 0.5]), method="holm", alpha=0.05)
    parsed = check_display(m, headers=["p", "p (holm)", "reject at alpha=0.05"],
                           numbers={"p_value": ".3g", "p_adjusted": ".3g"}, plot=False)
    assert parsed.tables[0]["cells"][-1] == "False"
    ci = ConfidenceInterval(estimate=0.7, low=0.6, high=0.8, confidence_level=0.95,
                            n_resamples=1000, n=50)
    check_display(ci, headers=["estimate", "95% CI"], numbers={"estimate": ".4g"}, plot=False)


def test_to_frame_without_pandas_names_the_extra(monkeypatch):
    from probekit.stats.result import StatTestResult

    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas -> ImportError
    t = StatTestResult(statistic=1.0, p_value=0.5, n=3, method="m")
    with pytest.raises(ProbekitError, match=r"pip install 'probekit-interp\[notebook\]'"):
        t.to_frame()
    assert NOTEBOOK_INSTALL_HINT in "pip install 'probekit-interp[notebook]'"


def test_importing_stats_loads_no_renderer():
    """stats results use the mixin, which loads matplotlib/jinja2/pandas only when displaying."""
    code = ("import sys, probekit.stats, probekit.report.notebook; "
            "print(sorted(m for m in ('matplotlib', 'jinja2', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_mixin_repr_is_not_replaced_by_dataclass_repr():
    """Every result class using the mixin is declared repr=False (else a field dump prints)."""
    import probekit.circuits.eap
    import probekit.circuits.lens
    import probekit.circuits.patch_grid
    import probekit.geometry
    import probekit.grokking.progress_measures
    import probekit.homomorphism
    import probekit.hypotheses.runner
    import probekit.kg.bridge
    import probekit.neurons
    import probekit.probes
    import probekit.similarity
    import probekit.stats
    import probekit.suites.analyses.probe
    import probekit.suites.result  # noqa: F401

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    classes = list(subclasses(NotebookMixin))
    assert len(classes) >= 20
    for cls in classes:
        assert cls.__repr__ is NotebookMixin.__repr__, cls


def test_correctness_probe_result_displays(single_thread):
    from probekit.probes import CorrectnessConfig, correctness_probe
    from probekit.probes.blocks import correctness_blocks
    from tests.probes.test_probe_control_correctness import correctness_data

    acts, correct, _ = correctness_data(n=300)
    ood_acts, ood_correct, _ = correctness_data(n=150, seed=1)
    res = correctness_probe(acts, correct, layers=[0, 2, 4, 6, 8, 10],
                            ood={"cities": (ood_acts + 0.3, ood_correct)}, config=CorrectnessConfig(random_state=0, n_permutations=19))
    parsed = check_display(res, headers=["site", "CV AUROC (ID, 3 folds)", "+-1.96 SE",
                                         "pooled out-of-fold AUROC", "OOD cities AUROC"],
                           numbers={"cv_auroc": ".3f", "pooled_auroc": ".3f", "gap/cities": "+.3f"})
    recs = res.to_records()
    assert [r["layer"] for r in recs] == [0, 2, 4, 6, 8, 10] and recs[3]["best"]
    assert recs[3]["cv_auroc"] == pytest.approx(float(res.auroc_mean[3]))
    assert parsed.tables[0]["cells"][3 * len(parsed.tables[0]["headers"])] == "6"
    assert res.plot().axes[0].get_ylabel() == "AUROC"
    assert res._blocks() == tuple(correctness_blocks(res, ["0", "2", "4", "6", "8", "10"]))
    assert "best layer 6" in repr(res)


def test_selectivity_and_checkpoint_sweeps_display(single_thread):
    from probekit.probes import CheckpointSweepResult, SelectivityResult

    a, b = _sweep(ood=False), _sweep(ood=False)
    sel = SelectivityResult(task=a, control=b, selectivity=a.test - b.test)
    parsed = check_display(sel, headers=["control test", "selectivity"],
                           numbers={"selectivity": "+.3f", "control_test": ".3f"})
    assert len(parsed.images) == 2  # the sweep and the selectivity bars
    series = CheckpointSweepResult(checkpoints=("runs/step_100", "runs/step_200"), sweeps=(a, b))
    parsed = check_display(series, headers=["checkpoint", "site", "test accuracy"],
                           numbers={"test": ".3f"})
    assert "step_200" in parsed.tables[0]["cells"] and "acts@2" in parsed.tables[0]["cells"]
    assert len(series.to_records()) == 6


def test_suite_analysis_result_displays_its_report_section():
    from probekit.report.blocks import Column, LinePlot, Series, Table
    from probekit.suites.result import AnalysisResult

    table = Table(columns=(Column(key="site", header="site", fmt="", align="left"),
                           Column(key="cap", header="capacity")),
                  rows=({"site": "resid_post@0", "cap": 0.25}, {"site": "resid_post@1", "cap": 0.5}))
    plot = LinePlot(title="capacity by site", x_labels=("resid_post@0", "resid_post@1"),
                    ylabel="capacity", series=(Series(name="capacity", values=(0.25, 0.5)),))
    res = AnalysisResult(section="geometry", title="Manifold capacity", blocks=(plot, table),
                         warnings=("few classes",))
    parsed = check_display(res, headers=["site", "capacity"], numbers={"cap": ".3f"})
    assert res.to_records() == [dict(r) for r in table.rows]
    assert "Warning: few classes" in res._repr_html_()
    assert parsed.images and res.plot().axes[0].get_ylabel() == "capacity"
