"""NoisyRegressionStat with a binary covariate (x_model="mixed") under pm.sample."""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytest

import pymc_dp as pmdp
from pymc_dp.regression import (
    NIG,
    RegressionCollapsedStep,
    RegressionMixedStep,
    draw_nig,
    nig_update,
    regression_attrs,
    release_regression,
)
from pymc_dp.regression.engine.mixed import mixed_sweep
from pymc_dp.regression.kernels.mixed_model import (
    MixedParameters,
    binary_first,
    covariate_order,
    draw_mixed_statistic,
    mixed_statistic_logpdf,
)
from pymc_dp.regression.model import mixed_step
from pymc_dp.regression.model.distributions import MixedModelSuffStat
from pymc_dp.regression.model.mixed_step import step_moves

BOX = [(-2.0, 2.0), (0.0, 1.0)]


def _release(epsilon=1.0, n=300, seed=3):
    rng = np.random.default_rng(seed)
    x = np.column_stack([rng.normal(0.3, 0.5, n), rng.uniform(size=n) < 0.3])
    y = 0.4 + 0.6 * x[:, 0] - 0.5 * x[:, 1] + 0.3 * rng.normal(size=n)
    return release_regression(np.clip(x, -2, 2), np.clip(y, -3, 3), x_bounds=BOX,
                              y_bounds=(-3, 3), epsilon=epsilon, rng=seed + 1)  # fmt: skip


def _model(rel, **kwargs):
    with pm.Model() as model:
        sigma2 = pm.InverseGamma("sigma2", 20.0, 1.9)
        theta = pm.MvNormal("theta", np.zeros(rel.d + 1), cov=2 * sigma2 * np.eye(rel.d + 1))
        pmdp.NoisyRegressionStat("z", theta=theta, sigma2=sigma2, release=rel, **kwargs)
    return model


@pytest.mark.parametrize(("d", "binary"), [(3, 1), (2, 0), (1, 0)])
def test_logp_in_pytensor_is_the_kernels(d, binary):
    rng = np.random.default_rng(d)
    d2 = d - 1
    theta = rng.normal(size=d + 1)
    cov = np.eye(d2) + 0.3 * np.ones((d2, d2))
    loc = rng.normal(size=(2, d2))
    coef = covariate_order(d, binary)[: d + 1]
    par = MixedParameters(theta[coef], np.float64(0.4), np.float64(0.3), loc, cov)
    inner = draw_mixed_statistic(rng, par, 50, size=(3,))
    dist = MixedModelSuffStat.dist(theta, np.float64(0.4), np.float64(0.3), loc, cov, 50, binary)
    got = [pm.logp(dist, v).eval() for v in binary_first(inner, binary, inverse=True)]
    np.testing.assert_allclose(got, mixed_statistic_logpdf(inner, par, 50), rtol=1e-10)
    start = pm.distributions.distribution.support_point(dist).eval()
    assert np.isfinite(pm.logp(dist, start).eval())
    assert all(np.isfinite(pm.logp(dist, v).eval()) for v in pm.draw(dist, 3, random_seed=1))


def test_the_node_names_its_variables_and_the_trace_says_mixed():
    model = _model(_release(), binary="x2", covariates=None)
    names = [v.name for v in model.free_RVs]
    # No Laplace mixing variances: the sweep holds the Laplace density itself.
    assert names == ["sigma2", "theta", "z_x_prob", "z_x_cov", "z_x_loc", "z_s"]
    assert model.coords["z_group"] == ("x2=0", "x2=1")
    assert model.coords["z_covariate"] == ("x1",)
    assert regression_attrs(model) == {"pymc_dp_x_model_z": "mixed",
                                       "pymc_dp_method_z": "collapsed"}  # fmt: skip
    with model:
        idata = pm.sample(draws=5, tune=5, chains=1, progressbar=False, random_seed=1)
    assert "z_x_prob" in idata.posterior
    assert list(pm.sampling.mcmc.assign_step_methods(model)[-1]) == [RegressionMixedStep]  # alone
    assert RegressionMixedStep.owns(model["z_s"]) and RegressionMixedStep.owns(model["theta"])
    assert not RegressionCollapsedStep.owns(model["z_s"])
    assert not RegressionCollapsedStep.owns(model["theta"])


