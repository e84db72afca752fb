"""Tests of one-posterior sampling (OPS): privacy loss, exact output law, behaviour, validation.

The privacy loss of one sample is the log ratio of two truncated Beta densities, computed here
from SciPy's ``beta.logpdf`` and an exhaustive search over neighbouring data sets. Reference CDFs
for the far-tail cases are built independently of the module: for integer shapes,
``P(X > p) = P(Binomial(a + b - 1, p) <= a - 1)`` summed in log space. Statistical tests use KS
at ``ALPHA = 0.001`` on fixed-seed samples.
"""

import itertools
import math
import re

import numpy as np
import pytest
from scipy import integrate, special, stats

from pymc_dp.kernels.truncated_beta import truncated_beta_quantile
from pymc_dp.mechanisms.one_posterior import (
    DEFAULT_SUPPORT,
    one_posterior_sample,
    one_posterior_sample_from_statistic,
    ops_temperature,
)

ALPHA = 1e-3
LO, HI = DEFAULT_SUPPORT
LOGIT_RANGE = 2 * math.log(9.0)  # logit(0.9) - logit(0.1)


def truncated_log_density(p, a, b, lo=LO, hi=HI):
    mass = stats.beta.cdf(hi, a, b) - stats.beta.cdf(lo, a, b)
    assert mass > 1e-100, "reference needs the mass to be representable"
    return stats.beta.logpdf(p, a, b) - np.log(mass)


def truncated_cdf(q, a, b, lo=LO, hi=HI):
    f_lo, f_hi = stats.beta.cdf(lo, a, b), stats.beta.cdf(hi, a, b)
    return (stats.beta.cdf(q, a, b) - f_lo) / (f_hi - f_lo)


def log_sf_integer(p, a, b):
    """log P(X > p) for X ~ Beta(a, b) with whole a, b, via the Binomial identity."""
    a, b = round(a), round(b)
    k = np.arange(a)
    return special.logsumexp(stats.binom.logpmf(k[:, None], a + b - 1, np.atleast_1d(p)), axis=0)


def upper_tail_truncated_cdf(q, a, b, lo=LO, hi=HI):
    """Truncated CDF when the support is in the upper tail, in log space (no underflow)."""
    log_lo = log_sf_integer(lo, a, b)
    ratio_q = log_sf_integer(q, a, b) - log_lo
    ratio_hi = log_sf_integer(hi, a, b) - log_lo
    return -np.expm1(ratio_q) / -np.expm1(ratio_hi)


def rng_state(rng):
    return repr(rng.bit_generator.state)


# --------------------------------------------------------------------------------------------
# Privacy


@pytest.mark.parametrize(
    ("epsilon_per_sample", "prior", "min_tightness"),
    [
        (1e-3, (1.0, 1.0), 0.49),
        (1.0, (1.0, 1.0), 0.55),
        (1.0, (0.5, 0.5), 0.55),
        (10.0, (2.0, 8.0), 0.8),
        (30.0, (0.5, 20.0), 0.9),
    ],
)
def test_privacy_loss_over_every_neighbouring_pair_is_within_bound(
    epsilon_per_sample, prior, min_tightness
):
    """Exhaustive: all 4^5 data sets of 5 records (trials=3), every record replaced by every
    other value; the log density ratio on a 2001-point grid of the support (ends included, where
    the supremum lies) never exceeds ε_s. Also reports how much of the bound is attained."""
    n, trials = 5, 3
    total = n * trials
    temperature = ops_temperature(epsilon_per_sample, trials=trials)
    alpha, beta = prior
    grid = np.linspace(LO, HI, 2001)
    log_density = [
        truncated_log_density(grid, alpha + temperature * s, beta + temperature * (total - s))
        for s in range(total + 1)
    ]
    loss = np.zeros((total + 1, total + 1))
    for s, s2 in itertools.product(range(total + 1), repeat=2):
        loss[s, s2] = np.max(np.abs(log_density[s] - log_density[s2]))
    worst = 0.0
    for data in itertools.product(range(trials + 1), repeat=n):
        s = sum(data)
        for i, value in itertools.product(range(n), range(trials + 1)):
            if value != data[i]:
                worst = max(worst, loss[s, s - data[i] + value])
    assert worst <= epsilon_per_sample + 1e-9
    tightness = worst / epsilon_per_sample
    print(f"eps_s={epsilon_per_sample} prior={prior}: attained/bound = {tightness:.3f}")
    assert tightness >= min_tightness


