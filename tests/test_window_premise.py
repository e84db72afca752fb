"""The window premise of windowed default models (issue 36: far modes of window sums)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pymc as pm
import pytest
from scipy import stats

import pymc_dp as pmdp
from pymc_dp.evaluation.modes import separated_modes
from pymc_dp.model.ready_made import build_model
from pymc_dp.model.window_premise import WINDOW_RECORDS, add_window_premise


def _mdvis_like_release():
    """A Poisson release over [0, 30] whose window sum is n·2.69 (randhie.mdvis at ε = 0.1).

    Under the plain Gamma prior its posterior has a far mode near λ ≈ 38.5 (the few records a
    law of mean 38.5 puts in the window add up to the same sum) holding about 14% of the mass.
    """
    x = np.random.default_rng(0).poisson(2.69, size=20_190)
    rel = pmdp.release(x, pm.Poisson, epsilon=0.1, bounds=(0.0, 30.0), rng=1)
    return dataclasses.replace(rel, value=np.asarray(20_190 * 2.69))


def _log_density(model, lam):
    point = {"lam_log__": np.log(lam)}
    return float(model.compile_logp(jacobian=False)(point))


def test_premise_adds_k_log_window_mass():
    rel = _mdvis_like_release()
    with_premise, without = build_model(rel), build_model(rel, window_records=0)
    assert [p.name for p in with_premise.potentials] == ["window_premise"]
    assert not without.potentials
    for lam in (2.69, 38.5):
        added = _log_density(with_premise, lam) - _log_density(without, lam)
        assert added == pytest.approx(WINDOW_RECORDS * stats.poisson(lam).logcdf(30), rel=1e-6)


def test_premise_rules():
    rel = _mdvis_like_release()
    with pytest.raises(ValueError, match="records must be >= 0"):
        build_model(rel, window_records=-1)
    binary = pmdp.release(np.array([0, 1, 1]), pm.Bernoulli, epsilon=1.0, rng=0)
    assert not build_model(binary).potentials  # no window, no premise
    with pm.Model():
        lam = pm.Gamma("lam", 2.0, 1.0)
        assert add_window_premise(rel.get_family(), lam, (0.0, 30.0), records=0) is None


@pytest.mark.slow
def test_far_mode_of_a_window_sum_is_gone():
    """Plain prior: a far mode near 38.5 holds > 5%; default model: < 1% (1 chain, 2000 draws)."""
    rel = _mdvis_like_release()
    masses = {}
    for k in (0.0, WINDOW_RECORDS):
        with build_model(rel, window_records=k):
            idata = pm.sample(draws=2000, tune=200, chains=1, random_seed=3, progressbar=False)
        lam = idata.posterior["lam"].values.ravel()
        masses[k] = float(np.mean(lam > 10.0))
        if k:
            (mode,) = separated_modes(lam)
            assert mode.low < 2.69 < mode.high
    assert masses[0.0] > 0.05
    assert masses[WINDOW_RECORDS] < 0.01
