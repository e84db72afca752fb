"""Non-normal models of the covariates (issue 34): moments, the batched sampler, calibration."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_dp.curator.regression.statistics import regression_statistic
from pymc_dp.regression import release_regression
from pymc_dp.regression.engine.x_model_gibbs import sample_x_model
from pymc_dp.regression.kernels.conjugate import NIG, draw_nig, nig_update
from pymc_dp.regression.kernels.data_model import NIW, normal_x_moments
from pymc_dp.regression.kernels.moments import empirical_x_moments
from pymc_dp.regression.kernels.x_models import (
    binary_cell_counts,
    binary_x_moments,
    moment_log_likelihood,
    shape_monomial_means,
    shape_x_moments,
)

PRIOR = NIG(np.zeros(2), 0.5 * np.eye(2), np.array(20.0), np.array(1.9))


def test_shape_moments_normal_case_is_isserlis():
    loc, cov = (
        np.array([0.5, -1.0, 0.2]),
        np.array([[1.0, 0.3, 0.0], [0.3, 2.0, 0.1], [0, 0.1, 0.5]]),
    )
    a, b = shape_x_moments(loc, cov, 0.0, 3.0), normal_x_moments(loc, cov)
    np.testing.assert_allclose(a.second, b.second, atol=1e-12)
    np.testing.assert_allclose(a.fourth_cov, b.fourth_cov, atol=1e-12)


@pytest.mark.parametrize(
    ("draw", "skew", "kurt"),
    [
        (lambda r, s: r.uniform(-np.sqrt(3), np.sqrt(3), s), 0.0, 1.8),
        (lambda r, s: r.exponential(1.0, s) - 1.0, 2.0, 9.0),
        (lambda r, s: r.choice([-1.0, 1.0], s), 0.0, 1.0),
    ],
)
def test_shape_moments_match_monte_carlo(draw, skew, kurt):
    rng = np.random.default_rng(3)
    mix = np.array([[0.8, 0.0], [0.3, 0.5]])  # x = loc + L u with L lower-triangular
    x = draw(rng, (200_000, 2)) @ mix.T + np.array([0.2, -0.1])
    mom = shape_x_moments([0.2, -0.1], mix @ mix.T, skew, kurt)
    emp = empirical_x_moments(x)
    np.testing.assert_allclose(mom.second, emp.second, atol=0.01)
    np.testing.assert_allclose(mom.fourth_cov, emp.fourth_cov, atol=0.05 * kurt)
    means = shape_monomial_means([0.2, -0.1], mix @ mix.T, skew, kurt, [[3, 0], [0, 4], [2, 1]])
    mc = [np.mean(x[:, 0] ** 3), np.mean(x[:, 1] ** 4), np.mean(x[:, 0] ** 2 * x[:, 1])]
    np.testing.assert_allclose(means, mc, atol=0.03 * kurt)


def test_binary_moments_are_the_cells_moments():
    rng = np.random.default_rng(4)
    x = (rng.uniform(size=(5000, 2)) < [0.3, 0.6]).astype(float)
    x[:2000, 1] = x[:2000, 0]  # correlated
    probs = [np.mean((x[:, 0] == i) & (x[:, 1] == j)) for i in (0, 1) for j in (0, 1)]
    mom, emp = binary_x_moments(probs), empirical_x_moments(x)
    np.testing.assert_allclose(mom.second, emp.second, atol=1e-12)
    np.testing.assert_allclose(mom.fourth_cov, emp.fourth_cov, atol=1e-12)
    s = regression_statistic(x, rng.normal(size=5000))
    counts = binary_cell_counts(s, 5000, 2)
    np.testing.assert_allclose(counts, 5000 * np.asarray(probs))
    with pytest.raises(ValueError, match="d <= 2"):
        binary_cell_counts(np.zeros(20), 10, 3)


def test_moment_log_likelihood_is_the_convolution():
    rng = np.random.default_rng(5)
    draws = rng.normal(1.0, 2.0, 400_000) + rng.laplace(0.0, 1.5, 400_000)
    hist, edges = np.histogram(draws, bins=60, range=(-8, 10), density=True)
    mid = 0.5 * (edges[1:] + edges[:-1])
    dens = np.exp([moment_log_likelihood([m], [1.0], [4.0], 1.5) for m in mid])
    np.testing.assert_allclose(dens, hist, atol=0.004)
    # Far tails stay finite.
    assert np.isfinite(moment_log_likelihood([1e4, -1e4], [0.0, 0.0], [1.0, 1.0], 1.0))


def test_binary_at_huge_epsilon_is_the_conjugate_posterior():
    rng = np.random.default_rng(6)
    n = 300
    x = (rng.uniform(size=(n, 1)) < 0.3).astype(float)
    y = 0.2 + 0.5 * x[:, 0] + 0.3 * rng.standard_normal(n)
    y = np.clip(y, -3, 3)
    rel = release_regression(x, y, x_bounds=[(0, 1)], y_bounds=(-3, 3), epsilon=1e5, rng=7)
    tr = sample_x_model(
        8, released=rel.value[None], n=n, prior=PRIOR, x_model="binary", scale=rel.scale,
        draws=1500, tune=200, chains=2,
    )  # fmt: skip
    exact = nig_update(PRIOR, statistic=regression_statistic(x, y), n=n)
    theta, sigma2 = draw_nig(rng, exact, size=(20000,))
    got_t, got_s = tr.theta[:, :, 0].reshape(-1, 2), tr.sigma2[:, :, 0].ravel()
    np.testing.assert_allclose(got_t.mean(0), theta.mean(0), atol=0.01)
    np.testing.assert_allclose(got_t.std(0), theta.std(0), rtol=0.1)
    np.testing.assert_allclose(got_s.mean(), sigma2.mean(), rtol=0.02)
    np.testing.assert_allclose(tr.x_params["probs"][..., 0, 1].mean(), x.mean(), atol=0.01)


def _coverage(tr, truth):
    draws = np.concatenate([tr.theta, tr.sigma2[..., None]], axis=-1)
    draws = draws.reshape(-1, *draws.shape[2:])
    lo, hi = np.quantile(draws, [0.05, 0.95], axis=0)
    return np.mean((truth >= lo) & (truth <= hi), axis=0)


def _binary_trials(rng, trials, n, epsilon):
    truth, z = [], []
    while len(truth) < trials:
        theta, sigma2 = draw_nig(rng, PRIOR)
        x = (rng.uniform(size=(n, 1)) < rng.beta(1, 1)).astype(float)
        y = theta[0] + theta[1] * x[:, 0] + np.sqrt(sigma2) * rng.standard_normal(n)
        if np.any(np.abs(y) > 3):
            continue
        rel = release_regression(x, y, x_bounds=[(0, 1)], y_bounds=(-3, 3), epsilon=epsilon,
                                 rng=rng)  # fmt: skip
        truth.append([theta[0], theta[1], sigma2])
        z.append(rel.value)
    return np.array(truth), np.array(z), rel.scale


@pytest.mark.slow
def test_binary_calibration_small():
    """60 trials with P(x = 1) ~ Beta(1, 1) (the model's prior): 90 % coverage in [0.77, 0.98]."""
    truth, z, scale = _binary_trials(np.random.default_rng(9), 60, 100, 1.0)
    tr = sample_x_model(10, released=z, n=100, prior=PRIOR, x_model="binary", scale=scale,
                        draws=400, tune=150, chains=2)  # fmt: skip
    cov = _coverage(tr, truth)
    assert np.all((cov >= 0.77) & (cov <= 0.98)), cov


def test_shape_sampler_runs_with_and_without_moments():
    rng = np.random.default_rng(11)
    x = rng.uniform(-0.5, 0.5, (200, 1))
    y = 0.1 + 0.4 * x[:, 0] + 0.2 * rng.standard_normal(200)
    x_prior = NIW(np.zeros(1), np.array(1.0), np.array(4.0), np.array([[2.0]]))
    for share in (None, 0.2):
        rel = release_regression(x, y, x_bounds=[(-2, 2)], y_bounds=(-3, 3), epsilon=5.0,
                                 moments_share=share, rng=12)  # fmt: skip
        extra = {}
        if share:
            fm = rel.fourth_moments
            extra = {"moments": fm.value[None], "moment_powers": fm.powers,
                     "moment_scale": fm.sensitivity / fm.epsilon}  # fmt: skip
        tr = sample_x_model(13, released=rel.value[None], n=200, prior=PRIOR, x_model="shape",
                            x_prior=x_prior, scale=rel.scale, draws=60, tune=40, chains=2,
                            **extra)  # fmt: skip
        assert np.all(np.isfinite(tr.theta)) and 0.05 < tr.acceptance < 0.95
        kurt = tr.x_params["kurt"]
        skew = tr.x_params["skew"]
        assert np.all(kurt >= 1 + skew**2)
    with pytest.raises(ValueError, match="x_model"):
        sample_x_model(1, released=rel.value[None], n=200, prior=PRIOR, x_model="t",
                       scale=1.0, draws=1)  # fmt: skip
    with pytest.raises(TypeError, match="x_prior"):
        sample_x_model(1, released=rel.value[None], n=200, prior=PRIOR, x_model="shape",
                       scale=1.0, draws=1)  # fmt: skip


def _nig_model(p):
    import pymc as pm

    model = pm.Model()
    with model:
        sigma2 = pm.InverseGamma("sigma2", 20.0, 1.9)
        theta = pm.MvNormal("theta", np.zeros(p), cov=sigma2 * 2.0 * np.eye(p))
    return model, theta, sigma2


def test_binary_node_variables_attrs_and_errors():
    from pymc_dp.regression import NoisyRegressionStat
    from pymc_dp.regression.model.noisy_regression import regression_attrs

    rel = release_regression(np.eye(4)[:, :2], np.zeros(4), x_bounds=[(0, 1)] * 2,
                             y_bounds=(-3, 3), epsilon=1.0, rng=0)  # fmt: skip
    model, theta, sigma2 = _nig_model(3)
    with model:
        NoisyRegressionStat("z", theta=theta, sigma2=sigma2, release=rel, x_model="binary",
                            method="gibbs-ss")  # fmt: skip
    assert "z_x_probs" in model.named_vars and "z_x_loc" not in model.named_vars
    assert model.coords["z_cell"] == ("x1=0,x2=0", "x1=0,x2=1", "x1=1,x2=0", "x1=1,x2=1")
    assert regression_attrs(model) == {
        "pymc_dp_x_model_z": "binary",
        "pymc_dp_method_z": "gibbs-ss",
    }
    model, theta, sigma2 = _nig_model(3)
    with model:
        NoisyRegressionStat("z", theta=theta, sigma2=sigma2, release=rel)
        assert regression_attrs(model)["pymc_dp_x_model_z"] == "normal"
        with pytest.raises(ValueError, match="x_model must be one of"):
            NoisyRegressionStat("w", theta=theta, sigma2=sigma2, release=rel, x_model="beta")
    rel3 = release_regression(np.eye(5)[:, :3], np.zeros(5), x_bounds=[(0, 1)] * 3,
                              y_bounds=(-3, 3), epsilon=1.0, rng=0)  # fmt: skip
    model, theta, sigma2 = _nig_model(4)
    with model, pytest.raises(ValueError, match="method='gibbs-ss' takes d <= 2"):
        NoisyRegressionStat("z", theta=theta, sigma2=sigma2, release=rel3, x_model="binary",
                            method="gibbs-ss")  # fmt: skip
    rel4 = release_regression(np.eye(6)[:, :4], np.zeros(6), x_bounds=[(0, 1)] * 4,
                              y_bounds=(-3, 3), epsilon=1.0, rng=0)  # fmt: skip
    model, theta, sigma2 = _nig_model(5)
    with model, pytest.raises(ValueError, match="d <= 3"):
        NoisyRegressionStat("z", theta=theta, sigma2=sigma2, release=rel4, x_model="binary")


@pytest.mark.slow
def test_binary_node_at_huge_epsilon_is_the_conjugate_posterior():
    """pm.sample with x_model='binary' under Gibbs-SS, d = 2, ε = 1e5: the non-private NIG
    posterior (~70 s)."""
    import pymc as pm

    from pymc_dp.regression import NoisyRegressionStat

    rng = np.random.default_rng(6)
    n = 300
    x = (rng.uniform(size=(n, 2)) < [0.3, 0.5]).astype(float)
    y = np.clip(0.2 + 0.5 * x[:, 0] - 0.3 * x[:, 1] + 0.3 * rng.standard_normal(n), -3, 3)
    rel = release_regression(x, y, x_bounds=[(0, 1)] * 2, y_bounds=(-3, 3), epsilon=1e5, rng=7)
    model, theta, sigma2 = _nig_model(3)
    with model:
        NoisyRegressionStat("z", theta=theta, sigma2=sigma2, release=rel, x_model="binary",
                            method="gibbs-ss")  # fmt: skip
        idata = pm.sample(draws=1000, tune=300, chains=2, random_seed=1, progressbar=False,
                          compute_convergence_checks=False)  # fmt: skip
    exact = nig_update(NIG(np.zeros(3), 0.5 * np.eye(3), np.array(20.0), np.array(1.9)),
                       statistic=regression_statistic(x, y), n=n)  # fmt: skip
    th, _ = draw_nig(rng, exact, size=(20000,))
    post = idata.posterior["theta"].values.reshape(-1, 3)
    np.testing.assert_allclose(post.mean(0), th.mean(0), atol=0.01)
    np.testing.assert_allclose(post.std(0), th.std(0), rtol=0.12)
    probs = idata.posterior["z_x_probs"].values.reshape(-1, 4).mean(0)
    cells = [np.mean((x[:, 0] == i) & (x[:, 1] == j)) for i in (0, 1) for j in (0, 1)]
    np.testing.assert_allclose(probs, cells, atol=0.02)
