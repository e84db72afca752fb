"""Unbounded families released over a truncation window (paper §3.3, Appendix C).

Checked here: Lemma 1 (window moments) against scipy, quadrature and summation; Proposition 1
and the joint CLT of (ŝ, s) against Monte Carlo; the windows adding up to the untruncated
moments, finite with finite derivatives far in the tails; the window sensitivity by exhaustive
search; the valid region of (ŝ, s); input checks; conjugate updates against grid posteriors.

Graphs are built once per (family, bounds, purpose) and compiled with the Python linker and no
graph rewrites: FAST_RUN spends tens of seconds to minutes on each of these nested-gradient
graphs. Rewrites do not change the values; they can remove a 0 · inf from a raw gradient graph
(see ``Case.extreme``), and the test points avoid the one such case met here.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.compile.mode import Mode
from pytensor.gradient import verify_grad
from scipy import integrate, special, stats

from pymc_dp.families import (
    Exponential,
    Gamma,
    Geometric,
    LogNormal,
    LogNormalKnownSigma,
    Normal,
    NormalKnownSigma,
    Poisson,
    TruncatedFamily,
)
from pymc_dp.families.truncated import LOG_TINY

MODE = Mode(linker="py", optimizer=None)
N_RECORDS = 200
N_DATASETS = 20_000
Z_MAX = 5.0
"""Monte Carlo tolerance, in standard errors of the estimate."""
ALPHA = 1e-3
WINDOWS = ("lower", "centre", "upper")
LOG_SCALE = (LogNormal, LogNormalKnownSigma)
"""Families of z = log x, with bounds and records on the x scale."""


class Case(NamedTuple):
    family: TruncatedFamily
    theta: Any
    """Parameter of the Monte Carlo check."""
    bounds: tuple[float, float]
    interior: tuple[Any, ...] = ()
    """Parameters for Lemma 1 and the derivative checks against references."""
    extreme: tuple[Any, ...] = ()
    """Parameters far in a tail, where some window's mass underflows. In neither list is a
    component of θ 0: without graph rewrites, the third derivative PyTensor builds for x**2 is
    0 * x**-1 = NaN at x = 0 (FAST_RUN rewrites x**2 to sqr(x) first)."""


CASES = {
    "exponential": Case(
        Exponential(), 1.0, (0.2, 1.5), (0.3, 1.0, 5.0), (1e-3, 1e-2, 30.0, 300.0, 1e3)
    ),
    "exponential-from-0": Case(Exponential(), 1.0, (0.0, 1.5), (0.3, 1.0, 5.0), (1e-3, 1e3)),
    "poisson": Case(Poisson(), 3.0, (0, 6), (0.5, 3.0, 8.0), (1e-3, 1e-1, 30.0, 1e3)),
    "geometric": Case(Geometric(), 0.3, (1, 6), (0.05, 0.3, 0.8), (1e-4, 1e-2, 0.999)),
    "gamma": Case(
        Gamma(alpha=2.5), 1.0, (0.5, 4.0), (0.4, 1.0, 3.0), (1e-3, 1e-1, 10.0, 100.0, 1e3)
    ),
    "normal-known-sigma": Case(
        NormalKnownSigma(sigma=2.0), 1.0, (-4.0, 6.0), (-3.0, 1.0, 7.0), (-100.0, 10.0, 100.0)
    ),
    "normal": Case(
        Normal(),
        (1.0, 4.0),
        (-4.0, 6.0),
        ((1.0, 4.0), (-2.0, 0.5), (5.0, 9.0)),
        ((100.0, 1.0), (-100.0, 1.0), (1.0, 1e4), (1.0, 1e-2)),
    ),
    "lognormal": Case(
        LogNormal(),
        (0.0, 1.0),
        (0.5, 5.0),
        ((0.3, 1.0), (1.0, 0.25), (-0.5, 2.0)),
        ((50.0, 1.0), (-50.0, 1.0), (0.2, 1e3), (0.2, 1e-3)),
    ),
}
"""Monte Carlo cases (θ, bounds as in the brief), also used for the deterministic checks."""
LEMMA1_CASES = {
    **{name: case for name, case in CASES.items() if name != "lognormal"},
    # Non-empty lower windows and non-integer bounds on counts.
    "poisson-inner": Case(Poisson(), 3.0, (1.5, 6.5), (0.5, 3.0, 8.0)),
    "geometric-inner": Case(Geometric(), 0.3, (3, 8), (0.05, 0.3, 0.8)),
    # The centre window holds all the mass: both tails underflow.
    "normal-known-sigma-narrow": Case(
        NormalKnownSigma(sigma=0.1), 1.0, (-4.0, 6.0), (1.0, 0.0, 3.0)
    ),
}
IDENTITY_CASES = {
    **CASES,
    # The docstring's window for counts; small λ puts the upper tail at 1e-170.
    "poisson-wide": Case(Poisson(), 1.0, (0, 40), extreme=(1.0, 10.0, 1e-2, 1e-3)),
}


def theta_variable(fam: TruncatedFamily) -> pt.TensorVariable:
    return pt.dvector("theta") if fam.stat_size > 1 else pt.dscalar("theta")


def as_theta(value: Any) -> np.ndarray:
    return np.asarray(value, dtype=np.float64)


def quick_build():
    """No stack trace on each new graph variable: a third of the time spent building these
    graphs goes to recording them."""
    return pytensor.config.change_flags(traceback__limit=0)


class Window(NamedTuple):
    log_q: float
    mu: np.ndarray
    sigma: np.ndarray


class Clt(NamedTuple):
    windows: list[tuple[np.ndarray, np.ndarray]]
    """(m, V) of the lower, centre and upper window statistics (Proposition 1)."""
    mean: np.ndarray
    cov: np.ndarray
    """Joint CLT of the stacked (ŝ, s)."""
    mu: np.ndarray
    sigma: np.ndarray
    """Untruncated moments of t(x)."""

    def all_windows(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean ``(3k,)`` and covariance of the stacked window statistics (ŝ_l, ŝ_c, ŝ_u): the
        blocks of Proposition 1 and the multinomial cross terms -n e_r e_r'ᵀ, e_r = m_r / n."""
        k = self.mu.size
        cov = np.zeros((3 * k, 3 * k))
        for r, (m_r, v_r) in enumerate(self.windows):
            for s, (m_s, _) in enumerate(self.windows):
                block = v_r if r == s else -np.outer(m_r, m_s) / N_RECORDS
                cov[r * k : (r + 1) * k, s * k : (s + 1) * k] = block
        return np.concatenate([m for m, _ in self.windows]), cov


