"""Statistical tests of the pure NumPy kernels against their closed-form distributions.

Every sampling test draws a fixed-seed sample and runs a KS or χ² test at ``ALPHA = 0.001``;
a test with several components uses a Bonferroni bound (``min p · m > ALPHA``).
"""

import itertools

import numpy as np
import pytest
from scipy import integrate, stats

from pymc_dp.kernels import (
    TruncatedDraw,
    draw_beta,
    draw_dirichlet,
    draw_noise_variance,
    draw_truncated_normal,
    noise_variance_logpdf,
    norm_product,
)

ALPHA = 1e-3


def assert_pvalues(pvalues):
    pvalues = np.atleast_1d(np.asarray(pvalues, dtype=float))
    assert np.min(pvalues) * pvalues.size > ALPHA, pvalues


def ks_p(sample, cdf):
    return stats.kstest(np.ravel(sample), cdf).pvalue


def ks2_p(a, b):
    return stats.ks_2samp(np.ravel(a), np.ravel(b)).pvalue


def beta_gof_p(sample, a, b, n_bins=20):
    """χ² test against Beta(a, b) on equiprobable bins.

    Used instead of KS because for small a or b a float64 sample has atoms: a Beta(0.05, 0.05)
    variate lies within 1e-16 of 1 with probability 0.08 and rounds to exactly 1.0.
    """
    dist = stats.beta(a, b)
    probs = np.arange(1, n_bins) / n_bins
    inner = np.where(probs <= 0.5, dist.ppf(probs), dist.isf(1 - probs))
    inner = np.unique(inner[(inner > 0) & (inner < 1)])
    edges = np.concatenate([[0.0], inner, [1.0]])
    expected = np.diff(dist.cdf(edges))
    observed = np.histogram(sample, bins=edges)[0]
    return stats.chisquare(observed, expected / expected.sum() * observed.sum()).pvalue


def inv_gauss(residual, scale):
    """1/σ² | r ~ InverseGaussian(mean 1/(b|r|), shape 1/b²) as a frozen scipy distribution."""
    mean, shape = 1.0 / (scale * abs(residual)), 1.0 / scale**2
    return stats.invgauss(mean / shape, scale=shape)


def categorical_clt(n, p):
    p = np.asarray(p, dtype=float)
    return n * p, n * (np.diag(p) - np.outer(p, p))


# ---- draw_noise_variance ---------------------------------------------------------------------

NOISE_CASES = [
    (0.0, 1.0),
    (0.0, 3.5),
    (1e-12, 2.0),
    (-1e-6, 0.5),
    (0.3, 1.0),
    (-2.0, 0.5),
    (7.5, 3.0),
    (20.0, 1.0),
]


@pytest.mark.parametrize(("residual", "scale"), NOISE_CASES)
def test_noise_variance_matches_inverse_gaussian(residual, scale):
    rng = np.random.default_rng(20180101)
    sigma2 = draw_noise_variance(rng, residual=np.full(40_000, residual), scale=scale)
    assert sigma2.shape == (40_000,)
    assert np.all(np.isfinite(sigma2)) and np.all(sigma2 > 0)
    if residual == 0:
        p = ks_p(sigma2, stats.gamma(0.5, scale=2 * scale**2).cdf)
    else:
        p = ks_p(1.0 / sigma2, inv_gauss(residual, scale).cdf)
    assert_pvalues(p)


def test_noise_variance_batch_rows_follow_their_own_parameters():
    rng = np.random.default_rng(11)
    residual = np.array([[0.0], [0.5], [-4.0]])
    scale = np.array([[2.0], [0.3], [1.0]])
    sigma2 = draw_noise_variance(rng, residual=np.broadcast_to(residual, (3, 20_000)), scale=scale)
    assert sigma2.shape == (3, 20_000)
    pvalues = [ks_p(sigma2[0], stats.gamma(0.5, scale=2 * 2.0**2).cdf)]
    pvalues += [ks_p(1 / sigma2[i], inv_gauss(residual[i, 0], scale[i, 0]).cdf) for i in (1, 2)]
    assert_pvalues(pvalues)


