"""Tests of the calibration and utility measures in :mod:`pymc_dp.evaluation.measures`.

Statistical tests state their size and threshold in the docstring; every one is seeded.
"""

import math

import arviz as az
import numpy as np
import pytest
from scipy import integrate, stats

from pymc_dp.evaluation.measures import (
    KSBand,
    KSResult,
    calibration_quantiles,
    ecdf,
    interval_coverage,
    ks_band,
    ks_statistic,
    mmd2_unbiased,
)

# ----------------------------------------------------------------------------------------------
# calibration_quantiles


def _beta_binomial_trials(rng, trials, *, concentration=1.0, draws=200):
    """θ ~ Beta(2, 3), y ~ Binomial(20, θ); iid draws from Beta(2 + y, 3 + 20 - y).

    ``concentration > 1`` scales both posterior parameters, keeping the mean and shrinking the
    spread: an over-confident posterior.
    """
    theta = rng.beta(2.0, 3.0, size=trials)
    y = rng.binomial(20, theta)
    a, b = (2.0 + y) * concentration, (3.0 + 20 - y) * concentration
    return theta, rng.beta(a, b, size=(1, draws, trials))


def _ar1_trials(rng, trials, *, chains, draws, rho):
    """θ ~ N(0, 1), x̄ ~ N(θ, 1/5); chains of a stationary AR(1) with law N(μ_post, σ²_post)."""
    theta = rng.normal(size=trials)
    xbar = rng.normal(theta, 1 / math.sqrt(5))
    mean, sd = 5 * xbar / 6, 1 / math.sqrt(6)
    z = np.empty((chains, draws, trials))
    z[:, 0] = rng.normal(size=(chains, trials))  # start in the stationary law
    innovations = rng.normal(scale=math.sqrt(1 - rho**2), size=(chains, draws, trials))
    for t in range(1, draws):
        z[:, t] = rho * z[:, t - 1] + innovations[:, t]
    return theta, mean + sd * z


def test_calibration_exact_posterior_uniform_1000_trials():
    """1000 Beta-Binomial trials, 200 iid exact-posterior draws each: KS p > 0.01."""
    rng = np.random.default_rng(101)
    theta, draws = _beta_binomial_trials(rng, 1000)
    for thin in (False, True):
        u = calibration_quantiles(draws, theta, rng=rng, thin=thin)
        assert ks_statistic(u).pvalue > 0.01


def test_calibration_overconfident_posterior_detected_1000_trials():
    """1000 trials, posterior spread halved (concentration × 4): KS p < 1e-6."""
    rng = np.random.default_rng(102)
    theta, draws = _beta_binomial_trials(rng, 1000, concentration=4.0)
    u = calibration_quantiles(draws, theta, rng=rng, thin=False)
    assert ks_statistic(u).pvalue < 1e-6
    assert interval_coverage(u, (0.5,))[0.5] < 0.4  # too narrow: intervals miss the truth


def test_calibration_thinning_fixes_sticky_chains_1000_trials():
    """1000 trials, 2 AR(1) chains (ρ = 0.95) × 200 draws whose stationary law is the posterior.

    Thinned to the ESS (about 10 per trial), the ranks are uniform: KS p > 0.01. The plain rank
    among all 400 draws is not: a sticky chain often lies entirely on one side of the truth, so
    the extreme ranks (truth below or above all 400 draws), which have probability 2/401 for
    iid draws, are far too frequent: binomial p < 1e-4.
    """
    rng = np.random.default_rng(103)
    theta, draws = _ar1_trials(rng, 1000, chains=2, draws=200, rho=0.95)
    thinned = calibration_quantiles(draws, theta, rng=rng, thin=True)
    assert ks_statistic(thinned).pvalue > 0.01

    plain = calibration_quantiles(draws, theta, rng=rng, thin=False)
    total = draws.shape[0] * draws.shape[1]
    extreme = int(np.sum((plain < 1 / (total + 1)) | (plain > total / (total + 1))))
    assert stats.binomtest(extreme, plain.size, 2 / (total + 1)).pvalue < 1e-4


