"""Positive continuous records: Gamma with a known shape, and Exponential, with a Gamma prior."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pytensor.tensor as pt
from pytensor.tensor.variable import TensorVariable
from scipy import stats

from pymc_dp._validation import check_positive
from pymc_dp.families.base import rv_op_type
from pymc_dp.families.builtin.exponential import EXPONENTIAL
from pymc_dp.families.builtin.gamma import GAMMA
from pymc_dp.families.conjugate_priors import GammaPrior
from pymc_dp.families.declaration import FamilyDeclaration
from pymc_dp.families.lazy_pymc import PyMCName, pm
from pymc_dp.families.truncated import TruncatedFamily, guarded_log, log1mexp
from pymc_dp.families.truncated import f64 as _f64
from pymc_dp.families.util import constant_value, reciprocal_of

__all__ = ["Exponential", "Gamma"]


@dataclasses.dataclass(frozen=True)
class Gamma(GammaPrior, TruncatedFamily):
    """x ~ Gamma(alpha, rate λ) with known shape; t(x) = x; η = -λ; A(η) = -alpha · log(-η).

    The prior on the rate is ``pm.Gamma(a, b)``; λ | s ~ Gamma(a + alpha·n, b + s).

    Parameters
    ----------
    alpha
        The known shape of every record's Gamma distribution.

    Examples
    --------
    >>> fam = Gamma(alpha=2.0)
    >>> fam.release_sensitivity((0.5, 3.0))
    3.0
    """

    alpha: float
    declaration: ClassVar[FamilyDeclaration] = GAMMA
    pymc_distribution = PyMCName("Gamma")

    def __post_init__(self) -> None:
        object.__setattr__(self, "alpha", check_positive(self.alpha, "alpha"))

    @property
    def domain(self) -> tuple[float, float]:  # noqa: D102
        return (0.0, np.inf)

    def statistic(self, z: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:  # noqa: D102
        return np.asarray(z, dtype=np.float64).reshape(-1, 1)

    def statistic_range(self, lower: float, upper: float):  # noqa: D102
        return np.array([lower]), np.array([upper])

    @classmethod
    def from_dist(cls, dist: TensorVariable) -> Gamma | None:  # noqa: D102
        if not isinstance(dist.owner.op, rv_op_type(pm.Gamma, 1.0, 1.0)):
            return None
        alpha = constant_value(dist.owner.op.dist_params(dist.owner)[0])
        if alpha is None:
            raise ValueError(
                "dist's alpha (shape) must be a fixed number: the Gamma family's conjugate "
                "update is for the rate with a known shape"
            )
        return cls(alpha=alpha)

    def theta_of(self, dist: TensorVariable) -> TensorVariable:  # noqa: D102
        return reciprocal_of(dist.owner.op.dist_params(dist.owner)[-1])

    def dist_at(self, rate: TensorVariable) -> TensorVariable:  # noqa: D102
        return pm.Gamma.dist(alpha=self.alpha, beta=rate)

    def window_theta_grid(self, bounds: tuple[float, float], nodes: int) -> npt.NDArray[np.float64]:
        """The rate over six decades around 1/width: every record above the window to below."""
        a, b = self.latent_window(bounds)
        width = max(b - a, abs(b), 1e-12)
        return np.geomspace(1e-3 / width, 1e3 / width, nodes)

    def natural_parameters(self, theta: TensorVariable) -> TensorVariable:  # noqa: D102
        return -theta

    def log_partition(self, eta: TensorVariable) -> TensorVariable:  # noqa: D102
        return -self.alpha * pt.log(-eta)

    def moments(self, theta: TensorVariable) -> tuple[TensorVariable, TensorVariable]:
        """Closed form: μ = alpha/λ, Σ = alpha/λ²."""
        return pt.reshape(self.alpha / theta, (1,)), pt.reshape(self.alpha / theta**2, (1, 1))

    def log_cdf(self, z: float, eta: TensorVariable) -> TensorVariable:  # noqa: D102
        return guarded_log(pt.gammainc(_f64(self.alpha), -eta * z))

    def log_sf(self, z: float, eta: TensorVariable) -> TensorVariable:  # noqa: D102
        return guarded_log(pt.gammaincc(_f64(self.alpha), -eta * z))

    def conjugate_update(self, prior, s, n):  # noqa: D102
        shape, rate = prior
        return shape + self.alpha * n, rate + np.reshape(s, np.shape(rate))

    def record_distribution(self, theta: float) -> Any:
        """Scipy distribution of one record at rate ``theta`` (for simulation and tests)."""
        return stats.gamma(self.alpha, scale=1.0 / theta)


@dataclasses.dataclass(frozen=True)
class Exponential(Gamma):
    """x ~ Exponential(λ); t(x) = x; η = -λ; A(η) = -log(-η). Gamma prior on λ.

    Examples
    --------
    >>> Exponential().release_sensitivity((0.2, 1.5))   # a record may leave the window
    1.5
    """

    alpha: float = dataclasses.field(default=1.0, init=False, repr=False)
    declaration: ClassVar[FamilyDeclaration] = EXPONENTIAL
    pymc_distribution = PyMCName("Exponential")

    def __post_init__(self) -> None:
        pass

    @classmethod
    def from_dist(cls, dist: TensorVariable) -> Exponential | None:  # noqa: D102
        if not isinstance(dist.owner.op, rv_op_type(pm.Exponential, 1.0)):
            return None
        return cls()

    def dist_at(self, lam: TensorVariable) -> TensorVariable:  # noqa: D102
        return pm.Exponential.dist(lam=lam)

    def log_cdf(self, z: float, eta: TensorVariable) -> TensorVariable:  # noqa: D102
        return log1mexp(eta * z)

    def log_sf(self, z: float, eta: TensorVariable) -> TensorVariable:  # noqa: D102
        return eta * z
