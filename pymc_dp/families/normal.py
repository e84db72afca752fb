"""Normal and LogNormal records (LogNormal through log x).

With σ known, t(x) = x and μ has a Normal prior; with μ and σ² unknown, t(x) = (x, x²) and
(μ, σ²) has the Normal–Inverse-Gamma prior.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, NamedTuple

import numpy as np
import numpy.typing as npt
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pytensor.tensor.variable import TensorVariable
from scipy import stats

from pymc_dp._compat import ancestors
from pymc_dp._validation import check_positive
from pymc_dp.families.base import rv_op_type
from pymc_dp.families.conjugate_priors import NormalPrior
from pymc_dp.families.truncated import LOG_TINY, TruncatedFamily, f64, normal_log_cdf
from pymc_dp.families.util import constant_value
from pymc_dp.kernels import draw_normal_inverse_gamma

__all__ = [
    "LogNormal",
    "LogNormalKnownSigma",
    "NIGDistribution",
    "Normal",
    "NormalKnownSigma",
    "square_statistic_sensitivity",
    "square_statistic_sensitivity_l2",
]


def square_statistic_sensitivity(lower: float, upper: float) -> float:
    """Exact L1 sensitivity of Σ 1[a ≤ z ≤ b] (z, z²) over the window [a, b] = [lower, upper].

    Two records in the window differ by |u - v| + |u² - v²| = (u - v)(1 + |u + v|) for v < u,
    largest with one of them at an end of the window and the other at that end or where
    |u + v| changes slope against it: v ∈ {a, clip(-½, a, b)} with u = b, or u ∈ {b, clip(½,
    a, b)} with v = a. A record leaving the window (t̂ = 0) moves the statistic by |z| + z²,
    largest at an end. The sensitivity is the largest of these candidates; it is never above
    the Appendix C sum of maxima and is up to a third below it for windows that straddle 0.

    Examples
    --------
    >>> round(square_statistic_sensitivity(-1.96, 1.96), 4), square_statistic_sensitivity(-4, 6)
    (6.0516, 42.25)
    """
    a, b = float(lower), float(upper)
    inside = [(b - v) * (1 + abs(b + v)) for v in (a, min(max(-0.5, a), b))]
    inside += [(u - a) * (1 + abs(u + a)) for u in (b, min(max(0.5, a), b))]
    leaving = [abs(a) + a * a, abs(b) + b * b]
    return float(max(inside + leaving))


def square_statistic_sensitivity_l2(lower: float, upper: float) -> float:
    """Exact L2 sensitivity of Σ 1[a ≤ z ≤ b] (z, z²) over the window [a, b] = [lower, upper].

    Two records v < u in the window differ by (u - v)² (1 + (u + v)²) in squared L2 norm. For
    a fixed u + v this is convex in u - v, so the largest value lies on the edge u = b or
    v = a of the triangle a ≤ v < u ≤ b. On u = b its derivative in v vanishes where
    2 s² - 2 b s + 1 = 0 with s = b + v; on v = a where 2 s² - 2 a s + 1 = 0 with s = u + a.
    The candidates are these roots (clipped to the window) and the corners; a record leaving
    the window moves the statistic by √(z² + z⁴), largest at an end.

    Examples
    --------
    >>> round(square_statistic_sensitivity_l2(-1.96, 1.96), 4)
    4.3797
    >>> round(square_statistic_sensitivity_l2(0.0, 1.0), 4)
    1.4142
    """
    a, b = float(lower), float(upper)

    def pair(u: float, v: float) -> float:
        return (u - v) ** 2 * (1.0 + (u + v) ** 2)

    candidates = [pair(b, a), a * a + a**4, b * b + b**4]
    for edge in (a, b):
        disc = edge * edge - 2.0
        if disc < 0:
            continue
        for s in ((edge + np.sqrt(disc)) / 2.0, (edge - np.sqrt(disc)) / 2.0):
            other = min(max(s - edge, a), b)
            candidates.append(pair(b, other) if edge == b else pair(other, a))
    return float(np.sqrt(max(candidates)))


_EDGE = 30.0
"""Standardised window edges are clipped to [-30, 30]: beyond, a tail holds less than e^-450 of
the mass, which changes no kept window's moments, and erfcx and its derivatives stay finite."""
_MIN_D = 1e-50
"""A window whose scaled mass D (below) is under this has q < e^-100 and is left out; the floor
keeps the Mills-type ratios 1/D, and their derivatives, finite."""
_SQRT_2_OVER_PI = float(np.sqrt(2.0 / np.pi))
_NARROW = 4.0
"""Windows with width · (width + far edge) below this (standardised) take their moments from
Gauss–Legendre quadrature: there the recursion's terms are about 1/width and cancel (a relative
error near 1e-6 in Var z² for a window 0.05 sd wide, 10 sd from the mean); the density varies
by at most e^4 over such a window, which 20 nodes integrate to double precision."""
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(20)


