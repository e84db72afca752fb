"""L1 sensitivity of monomial sums over a box of records (replace-one neighbours).

Every released regression statistic, and every released moment of the covariates, is a sum over
records of a monomial ``Π_j v_j^{k_j}`` in the record's variables ``v = (x_1, ..., x_d, y)``, each
confined to an interval. Two bounds on ``max ||t(v) − t(v')||₁`` over the box are available:

``"exact"`` (the default for the regression statistic up to d = 3)
    The sensitivity itself, ``max_σ [max_v σ·t(v) − min_v σ·t(v)]`` over sign vectors ``σ``,
    found by enumerating the faces of the box (:mod:`pymc_dp.curator.regression.exact_l1`; every
    component has degree <= 2, so each ``σ·t`` is a quadratic), with a relative margin of 1e-9.
``"sum-of-ranges"`` (larger d, and the moments of x)
    ``Δ = Σ_r (max_box t_r − min_box t_r)`` (Bernstein & Sheldon 2019, §3.4; method note §4).
    Each range is exact: a power ``v^k`` of one interval has its extremes at the ends, or at 0
    for an even power of an interval that straddles 0; a product of powers of *different*
    variables is multilinear in those factors, so its extremes are among the products of the
    factors' end points. The bound is attained when one record can be at the top of every
    component's range and another at the bottom (e.g. all intervals non-negative); when an
    interval straddles 0 it over-states the sensitivity: 1.5× for x, y in [−1, 1] at d = 1,
    1.6× at d = 2, 1.67× at d = 3.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import numpy.typing as npt

from pymc_dp.curator.regression.exact_l1 import MAX_EXACT_COMPONENTS, exact_l1_sensitivity
from pymc_dp.curator.regression.exact_l2 import exact_l2_sensitivity
from pymc_dp.curator.regression.statistics import n_released, statistic_powers

__all__ = [
    "EXACT",
    "SENSITIVITY_BOUNDS",
    "SUM_OF_RANGES",
    "check_box",
    "default_sensitivity_bound",
    "monomial_ranges",
    "power_range",
    "regression_sensitivity",
    "regression_sensitivity_l2",
    "root_sum_of_squared_ranges",
    "sum_of_ranges",
]


EXACT = "exact"
"""The exact L1 sensitivity, by enumeration of the faces of the box."""
SUM_OF_RANGES = "sum-of-ranges"
"""The sum over components of each component's range (an upper bound)."""
SENSITIVITY_BOUNDS = (EXACT, SUM_OF_RANGES)


def default_sensitivity_bound(d: int) -> str:
    """The bound a regression release of ``d`` covariates uses by default.

    ``"exact"`` while the statistic has at most
    :data:`~pymc_dp.curator.regression.exact_l1.MAX_EXACT_COMPONENTS` components (d <= 3), else
    ``"sum-of-ranges"`` (the enumeration grows as ``2^C · 3^(d+1)``).

    Examples
    --------
    >>> default_sensitivity_bound(3), default_sensitivity_bound(4)
    ('exact', 'sum-of-ranges')
    """
    return EXACT if n_released(d) <= MAX_EXACT_COMPONENTS else SUM_OF_RANGES


def power_range(lower: float, upper: float, k: int) -> tuple[float, float]:
    """Range of ``v**k`` for ``v`` in ``[lower, upper]`` (``k >= 0``).

    Examples
    --------
    >>> power_range(-1.0, 2.0, 2), power_range(-1.0, 2.0, 3), power_range(-3.0, -1.0, 2)
    ((0.0, 4.0), (-1.0, 8.0), (1.0, 9.0))
    """
    if k == 0:
        return 1.0, 1.0
    ends = (float(lower) ** k, float(upper) ** k)
    lo, hi = min(ends), max(ends)
    if k % 2 == 0 and lower <= 0.0 <= upper:
        lo = 0.0
    return lo, hi


