"""Regression studies (Figures 3 and 4 of Bernstein & Sheldon 2019): pipeline and checks."""

import dataclasses
import json

import numpy as np
import pytest

from pymc_dp.studies.regression import (
    RegressionPoint,
    RegressionSettings,
    SyntheticDesign,
    run_regression_point,
    simulate_trials,
)
from pymc_dp.studies.regression_predictive import (
    PredictiveResult,
    PredictiveSettings,
    run_predictive_study,
)
from pymc_dp.studies.regression_report import (
    RegressionGrid,
    evaluate_predictive_checks,
    evaluate_synthetic_checks,
    run_regression_study,
)

TINY = RegressionGrid(
    n_values=(10,),
    epsilons=(1.0,),
    settings=RegressionSettings(trials=20, tune=20, draws=60, reference_draws=100, mmd_draws=40),
    predictive=PredictiveSettings(
        splits=3, epsilons=(1.0,), tune=20, draws=60, reference_draws=200
    ),
)


def _point(ks_gibbs, naive_ks=0.6, coverage=0.95, trials=400):
    """A fabricated result: every method's KS and coverage as given."""
    methods = ("nonprivate", "naive", "gibbs_noisy", "gibbs_update", "default")
    ks = {m: [0.03] * 3 for m in methods}
    ks["naive"] = [naive_ks] * 3
    ks["gibbs_noisy"] = ks["gibbs_update"] = ks["default"] = [ks_gibbs] * 3
    return RegressionPoint(
        n=10, epsilon=0.1, ks=ks, ks_pvalue={m: [0.5] * 3 for m in methods},
        coverage95={m: [coverage] * 3 for m in methods},
        mmd2={m: (0.1, 0.01) for m in ("naive", "gibbs_noisy", "gibbs_update", "default")},
        mmd_difference=(-0.05, 0.01), default_mmd_difference=(-0.01, 0.002),
        seconds={m: 1.0 for m in methods},
        trials={m: trials for m in methods}, redrawn=0, quantiles={},
    )  # fmt: skip


def _by_name(checks):
    return {c.name: c.passed for c in checks}


def test_synthetic_checks_pass_on_good_and_fail_on_fabricated_bad_results():
    grid = RegressionGrid()
    good = _by_name(evaluate_synthetic_checks([_point(0.03)], grid))
    assert all(good.values()), good
    bad = _by_name(evaluate_synthetic_checks([_point(0.3, naive_ks=0.03, coverage=0.8)], grid))
    assert not bad["gibbs_noisy_calibrated"] and not bad["gibbs_update_calibrated"]
    assert not bad["naive_miscalibrated_small_n_eps"] and not bad["gibbs_coverage95"]
    assert not bad["default_calibrated"] and not bad["default_coverage95"]
    assert bad["nonprivate_calibrated"]
    # 0.975 is outside the 0.93–0.97 though within 4 standard errors of 0.95.
    wide = _by_name(evaluate_synthetic_checks([_point(0.03, coverage=0.975)], grid))
    assert not wide["default_coverage95"] and wide["gibbs_coverage95"]
    worse_mmd = dataclasses.replace(
        _point(0.03), mmd_difference=(0.1, 0.01), default_mmd_difference=(0.01, 0.002)
    )
    worse = _by_name(evaluate_synthetic_checks([worse_mmd], grid))
    assert not worse["gibbs_mmd_at_most_naive"] and not worse["default_mmd_below_gibbs_update"]


def test_predictive_checks_fail_when_gibbs_is_far_or_naive_is_close():
    def result(gibbs, naive):
        cov = {
            "nonprivate": {0.5: 0.5, 0.9: 0.9},
            "naive": {0.5: naive, 0.9: 0.9},
            "gibbs_noisy": {0.5: gibbs, 0.9: 0.9},
            "gibbs_update": {0.5: gibbs, 0.9: 0.9},
            "default": {0.5: gibbs, 0.9: 0.9},
        }
        return PredictiveResult(1.0, cov, {m: 0.5 for m in cov}, 1000)  # fmt: skip

    grid = RegressionGrid()
    assert all(_by_name(evaluate_predictive_checks([result(0.52, 0.2)], grid)).values())
    bad = _by_name(evaluate_predictive_checks([result(0.3, 0.48)], grid))
    assert not any(bad.values()), bad