# A compiled function serves the tests that need all of it: under pytest-xdist, each worker
# builds what its tests use.


@functools.cache
def lemma1_function(fam: TruncatedFamily, bounds: tuple[float, float]):
    """θ -> (log q, μ̂, Σ̂) of the three windows."""
    theta = theta_variable(fam)
    with quick_build():
        outputs = [v for window in fam.truncated_moments(theta, bounds) for v in window]
        fn = pytensor.function([theta], outputs, mode=MODE)

    def evaluate(value: Any) -> list[Window]:
        out = [np.asarray(v, dtype=np.float64) for v in fn(as_theta(value))]
        return [Window(float(out[3 * r]), out[3 * r + 1], out[3 * r + 2]) for r in range(3)]

    return evaluate


@functools.cache
def clt_function(fam: TruncatedFamily, bounds: tuple[float, float]):
    """θ -> Proposition 1 per window, the joint CLT of (ŝ, s) (n = ``N_RECORDS``), and (μ, Σ)."""
    theta = theta_variable(fam)
    with quick_build():
        outputs = [v for window in fam.rs_clt_moments(theta, N_RECORDS, bounds) for v in window]
        outputs += [*fam.joint_clt(theta, N_RECORDS, bounds), *fam.moments(theta)]
        fn = pytensor.function([theta], outputs, mode=MODE)

    def evaluate(value: Any) -> Clt:
        out = [np.asarray(v, dtype=np.float64) for v in fn(as_theta(value))]
        return Clt([(out[2 * r], out[2 * r + 1]) for r in range(3)], *out[6:])

    return evaluate


@functools.cache
def derivative_function(fam: TruncatedFamily, bounds: tuple[float, float]):
    """θ -> (f, df/dθ) for f = sum(joint mean) + sum(joint cov): f' is finite iff both the
    first derivatives (mean) and the second-order ones (cov) of the moments are."""
    theta = theta_variable(fam)
    with quick_build():
        mean, cov = fam.joint_clt(theta, N_RECORDS, bounds)
        total = mean.sum() + cov.sum()
        fn = pytensor.function([theta], [total, pytensor.grad(total, theta)], mode=MODE)
    return lambda value: [np.asarray(v, dtype=np.float64) for v in fn(as_theta(value))]


# ---- Lemma 1 -------------------------------------------------------------------------------


def _quad(fn, lo: float, hi: float) -> float:
    value, _ = integrate.quad(fn, lo, hi, epsabs=0.0, epsrel=1e-12, limit=200)
    return value


def _moments_by_quadrature(pdf, stat, lo: float, hi: float, k: int):
    """log mass, mean and covariance of t(z) for z with density ``pdf`` on (lo, hi)."""
    if hi <= lo:
        return -np.inf, np.zeros(k), np.zeros((k, k))
    q = _quad(pdf, lo, hi)
    mean = np.array([_quad(lambda z, j=j: stat(z)[j] * pdf(z), lo, hi) / q for j in range(k)])
    cov = np.empty((k, k))
    for i in range(k):
        for j in range(k):

            def integrand(z, i=i, j=j):
                return (stat(z)[i] - mean[i]) * (stat(z)[j] - mean[j]) * pdf(z)

            cov[i, j] = _quad(integrand, lo, hi) / q
    return math.log(q), mean, cov


def _moments_by_summation(dist, values: np.ndarray):
    if values.size == 0:
        return -np.inf, np.zeros(1), np.zeros((1, 1))
    p = dist.pmf(values)
    q = p.sum()
    mean = np.sum(values * p) / q
    return math.log(q), np.array([mean]), np.array([[np.sum((values - mean) ** 2 * p) / q]])


