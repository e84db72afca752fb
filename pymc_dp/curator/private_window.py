"""The private window of a release: two private quantiles of the records, on any engine.

``pymc_dp.release(..., bounds="private")`` spends a share of its budget on a window (a, b)
near two quantiles of the records (Smith 2011). Two ways to choose them:

* **Public candidates** (``"linear"``, ``"log"``): the exponential mechanism's utility
  −|#{x < c} − q·n| at each public candidate c needs only the number of records below each
  candidate. Those counts are a histogram of the records against the candidates, summed
  exactly batch by batch like any statistic (:class:`CandidateCounts`), so they come from
  arrays, data frames, lazy scans and Dask clusters alike, and only integers reach the caller.
  A real release chooses with OpenDP's report-noisy-min on integer scores
  (:func:`~pymc_dp.mechanisms.private_quantile.quantile_from_counts`): no floating-point
  sampling anywhere.
* **Smith's gaps** (``"gaps"``): uniform draws inside the gaps between sorted records, in
  floating point. Studies only (a seed), and in-memory records only.

The default (``"auto"``) uses log-spaced candidates where the public range spans decades,
else Smith's gaps in a seeded study and evenly spaced candidates in a real release.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any

import numpy as np
import numpy.typing as npt

from pymc_dp.curator.exact_sums import BATCH, BatchTotals, FamilyPlan, combine_totals
from pymc_dp.curator.frames import exact_totals
from pymc_dp.mechanisms.private_quantile import (
    NoisyBoundsWarning,
    bounds_rank_error,
    linear_candidates,
    log_candidates,
    private_bounds,
    quantile_from_counts,
)

__all__ = [
    "BOUNDS_CANDIDATES",
    "BOUNDS_MECHANISMS",
    "CandidateCounts",
    "bounds_mechanism",
    "choose_window",
    "count_below",
    "resolve_candidates",
    "warn_if_noisy_bounds",
    "widen_to_counts",
]

BOUNDS_CANDIDATES = ("auto", "gaps", "log", "linear")
"""What ``bounds_candidates`` may be."""

BOUNDS_MECHANISMS = (
    "gaps-float",
    "log-float",
    "linear-float",
    "log-opendp",
    "linear-opendp",
)
"""How a private window was chosen, as a release records it (``Release.bounds_mechanism``):
the candidates, then the sampler (``float``: numpy, seeded studies; ``opendp``: vetted)."""


def resolve_candidates(choice: Any, search: Any, *, study: bool) -> str:
    """``"gaps"``, ``"log"`` or ``"linear"`` for ``bounds_candidates=choice``, from public values.

    ``"auto"`` gives ``"log"`` when the public range is non-negative and spans decades (it
    starts at 0, or upper/lower ≥ 100), else ``"gaps"`` in a seeded study and ``"linear"`` in
    a real release. ``"gaps"`` in a real release is refused: Smith's mechanism draws a float
    inside a gap, which no vetted sampler does.

    Examples
    --------
    >>> resolve_candidates("auto", (0.0, 1000.0), study=False)
    'log'
    >>> resolve_candidates("auto", (-4.0, 6.0), study=False), resolve_candidates(
    ...     "auto", (-4.0, 6.0), study=True)
    ('linear', 'gaps')
    """
    if not isinstance(choice, str) or choice not in BOUNDS_CANDIDATES:
        raise ValueError(
            f"bounds_candidates must be one of {', '.join(map(repr, BOUNDS_CANDIDATES))} "
            f"(got {choice!r})"
        )
    if choice == "gaps" and not study:
        raise ValueError(
            "bounds_candidates='gaps' (Smith's mechanism) draws the window in floating point, "
            "so it is for seeded studies only (rng=); a real release chooses among public "
            "candidates: 'auto', 'linear' or 'log'"
        )
    if choice != "auto":
        return choice
    try:
        lower, upper = (float(v) for v in search)
        spans_decades = lower >= 0 and (lower == 0 or upper / lower >= 100)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        spans_decades = False  # the range itself is checked, and named, by the caller
    if spans_decades:
        return "log"
    return "gaps" if study else "linear"


def _grid(kind: str, search: tuple[float, float]) -> npt.NDArray[np.float64]:
    return log_candidates(*search) if kind == "log" else linear_candidates(*search)


@dataclasses.dataclass(frozen=True)
class CandidateCounts:
    """How many records fall between consecutive public candidates: a picklable batch kernel.

    ``batch_totals`` checks a batch by the family's rules (the same one-line errors as a
    release) and returns, as exact integers, the histogram h of the records clamped to the
    search range against the candidates: h[i] records have exactly i candidates at or below
    them. Then #{x < c_j} = h[0] + ... + h[j] (:meth:`below`).

    Attributes
    ----------
    check
        The family's plan, used to check (and clamp, with ``clamp=True``) the records.
    candidates
        The public candidates, sorted, inside ``search``.
    search
        The public search range; records are clamped to it.
    """

    check: FamilyPlan
    candidates: npt.NDArray[np.float64] = dataclasses.field(compare=False)
    search: tuple[float, float]

    def batch_totals(self, values: npt.ArrayLike, *, checked: bool = False) -> BatchTotals:
        """Check one batch and count its records between candidates (``len + 1`` totals)."""
        arr = np.asarray(values)
        if arr.size == 0:
            return BatchTotals(0, (0,) * (len(self.candidates) + 1))
        if not checked:
            arr, problem = self.check.check_batch(arr)
            if problem is not None:
                return BatchTotals(int(arr.shape[0]), (), problem)
        clamped = np.clip(np.asarray(arr, dtype=np.float64), *self.search)
        cells = np.searchsorted(self.candidates, clamped, side="right")
        counts = np.bincount(cells, minlength=len(self.candidates) + 1)
        return BatchTotals(int(arr.shape[0]), tuple(int(c) for c in counts))

    @staticmethod
    def below(totals: tuple[int, ...]) -> npt.NDArray[np.int64]:
        """#{x < c_j} for every candidate j, from the histogram totals."""
        return np.cumsum(np.asarray(totals[:-1], dtype=np.int64))