def test_point_scores_every_method_with_valid_numbers():
    settings = dataclasses.replace(TINY.settings, trials=30)
    point = run_regression_point(10, 1.0, settings, np.random.default_rng(0))
    assert set(point.ks) == {"nonprivate", "naive", "gibbs_noisy", "gibbs_update", "default"}
    for method, ks in point.ks.items():
        assert len(ks) == 3 and all(0 <= k <= 1 for k in ks)
        assert point.quantiles[method].shape == (30, 3)
        assert all(0 <= c <= 1 for c in point.coverage95[method])
    assert set(point.mmd2) == {"naive", "gibbs_noisy", "gibbs_update", "default"}
    assert len(point.to_rows()) == 5 * 3


@pytest.mark.parametrize("choice", ["box", "design"])
def test_default_gets_the_prior_of_x_the_settings_name(monkeypatch, choice):
    import pymc_dp.studies.regression as study

    seen = []
    real = study.sample_regression

    def spy(*args, **kwargs):
        seen.append(kwargs["x_prior"])
        return real(*args, **kwargs)

    monkeypatch.setattr(study, "sample_regression", spy)
    settings = dataclasses.replace(TINY.settings, trials=4, default_x_prior=choice)
    run_regression_point(10, 1.0, settings, np.random.default_rng(0))
    design = SyntheticDesign()
    expected = design.x_prior if choice == "design" else study.default_x_prior([(-2.0, 2.0)])
    (got,) = seen
    assert any(np.any(a != b) for a, b in zip(design.x_prior, study.default_x_prior([(-2.0, 2.0)])))
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a, b)


def test_unknown_prior_of_x_for_the_default_is_refused():
    settings = dataclasses.replace(TINY.settings, default_x_prior="uniform")
    with pytest.raises(ValueError, match="default_x_prior must be 'box' or 'design'"):
        run_regression_point(10, 1.0, settings, np.random.default_rng(0))


def test_simulated_trials_respect_the_box_and_the_seed():
    design = SyntheticDesign()
    truth, x, y, _ = simulate_trials(np.random.default_rng(1), design, trials=5, n=50)
    assert truth.shape == (5, 3) and x.shape == (5, 50, 1) and y.shape == (5, 50)
    assert np.all(np.abs(x) <= design.x_bound) and np.all(np.abs(y) <= design.y_bound)
    again = simulate_trials(np.random.default_rng(1), design, trials=5, n=50)
    np.testing.assert_array_equal(again[2], y)


def test_tiny_study_writes_figures_tables_and_report(tmp_path):
    report = run_regression_study(tmp_path, TINY, jobs=1, progress=False)
    names = {p.name for p in report.files}
    assert {
        "figure3_synthetic.csv",
        "figure4_predictive_coverage.csv",
        "report.json",
        "figure3ab_calibration_ks.png",
        "figure4_predictive_coverage.png",
    } <= names
    data = json.loads((tmp_path / "report.json").read_text())
    assert {c["name"] for c in data["checks"]} >= {"gibbs_noisy_calibrated", "naive_predictive_off"}
    assert len(data["predictive"]) == 1 and data["predictive"][0]["test_points"] == 30


@pytest.mark.slow
def test_figure4_reduced_gibbs_close_to_nonprivate_and_naive_off():
    """Figure 4 with the study's 100 splits (1000 test points) but fewer Gibbs iterations
    (2 chains × 1000 draws after 300) and ε ∈ {1, 10}.

    At ε = 10, the 50 % and 90 % predictive coverage of Gibbs-SS-Noisy and Gibbs-SS-Update is
    within 0.1 of the non-private posterior's; at ε = 1 naive's 50 % coverage is more than 0.2
    below it. (At ε ≤ 1 Gibbs-SS-Noisy itself is not within 0.1 on these data, see
    docs/regression.md; with 30 splits its ε = 10 gap was 0.107, so fewer splits are too noisy
    for this tolerance.)"""
    settings = PredictiveSettings(splits=100, epsilons=(1.0, 10.0), tune=300, draws=1000)
    low, high = run_predictive_study(settings, np.random.default_rng(5))
    for method in ("gibbs_noisy", "gibbs_update"):
        for level in (0.5, 0.9):
            assert abs(high.coverage[method][level] - high.coverage["nonprivate"][level]) <= 0.1
    assert low.coverage["nonprivate"][0.5] - low.coverage["naive"][0.5] > 0.2
