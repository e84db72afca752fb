"""Exact per-group totals in one pass: the batch kernel of grouped releases, on any engine.

:func:`pymc_dp.release_grouped` publishes one statistic per public group. Its records and
group keys reach :class:`GroupedPlan` in batches (an array, a data frame, a lazy scan, a DuckDB
relation or a Dask partition, through :mod:`pymc_dp.curator.frames`): each batch's keys are mapped
to the public groups, its records checked by the family's rules, and each group's statistic summed
exactly (:class:`~pymc_dp.curator.exact_sums.FamilyPlan`). Only integers come back: the size of
every group and its totals, or, for a bad record or key, the rule broken and its position (never a
record's value or key).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from pymc_dp.curator.exact_sums import BatchTotals, FamilyPlan, Problem
from pymc_dp.curator.release_set import MISSING_KEY_TEXT

__all__ = ["GroupedPlan", "is_missing_key", "key_codes", "lookup_key"]


def _index(groups: Sequence[Any]) -> dict[Any, int]:
    """Each public key, and its text, to its position (``"3"`` matches 3 and back)."""
    index: dict[Any, int] = {}
    for i, g in enumerate(groups):
        index[g] = i
        index[str(g)] = i
    return index


def key_codes(
    keys: npt.ArrayLike, groups: Sequence[Any], name: str
) -> tuple[npt.NDArray[np.int64], Problem | None]:
    """The position in ``groups`` of each key, or the first rule broken (missing, unknown).

    Keys match as :func:`pymc_dp.curator.grouped.group_codes` matches them (by value, a string
    group matching the text of a key); each distinct key is looked up once.

    Examples
    --------
    >>> codes, problem = key_codes(np.array([2.0, 1.0, 2.0]), (1, 2), "by")
    >>> codes.tolist(), problem
    ([1, 0, 1], None)
    >>> key_codes(np.array(["a", None, "c"], dtype=object), ("a", "b"), "by")[1].count
    1
    """
    index = _index(groups)
    arr = np.asarray(keys)
    if arr.ndim != 1:
        arr = arr.reshape(-1)
    codes = np.full(arr.shape[0], -1, dtype=np.int64)
    missing = np.zeros(arr.shape[0], dtype=bool)
    if arr.dtype.kind in "iuf":
        if arr.dtype.kind == "f":
            missing = ~np.isfinite(arr)
        distinct, inverse = np.unique(arr[~missing], return_inverse=True)
        found = np.array([_code(index, v, lookup_key) for v in distinct.tolist()], dtype=np.int64)
        codes[~missing] = found[inverse.reshape(-1)] if distinct.size else codes[~missing]
    elif arr.dtype.kind != "b":  # booleans are never keys: all unknown
        seen: dict[tuple[type, Any], int] = {}
        for row, key in enumerate(arr.tolist()):
            try:
                cache = (type(key), key)
                code = seen.get(cache)
            except TypeError:  # an unhashable key
                cache, code = None, None
            if code is None:
                code = -2 if is_missing_key(key) else _code(index, key, lookup_key)
                if cache is not None:
                    seen[cache] = code
            codes[row] = code
        missing = codes == -2
        codes[missing] = -1
    unknown = (codes < 0) & ~missing
    if missing.any():
        return codes, Problem(
            "ValueError",
            f"{name} has {{records}} with a missing key; every record needs a group key: fill "
            "them in or drop those records",
            int(missing.sum()),
            int(np.argmax(missing)),
        )
    if unknown.any():
        return codes, Problem(
            "ValueError",
            f"{name} has {{records}} whose key is not among groups; the groups are public and "
            "are not read from the data: add the group or drop the records",
            int(unknown.sum()),
            int(np.argmax(unknown)),
        )
    return codes, None


def _code(index: dict[Any, int], key: Any, lookup: Any) -> int:
    if isinstance(key, float) and not math.isfinite(key):
        return -2
    code = lookup(index, key)
    return -1 if code is None else code


@dataclasses.dataclass(frozen=True)
class GroupedPlan:
    """How to sum one family's statistic per public group exactly: picklable, public values.

    ``batch_totals`` takes a ``(rows, 2)`` batch (records, keys) as :mod:`pymc_dp.curator.frames`
    delivers two columns; :meth:`totals_of` takes them apart. The totals are the G group
    sizes, then each group's exact totals in turn (:meth:`split`).

    Attributes
    ----------
    plan
        The family's plan: window, record grid and the checks of one release.
    groups
        The public group keys, in the set's order.
    by_name
        How messages name the keys, e.g. ``"by"`` or ``"column 'site'"``.
    """

    plan: FamilyPlan
    groups: tuple[Any, ...]
    by_name: str = "by"

    def batch_totals(self, values: npt.ArrayLike, *, checked: bool = False) -> BatchTotals:
        """Check one ``(rows, 2)`` batch of records and keys and sum each group exactly."""
        arr = np.asarray(values)
        if arr.size == 0:
            return self.totals_of(np.zeros(0), np.zeros(0))
        records = arr[:, 0]
        if records.dtype == object:
            try:
                records = records.astype(np.float64)  # None becomes NaN: a missing record
            except (TypeError, ValueError):
                pass  # not numbers: the family's check names the column's type
        return self.totals_of(records, arr[:, 1])

    def totals_of(self, records: npt.ArrayLike, keys: npt.ArrayLike) -> BatchTotals:
        """Check a batch of records with their keys, and sum each group exactly."""
        rows = int(np.shape(records)[0])
        size = self.plan.size
        if rows == 0:
            return BatchTotals(0, (0,) * (len(self.groups) * (1 + size)))
        codes, problem = key_codes(keys, self.groups, self.by_name)
        if problem is None:
            records, problem = self.plan.check_batch(np.asarray(records))
        if problem is not None:
            return BatchTotals(rows, (), problem)
        counts = np.bincount(codes, minlength=len(self.groups))
        totals: list[int] = [int(c) for c in counts]
        for g in range(len(self.groups)):
            part = records[codes == g]
            totals.extend(self.plan.batch_totals(part, checked=True).totals)
        return BatchTotals(rows, tuple(totals))

    def split(self, totals: tuple[int, ...]) -> list[tuple[int, tuple[int, ...]]]:
        """``(n_g, totals_g)`` for each group, from the combined totals."""
        count, size = len(self.groups), self.plan.size
        return [
            (totals[g], tuple(totals[count + g * size : count + (g + 1) * size]))
            for g in range(count)
        ]


def is_missing_key(key: Any) -> bool:
    """Whether a group key is missing (None, NaN, NA, or text such as ``"n/a"``)."""
    if key is None:
        return True
    if isinstance(key, float | np.floating):
        return not math.isfinite(key)
    if isinstance(key, str):
        return key.strip().lower() in MISSING_KEY_TEXT
    try:
        import pandas as pd

        return key is pd.NA or key is pd.NaT
    except ImportError:  # pragma: no cover
        return False


def lookup_key(index: Mapping[Any, int], key: Any) -> int | None:
    """The position of ``key`` among the public groups (by value; text matches), or ``None``."""
    if isinstance(key, bool | np.bool_):
        return None
    if isinstance(key, float | np.floating):
        if not float(key).is_integer():
            return None
        key = int(key)
    elif isinstance(key, numbers.Integral):
        key = int(key)
    elif isinstance(key, str):
        key = key.strip()
    else:
        return None
    code = index.get(key)
    if code is None and not isinstance(key, str):
        code = index.get(str(key))
    return code
