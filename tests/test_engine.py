"""The batched engine and pm.sample run the same sampler: same posterior for the same release."""

import arviz as az
import numpy as np
import pymc as pm
import pytest
from scipy import stats

import pymc_dp as pmdp
from pymc_dp._compat import posterior_dataset
from pymc_dp.engine.gibbs import sample_gibbs
from tests.conftest import binomial_model, categorical_model, sample


def _thinned(draws):
    """(chain, draw) samples thinned to about one per effective sample, flattened."""
    draws = np.asarray(draws)
    step = max(1, int(draws.size / float(az.ess(az.convert_to_dataset(draws))["x"])))
    return draws[:, ::step].ravel()


def _exponential_release():
    x = np.random.default_rng(21).exponential(1 / 3.0, size=500)
    return pmdp.release(x, pm.Exponential, epsilon=0.2, bounds=(0.0, 1.2), rng=22)


@pytest.mark.parametrize("family", ["binomial", "categorical", "exponential"])
def test_engine_and_pm_sample_agree_on_one_release(family, binomial_release, categorical_release):
    """Same release, same prior; one pm.sample run (4 chains × 1500 after 500 tuning) against
    one run of the batched engine (100 chains × 2000 after 1000 tuning), per component of θ:
    posterior mean within 4 combined MCSE and sd within 5%; and θ (θ_0 for the categorical),
    thinned in each run to about one draw per effective sample, passes a two-sample KS test at
    α = 0.001.

    The default samplers (exact grid draws; NUTS within partially collapsed Gibbs) need far
    fewer draws than Algorithm 1 for the same effective sample size.
    """
    if family == "exponential":
        rel, prior = _exponential_release(), (8.0, 2.0)
        with pm.Model() as model:
            lam = pm.Gamma("p", alpha=prior[0], beta=prior[1])
            pmdp.NoisySuffStat("y", pm.Exponential.dist(lam=lam), release=rel)
    elif family == "binomial":
        rel, prior = binomial_release, (3.0, 5.0)
        model = binomial_model(rel)
    else:
        rel, prior = categorical_release, (np.array([2.0, 2.0, 2.0]),)
        model = categorical_model(rel)
    with model:
        idata = sample(draws=1500, tune=500, chains=4, random_seed=61)
    trace = sample_gibbs(
        52,
        family=rel.get_family(),
        prior=prior,
        released=np.asarray(rel.value)[None],
        n=rel.n,
        scale=rel.scale,
        draws=2000,
        tune=1000,
        chains=100,
        bounds=rel.bounds if family == "exponential" else None,
    )
    pm_draws = posterior_dataset(idata)["p"].values  # (chain, draw, ...)
    engine_draws = trace.theta[:, :, 0]  # (chain, draw, ...)
    if family != "categorical":
        pm_draws, engine_draws = pm_draws[..., None], engine_draws[..., None]
    for k in range(pm_draws.shape[-1]):
        a, b = pm_draws[..., k], engine_draws[..., k]
        se = np.hypot(_mcse(a), _mcse(b))
        assert abs(a.mean() - b.mean()) < 4 * se
        assert abs(a.std() / b.std() - 1) < 0.05
    a, b = _thinned(pm_draws[..., 0]), _thinned(engine_draws[..., 0])
    assert min(a.size, b.size) > 300, "too few effective draws for the test to have power"
    assert stats.ks_2samp(a, b).pvalue > 0.001


def _mcse(draws):
    """Monte Carlo standard error of the mean of (chain, draw) samples."""
    return float(az.mcse(az.convert_to_dataset(np.asarray(draws)), method="mean")["x"])


def test_engine_rejects_bad_arguments():
    fam = pmdp.Release(
        value=1.0, n=5, epsilon=1.0, sensitivity=1.0, bounds=(0, 1), family="bernoulli"
    ).get_family()
    with pytest.raises(ValueError, match="released must have shape"):
        sample_gibbs(0, family=fam, prior=(1, 1), released=[[1.0]], n=5, scale=1.0, draws=5)
    with pytest.raises(ValueError, match="n must be an integer >= 1"):
        sample_gibbs(0, family=fam, prior=(1, 1), released=[1.0], n=0, scale=1.0, draws=5)
    with pytest.raises(ValueError, match="prior hyperparameters must be finite and > 0"):
        sample_gibbs(0, family=fam, prior=(0, 1), released=[1.0], n=5, scale=1.0, draws=5)
