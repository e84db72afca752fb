"""Unbounded counts: Poisson records with a Gamma prior, Geometric records with a Beta prior."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pytensor.tensor as pt
from pytensor.tensor.variable import TensorVariable
from scipy import special, stats

from pymc_dp.families.base import rv_op_type
from pymc_dp.families.builtin.geometric import GEOMETRIC
from pymc_dp.families.builtin.poisson import POISSON
from pymc_dp.families.conjugate_priors import BetaPrior, GammaPrior
from pymc_dp.families.declaration import FamilyDeclaration
from pymc_dp.families.lazy_pymc import PyMCName, pm
from pymc_dp.families.poisson_window import poisson_window
from pymc_dp.families.truncated import LOG_TINY, TruncatedFamily, guarded_log, log1mexp
from pymc_dp.families.truncated import f64 as _f64

__all__ = ["Geometric", "Poisson", "poisson_window_moments"]


class _CountStatistic:
    """t(x) = x for integer records."""

    discrete: ClassVar[bool] = True

    def statistic(self, z: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return np.asarray(z, dtype=np.float64).reshape(-1, 1)

    def statistic_range(self, lower: float, upper: float):
        return np.array([lower]), np.array([upper])


@dataclasses.dataclass(frozen=True)
class Poisson(_CountStatistic, GammaPrior, TruncatedFamily):
    """x ~ Poisson(λ); t(x) = x; η = log λ; A(η) = e^η.

    Prior ``pm.Gamma(a, b)`` on λ: λ | s ~ Gamma(a + s, b + n).

    Examples
    --------
    >>> Poisson().release_sensitivity((0, 40))
    40.0
    """

    declaration: ClassVar[FamilyDeclaration] = POISSON
    pymc_distribution = PyMCName("Poisson")

    @property
    def domain(self) -> tuple[float, float]:  # noqa: D102
        return (0.0, np.inf)

    @classmethod
    def from_dist(cls, dist: TensorVariable) -> Poisson | None:  # noqa: D102
        return cls() if isinstance(dist.owner.op, rv_op_type(pm.Poisson, 1.0)) else None

    def theta_of(self, dist: TensorVariable) -> TensorVariable:  # noqa: D102
        return dist.owner.op.dist_params(dist.owner)[0]

    def dist_at(self, lam: TensorVariable) -> TensorVariable:  # noqa: D102
        return pm.Poisson.dist(mu=lam)

    def window_theta_grid(self, bounds: tuple[float, float], nodes: int) -> npt.NDArray[np.float64]:
        """λ over six decades around the window's width (as :class:`~pymc_dp.families.Gamma`)."""
        a, b = self.latent_window(bounds)
        width = max(b - a, abs(b), 1e-12)
        return np.geomspace(1e-3 / width, 1e3 / width, nodes)

    def natural_parameters(self, theta: TensorVariable) -> TensorVariable:  # noqa: D102
        return pt.log(theta)

    def log_partition(self, eta: TensorVariable) -> TensorVariable:  # noqa: D102
        return pt.exp(eta)

    def moments(self, theta: TensorVariable) -> tuple[TensorVariable, TensorVariable]:
        """Closed form: μ = Σ = λ."""
        return pt.reshape(theta, (1,)), pt.reshape(theta, (1, 1))

    def truncated_moments(
        self,
        theta: TensorVariable,
        bounds: tuple[float, float],
        windows: tuple[str, ...] = ("lower", "centre", "upper"),
    ) -> list[tuple[TensorVariable, TensorVariable, TensorVariable]]:
        """(log q, μ̂, Σ̂) of x on each window {lo, ..., hi}, in closed form.

        E[X 1{lo ≤ X ≤ hi}] = λ P(lo - 1 ≤ X ≤ hi - 1) and E[X(X-1) 1{...}] = λ² P(lo - 2 ≤ X ≤
        hi - 2), so with ρ_k = P(X = k)/q::

            μ̂ = λ (1 - ρ_hi + ρ_{lo-1}),
            Σ̂ = λ² - ρ_hi λ(λ + hi) + ρ_{lo-1} λ(λ + lo - 1) + μ̂ - μ̂².

        The generic Lemma 1 differentiates log q twice (and NUTS once more), through the
        incomplete gamma function; this needs q and two probabilities only.
        """
        eta = self.natural_parameters(theta)
        lam = pt.exp(eta)
        v, w = self.window_edges(bounds)
        masses = dict(zip(("lower", "centre", "upper"), self.window_log_masses(eta, bounds)))
        ends = {"lower": (0.0, v), "centre": (v + 1.0, w), "upper": (w + 1.0, np.inf)}
        log_pmf = lambda k: k * eta - lam - float(special.gammaln(k + 1.0))  # noqa: E731
        out = []
        for name in windows:
            log_q = masses[name]
            lo, hi = ends[name]
            if (log_q.owner is None and np.isneginf(log_q.data)) or hi < lo:
                out.append((log_q, pt.zeros(1), pt.zeros((1, 1))))
                continue
            if name == "centre":
                # One compiled operation for q and the edge probabilities (poisson_window.py).
                log_q, rho_lo, rho_hi = poisson_window(eta, lo, hi)
            else:
                rho_lo = pt.exp(log_pmf(lo - 1.0) - log_q) if lo > 0 else None
                rho_hi = pt.exp(log_pmf(hi) - log_q) if np.isfinite(hi) else None
            mean, var = poisson_window_moments(lam, log_q, rho_lo, rho_hi, (lo, hi))
            out.append((log_q, pt.reshape(mean, (1,)), pt.reshape(var, (1, 1))))
        return out

    def log_cdf(self, z: float, eta: TensorVariable) -> TensorVariable:  # noqa: D102
        return guarded_log(pt.gammaincc(_f64(z + 1.0), pt.exp(eta)))

    def log_sf(self, z: float, eta: TensorVariable) -> TensorVariable:  # noqa: D102
        return guarded_log(pt.gammainc(_f64(z + 1.0), pt.exp(eta)))

    def conjugate_update(self, prior, s, n):  # noqa: D102
        shape, rate = prior
        return shape + np.reshape(s, np.shape(shape)), rate + n

    def record_distribution(self, theta: float) -> Any:
        """Scipy distribution of one record (for simulation and tests)."""
        return stats.poisson(theta)


