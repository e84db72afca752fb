"""NoisyRegressionStat with two binary covariates beside normal ones (the pair model)."""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytest
from engine_agreement import assert_same_posterior_means
from pymc.distributions.distribution import support_point

import pymc_dp as pmdp
from pymc_dp.regression import (
    NIG,
    RegressionCollapsedStep,
    RegressionLevelStep,
    default_mixed_x_prior,
    regression_attrs,
    release_regression,
    sample_level_regression,
)
from pymc_dp.regression.kernels.level_model import (
    LevelParameters,
    columns_first,
    draw_level_statistic,
    level_statistic_logpdf,
    pair_layout,
)
from pymc_dp.regression.model.level_suffstat import LEVEL_KINDS, LevelModelSuffStat, factor_mask

BOX = [(-2.0, 2.0), (0.0, 1.0), (0.0, 1.0)]


def _release(epsilon=1.0, n=400, seed=3, declare=True):
    """A normal covariate (its mean additive in the two binaries), then two binary covariates
    that are 1 together in some records; ``declare``: the release declares them binary."""
    rng = np.random.default_rng(seed)
    b1 = rng.uniform(size=n) < 0.4
    b2 = rng.uniform(size=n) < 0.3 + 0.3 * b1
    x = np.column_stack([rng.normal(0.2 + 0.5 * b1 - 0.4 * b2, 0.5), b1, b2])
    x = np.clip(x.astype(float), -2, 2)
    y = np.clip(0.2 + x @ [0.5, -0.4, 0.3] + 0.3 * rng.normal(size=n), -2, 2)
    binary = {"binary": [1, 2]} if declare else {}
    return release_regression(x, y, x_bounds=BOX, y_bounds=(-2, 2), epsilon=epsilon,
                              rng=seed + 1, **binary)  # fmt: skip


def _model(rel, **kwargs):
    with pm.Model() as model:
        sigma2 = pm.InverseGamma("sigma2", 20.0, 1.9)
        theta = pm.MvNormal("theta", np.zeros(4), cov=2 * sigma2 * np.eye(4))
        pmdp.NoisyRegressionStat("z", theta=theta, sigma2=sigma2, release=rel, **kwargs)
    return model


@pytest.mark.parametrize(("d", "columns"), [(3, (1, 2)), (4, (0, 3))])
def test_logp_in_pytensor_is_the_kernels(d, columns):
    """The node's log density equals the kernel's on statistics of the model (the pair's
    columns anywhere among the covariates), and is −∞ where a square sum is not the sum."""
    rng = np.random.default_rng(d)
    d2 = d - 2
    par = LevelParameters(rng.normal(size=d + 1), np.array(0.5), rng.dirichlet(np.ones(4) * 3),
                          rng.normal(size=(3, d2)), np.eye(d2) * 0.5 + 0.1)  # fmt: skip
    layout = pair_layout(d)
    s = draw_level_statistic(rng, par, 60, layout, size=(3,))
    others = [j + 1 for j in range(d) if j not in columns]
    order = np.array([0, *(j + 1 for j in columns), *others])
    theta_user = par.theta[np.argsort(order)]
    dist = LevelModelSuffStat.dist(theta_user, par.sigma2, par.probs, par.group_loc, par.x_cov,
                                   60, factor_mask(columns), LEVEL_KINDS.index("pair"))  # fmt: skip
    got = [float(pm.logp(dist, v).eval()) for v in columns_first(s, columns, inverse=True)]
    np.testing.assert_allclose(got, level_statistic_logpdf(s, par, 60, layout), rtol=1e-9)
    bad = s[0].copy()
    bad[layout.squares[1]] += 1.0
    assert float(pm.logp(dist, columns_first(bad, columns, inverse=True)).eval()) == -np.inf
    draw = pm.draw(dist, random_seed=1)
    assert np.isfinite(float(pm.logp(dist, draw).eval()))
    start = support_point(dist).eval()  # a statistic of the model: finite density
    assert np.isfinite(float(pm.logp(dist, start).eval()))