def reference_windows(fam: TruncatedFamily, theta: Any, bounds: tuple[float, float]):
    """(log q, mean, cov) of t on the lower, centre and upper windows, computed independently:
    scipy ``truncexpon`` / ``truncnorm``, quadrature (Gamma, Normal), pmf sums (counts)."""
    a, b = bounds
    if isinstance(fam, Exponential):
        lam = theta
        lower = stats.truncexpon(b=lam * a, scale=1 / lam) if a > 0 else None
        centre = stats.truncexpon(b=lam * (b - a), loc=a, scale=1 / lam)
        upper = stats.expon(loc=b, scale=1 / lam)
        log_q = (
            math.log(-math.expm1(-lam * a)) if a > 0 else -np.inf,
            -lam * a + math.log(-math.expm1(-lam * (b - a))),
            -lam * b,
        )
        return [
            (lq, np.zeros(1), np.zeros((1, 1)))
            if dist is None
            else (lq, np.array([dist.mean()]), np.array([[dist.var()]]))
            for lq, dist in zip(log_q, (lower, centre, upper), strict=True)
        ]
    if isinstance(fam, NormalKnownSigma):
        za, zb = (float(v) for v in fam.to_latent(bounds))
        lo, hi = (za - theta) / fam.sigma, (zb - theta) / fam.sigma
        log_q = (
            stats.norm.logcdf(lo),
            math.log(stats.norm.cdf(hi) - stats.norm.cdf(lo)),
            stats.norm.logsf(hi),
        )
        out = []
        for lq, (u, v) in zip(log_q, ((-np.inf, lo), (lo, hi), (hi, np.inf)), strict=True):
            dist = stats.truncnorm(u, v, loc=theta, scale=fam.sigma)
            out.append((lq, np.array([dist.mean()]), np.array([[dist.var()]])))
        return out
    if isinstance(fam, Gamma):
        pdf = fam.record_distribution(theta).pdf
        pieces = ((0.0, a), (a, b), (b, np.inf))
        return [_moments_by_quadrature(pdf, lambda z: (z,), lo, hi, 1) for lo, hi in pieces]
    if isinstance(fam, Normal):
        za, zb = (float(v) for v in fam.to_latent(bounds))
        pdf = fam.record_distribution(theta).pdf
        pieces = ((-np.inf, za), (za, zb), (zb, np.inf))
        return [_moments_by_quadrature(pdf, lambda z: (z, z * z), lo, hi, 2) for lo, hi in pieces]
    # Counts: sum the pmf over the integers of each window.
    dist = fam.record_distribution(theta)
    first, last, start = math.ceil(a), math.floor(b), int(fam.domain[0])
    top = int(dist.mean() + 60 * dist.std()) + 60
    return [
        _moments_by_summation(dist, np.arange(start, first, dtype=np.float64)),
        _moments_by_summation(dist, np.arange(max(first, start), last + 1, dtype=np.float64)),
        _moments_by_summation(dist, np.arange(last + 1, top, dtype=np.float64)),
    ]


@pytest.mark.parametrize("name", list(LEMMA1_CASES))
def test_window_moments_match_references(name):
    """Lemma 1: q (as log q, atol 1e-6), μ̂ and Σ̂ (rtol 1e-6) of each window vs an independent
    reference; a window of mass below e^LOG_TINY must report μ̂ = Σ̂ = 0."""
    case = LEMMA1_CASES[name]
    evaluate = lemma1_function(case.family, case.bounds)
    for theta in case.interior:
        got = evaluate(theta)
        expected = reference_windows(case.family, theta, case.bounds)
        for window, (log_q, mean, cov), label in zip(got, expected, WINDOWS, strict=True):
            msg = f"{name} θ={theta} {label} window: {window}"
            if log_q < LOG_TINY:
                assert window.log_q <= LOG_TINY, msg
                mean, cov = np.zeros_like(mean), np.zeros_like(cov)
            else:
                assert window.log_q == pytest.approx(log_q, abs=1e-6), msg
            np.testing.assert_allclose(window.mu, mean, rtol=1e-6, atol=1e-12, err_msg=msg)
            np.testing.assert_allclose(window.sigma, cov, rtol=1e-6, atol=1e-12, err_msg=msg)


def test_gamma_lower_window_moments_at_full_precision():
    """μ̂ and Σ̂ of Gamma(2.5)'s lower window [0, 0.5) at rate 0.4 vs the closed form
    E[x^j; x < a] = Γ(α + j) / (Γ(α) λ^j) P(α + j, λa): rtol 1e-9 (float64 work gives 1e-12)."""
    alpha, lam, a = 2.5, 0.4, 0.5
    p = [special.gammainc(alpha + j, lam * a) for j in range(3)]
    m1 = alpha / lam * p[1] / p[0]
    m2 = alpha * (alpha + 1) / lam**2 * p[2] / p[0]
    lower = lemma1_function(Gamma(alpha=alpha), (a, 4.0))(lam)[0]
    assert lower.mu[0] == pytest.approx(m1, rel=1e-9)
    assert lower.sigma[0, 0] == pytest.approx(m2 - m1**2, rel=1e-9)


# ---- Monte Carlo: Proposition 1 and the joint CLT --------------------------------------------


class Simulation(NamedTuple):
    x: np.ndarray
    """The first few data sets, records on the data scale, ``(20, n)``."""
    windows: np.ndarray
    """Statistic of the records in the lower, centre and upper window, ``(R, 3, k)``."""
    total: np.ndarray
    """Statistic s of all records, ``(R, k)``."""


