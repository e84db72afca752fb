"""The exact law of the regression statistic under a normal model of x (normal_model.py)."""

import numpy as np
import pytest
from scipy import stats

from pymc_dp.curator.regression.statistics import pack_statistic
from pymc_dp.regression import normal_x_moments, regression_statistic, suffstat_moments
from pymc_dp.regression.kernels.normal_model import (
    draw_statistic,
    record_moments,
    response_logpdf,
    split_statistic,
    statistic_logpdf,
)

THETA = np.array([0.3, -0.5, 1.0])
SIGMA2 = 0.7
LOC = np.array([0.2, -0.1])
COV = np.array([[1.0, 0.3], [0.3, 0.5]])
N = 12


def _records(rng, size, n=N):
    x = LOC + rng.standard_normal((size, n, 2)) @ np.linalg.cholesky(COV).T
    y = THETA[0] + x @ THETA[1:] + np.sqrt(SIGMA2) * rng.standard_normal((size, n))
    return x, y


def test_draws_have_the_law_of_the_statistic_of_simulated_records():
    """d = 2, n = 12: 20 000 draws without records against 20 000 statistics of simulated
    records, two-sample KS per component at α = 0.001 / 9."""
    rng = np.random.default_rng(1)
    draws = draw_statistic(rng, theta=THETA, sigma2=SIGMA2, x_loc=LOC, x_cov=COV, n=N,
                           size=(20_000,))  # fmt: skip
    x, y = _records(rng, 20_000)
    reference = np.stack([regression_statistic(x[i], y[i]) for i in range(20_000)])
    for j in range(draws.shape[-1]):
        assert stats.ks_2samp(draws[:, j], reference[:, j]).pvalue > 1e-3 / 9


def test_logpdf_depends_on_the_parameters_as_the_records_likelihood():
    """s is sufficient: log p(s | φ') − log p(s | φ) equals the records' log-likelihood ratio,
    for changes of (θ, σ²) and of (μ_x, Σ_x)."""
    rng = np.random.default_rng(2)
    x, y = _records(rng, 1)
    x, y = x[0], y[0]
    s = regression_statistic(x, y)
    design = np.column_stack([np.ones(N), x])

    def exact(theta, sigma2, loc, cov):
        return statistic_logpdf(s, theta=theta, sigma2=sigma2, x_loc=loc, x_cov=cov, n=N)

    def records(theta, sigma2, loc, cov):
        return (
            stats.norm.logpdf(y, design @ theta, np.sqrt(sigma2)).sum()
            + stats.multivariate_normal.logpdf(x, loc, cov).sum()
        )

    base = (THETA, SIGMA2, LOC, COV)
    others = [
        (THETA + 0.1, 1.3, LOC, COV),
        (THETA - 0.2, 0.4, LOC + 0.3, np.array([[2.0, -0.2], [-0.2, 0.8]])),
    ]
    for other in others:
        np.testing.assert_allclose(
            exact(*other) - exact(*base), records(*other) - records(*base), rtol=1e-9
        )


def test_logpdf_is_the_product_of_the_four_textbook_densities():
    """An independent evaluation with SciPy's normal, Wishart and gamma densities, d = 2."""
    rng = np.random.default_rng(3)
    s = draw_statistic(rng, theta=THETA, sigma2=SIGMA2, x_loc=LOC, x_cov=COV, n=N)
    parts = split_statistic(s, N)
    ref = (
        stats.multivariate_normal.logpdf(parts.mean, LOC, COV / N)
        - 2 * np.log(N)  # the Jacobian of x̄ = Σx / n
        + stats.wishart.logpdf(parts.scatter, N - 1, COV)
        + stats.multivariate_normal.logpdf(parts.xty, parts.gram @ THETA, SIGMA2 * parts.gram)
        + stats.gamma.logpdf(parts.residual, (N - 3) / 2, scale=2 * SIGMA2)
    )
    got = statistic_logpdf(s, theta=THETA, sigma2=SIGMA2, x_loc=LOC, x_cov=COV, n=N)
    np.testing.assert_allclose(got, ref, rtol=1e-10)


def test_logpdf_is_minus_infinity_exactly_off_the_valid_statistics():
    rng = np.random.default_rng(4)
    s = draw_statistic(rng, theta=THETA, sigma2=SIGMA2, x_loc=LOC, x_cov=COV, n=N, size=(50,))
    kw = dict(theta=THETA, sigma2=SIGMA2, x_loc=LOC, x_cov=COV, n=N)
    assert np.all(np.isfinite(statistic_logpdf(s, **kw)))
    bad = s.copy()
    bad[:, -1] = 0.0  # Σy² = 0 with Σy ≠ 0: no data set
    assert np.all(statistic_logpdf(bad, **kw) == -np.inf)
    bad = s.copy()
    bad[:, 2] = 0.0  # Σx₁² = 0 with Σx₁ ≠ 0
    assert np.all(statistic_logpdf(bad, **kw) == -np.inf)


def test_a_negative_definite_scatter_has_no_density():
    """A Gram matrix whose scatter has two negative eigenvalues has a positive determinant; it
    is no data set's, and both densities are −∞ there (they were finite while validity was the
    determinant's sign)."""
    mean = np.array([0.1, -0.2])
    scatter = -np.array([[3.0, 0.5], [0.5, 2.0]])
    gram = np.zeros((3, 3))
    gram[0, 0] = N
    gram[0, 1:] = gram[1:, 0] = N * mean
    gram[1:, 1:] = scatter + N * np.outer(mean, mean)
    assert np.linalg.det(gram) > 0 and np.linalg.eigvalsh(gram)[1] < 0
    b = np.zeros((4, 4))
    b[:3, :3] = gram
    b[:3, 3] = b[3, :3] = gram @ THETA
    b[3, 3] = THETA @ gram @ THETA + 5.0
    s = pack_statistic(b)
    kw = dict(theta=THETA, sigma2=SIGMA2, x_loc=LOC, x_cov=COV, n=N)
    assert statistic_logpdf(s, **kw) == -np.inf
    assert response_logpdf(split_statistic(s, N), theta=THETA, sigma2=SIGMA2, n=N) == -np.inf


@pytest.mark.parametrize("d", [1, 2, 5])
def test_record_moments_equal_the_general_clt_moments_and_monte_carlo(d):
    rng = np.random.default_rng(5 + d)
    theta = rng.normal(size=(4, d + 1))
    sigma2 = rng.uniform(0.2, 1.0, size=4)
    loc = rng.normal(size=(4, d))
    a = rng.normal(size=(4, d, d))
    cov = a @ np.swapaxes(a, -1, -2) + np.eye(d)
    mean, var = record_moments(theta, sigma2, loc, cov)
    ref_mean, ref_var = suffstat_moments(theta, sigma2, normal_x_moments(loc, cov))
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(var, ref_var, rtol=1e-10, atol=1e-10)
    if d == 1:
        # The statistic of n records has mean n μ_t and covariance n Σ_t exactly.
        n = 40
        s = draw_statistic(rng, theta=theta[0], sigma2=sigma2[0], x_loc=loc[0], x_cov=cov[0],
                           n=n, size=(200_000,))  # fmt: skip
        sd = np.sqrt(np.diag(n * var[0]))
        assert np.all(np.abs(s.mean(0) - n * mean[0]) < 5 * sd / np.sqrt(200_000))
        np.testing.assert_allclose(np.cov(s.T), n * var[0], rtol=0.03, atol=0.03 * sd.max())
