"""The batched engine and pm.sample run the same sampler: same posterior for the same release."""

import arviz as az
import numpy as np
import pytest

import pymc_dp as pmdp
from pymc_dp._compat import posterior_dataset
from pymc_dp.engine import sample_gibbs
from tests.conftest import binomial_model, categorical_model, sample


@pytest.mark.parametrize("family", ["binomial", "categorical"])
def test_engine_and_pm_sample_agree_on_one_release(family, binomial_release, categorical_release):
    """Posterior mean within 4 combined MCSE and sd within 5%, per component of θ."""
    rel = binomial_release if family == "binomial" else categorical_release
    model = binomial_model(rel) if family == "binomial" else categorical_model(rel)
    prior = (3.0, 5.0) if family == "binomial" else (np.array([2.0, 2.0, 2.0]),)
    with model:
        idata = sample(draws=10_000, tune=1000, chains=2, cores=2, random_seed=51)
    pm_draws = posterior_dataset(idata)["p"].values  # (chain, draw, ...)
    released = np.broadcast_to(rel.value, (100, *rel.value.shape))
    trace = sample_gibbs(
        52,
        family=rel.get_family(),
        prior=prior,
        released=released,
        n=rel.n,
        scale=rel.scale,
        draws=2000,
        tune=1000,
    )
    engine_draws = np.moveaxis(trace.theta, 0, 1)  # (chain, draw, ...)
    for k in range(1 if family == "binomial" else 3):
        a = pm_draws if family == "binomial" else pm_draws[..., k]
        b = engine_draws if family == "binomial" else engine_draws[..., k]
        se = np.hypot(_mcse(a), _mcse(b))
        assert abs(a.mean() - b.mean()) < 4 * se
        assert abs(a.std() / b.std() - 1) < 0.05


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