@functools.cache
def simulate(name: str) -> Simulation:
    """``N_DATASETS`` data sets of ``N_RECORDS`` records at the case's θ (fixed seed per case)."""
    case = CASES[name]
    fam = case.family
    rng = np.random.default_rng(20_180_000 + list(CASES).index(name))
    draws = fam.record_distribution(case.theta).rvs(size=(N_DATASETS, N_RECORDS), random_state=rng)
    x = np.exp(draws) if isinstance(fam, LOG_SCALE) else draws
    t = fam.statistic(fam.to_latent(x).ravel()).reshape(N_DATASETS, N_RECORDS, fam.stat_size)
    a, b = case.bounds
    masks = (x < a, (x >= a) & (x <= b), x > b)
    windows = np.stack([np.einsum("rn,rnk->rk", m.astype(np.float64), t) for m in masks], axis=1)
    return Simulation(x=x[:20], windows=windows, total=t.sum(axis=1))


def assert_matches_monte_carlo(samples, mean, cov, label: str) -> None:
    """Sample mean and covariance within ``Z_MAX`` standard errors of (mean, cov)."""
    n_sets = samples.shape[0]
    mc_mean = samples.mean(axis=0)
    centred = samples - mc_mean
    products = centred[:, :, None] * centred[:, None, :]
    mc_cov = products.mean(axis=0) * n_sets / (n_sets - 1)
    se_mean = np.sqrt(np.diag(mc_cov) / n_sets)
    se_cov = products.std(axis=0) / np.sqrt(n_sets)
    assert np.all(np.abs(mc_mean - mean) <= Z_MAX * se_mean + 1e-9), (
        f"{label}: MC mean {mc_mean} vs {mean} (se {se_mean})"
    )
    assert np.all(np.abs(mc_cov - cov) <= Z_MAX * se_cov + 1e-9), (
        f"{label}: MC covariance\n{mc_cov}\nvs\n{cov}\n(se\n{se_cov})"
    )


@pytest.mark.parametrize("name", list(CASES))
def test_clt_moments_match_monte_carlo(name):
    """20000 data sets of 200 records, within 5 standard errors: mean and covariance of the
    stacked (ŝ, s) vs ``joint_clt``; of each window's statistic vs ``rs_clt_moments``; and the
    multinomial cross-covariance -n e_r e_r'ᵀ (e_r = m_r / n) between windows."""
    case = CASES[name]
    sim = simulate(name)
    got = clt_function(case.family, case.bounds)(case.theta)
    stacked = np.concatenate([sim.windows[:, 1], sim.total], axis=1)
    assert_matches_monte_carlo(stacked, got.mean, got.cov, f"{name} (ŝ, s)")
    for r, (m, v) in enumerate(got.windows):
        assert_matches_monte_carlo(sim.windows[:, r], m, v, f"{name} {WINDOWS[r]} window")
    mean, cov = got.all_windows()
    stacked = sim.windows.reshape(N_DATASETS, -1)
    assert_matches_monte_carlo(stacked, mean, cov, f"{name} all windows")


@pytest.mark.parametrize("name", list(CASES))
def test_window_statistic_and_region_hold_simulated_data(name):
    """``window_statistic`` and ``sufficient_statistic`` agree with the simulation's sums, and
    every simulated (ŝ, s) and s - ŝ lies in the physical boxes of ``record_region``, and s
    in the sampler's ``window_region``."""
    case = CASES[name]
    fam = case.family
    sim = simulate(name)
    for i, x in enumerate(sim.x):
        np.testing.assert_allclose(
            np.reshape(fam.window_statistic(x, case.bounds), -1), sim.windows[i, 1], rtol=1e-12
        )
        np.testing.assert_allclose(
            np.reshape(fam.sufficient_statistic(x), -1), sim.total[i], rtol=1e-12
        )
    lower, upper, out_lower, out_upper = fam.record_region(N_RECORDS, case.bounds)
    stacked = np.concatenate([sim.windows[:, 1], sim.total], axis=1)
    assert np.all((stacked >= lower) & (stacked <= upper))
    outside = sim.total - sim.windows[:, 1]
    assert np.all((outside >= out_lower) & (outside <= out_upper))
    k = fam.stat_size
    sampler_lower, sampler_upper, _, _ = fam.window_region(N_RECORDS, case.bounds)
    np.testing.assert_array_equal(sampler_lower[k:], lower[k:])
    np.testing.assert_array_equal(sampler_upper[k:], upper[k:])


# ---- the windows add up to the untruncated moments -------------------------------------------


