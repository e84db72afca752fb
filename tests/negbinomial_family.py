"""A family declared in one file, outside pymc_dp: Negative Binomial counts with r known.

Imported by tests/test_family_plugin.py (and kept out of collection by tests/conftest.py, so that
it is registered only while those tests run). Nothing else in pymc_dp names it: defining the class
registers its declaration, and the curator, the models, the dry run and the command line read it.

x ~ NegativeBinomial(r, p): the failures before the r-th success, as ``pm.NegativeBinomial(n=r,
p=p)`` and ``scipy.stats.nbinom(r, p)``. t(x) = x; η = log(1 - p); A(η) = -r log(1 - e^η);
E x = r(1 - p)/p. Conjugate prior p ~ Beta(a, b): p | s ~ Beta(a + n r, b + s). The counts are
unbounded, so they are released over a window, as Poisson counts are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pymc as pm
import pytensor.tensor as pt
from pytensor.tensor.variable import TensorVariable
from scipy import special, stats

from pymc_dp._validation import check_int
from pymc_dp.families.base import rv_op_type
from pymc_dp.families.conjugate_priors import BetaPrior
from pymc_dp.families.declaration import (
    DEFAULT_SHAPE,
    CommandLine,
    FamilyDeclaration,
    FamilyOption,
    PriorSpec,
)
from pymc_dp.families.truncated import TruncatedFamily, f64, guarded_log, log1mexp
from pymc_dp.families.util import constant_value

__all__ = ["WAITS_FOR", "NegativeBinomial"]

WAITS_FOR = "the successes R each record waits for"
"""Help of ``--successes``."""


def _window_prior(m: float, w: float, settings: Mapping[str, Any]) -> dict[str, float]:
    # E[(1 - p)/p] = b/(a - 1) under Beta(a, b): the implied record mean r·b/(a - 1) is m.
    return {"alpha": DEFAULT_SHAPE, "beta": (DEFAULT_SHAPE - 1.0) * m / settings["successes"]}


@dataclasses.dataclass(frozen=True)
class NegativeBinomial(BetaPrior, TruncatedFamily):
    """x ~ NegativeBinomial(successes, p): failures before the ``successes``-th success."""

    successes: int
    declaration: ClassVar[FamilyDeclaration] = FamilyDeclaration(
        name="negbinomial",
        windowed=True,
        prior=PriorSpec(
            "Beta", ("alpha", "beta"), {"alpha": 1.0, "beta": 1.0}, ("p",), "alpha=2, beta=m/r"
        ),
        window_prior=_window_prior,
        command_line=CommandLine(records="failures before --successes R", release="window"),
        options=(FamilyOption("successes", "successes", WAITS_FOR, kind="count"),),
        statistic_labels=("sum of failures",),
        grouped_link="logit",
    )
    pymc_distribution: ClassVar[Any] = pm.NegativeBinomial
    discrete: ClassVar[bool] = True

    def __post_init__(self) -> None:
        check_int(self.successes, "successes", minimum=1)

    @property
    def domain(self) -> tuple[float, float]:
        return (0.0, np.inf)

    def statistic(self, z: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return np.asarray(z, dtype=np.float64).reshape(-1, 1)

    def statistic_range(self, lower: float, upper: float):
        return np.array([lower]), np.array([upper])

    @classmethod
    def from_dist(cls, dist: TensorVariable) -> NegativeBinomial | None:
        if not isinstance(dist.owner.op, rv_op_type(pm.NegativeBinomial, 1, 0.5)):
            return None
        r = constant_value(dist.owner.op.dist_params(dist.owner)[0])
        return None if r is None or r != round(r) else cls(successes=int(r))

    def theta_of(self, dist: TensorVariable) -> TensorVariable:
        return dist.owner.op.dist_params(dist.owner)[1]

    def dist_at(self, p: TensorVariable) -> TensorVariable:
        return pm.NegativeBinomial.dist(n=self.successes, p=p)

    def window_theta_grid(self, bounds, nodes):
        return special.expit(np.linspace(-9.0, 9.0, nodes))

    def natural_parameters(self, theta: TensorVariable) -> TensorVariable:
        return pt.log1p(-theta)

    def log_partition(self, eta: TensorVariable) -> TensorVariable:
        return -self.successes * log1mexp(eta)

    def moments(self, theta: TensorVariable) -> tuple[TensorVariable, TensorVariable]:
        """Closed form: μ = r(1 - p)/p, Σ = r(1 - p)/p²."""
        mean = self.successes * (1 - theta) / theta
        return pt.reshape(mean, (1,)), pt.reshape(mean / theta, (1, 1))

    def log_cdf(self, z: float, eta: TensorVariable) -> TensorVariable:
        # P(x ≤ z) = I_p(r, z + 1), with p = 1 - e^η.
        return guarded_log(pt.betainc(f64(self.successes), f64(z + 1.0), -pt.expm1(eta)))

    def log_sf(self, z: float, eta: TensorVariable) -> TensorVariable:
        # P(x > z) = I_{1-p}(z + 1, r): the complement, accurate in the upper tail.
        return guarded_log(pt.betainc(f64(z + 1.0), f64(self.successes), pt.exp(eta)))

    def conjugate_update(self, prior, s, n):
        alpha, beta = prior
        return alpha + n * self.successes, beta + np.reshape(s, np.shape(beta))

    def record_distribution(self, theta: float) -> Any:
        """Scipy distribution of one record."""
        return stats.nbinom(self.successes, theta)
