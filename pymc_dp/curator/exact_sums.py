"""Exact, order-independent sufficient statistics: the per-batch kernel of every release.

A release sums t(x) over records. Floating-point sums depend on the order of the records and
on how they are split into partitions, and their rounding is not covered by Δ (Casacuberta et
al. 2022). Here each record is put on a public fixed-point grid first, so that t of the gridded
record is an exact integer in units of a power of two, and those integers are summed exactly
(:func:`pymc_dp.curator.fixed_point.exact_total`, Python integers across batches). The same records
give the same statistic bit for bit on any engine, partitioning or order.

The grid is on the record, not on t: a record z of a windowed family is rounded to the nearest
multiple of the quantum q *inside* the window (clipped to its grid points), so the gridded
record is itself a possible record of the window and the Appendix C sensitivity Δ covers it
unchanged. Its statistic (z, z²) is then the exact integer pair (m, m²) in units (q, q²).
Counts (Bernoulli, Binomial, Categorical, Poisson and Geometric records) are integers already.

A :class:`FamilyPlan` (or :class:`~pymc_dp.curator.regression.exact_sums.RegressionPlan`) holds only
public values and is picklable: a Dask worker runs :meth:`FamilyPlan.batch_totals` on its partition
and returns a :class:`BatchTotals`, which holds integer totals and, for a bad record, the rule it
broke and its position, never a record's value.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from pymc_dp.curator.fixed_point import exact_total
from pymc_dp.families import ExponentialFamily

__all__ = [
    "BatchTotals",
    "FamilyPlan",
    "Problem",
    "clamp_records",
    "combine_totals",
    "limb_total",
    "record_quantum",
]

BATCH = 1 << 20
"""Records per batch: keeps the kernel's temporaries near 50 MB whatever n is."""

_BLOCK = 1 << 15
"""Records per block of the fast kernel: 256 kB per array, so a block stays in cache."""

_ROUND = 1.5 * 2.0**52
"""Adding this to |y| < 2**51 rounds y to the nearest integer, ties to even (``np.rint``): the
sum lands in [2**52, 2**53), where the float64 spacing is 1."""

_ROUND_BITS = int(np.array(_ROUND).view(np.int64))
"""The bit pattern of ``_ROUND``: in [2**52, 2**53) the bits of ``_ROUND + m`` are
``_ROUND_BITS + m``, so the rounded integer is read from the bits without a float conversion."""

_DESCRIBED = re.compile(r"(\d+) record\(s\) \(the first at index (\d+)\)")


class Problem(NamedTuple):
    """A broken rule in one batch: the exception type, its message and where it happened.

    ``template`` is the message with ``{records}`` in place of the count and first index
    (:func:`~pymc_dp._validation.describe_records`); ``count`` and ``first`` (batch-local) are
    ``None`` for a rule about the whole column (its type).
    """

    kind: str
    template: str
    count: int | None
    first: int | None


class BatchTotals(NamedTuple):
    """What one batch or partition reports: its size, exact integer totals, or a problem."""

    n: int
    totals: tuple[int, ...]
    problem: Problem | None = None


def record_quantum(lower: float, upper: float, degree: int, *, integer: bool = False) -> float:
    """The public grid step q = 2**k of records in ``[lower, upper]``, monomials up to ``degree``.

    q is as fine as fast int64 arithmetic allows: the largest absolute record is at most 2**42
    quanta for degree 1 (so a batch of 2**20 records sums in int64 without splitting) and
    2**(62 // degree) quanta otherwise (every monomial of one gridded record is an exact
    int64, summed in 31-bit limbs by :func:`limb_total`). Integer records keep q = 1 unless
    they are beyond that range.

    Examples
    --------
    >>> record_quantum(0.0, 1.5, 1) == 2.0**-41, record_quantum(-4.0, 6.0, 2) == 2.0**-28
    (True, True)
    >>> record_quantum(0.0, 40.0, 1, integer=True)
    1.0
    """
    bits = 42 if degree == 1 else 62 // degree
    largest = max(abs(float(lower)), abs(float(upper)))
    exponent = (math.frexp(largest)[1] if largest > 0 else -1022) - bits
    if integer:
        exponent = max(exponent, 0)
    return math.ldexp(1.0, max(exponent, -1022))