def test_calibration_randomised_rank_formula():
    rng = np.random.default_rng(0)
    draws = rng.normal(size=(3, 50, 4))
    truth = np.array([-0.5, 0.0, 0.5, 5.0])
    u = calibration_quantiles(draws, truth, rng=7, thin=False)
    below = (draws < truth).sum(axis=(0, 1))
    expected = (below + np.random.default_rng(7).uniform(size=4)) / (150 + 1)
    np.testing.assert_allclose(u, expected, rtol=1e-14)
    assert u[3] > 150 / 151  # above all draws


def test_calibration_ties_broken_uniformly():
    """Truth equal to all 9 (constant) draws: u ~ Uniform(0, 1), KS p > 0.01 over 2000 trials."""
    u = calibration_quantiles(np.ones((1, 9, 2000)), 1.0, rng=5, thin=False)
    assert ks_statistic(u).pvalue > 0.01


def test_calibration_thinning_step_matches_per_element_ess():
    """The one vectorised ESS call gives each batch element its own ESS and step."""
    rng = np.random.default_rng(1)
    chains, draws, rhos = 2, 400, np.array([0.0, 0.9, 0.99])
    z = np.empty((chains, draws, 3))
    z[:, 0] = rng.normal(size=(chains, 3))
    for t in range(1, draws):
        z[:, t] = rhos * z[:, t - 1] + np.sqrt(1 - rhos**2) * rng.normal(size=(chains, 3))
    truth = np.array([0.1, -0.2, 0.3])
    u = calibration_quantiles(z, truth, rng=3)
    uniforms = np.random.default_rng(3).uniform(size=3)
    steps = []
    for i in range(3):
        ess = float(az.ess(az.convert_to_dataset(z[:, :, i]), method="bulk")["x"])
        step = max(1, math.floor(chains * draws / ess))
        kept = z[:, ::step, i]
        expected = (np.sum(kept < truth[i]) + uniforms[i]) / (kept.size + 1)
        assert u[i] == pytest.approx(expected, rel=1e-14)
        steps.append(step)
    assert steps[0] < steps[1] < steps[2]


def test_calibration_thinning_without_ess_keeps_one_draw_per_chain():
    """Fewer than 4 draws per chain: ESS is undefined, so one draw per chain is kept."""
    draws = np.array([[[0.1], [0.9], [0.9]], [[0.6], [0.0], [0.0]]])  # (2, 3, 1)
    u = calibration_quantiles(draws, [0.5], rng=0, thin=True)
    expected = (1 + np.random.default_rng(0).uniform()) / 3  # kept 0.1 and 0.6
    assert u[0] == pytest.approx(expected)


@pytest.mark.parametrize(
    ("shape", "truth_shape", "out_shape"),
    [((2, 30), (), ()), ((2, 30, 5), (5,), (5,)), ((2, 30, 4, 3), (3,), (4, 3))],
)
def test_calibration_shapes(shape, truth_shape, out_shape):
    rng = np.random.default_rng(2)
    u = calibration_quantiles(rng.normal(size=shape), rng.normal(size=truth_shape), rng=rng)
    assert isinstance(u, np.ndarray)
    assert u.shape == out_shape
    assert np.all((u > 0) & (u < 1))


@pytest.mark.parametrize(
    ("draws", "truth", "match"),
    [
        (np.zeros(10), 0.0, "draws"),
        (np.full((2, 5), np.nan), 0.0, "draws"),
        (np.zeros((2, 5, 3)), np.zeros(4), "truth"),
        (np.zeros((2, 5, 3)), [0.0, np.inf, 0.0], "truth"),
        (np.zeros((2, 0)), 0.0, "draws"),
    ],
)
def test_calibration_bad_values(draws, truth, match):
    with pytest.raises(ValueError, match=match):
        calibration_quantiles(draws, truth, rng=0)


def test_calibration_bad_types():
    with pytest.raises(TypeError, match="draws"):
        calibration_quantiles([["a", "b"]], 0.0, rng=0)
    with pytest.raises(TypeError, match="rng"):
        calibration_quantiles(np.zeros((1, 5)), 0.0, rng="seed")
    with pytest.raises(TypeError, match="thin"):
        calibration_quantiles(np.zeros((1, 5)), 0.0, rng=0, thin="yes")