@pytest.mark.parametrize("name", list(IDENTITY_CASES))
def test_windows_add_up_to_untruncated_moments(name):
    """The three windows of ``rs_clt_moments`` with the multinomial cross terms add up to the
    moments (nμ, nΣ) of s (rtol 1e-8); ``joint_clt`` has (nμ, nΣ) as its s-block and the centre
    window's (m, V) as its ŝ-block. All finite, also with θ far in a tail."""
    case = IDENTITY_CASES[name]
    evaluate = clt_function(case.family, case.bounds)
    k = case.family.stat_size
    add = np.tile(np.eye(k), 3)  # s = ŝ_l + ŝ_c + ŝ_u
    for theta in (*case.interior, *case.extreme):
        got = evaluate(theta)
        msg = f"{name} θ={theta}: {got}"
        for value in (*(v for window in got.windows for v in window), got.mean, got.cov):
            assert np.all(np.isfinite(value)), msg
        n_mu, n_sigma = N_RECORDS * got.mu, N_RECORDS * got.sigma
        # An entry that is 0 (E z = 0) is matched on the scale of s: n·sd and max |nΣ|.
        scale_mean = N_RECORDS * np.sqrt(np.max(np.diag(got.sigma)))
        scale_cov = np.max(np.abs(n_sigma))
        atol_mean, atol_cov = 1e-8 * scale_mean, 1e-8 * scale_cov
        window_mean, window_cov = got.all_windows()
        for mean, cov in (
            (add @ window_mean, add @ window_cov @ add.T),
            (got.mean[k:], got.cov[k:, k:]),
        ):
            np.testing.assert_allclose(mean, n_mu, rtol=1e-8, atol=atol_mean, err_msg=msg)
            np.testing.assert_allclose(cov, n_sigma, rtol=1e-8, atol=atol_cov, err_msg=msg)
        m_c, v_c = got.windows[1]
        np.testing.assert_allclose(got.mean[:k], m_c, rtol=1e-10, atol=1e-300, err_msg=msg)
        np.testing.assert_allclose(got.cov[:k, :k], v_c, rtol=1e-10, atol=1e-300, err_msg=msg)
        np.testing.assert_allclose(got.cov, got.cov.T, rtol=1e-12, atol=1e-12 * scale_cov)


@pytest.mark.parametrize(
    ("fam", "theta", "mu", "sigma"),
    [
        (Exponential(), 4.0, [0.25], [[1 / 16]]),
        (Gamma(alpha=2.5), 2.0, [1.25], [[0.625]]),
        (Poisson(), 3.0, [3.0], [[3.0]]),
        (Geometric(), 0.25, [4.0], [[12.0]]),
        (NormalKnownSigma(sigma=2.0), -1.0, [-1.0], [[4.0]]),
        (Normal(), (1.0, 4.0), [1.0, 5.0], [[4.0, 8.0], [8.0, 4 * 4 + 2 * 16]]),
    ],
    ids=repr,
)
def test_untruncated_moments_are_the_closed_forms(fam, theta, mu, sigma):
    """The (μ, Σ) the identity above is checked against is itself right."""
    variable = theta_variable(fam)
    fn = pytensor.function([variable], list(fam.moments(variable)), mode=MODE)
    got_mu, got_sigma = fn(as_theta(theta))
    np.testing.assert_allclose(got_mu, mu, rtol=1e-14)
    np.testing.assert_allclose(got_sigma, sigma, rtol=1e-14)


@pytest.mark.parametrize("name", list(CASES))
def test_joint_clt_derivatives_finite_in_the_tails(name):
    """d/dθ [sum(mean) + sum(cov)] of ``joint_clt`` is finite at every θ, extreme ones included,
    and matches central differences at interior θ (rtol 1e-5, per component of θ)."""
    case = CASES[name]
    fn = derivative_function(case.family, case.bounds)
    for theta in (*case.interior, *case.extreme):
        values = fn(theta)
        assert np.all(np.isfinite(np.hstack([np.ravel(v) for v in values]))), (
            f"{name} θ={theta}: {values}"
        )
    for theta in map(as_theta, case.interior):
        gradient = np.ravel(fn(theta)[1])
        for i in range(theta.size):
            step = np.zeros(theta.size)
            step[i] = 1e-5 * abs(theta.flat[i])
            step = step.reshape(theta.shape)
            central = (fn(theta + step)[0] - fn(theta - step)[0]) / (2 * step.flat[i])
            assert gradient[i] == pytest.approx(central, rel=1e-5), f"θ={theta}, component {i}"


# ---- gradients ---------------------------------------------------------------------------


GRAD_CASES = {
    "exponential": (Exponential(), (0.2, 1.5), 1.3),
    "poisson": (Poisson(), (2, 6), 3.5),
    "normal-known-sigma": (NormalKnownSigma(sigma=2.0), (-4.0, 6.0), 1.0),
    "normal": (Normal(), (-4.0, 6.0), (1.0, 4.0)),
}
QUANTITIES = {"log_q": 0, "mu": 1, "sigma": 2}


@pytest.mark.parametrize("quantity", list(QUANTITIES))
@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_centre_window_gradients(name, quantity):
    """``verify_grad`` of θ -> centre log mass, μ̂_c and Σ̂_c at an interior θ."""
    fam, bounds, theta = GRAD_CASES[name]

    def centre(th):
        if quantity == "log_q":  # the same graph as truncated_moments' log q, built alone
            return fam.window_log_masses(fam.natural_parameters(th), bounds)[1]
        return fam.truncated_moments(th, bounds)[1][QUANTITIES[quantity]]

    with quick_build():
        verify_grad(centre, [as_theta(theta)], rng=np.random.default_rng(7), mode=MODE)


# ---- sensitivity (Appendix C) ------------------------------------------------------------


