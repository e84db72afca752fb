"""NoisyRegressionStat with every covariate binary (the cell model) under pm.sample."""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytest
from engine_agreement import assert_same_posterior_means

import pymc_dp as pmdp
from pymc_dp.regression import (
    NIG,
    RegressionCellStep,
    RegressionCollapsedStep,
    draw_nig,
    nig_update,
    regression_attrs,
    release_regression,
    sample_cell_regression,
)
from pymc_dp.regression.kernels.cell_model import (
    CELL_KINDS,
    CellParameters,
    cell_counts,
    cell_fiber,
    cell_layout,
    cell_statistic_logpdf,
    draw_cell_statistic,
)
from pymc_dp.regression.model.cell_suffstat import CellModelSuffStat

PRIOR = NIG(np.zeros(3), 0.5 * np.eye(3), np.array(20.0), np.array(1.9))


def _factor_release(epsilon=1.0, n=300, seed=3, probs=(0.5, 0.3, 0.2), declare=False):
    """Records of a three-level factor, dummy-coded (level 0 the reference); ``declare``: the
    release declares its columns the factor (``release_regression(..., factor=[...])``)."""
    rng = np.random.default_rng(seed)
    level = rng.choice(len(probs), size=n, p=probs)
    x = (level[:, None] == np.arange(1, len(probs))).astype(float)
    y = np.clip(0.2 + x @ np.linspace(0.5, -0.3, len(probs) - 1) + 0.3 * rng.normal(size=n),
                -2, 2)  # fmt: skip
    factor = {"factor": list(range(len(probs) - 1))} if declare else {}
    return release_regression(x, y, x_bounds=[(0.0, 1.0)] * (len(probs) - 1), y_bounds=(-2, 2),
                              epsilon=epsilon, rng=seed + 1, **factor)  # fmt: skip


def _pair_release(epsilon=1.0, n=300, seed=5):
    rng = np.random.default_rng(seed)
    x = (rng.uniform(size=(n, 2)) < [0.3, 0.5]).astype(float)
    y = np.clip(0.2 + 0.5 * x[:, 0] - 0.3 * x[:, 1] + 0.3 * rng.normal(size=n), -2, 2)
    return release_regression(x, y, x_bounds=[(0.0, 1.0)] * 2, y_bounds=(-2, 2),
                              epsilon=epsilon, rng=seed + 1)  # fmt: skip


def _cube_release(epsilon=1.0, n=300, seed=7, declare=False):
    """Three binary covariates, 1 together in some records (not the columns of one factor)."""
    rng = np.random.default_rng(seed)
    x = (rng.uniform(size=(n, 3)) < [0.3, 0.5, 0.4]).astype(float)
    x[:, 2] = np.where(rng.uniform(size=n) < 0.3, x[:, 0], x[:, 2])
    y = np.clip(0.2 + x @ [0.5, -0.3, 0.4] + 0.3 * rng.normal(size=n), -2, 2)
    binary = {"binary": [0, 1, 2]} if declare else {}
    return release_regression(x, y, x_bounds=[(0.0, 1.0)] * 3, y_bounds=(-2, 2),
                              epsilon=epsilon, rng=seed + 1, **binary)  # fmt: skip


def _of_model(s, n, layout):
    """Whether each statistic is one of the cell model's (some counts in its fiber)."""
    _, valid, consistent = cell_fiber(s, n, layout)
    return consistent & np.any(valid, axis=-1)


def _model(rel, **kwargs):
    p = rel.d + 1
    with pm.Model() as model:
        sigma2 = pm.InverseGamma("sigma2", 20.0, 1.9)
        theta = pm.MvNormal("theta", np.zeros(p), cov=2 * sigma2 * np.eye(p))
        pmdp.NoisyRegressionStat("z", theta=theta, sigma2=sigma2, release=rel, **kwargs)
    return model