# ----------------------------------------------------------------------------------------------
# KS, band, ECDF, coverage


def test_ks_statistic_matches_scipy():
    u = np.random.default_rng(3).uniform(size=250) ** 1.2
    result = ks_statistic(u)
    expected = stats.kstest(u, "uniform")
    assert isinstance(result, KSResult)
    assert result == (pytest.approx(expected.statistic), pytest.approx(expected.pvalue))
    assert type(result.statistic) is float and type(result.pvalue) is float


@pytest.mark.parametrize("bad", [[0.2, 1.5], [-0.1, 0.5], [[0.1, 0.2]], [], [0.5, np.nan]])
def test_quantile_summaries_reject_bad_u(bad):
    for func in (ks_statistic, ecdf, interval_coverage):
        with pytest.raises(ValueError, match="u "):
            func(bad)


def test_ks_band_covers_95_percent_of_null_statistics():
    """2000 studies of 100 uniform trials: the fraction of KS statistics in the 95% band is
    0.95 ± 0.02 (4 binomial SE)."""
    trials = 100
    band = ks_band(trials, level=0.95)
    assert isinstance(band, KSBand)
    assert 0 < band.lower < band.upper < 1
    u = np.sort(np.random.default_rng(4).uniform(size=(2000, trials)), axis=1)
    i = np.arange(1, trials + 1)
    d = np.maximum((i / trials - u).max(axis=1), (u - (i - 1) / trials).max(axis=1))
    assert d[0] == pytest.approx(stats.kstest(u[0], "uniform").statistic)
    inside = np.mean((d >= band.lower) & (d <= band.upper))
    assert abs(inside - 0.95) < 0.02


def test_ks_band_quantiles_of_kstwo():
    band = ks_band(50, level=0.8)
    assert stats.kstwo(50).cdf(band.lower) == pytest.approx(0.1)
    assert stats.kstwo(50).cdf(band.upper) == pytest.approx(0.9)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"trials": 0}, ValueError, "trials"),
        ({"trials": 10.0}, TypeError, "trials"),
        ({"trials": 10, "level": 1.0}, ValueError, "level"),
        ({"trials": 10, "level": 0}, ValueError, "level"),
    ],
)
def test_ks_band_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        ks_band(**kwargs)


def test_ecdf_exact():
    x, f = ecdf([0.7, 0.2, 0.2, 0.9, 0.4])
    np.testing.assert_array_equal(x, [0.0, 0.2, 0.4, 0.7, 0.9, 1.0])
    np.testing.assert_allclose(f, [0.0, 0.4, 0.6, 0.8, 1.0, 1.0])
    x, f = ecdf([0.0, 1.0])
    np.testing.assert_array_equal(x, [0.0, 0.0, 1.0, 1.0])
    np.testing.assert_array_equal(f, [0.0, 0.5, 1.0, 1.0])


def test_interval_coverage_exact():
    u = [0.01, 0.04, 0.2, 0.3, 0.5, 0.7, 0.8, 0.97, 0.99, 0.6]
    # |u - 0.5|: 0.49 0.46 0.3 0.2 0 0.2 0.3 0.47 0.49 0.1
    assert interval_coverage(u, levels=(0.5, 0.9, 0.95)) == {0.5: 0.4, 0.9: 0.6, 0.95: 0.8}
    assert list(interval_coverage(u)) == [0.5, 0.9, 0.95]


def test_interval_coverage_of_uniform_quantiles():
    """4000 uniform u: each coverage within 4 binomial SE of its level."""
    u = np.random.default_rng(5).uniform(size=4000)
    for level, coverage in interval_coverage(u, levels=(0.5, 0.8, 0.9, 0.95)).items():
        assert abs(coverage - level) < 4 * math.sqrt(level * (1 - level) / u.size)