def _standard_window_moments(
    alpha: TensorVariable | float, beta: TensorVariable | float, order: int
) -> tuple[TensorVariable, TensorVariable, TensorVariable, list[TensorVariable]]:
    """Moments of X ~ N(0, 1) truncated to [alpha, beta] (edges within ±``_EDGE``).

    Returns ``(log_z, ok, u, [E (X - u)^j for j = 1..order])`` with Z = Φ(beta) - Φ(alpha),
    ``ok`` false where Z is too small to be computed, and u = clip(0, alpha, beta), the point of
    the window nearest the mode: shifting by it keeps the raw moments of X - u of the order of
    the window's spread, so that variances are not small differences of large numbers.

    The window is first reflected to have a non-negative midpoint (|alpha| <= beta). With
    a = alpha/√2, b = beta/√2 and D = erfcx(a) - e^(a² - b²) erfcx(b), Z = e^(-a²) D / 2, and
    the ratios φ(alpha)/Z = √(2/π)/D and φ(beta)/Z = √(2/π) e^(a² - b²)/D need no exponent of
    their own (the log-space ratio log φ - log Z in closed form). The moments follow from the
    recursion E Y^j = -u E Y^(j-1) + (j-1) E Y^(j-2) + (alpha-u)^(j-1) φ(alpha)/Z
    - (beta-u)^(j-1) φ(beta)/Z, for Y = X - u (integration by parts).
    """
    flip = pt.lt(alpha + beta, 0.0)
    lo = pt.switch(flip, -beta, alpha)
    hi = pt.switch(flip, -alpha, beta)
    sign = pt.switch(flip, f64(-1.0), f64(1.0))
    a, b = lo / np.sqrt(2.0), hi / np.sqrt(2.0)
    exponent = (a - b) * (a + b)  # a² - b² <= 0
    ratio = pt.exp(exponent)
    d_raw = pt.erfcx(a) - ratio * pt.erfcx(b)
    ok = pt.gt(d_raw, _MIN_D)
    d = pt.switch(ok, d_raw, 1.0)
    log_z = np.log(0.5) - pt.sqr(a) + pt.log(d)
    r_lo = _SQRT_2_OVER_PI / d
    r_hi = r_lo * ratio
    u = pt.maximum(lo, 0.0)  # hi >= |lo| >= 0 after the reflection
    d_lo, d_hi = lo - u, hi - u
    # j = 1 with φ(lo) - φ(hi) as φ(lo)(1 - e^(a² - b²)): exact for narrow windows.
    moments = [-u - r_lo * pt.expm1(exponent)]
    prev2, prev = f64(1.0), moments[0]
    p_lo, p_hi = d_lo, d_hi
    for j in range(2, order + 1):
        nxt = -u * prev + (j - 1) * prev2 + p_lo * r_lo - p_hi * r_hi
        moments.append(nxt)
        prev2, prev = prev, nxt
        p_lo, p_hi = p_lo * d_lo, p_hi * d_hi
    # Narrow windows: E Y^j by quadrature, Y = X - u on [lo - u, hi - u].
    narrow = pt.lt((hi - lo) * (2 * hi - lo), _NARROW)
    nodes = (lo + hi) / 2 + (hi - lo) / 2 * pt.constant(_GL_NODES)
    y = nodes - u
    weights = pt.constant(_GL_WEIGHTS) * pt.exp(-y * (y + 2 * u) / 2)  # φ(x)/φ(u), <= 1
    total = pt.sum(weights)
    power = y
    for j in range(order):
        moments[j] = pt.switch(narrow, pt.sum(weights * power) / total, moments[j])
        power = power * y
    moments = [m if j % 2 == 0 else sign * m for j, m in enumerate(moments, start=1)]
    return log_z, ok, sign * u, moments


