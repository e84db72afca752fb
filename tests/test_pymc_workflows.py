"""PyMC's standard workflows on every kind of model the plugin builds (issue 18, item 3).

Algorithm 1 models and regression models start each chain from a prior draw through their step
methods, not through ``initval``; so ``pm.compute_log_likelihood``, ArviZ's LOO, posterior
predictive sampling, ``pm.do``, ``pm.observe`` and ``freeze_dims_and_data`` all work on them.
(The default collapsed models are covered in ``tests/test_collapsed.py``.)
"""

import arviz as az
import numpy as np
import pymc as pm
import pytest
from pymc.model.transform.optimization import freeze_dims_and_data

import pymc_dp as pmdp
from pymc_dp.model.ready_made import build_model
from pymc_dp.regression import NoisyRegressionStat, release_regression, x_moments_from_release
from tests.conftest import binomial_model, categorical_model, sample


def _regression(method):
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, size=(300, 1))
    y = np.clip(0.5 + 1.5 * x[:, 0] + rng.normal(0, 0.5, 300), -4, 4)
    rel = release_regression(
        x, y, x_bounds=[(-1.0, 1.0)], y_bounds=(-4.0, 4.0), epsilon=2.0, moments_share=0.2, rng=6
    )
    kwargs = {"x_moments": x_moments_from_release(rel)} if method == "gibbs-ss" else {}
    with pm.Model() as model:
        sigma2 = pm.InverseGamma("sigma2", alpha=2.0, beta=1.0)
        theta = pm.MvNormal("theta", np.zeros(2), cov=sigma2 * 4.0 * np.eye(2))
        NoisyRegressionStat("z", theta=theta, sigma2=sigma2, release=rel, method=method, **kwargs)
    return model, "theta", np.array([0.5, 1.5]), "z"


def _model(kind, binomial_release, categorical_release):
    """(model, θ name, a value of θ, observed name) for each kind of model."""
    if kind == "binomial-augmented":
        return binomial_model(binomial_release, method="augmented"), "p", 0.3, "y"
    if kind == "categorical-augmented":
        theta = np.array([0.2, 0.5, 0.3])
        return categorical_model(categorical_release, method="augmented"), "p", theta, "y"
    if kind == "poisson-window-augmented":
        x = np.random.default_rng(8).poisson(4.0, size=500)
        rel = pmdp.release(x, pm.Poisson, epsilon=0.5, bounds=(0, 12), rng=9)
        return build_model(rel, method="augmented"), "lam", 4.0, "y"
    return _regression(kind.removeprefix("regression-"))


@pytest.mark.parametrize(
    "kind",
    [
        "binomial-augmented",
        "categorical-augmented",
        "poisson-window-augmented",
        "regression-collapsed",
        "regression-gibbs-ss",
    ],
)
def test_standard_pymc_workflows_run(kind, binomial_release, categorical_release):
    """No initval on any variable; log-likelihood, LOO, predictive, do, observe and freezing."""
    model, theta, value, observed = _model(kind, binomial_release, categorical_release)
    assert all(v is None for v in model.rvs_to_initial_values.values())
    with model:
        idata = sample(draws=60, tune=60, chains=2, cores=1, random_seed=7)
        pp = pm.sample_posterior_predictive(idata, progressbar=False, random_seed=8)
        ll = pm.compute_log_likelihood(idata, progressbar=False)
    draws = idata.posterior[theta].values
    assert np.all(np.isfinite(draws))
    # Each chain starts from its own prior draw: the two chains' first draws differ.
    assert not np.allclose(draws[0, 0], draws[1, 0])
    assert np.all(np.isfinite(pp.posterior_predictive[observed].values))
    assert np.all(np.isfinite(ll.log_likelihood[observed].values))
    loo = az.loo(ll)
    assert np.isfinite(float(getattr(loo, "elpd_loo", None) or loo.elpd))  # ArviZ 0.x / 1.x
    assert theta not in {v.name for v in pm.do(model, {theta: value}).free_RVs}
    assert theta in {v.name for v in pm.observe(model, {theta: value}).observed_RVs}
    assert theta in {v.name for v in freeze_dims_and_data(model).free_RVs}


@pytest.mark.parametrize("method", ["gibbs-ss", "collapsed"])
def test_regression_chains_start_from_prior_draws(method, monkeypatch):
    """The regression step's conjugate draw of σ² is from its InverseGamma(2, 1) prior at each
    chain's first step (KS p > 0.01 over 300 chains), and given the statistic afterwards (KS
    p < 1e-6 against the prior). The collapsed step's moves after that draw are switched off:
    they move σ² towards the posterior even at the first step."""
    from scipy import stats

    import pymc_dp.regression.model.collapsed_step as collapsed_step
    from pymc_dp.regression.engine.collapsed import SweepStats
    from pymc_dp.regression.kernels.collapsed import MoveState
    from pymc_dp.regression.model.steps import RegressionConjugateStep

    def no_moves(rng, u, suffstat, **kwargs):
        none = np.zeros(u.shape[:-1])
        return MoveState(u, suffstat, none, none), SweepStats(none + np.nan, none > 0)

    monkeypatch.setattr(collapsed_step, "collapsed_sweep", no_moves)
    model, *_ = _regression(method)
    with model:
        step = (
            RegressionConjugateStep()
            if method == "gibbs-ss"
            else collapsed_step.RegressionCollapsedStep()
        )
    point = model.initial_point()
    starts, later = [], []
    for seed in range(300):
        step.set_rng(np.random.default_rng(seed))
        starts.append(np.exp(step.step(point)[0]["sigma2_log__"]))
        later.append(np.exp(step.step(point)[0]["sigma2_log__"]))
    prior = stats.invgamma(2.0, scale=1.0).cdf
    assert stats.kstest(starts, prior).pvalue > 0.01
    assert stats.kstest(later, prior).pvalue < 1e-6
