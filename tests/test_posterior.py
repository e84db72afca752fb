"""The Gibbs posterior vs the exact posterior (no CLT) and vs NUTS on the same PyMC model.

At ε = 0.01 the noise (scale 500) dwarfs the spread of s given θ, so θ and s move in small steps:
through ``pm.sample`` that costs about 400 iterations per effective sample, so the ε = 0.01
``pm.sample`` comparison is a slow test; the batched engine (same kernels) covers it by default.
"""

import arviz as az
import numpy as np
import pymc as pm
import pytest

import pymc_dp as pmdp
from pymc_dp._compat import posterior_dataset
from pymc_dp.engine.gibbs import sample_gibbs
from pymc_dp.evaluation.exact import exact_posterior
from tests.conftest import binomial_model, sample

PRIOR = (3.0, 5.0)


def _release(epsilon):
    x = np.random.default_rng(21).binomial(5, 0.3, size=1000)
    return pmdp.release(x, pm.Binomial, epsilon=epsilon, trials=5, rng=22)


def _assert_close_to_exact(draws, rel, ess):
    """Mean within 0.1 exact posterior sd and sd within 10%."""
    exact = exact_posterior(rel, prior=PRIOR)
    assert ess > 1000, f"too few effective samples ({ess:.0f}) for a 0.1-sd comparison"
    assert abs(draws.mean() - exact.mean()) < 0.1 * exact.sd()
    assert abs(draws.std() / exact.sd() - 1) < 0.10


@pytest.mark.parametrize("epsilon", [0.01, 0.1])
def test_batched_gibbs_matches_exact_posterior_n1000(epsilon):
    """200 chains × 5000 draws of the kernels the step methods use, n = 1000."""
    rel = _release(epsilon)
    trace = sample_gibbs(
        1,
        family=rel.get_family(),
        prior=PRIOR,
        released=[float(rel.value)],
        n=rel.n,
        scale=rel.scale,
        draws=5000,
        tune=2000,
        chains=200,
    )
    ess = float(az.ess(trace.theta[..., 0]))  # (chain, draw)
    _assert_close_to_exact(trace.theta.ravel(), rel, ess)


@pytest.mark.parametrize(
    "epsilon",
    [pytest.param(0.01, marks=pytest.mark.slow), 0.1],
    ids=lambda e: f"eps={e}",
)
def test_pm_sample_matches_exact_posterior_n1000(epsilon):
    """The step methods through pm.sample, n = 1000, ε ∈ {0.01 (slow), 0.1}."""
    rel = _release(epsilon)
    draws = {0.01: 250_000, 0.1: 8_000}[epsilon]
    with binomial_model(rel, *PRIOR):
        idata = sample(
            draws=draws,
            tune=2000,
            chains=2,
            cores=2,
            random_seed=23,
        )
    ess = float(az.ess(idata, var_names=["p"])["p"])
    _assert_close_to_exact(posterior_dataset(idata)["p"].values.ravel(), rel, ess)


def test_nuts_on_the_same_model_agrees():
    """NUTS on (p, s) with the model's logp gives the Gibbs posterior (ε = 0.1, n = 1000)."""
    x = np.random.default_rng(31).binomial(5, 0.3, size=1000)
    rel = pmdp.release(x, pm.Binomial, epsilon=0.1, trials=5, rng=32)
    model = binomial_model(rel, *PRIOR, method="augmented")
    with model:
        gibbs = sample(
            draws=4000,
            tune=500,
            chains=2,
            cores=2,
            random_seed=33,
        )
        nuts = sample(
            draws=2000,
            tune=1000,
            chains=2,
            cores=2,
            random_seed=34,
            step=pm.NUTS([model["p"], model["y_s"]], target_accept=0.95),
        )
    exact = exact_posterior(rel, prior=PRIOR)
    summaries = []
    for idata in (gibbs, nuts):
        draws = posterior_dataset(idata)["p"].values.ravel()
        mcse = float(az.mcse(idata, var_names=["p"])["p"])
        summaries.append((draws.mean(), draws.std(), mcse))
    (m1, s1, e1), (m2, s2, e2) = summaries
    assert abs(m1 - m2) < 4 * np.hypot(e1, e2) + 0.05 * exact.sd()
    assert abs(s1 / s2 - 1) < 0.15
    for m, s, _ in summaries:
        assert abs(m - exact.mean()) < 0.15 * exact.sd()
        assert abs(s / exact.sd() - 1) < 0.15