def test_one_binary_covariate_alone():
    rng = np.random.default_rng(0)
    x = (rng.uniform(size=(200, 1)) < 0.4).astype(float)
    y = np.clip(0.2 + 0.5 * x[:, 0] + 0.3 * rng.normal(size=200), -2, 2)
    rel = release_regression(x, y, x_bounds=[(0.0, 1.0)], y_bounds=(-2, 2), epsilon=1.0, rng=1)
    model = _model(rel, x_model="mixed")
    assert [v.name for v in model.free_RVs] == ["sigma2", "theta", "z_x_prob", "z_s"]


def test_huge_epsilon_gives_the_exact_posterior():
    """At ε = 10⁵ the posterior of (θ, σ²) is the NIG posterior of the records' statistic."""
    rel = _release(epsilon=1e5, n=200)
    model = _model(rel, binary=1)
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pm.sample(draws=500, tune=300, chains=2, progressbar=False, random_seed=2)
    prior = NIG(np.zeros(3), 0.5 * np.eye(3), np.array(20.0), np.array(1.9))
    rng = np.random.default_rng(3)
    s = rel.value  # Laplace noise of scale 10⁻⁴ on the records' statistic
    ref_theta, ref_sigma2 = draw_nig(rng, nig_update(prior, statistic=s, n=rel.n), size=(20000,))
    theta = idata.posterior["theta"].values.reshape(-1, 3)
    sd = ref_theta.std(axis=0)
    np.testing.assert_allclose(theta.mean(axis=0), ref_theta.mean(axis=0), atol=float(sd.max()) / 4)
    np.testing.assert_allclose(theta.std(axis=0), sd, rtol=0.2)
    assert idata.posterior["sigma2"].values.mean() == pytest.approx(ref_sigma2.mean(), rel=0.05)


def test_huge_epsilon_at_three_covariates_under_pm_sample():
    """d = 3, where the sweep runs the moves along the symmetries, and the mixed model is what
    a declared binary covariate gets by default: at ε = 10⁵ the posterior of (θ, σ²) under
    ``pm.sample`` is the NIG posterior of the records' statistic."""
    rng = np.random.default_rng(5)
    x = np.column_stack([rng.uniform(size=200) < 0.4, rng.normal(0, 0.5, (200, 2))])
    y = np.clip(0.3 + 0.5 * x[:, 0] - 0.4 * x[:, 2] + 0.3 * rng.normal(size=200), -3, 3)
    box = [(0.0, 1.0), (-2.0, 2.0), (-2.0, 2.0)]
    rel = release_regression(np.clip(x, -2, 2), y, x_bounds=box, y_bounds=(-3, 3),
                             epsilon=1e5, rng=6, binary=[0])  # fmt: skip
    model = _model(rel)
    assert regression_attrs(model)["pymc_dp_x_model_z"] == "mixed"
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pm.sample(draws=500, tune=300, chains=2, progressbar=False, random_seed=7)
    prior = NIG(np.zeros(4), 0.5 * np.eye(4), np.array(20.0), np.array(1.9))
    post = nig_update(prior, statistic=rel.value, n=rel.n)
    ref_theta, ref_sigma2 = draw_nig(np.random.default_rng(8), post, size=(20000,))
    theta = idata.posterior["theta"].values.reshape(-1, 4)
    sd = ref_theta.std(axis=0)
    np.testing.assert_allclose(theta.mean(axis=0), ref_theta.mean(axis=0), atol=float(sd.max()) / 4)
    np.testing.assert_allclose(theta.std(axis=0), sd, rtol=0.2)
    assert idata.posterior["sigma2"].values.mean() == pytest.approx(ref_sigma2.mean(), rel=0.05)


def test_mixed_model_refusals():
    rel = _release()
    with pytest.raises(TypeError, match="x_model='mixed' needs binary="):
        _model(rel, x_model="mixed")
    with pytest.raises(TypeError, match="not x_model='normal'"):
        _model(rel, x_model="normal", binary=1)
    with pytest.raises(ValueError, match="is not one of the covariates"):
        _model(rel, binary="dose")
    with pytest.raises(ValueError, match=r"binary must be a covariate index in \[0, 1\]"):
        _model(rel, binary=2)
    with pytest.raises(ValueError, match="method='auto' or 'collapsed'"):
        _model(rel, binary=1, method="gibbs-ss")
    rng = np.random.default_rng(0)
    x = np.column_stack([rng.uniform(0.5, 2.0, 100), rng.uniform(size=100) < 0.5])
    shifted = release_regression(x, rng.uniform(-1, 1, 100), x_bounds=[(0.5, 2.0), (0.0, 1.0)],
                                 y_bounds=(-1, 1), epsilon=1.0, rng=1)  # fmt: skip
    with pytest.raises(ValueError, match=r"x_bounds\[0\] must hold 0 and 1"):
        _model(shifted, binary=0)
    with pm.Model():
        sigma2 = pm.InverseGamma("sigma2", 20.0, 1.9)
        theta = pm.MvNormal("theta", np.zeros(3), cov=2 * sigma2 * np.eye(3))
        pmdp.NoisyRegressionStat("a", theta=theta, sigma2=sigma2, release=rel)
        with pytest.raises(ValueError, match="needs theta to itself"):
            pmdp.NoisyRegressionStat("b", theta=theta, sigma2=sigma2, release=rel, binary=1)