def poisson_window_moments(
    lam: Any, log_q: Any, rho_lo: Any, rho_hi: Any, window: tuple[float, float]
) -> tuple[TensorVariable, TensorVariable]:
    """Mean and variance of a Poisson(λ) record given lo ≤ x ≤ hi, elementwise (0 where empty).

    ``log_q`` is the window's log mass and ρ_lo = P(X = lo − 1)/q, ρ_hi = P(X = hi)/q (None
    where lo = 0 or hi = ∞); the formulas are :meth:`Poisson.truncated_moments`'.
    """
    lo, hi = window
    mean, second = lam, pt.sqr(lam)
    if np.isfinite(hi):
        mean, second = mean - lam * rho_hi, second - rho_hi * lam * (lam + hi)
    if lo > 0:
        mean, second = mean + lam * rho_lo, second + rho_lo * lam * (lam + lo - 1.0)
    var = second + mean - pt.sqr(mean)
    empty = log_q <= LOG_TINY
    return pt.switch(empty, 0.0, mean), pt.switch(empty, 0.0, var)


@dataclasses.dataclass(frozen=True)
class Geometric(_CountStatistic, BetaPrior, TruncatedFamily):
    """x ~ Geometric(p) on {1, 2, ...} (trials to the first success, as ``pm.Geometric``).

    t(x) = x; η = log(1 - p); A(η) = η - log(1 - e^η). Prior ``pm.Beta``:
    p | s ~ Beta(a + n, b + s - n).

    Examples
    --------
    >>> Geometric().release_sensitivity((1, 20))
    20.0
    """

    declaration: ClassVar[FamilyDeclaration] = GEOMETRIC
    pymc_distribution = PyMCName("Geometric")

    @property
    def domain(self) -> tuple[float, float]:  # noqa: D102
        return (1.0, np.inf)

    @classmethod
    def from_dist(cls, dist: TensorVariable) -> Geometric | None:  # noqa: D102
        return cls() if isinstance(dist.owner.op, rv_op_type(pm.Geometric, 0.5)) else None

    def theta_of(self, dist: TensorVariable) -> TensorVariable:  # noqa: D102
        return dist.owner.op.dist_params(dist.owner)[0]

    def dist_at(self, p: TensorVariable) -> TensorVariable:  # noqa: D102
        return pm.Geometric.dist(p=p)

    def window_theta_grid(self, bounds: tuple[float, float], nodes: int) -> npt.NDArray[np.float64]:
        """The success probability, evenly on the logit scale from -9 to 9 (10⁻⁴ to 1 - 10⁻⁴)."""
        return special.expit(np.linspace(-9.0, 9.0, nodes))

    def natural_parameters(self, theta: TensorVariable) -> TensorVariable:  # noqa: D102
        return pt.log1p(-theta)

    def log_partition(self, eta: TensorVariable) -> TensorVariable:  # noqa: D102
        return eta - log1mexp(eta)

    def moments(self, theta: TensorVariable) -> tuple[TensorVariable, TensorVariable]:
        """Closed form: μ = 1/p, Σ = (1 - p)/p²."""
        return pt.reshape(1 / theta, (1,)), pt.reshape((1 - theta) / theta**2, (1, 1))

    def log_cdf(self, z: float, eta: TensorVariable) -> TensorVariable:  # noqa: D102
        return log1mexp(eta * z)

    def log_sf(self, z: float, eta: TensorVariable) -> TensorVariable:  # noqa: D102
        return eta * z

    def conjugate_update(self, prior, s, n):  # noqa: D102
        alpha, beta = prior
        return alpha + n, beta + np.reshape(s, np.shape(beta)) - n

    def record_distribution(self, theta: float) -> Any:
        """Scipy distribution of one record (for simulation and tests)."""
        return stats.geom(theta)
