"""NoisyRegressionStat with a factor beside normal covariates (the level model) under pm.sample."""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytest
from engine_agreement import assert_same_posterior_means

import pymc_dp as pmdp
from pymc_dp.regression import (
    NIG,
    RegressionCollapsedStep,
    RegressionLevelStep,
    default_mixed_x_prior,
    draw_nig,
    nig_update,
    regression_attrs,
    release_regression,
    sample_level_regression,
)
from pymc_dp.regression.kernels.level_model import (
    LevelParameters,
    columns_first,
    draw_level_statistic,
    level_layout,
    level_parts,
    level_statistic_logpdf,
)
from pymc_dp.regression.model.level_suffstat import LevelModelSuffStat, factor_mask

BOX = [(-2.0, 2.0), (0.0, 1.0), (0.0, 1.0)]


def _release(epsilon=1.0, n=400, seed=3, declare=True):
    """A normal covariate (its mean moving with the level), then a factor of 3 levels' dummy
    columns; ``declare``: the release declares them (``release_regression(..., factor=)``)."""
    rng = np.random.default_rng(seed)
    level = rng.choice(3, size=n, p=[0.5, 0.3, 0.2])
    x = np.column_stack([rng.normal(0.3, 0.5, n) + 0.4 * (level - 1.0), level == 1, level == 2])
    x = np.clip(x.astype(float), -2, 2)
    y = np.clip(0.2 + x @ [0.5, -0.4, 0.3] + 0.3 * rng.normal(size=n), -2, 2)
    factor = {"factor": [1, 2]} if declare else {}
    return release_regression(x, y, x_bounds=BOX, y_bounds=(-2, 2), epsilon=epsilon,
                              rng=seed + 1, **factor)  # fmt: skip


def _model(rel, **kwargs):
    with pm.Model() as model:
        sigma2 = pm.InverseGamma("sigma2", 20.0, 1.9)
        theta = pm.MvNormal("theta", np.zeros(4), cov=2 * sigma2 * np.eye(4))
        pmdp.NoisyRegressionStat("z", theta=theta, sigma2=sigma2, release=rel, **kwargs)
    return model


@pytest.mark.parametrize(("d", "columns"), [(3, (1, 2)), (4, (0, 3)), (2, (1,))])
def test_logp_in_pytensor_is_the_kernels(d, columns):
    """The node's log density equals the kernel's on statistics of the model (the factor's
    columns anywhere among the covariates), and is −∞ where two of them are 1 together."""
    rng = np.random.default_rng(d)
    levels = len(columns) + 1
    d2 = d - len(columns)
    par = LevelParameters(rng.normal(size=d + 1), np.array(0.5), rng.dirichlet(np.ones(levels) * 3),
                          rng.normal(size=(levels, d2)), np.eye(d2) * 0.5 + 0.1)  # fmt: skip
    layout = level_layout(d, levels)
    s = draw_level_statistic(rng, par, 60, layout, size=(3,))
    others = [j + 1 for j in range(d) if j not in columns]
    order = np.array([0, *(j + 1 for j in columns), *others])
    theta_user = par.theta[np.argsort(order)]
    dist = LevelModelSuffStat.dist(theta_user, par.sigma2, par.probs, par.group_loc, par.x_cov,
                                   60, factor_mask(columns))  # fmt: skip
    got = [float(pm.logp(dist, v).eval()) for v in columns_first(s, columns, inverse=True)]
    np.testing.assert_allclose(got, level_statistic_logpdf(s, par, 60, layout), rtol=1e-9)
    if len(columns) > 1:
        bad = s[0].copy()
        bad[layout.zeros[0]] = 1.0
        assert float(pm.logp(dist, columns_first(bad, columns, inverse=True)).eval()) == -np.inf


def test_a_declared_factor_beside_other_covariates_gets_the_level_model():
    """``"auto"`` takes the release's declaration: π over the levels (the reference first), the
    normal covariate's mean per level, the trace's attrs say ``levels`` and pm.sample assigns
    RegressionLevelStep; undeclared, the normal model as before."""
    model = _model(_release())
    assert regression_attrs(model)["pymc_dp_x_model_z"] == "levels"
    assert list(model.coords["z_level"]) == ["none of x2,x3", "x2", "x3"]
    assert model.named_vars_to_dims["z_x_loc"] == ("z_level", "z_covariate")
    assert list(model.coords["z_covariate"]) == ["x1"]
    undeclared = _model(_release(declare=False))
    assert regression_attrs(undeclared)["pymc_dp_x_model_z"] == "normal"
    explicit = _model(_release(declare=False), x_model="levels", factor=["x2", "x3"])
    assert regression_attrs(explicit)["pymc_dp_x_model_z"] == "levels"