@pytest.mark.parametrize(
    ("d", "kind"), [(1, "categories"), (3, "categories"), (2, "pair"), (3, "cube")]
)
def test_logp_in_pytensor_is_the_kernels(d, kind):
    rng = np.random.default_rng(d)
    layout = cell_layout(d, kind)
    probs = rng.dirichlet(np.full(len(layout.corners), 5.0))
    par = CellParameters(rng.normal(size=d + 1), np.float64(0.4), probs)
    s = draw_cell_statistic(rng, par, 50, layout, size=(3,))
    dist = CellModelSuffStat.dist(par.theta, par.sigma2, probs, 50, CELL_KINDS.index(kind))
    got = [pm.logp(dist, v).eval() for v in s]
    np.testing.assert_allclose(got, cell_statistic_logpdf(s, par, 50, layout), rtol=1e-10)
    # Off the model: a fractional count, a copy that disagrees, a singular A.
    off = s[0].copy()
    off[layout.positions[0]] += 0.5
    assert pm.logp(dist, off).eval() == -np.inf
    off = s[0].copy()
    off[layout.readers[0][-1]] += 1.0
    assert pm.logp(dist, off).eval() == -np.inf
    start = pm.distributions.distribution.support_point(dist).eval()
    assert np.isfinite(pm.logp(dist, start).eval())
    draws = pm.draw(dist, 3, random_seed=1)
    assert np.all(_of_model(draws, 50, layout))
    assert all(np.isfinite(pm.logp(dist, v).eval()) for v in draws)


def test_singular_gram_has_no_density():
    layout = cell_layout(2, "categories")
    par = CellParameters(np.zeros(3), np.float64(1.0), np.full(3, 1 / 3))
    dist = CellModelSuffStat.dist(par.theta, par.sigma2, par.probs, 20, 0)
    x = np.repeat(layout.corners[:2], 10, axis=0)  # the third level never occurs
    y = np.random.default_rng(0).normal(size=20)
    from pymc_dp.curator.regression.statistics import regression_statistic

    s = regression_statistic(x, y)
    assert cell_counts(s, 20, layout)[1]  # a statistic of binary records ...
    assert pm.logp(dist, s).eval() == -np.inf  # ... whose A is singular


def test_factor_node_variables_coords_and_steps():
    model = _model(_factor_release(), x_model="factor")
    names = [v.name for v in model.free_RVs]
    assert names == ["sigma2", "theta", "z_x_probs", "z_s"]  # no Laplace mixing variances
    assert model.coords["z_cell"] == ("x1=0,x2=0", "x1=1,x2=0", "x1=0,x2=1")
    assert regression_attrs(model) == {"pymc_dp_x_model_z": "factor",
                                       "pymc_dp_method_z": "collapsed"}  # fmt: skip
    with model:
        idata = pm.sample(draws=5, tune=5, chains=1, progressbar=False, random_seed=1)
    assert "z_x_probs" in idata.posterior
    assert list(pm.sampling.mcmc.assign_step_methods(model)[-1]) == [RegressionCellStep]  # alone
    for name in ("theta", "sigma2", "z_x_probs", "z_s"):
        assert RegressionCellStep.owns(model[name])
        assert not RegressionCollapsedStep.owns(model[name])
    with model, pytest.raises(ValueError, match="RegressionCellStep moves"):
        RegressionCellStep([model["theta"]])


def test_binary_node_is_the_cell_model_unless_gibbs_ss():
    model = _model(_pair_release(), x_model="binary")
    assert model.coords["z_cell"] == ("x1=0,x2=0", "x1=1,x2=0", "x1=0,x2=1", "x1=1,x2=1")
    assert regression_attrs(model) == {"pymc_dp_x_model_z": "binary",
                                       "pymc_dp_method_z": "collapsed"}  # fmt: skip
    assert RegressionCellStep.owns(model["z_x_probs"])
    clt = _model(_pair_release(), x_model="binary", method="gibbs-ss")
    assert regression_attrs(clt)["pymc_dp_method_z"] == "gibbs-ss"
    assert not RegressionCellStep.owns(clt["z_x_probs"])
    one = _factor_release(probs=(0.6, 0.4))  # d = 1: the two levels of one binary covariate
    assert regression_attrs(_model(one, x_model="binary"))["pymc_dp_method_z"] == "collapsed"


