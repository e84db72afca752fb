"""L1 sensitivity of monomial sums over a box of records (replace-one neighbours).

Every released regression statistic, and every released moment of the covariates, is a sum over
records of a monomial ``Π_j v_j^{k_j}`` in the record's variables ``v = (x_1, ..., x_d, y)``, each
confined to an interval. Replacing one record changes component ``r`` by at most the width of
that monomial's range over the box, so

    Δ = Σ_r (max_box t_r − min_box t_r)

bounds ``||t(v) − t(v')||_1`` for all ``v, v'`` in the box (Bernstein & Sheldon 2019, §3.4; method
note §4). Each range is computed exactly: a power ``v^k`` of one interval has its extremes at the
ends, or at 0 for an even power of an interval that straddles 0; a product of powers of
*different* variables is multilinear in those (independent) factors, so its extremes are among the
products of the factors' end points.

The bound is attained whenever one record can be at the top of every component's range and another
at the bottom, e.g. when all intervals are non-negative. When an interval straddles 0 the
components' extremes sit at different records and Δ is an upper bound, not the exact sensitivity
(using it is still ε-DP, with a little more noise than necessary).
"""

from __future__ import annotations

import itertools

import numpy as np
import numpy.typing as npt

from pymc_dp.regression.statistics import statistic_powers

__all__ = [
    "check_box",
    "monomial_ranges",
    "power_range",
    "regression_sensitivity",
    "regression_sensitivity_l2",
    "root_sum_of_squared_ranges",
    "sum_of_ranges",
]


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

    >>> from pymc_dp.regression.statistics import statistic_powers
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
    >>> from pymc_dp.regression.statistics import statistic_powers
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


def regression_sensitivity(x_bounds: npt.ArrayLike, y_bounds: npt.ArrayLike) -> float:
    """L1 sensitivity Δ of the released regression statistic over a box of records.

    Parameters
    ----------
    x_bounds
        ``(d, 2)`` lower and upper bounds of the covariates.
    y_bounds
        ``(lower, upper)`` of the response.

    Returns
    -------
    float
        ``Σ_r`` of the exact range of each released component (see
        :mod:`pymc_dp.regression.sensitivity`).

    Examples
    --------
    >>> regression_sensitivity([(0, 1)], (-1, 1))  # x:1, x²:1, y:2, xy:2, y²:1
    7.0
    """
    xb = np.asarray(x_bounds, dtype=np.float64).reshape(-1, 2)
    yb = np.asarray(y_bounds, dtype=np.float64).reshape(2)
    lower = np.append(xb[:, 0], yb[0])
    upper = np.append(xb[:, 1], yb[1])
    return sum_of_ranges(statistic_powers(xb.shape[0]), lower, upper)


def regression_sensitivity_l2(x_bounds: npt.ArrayLike, y_bounds: npt.ArrayLike) -> float:
    """L2 sensitivity Δ₂ of the released regression statistic over a box of records.

    The Gaussian mechanism's counterpart of :func:`regression_sensitivity`.

    Examples
    --------
    >>> regression_sensitivity_l2([(0, 1)], (-1, 1))  # ranges 1, 1, 2, 2, 1
    3.3166247903554
    """
    xb = np.asarray(x_bounds, dtype=np.float64).reshape(-1, 2)
    yb = np.asarray(y_bounds, dtype=np.float64).reshape(2)
    lower = np.append(xb[:, 0], yb[0])
    upper = np.append(xb[:, 1], yb[1])
    return root_sum_of_squared_ranges(statistic_powers(xb.shape[0]), lower, upper)