SENSITIVITY_CASES = [
    (Exponential(), (0.2, 1.5)),
    (Exponential(), (0.0, 1.5)),
    (Exponential(), (2.0, 5.0)),
    (Gamma(alpha=2.5), (0.5, 4.0)),
    (Poisson(), (0, 6)),
    (Poisson(), (3, 10)),
    (Poisson(), (1.5, 6.5)),
    (Geometric(), (1, 6)),
    (Geometric(), (2, 9)),
    (NormalKnownSigma(sigma=2.0), (-4.0, 6.0)),
    (NormalKnownSigma(sigma=2.0), (2.0, 5.0)),
    (NormalKnownSigma(sigma=2.0), (-5.0, -1.0)),
    (LogNormalKnownSigma(sigma=1.0), (0.5, 5.0)),
    (LogNormalKnownSigma(sigma=1.0), (2.0, 8.0)),
    (Normal(), (-4.0, 6.0)),
    (Normal(), (2.0, 5.0)),
    (Normal(), (-5.0, -1.0)),
    (Normal(), (-3.0, 3.0)),
    (LogNormal(), (0.5, 5.0)),
    (LogNormal(), (2.0, 8.0)),
    (LogNormal(), (0.1, 0.9)),
]


def record_grid(fam: TruncatedFamily, bounds: tuple[float, float]) -> np.ndarray:
    """2001 record values across and beyond the window, with the window's ends."""
    a, b = bounds
    lo = fam.domain[0]
    if fam.discrete:
        return np.arange(lo, math.floor(b) + 20, dtype=np.float64)
    if isinstance(fam, LOG_SCALE):
        grid = np.exp(np.linspace(np.log(a) - 2, np.log(b) + 2, 2001))
    else:
        grid = np.linspace(max(lo, a - (b - a)), b + (b - a), 2001)
    return np.union1d(grid, [a, b])


def max_pairwise_l1(fam: TruncatedFamily, bounds: tuple[float, float]) -> float:
    """max over pairs of grid records of ||t̂(x) - t̂(x')||_1, t̂(x) = 1[a ≤ x ≤ b] t(x)."""
    a, b = bounds
    x = record_grid(fam, bounds)
    inside = (x >= a) & (x <= b)
    t_hat = fam.statistic(fam.to_latent(x)) * inside[:, None]
    return float(np.max(np.sum(np.abs(t_hat[:, None, :] - t_hat[None, :, :]), axis=-1)))


@pytest.mark.parametrize(("fam", "bounds"), SENSITIVITY_CASES, ids=repr)
def test_release_sensitivity_bounds_every_pair_of_records(fam, bounds):
    """Exhaustive search: no pair of records on a 2001-point grid (in and out of the window) moves
    ŝ by more than ``release_sensitivity``; for k = 1 the bound is attained exactly."""
    bound = fam.release_sensitivity(bounds)
    worst = max_pairwise_l1(fam, bounds)
    assert worst <= bound + 1e-9
    if fam.stat_size == 1:
        assert worst == pytest.approx(bound, rel=1e-12)
    else:
        assert worst >= 0.8 * bound, f"bound {bound} is loose: worst pair moves ŝ by {worst}"


def test_exponential_sensitivity_counts_records_leaving_the_window():
    """Appendix C: with [0.2, 1.5] a record can move from 1.5 to outside (t̂ = 0), so Δ = 1.5,
    not the reference code's |t(b) - t(a)| = 1.3."""
    assert Exponential().release_sensitivity((0.2, 1.5)) == 1.5
    assert max_pairwise_l1(Exponential(), (0.2, 1.5)) == pytest.approx(1.5)


@pytest.mark.parametrize(
    ("fam", "bounds"),
    [
        (LogNormal(), (0.0, 5.0)),
        (LogNormal(), (-1.0, 5.0)),
        (LogNormalKnownSigma(sigma=1.0), (0.0, 5.0)),
        (Exponential(), (-1.0, 5.0)),
        (Poisson(), (-3, 6)),
    ],
    ids=repr,
)
def test_accepted_bounds_have_finite_sensitivity(fam, bounds):
    """Bounds that pass ``check_bounds`` give a finite sensitivity; on the log scale a = 0 puts
    log x -> -inf in the window, so such bounds must be rejected up front."""
    try:
        window = fam.check_bounds(bounds)
    except ValueError as err:
        assert "bounds" in str(err)
        return
    assert np.isfinite(fam.release_sensitivity(window))


# ---- bad inputs ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bounds",
    [
        (2.0, 1.0),
        (1.0, 1.0),
        (0.0, np.inf),
        (np.nan, 1.0),
        (-np.inf, 1.0),
        None,
        (1.0,),
        (1.0, 2.0, 3.0),
        5.0,
        "ab",
        ("a", "b"),
    ],
    ids=repr,
)
@pytest.mark.parametrize(
    "fam", [Exponential(), Poisson(), NormalKnownSigma(sigma=1.0), Normal(), LogNormal()], ids=repr
)
def test_check_bounds_rejects(fam, bounds):
    with pytest.raises(ValueError, match="bounds"):
        fam.check_bounds(bounds)


def test_check_bounds_rejects_windows_outside_the_domain():
    with pytest.raises(ValueError, match="bounds"):
        Geometric().check_bounds((-3.0, 0.5))
    with pytest.raises(ValueError, match="bounds"):
        Exponential().check_bounds((-3.0, -1.0))
    assert Exponential().check_bounds((0, 2)) == (0.0, 2.0)


