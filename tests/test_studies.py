"""The §4 study harness: simulated trials, one grid point, the checks, and the written files."""

import csv
import dataclasses
import json

import numpy as np
import pytest
from scipy import stats

from pymc_dp.studies import DESIGNS, Grid, StudySettings, reproduce, run_point
from pymc_dp.studies.calibration import MethodScore, PointResult
from pymc_dp.studies.reproduce import evaluate_checks

TINY = StudySettings(trials=60, tune=100, draws=300, mmd_draws=50)


# ---- simulated trials ------------------------------------------------------------------
@pytest.mark.parametrize("name", list(DESIGNS))
def test_release_noise_is_laplace_at_sensitivity_over_epsilon(name):
    """4000 trials: y − ŝ passes KS against Laplace(Δ/ε) at α = 0.001, with Δ the family's
    release sensitivity for the design's window."""
    design = DESIGNS[name]
    rng = np.random.default_rng(1)
    sim = design.simulate(rng, trials=4000, n=50, epsilon=0.3)
    delta = design.family.release_sensitivity(design.bounds)
    assert sim.scale == pytest.approx(delta / 0.3)
    if design.windowed:
        # Recompute ŝ from the same records: same generator state, same draws.
        rng = np.random.default_rng(1)
        truth = design.family.draw_conjugate(rng, design.batched_prior(4000))
        _, window = design.draw_statistics(rng, truth, 50, design.bounds)
    else:
        window = sim.statistic
    noise = (sim.released - window).ravel()
    assert stats.kstest(noise, stats.laplace(scale=delta / 0.3).cdf).pvalue > 0.001


def test_exponential_window_sum_matches_the_family_on_each_record_set():
    design = DESIGNS["exponential"]
    truth = np.array([0.5, 3.0, 9.0])
    rng = np.random.default_rng(2)
    full, window = design.draw_statistics(rng, truth, 200, design.bounds)
    records = np.random.default_rng(2).exponential(1.0 / truth[:, None], size=(3, 200))
    for i in range(3):
        assert window[i] == pytest.approx(design.family.window_statistic(records[i], design.bounds))
        assert full[i] == pytest.approx(records[i].sum())
    assert np.all(window < full)  # some records fall outside the central 95% window


def test_exponential_naive_cheats_with_noisy_full_statistic():
    """The paper's "cheating" naive: s of all records + Laplace(Δ/ε), not the window's y."""
    design = DESIGNS["exponential"]
    sim = design.simulate(np.random.default_rng(3), trials=4000, n=50, epsilon=0.5)
    noise = sim.naive_input - sim.statistic
    assert stats.kstest(noise, stats.laplace(scale=sim.scale).cdf).pvalue > 0.001
    assert not np.allclose(sim.naive_input, sim.released)


@pytest.mark.parametrize("name", ["binomial", "multinomial"])
def test_data_model_mean_matches_truth(name):
    """E[s | θ] = n·E[t(x) | θ]: standardised residuals over 4000 trials have mean 0 ± 4 se."""
    design = DESIGNS[name]
    sim = design.simulate(np.random.default_rng(4), trials=4000, n=100, epsilon=1.0)
    t = design.scalar(sim.truth)
    s = design.scalar(sim.statistic)
    m = 100 * (design.family.trials if name == "binomial" else 1)
    z = (s - m * t) / np.sqrt(m * t * (1 - t))
    assert abs(z.mean()) < 4 / np.sqrt(z.size)
    assert z.std() == pytest.approx(1.0, abs=0.05)


# ---- one grid point --------------------------------------------------------------------
def test_run_point_scores_every_method_reproducibly():
    design = DESIGNS["binomial"]
    a = run_point(design, 100, 0.1, TINY, np.random.default_rng(5))
    b = run_point(design, 100, 0.1, TINY, np.random.default_rng(5))
    assert set(a.scores) == {"gibbs", "nonprivate", "naive", "ops"}
    for method, u in a.quantiles.items():
        assert u.shape == (TINY.trials,) and np.all((u >= 0) & (u <= 1))
        np.testing.assert_array_equal(u, b.quantiles[method])
    assert a.scores["nonprivate"].sd_ratio == 1.0
    assert a.scores["gibbs"].mmd2 is not None and a.scores["ops"].mmd2 is None
    assert a.mmd_gibbs_minus_naive is not None
    rows = a.to_rows()
    assert len(rows) == 4 and {"coverage_0.5", "coverage_0.9", "coverage_0.95"} <= set(rows[0])


