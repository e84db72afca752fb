"""Regression kernels: PSD projection, the restricted s draw, NIG update and draws."""

import ast
import pathlib

import numpy as np
import pytest
from scipy import stats

import pymc_dp.regression as reg
from pymc_dp.curator.regression.statistics import (
    pack_statistic,
    regression_statistic,
    unpack_statistic,
)
from pymc_dp.kernels import norm_product
from pymc_dp.regression.kernels.conjugate import check_nig, draw_nig, nig_update
from pymc_dp.regression.kernels.psd import min_schur_eigenvalue, project_psd
from pymc_dp.regression.kernels.suffstat import draw_regression_suffstat, is_valid_statistic


def _random_b(rng, q=4, n=10.0, shift=-2.0):
    """Symmetric [[n, bᵀ], [b, C]] whose Schur complement has eigenvalues around ``shift``."""
    b = rng.normal(size=(q, q))
    b = b + b.T + shift * np.eye(q)
    b[0, 0] = n
    return b


def test_project_psd_is_the_nearest_psd_matrix_with_the_same_first_row():
    """Output PSD, row 0 kept, fixed points kept, and no valid matrix with the same first row
    (200 random candidates, and perturbations of the output) is closer in Frobenius norm."""
    rng = np.random.default_rng(0)
    b = _random_b(rng)
    assert min_schur_eigenvalue(b) < 0
    proj = project_psd(b)
    assert min_schur_eigenvalue(proj) >= -1e-10
    np.testing.assert_allclose(proj[0], b[0])
    np.testing.assert_allclose(proj, proj.T)
    np.testing.assert_allclose(project_psd(proj), proj, atol=1e-10)
    best = np.linalg.norm(proj - b)
    for _ in range(200):
        cand = project_psd(proj + 0.3 * rng.standard_normal() * _random_b(rng, shift=0.0))
        cand[0], cand[:, 0] = b[0], b[0]
        cand = project_psd(cand)
        assert np.linalg.norm(cand - b) >= best - 1e-9
    # A floor makes it strictly positive definite; batches work.
    batch = np.stack([_random_b(rng) for _ in range(5)])
    out = project_psd(batch, floor=0.5)
    assert np.all(min_schur_eigenvalue(out) >= 0.5 - 1e-9)


def test_projected_statistic_is_a_possible_data_set():
    """The projection of an invalid B is a valid statistic despite rounding, as is real data."""
    rng = np.random.default_rng(1)
    s = pack_statistic(project_psd(_random_b(rng, q=3, n=25.0)))
    assert is_valid_statistic(s, 25.0)
    # The exact statistic of real data is always valid.
    x, y = rng.normal(size=(30, 1)), rng.normal(size=30)
    assert is_valid_statistic(regression_statistic(x, y), 30)


def _truncation_case():
    """d = 1, n = 6: a normal for s that puts about half its mass on invalid statistics."""
    x = np.array([0.0, 0.2, 0.4, 0.5, 0.7, 1.0])
    y = 0.5 + x
    mean = regression_statistic(x[:, None], y)
    cov = 0.04 * np.eye(5) + 0.02
    return 6, mean, cov


def _reference(rng, n, mean, cov, size):
    draws = rng.multivariate_normal(mean, cov, size=4 * size)
    ok = is_valid_statistic(draws, n)
    return draws[ok][:size], ok.mean()


@pytest.mark.parametrize("proposals", [0, 2])
def test_suffstat_kernel_leaves_the_restricted_normal_invariant(proposals):
    """Start 20 000 chains at exact draws of the normal restricted to valid s (rejection), take
    one kernel step (only Gibbs sweeps with proposals=0; the mixture with 2): each component
    still matches the reference, two-sample KS at α = 0.001 / 5, and all draws are valid."""
    rng = np.random.default_rng(2)
    n, mean, cov = _truncation_case()
    size = 20_000
    start, rate = _reference(rng, n, mean, cov, size)
    assert 0.2 < rate < 0.8  # the restriction matters
    big = np.full((size, 5), 1e12)  # z carries no information: NormProduct = the CLT normal
    out = draw_regression_suffstat(
        rng,
        clt_mean=np.broadcast_to(mean, (size, 5)),
        clt_cov=np.broadcast_to(cov, (size, 5, 5)),
        released=np.zeros((size, 5)),
        noise_variance=big,
        n=n,
        current=start,
        proposals=proposals,
    )
    assert np.all(is_valid_statistic(out.value, n))
    if proposals == 0:
        assert out.n_fallback == size
        assert np.mean(np.any(out.value != start, axis=1)) > 0.99
    ref, _ = _reference(rng, n, mean, cov, size)
    for j in range(5):
        assert stats.ks_2samp(out.value[:, j], ref[:, j]).pvalue > 1e-3 / 5
    # The same test tells the projected normal (the paper's fix) apart in this hard case.
    raw = rng.multivariate_normal(mean, cov, size=size)
    projected = pack_statistic(project_psd(unpack_statistic(raw, n)))
    assert min(stats.ks_2samp(projected[:, j], ref[:, j]).pvalue for j in range(5)) < 1e-6


