"""Geometry results display themselves in a notebook (issue 35): the [[geometry]] report blocks."""

import numpy as np
import pytest
import torch

from probekit.geometry import geometry_by_layer, manifold_capacity, manifolds_from_labels
from tests.report.notebook_checks import check_display


def _acts():
    g = torch.Generator().manual_seed(0)
    c, per, d = 6, 10, 30
    y = np.repeat(np.arange(c), per)
    noise = torch.randn(c * per, d, generator=g, dtype=torch.float64)
    centres = 4 * torch.randn(c, d, generator=g, dtype=torch.float64)
    return torch.stack([noise, centres[torch.from_numpy(y)] + 0.3 * noise]), y


def test_geometry_curves_display_the_report_plots_and_table():
    acts, y = _acts()
    cur = geometry_by_layer(acts, y, layer_names=["blocks.0.hook_resid_post", "blocks.1.hook_resid_post"],
                            max_points=8, n_t=50, seed=0)
    parsed = check_display(cur, headers=["site", "capacity alpha", "radius R", "dimension D", "NC1"],
                           numbers={"capacity": ".4g", "radius": ".3g", "nc1": ".4g"})
    assert len(parsed.images) == 5  # capacity, dimension, radius, utility, NC1 by site
    assert [r["layer"] for r in cur.to_records()] == cur.layers
    assert "resid_post@1" in parsed.tables[0]["cells"]
    assert cur.plot().axes[0].get_ylabel() == "alpha"
    assert "max at blocks.1.hook_resid_post" in repr(cur)


def test_manifold_capacity_result_displays_its_tables():
    acts, y = _acts()
    ms, _ = manifolds_from_labels(acts[1], y, max_points=8, seed=0)
    res = manifold_capacity(ms, n_t=50, seed=0)
    parsed = check_display(res, headers=["capacity alpha", "capacity alpha_M", "radius R_M"],
                           numbers={"capacity": ".4g", "dimension": ".3g"}, plot=False)
    assert f"{res.capacity:.4g}" in parsed.tables[0]["cells"]
    assert len(res.to_records()) == 6


def test_factorization_result_displays_the_report_plots_and_table():
    from factorization_cases import grid

    from probekit.geometry.factorization import concept_factorization

    z0, a, b = grid()
    z1, *_ = grid(interaction=3.0)
    res = concept_factorization(torch.stack([z0, z1]), a, b, train=(a + b) % 4 != 0)
    parsed = check_display(res, headers=["site", "R2 fitted combos", "R2 unseen combos",
                                         "min angle (deg)", "rank a (sv > rtol)"],
                           numbers={"r2_train": ".4f", "r2_heldout": ".4f", "angle_min": ".1f"})
    assert "LF R2 (Uselis)" not in parsed.tables[0]["headers"]  # only its own measures
    rec = res.to_records()[0]
    assert rec["r2_heldout"] == pytest.approx(1.0, abs=1e-9)
    assert (rec["rank_a"], rec["rank_b"]) == (2, 3) and abs(rec["angle_min"] - 90.0) < 1e-6
    assert len(parsed.images) == 3  # linearity, orthogonality, rank (no |cos| without Uselis)
    assert res.plot().axes[0].get_ylabel() == "R2"


def test_dynamics_markers_display_rotation_and_table():
    from probekit.geometry.dynamics import checkpoint_dynamics

    g = torch.Generator().manual_seed(0)
    w = torch.randn(4, 4, generator=g, dtype=torch.float64)
    states = [{"W_in": w + 0.5 * i * torch.eye(4, dtype=torch.float64), "W_out": w.T.clone()}
              for i in range(3)]
    m = checkpoint_dynamics(states, steps=[0, 10, 20])
    check_display(m, headers=["step", "weight", "layer rotation", "condition number"],
                  numbers={"rotation": ".3f", "condition": ".4g"})
    recs = m.to_records()
    assert len(recs) == 6 and (recs[0]["step"], recs[0]["weight"]) == (0, "W_in")
    assert recs[0]["condition"] == float(m.condition["W_in"][0])
    assert recs[4]["rotation"] == float(m.rotation["W_in"][2]) > 0
    assert [r["rotation"] for r in recs if r["weight"] == "W_out"] == pytest.approx([0.0] * 3, abs=1e-9)
    assert "most rotated W_in" in repr(m)


def test_concept_means_scores_display_the_factorization_view():
    from factorization_cases import grid

    from probekit.geometry import concept_means_scores

    z, a, b = grid()
    zi, *_ = grid(interaction=2.0)
    got = concept_means_scores(torch.stack([z, zi]), [a, b])
    parsed = check_display(got, headers=["LF R2 (Uselis)", "k95 a (Uselis)", "k95 b (Uselis)"],
                           numbers={"linear_r2": ".4f", "cross_concept_abs_cos": ".3f"})
    rec = got.to_records()[0]
    assert (rec["k95_a"], rec["k95_b"]) == (2, 3) and rec["linear_r2"] == pytest.approx(1.0)
    assert "R2 fitted combos" not in parsed.tables[0]["headers"]


def test_simulated_capacity_displays_the_separable_fraction_curve():
    from probekit.geometry.simulated import simulated_capacity

    rs = np.random.RandomState(0)
    xs = [rs.randn(30, 2) for _ in range(8)]
    sim = simulated_capacity(xs, n_dims=[2, 4, 8, 16], n_dichotomies=20, seed=0)
    check_display(sim, headers=["projection dimension n", "fraction separable", "dichotomies"],
                  numbers={"fraction_separable": ".3f"})
    assert [r["n_dim"] for r in sim.to_records()] == [2, 4, 8, 16]
    ys = sim.plot().axes[0].get_lines()[0].get_ydata()
    assert list(ys) == pytest.approx(list(sim.fraction_separable))
    assert sim.fraction_separable[0] < 0.5 <= sim.fraction_separable[-1]
    assert repr(sim).startswith(f"SimulatedCapacityResult(capacity {sim.capacity:.4g} from 4 dim")