def monomial_ranges(
    powers: npt.ArrayLike, lower: npt.ArrayLike, upper: npt.ArrayLike
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Exact range of each monomial ``Π_j v_j^powers[r, j]`` over the box ``lower <= v <= upper``.

    Parameters
    ----------
    powers
        Non-negative integer exponents, shape ``(m, q)``.
    lower, upper
        Box of the ``q`` variables, shape ``(q,)``.

    Returns
    -------
    low, high : numpy.ndarray
        Minimum and maximum of each monomial, shape ``(m,)``.

    Examples
    --------
    >>> low, high = monomial_ranges([[1, 1], [2, 0]], [-1.0, 0.5], [2.0, 3.0])
    >>> low.tolist(), high.tolist()
    ([-3.0, 0.0], [6.0, 4.0])
    """
    powers = np.asarray(powers, dtype=np.int64)
    lower = np.asarray(lower, dtype=np.float64)
    upper = np.asarray(upper, dtype=np.float64)
    low = np.empty(powers.shape[0])
    high = np.empty(powers.shape[0])
    for r, row in enumerate(powers):
        factors = [power_range(lower[j], upper[j], int(k)) for j, k in enumerate(row) if k > 0]
        corners = [float(np.prod(c)) for c in itertools.product(*factors)] if factors else [1.0]
        low[r], high[r] = min(corners), max(corners)
    return low, high


def sum_of_ranges(powers: npt.ArrayLike, lower: npt.ArrayLike, upper: npt.ArrayLike) -> float:
    """L1 sensitivity bound ``Σ_r (high_r − low_r)`` of the sums of the given monomials.

    Examples
    --------
    Regression with one covariate in [0, 1] and y in [0, 1]: five components of range 1.

    >>> from pymc_dp.curator.regression.statistics import statistic_powers
    >>> sum_of_ranges(statistic_powers(1), [0.0, 0.0], [1.0, 1.0])
    5.0
    """
    low, high = monomial_ranges(powers, lower, upper)
    return float(np.sum(high - low))


def root_sum_of_squared_ranges(
    powers: npt.ArrayLike, lower: npt.ArrayLike, upper: npt.ArrayLike
) -> float:
    """L2 sensitivity bound ``√(Σ_r (high_r − low_r)²)`` of the sums of the given monomials.

    Each component moves by at most its range, so the L2 norm of the move is at most the L2
    norm of the ranges; attained, as the L1 bound, when all intervals are non-negative.

    Examples
    --------
    >>> from pymc_dp.curator.regression.statistics import statistic_powers
    >>> round(root_sum_of_squared_ranges(statistic_powers(1), [0.0, 0.0], [1.0, 1.0]), 4)
    2.2361
    """
    low, high = monomial_ranges(powers, lower, upper)
    return float(np.sqrt(np.sum((high - low) ** 2)))


def check_box(bounds: object, name: str, *, size: int | None = None) -> npt.NDArray[np.float64]:
    """Return ``bounds`` as a ``(q, 2)`` float array of finite ``lower < upper`` pairs.

    A single pair ``(lower, upper)`` is accepted as ``q = 1``.

    Raises
    ------
    ValueError
        If the shape is wrong, a bound is not finite, or a lower bound is not below its upper.

    Examples
    --------
    >>> check_box([(0, 1), (-2, 2)], "x_bounds").tolist()
    [[0.0, 1.0], [-2.0, 2.0]]
    """
    try:
        arr = np.array(bounds, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be numeric (lower, upper) pairs (got {bounds!r})") from None
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"{name} must have shape (q, 2) of (lower, upper) pairs (got {arr.shape})")
    if size is not None and arr.shape[0] != size:
        raise ValueError(f"{name} must give {size} (lower, upper) pairs (got {arr.shape[0]})")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (got {arr.tolist()})")
    if np.any(arr[:, 0] >= arr[:, 1]):
        raise ValueError(f"{name} must satisfy lower < upper in every pair (got {arr.tolist()})")
    return arr


def regression_sensitivity(
    x_bounds: npt.ArrayLike, y_bounds: npt.ArrayLike, *, bound: str | None = None
) -> float:
    """L1 sensitivity Δ of the released regression statistic over a box of records.

    Parameters
    ----------
    x_bounds
        ``(d, 2)`` lower and upper bounds of the covariates.
    y_bounds
        ``(lower, upper)`` of the response.
    bound
        ``"exact"`` or ``"sum-of-ranges"`` (see :mod:`pymc_dp.curator.regression.sensitivity`);
        ``None`` (the default) is :func:`default_sensitivity_bound` of d.

    Returns
    -------
    float
        Δ, never below ``max ||t(v) − t(v')||₁`` over the box.

    Raises
    ------
    ValueError
        If ``bound`` is not one of :data:`SENSITIVITY_BOUNDS`, or is ``"exact"`` for d > 3.

    Examples
    --------
    >>> regression_sensitivity([(0, 1)], (-1, 1), bound="sum-of-ranges")  # 1 + 1 + 2 + 2 + 1
    7.0
    >>> round(regression_sensitivity([(-2, 2)], (-3, 3)), 4)  # the sum of ranges is 35
    24.3333
    """
    d, bound, powers, lower, upper = _record_box(x_bounds, y_bounds, bound)
    ranges = sum_of_ranges(powers, lower, upper)
    if bound == SUM_OF_RANGES:
        return ranges
    if n_released(d) > MAX_EXACT_COMPONENTS:
        raise ValueError(
            f"bound='exact' is enumerated up to d = 3 covariates (got d = {d}); use "
            "bound='sum-of-ranges'"
        )
    # The margin may lift an attained sum of ranges (non-negative box) just above it.
    return min(exact_l1_sensitivity(powers, lower, upper), ranges)


def regression_sensitivity_l2(
    x_bounds: npt.ArrayLike, y_bounds: npt.ArrayLike, *, bound: str | None = None
) -> float:
    """L2 sensitivity Δ₂ of the released regression statistic over a box of records.

    The Gaussian mechanism's counterpart of :func:`regression_sensitivity`. ``"exact"`` (the
    default up to d = 3) is the branch-and-bound maximum of ||t(v) − t(v')||₂ over pairs of
    records in the box (:mod:`pymc_dp.curator.regression.exact_l2`, at most 0.1% above the true
    value), capped by ``"sum-of-ranges"``, the L2 norm of the component ranges √(Σ_r range_r²)
    (exact when every interval is non-negative, 1.29–1.35× the true value for boxes symmetric about
    0).

    Examples
    --------
    >>> regression_sensitivity_l2([(0, 1)], (-1, 1), bound="sum-of-ranges")  # 1, 1, 2, 2, 1
    3.3166247903554
    >>> round(regression_sensitivity_l2([(-1, 1)], (-1, 1)), 2)  # 2√2 (the ranges give 3.74)
    2.83
    """
    d, bound, powers, lower, upper = _record_box(x_bounds, y_bounds, bound)
    ranges = root_sum_of_squared_ranges(powers, lower, upper)
    if bound == SUM_OF_RANGES:
        return ranges
    if n_released(d) > MAX_EXACT_COMPONENTS:
        raise ValueError(
            f"bound='exact' is searched up to d = 3 covariates (got d = {d}); use "
            "bound='sum-of-ranges'"
        )
    return min(exact_l2_sensitivity(powers, lower, upper), ranges)


def _record_box(
    x_bounds: npt.ArrayLike, y_bounds: npt.ArrayLike, bound: str | None
) -> tuple[int, str, Any, npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """d, the checked bound name, the statistic's powers and the box's lower and upper corners."""
    xb = np.asarray(x_bounds, dtype=np.float64).reshape(-1, 2)
    yb = np.asarray(y_bounds, dtype=np.float64).reshape(2)
    d = xb.shape[0]
    if bound is None:
        bound = default_sensitivity_bound(d)
    if bound not in SENSITIVITY_BOUNDS:
        raise ValueError(f"bound must be one of {SENSITIVITY_BOUNDS} (got {bound!r})")
    return d, bound, statistic_powers(d), np.append(xb[:, 0], yb[0]), np.append(xb[:, 1], yb[1])