@pytest.mark.parametrize(
    ("fam", "x", "error"),
    [
        (Exponential(), [1.0, -0.5], ValueError),
        (Gamma(alpha=2.0), [-1e-9], ValueError),
        (Poisson(), [1.0, 2.5], ValueError),
        (Poisson(), [-1, 2], ValueError),
        (Geometric(), [0, 1, 2], ValueError),
        (Geometric(), [1.5], ValueError),
        (LogNormal(), [1.0, 0.0], ValueError),
        (LogNormal(), [1.0, -2.0], ValueError),
        (LogNormalKnownSigma(sigma=1.0), [0.0], ValueError),
        (Normal(), [1.0, np.nan], ValueError),
        (NormalKnownSigma(sigma=1.0), [[1.0, 2.0]], ValueError),
        (Exponential(), np.array([True, False]), TypeError),
        (Poisson(), np.array([True, False]), TypeError),
        (Normal(), np.array([True]), TypeError),
        (Normal(), ["a"], TypeError),
    ],
    ids=repr,
)
def test_validate_data_rejects(fam, x, error):
    with pytest.raises(error, match="x"):
        fam.validate_data(x)


def test_validate_data_accepts_and_converts():
    assert Poisson().validate_data([0.0, 3.0]).dtype == np.int64
    assert Geometric().validate_data([1, 4]).tolist() == [1, 4]
    assert Exponential().validate_data([0, 2]).dtype == np.float64
    np.testing.assert_array_equal(Normal().validate_data([-1.5, 2.0]), [-1.5, 2.0])


# ---- conjugate updates -------------------------------------------------------------------


def test_exponential_conjugate_update_closed_form():
    fam = Exponential()
    x = np.random.default_rng(3).exponential(0.5, size=30)
    s = fam.sufficient_statistic(x)
    shape, rate = fam.conjugate_update((2.0, 1.5), s, x.size)
    assert shape == 32.0
    assert rate == pytest.approx(1.5 + x.sum(), rel=1e-14)
    post = fam.conjugate_distribution((shape, rate))
    assert post.mean() == pytest.approx(32.0 / (1.5 + x.sum()), rel=1e-12)
    assert post.var() == pytest.approx(32.0 / (1.5 + x.sum()) ** 2, rel=1e-12)


SCALAR_POSTERIOR_CASES = {
    "exponential": (Exponential(), 2.0, (2.0, 1.0), stats.gamma(2.0, scale=1.0)),
    "gamma": (Gamma(alpha=2.5), 1.5, (3.0, 2.0), stats.gamma(3.0, scale=0.5)),
    "poisson": (Poisson(), 4.0, (2.0, 0.5), stats.gamma(2.0, scale=2.0)),
    "geometric": (Geometric(), 0.3, (2.0, 3.0), stats.beta(2.0, 3.0)),
    "normal-known-sigma": (NormalKnownSigma(sigma=1.5), 2.0, (0.0, 3.0), stats.norm(0.0, 3.0)),
    "lognormal-known-sigma": (
        LogNormalKnownSigma(sigma=0.7),
        0.5,
        (0.0, 2.0),
        stats.norm(0.0, 2.0),
    ),
}


@pytest.mark.parametrize("name", list(SCALAR_POSTERIOR_CASES))
def test_conjugate_update_matches_grid_posterior(name):
    """Posterior mean and sd of θ from ``conjugate_update`` vs a 1-D grid posterior built from
    the prior density and the 20 raw records' likelihood (rtol 1e-4)."""
    fam, theta, prior, prior_dist = SCALAR_POSTERIOR_CASES[name]
    rng = np.random.default_rng(list(SCALAR_POSTERIOR_CASES).index(name))
    draws = fam.record_distribution(theta).rvs(size=20, random_state=rng)
    x = np.exp(draws) if isinstance(fam, LOG_SCALE) else draws
    post = fam.conjugate_distribution(fam.conjugate_update(prior, fam.sufficient_statistic(x), 20))
    lo, hi = post.ppf(1e-12), post.ppf(1 - 1e-12)
    span = hi - lo
    grid = np.linspace(lo - span, hi + span, 40_001)
    if isinstance(fam, (Gamma, Poisson)):
        grid = grid[grid > 0]
    if isinstance(fam, Geometric):
        grid = grid[(grid > 0) & (grid < 1)]
    log_post = prior_dist.logpdf(grid)
    records = fam.record_distribution(grid)
    for record in fam.to_latent(x):
        log_post += records.logpmf(record) if fam.discrete else records.logpdf(record)
    w = np.exp(log_post - log_post.max())
    total = integrate.trapezoid(w, grid)
    mean = integrate.trapezoid(w * grid, grid) / total
    var = integrate.trapezoid(w * (grid - mean) ** 2, grid) / total
    assert post.mean() == pytest.approx(mean, rel=1e-4)
    assert post.std() == pytest.approx(np.sqrt(var), rel=1e-4)


