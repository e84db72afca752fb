"""Differentially private quantiles and data bounds (the private quantile of Smith 2011).

Mechanisms that add noise to a statistic of continuous data need a public range to clamp the data
to, because the sensitivity of a sum or a mean is only finite on a bounded domain. A range chosen
too wide wastes privacy budget on noise; one chosen from the raw data leaks the data. This module
spends a small, explicit share of the budget on choosing the range privately.

:func:`private_quantile` is the exponential mechanism of Smith (2011) with the rank utility
``u(y) = -|#{x_j < y} - q n|``. The utility is constant between consecutive sorted data points, so
the output density is piecewise constant and sampling is exact: choose a gap between order
statistics with probability proportional to its width times ``exp(ε u / 2)``, then draw uniformly
inside it. The weights are formed in log space and sampled by the Gumbel-max trick, so a large ``n``
or a large ``ε`` cannot overflow them, and tied data points (gaps of width zero) get probability
exactly zero.

:func:`private_bounds` releases a pair of quantiles, by default the 2.5 % and 97.5 % points, to be
used as the clamping range of a later release.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from pymc_dp._validation import check_finite_array, check_positive, check_rng

__all__ = [
    "NoisyBoundsWarning",
    "bounds_rank_error",
    "check_quantile_pair",
    "linear_candidates",
    "log_candidates",
    "private_bounds",
    "private_quantile",
    "quantile_from_counts",
    "quantile_scores",
]

_LOG_POINTS = 1024
_LOG_DECADES = 6.0
_MAX_DENOMINATOR = 1024
"""The vetted selection scores |den · #{x < c} - num · n| with num/den the quantile as a
fraction of denominator at most 1024 (0.025 = 1/40 exactly): integers below 2**64 for n up
to 2**53, each moving by at most den when one record is replaced."""


class NoisyBoundsWarning(UserWarning):
    """The private-bounds step is too noisy, from public values alone, to be useful."""


def log_candidates(lower: float, upper: float) -> npt.NDArray[np.float64]:
    """Data-independent, log-spaced candidate outputs over the public range ``[lower, upper]``.

    For a positive range, 1025 points geometrically spaced from ``lower`` to ``upper``; for a
    range that contains 0, 0 and ±1024 magnitudes geometrically spaced over six decades below
    ``max(|lower|, |upper|)``, clipped to the range. Every decade gets the same number of
    candidates, so a range much wider than the data (0–1000 for values near 100) does not pull
    the quantile towards its empty part, as the gap widths of Smith's mechanism do.

    Examples
    --------
    >>> c = log_candidates(1.0, 1000.0)
    >>> float(c[0]), float(c[-1]), len(c)
    (1.0, 1000.0, 1025)
    >>> c = log_candidates(0.0, 1000.0)
    >>> float(c[0]), float(c[1]), float(c[-1])
    (0.0, 0.001, 1000.0)
    """
    lower, upper = _check_range(lower, upper)
    if lower > 0:
        return np.geomspace(lower, upper, _LOG_POINTS + 1)
    if upper < 0:
        return -np.geomspace(-upper, -lower, _LOG_POINTS + 1)[::-1]
    top = max(-lower, upper)
    mags = np.geomspace(top * 10.0**-_LOG_DECADES, top, _LOG_POINTS)
    grid = np.concatenate([-mags[::-1], [0.0], mags])
    return np.unique(np.clip(grid, lower, upper))


def linear_candidates(lower: float, upper: float) -> npt.NDArray[np.float64]:
    """Data-independent, evenly spaced candidate outputs: 1025 points from ``lower`` to ``upper``.

    The public grid of a vetted private window over a range that does not span decades
    (:func:`log_candidates` is for those): its resolution is (upper − lower)/1024.

    Examples
    --------
    >>> c = linear_candidates(-2.0, 2.0)
    >>> float(c[0]), float(c[1]), float(c[-1]), len(c)
    (-2.0, -1.99609375, 2.0, 1025)
    """
    lower, upper = _check_range(lower, upper)
    return np.linspace(lower, upper, _LOG_POINTS + 1)


def bounds_rank_error(n: int, epsilon: float, size: int) -> float:
    """Rank error that one private quantile exceeds with probability about 5 %.

    The exponential mechanism with utility -|rank - q n| over ``size`` candidates at budget ε
    picks a candidate whose rank error exceeds 2 ln(20 · size) / ε with probability at most
    1/20 (Dwork & Roth 2014, Theorem 3.11). Only public values enter: n, ε and the number of
    candidates (n + 1 gaps for Smith's mechanism).

    Examples
    --------
    >>> round(bounds_rank_error(442, 0.05, 443), 1)
    363.6
    """
    return 2.0 * float(np.log(20.0 * size)) / float(epsilon)


def private_quantile(
    x: npt.ArrayLike,
    quantile: float,
    *,
    epsilon: float,
    lower: float,
    upper: float,
    rng: int | np.random.Generator | None,
    candidates: str | npt.ArrayLike = "gaps",
) -> float:
    """Release the ``quantile`` of ``x`` with ε-differential privacy.

    Implements the private quantile estimator of Smith (2011): the exponential mechanism over the
    gaps between the sorted data, clamped to the public range ``[lower, upper]``.

    Parameters
    ----------
    x
        One-dimensional, non-empty, finite data. Values outside ``[lower, upper]`` are clamped.
    quantile
        The quantile to release, a number in ``[0, 1]``.
    epsilon
        Privacy parameter ε > 0.
    lower, upper
        Public range of the data, finite with ``lower < upper``. It must not be computed from
        ``x``, or the guarantee below is void.
    rng
        Source of randomness: an int seed, a :class:`numpy.random.Generator` or ``None`` (fresh
        operating-system entropy). It is left untouched when an argument is rejected.
    candidates
        ``"gaps"`` (Smith's mechanism, uniform inside the chosen gap between data points),
        ``"log"`` (the exponential mechanism over :func:`log_candidates`, for a public range
        that spans decades), or an array of public candidate outputs chosen without ``x``.

    Returns
    -------
    float
        A value in ``[lower, upper]`` near the ``quantile`` of the clamped data.

    Raises
    ------
    TypeError
        If an argument has the wrong type.
    ValueError
        If ``x`` is empty, not one-dimensional or not finite, ``quantile`` is outside ``[0, 1]``,
        ``epsilon`` is not a finite number > 0, or the range is not finite with ``lower < upper``.

    Notes
    -----
    With ``z_0 = lower``, ``z_1 <= ... <= z_n`` the sorted clamped data and ``z_{n+1} = upper``,
    gap ``i`` (the interval ``[z_i, z_{i+1}]``) is chosen with probability proportional to
    ``(z_{i+1} - z_i) exp(-ε |i - q n| / 2)`` and the output is uniform inside it.

    Privacy: the output density at ``y`` is proportional to ``exp(ε u(y) / 2)`` with
    ``u(y) = -|#{x_j < y} - q n|``. Replacing one record changes the count by at most 1, so
    ``u`` has sensitivity 1, and both the numerator and the normalising constant change by at most
    a factor ``exp(ε / 2)``: each call is ε-differentially private under replace-one neighbours
    (Dwork & Roth 2014, Theorem 3.10). Adding or removing one record changes ``#{x_j < y} - q n``
    by at most ``max(q, 1 - q) <= 1``, so the same bound holds for add/remove neighbours.

    As with :func:`~pymc_dp.mechanisms.laplace.laplace_mechanism`, the sampling is done in floating
    point; the guarantee is that of the ideal real-valued mechanism.

    References
    ----------
    Smith (2011), "Privacy-preserving statistical estimation with optimal convergence rates",
    STOC: the private quantile estimator. McSherry & Talwar (2007), "Mechanism design via
    differential privacy". Dwork & Roth (2014), "The algorithmic foundations of differential
    privacy", Section 3.4.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.arange(1.0, 100.0)
    >>> m = private_quantile(x, 0.5, epsilon=50.0, lower=0.0, upper=100.0, rng=0)
    >>> 48.0 <= m <= 52.0
    True
    """
    arr = check_finite_array(x, "x", ndim=1).astype(np.float64)
    quantile = _check_quantile(quantile, "quantile")
    epsilon = check_positive(epsilon, "epsilon")
    lower, upper = _check_range(lower, upper)
    grid = _check_candidates(candidates, lower, upper)
    rng = check_rng(rng)
    return _sample(
        arr, quantile=quantile, epsilon=epsilon, lower=lower, upper=upper, rng=rng, grid=grid
    )


def private_bounds(
    x: npt.ArrayLike,
    *,
    epsilon: float,
    quantiles: Sequence[float] = (0.025, 0.975),
    lower: float,
    upper: float,
    rng: int | np.random.Generator | None,
    candidates: str | npt.ArrayLike = "gaps",
) -> tuple[float, float]:
    """Release a private range ``(a, b)`` for ``x`` from two private quantiles.

    Each of the two quantiles is released by :func:`private_quantile` with budget ``epsilon / 2``;
    by sequential composition the pair is ε-differentially private under replace-one neighbours.

    Parameters
    ----------
    x
        One-dimensional, non-empty, finite data. Values outside ``[lower, upper]`` are clamped.
    epsilon
        Total privacy parameter ε > 0, split equally between the two quantiles.
    quantiles
        The pair ``(q_lo, q_hi)`` with ``0 <= q_lo < q_hi <= 1``.
    lower, upper
        Public range of the data, finite with ``lower < upper``; not computed from ``x``.
    rng
        Source of randomness: an int seed, a :class:`numpy.random.Generator` or ``None``. It is
        left untouched when an argument is rejected.
    candidates
        As in :func:`private_quantile`.

    Returns
    -------
    tuple of float
        ``(a, b)`` with ``lower <= a <= b <= upper``. The two noisy quantiles can come out in
        either order and are sorted (post-processing, no privacy cost). They can coincide: ``a ==
        b`` is returned as is, not widened, and a caller that needs a proper interval must check
        for it and raise.

    Raises
    ------
    TypeError
        If an argument has the wrong type.
    ValueError
        For the reasons listed in :func:`private_quantile`, or if ``quantiles`` is not a pair with
        ``0 <= q_lo < q_hi <= 1``.

    References
    ----------
    Smith (2011), "Privacy-preserving statistical estimation with optimal convergence rates",
    STOC. Dwork & Roth (2014), "The algorithmic foundations of differential privacy",
    Theorem 3.16 (sequential composition).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(1).normal(size=1000)
    >>> a, b = private_bounds(x, epsilon=1.0, lower=-10.0, upper=10.0, rng=2)
    >>> -3.0 < a < -1.0 < 1.0 < b < 3.0
    True
    """
    arr = check_finite_array(x, "x", ndim=1).astype(np.float64)
    epsilon = check_positive(epsilon, "epsilon")
    q_lo, q_hi = check_quantile_pair(quantiles)
    lower, upper = _check_range(lower, upper)
    grid = _check_candidates(candidates, lower, upper)
    rng = check_rng(rng)
    kwargs = {"epsilon": epsilon / 2.0, "lower": lower, "upper": upper, "rng": rng, "grid": grid}
    first = _sample(arr, quantile=q_lo, **kwargs)
    second = _sample(arr, quantile=q_hi, **kwargs)
    return (min(first, second), max(first, second))


def _sample(
    x: npt.NDArray[np.float64],
    *,
    quantile: float,
    epsilon: float,
    lower: float,
    upper: float,
    rng: np.random.Generator,
    grid: npt.NDArray[np.float64] | None = None,
) -> float:
    """Draw one output of the mechanism from validated arguments."""
    if grid is not None:
        # Exponential mechanism over public candidates: utility -|#{x < c} - q n|.
        data = np.sort(np.clip(x, lower, upper))
        below = np.searchsorted(data, grid, side="left")
        choice = quantile_from_counts(below, data.size, quantile, epsilon=epsilon, rng=rng)
        return float(grid[choice])
    edges, log_probs = _gap_log_weights(
        x, quantile=quantile, epsilon=epsilon, lower=lower, upper=upper
    )
    # Gumbel-max: argmax(log p + Gumbel) is a draw from p, and -inf (empty gaps) never wins.
    gap = int(np.argmax(log_probs + rng.gumbel(size=log_probs.shape)))
    return float(rng.uniform(edges[gap], edges[gap + 1]))


def quantile_from_counts(
    below: npt.ArrayLike,
    n: int,
    quantile: float,
    *,
    epsilon: float,
    rng: np.random.Generator | None,
) -> int:
    """Choose the candidate nearest the ``quantile`` in rank, ε-DP, from exact counts.

    The utility of candidate c is −|#{x < c} − q·n|; replacing one record moves every count
    by at most 1. The counts are all the mechanism sees, so they can come from any engine
    (:mod:`pymc_dp.curator.private_window` sums them exactly, batch by batch).

    Parameters
    ----------
    below
        ``below[j]`` = number of (clamped) records strictly below candidate j, integers.
    n
        Number of records (public).
    quantile
        The quantile q in [0, 1].
    epsilon
        Privacy parameter ε > 0 of this one choice.
    rng
        ``None`` for a real release: OpenDP's report-noisy-min on the integer scores
        |den·#{x < c} − num·n| (q = num/den, den ≤ 1024, sensitivity den;
        :func:`~pymc_dp.mechanisms.vetted.noisy_min_index`). A generator for a seeded study:
        the exponential mechanism by the Gumbel-max trick in floating point, as
        :func:`private_quantile` with candidates.

    Returns
    -------
    int
        The index of the chosen candidate.

    Examples
    --------
    >>> below = np.array([0, 10, 50, 90, 100])  # 100 records, candidates at 5 points
    >>> quantile_from_counts(below, 100, 0.5, epsilon=20.0, rng=None)
    2
    >>> quantile_from_counts(below, 100, 0.5, epsilon=20.0, rng=np.random.default_rng(0))
    2
    """
    counts = np.asarray(below, dtype=np.int64)
    quantile = _check_quantile(quantile, "quantile")
    epsilon = check_positive(epsilon, "epsilon")
    if rng is not None:
        utility = -np.abs(counts - quantile * n)
        return int(np.argmax((epsilon / 2.0) * utility + rng.gumbel(size=counts.shape)))
    from pymc_dp.mechanisms.vetted import noisy_min_index

    scores, sensitivity = quantile_scores(counts, n, quantile)
    return noisy_min_index(scores, sensitivity=sensitivity, epsilon=epsilon)


def quantile_scores(below: npt.ArrayLike, n: int, quantile: float) -> tuple[list[int], int]:
    """Integer scores |den·#{x < c} − num·n| (lower is better) and their sensitivity den.

    q = num/den is the quantile as a fraction with den ≤ 1024 (exact for 0.025 = 1/40 and
    0.975 = 39/40); replacing one record moves each count by at most 1 and so each score by
    at most den. For n ≤ 2**53 every score is below 2**64.

    Examples
    --------
    >>> quantile_scores([0, 1, 3, 4], 4, 0.5)
    ([4, 2, 2, 4], 2)
    """
    ratio = Fraction(float(quantile)).limit_denominator(_MAX_DENOMINATOR)
    num, den = ratio.numerator, ratio.denominator
    return [abs(den * int(k) - num * int(n)) for k in np.asarray(below).ravel()], den


def _gap_log_weights(
    x: npt.ArrayLike,
    *,
    quantile: float,
    epsilon: float,
    lower: float,
    upper: float,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Return the gap edges ``z_0..z_{n+1}`` and the normalised log-probabilities of the gaps.

    Gap ``i`` is ``[edges[i], edges[i + 1]]``; the output density inside it is
    ``exp(log_probs[i]) / (edges[i + 1] - edges[i])``. Arguments are assumed valid.
    """
    data = np.sort(np.clip(np.asarray(x, dtype=np.float64), lower, upper))
    n = data.size
    edges = np.concatenate(([lower], data, [upper]))
    widths = np.diff(edges)
    utility = -np.abs(np.arange(n + 1) - quantile * n)
    # lower < upper, so the widths sum to upper - lower > 0 and at least one gap is open.
    is_open = widths > 0
    # Shift by the best open gap's utility so that one score is exactly log(width); the others
    # may underflow to -inf for huge epsilon, which is their probability in double precision.
    shifted = utility[is_open] - utility[is_open].max()
    with np.errstate(over="ignore"):
        scores = np.log(widths[is_open]) + (epsilon / 2.0) * shifted
    log_weights = np.full(n + 1, -np.inf)
    log_weights[is_open] = scores
    top = scores.max()
    log_norm = top + np.log(np.sum(np.exp(scores - top)))
    return edges, log_weights - log_norm


def _check_quantile(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number (got {type(value).__name__}: {value!r})")
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1] (got {value!r})")
    return float(value)


def check_quantile_pair(quantiles: object) -> tuple[float, float]:
    """Two quantile levels q_lo < q_hi in (0, 1), as floats; TypeError/ValueError otherwise."""
    if isinstance(quantiles, str | bytes) or not isinstance(quantiles, Sequence | np.ndarray):
        raise TypeError(
            f"quantiles must be a pair (q_lo, q_hi) (got {type(quantiles).__name__}: {quantiles!r})"
        )
    if len(quantiles) != 2:
        raise ValueError(f"quantiles must be a pair (q_lo, q_hi) (got {len(quantiles)} values)")
    q_lo = _check_quantile(quantiles[0], "quantiles[0]")
    q_hi = _check_quantile(quantiles[1], "quantiles[1]")
    if not q_lo < q_hi:
        raise ValueError(
            f"quantiles must satisfy q_lo < q_hi (got q_lo={q_lo!r}, q_hi={q_hi!r}); "
            "pass them in increasing order"
        )
    return q_lo, q_hi


def _check_range(lower: object, upper: object) -> tuple[float, float]:
    for name, value in (("lower", lower), ("upper", upper)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{name} must be a real number (got {type(value).__name__}: {value!r})")
        if not np.isfinite(value):
            raise ValueError(f"{name} must be finite (got {value!r})")
    if not lower < upper:
        raise ValueError(
            f"lower must be < upper (got lower={lower!r}, upper={upper!r}); "
            "pass the public data range in increasing order"
        )
    if not np.isfinite(float(upper) - float(lower)):
        raise ValueError(
            f"upper - lower must be finite (got lower={lower!r}, upper={upper!r}); "
            "use a narrower public range"
        )
    return float(lower), float(upper)


def _check_candidates(
    candidates: object, lower: float, upper: float
) -> npt.NDArray[np.float64] | None:
    """``None`` for Smith's gaps, else the public candidate grid (sorted, in the range)."""
    if isinstance(candidates, str):
        if candidates == "gaps":
            return None
        if candidates == "log":
            return log_candidates(lower, upper)
        raise ValueError(f"candidates must be 'gaps', 'log' or an array (got {candidates!r})")
    grid = check_finite_array(candidates, "candidates", ndim=1).astype(np.float64)
    if np.any((grid < lower) | (grid > upper)):
        raise ValueError("candidates must lie in the public range [lower, upper]")
    return np.unique(grid)