def test_bound_is_approached_as_n_grows():
    """The worst pair s' = 0, s = trials at p = hi: its log ratio tends to the bound as n grows,
    so no calibration valid for every n can use a larger temperature. Computed by quadrature in
    an exponential change of variables (the truncated Beta(1, b) of s' = 0 is an exponential)."""
    epsilon_per_sample, trials = 1.0, 1
    temperature = ops_temperature(epsilon_per_sample, trials=trials)
    d = trials
    tightness = []
    for n in (10, 1_000, 100_000, 10_000_000):
        b = 1.0 + temperature * n * trials  # prior (1, 1), s' = 0
        t_max = (b - 1.0) * math.log((1 - LO) / (1 - HI))

        def integrand(t, b=b):
            p = 1.0 - (1.0 - LO) * math.exp(-t / (b - 1.0))
            return math.exp(-t + temperature * d * special.logit(p))

        mean_exp = integrate.quad(integrand, 0.0, min(t_max, 800.0), limit=200)[0]
        mean_exp /= -math.expm1(-t_max)
        log_ratio = temperature * d * special.logit(HI) - math.log(mean_exp)
        assert log_ratio <= epsilon_per_sample + 1e-9
        tightness.append(log_ratio / epsilon_per_sample)
    print("attained/bound for n = 1e1, 1e3, 1e5, 1e7:", np.round(tightness, 5))
    assert np.all(np.diff(tightness) > 0)
    assert tightness[-1] > 0.999


# --------------------------------------------------------------------------------------------
# Temperature and budget


def test_temperature_matches_hand_computation():
    assert ops_temperature(0.5, trials=3) == pytest.approx(0.5 / (3 * 2 * math.log(9.0)), 1e-14)
    # Asymmetric support: the range of logit, not twice its largest absolute value.
    expected = 2.0 / (1 * (math.log(9.0) - math.log(1.5)))
    assert ops_temperature(2.0, trials=1, support=(0.6, 0.9)) == pytest.approx(expected, 1e-14)


def test_total_epsilon_is_split_equally_over_samples():
    """Replaying the generator: the draws are truncated-Beta quantiles at T(ε / samples)."""
    x = np.array([0, 3, 2, 2, 1, 3, 0])
    epsilon, samples, prior = 40.0, 25, (2.0, 3.0)
    draws = one_posterior_sample(
        x, epsilon=epsilon, prior=prior, trials=3, samples=samples, rng=np.random.default_rng(5)
    )
    temperature = ops_temperature(epsilon / samples, trials=3)
    s, total = x.sum(), 3 * x.size
    u = np.random.default_rng(5).random((1, samples))[0]
    expected = truncated_beta_quantile(
        u,
        a=prior[0] + temperature * s,
        b=prior[1] + temperature * (total - s),
        support=DEFAULT_SUPPORT,
    )
    np.testing.assert_allclose(draws, expected, rtol=1e-13)
    # ε_s · samples = ε: the per-sample temperature, times samples, is that of ε.
    assert temperature * samples == pytest.approx(ops_temperature(epsilon, trials=3))


# --------------------------------------------------------------------------------------------
# Exact output law


def test_samples_follow_the_truncated_tempered_posterior():
    """KS (alpha=0.001), 20 000 draws, against the truncated Beta(α + T s, β + T (N - s))."""
    n, trials, s, samples = 1000, 1, 300, 20_000
    temperature = 0.5
    epsilon = samples * temperature * trials * LOGIT_RANGE
    draws = one_posterior_sample_from_statistic(
        np.random.default_rng(21),
        statistic=s,
        n=n,
        trials=trials,
        epsilon=epsilon,
        prior=(1.0, 1.0),
        samples=samples,
    )[0]
    a, b = 1.0 + temperature * s, 1.0 + temperature * (n * trials - s)
    assert stats.kstest(draws, lambda q: truncated_cdf(q, a, b)).pvalue > ALPHA


@pytest.mark.parametrize(
    ("temperature", "log10_mass"),
    [(2.0, -45.7), (20.0, -446.9)],
    ids=["mass-1e-46", "mass-1e-447"],
)
def test_exact_when_nearly_all_mass_is_outside_the_support(temperature, log10_mass):
    """s / N = 0.02 with large ε: Beta(1 + 20 T, 1 + 980 T) puts 1e-46 (SciPy's range) or
    1e-447 (below double precision) of its mass on [0.1, 0.9]. All 20 000 draws are in the
    support, and KS (alpha=0.001) passes against the truncated CDF computed in log space."""
    n, trials, s, samples = 1000, 1, 20, 20_000
    epsilon = samples * temperature * trials * LOGIT_RANGE
    draws = one_posterior_sample_from_statistic(
        np.random.default_rng(22),
        statistic=[s],
        n=n,
        trials=trials,
        epsilon=epsilon,
        prior=(1.0, 1.0),
        samples=samples,
    )[0]
    a, b = 1.0 + temperature * s, 1.0 + temperature * (n * trials - s)
    assert a == pytest.approx(round(a), abs=1e-9) and b == pytest.approx(round(b), abs=1e-9)
    assert log_sf_integer(LO, a, b)[0] / math.log(10) == pytest.approx(log10_mass, abs=0.1)
    assert np.all(np.isfinite(draws)) and np.all((draws >= LO) & (draws <= HI))
    assert stats.kstest(draws, lambda q: upper_tail_truncated_cdf(q, a, b)).pvalue > ALPHA