@pytest.mark.parametrize(
    ("levels", "error"),
    [
        ((0.5, 1.0), ValueError),
        ((0.0,), ValueError),
        ((), ValueError),
        ("0.9", TypeError),
        (0.9, TypeError),
        ((True,), TypeError),
    ],
)
def test_interval_coverage_bad_levels(levels, error):
    with pytest.raises(error, match="levels"):
        interval_coverage([0.5], levels=levels)


# ----------------------------------------------------------------------------------------------
# mmd2_unbiased


def _mmd2_loop(p, q, bandwidth):
    """Gretton et al. (2012) eq. 3 by explicit double loops; p (m, d), q (n, d)."""

    def k(a, b):
        return math.exp(-float(np.sum((a - b) ** 2)) / (2 * bandwidth**2))

    m, n = len(p), len(q)
    pp = sum(k(p[i], p[j]) for i in range(m) for j in range(m) if i != j)
    qq = sum(k(q[i], q[j]) for i in range(n) for j in range(n) if i != j)
    pq = sum(k(p[i], q[j]) for i in range(m) for j in range(n))
    return pp / (m * (m - 1)) + qq / (n * (n - 1)) - 2 * pq / (m * n)


def _mmd2_population_normal_shift(delta, s, b):
    """MMD² between N(0, s²) and N(δ, s²) under k = exp(-(x - y)² / (2b²)).

    For Z ~ N(μ, σ²), E exp(-Z² / (2b²)) = b / √(b² + σ²) · exp(-μ² / (2(b² + σ²))); the
    differences X - X', Y - Y' and X - Y are N(0, 2s²), N(0, 2s²) and N(-δ, 2s²).
    """
    c = b / math.sqrt(b**2 + 2 * s**2)
    return 2 * c * (1 - math.exp(-(delta**2) / (2 * (b**2 + 2 * s**2))))


def test_mmd2_population_formula_by_quadrature():
    delta, s, b = 1.3, 0.7, 0.8

    def expected_kernel(mu):
        def integrand(z):
            return stats.norm.pdf(z, mu, math.sqrt(2) * s) * math.exp(-(z**2) / (2 * b**2))

        return integrate.quad(integrand, -np.inf, np.inf, epsabs=1e-13)[0]

    numeric = 2 * expected_kernel(0.0) - 2 * expected_kernel(delta)
    assert _mmd2_population_normal_shift(delta, s, b) == pytest.approx(numeric, rel=1e-9)


@pytest.mark.parametrize(("m", "n"), [(5, 5), (6, 9), (150, 70)])
def test_mmd2_scalar_matches_double_loop(m, n):
    rng = np.random.default_rng(6)
    p, q = rng.normal(size=m), rng.normal(0.5, 1.5, size=n)
    result = mmd2_unbiased(p, q, bandwidth=0.7)
    assert type(result) is float
    assert result == pytest.approx(_mmd2_loop(p[:, None], q[:, None], 0.7), rel=1e-10)


@pytest.mark.parametrize(("m", "n"), [(4, 4), (7, 3), (80, 130)])
def test_mmd2_vector_matches_double_loop(m, n):
    rng = np.random.default_rng(7)
    p, q = rng.dirichlet([2, 3, 4], size=m), rng.dirichlet([3, 3, 3], size=n)
    result = mmd2_unbiased(p, q, bandwidth=0.3, event_ndim=1)
    assert result == pytest.approx(_mmd2_loop(p, q, 0.3), rel=1e-10)


def test_mmd2_matrix_events_flattened():
    rng = np.random.default_rng(8)
    p, q = rng.normal(size=(6, 2, 2)), rng.normal(size=(5, 2, 2))
    result = mmd2_unbiased(p, q, event_ndim=2)
    assert result == pytest.approx(_mmd2_loop(p.reshape(6, 4), q.reshape(5, 4), 1.0), rel=1e-10)