@pytest.mark.parametrize("scale", [0.5, 3.0])
def test_noise_variance_is_the_laplace_mixing_conditional(scale):
    # σ² ~ Exp(rate 1/(2b²)), r | σ² ~ N(0, σ²) gives r ~ Laplace(0, b); drawing σ² | r for
    # r ~ Laplace(0, b) must therefore give back the Exp(rate 1/(2b²)) marginal.
    rng = np.random.default_rng(2018)
    residual = rng.laplace(0.0, scale, size=50_000)
    sigma2 = draw_noise_variance(rng, residual=residual, scale=scale)
    assert_pvalues(ks_p(sigma2, stats.expon(scale=2 * scale**2).cdf))


LOGPDF_CASES = [(0.0, 1.0), (1.0, 2.0), (-3.0, 0.5), (0.01, 5.0), (10.0, 1.0)]


@pytest.mark.parametrize(("residual", "scale"), LOGPDF_CASES)
def test_noise_variance_logpdf_integrates_to_one(residual, scale):
    # Substitute σ² = u² so that the σ^-1 singularity at r = 0 is integrable by quad.
    def integrand(u):
        return 2 * u * np.exp(noise_variance_logpdf(u * u, residual=residual, scale=scale))

    total = integrate.quad(integrand, 0, np.inf, limit=200)[0]
    assert total == pytest.approx(1.0, abs=1e-7)


@pytest.mark.parametrize(("residual", "scale"), LOGPDF_CASES)
def test_noise_variance_logpdf_equals_closed_form(residual, scale):
    sigma2 = scale**2 * np.geomspace(1e-4, 1e3, 50)
    got = noise_variance_logpdf(sigma2, residual=residual, scale=scale)
    if residual == 0:
        expected = stats.gamma(0.5, scale=2 * scale**2).logpdf(sigma2)
    else:
        # Change of variables from X = 1/σ²: p(σ²) = p_X(1/σ²) / σ⁴.
        expected = inv_gauss(residual, scale).logpdf(1 / sigma2) - 2 * np.log(sigma2)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(("residual", "scale"), [(0.0, 1.0), (1.0, 2.0), (-3.0, 0.5)])
def test_noise_variance_histogram_matches_logpdf(residual, scale):
    n_draws, n_bins = 40_000, 20
    rng = np.random.default_rng(7)
    sigma2 = draw_noise_variance(rng, residual=np.full(n_draws, residual), scale=scale)
    probs = np.arange(1, n_bins) / n_bins
    if residual == 0:
        inner = stats.gamma(0.5, scale=2 * scale**2).ppf(probs)
    else:
        inner = np.sort(1 / inv_gauss(residual, scale).ppf(probs))
    edges = np.concatenate([[0.0], inner, [np.inf]])

    def density(v):
        return np.exp(noise_variance_logpdf(v, residual=residual, scale=scale))

    expected = np.array(
        [integrate.quad(density, lo, hi, limit=200)[0] for lo, hi in itertools.pairwise(edges)]
    )
    assert expected.sum() == pytest.approx(1.0, abs=1e-6)
    observed = np.histogram(sigma2, bins=edges)[0]
    assert_pvalues(stats.chisquare(observed, expected / expected.sum() * n_draws).pvalue)


# ---- draw_beta / draw_dirichlet --------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"), [(0.05, 0.05), (0.05, 2.0), (0.5, 0.5), (3.0, 7.0), (200.0, 50.0)]
)
def test_draw_beta_matches_scipy(a, b):
    rng = np.random.default_rng(1)
    theta = draw_beta(rng, alpha=np.full(30_000, a), beta=b)
    assert theta.shape == (30_000,)
    assert not np.any(np.isnan(theta))
    assert np.all((theta >= 0) & (theta <= 1))
    assert_pvalues(beta_gof_p(theta, a, b))


def test_draw_beta_broadcasts_batch_dimensions():
    rng = np.random.default_rng(2)
    alpha = np.broadcast_to(np.array([[0.5], [4.0], [30.0]]), (3, 20_000))
    beta = np.array([[2.0], [4.0], [0.1]])
    theta = draw_beta(rng, alpha=alpha, beta=beta)
    assert theta.shape == (3, 20_000)
    assert_pvalues([beta_gof_p(theta[i], alpha[i, 0], beta[i, 0]) for i in range(3)])


