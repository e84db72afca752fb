"""Categorical records with K categories, released as all K counts, with a Dirichlet prior."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pytensor.tensor as pt
from pytensor.tensor.variable import TensorVariable
from scipy import stats

from pymc_dp._validation import (
    OUT_OF_DOMAIN_ADVICE,
    check_finite_array,
    check_int,
    describe_records,
)
from pymc_dp.families.base import ExponentialFamily, rv_op_type
from pymc_dp.families.builtin.categorical import CATEGORICAL
from pymc_dp.families.declaration import FamilyDeclaration
from pymc_dp.families.lazy_pymc import PyMCName, pm
from pymc_dp.kernels import draw_dirichlet

__all__ = ["Categorical"]


@functools.cache
def _categorical_op() -> type:
    return rv_op_type(pm.Categorical, [0.5, 0.5])


@dataclasses.dataclass(frozen=True)
class Categorical(ExponentialFamily):
    """x ∈ {0, …, K-1}; t(x) = one-hot(x); η = log p; A(η) = log Σ_k e^{η_k}.

    All K counts are released. Replacing one record moves one count down by one and another up
    by one, so Δ = 2 (releasing K - 1 counts would not lower it). The counts sum to n, so the
    CLT covariance n(diag p - p pᵀ) is singular; inference keeps s on that simplex.

    Parameters
    ----------
    categories
        Number of categories K ≥ 2 (public).

    Examples
    --------
    >>> fam = Categorical(categories=3)
    >>> fam.sensitivity, fam.sufficient_statistic(fam.validate_data([0, 2, 2, 1]))
    (2.0, array([1., 1., 2.]))
    """

    categories: int
    declaration: ClassVar[FamilyDeclaration] = CATEGORICAL
    pymc_distribution = PyMCName("Categorical")
    conjugate_prior = PyMCName("Dirichlet")

    def __post_init__(self) -> None:
        check_int(self.categories, "categories", minimum=2)

    @property
    def stat_shape(self) -> tuple[int, ...]:  # noqa: D102
        return (self.categories,)

    @property
    def prior_shapes(self) -> tuple[tuple[int, ...], ...]:  # noqa: D102
        return (self.stat_shape,)

    @property
    def sensitivity(self) -> float:  # noqa: D102
        return 2.0

    @property
    def sensitivity_l2(self) -> float:
        """Replacing a record moves one count down and another up: √2."""
        return float(np.sqrt(2.0))

    @property
    def domain(self) -> tuple[float, float]:  # noqa: D102
        return (0.0, float(self.categories - 1))

    def validate_data(self, x: npt.ArrayLike) -> npt.NDArray:  # noqa: D102
        arr = check_finite_array(x, "x", ndim=1)
        fractional = arr != np.round(arr)
        if np.any(fractional):
            raise ValueError(
                "x must hold integer category codes for categorical data: "
                f"{describe_records(fractional)} are not; the release was stopped (records "
                "are never rounded): fix those records"
            )
        out = (arr < 0) | (arr >= self.categories)
        if np.any(out):
            raise ValueError(
                f"x must hold category codes in [0, {self.categories}) for categories="
                f"{self.categories}: {describe_records(out)} lie outside; "
                f"{OUT_OF_DOMAIN_ADVICE}"
            )
        return arr.astype(np.int64)

    def sufficient_statistic(self, x: npt.NDArray) -> npt.NDArray[np.float64]:  # noqa: D102
        return np.bincount(x, minlength=self.categories).astype(np.float64)

    @classmethod
    def from_dist(cls, dist: TensorVariable) -> Categorical | None:  # noqa: D102
        node = dist.owner
        if node is None or not isinstance(node.op, _categorical_op()):
            return None
        (p,) = node.op.dist_params(node)
        # p of shape (G, K) is one θ per group of a grouped release (NoisySuffStat checks that).
        k = p.type.shape[-1] if p.type.ndim >= 1 else None
        if k is None:
            raise ValueError(
                "dist's p must be a vector with a fixed number of categories, e.g. "
                "pm.Categorical.dist(p=pm.Dirichlet('p', a=np.ones(3)))"
            )
        return cls(categories=int(k))

    def theta_of(self, dist: TensorVariable) -> TensorVariable:  # noqa: D102
        (p,) = dist.owner.op.dist_params(dist.owner)
        return p

    def dist_at(self, p: TensorVariable) -> TensorVariable:  # noqa: D102
        return pm.Categorical.dist(p=p)

    def natural_parameters(self, theta: TensorVariable) -> TensorVariable:  # noqa: D102
        return pt.log(theta)

    def log_partition(self, eta: TensorVariable) -> TensorVariable:  # noqa: D102
        return pt.logsumexp(eta)

    def moments(self, theta: TensorVariable) -> tuple[TensorVariable, TensorVariable]:
        """Closed form of Eq. (1): μ = p, Σ = diag(p) - p pᵀ (singular: rows sum to 0)."""
        # Broadcasting instead of pt.diag/pt.outer keeps the graph batchable (engine.py).
        row, col = pt.expand_dims(theta, -2), pt.expand_dims(theta, -1)
        return theta, pt.eye(self.categories) * row - col * row

    def valid_region(self, n: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:  # noqa: D102
        return np.zeros(self.categories), np.full(self.categories, float(n))

    def conjugate_update(  # noqa: D102
        self, prior: tuple[npt.NDArray, ...], s: npt.NDArray, n: int
    ) -> tuple[npt.NDArray, ...]:
        (alpha,) = prior
        return (alpha + s,)

    def draw_conjugate(  # noqa: D102
        self, rng: np.random.Generator, params: tuple[npt.NDArray, ...]
    ) -> npt.NDArray[np.float64]:
        (alpha,) = params
        return draw_dirichlet(rng, alpha=alpha)

    def conjugate_distribution(self, params: tuple[npt.ArrayLike, ...]) -> Any:  # noqa: D102
        (alpha,) = params
        return stats.dirichlet(np.asarray(alpha, dtype=np.float64))