def test_run_point_without_ops_or_mmd_for_other_models():
    r = run_point(DESIGNS["exponential"], 100, 0.1, TINY, np.random.default_rng(6), with_mmd=False)
    assert set(r.scores) == {"gibbs", "nonprivate", "naive"}
    assert r.mmd_gibbs_minus_naive is None and r.scores["gibbs"].mmd2 is None


@pytest.mark.slow
def test_nonprivate_quantiles_are_exactly_uniform_over_1000_trials():
    """The reference posterior is exact, so its quantiles pass KS (p > 0.01): a check of the
    harness's truth/data/posterior bookkeeping independent of the sampler."""
    settings = dataclasses.replace(TINY, trials=1000, draws=20, tune=0)
    for name in DESIGNS:
        r = run_point(DESIGNS[name], 30, 0.1, settings, np.random.default_rng(7), with_mmd=False)
        assert r.scores["nonprivate"].ks_pvalue > 0.01, name


# ---- checks ----------------------------------------------------------------------------
def _score(ks, sd_ratio=1.0):
    return MethodScore(ks=ks, ks_pvalue=0.5, coverage={0.5: 0.5}, sd_ratio=sd_ratio)


def _point(n, eps, *, gibbs=0.03, naive=0.4, ops_sd=5.0, mmd=(-0.01, 0.002)):
    scores = {"gibbs": _score(gibbs), "nonprivate": _score(0.03), "naive": _score(naive)}
    scores["ops"] = _score(0.05, ops_sd)
    return PointResult("binomial", n, eps, scores, {}, mmd, 100.0, 1.0)


def _passed(points):
    grid = Grid(settings=StudySettings(trials=1000))
    return {c.name: c.passed for c in evaluate_checks(points, grid)}


def test_checks_pass_on_a_paper_like_result():
    assert all(_passed([_point(10, 0.01), _point(3000, 0.1, naive=0.05)]).values())


@pytest.mark.parametrize(
    ("point", "failing"),
    [
        (_point(100, 0.1, gibbs=0.2), "gibbs_calibrated"),
        (_point(100, 0.01, naive=0.03), "naive_miscalibrated_small_n_eps"),
        (_point(100, 0.1, ops_sd=0.9), "ops_overdispersed"),
        (_point(100, 0.1, mmd=(0.01, 0.001)), "gibbs_mmd_at_most_naive"),
    ],
)
def test_each_check_can_fail(point, failing):
    passed = _passed([_point(10, 0.01), point])
    assert not passed[failing]
    assert all(v for k, v in passed.items() if k != failing)


def test_naive_check_ignores_large_n_eps():
    """At n·ε = 300 naive may be calibrated; the claim is only about small n·ε."""
    assert _passed([_point(10, 0.01), _point(3000, 0.1, naive=0.02)])[
        "naive_miscalibrated_small_n_eps"
    ]


# ---- files -----------------------------------------------------------------------------
def test_reproduce_writes_every_figure_and_number(tmp_path):
    grid = Grid(
        n_values=(30, 300),
        epsilons=(0.1,),
        settings=TINY,
        ecdf_point=(300, 0.1),
        trace_point=(300, 0.1),
        trace_iterations=50,
        trace_chains=2,
        extra_points=(),
    )
    report = reproduce(tmp_path, grid, seed=1, jobs=1, progress=False)
    names = {p.name for p in report.files}
    for stem in ("figure1a_calibration_ks", "figure1b_ecdf", "figure1c_mmd", "figure2_traces"):
        assert {f"{stem}.png", f"{stem}.csv"} <= names
        assert (tmp_path / f"{stem}.png").stat().st_size > 10_000
    with (tmp_path / "figure1a_calibration_ks.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * (4 + 3 + 3)  # 2 n values × (binomial 4 methods, others 3)
    data = json.loads((tmp_path / "report.json").read_text())
    assert len(data["points"]) == 6 and len(data["checks"]) == 5
    assert data["grid"]["settings"]["trials"] == TINY.trials
    with (tmp_path / "figure2_traces.csv").open() as f:
        assert len(list(csv.DictReader(f))) == 2 * 2 * 50  # models × chains × iterations
