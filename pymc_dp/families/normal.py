"""Normal and LogNormal records (LogNormal through log x).

With σ known, t(x) = x and μ has a Normal prior; with μ and σ² unknown, t(x) = (x, x²) and
(μ, σ²) has the Normal–Inverse-Gamma prior.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, NamedTuple

import numpy as np
import numpy.typing as npt
import pytensor
import pytensor.tensor as pt
from pytensor.tensor.variable import TensorVariable
from scipy import stats

from pymc_dp._compat import ancestors
from pymc_dp._validation import check_positive
from pymc_dp.families.base import rv_op_type
from pymc_dp.families.builtin.lognormal import LOGNORMAL, LOGNORMAL_KNOWN_SIGMA
from pymc_dp.families.builtin.normal import NORMAL, NORMAL_KNOWN_SIGMA
from pymc_dp.families.conjugate_priors import NormalPrior
from pymc_dp.families.declaration import FamilyDeclaration
from pymc_dp.families.lazy_pymc import PyMCName, pm
from pymc_dp.families.normal_window import NormalWindowMoments
from pymc_dp.families.truncated import TruncatedFamily, normal_log_cdf
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


def _square_range(lower: float, upper: float) -> tuple[float, float]:
    """Range of z² for z in [lower, upper]."""
    ends = (lower**2, upper**2)
    return (0.0 if lower <= 0 <= upper else min(ends)), max(ends)


@dataclasses.dataclass(frozen=True)
class NormalKnownSigma(NormalWindowMoments, NormalPrior, TruncatedFamily):
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
    declaration: ClassVar[FamilyDeclaration] = NORMAL_KNOWN_SIGMA
    pymc_distribution = PyMCName("Normal")

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

    def dist_at(self, mu: TensorVariable) -> TensorVariable:  # noqa: D102
        return self.pymc_distribution.dist(mu=mu, sigma=self.sigma)

    def window_theta_grid(self, bounds: tuple[float, float], nodes: int) -> npt.NDArray[np.float64]:
        """μ from six σ below the window to six σ above it."""
        a, b = self.latent_window(bounds)
        return np.linspace(a - 6 * self.sigma, b + 6 * self.sigma, nodes)

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
class Normal(NormalWindowMoments, TruncatedFamily):
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

    declaration: ClassVar[FamilyDeclaration] = NORMAL
    pymc_distribution = PyMCName("Normal")
    conjugate_prior = PyMCName("Normal")
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

    def dist_at(self, mu: TensorVariable, sigma2: TensorVariable) -> TensorVariable:  # noqa: D102
        return self.pymc_distribution.dist(mu=mu, sigma=pm.math.sqrt(sigma2))

    def window_theta_grid(self, bounds: tuple[float, float], nodes: int) -> npt.NDArray[np.float64]:
        """(μ, σ²) on a grid of ``nodes // 4`` means by as many scales, θ on the last axis.

        μ from a window's width below it to one above, σ from 1/300 of the width to three
        widths. A quarter of ``nodes`` along each axis keeps the table near nodes² / 16
        evaluations (225 for 61) rather than nodes².
        """
        a, b = self.latent_window(bounds)
        width = max(b - a, abs(b), 1e-12)
        side = max(nodes // 4, 2)
        mu = np.linspace(a - width, b + width, side)
        sigma = np.geomspace(width / 300, 3 * width, side)
        m, s = np.meshgrid(mu, sigma, indexing="ij")
        return np.stack([m.ravel(), s.ravel() ** 2], axis=-1)

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

    pymc_distribution = PyMCName("LogNormal")
    log_scale: ClassVar[bool] = True

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

    declaration: ClassVar[FamilyDeclaration] = LOGNORMAL_KNOWN_SIGMA


@dataclasses.dataclass(frozen=True)
class LogNormal(_LogScale, Normal):
    """x ~ LogNormal(μ, σ) with both unknown: :class:`Normal` on log x, NIG prior.

    Examples
    --------
    >>> LogNormal().release_sensitivity((1.0, np.e))
    2.0
    """

    declaration: ClassVar[FamilyDeclaration] = LOGNORMAL
