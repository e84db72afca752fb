"""Binomial records (``trials`` fixed) and Bernoulli records, with a Beta prior on p."""

from __future__ import annotations

import dataclasses
import functools
from typing import ClassVar

import numpy as np
import numpy.typing as npt
import pytensor.tensor as pt
from pytensor.tensor.variable import TensorVariable

from pymc_dp._validation import (
    OUT_OF_DOMAIN_ADVICE,
    check_finite_array,
    check_int,
    describe_records,
)
from pymc_dp.families.base import ExponentialFamily, rv_op_type
from pymc_dp.families.builtin.bernoulli import BERNOULLI
from pymc_dp.families.builtin.binomial import BINOMIAL
from pymc_dp.families.conjugate_priors import BetaPrior
from pymc_dp.families.declaration import FamilyDeclaration
from pymc_dp.families.lazy_pymc import PyMCName, pm
from pymc_dp.families.util import constant_value

__all__ = ["Bernoulli", "Binomial"]


@functools.cache
def _op_types() -> dict[str, type]:
    return {
        "binomial": rv_op_type(pm.Binomial, 1, 0.5),
        "bernoulli": rv_op_type(pm.Bernoulli, 0.5),
    }


@dataclasses.dataclass(frozen=True)
class Binomial(BetaPrior, ExponentialFamily):
    """x ~ Binomial(trials, p); t(x) = x; η = logit p; A(η) = trials · log(1 + e^η).

    Parameters
    ----------
    trials
        Number of trials per record (public). Replacing one record moves s by at most
        ``trials``, so the sensitivity is ``trials``.

    Examples
    --------
    >>> fam = Binomial(trials=5)
    >>> fam.sensitivity, fam.sufficient_statistic(fam.validate_data([0, 5, 2]))
    (5.0, array(7.))
    """

    trials: int
    declaration: ClassVar[FamilyDeclaration] = BINOMIAL
    pymc_distribution = PyMCName("Binomial")

    def __post_init__(self) -> None:
        check_int(self.trials, "trials", minimum=1)

    @property
    def stat_shape(self) -> tuple[int, ...]:  # noqa: D102
        return ()

    @property
    def sensitivity(self) -> float:  # noqa: D102
        return float(self.trials)

    @property
    def sensitivity_l2(self) -> float:
        """One component: the L2 sensitivity equals the L1 one, ``trials``."""
        return float(self.trials)

    @property
    def domain(self) -> tuple[float, float]:  # noqa: D102
        return (0.0, float(self.trials))

    def validate_data(self, x: npt.ArrayLike) -> npt.NDArray:  # noqa: D102
        arr = check_finite_array(x, "x", ndim=1)
        fractional = arr != np.round(arr)
        if np.any(fractional):
            raise ValueError(
                f"x must hold whole numbers of successes for {self.name} data: "
                f"{describe_records(fractional)} are not; the release was stopped (records "
                "are never rounded): fix those records"
            )
        outside = (arr < 0) | (arr > self.trials)
        if np.any(outside):
            raise ValueError(
                f"x must lie in [0, {self.trials}] for {self.name} data with trials="
                f"{self.trials}: {describe_records(outside)} lie outside; {OUT_OF_DOMAIN_ADVICE}"
            )
        return arr.astype(np.int64)

    def sufficient_statistic(self, x: npt.NDArray) -> npt.NDArray[np.float64]:  # noqa: D102
        return np.asarray(np.sum(x), dtype=np.float64)

    @classmethod
    def from_dist(cls, dist: TensorVariable) -> Binomial | None:  # noqa: D102
        node = dist.owner
        if node is None or not isinstance(node.op, _op_types()["binomial"]):
            return None
        trials = constant_value(node.op.dist_params(node)[0])
        if trials is None or trials != round(trials):
            raise ValueError(
                "dist's n (trials per record) must be a fixed whole number, as the release "
                "is computed with a public number of trials"
            )
        return cls(trials=int(trials))

    def theta_of(self, dist: TensorVariable) -> TensorVariable:  # noqa: D102
        return dist.owner.op.dist_params(dist.owner)[-1]

    def dist_at(self, p: TensorVariable) -> TensorVariable:  # noqa: D102
        return pm.Binomial.dist(n=self.trials, p=p)

    def natural_parameters(self, theta: TensorVariable) -> TensorVariable:  # noqa: D102
        return pt.log(theta) - pt.log1p(-theta)

    def log_partition(self, eta: TensorVariable) -> TensorVariable:  # noqa: D102
        return self.trials * pt.softplus(eta)

    def moments(self, theta: TensorVariable) -> tuple[TensorVariable, TensorVariable]:
        """Closed form of Eq. (1): μ = trials·p, Σ = trials·p(1 - p)."""
        return self.trials * theta, self.trials * theta * (1 - theta)

    def valid_region(self, n: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:  # noqa: D102
        return np.zeros(1), np.full(1, float(n * self.trials))

    def conjugate_update(  # noqa: D102
        self, prior: tuple[npt.NDArray, ...], s: npt.NDArray, n: int
    ) -> tuple[npt.NDArray, ...]:
        alpha, beta = prior
        return alpha + s, beta + n * self.trials - s


@dataclasses.dataclass(frozen=True)
class Bernoulli(Binomial):
    """x ∈ {0, 1}; t(x) = x; Δ = 1. A Binomial family with one trial.

    Examples
    --------
    >>> Bernoulli().validate_data([0, 2])
    Traceback (most recent call last):
    ...
    ValueError: x must lie in [0, 1] for bernoulli data with trials=1: 1 record(s) ... outside; ...
    """

    trials: int = dataclasses.field(default=1, init=False)
    declaration: ClassVar[FamilyDeclaration] = BERNOULLI
    pymc_distribution = PyMCName("Bernoulli")

    def validate_data(self, x: npt.ArrayLike) -> npt.NDArray:  # noqa: D102
        arr = np.asarray(x)
        if arr.dtype == np.bool_:
            arr = arr.astype(np.int64)
        return super().validate_data(arr)

    @classmethod
    def from_dist(cls, dist: TensorVariable) -> Bernoulli | None:  # noqa: D102
        node = dist.owner
        if node is None or not isinstance(node.op, _op_types()["bernoulli"]):
            return None
        return cls()

    def dist_at(self, p: TensorVariable) -> TensorVariable:  # noqa: D102
        return pm.Bernoulli.dist(p=p)