def test_pm_sample_assigns_the_level_step():
    from pymc.sampling.mcmc import assign_step_methods

    model = _model(_release())
    _, selected = assign_step_methods(model, None, methods=pm.step_methods.STEP_METHODS)
    assert set(selected) == {RegressionLevelStep}
    assert RegressionCollapsedStep not in selected


def test_level_model_refusals():
    rel = _release(declare=False)
    with pytest.raises(TypeError, match="x_model='levels' needs factor="):
        _model(rel, x_model="levels")
    with pytest.raises(ValueError, match="not x_model='normal'"):
        _model(rel, x_model="normal", factor=[1, 2])
    with pytest.raises(ValueError, match="not one of the covariates"):
        _model(rel, x_model="levels", factor=["x9"])
    with pytest.raises(ValueError, match="that is the cell model"):
        _model(rel, x_model="levels", factor=[0, 1, 2])
    with pytest.raises(TypeError, match="give no binary="):
        _model(rel, x_model="levels", factor=[1, 2], binary=1)
    rng = np.random.default_rng(0)
    x = np.column_stack([rng.uniform(0.5, 2.0, 100), rng.uniform(size=(100, 2)) < 0.3])
    shifted = release_regression(
        x.astype(float),
        rng.uniform(-1, 1, 100),
        epsilon=1.0,
        rng=1,
        x_bounds=[(0.5, 2.0), (0.0, 1.0), (0.0, 1.0)],
        y_bounds=(-1, 1),
    )
    with pytest.raises(ValueError, match="must hold 0 and 1"):
        _model(shifted, x_model="levels", factor=[0, 1])
    model = _model(_release())
    with model, pytest.raises(ValueError, match="RegressionLevelStep moves"):
        RegressionLevelStep([model["theta"]])


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
                                 factor=[1, 2], draws=500, tune=400, chains=8)  # fmt: skip
    post = idata.posterior
    pairs = [
        (post["theta"].values.reshape(-1, 4), tr.theta[:, :, 0].reshape(-1, 4)),
        (post["sigma2"].values.reshape(-1, 1), tr.sigma2[:, :, 0].reshape(-1, 1)),
        (post["z_x_probs"].values.reshape(-1, 3), tr.probs[:, :, 0].reshape(-1, 3)),
    ]
    assert_same_posterior_means(pairs, engine_chains=8)


def test_huge_epsilon_gives_the_exact_posterior():
    """At ε = 10⁵ the posterior of (θ, σ²) is the NIG posterior of the records' statistic and
    π's is Dirichlet(1 + counts)."""
    rel = _release(epsilon=1e5, n=200)
    model = _model(rel)
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pm.sample(draws=500, tune=300, chains=2, progressbar=False, random_seed=2)
    prior = NIG(np.zeros(4), 0.5 * np.eye(4), np.array(20.0), np.array(1.9))
    rng = np.random.default_rng(3)
    ref_theta, ref_sigma2 = draw_nig(rng, nig_update(prior, statistic=rel.value, n=rel.n),
                                     size=(20000,))  # fmt: skip
    theta = idata.posterior["theta"].values.reshape(-1, 4)
    sd = ref_theta.std(axis=0)
    np.testing.assert_allclose(theta.mean(axis=0), ref_theta.mean(axis=0), atol=float(sd.max()) / 4)
    np.testing.assert_allclose(theta.std(axis=0), sd, rtol=0.2)
    assert idata.posterior["sigma2"].values.mean() == pytest.approx(ref_sigma2.mean(), rel=0.05)
    s = columns_first(np.round(rel.value), [1, 2])
    counts = level_parts(s, rel.n, level_layout(3, 3)).counts
    np.testing.assert_allclose(idata.posterior["z_x_probs"].values.reshape(-1, 3).mean(axis=0),
                               (1 + counts) / (3 + rel.n), atol=0.01)  # fmt: skip