@pytest.mark.parametrize(
    ("a", "b"),
    [(5.0, 3.0), (41.0, 1961.0), (401.0, 19601.0), (1961.0, 41.0)],
    ids=["bulk", "tail-1e-46", "tail-1e-447", "lower-tail"],
)
def test_quantile_function_inverts_the_reference_cdf(a, b):
    """Deterministic round trip F_ref(Q(u)) = u to 1e-10 on a grid of u, in each regime."""
    u = np.concatenate([[0.0, 1e-12, 1e-6], np.linspace(0.01, 0.99, 99), [1 - 1e-9, 1.0]])
    q = truncated_beta_quantile(u, a=a, b=b, support=DEFAULT_SUPPORT)
    assert np.all(np.diff(q) >= 0)
    if a > b:  # mirror: X ~ Beta(a, b) on [lo, hi]  <=>  1 - X ~ Beta(b, a) on [1 - hi, 1 - lo]
        cdf = 1.0 - upper_tail_truncated_cdf(1.0 - q, b, a, lo=1 - HI, hi=1 - LO)
    elif stats.beta.sf(LO, a, b) < 1e-10:
        cdf = upper_tail_truncated_cdf(q, a, b)
    else:
        cdf = truncated_cdf(q, a, b)
    np.testing.assert_allclose(cdf, u, atol=1e-10)


def test_quantile_function_where_the_support_is_narrow_or_shapes_tiny():
    """Regimes where differences of CDF values cancel: a support 1e-9 wide around the mode of
    Beta(2, 2) (CDF from the factored cubic), and Beta(1e-20, 1e-20), whose truncation to the
    support makes logit(P) uniform up to O(1e-20)."""
    u = np.linspace(0.0, 1.0, 51)
    lo, hi = 0.5, 0.5 + 1e-9
    q = truncated_beta_quantile(u, a=2.0, b=2.0, support=(lo, hi))

    def mass_from_lo(x):  # ∫_lo^x 6 t (1 - t) dt, factored to avoid cancellation
        return (x - lo) * (3 * (x + lo) - 2 * (x * x + x * lo + lo * lo))

    np.testing.assert_allclose(mass_from_lo(q) / mass_from_lo(hi), u, atol=1e-6)
    q = truncated_beta_quantile(u, a=1e-20, b=1e-20, support=DEFAULT_SUPPORT)
    np.testing.assert_allclose((special.logit(q) - special.logit(LO)) / LOGIT_RANGE, u, atol=1e-12)
    # Beta(1e-20, 0.5), where SciPy's isf is off by 0.17: density ∝ 1 / (t sqrt(1 - t)), whose
    # antiderivative is log((1 - r) / (1 + r)) with r = sqrt(1 - t).
    q = truncated_beta_quantile(u, a=1e-20, b=0.5, support=DEFAULT_SUPPORT)

    def antiderivative(t):
        r = np.sqrt(1.0 - t)
        return np.log((1.0 - r) / (1.0 + r))

    cdf = (antiderivative(q) - antiderivative(LO)) / (antiderivative(HI) - antiderivative(LO))
    np.testing.assert_allclose(cdf, u, atol=1e-12)


def test_draws_stay_finite_and_in_support_for_extreme_arguments():
    support = (0.2, 0.7)
    for statistic, epsilon in itertools.product([0, 1, 250, 499, 500], [1e-8, 1.0, 1e4, 1e9]):
        draws = one_posterior_sample_from_statistic(
            np.random.default_rng(3),
            statistic=statistic,
            n=100,
            trials=5,
            epsilon=epsilon,
            prior=(0.01, 30.0),
            samples=50,
            support=support,
        )
        assert np.all(np.isfinite(draws)), (statistic, epsilon)
        assert np.all((draws >= support[0]) & (draws <= support[1])), (statistic, epsilon)


# --------------------------------------------------------------------------------------------
# Behaviour