DIRICHLET_CASES = [
    [0.05, 0.05, 0.05],
    [0.05, 1.0, 5.0],
    [2.0, 3.0, 4.0, 1.0],
    [0.5, 0.5],
    [150.0, 20.0, 0.3],
]


@pytest.mark.parametrize("alpha", DIRICHLET_CASES)
def test_draw_dirichlet_marginals_are_beta(alpha):
    alpha = np.asarray(alpha)
    rng = np.random.default_rng(3)
    theta = draw_dirichlet(rng, alpha=np.broadcast_to(alpha, (30_000, alpha.size)))
    assert theta.shape == (30_000, alpha.size)
    assert np.all(np.isfinite(theta)) and np.all(theta >= 0)
    np.testing.assert_allclose(theta.sum(axis=-1), 1.0, rtol=0, atol=1e-12)
    total = alpha.sum()
    assert_pvalues([beta_gof_p(theta[:, k], a, total - a) for k, a in enumerate(alpha)])


def test_draw_dirichlet_aggregation_property():
    # (θ0 / (θ0 + θ1)) ~ Beta(α0, α1), a check of the joint law beyond the marginals.
    alpha = np.array([2.0, 3.0, 4.0, 1.0])
    theta = draw_dirichlet(np.random.default_rng(4), alpha=np.broadcast_to(alpha, (30_000, 4)))
    ratio = theta[:, 0] / (theta[:, 0] + theta[:, 1])
    merged = theta[:, 0] + theta[:, 2]
    assert_pvalues(
        [
            ks_p(ratio, stats.beta(2.0, 3.0).cdf),
            ks_p(merged, stats.beta(6.0, 4.0).cdf),
        ]
    )


def test_draw_dirichlet_tiny_concentrations_do_not_give_nan():
    theta = draw_dirichlet(np.random.default_rng(5), alpha=np.full((5_000, 4), 1e-3))
    assert np.all(np.isfinite(theta)) and np.all(theta >= 0)
    np.testing.assert_allclose(theta.sum(axis=-1), 1.0, rtol=0, atol=1e-12)


def test_draw_dirichlet_batch_rows_follow_their_own_parameters():
    alphas = np.array([[0.05, 1.0, 5.0], [3.0, 3.0, 0.5]])
    batch = np.broadcast_to(alphas[:, None, :], (2, 20_000, 3))
    theta = draw_dirichlet(np.random.default_rng(6), alpha=batch)
    assert theta.shape == (2, 20_000, 3)
    pvalues = [
        beta_gof_p(theta[i, :, k], alphas[i, k], alphas[i].sum() - alphas[i, k])
        for i in range(2)
        for k in range(3)
    ]
    assert_pvalues(pvalues)


# ---- norm_product ----------------------------------------------------------------------------


def random_spd(rng, batch, k):
    a = rng.standard_normal((*batch, k, k))
    return a @ np.swapaxes(a, -1, -2) + 0.1 * np.eye(k)