def limb_total(columns: list[npt.NDArray[np.int64]]) -> tuple[int, ...]:
    """Exact totals of int64 columns, each split in 31-bit limbs.

    ``v = hi · 2**31 + lo`` with ``0 <= lo < 2**31`` and ``|hi| <= 2**32``: each limb sums in
    int64 without overflow over 2**30 rows, where whole values up to 2**62 would need
    :func:`~pymc_dp.curator.fixed_point.exact_total` to add thousands of blocks. Longer columns are
    summed by :func:`~pymc_dp.curator.fixed_point.exact_total` on the limbs.

    Examples
    --------
    >>> limb_total([np.array([2**62 - 1, -(2**62), 5], dtype=np.int64)]) == (4,)
    True
    """
    totals = []
    for column in columns:
        hi, lo = column >> 31, column & 0x7FFFFFFF
        if column.shape[0] <= 1 << 30:
            hi_total, lo_total = int(hi.sum()), int(lo.sum())
        else:
            hi_total, lo_total = exact_total(np.column_stack([hi, lo]))
        totals.append((hi_total << 31) + lo_total)
    return tuple(totals)


def grid_limits(lower: float, upper: float, quantum: float, what: str) -> tuple[int, int]:
    """First and last grid point (in quanta) inside ``[lower, upper]``; refuse an empty grid."""
    lo, hi = math.ceil(lower / quantum), math.floor(upper / quantum)
    if lo > hi:
        raise ValueError(
            f"{what} [{lower:g}, {upper:g}] is narrower than the fixed-point quantum {quantum:g} "
            "of records of that size: widen it, or shift the records towards 0 first"
        )
    return lo, hi


def clamp_records(fam: ExponentialFamily, x: npt.ArrayLike) -> npt.ArrayLike:
    """``x`` with numeric records outside the family's (public) domain moved to its ends."""
    arr = np.asarray(x)
    if arr.dtype.kind not in "iuf":
        return x  # booleans and anything else are checked, not clamped
    lo, hi = fam.domain
    with np.errstate(invalid="ignore"):
        out = np.clip(arr, lo, hi)
        if getattr(fam, "log_scale", False):
            # The domain is x > 0 (log x must be finite): the nearest point is the smallest float.
            out = np.where(out <= 0, np.finfo(np.float64).tiny, out)
    return out


def problem_of(err: Exception) -> Problem:
    """The :class:`Problem` of a validation error, its record count and index taken out."""
    text = str(err)
    found = _DESCRIBED.search(text)
    if found is None:
        return Problem(type(err).__name__, text.replace("{", "{{").replace("}", "}}"), None, None)
    template = (
        text[: found.start()].replace("{", "{{").replace("}", "}}")
        + "{records}"
        + text[found.end() :].replace("{", "{{").replace("}", "}}")
    )
    return Problem(type(err).__name__, template, int(found.group(1)), int(found.group(2)))


def missing_problem(values: npt.NDArray, name: str) -> Problem | None:
    """A problem for NaN or null records (sources deliver nulls as NaN), else ``None``."""
    if values.dtype.kind != "f":
        return None
    missing = np.isnan(values)
    if not missing.any():
        return None
    return Problem(
        "ValueError",
        f"{name} has {{records}} missing (null or NaN); the release was stopped. n is public, "
        "so pymc_dp never drops, fills or counts around a record: fix or fill those records "
        "with a rule that does not depend on the data",
        int(missing.sum()),
        int(np.argmax(missing)),
    )


def check_numeric(values: npt.NDArray, name: str) -> Problem | None:
    """A problem if the column is not numbers or booleans (a rule about its type)."""
    if values.dtype.kind in "biuf":
        return None
    return Problem(
        "TypeError",
        f"{name} must hold numbers or booleans (got dtype {values.dtype}); convert it first",
        None,
        None,
    )