@pytest.mark.parametrize("fam", [Normal(), LogNormal()], ids=repr)
def test_normal_inverse_gamma_update_matches_grid_posterior(fam):
    """NIG update vs a 2-D grid posterior of (μ, σ²) from 20 raw records: posterior means of μ
    and σ² from ``conjugate_distribution``'s marginals agree to 1e-3 relative."""
    rng = np.random.default_rng(5)
    z = rng.normal(2.0, 1.5, size=20)
    x = np.exp(z) if isinstance(fam, LOG_SCALE) else z
    prior = (0.5, 2.0, 3.0, 4.0)  # m, κ, α, β
    params = fam.conjugate_update(prior, fam.sufficient_statistic(x), x.size)
    post = fam.conjugate_distribution(params)

    mu = np.linspace(post.mu.ppf(1e-9), post.mu.ppf(1 - 1e-9), 1201)
    sigma2 = np.linspace(post.sigma2.ppf(1e-12) * 0.5, post.sigma2.ppf(1 - 1e-9) * 2.0, 1601)
    m, s2 = np.meshgrid(mu, sigma2, indexing="ij")
    m0, kappa, alpha, beta = prior
    log_post = stats.norm.logpdf(m, m0, np.sqrt(s2 / kappa)) + stats.invgamma.logpdf(
        s2, alpha, scale=beta
    )
    latent = fam.to_latent(x)
    for record in latent:
        log_post += -0.5 * np.log(2 * np.pi * s2) - (record - m) ** 2 / (2 * s2)
    w = np.exp(log_post - log_post.max())
    total = integrate.trapezoid(integrate.trapezoid(w, sigma2, axis=1), mu)
    mean_mu = integrate.trapezoid(integrate.trapezoid(w * m, sigma2, axis=1), mu) / total
    mean_s2 = integrate.trapezoid(integrate.trapezoid(w * s2, sigma2, axis=1), mu) / total
    assert post.mu.mean() == pytest.approx(mean_mu, rel=1e-3)
    assert post.sigma2.mean() == pytest.approx(mean_s2, rel=1e-3)


def test_normal_draw_conjugate_matches_its_marginals():
    """20000 draws of (μ, σ²) from ``draw_conjugate`` vs the Student-t and InverseGamma marginals
    of ``conjugate_distribution``: KS at alpha = 0.001."""
    fam = Normal()
    params = fam.conjugate_update((0.5, 2.0, 3.0, 4.0), np.array([30.0, 80.0]), 20)
    draws = fam.draw_conjugate(
        np.random.default_rng(9), tuple(np.full(N_DATASETS, p) for p in params)
    )
    post = fam.conjugate_distribution(params)
    assert stats.kstest(draws[:, 0], post.mu.cdf).pvalue > ALPHA
    assert stats.kstest(draws[:, 1], post.sigma2.cdf).pvalue > ALPHA


@pytest.mark.parametrize("bounds", [(0, 40), (0, 3), (2, 10), (5, 60)])
def test_poisson_closed_form_window_moments_equal_lemma_1(bounds):
    """Poisson's closed-form (log q, μ̂, Σ̂) per window, and the gradient of μ̂ + Σ̂ in λ, equal
    the generic Lemma 1 (derivatives of log q) wherever the window holds more than 1e-6; the
    slope where the window holds less than 1e-4 is checked against direct sums instead, since
    there Lemma 1's third derivative of log q loses digits (3.5e-5 relative at λ = 33.8 on
    [2, 10], where the closed form agrees with the direct sums to 1e-8)."""
    from pymc_dp.families.counts import Poisson
    from pymc_dp.families.truncated import TruncatedFamily

    family, lam = Poisson(), pt.dscalar("lam")
    closed = family.truncated_moments(lam, bounds)
    generic = TruncatedFamily.truncated_moments(family, lam, bounds)
    outputs = []
    for (log_q, mu, sigma), (_, mu_g, sigma_g) in zip(closed, generic, strict=True):
        total, total_g = mu[0] + sigma[0, 0], mu_g[0] + sigma_g[0, 0]
        slope = pt.grad(total, lam, disconnected_inputs="ignore")
        slope_g = pt.grad(total_g, lam, disconnected_inputs="ignore")
        outputs += [log_q, mu[0], mu_g[0], sigma[0, 0], sigma_g[0, 0], slope, slope_g]
    fn = pytensor.function([lam], outputs, on_unused_input="ignore")
    for value in np.geomspace(1e-2, 200.0, 40):
        got = np.asarray(fn(value)).reshape(-1, 7)
        held = got[:, 0] > np.log(1e-6)
        for column in (1, 3):
            np.testing.assert_allclose(
                got[held, column], got[held, column + 1], rtol=1e-6, atol=1e-8
            )
        ample = got[:, 0] > np.log(1e-4)
        np.testing.assert_allclose(got[ample, 5], got[ample, 6], rtol=1e-6, atol=1e-8)
        thin = held & ~ample
        if thin.any():
            h = value * 1e-5
            rise = _direct_totals(value + h, bounds) - _direct_totals(value - h, bounds)
            slope = rise / (2 * h)
            np.testing.assert_allclose(got[thin, 5], slope[thin], rtol=1e-6, atol=1e-8)


def _direct_totals(lam: float, bounds: tuple[int, int]) -> np.ndarray:
    """μ̂ + Σ̂ of the Poisson's lower, centre and upper parts by direct sums over the support."""
    k = np.arange(0, int(bounds[1] + lam + 60 * np.sqrt(lam) + 60))
    p = stats.poisson.pmf(k, lam)
    out = []
    for sel in (k < bounds[0], (k >= bounds[0]) & (k <= bounds[1]), k > bounds[1]):
        q = p[sel].sum()
        m1 = (k[sel] * p[sel]).sum() / q if q > 0 else 0.0
        m2 = (k[sel] ** 2 * p[sel]).sum() / q if q > 0 else 0.0
        out.append(m1 + m2 - m1 * m1)
    return np.array(out)