@pytest.mark.parametrize(("batch", "k"), [((), 1), ((), 3), ((20,), 4), ((3, 5), 2)])
def test_norm_product_equals_inverse_formula(batch, k):
    rng = np.random.default_rng(100 + k)
    mean1 = rng.normal(size=(*batch, k)) * 5
    cov1 = random_spd(rng, batch, k)
    mean2 = rng.normal(size=(*batch, k)) * 5
    var2 = rng.uniform(0.1, 4.0, size=(*batch, k))
    mean3, cov3 = norm_product(mean1, cov1, mean2, var2)
    assert mean3.shape == (*batch, k) and cov3.shape == (*batch, k, k)

    prec1, prec2 = np.linalg.inv(cov1), np.linalg.inv(var2[..., :, None] * np.eye(k))
    expected_cov = np.linalg.inv(prec1 + prec2)
    rhs = prec1 @ mean1[..., None] + prec2 @ mean2[..., None]
    expected_mean = (expected_cov @ rhs)[..., 0]
    np.testing.assert_allclose(cov3, expected_cov, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(mean3, expected_mean, rtol=1e-8, atol=1e-9)
    np.testing.assert_array_equal(cov3, np.swapaxes(cov3, -1, -2))


def test_norm_product_textbook_example():
    mean3, cov3 = norm_product([0.0], [[1.0]], [2.0], [1.0])
    np.testing.assert_allclose(mean3, [1.0], rtol=1e-14)
    np.testing.assert_allclose(cov3, [[0.5]], rtol=1e-14)


def test_norm_product_singular_keeps_the_sum_constraint():
    rng = np.random.default_rng(8)
    n = 500
    p = rng.dirichlet(np.ones(4), size=10)
    mean1 = n * p
    cov1 = n * (p[:, :, None] * np.eye(4) - p[:, :, None] * p[:, None, :])
    mean2 = mean1 + rng.laplace(0, 20.0, size=mean1.shape)
    var2 = rng.uniform(1.0, 800.0, size=mean1.shape)
    mean3, cov3 = norm_product(mean1, cov1, mean2, var2)
    ones = np.ones(4)
    np.testing.assert_allclose(cov3 @ ones, 0.0, atol=1e-9 * n)
    np.testing.assert_allclose(mean3 @ ones, mean1 @ ones, rtol=1e-12)
    assert np.all(np.linalg.eigvalsh(cov3) > -1e-9 * n)
    # The singular product is the limit of the full-rank one.
    delta = 1e-7
    mean_r, cov_r = norm_product(mean1, cov1 + delta * np.eye(4), mean2, var2)
    np.testing.assert_allclose(cov3, cov_r, atol=1e-5)
    np.testing.assert_allclose(mean3, mean_r, atol=1e-5)


@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_norm_product_rejects_non_positive_noise_variance(bad):
    with pytest.raises(ValueError, match="var2"):
        norm_product([0.0, 0.0], np.eye(2), [1.0, 1.0], [1.0, bad])


# ---- draw_truncated_normal -------------------------------------------------------------------


def truncnorm_of(mean, sd, lower, upper):
    return stats.truncnorm((lower - mean) / sd, (upper - mean) / sd, loc=mean, scale=sd)


def draw_1d(rng, mean, sd, lower, upper, size, current=None, **kwargs):
    if current is None:
        current = np.clip(mean, lower, upper)
    return draw_truncated_normal(
        rng,
        mean=np.full((size, 1), mean),
        cov=np.full((size, 1, 1), sd**2),
        lower=lower,
        upper=upper,
        current=np.full((size, 1), current),
        **kwargs,
    )


TRUNC_CASES = [
    (0.0, 1.0, -1.0, 2.0),
    (5.0, 2.0, 0.0, 10.0),
    (-0.5, 1.0, 0.0, np.inf),
    (3.0, 1.0, -np.inf, 2.5),
    (95.0, 10.0, 0.0, 100.0),
]


@pytest.mark.parametrize(("mean", "sd", "lower", "upper"), TRUNC_CASES)
def test_truncated_normal_1d_matches_truncnorm(mean, sd, lower, upper):
    out = draw_1d(np.random.default_rng(9), mean, sd, lower, upper, 30_000)
    assert isinstance(out, TruncatedDraw)
    value = out.value[:, 0]
    assert np.all((value >= lower) & (value <= upper))
    assert_pvalues(ks_p(value, truncnorm_of(mean, sd, lower, upper).cdf))


@pytest.mark.parametrize(
    ("mean", "sd", "lower", "upper", "current"),
    [(-5.0, 1.0, 0.0, 10.0, 1.0), (60.0, 2.0, 0.0, 50.0, 0.0), (-50.0, 1.0, 0.0, 1.0, 0.5)],
)
def test_truncated_normal_1d_fallback_is_an_exact_draw(mean, sd, lower, upper, current):
    size = 20_000
    out = draw_1d(np.random.default_rng(10), mean, sd, lower, upper, size, current=current)
    assert out.n_fallback > size // 2
    value = out.value[:, 0]
    assert np.all((value >= lower) & (value <= upper))
    assert_pvalues(ks_p(value, truncnorm_of(mean, sd, lower, upper).cdf))


def test_truncated_normal_1d_fallback_chain_has_truncnorm_law():
    # 40 chains x 500 steps, each step feeding its output back in as ``current``.
    rng = np.random.default_rng(12)
    n_chains, n_steps = 40, 500
    mean, sd, lower, upper = -4.0, 1.5, 0.0, 10.0
    state = np.full((n_chains, 1), 9.0)
    trace, fallbacks = np.empty((n_steps, n_chains)), 0
    for step in range(n_steps):
        out = draw_truncated_normal(
            rng,
            mean=np.full((n_chains, 1), mean),
            cov=np.full((n_chains, 1, 1), sd**2),
            lower=lower,
            upper=upper,
            current=state,
        )
        state = out.value
        trace[step] = state[:, 0]
        fallbacks += out.n_fallback
    assert fallbacks > 0
    assert np.all((trace >= lower) & (trace <= upper))
    assert_pvalues(ks_p(trace, truncnorm_of(mean, sd, lower, upper).cdf))


def test_truncated_normal_counts_fallbacks_exactly():
    # Members 0, 2 cannot have a valid proposal; members 1, 3 essentially always have one.
    mean = np.array([[-50.0], [0.5], [80.0], [0.5]])
    cov = np.array([[[1.0]], [[1e-4]], [[1.0]], [[1e-4]]])
    lower, upper = np.zeros((4, 1)), np.array([[1.0], [1.0], [10.0], [1.0]])
    out = draw_truncated_normal(
        np.random.default_rng(13),
        mean=mean,
        cov=cov,
        lower=lower,
        upper=upper,
        current=np.full((4, 1), 0.5),
    )
    assert out.n_fallback == 2
    assert np.all((out.value >= lower) & (out.value <= upper))
    assert out.value[2, 0] > 9.0  # mass piles up at the bound nearest the mean


def test_truncated_normal_batch_equals_loop():
    # Three settings in one call (with two leading batch dimensions) vs one call per setting.
    settings = [(0.0, 1.0, -1.0, 2.0), (-5.0, 1.0, 0.0, 10.0), (5.0, 2.0, 0.0, 10.0)]
    size = 10_000
    mean = np.array([s[0] for s in settings])[:, None, None] * np.ones((1, size, 1))
    cov = (np.array([s[1] for s in settings]) ** 2)[:, None, None, None] * np.ones((1, size, 1, 1))
    lower = np.array([s[2] for s in settings])[:, None, None]
    upper = np.array([s[3] for s in settings])[:, None, None]
    current = np.full((3, size, 1), 1.0)
    batched = draw_truncated_normal(
        np.random.default_rng(14), mean=mean, cov=cov, lower=lower, upper=upper, current=current
    )
    assert batched.value.shape == (3, size, 1)
    assert batched.n_fallback > size // 2  # the middle setting needs the fallback

    rng = np.random.default_rng(15)
    pvalues = []
    for i, (m, sd, lo, hi) in enumerate(settings):
        looped = draw_1d(rng, m, sd, lo, hi, size, current=1.0).value[:, 0]
        got = batched.value[i, :, 0]
        assert np.all((got >= lo) & (got <= hi))
        pvalues += [ks2_p(got, looped), ks_p(got, truncnorm_of(m, sd, lo, hi).cdf)]
    assert_pvalues(pvalues)


def exact_truncated_sample(rng, mean, cov, lower, upper, size):
    """Rejection sample from N(mean, cov) restricted to the box (cov may be singular)."""
    out = []
    while sum(len(o) for o in out) < size:
        cand = rng.multivariate_normal(mean, cov, size=200_000, method="eigh")
        out.append(cand[np.all((cand >= lower) & (cand <= upper), axis=-1)])
    return np.concatenate(out)[:size]


def forced_fallback(rng, mean, cov, lower, upper, size):
    """Start ``size`` members at exact target draws and move them with one proposal and one
    sweep; return the moved draws, the start and a fresh exact reference sample."""
    k = mean.shape[-1]
    start = exact_truncated_sample(rng, mean, cov, lower, upper, size)
    reference = exact_truncated_sample(rng, mean, cov, lower, upper, size)
    out = draw_truncated_normal(
        rng,
        mean=np.broadcast_to(mean, (size, k)),
        cov=np.broadcast_to(cov, (size, k, k)),
        lower=lower,
        upper=upper,
        current=start,
        proposals=1,
        sweeps=1,
    )
    return out, start, reference


def test_truncated_normal_fallback_leaves_2d_target_invariant():
    # Start 20k independent members at exact draws of the target, force the Gibbs fallback
    # (one proposal, valid with probability ~0.07), and compare with a fresh exact sample.
    rng = np.random.default_rng(16)
    mean, cov = np.array([-1.0, -1.0]), np.array([[1.0, 0.6], [0.6, 1.0]])
    lower, upper = np.zeros(2), np.full(2, np.inf)
    size = 20_000
    out, start, reference = forced_fallback(rng, mean, cov, lower, upper, size)
    assert out.n_fallback > size // 2
    assert np.all(out.value >= 0)
    # The moved state must not simply be the start (the kernel has to move).
    assert np.mean(np.all(out.value == start, axis=-1)) < 0.01
    got, ref = out.value, reference
    assert_pvalues(
        [
            ks2_p(got[:, 0], ref[:, 0]),
            ks2_p(got[:, 1], ref[:, 1]),
            ks2_p(got[:, 0] - got[:, 1], ref[:, 0] - ref[:, 1]),
        ]
    )


def singular_posterior(n, p, y, noise_var):
    mean1, cov1 = categorical_clt(n, p)
    return norm_product(mean1, cov1, np.asarray(y, float), np.asarray(noise_var, float))


def test_truncated_normal_singular_untruncated_matches_normal():
    n = 200
    mean3, cov3 = singular_posterior(n, [0.2, 0.3, 0.5], [40.3, 58.1, 101.7], [4.0, 9.0, 1.0])
    size = 20_000
    out = draw_truncated_normal(
        np.random.default_rng(17),
        mean=np.broadcast_to(mean3, (size, 3)),
        cov=np.broadcast_to(cov3, (size, 3, 3)),
        lower=0.0,
        upper=float(n),
        current=np.broadcast_to(mean3, (size, 3)),
    )
    s = out.value
    assert out.n_fallback == 0
    assert np.all((s >= 0) & (s <= n))
    np.testing.assert_allclose(s.sum(axis=-1), n, rtol=1e-9)
    sd = np.sqrt(np.diag(cov3))
    assert_pvalues([ks_p(s[:, k], stats.norm(mean3[k], sd[k]).cdf) for k in range(3)])
    np.testing.assert_allclose(s.mean(axis=0), mean3, atol=5 * sd.max() / np.sqrt(size))
    np.testing.assert_allclose(np.cov(s.T), cov3, atol=0.05 * np.abs(cov3).max())


def test_truncated_normal_singular_truncated_stays_on_simplex_and_is_invariant():
    # Counts near the lower bound with a noisy release below zero: the box keeps ~11% of the
    # normal, so with one proposal most members move by the Gibbs fallback.
    n = 10
    mean3, cov3 = singular_posterior(n, [0.1, 0.3, 0.6], [-2.0, 3.0, 9.0], [1.0, 1.0, 1.0])
    lower, upper = np.zeros(3), np.full(3, float(n))
    rng = np.random.default_rng(18)
    size = 20_000
    out, _, reference = forced_fallback(rng, mean3, cov3, lower, upper, size)
    s = out.value
    assert out.n_fallback > 0
    assert np.all((s >= 0) & (s <= n))
    np.testing.assert_allclose(s.sum(axis=-1), n, rtol=1e-9)
    pvalues = [ks2_p(s[:, k], reference[:, k]) for k in range(3)]
    pvalues.append(ks2_p(s[:, 0] - s[:, 1], reference[:, 0] - reference[:, 1]))
    assert_pvalues(pvalues)


def test_truncated_normal_singular_fallback_far_outside_stays_valid():
    # A release far outside the simplex: essentially every member needs the fallback.
    n = 30
    mean3, cov3 = singular_posterior(n, [0.05, 0.05, 0.9], [-40.0, -35.0, 120.0], [2.0, 2.0, 2.0])
    size = 500
    current = np.broadcast_to(np.array([1.0, 1.0, 28.0]), (size, 3))
    out = draw_truncated_normal(
        np.random.default_rng(19),
        mean=np.broadcast_to(mean3, (size, 3)),
        cov=np.broadcast_to(cov3, (size, 3, 3)),
        lower=0.0,
        upper=float(n),
        current=current,
    )
    assert out.n_fallback > 0
    assert np.all((out.value >= 0) & (out.value <= n))
    np.testing.assert_allclose(out.value.sum(axis=-1), n, rtol=1e-9)