def count_below(
    data: Any,
    fam: Any,
    kind: str,
    search: tuple[float, float],
    *,
    records: npt.NDArray | None,
    column: str | None,
    client: Any,
    clamp: bool,
    name: str,
) -> tuple[int, npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """One pass over the records: n, the candidates and #{x < c} for each candidate.

    ``records`` are checked in-memory records, or ``None`` for a data frame, lazy scan,
    relation or Dask collection ``data`` (read batch by batch, checked in the same pass;
    a Dask reduction runs on ``client``'s cluster).
    """
    grid = _grid(kind, search)
    plan = CandidateCounts(FamilyPlan(fam, None, None, clamp, name), grid, search)
    if records is None:
        n, totals = exact_totals(data, plan, [column], client=client)
        if n == 0:
            raise ValueError(f"{name} must not be empty")
    else:
        n = int(records.shape[0])
        _, totals = combine_totals(
            plan.batch_totals(records[start : start + BATCH], checked=True)
            for start in range(0, n, BATCH)
        )
    return n, grid, plan.below(totals)


def choose_window(
    *,
    kind: str,
    search: tuple[float, float],
    epsilon: float,
    quantiles: Any,
    rng: np.random.Generator | None,
    records: npt.NDArray | None = None,
    counts: tuple[int, npt.NDArray[np.float64], npt.NDArray[np.int64]] | None = None,
) -> tuple[float, float]:
    """The private window: two quantiles at ε/2 each, sorted.

    From ``counts`` (:func:`count_below`) for candidates, by OpenDP when ``rng`` is ``None``;
    from the in-memory ``records`` by Smith's gaps (``kind="gaps"``, a study).
    """
    if kind == "gaps":
        return private_bounds(
            records, epsilon=epsilon, quantiles=quantiles, lower=search[0], upper=search[1],
            rng=rng, candidates="gaps",
        )  # fmt: skip
    from pymc_dp.mechanisms.private_quantile import check_quantile_pair

    q_lo, q_hi = check_quantile_pair(quantiles)
    n, grid, below = counts
    ends = [
        float(grid[quantile_from_counts(below, n, q, epsilon=epsilon / 2.0, rng=rng)])
        for q in (q_lo, q_hi)
    ]
    return min(ends), max(ends)


def warn_if_noisy_bounds(
    n: int, bounds_epsilon: float, quantiles: Any, kind: str, search: tuple[float, float]
) -> None:
    """Warn, from public values only, when the private window cannot locate its quantiles."""
    try:
        q_lo, q_hi = (float(q) for q in quantiles)
    except (TypeError, ValueError):
        return  # choose_window names the problem
    size = n + 1 if kind == "gaps" else len(_grid(kind, search))
    error = bounds_rank_error(n, bounds_epsilon / 2.0, size)
    half = (q_hi - q_lo) * n / 2.0
    if error > half:
        # Each end can then land past the middle of the data: the window may hold few or none
        # of the records (a public-range end far from the data, for example).
        warnings.warn(
            f"private bounds are too noisy to be useful: with n={n} and {bounds_epsilon:g} of "
            f"epsilon for the window, each quantile's rank can be off by {error:.0f} records "
            f"(95 %), more than the {half:.0f} records between either quantile ({q_lo:g}, "
            f"{q_hi:g}) and the middle; raise bounds_share or epsilon, or give public bounds",
            NoisyBoundsWarning,
            stacklevel=3,
        )


def bounds_mechanism(kind: str, study: bool) -> str:
    """The name a release records for a private window of ``kind``."""
    return f"{kind}-{'float' if study else 'opendp'}"


def widen_to_counts(window: tuple[float, float], discrete: bool) -> tuple[float, float]:
    """A window of a count family with no whole number inside, widened to the nearest ones.

    Post-processing of the private window (no privacy cost), rather than a refusal after its
    budget was spent.
    """
    if discrete and math.ceil(window[0]) > math.floor(window[1]):
        return (float(math.floor(window[0])), float(math.ceil(window[1])))
    return window
