"""Calibration of the default regression sweep with the symmetry moves on (d = 2 and 3).

The moves themselves are checked in ``tests/test_regression_scale_move.py`` (ratios, Geweke);
this checks what a user gets from :func:`~pymc_dp.regression.engine.collapsed.sample_regression`
at d = 3 and d = 2, where they are on by default. Releases come from
``benchmarks/regression_x_models.py``. At d = 3 (design ``normal-drawn``): θ, σ² from the NIG
prior and (μ_x, Σ_x) from the default's own prior of x, data sets off the public box redrawn (an
event of the data alone, so the posterior is unchanged), hence every 90 % interval covers its
truth with probability 0.90 when the sampler is right. docs/regression.md, "Calibration of the
whole sweep with the symmetry moves", has the 200-release study behind it. At d = 2 (design
``mixed``, x's law fixed) the share of releases whose chains disagree is checked as well
(docs/regression.md, "The symmetry moves from d = 2").
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from pymc_dp.regression import default_x_prior
from pymc_dp.regression.engine.collapsed import sample_regression
from pymc_dp.regression.kernels.scale_move import SCALE_STEPS

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "regression_x_models.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("regression_x_models", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def test_scale_steps_must_be_positive(bench):
    _, rels = bench.simulate(np.random.default_rng(0), "normal", 50, 1.0, 1, False, 3)
    with pytest.raises(ValueError, match="scale_steps must be finite and > 0"):
        sample_regression(0, released=rels[0].value[None], n=50, prior=bench.nig_prior(3),
                          x_prior=default_x_prior(rels[0].x_bounds), scale=rels[0].scale,
                          draws=1, tune=0, scale_steps=(0.3, -0.1))  # fmt: skip


TRIALS, N, EPSILON, D = 80, 1000, 1.0, 3
FAMILY_ALPHA = 0.01
"""Family-wise false-alarm rate over the 3d + 2 = 11 parameters (Bonferroni)."""


def _assert_covers(cover: np.ndarray, trials: int, names: list) -> tuple[float, float]:
    """Every coverage inside the two-sided binomial band around 0.90 at level
    :data:`FAMILY_ALPHA` / (number of parameters) each; returns the band."""
    per = FAMILY_ALPHA / cover.size
    lo, hi = stats.binom.ppf([per / 2, 1 - per / 2], trials, 0.9) / trials
    assert np.all((cover >= lo) & (cover <= hi)), dict(zip(names, cover.round(3), strict=True))
    return lo, hi


@pytest.mark.slow
def test_default_sweep_with_symmetry_moves_is_calibrated_at_d3(bench):
    """80 releases at d = 3, n = 1000, ε = 1 (where the moment move alone stalls, docs'
    trap table), 2 chains × (500 + 500), 8 candidates: the 90 % interval of each of θ₀ … θ₃,
    σ², μ_x and diag Σ_x (11 parameters) must cover its truth in a share inside the two-sided
    binomial band at level 0.01/11 each, [0.775, 0.9875] (family-wise false alarm < 1 %).
    It fails without the moves (``scale_steps=()``), see docs/regression.md."""
    truth, rels = bench.simulate(np.random.default_rng(3401), "normal-drawn", N, EPSILON,
                                 TRIALS, False, D)  # fmt: skip
    z = np.stack([r.value for r in rels])
    tr = sample_regression(3402, released=z, n=N, prior=bench.nig_prior(D),
                           x_prior=default_x_prior(rels[0].x_bounds), scale=rels[0].scale,
                           tries=8, draws=500, tune=500, chains=2)  # fmt: skip
    inside, _ = bench.covered(tr.theta, tr.sigma2, truth, x_loc=tr.x_loc, x_cov=tr.x_cov)
    band = _assert_covers(inside.mean(axis=0), TRIALS, bench.parameter_names(D, drawn=True))
    assert band == (0.775, 0.9875)


def test_symmetry_moves_are_on_by_default_from_d2(bench):
    """At d = 2 the default (``scale_steps=None``) makes the moves: its seeded chains are those
    of ``scale_steps=SCALE_STEPS`` and not those without the moves."""
    _, rels = bench.simulate(np.random.default_rng(5), "mixed", 100, 1.0, 1, False, 2)
    kw = dict(released=rels[0].value[None], n=100, prior=bench.nig_prior(2),
              x_prior=default_x_prior(rels[0].x_bounds), scale=rels[0].scale, draws=5,
              tune=5, chains=1)  # fmt: skip
    default = sample_regression(7, **kw).theta
    np.testing.assert_array_equal(
        default, sample_regression(7, scale_steps=SCALE_STEPS, **kw).theta
    )
    assert not np.array_equal(default, sample_regression(7, scale_steps=(), **kw).theta)


D2_TRIALS, D2_N, D2_EPSILON = 80, 1000, 0.1


@pytest.mark.slow
def test_default_sweep_mixes_and_is_calibrated_at_d2_with_a_binary_covariate(bench):
    """80 releases at d = 2 with a binary indicator beside a normal covariate (design
    ``mixed``), n = 1000, ε = 0.1, 2 chains × (300 + 1000), 8 candidates (the settings of
    docs/regression.md's d = 2 study): at most 5 % of the releases may have a largest R-hat of
    (θ, σ²) above 1.05, and the 90 % interval of each of θ₀, θ₁, θ₂ and σ² must cover its truth
    in a share inside the two-sided binomial band at level 0.01/4 each. Without the symmetry
    moves (``scale_steps=()``, the default below d = 3 until 2026-12-02) every one of 200 such
    releases had R-hat above 1.05 (median 1.31) and θ₁, θ₂ covered 0.835 and 0.825."""
    truth, rels = bench.simulate(np.random.default_rng(3403), "mixed", D2_N, D2_EPSILON,
                                 D2_TRIALS, False, 2)  # fmt: skip
    z = np.stack([r.value for r in rels])
    tr = sample_regression(3404, released=z, n=D2_N, prior=bench.nig_prior(2),
                           x_prior=default_x_prior(rels[0].x_bounds), scale=rels[0].scale,
                           tries=8, draws=1000, tune=300, chains=2)  # fmt: skip
    rhat = bench.rhat_max(tr.theta, tr.sigma2)
    assert np.mean(rhat > 1.05) <= 0.05, np.quantile(rhat, [0.5, 0.9, 1.0]).round(3)
    cover = bench.covered(tr.theta, tr.sigma2, truth)[0].mean(axis=0)
    _assert_covers(cover, D2_TRIALS, bench.parameter_names(2, drawn=False))