def test_mmd2_batched_equals_per_element_and_chunking_is_invisible():
    rng = np.random.default_rng(9)
    p, q = rng.normal(size=(4, 3, 70, 2)), rng.normal(size=(4, 3, 90, 2))
    batched = mmd2_unbiased(p, q, event_ndim=1)
    assert batched.shape == (4, 3)
    for idx in np.ndindex(4, 3):
        single = mmd2_unbiased(p[idx], q[idx], event_ndim=1)
        assert batched[idx] == pytest.approx(single, rel=1e-12)
    for chunk_size in (1, 5, 12, 100):
        np.testing.assert_allclose(
            mmd2_unbiased(p, q, event_ndim=1, chunk_size=chunk_size), batched, rtol=1e-12
        )


def test_mmd2_batch_shapes_broadcast():
    rng = np.random.default_rng(10)
    p, q = rng.normal(size=(3, 20)), rng.normal(size=25)
    result = mmd2_unbiased(p, q)
    assert result.shape == (3,)
    for i in range(3):
        assert result[i] == pytest.approx(mmd2_unbiased(p[i], q), rel=1e-12)


def test_mmd2_unbiased_when_distributions_equal():
    """4000 replicates of m = 20 vs n = 30 draws of N(0, 1): |mean| < 4 SE."""
    rng = np.random.default_rng(11)
    est = mmd2_unbiased(rng.normal(size=(4000, 20)), rng.normal(size=(4000, 30)))
    assert abs(est.mean()) < 4 * est.std(ddof=1) / math.sqrt(est.size)
    assert np.any(est < 0)  # an unbiased estimate of 0 must go negative


def test_mmd2_matches_population_value_for_normal_shift():
    """3000 replicates, N(0, 0.5²) vs N(1, 0.5²), m = 30, n = 40, b = 0.8: mean within 4 SE of
    the closed form."""
    rng = np.random.default_rng(12)
    p = rng.normal(0.0, 0.5, size=(3000, 30))
    q = rng.normal(1.0, 0.5, size=(3000, 40))
    est = mmd2_unbiased(p, q, bandwidth=0.8)
    se = est.std(ddof=1) / math.sqrt(est.size)
    assert abs(est.mean() - _mmd2_population_normal_shift(1.0, 0.5, 0.8)) < 4 * se


def test_mmd2_large_for_clearly_different_distributions():
    """N(0, 1) vs N(3, 1), 300 draws each: population MMD² ≈ 0.90; estimate > 0.7."""
    rng = np.random.default_rng(13)
    est = mmd2_unbiased(rng.normal(size=300), rng.normal(3.0, size=300))
    assert _mmd2_population_normal_shift(3.0, 1.0, 1.0) == pytest.approx(0.897, abs=1e-3)
    assert est > 0.7


@pytest.mark.parametrize(
    ("p", "q", "kwargs", "error", "match"),
    [
        (np.zeros(1), np.zeros(5), {}, ValueError, "p must have at least 2 samples"),
        (np.zeros(5), np.zeros((3, 1)), {}, ValueError, "q must have at least 2 samples"),
        (np.zeros((5, 2)), np.zeros((5, 3)), {"event_ndim": 1}, ValueError, "event shape"),
        (np.zeros((2, 5)), np.zeros((3, 5)), {}, ValueError, "batch shapes"),
        (np.zeros((1, 3)), np.zeros((5, 3)), {"event_ndim": 1}, ValueError, "p must have at"),
        (np.zeros(3), np.zeros(3), {"event_ndim": 2}, ValueError, "p must have dimensions"),
        (np.zeros(5), [0.0, np.nan], {}, ValueError, "q must not contain NaN"),
        (np.zeros(5), np.zeros(5), {"bandwidth": 0.0}, ValueError, "bandwidth"),
        (np.zeros(5), np.zeros(5), {"event_ndim": -1}, ValueError, "event_ndim"),
        (np.zeros(5), np.zeros(5), {"chunk_size": 0}, ValueError, "chunk_size"),
        (np.zeros(5), np.zeros(5), {"bandwidth": "1"}, TypeError, "bandwidth"),
        (["a", "b"], np.zeros(5), {}, TypeError, "p"),
    ],
)
def test_mmd2_bad_arguments(p, q, kwargs, error, match):
    with pytest.raises(error, match=match):
        mmd2_unbiased(p, q, **kwargs)