def test_step_arguments_are_checked():
    model = _model(_release(), binary=1)
    with model, pytest.raises(ValueError, match="tries must be >= 1"):
        RegressionMixedStep(tries=0)
    with model, pytest.raises(ValueError, match="RegressionMixedStep moves"):
        RegressionMixedStep([model["theta"]])


@pytest.mark.parametrize(("d", "expected"), [(3, 1), (4, 4)])
def test_the_moves_after_tuning_grow_with_d(monkeypatch, d, expected):
    """By default a step makes step_moves(d) random-walk moves after tuning (1 below d = 4, 4
    from it), and ``moves=`` sets them; tuning keeps its own number."""
    rng = np.random.default_rng(d)
    n = 200
    x = np.column_stack([rng.uniform(size=n) < 0.3, rng.normal(0.0, 0.4, (n, d - 1))])
    y = 0.3 * x.sum(axis=1) + 0.2 * rng.normal(size=n)
    rel = release_regression(np.clip(x, -1, 1), np.clip(y, -2, 2), epsilon=1.0, rng=d,
                             x_bounds=[(0.0, 1.0)] + [(-1.0, 1.0)] * (d - 1), y_bounds=(-2, 2),
                             binary=[0])  # fmt: skip
    seen = []

    def recording(*args, **kwargs):
        seen.append((kwargs["tune"], kwargs["moves"], kwargs["tune_moves"]))
        return mixed_sweep(*args, **kwargs)

    monkeypatch.setattr(mixed_step, "mixed_sweep", recording)
    assert step_moves(d) == expected
    for moves, want in ((None, expected), (3, 3)):
        model = _model(rel)
        with model, warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            step = RegressionMixedStep(moves=moves)
            pm.sample(draws=2, tune=2, chains=1, step=step, random_seed=1, progressbar=False,
                      compute_convergence_checks=False)  # fmt: skip
        assert {m for tune, m, _ in seen if not tune} == {want}
        assert {t for tune, _, t in seen if tune} == {6}
        seen.clear()


def _declared(binary, seed=3):
    """The release of :func:`_release`'s data with ``binary`` declared by the curator."""
    rng = np.random.default_rng(seed)
    n = 300
    x = np.column_stack([rng.normal(0.3, 0.5, n), rng.uniform(size=n) < 0.3])
    y = 0.4 + 0.6 * x[:, 0] - 0.5 * x[:, 1] + 0.3 * rng.normal(size=n)
    return release_regression(np.clip(x, -2, 2), np.clip(y, -3, 3), x_bounds=BOX,
                              y_bounds=(-3, 3), epsilon=1.0, rng=seed + 1,
                              binary=binary)  # fmt: skip


def test_a_declared_binary_covariate_gives_the_mixed_model_by_default():
    """The same release as :func:`_release`, with covariate 1 declared binary: the default
    node is the one ``binary=1`` builds (same variables and log density), and it records it."""
    rel = _declared([1])
    assert rel.binary == (1,) and np.array_equal(rel.value, _release().value)
    auto, given = _model(rel), _model(_release(), binary=1)
    assert regression_attrs(auto)["pymc_dp_x_model_z"] == "mixed"
    assert [v.name for v in auto.free_RVs] == [v.name for v in given.free_RVs]
    point = given.initial_point(random_seed=1)
    assert np.isclose(auto.compile_logp()(point), given.compile_logp()(point))
    # What the user asks for wins: the normal model, or a prior of x for it.
    assert regression_attrs(_model(rel, x_model="normal"))["pymc_dp_x_model_z"] == "normal"
    x_prior = pmdp.regression.default_x_prior(BOX)
    assert regression_attrs(_model(rel, x_prior=x_prior))["pymc_dp_x_model_z"] == "normal"