def test_cell_model_refusals():
    rel = _factor_release()
    with pytest.raises(ValueError, match="method='auto' or 'collapsed'"):
        _model(rel, x_model="factor", method="gibbs-ss")
    with pytest.raises(TypeError, match="give neither x_moments= nor x_prior="):
        _model(rel, x_model="factor", x_prior=pmdp.regression.default_x_prior([(0, 1)] * 2))
    rng = np.random.default_rng(0)
    x = np.column_stack([rng.uniform(size=50) < 0.5, rng.uniform(0.5, 2.0, 50)])
    shifted = release_regression(x, rng.uniform(-1, 1, 50),
                                 x_bounds=[(0.0, 1.0), (0.5, 2.0)], y_bounds=(-1, 1),
                                 epsilon=1.0, rng=1)  # fmt: skip
    with pytest.raises(ValueError, match=r"x_model='binary': covariate 1's box \[0.5, 2\] must"):
        _model(shifted, x_model="binary")
    six = _factor_release(probs=(1 / 7,) * 7)
    with pytest.raises(ValueError, match="x_model='factor'"):
        _model(six, x_model="binary")
    with pytest.warns(UserWarning, match=r"checked up to d = 10 covariates \(d = 11\)"):
        _model(_factor_release(probs=(1 / 12,) * 12), x_model="factor")
    with pm.Model():
        sigma2 = pm.InverseGamma("sigma2", 20.0, 1.9)
        theta = pm.MvNormal("theta", np.zeros(3), cov=2 * sigma2 * np.eye(3))
        pmdp.NoisyRegressionStat("a", theta=theta, sigma2=sigma2, release=rel)
        with pytest.raises(ValueError, match="needs theta to itself"):
            pmdp.NoisyRegressionStat("b", theta=theta, sigma2=sigma2, release=rel,
                                     x_model="factor")  # fmt: skip
    with pm.Model():
        sigma2 = pm.InverseGamma("sigma2", 20.0, 1.9)
        theta = pm.MvNormal("theta", np.zeros(3), cov=2 * sigma2 * np.eye(3))
        pmdp.NoisyRegressionStat("a", theta=theta, sigma2=sigma2, release=rel, x_model="factor")
        with pytest.raises(ValueError, match="need theta to themselves"):
            pmdp.NoisyRegressionStat("b", theta=theta, sigma2=sigma2, release=rel)


def test_a_declared_factor_of_up_to_eleven_levels_gets_the_cell_model():
    """``x_model="auto"`` takes the cell model for a declared factor up to ``CELLS_MIX_D`` = 10
    dummy columns, calibrated and faster than the normal model of x there
    (``benchmarks/regression_cell_levels.py``, docs/regression.md); above it the normal model,
    with a warning that names why."""
    for levels in (7, 11):
        model = _model(_factor_release(probs=(1 / levels,) * levels, declare=True))
        assert regression_attrs(model)["pymc_dp_x_model_z"] == "factor", levels
    with pytest.warns(UserWarning, match=r"at d = 11 > 10 the cell model is not checked"):
        model = _model(_factor_release(probs=(1 / 12,) * 12, declare=True))
    assert regression_attrs(model)["pymc_dp_x_model_z"] != "factor"


def _posterior(idata, name, size):
    return idata.posterior[name].values.reshape(-1, size)