def _clip_edge(value: TensorVariable) -> TensorVariable:
    return pt.minimum(pt.maximum(value, -_EDGE), _EDGE)


class _NormalWindowMoments:
    """Closed-form truncated-normal window moments for the Normal families.

    Overrides the autodiff of the truncated log-partition (Lemma 1), whose nested gradients
    make graphs that take minutes to rewrite and compile once NUTS differentiates them again.
    """

    def _location_scale_of(self, theta: TensorVariable) -> tuple[TensorVariable, Any]:
        raise NotImplementedError

    def truncated_moments(
        self,
        theta: TensorVariable,
        bounds: tuple[float, float],
        windows: tuple[str, ...] = ("lower", "centre", "upper"),
    ) -> list[tuple[TensorVariable, TensorVariable, TensorVariable]]:
        """(log q, μ̂, Σ̂) of t on the lower, centre and upper windows (Lemma 1, closed form).

        The same quantities as :meth:`TruncatedFamily.truncated_moments`, from the moments of
        a normal truncated to the window (:func:`_standard_window_moments`): for t = z,
        μ̂ = E z and Σ̂ = Var z; for t = (z, z²) also E z², Cov(z, z²) and Var z², written with
        d = z - c for the point c of the window nearest the mean.
        """
        loc, scale = self._location_scale_of(theta)
        k = self.stat_size
        v, w = self.window_edges(bounds)
        zlo, zhi = self._latent_domain()
        lower_empty = v < zlo or (v == zlo and not self.discrete)
        upper_empty = w >= zhi
        spans = {
            "lower": None if lower_empty else (-np.inf, v),
            "centre": (-np.inf if lower_empty else v, np.inf if upper_empty else w),
            "upper": None if upper_empty else (w, np.inf),
        }
        out = []
        for name in windows:
            span = spans[name]
            if span is None:
                out.append((f64(-np.inf), pt.zeros(k), pt.zeros((k, k))))
                continue
            lo, hi = ((e - loc) / scale if np.isfinite(e) else None for e in span)
            alpha = f64(-_EDGE) if lo is None else _clip_edge(lo)
            beta = f64(_EDGE) if hi is None else _clip_edge(hi)
            log_z, ok, u, std = _standard_window_moments(alpha, beta, 2 * k)
            # The tails' log mass exactly as window_log_masses computes it.
            if name == "lower":
                log_q = normal_log_cdf(hi)
            elif name == "upper":
                log_q = normal_log_cdf(-lo)
            elif lo is None and hi is None:
                log_q = f64(0.0)
            else:
                log_q = pt.switch(ok & pt.gt(log_z, LOG_TINY), log_z, LOG_TINY)
            centre = loc + scale * u
            d = [scale ** (j + 1) * m for j, m in enumerate(std)]
            var_d = d[1] - pt.sqr(d[0])
            if k == 1:
                mu = pt.stack([centre + d[0]])
                sigma = pt.reshape(var_d, (1, 1))
            else:
                cov_d_d2 = d[2] - d[0] * d[1]
                var_d2 = d[3] - pt.sqr(d[1])
                cov_12 = 2 * centre * var_d + cov_d_d2
                var_2 = 4 * pt.sqr(centre) * var_d + 4 * centre * cov_d_d2 + var_d2
                mu = pt.stack([centre + d[0], pt.sqr(centre) + 2 * centre * d[0] + d[1]])
                sigma = pt.stack([pt.stack([var_d, cov_12]), pt.stack([cov_12, var_2])])
            empty = pt.or_(pt.le(log_q, LOG_TINY), pt.invert(ok))
            mu = pt.switch(empty, 0.0, mu)
            sigma = pt.switch(empty, 0.0, sigma)
            out.append((log_q, mu, sigma))
        return out