def test_declared_binary_covariates_give_the_cell_or_pair_model():
    """Every covariate declared binary at d = 2 or 3: the cell model (``x_model="binary"``); two
    of three declared binary: the pair model; three of four: a warning, and the normal model."""
    box = [(0.0, 1.0), (0.0, 1.0)]
    rng = np.random.default_rng(0)
    x = (rng.uniform(size=(200, 2)) < 0.5).astype(float)
    y = np.clip(x @ [0.3, -0.2] + 0.2 * rng.normal(size=200), -1, 1)
    rel = release_regression(x, y, x_bounds=box, y_bounds=(-1, 1), epsilon=1.0, rng=1,
                             binary=[0, 1])  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = _model(rel)
    assert regression_attrs(model) == {"pymc_dp_x_model_z": "binary",
                                       "pymc_dp_method_z": "collapsed"}  # fmt: skip
    x3 = np.column_stack([x, rng.normal(size=200)])
    rel3 = release_regression(np.clip(x3, -2, 2), y, x_bounds=[*box, (-2.0, 2.0)],
                              y_bounds=(-1, 1), epsilon=1.0, rng=1, binary=[0, 1])  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = _model(rel3)
    assert regression_attrs(model)["pymc_dp_x_model_z"] == "pair"
    cube = np.column_stack([x, rng.uniform(size=200) < 0.5]).astype(float)
    rel_cube = release_regression(cube, y, x_bounds=[*box, (0.0, 1.0)], y_bounds=(-1, 1),
                                  epsilon=1.0, rng=1, binary=[0, 1, 2])  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = _model(rel_cube)
    assert regression_attrs(model)["pymc_dp_x_model_z"] == "binary"
    assert len(model.coords["z_cell"]) == 8
    x4 = np.column_stack([x, rng.uniform(size=200) < 0.5, rng.normal(size=200)]).astype(float)
    rel4 = release_regression(np.clip(x4, -2, 2), y, x_bounds=[*box, (0.0, 1.0), (-2.0, 2.0)],
                              y_bounds=(-1, 1), epsilon=1.0, rng=1, binary=[0, 1, 2])  # fmt: skip
    with pytest.warns(UserWarning, match=r"declares 3 binary covariates \(x1, x2, x3\)"):
        model = _model(rel4)
    assert regression_attrs(model)["pymc_dp_x_model_z"] == "normal"


def test_a_declared_binary_covariate_on_a_shared_theta_keeps_the_normal_model():
    """θ feeding two releases: the mixed model needs θ to itself, so neither takes it."""
    rel = _declared([1])
    with pm.Model() as model:
        sigma2 = pm.InverseGamma("sigma2", 20.0, 1.9)
        theta = pm.MvNormal("theta", np.zeros(3), cov=2 * sigma2 * np.eye(3))
        pmdp.NoisyRegressionStat("a", theta=theta, sigma2=sigma2, release=_release())
        pmdp.NoisyRegressionStat("b", theta=theta, sigma2=sigma2, release=rel)
    attrs = regression_attrs(model)
    assert attrs["pymc_dp_x_model_a"] == attrs["pymc_dp_x_model_b"] == "normal"


@pytest.mark.parametrize("d", [3, 6])
def test_the_mixed_model_is_a_default_up_to_five_covariates(d):
    """Up to ``MIXED_MAX_D`` = 5 covariates a declared binary covariate gets the mixed model
    (with its moves along the symmetries from d = 3) without a warning; above it, where it mixes
    no better than the normal model, the normal model, and ``binary=`` builds the mixed one but
    warns."""
    from pymc_dp.regression.model.noisy_regression import MIXED_MAX_D

    rng = np.random.default_rng(0)
    x = np.column_stack([rng.uniform(size=300) < 0.4, rng.normal(0, 0.5, (300, d - 1))])
    y = np.clip(0.5 * x[:, 0] + 0.2 * rng.normal(size=300), -3, 3)
    box = [(0.0, 1.0)] + [(-2.0, 2.0)] * (d - 1)
    rel = release_regression(np.clip(x, -2, 2), y, x_bounds=box, y_bounds=(-3, 3), epsilon=1.0,
                             rng=1, binary=[0])  # fmt: skip
    assert MIXED_MAX_D == 5 and rel.d == d
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = regression_attrs(_model(rel))["pymc_dp_x_model_z"]
    assert got == ("mixed" if d <= MIXED_MAX_D else "normal")
    if d > MIXED_MAX_D:
        with pytest.warns(UserWarning, match=r"above d = 5 covariates \(d = 6;"):
            model = _model(rel, binary=0)
        assert regression_attrs(model)["pymc_dp_x_model_z"] == "mixed"