def test_pm_sample_agrees_with_the_batched_engine():
    """The same release, the same target: pm.sample's step and sample_cell_regression give
    posterior means of θ, σ² and π within 5 Monte Carlo standard errors (ESS from ArviZ)."""
    rel = _factor_release(epsilon=0.5, n=400)
    model = _model(rel, x_model="factor")
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pm.sample(draws=600, tune=500, chains=2, progressbar=False, random_seed=4)
    prior = NIG(np.zeros(3), 0.5 * np.eye(3), np.array(20.0), np.array(1.9))
    tr = sample_cell_regression(5, released=rel.value[None], n=rel.n, prior=prior,
                                scale=rel.scale, draws=500, tune=400, chains=8)  # fmt: skip
    pairs = [
        (_posterior(idata, "theta", 3), tr.theta[:, :, 0].reshape(-1, 3)),
        (_posterior(idata, "sigma2", 1), tr.sigma2[:, :, 0].reshape(-1, 1)),
        (_posterior(idata, "z_x_probs", 3), tr.probs[:, :, 0].reshape(-1, 3)),
    ]
    assert_same_posterior_means(pairs, engine_chains=8)


def test_huge_epsilon_gives_the_exact_posterior():
    """At ε = 10⁵ the posterior of (θ, σ²) is the NIG posterior of the records' statistic and
    π's is Dirichlet(1 + counts)."""
    rel = _pair_release(epsilon=1e5, n=200)
    model = _model(rel, x_model="binary")
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pm.sample(draws=500, tune=300, chains=2, progressbar=False, random_seed=2)
    rng = np.random.default_rng(3)
    ref_theta, ref_sigma2 = draw_nig(rng, nig_update(PRIOR, statistic=rel.value, n=rel.n),
                                     size=(20000,))  # fmt: skip
    theta = _posterior(idata, "theta", 3)
    sd = ref_theta.std(axis=0)
    np.testing.assert_allclose(theta.mean(axis=0), ref_theta.mean(axis=0), atol=float(sd.max()) / 4)
    np.testing.assert_allclose(theta.std(axis=0), sd, rtol=0.2)
    assert idata.posterior["sigma2"].values.mean() == pytest.approx(ref_sigma2.mean(), rel=0.05)
    counts, _ = cell_counts(np.round(rel.value), rel.n, cell_layout(2, "pair"))
    np.testing.assert_allclose(_posterior(idata, "z_x_probs", 4).mean(axis=0),
                               (1 + counts) / (4 + rel.n), atol=0.01)  # fmt: skip


def test_three_binary_covariates_are_the_cube_and_pm_sample_agrees_with_the_engine():
    """A release that declares its three covariates binary: the cell model over the eight
    corners (``"auto"`` picks ``x_model="binary"``), sampled by RegressionCellStep; its
    posterior means of θ, σ² and π agree with sample_cell_regression's (5 Monte Carlo standard
    errors)."""
    rel = _cube_release(declare=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = _model(rel)
    assert regression_attrs(model) == {"pymc_dp_x_model_z": "binary",
                                       "pymc_dp_method_z": "collapsed"}  # fmt: skip
    assert model.coords["z_cell"][0] == "x1=0,x2=0,x3=0"
    assert len(model.coords["z_cell"]) == 8
    assert list(pm.sampling.mcmc.assign_step_methods(model)[-1]) == [RegressionCellStep]
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pm.sample(draws=500, tune=1000, chains=2, progressbar=False, random_seed=6)
    prior = NIG(np.zeros(4), 0.5 * np.eye(4), np.array(20.0), np.array(1.9))
    tr = sample_cell_regression(7, released=rel.value[None], n=rel.n, prior=prior, kind="cube",
                                scale=rel.scale, draws=375, tune=400, chains=8)  # fmt: skip
    pairs = [
        (_posterior(idata, "theta", 4), tr.theta[:, :, 0].reshape(-1, 4)),
        (_posterior(idata, "sigma2", 1), tr.sigma2[:, :, 0].reshape(-1, 1)),
        (_posterior(idata, "z_x_probs", 8), tr.probs[:, :, 0].reshape(-1, 8)),
    ]
    assert_same_posterior_means(pairs, engine_chains=8)