def test_with_temperature_one_and_a_wide_support_ops_is_the_posterior():
    """T = 1 (ε = samples · trials · R) and a0 = 1e-6: KS (alpha=0.001) against the ordinary,
    untruncated posterior Beta(α + s, β + N - s), 20 000 draws."""
    support = (1e-6, 1 - 1e-6)
    x = np.random.default_rng(31).binomial(2, 0.35, size=200)
    samples, trials, prior = 20_000, 2, (2.0, 2.0)
    epsilon = samples * trials * float(special.logit(support[1]) - special.logit(support[0]))
    assert ops_temperature(epsilon / samples, trials=trials, support=support) == pytest.approx(1.0)
    draws = one_posterior_sample(
        x,
        epsilon=epsilon,
        prior=prior,
        trials=trials,
        samples=samples,
        support=support,
        rng=32,
    )
    posterior = stats.beta(prior[0] + x.sum(), prior[1] + trials * x.size - x.sum())
    assert stats.kstest(draws, posterior.cdf).pvalue > ALPHA
    assert abs(draws.mean() - posterior.mean()) < 0.05 * posterior.std()


def test_at_the_papers_epsilon_ops_is_close_to_the_truncated_prior():
    """ε = 0.01 over 100 samples, n = 1000 Bernoulli records, s = 300, Beta(1, 1) prior:
    T ≈ 2.3e-5, so the draws are nearly uniform on [0.1, 0.9] (KS, alpha=0.001, against the
    truncated prior, 200 × 100 draws): about 16 times wider than the posterior."""
    n, s = 1000, 300
    draws = one_posterior_sample_from_statistic(
        np.random.default_rng(41),
        statistic=np.full(200, s),
        n=n,
        trials=1,
        epsilon=0.01,
        prior=(1.0, 1.0),
        samples=100,
    ).ravel()
    assert stats.kstest(draws, stats.uniform(LO, HI - LO).cdf).pvalue > ALPHA
    prior_sd = (HI - LO) / math.sqrt(12.0)
    posterior_sd = stats.beta(1 + s, 1 + n - s).std()
    assert abs(draws.std() - prior_sd) < 0.01
    assert draws.std() > 10 * posterior_sd


# --------------------------------------------------------------------------------------------
# Batched function


def test_batched_function_is_the_per_data_set_function():
    x = np.array([1, 0, 1, 1, 0, 0, 1, 1])
    kwargs = {"epsilon": 30.0, "prior": (1.0, 2.0), "samples": 40}
    single = one_posterior_sample(x, rng=np.random.default_rng(8), **kwargs)
    batched = one_posterior_sample_from_statistic(
        np.random.default_rng(8), statistic=[x.sum()], n=x.size, trials=1, **kwargs
    )
    np.testing.assert_array_equal(batched, single[None, :])


def test_batched_rows_agree_in_distribution_with_separate_calls():
    """Two-sample KS (alpha=0.001), 5000 draws per data set, independent seeds."""
    trials, n = 4, 50
    datasets = [np.full(n, 0), np.random.default_rng(51).binomial(trials, 0.5, n), np.full(n, 4)]
    kwargs = {"epsilon": 5000.0 * 2.0, "prior": (1.5, 1.5), "samples": 5000, "trials": trials}
    batched = one_posterior_sample_from_statistic(
        np.random.default_rng(52), statistic=[d.sum() for d in datasets], n=n, **kwargs
    )
    for i, data in enumerate(datasets):
        separate = one_posterior_sample(data, rng=np.random.default_rng(60 + i), **kwargs)
        assert stats.ks_2samp(batched[i], separate).pvalue > ALPHA


def test_bernoulli_records_may_be_booleans():
    x = np.array([True, False, True, True])
    kwargs = {"epsilon": 10.0, "prior": (1.0, 1.0), "samples": 5}
    np.testing.assert_array_equal(
        one_posterior_sample(x, rng=4, **kwargs),
        one_posterior_sample(x.astype(int), rng=4, **kwargs),
    )


def test_batch_shapes():
    common = {"n": 10, "trials": 1, "epsilon": 1.0, "prior": (1.0, 1.0), "samples": 7}
    assert one_posterior_sample_from_statistic(0, statistic=3, **common).shape == (1, 7)
    stat = np.arange(6).reshape(2, 3)
    assert one_posterior_sample_from_statistic(0, statistic=stat, **common).shape == (2, 3, 7)


# --------------------------------------------------------------------------------------------
# Validation: errors name the argument and come before the generator moves

