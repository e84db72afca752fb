"""Calibration studies (Cook, Gelman & Rubin 2006) at a small ε.

Each trial draws θ from the prior, data from the model, releases it, and records the quantile of
the true θ in the posterior. A calibrated posterior gives uniform quantiles: we require a KS
p-value > 0.01 for the Gibbs posterior and < 1e-6 for the naive one (which treats y as s).

Gibbs draws are autocorrelated, and the fraction of correlated draws below θ is not uniform even
for a correct sampler (a sticky chain pushes it to 0 or 1). As in simulation-based calibration
(Talts et al. 2018), each trial's draws are thinned to about their effective sample size and the
quantile is the randomised rank of θ among the thinned draws
(:func:`pymc_dp.evaluation.measures.calibration_quantiles`).

The default study runs the step methods' kernels for all trials at once (batched engine); the
slow study runs the same design through ``pm.sample``.
"""

import numpy as np
import pymc as pm
import pytest
from scipy import stats

import pymc_dp as pmdp
from pymc_dp._compat import posterior_dataset
from pymc_dp.engine.gibbs import sample_gibbs
from pymc_dp.evaluation.measures import calibration_quantiles
from pymc_dp.families import Binomial, Categorical
from tests.conftest import sample

N_RECORDS, EPSILON = 100, 0.1
BETA_PRIOR = (3.0, 5.0)
DIRICHLET_PRIOR = np.array([2.0, 3.0, 4.0])


def _simulate(family, rng, trials):
    """Per trial: true θ, released y, and the naive posterior quantile of θ."""
    if isinstance(family, Categorical):
        theta = rng.dirichlet(DIRICHLET_PRIOR, size=trials)
        records = [rng.choice(3, p=t, size=N_RECORDS) for t in theta]
        prior = (DIRICHLET_PRIOR,)
    else:
        theta = rng.beta(*BETA_PRIOR, size=trials)
        records = [rng.binomial(family.trials, t, size=N_RECORDS) for t in theta]
        prior = BETA_PRIOR
    kwargs = family.params()
    releases = [
        pmdp.release(x, family.pymc_distribution, epsilon=EPSILON, rng=rng, **kwargs)
        for x in records
    ]
    naive_u = []
    for t, rel in zip(theta, releases, strict=True):
        naive = pmdp.naive_posterior(rel, prior=prior)
        if isinstance(family, Categorical):  # marginal of θ_0 under the Dirichlet
            a = naive.alpha
            naive_u.append(stats.beta(a[0], a.sum() - a[0]).cdf(t[0]))
        else:
            naive_u.append(naive.cdf(t))
    return theta, releases, np.array(naive_u), prior


def _first(theta, family):
    """θ itself, or its first component for Categorical (calibration of θ_0, as the paper)."""
    return np.asarray(theta)[..., 0] if isinstance(family, Categorical) else np.asarray(theta)


@pytest.mark.parametrize(
    "family", [Binomial(trials=5), Categorical(categories=3)], ids=["binomial", "categorical"]
)
def test_gibbs_calibrated_naive_not_batched_1000_trials(family):
    """1000 trials, n = 100, ε = 0.1, 2000 draws (1000 for the categorical) after 500 tuning:
    KS p > 0.01 vs < 1e-6.

    The power is in the 1000 trials; the draws (thinned to about one per effective sample)
    need only rank each true θ finely enough. Categorical with 1000 draws, seeds 41, 141, 241:
    Gibbs p = 0.44, 0.93, 0.36; the naive p (which needs no draws) below 1e-80. The binomial
    keeps 2000: its time is in the simulation and the quantiles, not the draws."""
    rng = np.random.default_rng(41)
    theta, releases, naive_u, prior = _simulate(family, rng, trials=1000)
    released = np.stack([r.value for r in releases])
    trace = sample_gibbs(
        rng,
        family=family,
        prior=prior,
        released=released,
        n=N_RECORDS,
        scale=releases[0].scale,
        draws=1000 if isinstance(family, Categorical) else 2000,
        tune=500,
    )
    gibbs_u = calibration_quantiles(_first(trace.theta, family), _first(theta, family), rng=rng)
    assert stats.kstest(gibbs_u, "uniform").pvalue > 0.01
    assert stats.kstest(naive_u, "uniform").pvalue < 1e-6


@pytest.mark.slow
@pytest.mark.parametrize(
    "family", [Binomial(trials=5), Categorical(categories=3)], ids=["binomial", "categorical"]
)
def test_gibbs_calibrated_naive_not_pm_sample_200_trials(family):
    """Trials through pm.sample (2 chains after 500 tuning), n = 100, ε = 0.1: KS p > 0.01 for
    Gibbs, < 1e-6 for naive (over 200 trials).

    Binomial: 200 trials × 2000 draws. Categorical: 100 trials × 1000 draws, since every trial
    compiles a NUTS graph (about 6 s a trial); its releases pin the CLT likelihood: at n = 100
    ``"auto"`` takes the exact sum (test_exact_likelihood checks it against enumeration), and
    this test keeps the partially collapsed CLT sampler, which ``"auto"`` uses beyond n = 1047."""
    rng = np.random.default_rng(42)
    theta, releases, naive_u, _ = _simulate(family, rng, trials=200)
    categorical = isinstance(family, Categorical)
    trials, n_draws = (100, 1000) if categorical else (200, 2000)
    gibbs_u = []
    for t, rel in zip(theta[:trials], releases[:trials], strict=True):
        with pm.Model():
            if isinstance(family, Categorical):
                p = pm.Dirichlet("p", DIRICHLET_PRIOR)
                dist = pm.Categorical.dist(p=p)
            else:
                p = pm.Beta("p", *BETA_PRIOR)
                dist = pm.Binomial.dist(n=family.trials, p=p)
            likelihood = "clt" if categorical else "auto"
            pmdp.NoisySuffStat("y", dist, release=rel, likelihood=likelihood)
            idata = sample(draws=n_draws, tune=500, chains=2, cores=1, random_seed=rng)
        draws = posterior_dataset(idata)["p"].values
        gibbs_u.append(calibration_quantiles(_first(draws, family), _first(t, family), rng=rng))
    assert stats.kstest(gibbs_u, "uniform").pvalue > 0.01
    assert stats.kstest(naive_u, "uniform").pvalue < 1e-6
