"""The count vectors within the noise's reach of a released y: enumerated, never boxed.

A release of K counts y = s + noise, with Σ_j s_j = n public, has likelihood
Σ_s Multinomial(s; n, θ) · Π_j k(y_j − s_j). The terms whose noise factor is below e^-40 of its
largest over the simplex add up to at most that fraction of it whatever θ, so the exact sum
needs only the *kept* set

    {s : s ≥ 0 integer, Σ_j s_j = n, Σ_j c(y_j − s_j) ≤ c_min + NOISE_TAIL},

c(d) = log k(0) − log k(d) the noise's cost (convex: abs(d)/b, or d²/(2b²)) and c_min its least
value over the simplex. That set is a ball in the noise's norm, about r² (K = 3) or r³/2 (K = 4)
vectors for the Laplace noise at r = 40 b (far from the simplex's faces): a small part of the box
of K − 1 coordinates within r of y, (2r + 1)^(K − 1), which holds 5 (K = 3) and 14-19 (K = 4)
times as many.

:func:`kept_counts` enumerates it one category at a time: a prefix (s_1, …, s_j) is extended
only while its cost plus a lower bound on the cost of the categories still to fill can stay
within the limit. The bound is Jensen's: the m = K − j remaining counts sum to n − Σ_{i ≤ j} s_i,
so their offsets d_i = y_i − s_i sum to a fixed D, and by convexity Σ c(d_i) ≥ m · c(D / m). With
one category left it is exact, so what the enumeration returns is the kept set, not a box.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pymc_dp.kernels.exact_counts import NOISE_TAIL, NoiseLaw

__all__ = ["ENUMERATION_FACTOR", "kept_counts", "nearest_counts"]

ENUMERATION_FACTOR = 4
""":func:`kept_counts` gives up once one category's candidates exceed this many times the budget,
which bounds the enumeration's memory (about 100 MB at a budget of 400 000). The last category
has the most, about twice the kept vectors for K = 3 to 5, so no set within the budget is lost."""


def nearest_counts(released: npt.ArrayLike, n: int) -> npt.NDArray[np.float64]:
    """An integer vector of the simplex {s ≥ 0, Σ s = n} near y: its projection, rounded.

    The Euclidean projection of y onto the simplex, rounded down, with the remaining units given
    to the largest remainders (so the sum is n).
    """
    y = np.asarray(released, dtype=np.float64)
    ordered = np.sort(y)[::-1]
    excess = np.cumsum(ordered) - n
    index = np.arange(1, y.shape[0] + 1)
    positive = ordered - excess / index > 0
    shift = excess[positive][-1] / index[positive][-1] if positive.any() else excess[-1] / index[-1]
    projected = np.clip(y - shift, 0.0, n)
    s = np.floor(projected)
    short = int(n - s.sum())
    if short > 0:
        s[np.argsort(s - projected)[:short]] += 1.0
    elif short < 0:  # rounding cannot overshoot, but clipping a tiny n can
        s[np.argsort(projected - s)[:-short]] -= 1.0
    return s


def kept_counts(
    released: npt.ArrayLike, n: int, noise: NoiseLaw, budget: float
) -> npt.NDArray[np.float64] | None:
    """The kept count vectors of one release (the module docstring's set), shape ``(T, K)``.

    Parameters
    ----------
    released
        The released counts y, shape ``(K,)``.
    n
        The records: every s sums to it.
    noise
        The release's noise law (its cost must be convex, as it is for every
        :data:`~pymc_dp.kernels.exact_counts.NOISE_KINDS`).
    budget
        Most vectors wanted.

    Returns
    -------
    numpy.ndarray or None
        The kept vectors, or None if there are more than ``budget`` (or the enumeration would
        hold more than :data:`ENUMERATION_FACTOR` times ``budget`` candidates at once).

    Examples
    --------
    >>> kept_counts([3.2, 0.4, 6.1], 10, NoiseLaw("laplace", 0.03), 100).tolist()
    [[3.0, 0.0, 7.0], [3.0, 1.0, 6.0], [4.0, 0.0, 6.0]]
    """
    y = np.asarray(released, dtype=np.float64)
    k = y.shape[0]

    def cost(d: npt.ArrayLike) -> npt.NDArray[np.float64]:
        return noise.logpdf(0.0) - noise.logpdf(d)

    start = nearest_counts(y, n)
    # ≥ c_min + NOISE_TAIL: a superset, with room for rounding (the last filter is exact).
    limit = float(np.sum(cost(y - start))) + NOISE_TAIL + 1e-9
    later = np.concatenate([np.cumsum(y[::-1])[::-1][1:], [0.0]])  # Σ_{i > j} y_i
    columns: list[npt.NDArray[np.float64]] = []
    spent = np.zeros(1)
    left = np.full(1, float(n))
    for j in range(k - 1):
        reach = noise.reach(limit - spent)
        low = np.maximum(np.ceil(y[j] - reach), 0.0)
        high = np.minimum(np.floor(y[j] + reach), left)
        counts = np.maximum(high - low + 1.0, 0.0).astype(np.int64)
        total = int(counts.sum())
        if total > ENUMERATION_FACTOR * budget:
            return None
        parent = np.repeat(np.arange(counts.shape[0]), counts)
        offset = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        value = low[parent] + offset
        spent = spent[parent] + cost(y[j] - value)
        left = left[parent] - value
        rest = k - 1 - j
        keep = spent + rest * cost((later[j] - left) / rest) <= limit
        columns = [c[parent][keep] for c in columns] + [value[keep]]
        spent, left = spent[keep], left[keep]
        if len(spent) > ENUMERATION_FACTOR * budget:
            return None
    s = np.column_stack([*columns, left])
    noise_terms = np.sum(noise.logpdf(y[None, :] - s), axis=1)
    s = s[noise_terms >= np.max(noise_terms) - NOISE_TAIL]
    return s if len(s) <= budget else None