def test_suffstat_kernel_without_truncation_is_norm_product():
    """Far inside the valid set, the draw is NormProduct's normal (KS per component, α=0.001/5)."""
    rng = np.random.default_rng(3)
    x = rng.uniform(size=(500, 1))
    y = x[:, 0] + 0.3 * rng.standard_normal(500)
    s = regression_statistic(x, y)
    cov = np.diag(np.abs(s) * 0.01 + 1.0)
    z = s + rng.normal(size=5)
    size = 5000
    out = draw_regression_suffstat(
        rng,
        clt_mean=np.broadcast_to(s, (size, 5)),
        clt_cov=np.broadcast_to(cov, (size, 5, 5)),
        released=np.broadcast_to(z, (size, 5)),
        noise_variance=np.full((size, 5), 4.0),
        n=500,
        current=np.broadcast_to(s, (size, 5)),
    )
    assert out.n_fallback == 0
    m3, c3 = norm_product(s, cov, z, np.full(5, 4.0))
    for j in range(5):
        dist = stats.norm(m3[j], np.sqrt(c3[j, j]))
        assert stats.kstest(out.value[:, j], dist.cdf).pvalue > 1e-3 / 5


def test_nig_update_matches_explicit_formulas():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(40, 2))
    y = 1.0 + x @ [0.5, -1.0] + 0.3 * rng.standard_normal(40)
    prior = check_nig((np.array([0.1, 0.2, -0.3]), np.diag([0.5, 2.0, 1.0]), 3.0, 2.0))
    post = nig_update(prior, statistic=regression_statistic(x, y), n=40)
    a = np.column_stack([np.ones(40), x])
    lam = a.T @ a + prior.precision
    mu = np.linalg.solve(lam, prior.precision @ prior.mean + a.T @ y)
    bn = 2.0 + 0.5 * (y @ y + prior.mean @ prior.precision @ prior.mean - mu @ lam @ mu)
    np.testing.assert_allclose(post.mean, mu, rtol=1e-10)
    np.testing.assert_allclose(post.precision, lam, rtol=1e-12)
    np.testing.assert_allclose(post.shape, 23.0)
    np.testing.assert_allclose(post.scale, bn, rtol=1e-10)


def test_draw_nig_marginals():
    """σ² ~ InvGamma(a, b) and θ_j ~ Student-t(2a, μ_j, sqrt(b/a (Λ⁻¹)_jj)); KS at α=0.001/3."""
    nig = check_nig((np.array([1.0, -2.0]), np.array([[2.0, 0.5], [0.5, 1.0]]), 4.0, 3.0))
    theta, sigma2 = draw_nig(np.random.default_rng(5), nig, size=(20_000,))
    assert stats.kstest(sigma2, stats.invgamma(4.0, scale=3.0).cdf).pvalue > 1e-3 / 3
    cov = np.linalg.inv(nig.precision)
    for j in range(2):
        t = stats.t(8.0, loc=nig.mean[j], scale=np.sqrt(3.0 / 4.0 * cov[j, j]))
        assert stats.kstest(theta[:, j], t.cdf).pvalue > 1e-3 / 3


@pytest.mark.parametrize(
    "prior,match",
    [
        ((np.zeros(2), np.eye(3), 1.0, 1.0), "precision"),
        ((np.zeros(2), -np.eye(2), 1.0, 1.0), "positive definite"),
        ((np.zeros(2), np.eye(2), 0.0, 1.0), "> 0"),
        ((np.zeros(2), np.eye(2), 1.0, np.nan), "finite"),
    ],
)
def test_check_nig_rejects_bad_priors(prior, match):
    with pytest.raises(ValueError, match=match):
        check_nig(prior)


def test_curator_modules_import_no_inference_code():
    """release, statistics and sensitivity import neither moments, kernels nor the sampler."""
    root = pathlib.Path(reg.__file__).parents[1] / "curator" / "regression"
    inference = {"moments", "kernels", "sampler", "conjugate", "baselines", "psd"}
    for name in ("release", "statistics", "sensitivity"):
        tree = ast.parse((root / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert node.module.split(".")[-1] not in inference, (name, node.module)
                assert not node.module.startswith("pymc_dp.kernels"), (name, node.module)
                assert not node.module.startswith("pymc_dp.regression"), (name, node.module)