@dataclasses.dataclass(frozen=True)
class FamilyPlan:
    """How to sum one family's statistic exactly: public values only, picklable.

    Attributes
    ----------
    family
        The family of one record.
    window
        The truncation window ``(a, b)`` on the data scale, or ``None`` for a bounded family.
    quantum
        The grid step q of the latent record (``None`` for a bounded family). Component j of
        the statistic is an integer total times q**(j + 1).
    clamp
        Whether records outside the family's domain are clamped to it (``clamp=True``).
    name
        How messages name the records, e.g. ``"x"`` or ``"column 'visits'"``.
    count
        Whether the totals end with one more: the number of records inside the window (a
        windowed family's window count, released with its sum).
    """

    family: ExponentialFamily
    window: tuple[float, float] | None = None
    quantum: float | None = None
    clamp: bool = False
    name: str = "x"
    count: bool = False

    @classmethod
    def for_release(
        cls,
        family: ExponentialFamily,
        window: tuple[float, float] | None,
        *,
        clamp: bool = False,
        name: str = "x",
        count: bool = False,
    ) -> FamilyPlan:
        """The plan of a release over ``window`` (``None`` for a bounded family).

        ``count`` adds the number of records inside the window as a last total.
        """
        if not family.needs_bounds:
            if count:
                raise TypeError(f"a window count needs a windowed family, not {family!r}")
            return cls(family, None, None, clamp, name)
        k = family.stat_size
        probe = np.asarray(family.statistic(np.array([3.0]))).ravel()
        if k > 2 or not np.array_equal(probe, 3.0 ** np.arange(1, k + 1)):
            raise TypeError(f"exact sums need t(z) = (z, z², ...) on the latent scale; {family!r}")
        lower, upper = family.latent_window(window)
        quantum = record_quantum(lower, upper, k, integer=getattr(family, "discrete", False))
        grid_limits(lower, upper, quantum, "the window")
        return cls(family, tuple(map(float, window)), quantum, clamp, name, count)

    @property
    def size(self) -> int:
        """Number of exact totals: the released components, and the window count if asked."""
        return int(np.prod(self.family.stat_shape, dtype=np.int64)) + int(self.count)

    def batch_totals(self, values: npt.ArrayLike, *, checked: bool = False) -> BatchTotals:
        """Check one batch of records and sum its statistic exactly.

        Parameters
        ----------
        values
            The batch, one-dimensional (nulls as NaN).
        checked
            Whether the records were already checked (and clamped) by the caller.
        """
        arr = np.asarray(values)
        if arr.size == 0:
            return BatchTotals(0, (0,) * self.size)
        fast = self._fast_totals(arr)
        if fast is not None:
            return BatchTotals(int(arr.shape[0]), fast + self._window_count(arr))
        if not checked:
            arr, problem = self.check_batch(arr)
            if problem is not None:
                return BatchTotals(int(arr.shape[0]), (), problem)
        return BatchTotals(int(arr.shape[0]), self._totals(arr) + self._window_count(arr))

    def _window_count(self, records: npt.NDArray) -> tuple[int, ...]:
        """``(number of records with a ≤ x ≤ b,)`` if the plan counts them, else ``()``.

        The same test as the sum's (records outside [a, b] add nothing to it).
        """
        if not self.count:
            return ()
        a, b = self.window
        return (int(np.count_nonzero((records >= a) & (records <= b))),)

    def _fast_totals(self, arr: npt.NDArray) -> tuple[int, ...] | None:
        """The totals of a clean batch of a windowed family, block by block, or ``None``.

        A batch of finite numbers inside the family's domain (whole numbers where it needs
        them) passes every check of :meth:`check_batch` unchanged, so its totals are those of
        :meth:`_totals`. Here the checks and the sum run together on blocks small enough to
        stay in the processor's cache (each record is read from memory once, not once per
        pass: measured 2-3× faster on streamed batches). Anything else returns ``None``, and
        the full checks name the rule broken.
        """
        fam = self.family
        if self.clamp or arr.ndim != 1:
            return None
        if not fam.needs_bounds:
            return self._fast_counts(arr)
        if arr.dtype.kind not in "iuf":
            return None
        dom_lo, dom_hi = fam.domain
        positive = getattr(fam, "log_scale", False)
        whole = getattr(fam, "discrete", False) and arr.dtype.kind == "f"
        big = 2.0**53 if getattr(fam, "discrete", False) else np.inf
        a, b = self.window
        lower, upper = fam.latent_window(self.window)
        lo, hi = grid_limits(lower, upper, self.quantum, "the window")
        scale = 1.0 / self.quantum
        size = min(_BLOCK, arr.shape[0])
        z, spare = np.empty(size), np.empty(size)
        outside = np.empty(size, dtype=bool)
        totals = [0] * fam.stat_size
        for start in range(0, arr.shape[0], _BLOCK):
            block = arr[start : start + _BLOCK]
            k = block.shape[0]
            with np.errstate(invalid="ignore"):
                low, high = float(block.min()), float(block.max())  # NaN propagates
            if not (math.isfinite(low) and math.isfinite(high)):
                return None  # NaN or ±inf: the full checks name it
            if not (dom_lo <= low and high <= dom_hi and max(-low, high) <= big):
                return None
            if positive and low <= 0:
                return None
            if whole and not np.array_equal(block, np.rint(block, out=spare[:k])):
                return None
            out = z[:k]
            with np.errstate(over="ignore"):  # records far outside the window: dropped below
                if positive:
                    np.log(block, out=out)
                    np.multiply(out, scale, out=out)
                else:
                    np.multiply(block, scale, out=out)
            # The rounding of fixed_point.quantise, rint of z / q (exact for q a power of two),
            # as one addition: a record in the window is at most 2**42 quanta, far below 2**51.
            np.add(out, _ROUND, out=out)
            first, last = max(low, a), min(high, b)
            if positive or not (lo <= first * scale and last * scale <= hi):
                # A record in the window rounds past the grid only within q/2 of a window end
                # that is not a grid point; for logs always clip (a scalar log may differ from
                # the vector log in the last bit).
                np.clip(out, lo + _ROUND, hi + _ROUND, out=out)
            if low < a or high > b:
                # Only records in the window count: the others become 0 quanta, in place
                # (cheaper than copying the rest out).
                mask = outside[:k]
                if low < a:
                    np.less(block, a, out=mask)
                    if high > b:
                        mask |= block > b
                else:
                    np.greater(block, b, out=mask)
                np.putmask(out, mask, _ROUND)
            if fam.stat_size == 1:
                # Sum the bit patterns as uint64 (wrapping modulo 2**64, well defined), less
                # k · _ROUND_BITS: the true total is below 2**57 in absolute value, so its
                # residue modulo 2**64 gives it back exactly.
                residue = (int(np.add.reduce(out.view(np.uint64))) - k * _ROUND_BITS) % (1 << 64)
                totals[0] += residue - (1 << 64) if residue >= 1 << 63 else residue
            else:
                m = out.view(np.int64)
                np.subtract(m, _ROUND_BITS, out=m)
                first_total, second_total = limb_total([m, m * m])
                totals[0] += first_total
                totals[1] += second_total
        return tuple(totals)

    def _fast_counts(self, arr: npt.NDArray) -> tuple[int, ...] | None:
        """Totals of a clean batch of counts (Bernoulli, Binomial, Categorical), or ``None``.

        Whole numbers inside the domain pass the family's checks unchanged; their total (or,
        for categories, their histogram) is found in three passes instead of the checks' ten.
        """
        fam = self.family
        if arr.dtype.kind == "b":
            if fam.name != "bernoulli":
                return None  # other families refuse booleans, by the full checks
            return (int(np.count_nonzero(arr)),)
        if arr.dtype.kind not in "iuf" or arr.size == 0:
            return None
        with np.errstate(invalid="ignore"):
            low, high = float(arr.min()), float(arr.max())
        top = fam.domain[1]
        if not (math.isfinite(low) and math.isfinite(high) and 0 <= low and high <= top):
            return None
        if arr.dtype.kind == "f" and not np.array_equal(arr, np.rint(arr)):
            return None  # fractional records: the full checks name them
        categories = getattr(fam, "categories", None)
        if categories is not None:
            counts = np.bincount(arr.astype(np.int64, copy=False), minlength=categories)
            return tuple(int(c) for c in counts)
        if top * arr.shape[0] >= 2.0**62:
            return None  # the int64 sum could overflow: exact_total adds blocks
        return (int(np.add.reduce(arr, dtype=np.int64)),)

    def check_batch(self, values: npt.NDArray) -> tuple[npt.NDArray, Problem | None]:
        """The batch's records checked (and clamped) by the family's rules, or the rule broken.

        Returns the records as the family reads them and ``None``, or the batch unchanged and
        the :class:`Problem` of its first broken rule (type, missing values, domain).
        """
        problem = check_numeric(values, self.name) or missing_problem(values, self.name)
        if problem is not None:
            return values, problem
        try:
            return self.family.validate_data(
                clamp_records(self.family, values) if self.clamp else values
            ), None
        except (TypeError, ValueError) as err:
            return values, problem_of(err)

    def _totals(
        self, records: npt.NDArray, extremes: tuple[Any, Any] | None = None
    ) -> tuple[int, ...]:
        """Exact totals of checked records (``extremes``: their min and max, if known)."""
        fam = self.family
        if not fam.needs_bounds:
            categories = getattr(fam, "categories", None)
            if categories is not None:
                return tuple(int(c) for c in np.bincount(records, minlength=categories))
            return exact_total(records.reshape(-1, 1))
        a, b = self.window
        if extremes is None and records.size:
            extremes = (records.min(), records.max())
        # Only records in the window count; when all are, no copy is needed.
        every = records.size == 0 or (a <= extremes[0] and extremes[1] <= b)
        inside = records if every else records[(records >= a) & (records <= b)]
        lower, upper = fam.latent_window(self.window)
        lo, hi = grid_limits(lower, upper, self.quantum, "the window")
        # The rounding of fixed_point.quantise (rint of z / q, exact for q a power of two), on
        # a fresh array: the records were checked to be finite and in the window, so that
        # |z / q| is at most 2**42 (2**31 for z²) and quantise's range checks cannot fail.
        z = np.multiply(fam.to_latent(inside), 1.0 / self.quantum, dtype=np.float64)
        np.rint(z, out=z)
        np.clip(z, lo, hi, out=z)
        if fam.stat_size == 1 and z.shape[0] <= BATCH:
            # |m| <= 2**42 quanta, so 2**20 of them sum below 2**62: the int64 sum is exact.
            return (int(np.add.reduce(z, dtype=np.int64)),)
        m = z.astype(np.int64)
        if fam.stat_size == 1:
            return exact_total(m.reshape(-1, 1))
        return limb_total([m, m * m])

    def units(self) -> tuple[float, ...]:
        """The unit of each exact total: component j of s is ``totals[j] · units()[j]``."""
        k = int(np.prod(self.family.stat_shape, dtype=np.int64))
        counted = (1.0,) if self.count else ()
        if self.quantum is None:
            return (1.0,) * k + counted
        return tuple(self.quantum ** (j + 1) for j in range(k)) + counted

    def statistic(self, totals: tuple[int, ...]) -> npt.NDArray[np.float64]:
        """The statistic s from exact integer totals: total_j · q**(j + 1), shape ``stat_shape``.

        A window count, the last total of a counting plan, is not part of s.
        """
        totals = totals[: len(totals) - int(self.count)]
        if self.quantum is None:
            out = np.array([float(t) for t in totals])
        else:
            # float(total) rounds a total beyond 2**53 to nearest, the same on every engine.
            out = np.array([float(t) * self.quantum ** (j + 1) for j, t in enumerate(totals)])
        return out.reshape(self.family.stat_shape)