def _square_range(lower: float, upper: float) -> tuple[float, float]:
    """Range of z² for z in [lower, upper]."""
    ends = (lower**2, upper**2)
    return (0.0 if lower <= 0 <= upper else min(ends)), max(ends)


@dataclasses.dataclass(frozen=True)
class NormalKnownSigma(_NormalWindowMoments, NormalPrior, TruncatedFamily):
    """x ~ N(μ, sigma²) with sigma known; t(x) = x; η = μ/sigma²; A(η) = sigma² η²/2.

    Prior ``pm.Normal(m, sd)`` on μ: μ | s ~ N(m', sd'²) with 1/sd'² = 1/sd² + n/sigma² and
    m' = sd'² (m/sd² + s/sigma²).

    Parameters
    ----------
    sigma
        The known standard deviation of every record.

    Examples
    --------
    >>> NormalKnownSigma(sigma=1.0).release_sensitivity((-4.0, 6.0))
    10.0
    """

    sigma: float
    name: ClassVar[str] = "normal_known_sigma"
    pymc_distribution: ClassVar[Any] = pm.Normal

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", check_positive(self.sigma, "sigma"))

    @property
    def domain(self) -> tuple[float, float]:  # noqa: D102
        return (-np.inf, np.inf)

    def statistic(self, z: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:  # noqa: D102
        return np.asarray(z, dtype=np.float64).reshape(-1, 1)

    def statistic_range(self, lower: float, upper: float):  # noqa: D102
        return np.array([lower]), np.array([upper])

    @classmethod
    def from_dist(cls, dist: TensorVariable) -> NormalKnownSigma | None:  # noqa: D102
        if not isinstance(dist.owner.op, rv_op_type(cls.pymc_distribution, 0.0, 1.0)):
            return None
        sigma = constant_value(dist.owner.op.dist_params(dist.owner)[1])
        return None if sigma is None else cls(sigma=sigma)

    def theta_of(self, dist: TensorVariable) -> TensorVariable:  # noqa: D102
        return dist.owner.op.dist_params(dist.owner)[0]

    def natural_parameters(self, theta: TensorVariable) -> TensorVariable:  # noqa: D102
        return theta / self.sigma**2

    def log_partition(self, eta: TensorVariable) -> TensorVariable:  # noqa: D102
        return self.sigma**2 * eta**2 / 2

    def moments(self, theta: TensorVariable) -> tuple[TensorVariable, TensorVariable]:
        """Closed form: μ = θ, Σ = sigma²."""
        return pt.reshape(theta, (1,)), pt.reshape(self.sigma**2 + 0 * theta, (1, 1))

    def log_cdf(self, z: float, eta: TensorVariable) -> TensorVariable:  # noqa: D102
        return normal_log_cdf((z - self.sigma**2 * eta) / self.sigma)

    def _location_scale_of(self, theta: TensorVariable) -> tuple[TensorVariable, float]:
        return theta, self.sigma

    def log_sf(self, z: float, eta: TensorVariable) -> TensorVariable:  # noqa: D102
        return normal_log_cdf((self.sigma**2 * eta - z) / self.sigma)

    def conjugate_update(self, prior, s, n):  # noqa: D102
        mean, sd = prior
        precision = 1 / np.square(sd) + n / self.sigma**2
        post_mean = (
            mean / np.square(sd) + np.reshape(s, np.shape(mean)) / self.sigma**2
        ) / precision
        return post_mean, 1 / np.sqrt(precision)

    def record_distribution(self, theta: float) -> Any:
        """Scipy distribution of one record on the latent scale (for simulation and tests)."""
        return stats.norm(theta, self.sigma)


class NIGDistribution(NamedTuple):
    """The Normal–Inverse-Gamma posterior as its two scipy marginals."""

    mu: Any
    """Marginal of μ: Student-t with 2α degrees of freedom."""
    sigma2: Any
    """Marginal of σ²: InverseGamma(α, β)."""


@dataclasses.dataclass(frozen=True)
class Normal(_NormalWindowMoments, TruncatedFamily):
    """x ~ N(μ, σ²) with both unknown; t(x) = (x, x²); η = (μ/σ², -1/(2σ²)).

    The prior is Normal–Inverse-Gamma, written with ordinary PyMC variables::

        sigma2 = pm.InverseGamma("sigma2", alpha=a, beta=b)
        mu = pm.Normal("mu", m, sigma=pm.math.sqrt(sigma2 / kappa))
        pm.Normal.dist(mu=mu, sigma=pm.math.sqrt(sigma2))

    and (μ, σ²) | s is drawn jointly: κ' = κ + n, m' = (κ m + s₁)/κ', α' = α + n/2,
    β' = β + (s₂ + κ m² - κ' m'²)/2. θ is the vector (μ, σ²).

    Examples
    --------
    >>> Normal().release_sensitivity((-4.0, 6.0))   # exact; Appendix C's sum of maxima is 46
    42.25
    """

    name: ClassVar[str] = "normal"
    pymc_distribution: ClassVar[Any] = pm.Normal
    conjugate_prior: ClassVar[Any] = pm.Normal
    stat_names: ClassVar[tuple[str, ...]] = ("sum_x", "sum_x2")
    prior_positive: ClassVar[tuple[bool, ...]] = (False, True, True, True)

    @property
    def domain(self) -> tuple[float, float]:  # noqa: D102
        return (-np.inf, np.inf)

    def statistic(self, z: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:  # noqa: D102
        z = np.asarray(z, dtype=np.float64).reshape(-1, 1)
        return np.concatenate([z, z**2], axis=1)

    def statistic_range(self, lower: float, upper: float):  # noqa: D102
        sq_lo, sq_hi = _square_range(lower, upper)
        return np.array([lower, sq_lo]), np.array([upper, sq_hi])

    def release_sensitivity(self, bounds: tuple[float, float]) -> float:
        """Exact L1 sensitivity of ŝ = Σ 1[a ≤ z ≤ b] (z, z²) (square_statistic_sensitivity).

        The window is taken on the latent scale (log x for LogNormal). This replaces the
        Appendix C bound ``Σ_j max{max |t_j|, range t_j}``, which is valid but up to 33% larger.
        """
        a, b = self.latent_window(self.check_bounds(bounds))
        return square_statistic_sensitivity(a, b)

    def release_sensitivity_l2(self, bounds: tuple[float, float]) -> float:
        """Exact L2 sensitivity of ŝ = Σ 1[a ≤ z ≤ b] (z, z²) (square_statistic_sensitivity_l2).

        The window is taken on the latent scale (log x for LogNormal).
        """
        a, b = self.latent_window(self.check_bounds(bounds))
        return square_statistic_sensitivity_l2(a, b)

    @classmethod
    def from_dist(cls, dist: TensorVariable) -> Normal | None:  # noqa: D102
        if not isinstance(dist.owner.op, rv_op_type(cls.pymc_distribution, 0.0, 1.0)):
            return None
        return cls()

    def theta_of(self, dist: TensorVariable) -> TensorVariable:  # noqa: D102
        mu, sigma = dist.owner.op.dist_params(dist.owner)
        return pt.stack([mu, pt.sqr(sigma)])

    def natural_parameters(self, theta: TensorVariable) -> TensorVariable:  # noqa: D102
        return pt.stack([theta[0] / theta[1], -0.5 / theta[1]])

    def log_partition(self, eta: TensorVariable) -> TensorVariable:  # noqa: D102
        return -(eta[0] ** 2) / (4 * eta[1]) - 0.5 * pt.log(-2 * eta[1])

    def moments(self, theta: TensorVariable) -> tuple[TensorVariable, TensorVariable]:
        """Closed form: E t = (μ, μ² + σ²); Cov t = [[σ², 2μσ²], [2μσ², 4μ²σ² + 2σ⁴]]."""
        mu, s2 = theta[0], theta[1]
        mean = pt.stack([mu, mu**2 + s2])
        cov = pt.stack(
            [pt.stack([s2, 2 * mu * s2]), pt.stack([2 * mu * s2, 4 * mu**2 * s2 + 2 * s2**2])]
        )
        return mean, cov

    def _location_scale_of(self, theta: TensorVariable) -> tuple[TensorVariable, TensorVariable]:
        return theta[0], pt.sqrt(theta[1])

    def _location_scale(self, eta: TensorVariable) -> tuple[TensorVariable, TensorVariable]:
        var = -0.5 / eta[1]
        return eta[0] * var, pt.sqrt(var)

    def log_cdf(self, z: float, eta: TensorVariable) -> TensorVariable:  # noqa: D102
        loc, scale = self._location_scale(eta)
        return normal_log_cdf((z - loc) / scale)

    def log_sf(self, z: float, eta: TensorVariable) -> TensorVariable:  # noqa: D102
        loc, scale = self._location_scale(eta)
        return normal_log_cdf((loc - z) / scale)

    # ---- the Normal–Inverse-Gamma prior, carried by two PyMC variables -----------------
    @property
    def prior_shapes(self) -> tuple[tuple[int, ...], ...]:  # noqa: D102
        return ((), (), (), ())

    def prior_example(self) -> TensorVariable:  # noqa: D102
        return pt.stack([pm.Normal.dist(0.0, 1.0), pm.InverseGamma.dist(1.0, 1.0)])

    def is_conjugate_prior(self, rv: TensorVariable) -> bool:  # noqa: D102
        return False

    def conjugate_prior_rvs(self, model: Any, dist: TensorVariable) -> tuple[TensorVariable, ...]:
        """(μ, σ²) if they carry a Normal–Inverse-Gamma prior, else ``()``.

        That is: μ ~ N(m, σ²/κ) and σ² ~ InverseGamma(α, β) are free variables, the record's σ
        is √σ², and κ is a fixed number.
        """
        mu, sigma = dist.owner.op.dist_params(dist.owner)
        normal_op, invgamma_op = (
            rv_op_type(pm.Normal, 0.0, 1.0),
            rv_op_type(pm.InverseGamma, 1.0, 1.0),
        )
        if mu not in model.free_RVs or not isinstance(mu.owner.op, normal_op):
            return ()
        found = [
            v
            for v in ancestors([sigma], blockers=model.free_RVs)
            if v in model.free_RVs and isinstance(v.owner.op, invgamma_op)
        ]
        if len(found) != 1:
            return ()
        (sigma2,) = found
        mu_sd = mu.owner.op.dist_params(mu.owner)[1]
        if not (_is_sqrt_scaled(sigma, sigma2, model) and _is_sqrt_scaled(mu_sd, sigma2, model)):
            return ()
        probe = pytensor.function([sigma2], pt.sqr(sigma) / sigma2, on_unused_input="ignore")
        if not np.isclose(probe(np.asarray(1.7, dtype=sigma2.dtype)), 1.0, rtol=1e-6):
            return ()
        return (mu, sigma2)

    def prior_parameters(self, rvs: tuple[TensorVariable, ...]) -> tuple[TensorVariable, ...]:
        """(m, κ, α, β) from μ ~ N(m, σ²/κ) and σ² ~ InverseGamma(α, β)."""
        mu, sigma2 = rvs
        loc, sd = mu.owner.op.dist_params(mu.owner)
        alpha, beta = sigma2.owner.op.dist_params(sigma2.owner)
        return loc, sigma2 / pt.sqr(sd), alpha, beta

    def split_theta(self, theta):  # noqa: D102
        return theta[..., 0], theta[..., 1]

    def conjugate_update(self, prior, s, n):  # noqa: D102
        mean, kappa, alpha, beta = prior
        s = np.asarray(s, dtype=np.float64)
        s1, s2 = s[..., 0], s[..., 1]
        kappa_n = kappa + n
        mean_n = (kappa * mean + s1) / kappa_n
        beta_n = beta + 0.5 * (s2 + kappa * mean**2 - kappa_n * mean_n**2)
        return mean_n, kappa_n, alpha + 0.5 * n, beta_n

    def draw_conjugate(self, rng, params):  # noqa: D102
        mean, kappa, alpha, beta = params
        return draw_normal_inverse_gamma(rng, mean=mean, kappa=kappa, alpha=alpha, beta=beta)

    def conjugate_distribution(self, params) -> NIGDistribution:  # noqa: D102
        mean, kappa, alpha, beta = (np.asarray(p, dtype=np.float64) for p in params)
        return NIGDistribution(
            mu=stats.t(2 * alpha, loc=mean, scale=np.sqrt(beta / (alpha * kappa))),
            sigma2=stats.invgamma(alpha, scale=beta),
        )

    def record_distribution(self, theta: npt.ArrayLike) -> Any:
        """Scipy distribution of one record on the latent scale at θ = (μ, σ²)."""
        mu, sigma2 = theta
        return stats.norm(mu, np.sqrt(sigma2))


def _is_sqrt_scaled(expr: TensorVariable, sigma2: TensorVariable, model: Any) -> bool:
    """Whether ``expr`` is a function of σ² alone with expr² / σ² constant.

    The ratio is checked at two values of σ².
    """
    others = [v for v in ancestors([expr]) if v in model.basic_RVs and v is not sigma2]
    if others or sigma2 not in set(ancestors([expr])):
        return False
    probe = pytensor.function([sigma2], pt.sqr(expr) / sigma2, on_unused_input="ignore")
    low, high = (probe(np.asarray(v, dtype=sigma2.dtype)) for v in (0.37, 2.9))
    return bool(np.isfinite(low) and np.isclose(low, high, rtol=1e-6))


class _LogScale:
    """Records are positive and the family applies to z = log x; bounds are on the x scale."""

    pymc_distribution: ClassVar[Any] = pm.LogNormal

    @property
    def domain(self) -> tuple[float, float]:
        return (0.0, np.inf)

    def to_latent(self, x: npt.ArrayLike) -> npt.NDArray[np.float64]:
        with np.errstate(divide="ignore"):
            return np.log(np.asarray(x, dtype=np.float64))


@dataclasses.dataclass(frozen=True)
class LogNormalKnownSigma(_LogScale, NormalKnownSigma):
    """x ~ LogNormal(μ, sigma) with sigma known: :class:`NormalKnownSigma` on log x.

    Examples
    --------
    >>> LogNormalKnownSigma(sigma=1.0).release_sensitivity((1.0, np.e**2))
    2.0
    """

    name: ClassVar[str] = "lognormal_known_sigma"


@dataclasses.dataclass(frozen=True)
class LogNormal(_LogScale, Normal):
    """x ~ LogNormal(μ, σ) with both unknown: :class:`Normal` on log x, NIG prior.

    Examples
    --------
    >>> LogNormal().release_sensitivity((1.0, np.e))
    2.0
    """

    name: ClassVar[str] = "lognormal"
