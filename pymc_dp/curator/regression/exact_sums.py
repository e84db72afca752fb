"""Exact, order-independent regression statistics: the per-batch kernel of a regression release.

Each variable of a record (x_1..x_d, y) is rounded to the nearest point of a public
fixed-point grid inside its bounds (step q_v, a power of two), so that every released monomial
Π v^p of the gridded record is an exact int64 in units Π q_v^p, and the integers are summed
exactly (:func:`pymc_dp.curator.fixed_point.exact_total`). The gridded record lies in the box of
records, so the sensitivity over the box covers the rounding unchanged. The statistics
(degree 2) use grids of 2**31 steps per unit of the largest bound's binade, the moments of x
(degree 4) grids of 2**15: products of four stay below 2**62.

Like :class:`pymc_dp.curator.exact_sums.FamilyPlan`, a :class:`RegressionPlan` holds only public
values, is picklable, and returns :class:`~pymc_dp.curator.exact_sums.BatchTotals` (never a record's
value).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt

from pymc_dp.curator.exact_sums import (
    BatchTotals,
    Problem,
    grid_limits,
    limb_total,
    missing_problem,
    record_quantum,
)
from pymc_dp.curator.fixed_point import quantise
from pymc_dp.curator.regression.statistics import covariate_powers, statistic_powers

__all__ = [
    "RegressionPlan",
    "binary_message",
    "binary_outside",
    "factor_message",
    "factor_outside",
]

_ADVICE = (
    "the release was stopped. The bounds must come from public knowledge, not from the "
    "data: fix those records, or pass clamp=True to clamp every record to the bounds "
    "(recorded in the release; the sensitivity is unchanged)"
)


def binary_outside(x: npt.NDArray, binary: tuple[int, ...]) -> npt.NDArray[np.bool_]:
    """Which records ``(rows, d)`` hold a value other than 0 and 1 in a ``binary`` covariate.

    Examples
    --------
    >>> binary_outside(np.array([[0.0, 2.5], [1.0, 0.3], [0.5, 1.0]]), (0,)).tolist()
    [False, False, True]
    """
    if not binary:
        return np.zeros(x.shape[0], dtype=bool)
    cols = x[:, list(binary)]
    return np.any((cols != 0.0) & (cols != 1.0), axis=1)


def binary_message(x_name: str, binary: tuple[int, ...]) -> str:
    """The message of a release stopped by :func:`binary_outside` (``{records}`` left to fill)."""
    return (
        f"{x_name} has {{records}} with a value other than 0 and 1 in the covariate(s) declared "
        f"binary (indices {list(binary)}); the release was stopped. Code them 0/1 (clamping "
        "does not), or do not declare them binary"
    )


def factor_outside(x: npt.NDArray, factor: tuple[int, ...]) -> npt.NDArray[np.bool_]:
    """Which records ``(rows, d)`` are not one level of the factor with dummy columns ``factor``.

    A record is one level when each of its values in those columns is 0 or 1 and at most one
    is 1 (the reference level is all 0).

    Examples
    --------
    >>> x = np.array([[0.0, 0.0, 3.0], [1.0, 0.0, 3.0], [1.0, 1.0, 3.0], [0.0, 0.5, 3.0]])
    >>> factor_outside(x, (0, 1)).tolist()
    [False, False, True, True]
    """
    if not factor:
        return np.zeros(x.shape[0], dtype=bool)
    cols = x[:, list(factor)]
    return np.any((cols != 0.0) & (cols != 1.0), axis=1) | (np.sum(cols == 1.0, axis=1) > 1)


def factor_message(x_name: str, factor: tuple[int, ...]) -> str:
    """The message of a release stopped by :func:`factor_outside` (``{records}`` left to fill)."""
    return (
        f"{x_name} has {{records}} with a value other than 0 and 1, or more than one 1, in the "
        f"dummy columns declared factor (factor indices {list(factor)}); the release was "
        "stopped. Code the factor as dummy columns of one level each, reference level all 0 "
        "(clamping does not), or do not declare factor="
    )


@dataclasses.dataclass(frozen=True)
class RegressionPlan:
    """How to sum the regression statistic (and moments of x) exactly; public values only.

    Attributes
    ----------
    bounds
        ``(lower, upper)`` of each variable x_1..x_d, y, shape ``(d + 1, 2)`` as tuples.
    moments
        Whether the degree 3-4 monomials of x are summed too.
    clamp
        Whether records are clamped to the bounds instead of stopping the release.
    names
        How messages name the covariates and the response.
    binary
        Indices of the covariates declared binary: every record's value must be 0 or 1
        (:func:`binary_outside`); clamping does not make a value binary.
    factor
        Indices of the dummy columns of one declared factor, in the order of its levels: every
        record must hold 0 or 1 in each, with at most one 1 (:func:`factor_outside`).
    """

    bounds: tuple[tuple[float, float], ...]
    moments: bool = False
    clamp: bool = False
    names: tuple[str, str] = ("x", "y")
    binary: tuple[int, ...] = ()
    factor: tuple[int, ...] = ()

    @property
    def d(self) -> int:
        """Number of covariates."""
        return len(self.bounds) - 1

    @property
    def quanta(self) -> tuple[float, ...]:
        """Grid step of each variable for the statistic (degree 2)."""
        return tuple(record_quantum(lo, hi, 2) for lo, hi in self.bounds)

    @property
    def moment_quanta(self) -> tuple[float, ...]:
        """Grid step of each covariate for the moments of x (degree 4)."""
        return tuple(record_quantum(lo, hi, 4) for lo, hi in self.bounds[:-1])

    def _blocks(self) -> list[tuple[npt.NDArray[np.int64], tuple[float, ...], int]]:
        """(powers, quanta, number of variables) of each released block, in release order."""
        blocks = [(statistic_powers(self.d), self.quanta, self.d + 1)]
        if self.moments:
            # Degree 1-2 sums of x are entries of the statistic: only degrees 3-4 are summed.
            blocks.append((covariate_powers(self.d, (3, 4)), self.moment_quanta, self.d))
        return blocks

    def batch_totals(self, values: npt.ArrayLike, *, checked: bool = False) -> BatchTotals:
        """Check one batch of records ``(rows, d + 1)`` (x then y) and sum exactly."""
        arr = np.asarray(values)
        rows = int(arr.shape[0])
        if rows == 0:
            return BatchTotals(0, (0,) * sum(p.shape[0] for p, _, _ in self._blocks()))
        if not checked:
            problem = self._problem(arr)
            if problem is not None:
                return BatchTotals(rows, (), problem)
            arr = arr.astype(np.float64)
            if self.clamp:
                box = np.asarray(self.bounds)
                arr = np.clip(arr, box[:, 0], box[:, 1])
        totals: list[int] = []
        for powers, quanta, width in self._blocks():
            gridded = [
                np.clip(quantise(arr[:, j], q), *grid_limits(lo, hi, q, "the bounds"))
                for j, ((lo, hi), q) in enumerate(zip(self.bounds[:width], quanta, strict=True))
            ]
            columns = []
            for row in powers:
                product = np.ones(rows, dtype=np.int64)
                for j, power in enumerate(row):
                    for _ in range(int(power)):
                        product = product * gridded[j]
                columns.append(product)
            totals.extend(limb_total(columns))
        return BatchTotals(rows, tuple(totals))

    def _problem(self, arr: npt.NDArray) -> Problem | None:
        x_name, y_name = self.names
        if arr.dtype.kind not in "biuf":
            return Problem(
                "TypeError",
                f"{x_name} and {y_name} must hold numbers (got {arr.dtype})",
                None,
                None,
            )
        arr = arr.astype(np.float64)
        problem = missing_problem(arr, f"{x_name} or {y_name}")
        if problem is not None:
            return problem
        if not np.all(np.isfinite(arr)):
            return Problem("ValueError", f"{x_name} and {y_name} must be finite", None, None)
        other = binary_outside(arr[:, :-1], self.binary)
        if other.any():
            return Problem("ValueError", binary_message(x_name, self.binary), int(other.sum()),
                           int(np.argmax(other)))  # fmt: skip
        other = factor_outside(arr[:, :-1], self.factor)
        if other.any():
            return Problem("ValueError", factor_message(x_name, self.factor), int(other.sum()),
                           int(np.argmax(other)))  # fmt: skip
        if self.clamp:
            return None
        box = np.asarray(self.bounds)
        outside = np.any((arr[:, :-1] < box[:-1, 0]) | (arr[:, :-1] > box[:-1, 1]), axis=1)
        if outside.any():
            return Problem(
                "ValueError",
                f"{x_name} has {{records}} outside x_bounds={box[:-1].tolist()}; {_ADVICE}",
                int(outside.sum()),
                int(np.argmax(outside)),
            )
        outside = (arr[:, -1] < box[-1, 0]) | (arr[:, -1] > box[-1, 1])
        if outside.any():
            return Problem(
                "ValueError",
                f"{y_name} has {{records}} outside y_bounds={box[-1].tolist()}; {_ADVICE}",
                int(outside.sum()),
                int(np.argmax(outside)),
            )
        return None

    def units(self) -> list[tuple[float, ...]]:
        """The unit (a power of two) of each exact total, block by block (statistic, moments)."""
        return [
            tuple(
                float(np.prod([q**p for q, p in zip(quanta, row, strict=False)])) for row in powers
            )
            for powers, quanta, _ in self._blocks()
        ]

    def blocks(self, totals: tuple[int, ...]) -> list[tuple[tuple[int, ...], tuple[float, ...]]]:
        """The exact totals of each block with their units: ``(totals, units)`` per block."""
        out, start = [], 0
        for scales in self.units():
            out.append((tuple(totals[start : start + len(scales)]), scales))
            start += len(scales)
        return out

    def sums(self, totals: tuple[int, ...]) -> list[npt.NDArray[np.float64]]:
        """The released sums of each block (statistic, then moments) from exact totals."""
        return [
            np.array([float(t) * s for t, s in zip(block, scales, strict=True)])
            for block, scales in self.blocks(totals)
        ]
