"""Calibration of the default regression sampler's whole sweep with the symmetry moves on (d = 3).

The moves themselves are checked in ``tests/test_regression_scale_move.py`` (ratios, Geweke);
this checks what a user gets from :func:`~pymc_dp.regression.engine.collapsed.sample_regression`
at d = 3, where they are on by default. Releases come from
``benchmarks/regression_x_models.py`` (design ``normal-drawn``): θ, σ² from the NIG prior and
(μ_x, Σ_x) from the default's own prior of x, data sets off the public box redrawn (an event of
the data alone, so the posterior is unchanged), hence every 90 % interval covers its truth with
probability 0.90 when the sampler is right. docs/regression.md, "Calibration of the whole sweep
with the symmetry moves", has the 200-release study behind it.
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
    cover = inside.mean(axis=0)
    per = FAMILY_ALPHA / cover.size
    lo, hi = stats.binom.ppf([per / 2, 1 - per / 2], TRIALS, 0.9) / TRIALS
    assert (lo, hi) == (0.775, 0.9875)
    names = bench.parameter_names(D, drawn=True)
    assert np.all((cover >= lo) & (cover <= hi)), dict(zip(names, cover.round(3), strict=True))