def combine_totals(results: Iterable[BatchTotals]) -> tuple[int, tuple[int, ...]]:
    """Add batch totals exactly, or raise the first broken rule with global positions.

    Batches come in record order. If some batch broke a rule, the error is the rule broken by
    the first bad record, with the count of records breaking that rule in every batch and the
    index of the first (in the whole column); the message never holds a record's value.

    Returns
    -------
    n, totals
        Number of records and the exact integer totals.

    Raises
    ------
    TypeError, ValueError
        The broken rule, as the family words it.
    """
    n = 0
    totals: list[int] | None = None
    found: list[tuple[int, Problem]] = []
    for result in results:
        if result.problem is not None:
            found.append((n, result.problem))
        elif result.n:
            totals = (
                list(result.totals)
                if totals is None
                else [a + b for a, b in zip(totals, result.totals, strict=True)]
            )
        n += result.n
    if found:
        _raise_first(found)
    return n, tuple(totals or ())


def _raise_first(found: list[tuple[int, Problem]]) -> None:
    def where(item: tuple[int, Problem]) -> int:
        offset, problem = item
        return offset + (problem.first or 0)

    _, first = min(found, key=where)
    error: type[Exception] = TypeError if first.kind == "TypeError" else ValueError
    if first.count is None:
        raise error(first.template.format(records=""))
    same = [(o, p) for o, p in found if p.template == first.template]
    count = sum(p.count or 0 for _, p in same)
    index = min(where(item) for item in same)
    raise error(first.template.format(records=f"{count} record(s) (the first at index {index})"))


def empty_problem(name: str) -> Any:
    """The error for a source without records."""
    return ValueError(f"{name} must not be empty")
