"""Closed-form truncated-normal window moments of the Normal families (paper §3.3, Lemma 1).

``NormalKnownSigma``, ``Normal`` and their LogNormal versions compute (log q, μ̂, Σ̂) of each
window from the moments of a truncated normal instead of by autodiff of the truncated
log-partition. Checked here: against the generic autodiff (``TruncatedFamily.truncated_moments``),
scipy ``truncnorm`` and quadrature, for random windows and θ far into the tails; finite
gradients of every output at extreme θ; the three windows adding up to the untruncated moments;
and that compiling a model with a windowed record logs no PyTensor error.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from typing import Any

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.compile.mode import Mode
from scipy import integrate, stats

import pymc_dp as pmdp
from pymc_dp.families import (
    LogNormal,
    LogNormalKnownSigma,
    Normal,
    NormalKnownSigma,
    TruncatedFamily,
)
from pymc_dp.families.truncated import LOG_TINY

MODE = Mode(linker="py", optimizer=None)
WINDOWS = ("lower", "centre", "upper")
LOG_SCALE = (LogNormal, LogNormalKnownSigma)


def theta_variable(fam: TruncatedFamily) -> pt.TensorVariable:
    return pt.dvector("theta") if fam.stat_size > 1 else pt.dscalar("theta")


def location_scale(fam: TruncatedFamily, theta: Any) -> tuple[float, float]:
    if fam.stat_size == 1:
        return float(theta), fam.sigma
    return float(theta[0]), math.sqrt(theta[1])


@functools.cache
def moments_function(fam: TruncatedFamily, bounds: tuple[float, float], generic: bool = False):
    """θ -> [(log q, μ̂, Σ̂) per window], closed form or (``generic``) by autodiff."""
    theta = theta_variable(fam)
    with pytensor.config.change_flags(traceback__limit=0):
        method = TruncatedFamily.truncated_moments if generic else type(fam).truncated_moments
        outputs = [v for window in method(fam, theta, bounds) for v in window]
        fn = pytensor.function([theta], outputs, mode=MODE)

    def evaluate(value: Any) -> list[tuple[float, np.ndarray, np.ndarray]]:
        out = [np.asarray(v, dtype=np.float64) for v in fn(np.asarray(value, dtype=np.float64))]
        return [(float(out[3 * r]), out[3 * r + 1], out[3 * r + 2]) for r in range(3)]

    return evaluate


def quadrature_moments(loc: float, scale: float, lo: float, hi: float, k: int):
    """(log q, mean, cov) of t = z (k = 1) or (z, z²) for z ~ N(loc, scale²) on (lo, hi).

    Independent of the closed form: integrals of the density, rescaled to 1 at the point of the
    window nearest the mode so that far tails do not underflow, with central moments from a
    second pass (no differences of raw moments).
    """
    alpha, beta = (lo - loc) / scale, (hi - loc) / scale
    x0 = min(max(0.0, alpha), beta)

    def quad(fn):
        points = [x0] if alpha < x0 < beta else None
        if math.isinf(alpha) or math.isinf(beta):
            # quad takes no break points on infinite ranges: split at x0 by hand.
            return sum(
                integrate.quad(fn, p, q, epsabs=0.0, epsrel=1e-13, limit=400)[0]
                for p, q in ((alpha, x0), (x0, beta))
                if q > p
            )
        return integrate.quad(fn, alpha, beta, epsabs=0.0, epsrel=1e-13, limit=400, points=points)[
            0
        ]

    def density(x):
        return math.exp(-(x * x - x0 * x0) / 2)

    mass = quad(density)
    log_q = math.log(mass) - x0 * x0 / 2 - 0.5 * math.log(2 * math.pi)
    mean_dev = quad(lambda x: (x - x0) * density(x)) / mass  # E(X - x0)
    mean_z = loc + scale * (x0 + mean_dev)

    def stat(x):  # t(z) centred at its mean, written in powers of (x - xm) without cancellation
        d = scale * (x - x0 - mean_dev)  # z - E z
        return (d,) if k == 1 else (d, d * (2 * mean_z + d))  # z² - (E z)² = d(2 E z + d)

    var_z = quad(lambda x: stat(x)[0] ** 2 * density(x)) / mass
    if k == 1:
        return log_q, np.array([mean_z]), np.array([[var_z]])
    mean_sq = mean_z**2 + var_z
    # t₂ - E t₂ = z² - (E z)² - Var z
    cov = np.empty((2, 2))
    cov[0, 0] = var_z
    cov[0, 1] = cov[1, 0] = quad(lambda x: stat(x)[0] * (stat(x)[1] - var_z) * density(x)) / mass
    cov[1, 1] = quad(lambda x: (stat(x)[1] - var_z) ** 2 * density(x)) / mass
    return log_q, np.array([mean_z, mean_sq]), cov


def latent_windows(fam: TruncatedFamily, bounds: tuple[float, float]):
    v, w = fam.window_edges(bounds)
    return ((-np.inf, v), (v, w), (w, np.inf))


def assert_window_close(got, expected, rtol: float, label: str) -> None:
    """log q to ``rtol`` absolute; μ̂ and Σ̂ entries to ``rtol`` relative to their scale.

    An entry's scale is |value| + its natural size (sd of the component for μ̂_j, the product of
    the sds for Σ̂_ij), so entries that vanish by symmetry (Cov(z, z²) at E z = 0) are compared
    on the scale of the window's spread rather than to 0 relatively.
    """
    log_q, mean, cov = got
    ref_log_q, ref_mean, ref_cov = expected
    assert log_q == pytest.approx(ref_log_q, abs=max(rtol, 1e-12)), label
    sd = np.sqrt(np.abs(np.diag(ref_cov)))
    np.testing.assert_array_less(np.abs(mean - ref_mean), rtol * (np.abs(ref_mean) + sd) + 1e-300)
    scale = np.abs(ref_cov) + np.outer(sd, sd)
    assert np.all(np.abs(cov - ref_cov) <= rtol * scale + 1e-300), f"{label}: {cov} vs {ref_cov}"


def random_cases(fam: TruncatedFamily, rng: np.random.Generator, n_bounds: int, n_theta: int):
    """(bounds, [θ]) with windows 0.05 to 20 standard deviations wide and the mean up to 12
    standard deviations beyond either edge (a window's mass down to about e^-70)."""
    cases = []
    for _ in range(n_bounds):
        if isinstance(fam, LOG_SCALE):
            a = float(np.exp(rng.uniform(-2, 2)))
            b = a * float(np.exp(rng.uniform(0.1, 3)))
        else:
            a = float(rng.uniform(-20, 20))
            b = a + float(rng.uniform(0.5, 30))
        v, w = fam.window_edges((a, b))
        thetas = []
        for _ in range(n_theta):
            if fam.stat_size == 1:
                scale = fam.sigma
            else:
                scale = (w - v) / float(np.exp(rng.uniform(math.log(0.05), math.log(20))))
            loc = float(rng.uniform(v - 12 * scale, w + 12 * scale))
            thetas.append(loc if fam.stat_size == 1 else (loc, scale**2))
        cases.append(((a, b), thetas))
    return cases


FAMILIES = {
    "normal-known-sigma": NormalKnownSigma(sigma=2.0),
    "lognormal-known-sigma": LogNormalKnownSigma(sigma=0.7),
    "normal": Normal(),
    "lognormal": LogNormal(),
}


# ---- values --------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::scipy.integrate.IntegrationWarning")
@pytest.mark.parametrize("name", list(FAMILIES))
def test_closed_form_matches_quadrature(name):
    """All three windows at 5 random windows × 12 random θ (mean up to 12 sd outside the
    window): log q, μ̂ and Σ̂ agree with quadrature to 1e-8 (on each entry's scale); windows
    below e^LOG_TINY report μ̂ = Σ̂ = 0."""
    fam = FAMILIES[name]
    rng = np.random.default_rng(list(FAMILIES).index(name))
    for bounds, thetas in random_cases(fam, rng, n_bounds=5, n_theta=12):
        evaluate = moments_function(fam, bounds)
        for theta in thetas:
            loc, scale = location_scale(fam, theta)
            for window, (lo, hi), label in zip(
                evaluate(theta), latent_windows(fam, bounds), WINDOWS, strict=True
            ):
                msg = f"{name} bounds={bounds} θ={theta} {label}"
                expected = quadrature_moments(loc, scale, lo, hi, fam.stat_size)
                if expected[0] <= LOG_TINY:
                    assert window[0] <= LOG_TINY + 1e-9, msg
                    assert not np.any(window[1]) and not np.any(window[2]), msg
                    continue
                assert_window_close(window, expected, 1e-8, msg)


@pytest.mark.parametrize("name", ["normal-known-sigma", "lognormal-known-sigma"])
def test_closed_form_matches_scipy_truncnorm(name):
    """k = 1: log q, mean and variance of each window vs scipy ``truncnorm`` at 5 random
    windows × 12 random θ, relative 1e-8 wherever the window holds more than e^-30 (scipy's
    variance loses digits deeper in the tails)."""
    fam = FAMILIES[name]
    rng = np.random.default_rng(10 + list(FAMILIES).index(name))
    for bounds, thetas in random_cases(fam, rng, n_bounds=5, n_theta=12):
        evaluate = moments_function(fam, bounds)
        for theta in thetas:
            for window, (lo, hi), label in zip(
                evaluate(theta), latent_windows(fam, bounds), WINDOWS, strict=True
            ):
                alpha, beta = (lo - theta) / fam.sigma, (hi - theta) / fam.sigma
                dist = stats.truncnorm(alpha, beta, loc=theta, scale=fam.sigma)
                if alpha <= 0 <= beta:
                    log_q = float(np.log(stats.norm.cdf(beta) - stats.norm.cdf(alpha)))
                elif alpha > 0:
                    log_q = float(
                        stats.norm.logsf(alpha)
                        + np.log1p(-np.exp(stats.norm.logsf(beta) - stats.norm.logsf(alpha)))
                    )
                else:
                    log_q = float(
                        stats.norm.logcdf(beta)
                        + np.log1p(-np.exp(stats.norm.logcdf(alpha) - stats.norm.logcdf(beta)))
                    )
                if log_q < -30:
                    continue
                expected = (log_q, np.array([dist.mean()]), np.array([[dist.var()]]))
                assert_window_close(window, expected, 1e-8, f"{name} {bounds} θ={theta} {label}")


CASES = {
    "normal-known-sigma": (NormalKnownSigma(sigma=2.0), (-4.0, 6.0), (-9.0, -3.0, 1.0, 7.0, 15.0)),
    "lognormal-known-sigma": (LogNormalKnownSigma(sigma=0.5), (0.5, 5.0), (-2.0, 0.3, 1.0, 3.0)),
    "normal": (
        Normal(),
        (-4.0, 6.0),
        ((1.0, 4.0), (-2.0, 0.5), (5.0, 9.0), (-10.0, 4.0), (12.0, 9.0), (1.0, 400.0)),
    ),
    "lognormal": (
        LogNormal(),
        (0.5, 5.0),
        ((0.3, 1.0), (1.0, 0.25), (-0.5, 2.0), (-3.0, 0.5), (3.0, 0.5)),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_closed_form_matches_generic_autodiff(name):
    """The closed form vs ``TruncatedFamily.truncated_moments`` (autodiff of Â(η)) on all three
    windows: log q to 1e-8 absolute where the window holds more than 1e-10 (the generic centre
    mass is 1 - q_l - q_u), μ̂ and Σ̂ to 1e-7 on each entry's scale (the autodiff Hessian of
    log q loses a few digits against the closed form)."""
    fam, bounds, thetas = CASES[name]
    closed, generic = moments_function(fam, bounds), moments_function(fam, bounds, generic=True)
    for theta in thetas:
        for got, ref, label in zip(closed(theta), generic(theta), WINDOWS, strict=True):
            msg = f"{name} θ={theta} {label}"
            if ref[0] < math.log(1e-10):
                continue
            assert_window_close(got, ref, 1e-7, msg)


# ---- derivatives ---------------------------------------------------------------------------


EXTREME = {
    "normal-known-sigma": (
        NormalKnownSigma(sigma=2.0),
        (-4.0, 6.0),
        (-1e4, -100.0, 1e-8, 100.0, 1e4),
    ),
    "lognormal-known-sigma": (LogNormalKnownSigma(sigma=0.1), (0.5, 5.0), (-300.0, 0.0, 300.0)),
    "normal": (
        Normal(),
        (-4.0, 6.0),
        (
            (1e4, 1.0),
            (-1e4, 1.0),
            (100.0, 1.0),
            (-100.0, 1.0),
            (1.0, 1e8),
            (1.0, 1e-8),
            (6.0, 1e-10),
            (-4.0, 1e-10),
            (1e3, 1e6),
        ),
    ),
    "lognormal": (LogNormal(), (0.5, 5.0), ((50.0, 1.0), (-50.0, 1.0), (0.2, 1e3), (0.2, 1e-3))),
}


@functools.cache
def gradient_function(fam: TruncatedFamily, bounds: tuple[float, float]):
    """θ -> (every output, the gradient of each output's every entry)."""
    theta = theta_variable(fam)
    with pytensor.config.change_flags(traceback__limit=0):
        outputs = [v for window in fam.truncated_moments(theta, bounds) for v in window]
        outputs += list(fam.joint_clt(theta, 200, bounds))
        k = fam.stat_size
        sizes = [1, k, k * k] * 3 + [2 * k, 4 * k * k]
        grads = [
            pytensor.grad(pt.flatten(out)[i], theta)
            for out, size in zip(outputs, sizes, strict=True)
            if out.owner is not None
            for i in range(size)
        ]
        fn = pytensor.function([theta], outputs + grads, mode=MODE, on_unused_input="ignore")
    return lambda value: fn(np.asarray(value, dtype=np.float64))


@pytest.mark.parametrize("name", list(EXTREME))
def test_outputs_and_gradients_finite_at_extreme_theta(name):
    """Every output of ``truncated_moments`` and ``joint_clt`` and the gradient of each entry in
    θ are finite for θ far in the tails, at huge and tiny variances and at the window edges."""
    fam, bounds, thetas = EXTREME[name]
    fn = gradient_function(fam, bounds)
    for theta in thetas:
        values = fn(theta)
        for i, value in enumerate(values):
            assert np.all(np.isfinite(value)) or np.all(np.isneginf(value)), (
                f"{name} θ={theta} output {i}: {value}"
            )


# ---- the windows add up ------------------------------------------------------------------


@pytest.mark.parametrize("name", list(FAMILIES))
def test_windows_add_up_to_untruncated_moments(name):
    """Σ_r q_r μ̂_r = μ and Σ_r q_r (Σ̂_r + μ̂_r μ̂_rᵀ) = Σ + μμᵀ at 4 random windows × 8 θ
    (rtol 1e-9 on the scale of Σ + μμᵀ), and ``joint_clt``'s s-block is (nμ, nΣ)."""
    fam = FAMILIES[name]
    rng = np.random.default_rng(20 + list(FAMILIES).index(name))
    theta_var = theta_variable(fam)
    mu_fn = pytensor.function([theta_var], list(fam.moments(theta_var)), mode=MODE)
    for bounds, thetas in random_cases(fam, rng, n_bounds=4, n_theta=8):
        evaluate = moments_function(fam, bounds)
        joint = pytensor.function(
            [theta_var], list(fam.joint_clt(theta_var, 50, bounds)), mode=MODE
        )
        for theta in thetas:
            mu, sigma = mu_fn(np.asarray(theta, dtype=np.float64))
            second = sigma + np.outer(mu, mu)
            first = sum(math.exp(lq) * m for lq, m, _ in evaluate(theta))
            total = sum(math.exp(lq) * (s + np.outer(m, m)) for lq, m, s in evaluate(theta))
            scale = np.sqrt(np.outer(np.diag(second), np.diag(second)))
            msg = f"{name} bounds={bounds} θ={theta}"
            assert np.all(np.abs(first - mu) <= 1e-9 * np.sqrt(np.diag(second))), msg
            assert np.all(np.abs(total - second) <= 1e-9 * scale), msg
            mean, cov = joint(np.asarray(theta, dtype=np.float64))
            k = fam.stat_size
            np.testing.assert_allclose(mean[k:], 50 * mu, rtol=1e-12, err_msg=msg)
            np.testing.assert_allclose(cov[k:, k:], 50 * sigma, rtol=1e-12, err_msg=msg)


# ---- models: compile time and log ----------------------------------------------------------


def windowed_releases() -> dict[str, tuple[Any, Any, dict[str, float]]]:
    """One release per windowed family: (release, PyMC class, its known parameters)."""
    rng = np.random.default_rng(3)
    z = rng.normal(1.0, 0.8, size=300)
    specs = {
        "exponential": (pm.Exponential, rng.exponential(1.0, 300), (0.2, 3.0), {}),
        "gamma": (pm.Gamma, rng.gamma(2.5, 1.0, 300), (0.5, 6.0), {"alpha": 2.5}),
        "poisson": (pm.Poisson, rng.poisson(3.0, 300), (0, 8), {}),
        "geometric": (pm.Geometric, rng.geometric(0.3, 300), (1, 8), {}),
        "normal-known-sigma": (pm.Normal, z, (-1.0, 3.0), {"sigma": 0.8}),
        "lognormal-known-sigma": (pm.LogNormal, np.exp(z), (0.5, 8.0), {"sigma": 0.8}),
        "normal": (pm.Normal, z, (-1.0, 3.0), {}),
        "lognormal": (pm.LogNormal, np.exp(z), (0.5, 8.0), {}),
    }
    return {
        name: (pmdp.release(x, cls, epsilon=1.0, bounds=b, rng=4, **params), cls, params)
        for name, (cls, x, b, params) in specs.items()
    }


def windowed_model(name: str, rel: Any, cls: Any, params: dict[str, float], **kwargs: Any):
    with pm.Model() as model:
        if name in ("normal", "lognormal"):
            sigma2 = pm.InverseGamma("sigma2", 3.0, 2.0)
            mu = pm.Normal("mu", 0.0, sigma=pm.math.sqrt(sigma2 / 0.1))
            dist = cls.dist(mu=mu, sigma=pm.math.sqrt(sigma2))
        elif name in ("normal-known-sigma", "lognormal-known-sigma"):
            dist = cls.dist(mu=pm.Normal("mu", 0.0, 3.0), sigma=params["sigma"])
        elif name == "gamma":
            dist = cls.dist(alpha=params["alpha"], beta=pm.Gamma("beta", 2.0, 2.0))
        elif name == "geometric":
            dist = cls.dist(p=pm.Beta("p", 2.0, 2.0))
        elif name == "poisson":
            dist = cls.dist(mu=pm.Gamma("lam", 2.0, 0.5))
        else:
            dist = cls.dist(lam=pm.Gamma("lam", 2.0, 2.0))
        pmdp.NoisySuffStat("y", dist, release=rel, **kwargs)
    return model


NORMAL_NAMES = ("normal-known-sigma", "lognormal-known-sigma", "normal", "lognormal")
OTHER_NAMES = ("exponential", "gamma", "poisson", "geometric")


@functools.cache
def releases():
    return windowed_releases()


def _compile_logs_no_error(name: str, method: str, caplog) -> float:
    rel, cls, params = releases()[name]
    kwargs = {} if method == "auto" else {"method": method}
    model = windowed_model(name, rel, cls, params, **kwargs)
    caplog.clear()
    start = time.perf_counter()
    with caplog.at_level(logging.ERROR, logger="pytensor"):
        model.logp_dlogp_function(ravel_inputs=True)
    elapsed = time.perf_counter() - start
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, f"{name} ({method}): {len(errors)} errors, first: {errors[0].getMessage()}"
    return elapsed


@pytest.mark.slow
@pytest.mark.parametrize("method", ["augmented", "auto"])
@pytest.mark.parametrize("name", NORMAL_NAMES)
def test_compiling_normal_models_logs_no_error(name, method, caplog):
    """Compiling logp and dlogp (what NUTS compiles) of a model with a windowed Normal or
    LogNormal record logs nothing at ERROR level (issue 18, item 6); the time is printed."""
    elapsed = _compile_logs_no_error(name, method, caplog)
    print(f"{name} ({method}): logp_dlogp_function compiled in {elapsed:.1f} s")


# ---- the window-moments Op's derivatives -------------------------------------------------

OP_WINDOWS = [
    (-1.0, 2.0),  # wide, straddles the mode
    (-30.0, 0.5),  # one open side
    (3.0, 3.05),  # narrow (quadrature branch)
    (10.0, 10.02),  # narrow, far
    (-12.0, -11.5),  # far in the left tail (reflected)
    (0.3, 8.0),
]


@functools.cache
def op_derivatives():
    """(α, β) -> first and second derivatives of the Op's 7 outputs, by its own L_op."""
    from pymc_dp.families.normal_window import window_moments

    a, b = pt.dscalars("a", "b")
    first, second = [], []
    for out in window_moments(a, b):
        ga, gb = pt.grad(out, [a, b])
        first += [ga, gb]
        second += [*pt.grad(ga, [a, b]), *pt.grad(gb, [a, b])]
    f1 = pytensor.function([a, b], first)
    f2 = pytensor.function([a, b], second)
    return (lambda x, y: np.array(f1(x, y)).reshape(7, 2)), (
        lambda x, y: np.array(f2(x, y)).reshape(7, 2, 2)
    )


@pytest.mark.parametrize("window", OP_WINDOWS)
def test_window_moments_op_derivatives_match_finite_differences(window):
    """The Op's closed-form first derivatives match central differences of the NumPy kernel,
    and its second derivatives (the L_op differentiated again) match central differences of
    the first, to 2e-3 relative on the scale of each output's derivatives."""
    from pymc_dp.kernels.normal_window import standard_window_moments

    def values(x, y):
        m = standard_window_moments(x, y)
        return np.array([m.log_z, m.mean, *m.central, m.ratio_lo, m.ratio_hi])

    a, b = window
    d1, d2 = op_derivatives()
    h = 1e-6
    numeric = np.stack(
        [
            (values(a + h, b) - values(a - h, b)) / (2 * h),
            (values(a, b + h) - values(a, b - h)) / (2 * h),
        ],
        axis=1,
    )
    scale = np.abs(numeric).max(axis=1, keepdims=True) + 1e-12
    np.testing.assert_array_less(np.abs(d1(a, b) - numeric) / scale, 2e-3)
    h = 1e-5
    numeric2 = np.stack(
        [(d1(a + h, b) - d1(a - h, b)) / (2 * h), (d1(a, b + h) - d1(a, b - h)) / (2 * h)],
        axis=2,
    )
    scale2 = np.abs(numeric2).reshape(7, -1).max(axis=1)[:, None, None] + 1e-12
    np.testing.assert_array_less(np.abs(d2(a, b) - numeric2) / scale2, 2e-3)


def test_window_moments_op_vectorizes_and_reports_empty_windows():
    """The Op broadcasts its edges (as GridStep's vectorised conditional needs) and gives an
    empty window log Z = -inf with zero moments and zero gradients."""
    from pytensor.graph.replace import vectorize_graph

    from pymc_dp.families.normal_window import window_moments

    a = pt.dscalar("a")
    out = window_moments(a, 2.0)[1]
    batch = pt.dvector("batch")
    fn = pytensor.function([batch], vectorize_graph(out, replace={a: batch}))
    edges = np.array([-1.0, 0.0, 1.5])
    expected = [stats.truncnorm(e, 2.0).mean() for e in edges]
    np.testing.assert_allclose(fn(edges), expected, rtol=1e-12)
    outs = window_moments(a, 1.0)
    grads = pt.grad(outs[1] + outs[2] + outs[5], a)
    fn = pytensor.function([a], [outs[0], outs[1], grads])
    log_z, mean, grad = fn(1.0)  # a window of width 0
    assert np.isneginf(log_z) and mean == 0.0 and grad == 0.0


def test_compiled_graph_matches_numpy_kernel_and_keeps_op_gradient():
    """The default compile replaces the Op by the same kernel as a graph: values equal the
    NumPy kernel's (every branch: wide, narrow, reflected, far tail, empty), and the gradient
    is still the Op's polynomial."""
    from pymc_dp.families.normal_window import WindowMomentsOp, window_moments
    from pymc_dp.kernels.normal_window import standard_window_moments

    rng = np.random.default_rng(7)
    lo = np.concatenate([rng.uniform(-30, 30, 400), [-30.0, 10.0, -12.05, 29.0, -1.0, 0.0]])
    width = np.concatenate([rng.exponential(2.0, 400), [60.0, 0.05, 0.05, 1.0, 1e-9, 3.0]])
    hi = np.minimum(lo + width, 30.0)
    a, b = pt.dvector("a"), pt.dvector("b")
    outs = window_moments(a, b)
    fn = pytensor.function([a, b], outs)
    assert not any(isinstance(n.op, WindowMomentsOp) for n in fn.maker.fgraph.apply_nodes)
    got = fn(lo, hi)
    ref = standard_window_moments(lo, hi)
    expected = (ref.log_z, ref.mean, *np.moveaxis(ref.central, -1, 0), ref.ratio_lo, ref.ratio_hi)
    for g, e in zip(got, expected):
        # Fused C (or Numba, PyTensor 3) rounds the recursion differently: 1e-4 of c₄ at worst.
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-10)
    # The gradient of a sum of outputs, compiled (graph forward) and in Python (Op forward).
    cost = outs[1].sum() + outs[2].sum() + outs[4].sum()
    grads = pytensor.grad(cost, [a, b])
    fast = pytensor.function([a, b], grads)(lo, hi)
    slow = pytensor.function([a, b], grads, mode=MODE)(lo, hi)
    for f, s in zip(fast, slow):
        np.testing.assert_allclose(f, s, rtol=1e-4, atol=1e-10)