GOOD = {"x": [0, 1, 1, 0], "epsilon": 1.0, "prior": (1.0, 1.0), "trials": 1, "samples": 10}
BAD_SAMPLE_ARGS = [
    ({"x": [[0, 1]]}, ValueError, "x"),
    ({"x": []}, ValueError, "x"),
    ({"x": [0, 2]}, ValueError, "x"),
    ({"x": [0.5, 1]}, ValueError, "x"),
    ({"x": [0, np.nan]}, ValueError, "x"),
    ({"x": ["a", "b"]}, TypeError, "x"),
    ({"epsilon": 0.0}, ValueError, "epsilon"),
    ({"epsilon": -1.0}, ValueError, "epsilon"),
    ({"epsilon": math.inf}, ValueError, "epsilon"),
    ({"epsilon": math.nan}, ValueError, "epsilon"),
    ({"epsilon": "1"}, TypeError, "epsilon"),
    ({"epsilon": 1e305}, ValueError, "epsilon"),
    ({"prior": (1.0,)}, ValueError, "prior"),
    ({"prior": (1.0, 0.0)}, ValueError, "prior[1]"),
    ({"prior": (-1.0, 1.0)}, ValueError, "prior[0]"),
    ({"prior": (1.0, math.inf)}, ValueError, "prior[1]"),
    ({"prior": 1.0}, TypeError, "prior"),
    ({"prior": "ab"}, TypeError, "prior"),
    ({"trials": 0}, ValueError, "trials"),
    ({"trials": 1.5}, TypeError, "trials"),
    ({"trials": True}, TypeError, "trials"),
    ({"samples": 0}, ValueError, "samples"),
    ({"samples": 2.0}, TypeError, "samples"),
    ({"support": (0.9, 0.1)}, ValueError, "support"),
    ({"support": (0.0, 0.9)}, ValueError, "support"),
    ({"support": (0.1, 1.0)}, ValueError, "support"),
    ({"support": (0.1, math.nan)}, ValueError, "support"),
    ({"support": (0.1,)}, ValueError, "support"),
    ({"support": (0.1, "x")}, TypeError, "support[1]"),
    ({"support": 0.5}, TypeError, "support"),
]


@pytest.mark.parametrize(("change", "error", "name"), BAD_SAMPLE_ARGS)
def test_bad_arguments_raise_before_the_generator_moves(change, error, name):
    rng = np.random.default_rng(7)
    before = rng_state(rng)
    with pytest.raises(error, match=rf"^{re.escape(name)} "):
        one_posterior_sample(**{**GOOD, **change}, rng=rng)
    assert rng_state(rng) == before


BAD_BATCH_ARGS = [
    ({"statistic": [1, 11]}, ValueError, "statistic"),
    ({"statistic": [-1]}, ValueError, "statistic"),
    ({"statistic": [1.5]}, ValueError, "statistic"),
    ({"statistic": []}, ValueError, "statistic"),
    ({"n": 0}, ValueError, "n"),
    ({"n": 2.5}, TypeError, "n"),
]


@pytest.mark.parametrize(("change", "error", "name"), BAD_BATCH_ARGS)
def test_bad_batch_arguments_raise_before_the_generator_moves(change, error, name):
    rng = np.random.default_rng(7)
    before = rng_state(rng)
    good = {"statistic": [3, 4], "n": 10, "trials": 1, "epsilon": 1.0, "prior": (1.0, 1.0)}
    with pytest.raises(error, match=rf"^{re.escape(name)} "):
        one_posterior_sample_from_statistic(rng, **{**good, **change})
    assert rng_state(rng) == before


@pytest.mark.parametrize(
    ("rng", "error"), [("seed", TypeError), (-1, ValueError), (1.5, TypeError)]
)
def test_bad_rng_raises(rng, error):
    with pytest.raises(error, match="rng"):
        one_posterior_sample(**GOOD, rng=rng)


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"u": [1.5]}, ValueError, "u"),
        ({"a": 0.0}, ValueError, "a"),
        ({"b": math.inf}, ValueError, "b"),
        ({"support": (0.5, 0.5)}, ValueError, "support"),
    ],
)
def test_quantile_function_validates(kwargs, error, name):
    good = {"u": [0.5], "a": 1.0, "b": 1.0, "support": DEFAULT_SUPPORT}
    with pytest.raises(error, match=rf"^{re.escape(name)} "):
        truncated_beta_quantile(**{**good, **kwargs})


def test_temperature_validates():
    with pytest.raises(ValueError, match="epsilon_per_sample"):
        ops_temperature(0.0, trials=1)
    with pytest.raises(ValueError, match="trials"):
        ops_temperature(1.0, trials=0)