def test_two_declared_binaries_beside_other_covariates_get_the_pair_model():
    """``"auto"`` takes the release's declaration: π over the four corners, the normal
    covariate's means at three corners, the trace's attrs say ``pair``; binary= naming two
    covariates does the same on an undeclared release; undeclared, the normal model."""
    model = _model(_release())
    assert regression_attrs(model)["pymc_dp_x_model_z"] == "pair"
    assert list(model.coords["z_cell"]) == ["x2=0,x3=0", "x2=1,x3=0", "x2=0,x3=1", "x2=1,x3=1"]
    assert list(model.coords["z_level"]) == ["x2=0,x3=0", "x2=1,x3=0", "x2=0,x3=1"]
    assert model.named_vars_to_dims["z_x_loc"] == ("z_level", "z_covariate")
    undeclared = _model(_release(declare=False))
    assert regression_attrs(undeclared)["pymc_dp_x_model_z"] == "normal"
    for kwargs in ({"binary": ["x2", "x3"]}, {"x_model": "pair", "binary": [2, 1]}):
        explicit = _model(_release(declare=False), **kwargs)
        assert regression_attrs(explicit)["pymc_dp_x_model_z"] == "pair"


def test_pm_sample_assigns_the_level_step():
    from pymc.sampling.mcmc import assign_step_methods

    model = _model(_release())
    _, selected = assign_step_methods(model, None, methods=pm.step_methods.STEP_METHODS)
    assert set(selected) == {RegressionLevelStep}
    assert RegressionCollapsedStep not in selected


def test_pair_model_refusals():
    rel = _release(declare=False)
    with pytest.raises(TypeError, match="x_model='pair' needs binary="):
        _model(rel, x_model="pair")
    with pytest.raises(TypeError, match="x_model='pair' needs binary="):
        _model(rel, x_model="pair", binary=1)
    with pytest.raises(ValueError, match="two distinct binary covariates"):
        _model(rel, x_model="pair", binary=[1, 1])
    with pytest.raises(ValueError, match="not one of the covariates"):
        _model(rel, x_model="pair", binary=["x9", "x2"])
    with pytest.raises(TypeError, match="give no x_moments"):
        _model(rel, x_model="pair", binary=[1, 2], method="gibbs-ss")
    rng = np.random.default_rng(0)
    x = np.column_stack([rng.uniform(0.5, 2.0, 100), rng.uniform(size=(100, 2)) < 0.3])
    shifted = release_regression(x.astype(float), rng.uniform(-1, 1, 100), epsilon=1.0, rng=1,
                                 x_bounds=[(0.5, 2.0), (0.0, 1.0), (0.0, 1.0)],
                                 y_bounds=(-1, 1))  # fmt: skip
    with pytest.raises(ValueError, match="must hold 0 and 1"):
        _model(shifted, x_model="pair", binary=[0, 1])


def test_pm_sample_agrees_with_the_batched_engine():
    """The same release, the same target: pm.sample's step and sample_level_regression give
    posterior means of θ, σ² and π within 5 Monte Carlo standard errors (ESS from ArviZ)."""
    rel = _release(epsilon=0.5)
    model = _model(rel)
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pm.sample(draws=600, tune=500, chains=2, progressbar=False, random_seed=4)
    prior = NIG(np.zeros(4), 0.5 * np.eye(4), np.array(20.0), np.array(1.9))
    tr = sample_level_regression(5, released=rel.value[None], n=rel.n, prior=prior,
                                 scale=rel.scale, x_prior=default_mixed_x_prior(BOX, [1, 2]),
                                 pair=[1, 2], draws=500, tune=400, chains=8)  # fmt: skip
    post = idata.posterior
    pairs = [
        (post["theta"].values.reshape(-1, 4), tr.theta[:, :, 0].reshape(-1, 4)),
        (post["sigma2"].values.reshape(-1, 1), tr.sigma2[:, :, 0].reshape(-1, 1)),
        (post["z_x_probs"].values.reshape(-1, 4), tr.probs[:, :, 0].reshape(-1, 4)),
    ]
    assert_same_posterior_means(pairs, engine_chains=8)
