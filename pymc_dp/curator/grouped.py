"""Curator side of grouped releases: one :func:`pymc_dp.release` per public group.

Real analyses are grouped: one release per hospital, state or site, pooled hierarchically by the
analyst. :func:`release_grouped` splits the records by a public group key and calls
:func:`pymc_dp.release` once per group; the :class:`~pymc_dp.ReleaseSet` it returns holds the
results, keyed and ordered by the groups, and is written to one JSON file.

Privacy
-------
Each record belongs to exactly one group, so the releases touch disjoint records and, by
parallel composition (McSherry 2009), the whole set is ε-DP for the ε of one release: the
budget is charged once. Two things must be public for that to hold:

* the group keys, which the curator lists (``groups=``) and which are never read from the data;
* the group sizes n_g, which every release publishes exactly (as n is published for one
  release). Under replace-one neighbours *within a group* they are fixed; a record that moved
  from one group to another would change two of them, which no noise covers. The curator says
  so explicitly (``sizes="public"``, or the sizes themselves, which are then checked).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from pymc_dp._validation import check_bool, check_positive, check_records
from pymc_dp.curator.budget import charge_release
from pymc_dp.curator.exact_sums import BATCH, FamilyPlan, combine_totals
from pymc_dp.curator.frames import exact_totals, is_frame
from pymc_dp.curator.grouped_sums import GroupedPlan, is_missing_key, lookup_key
from pymc_dp.curator.release_set import GroupKey, ReleaseSet, check_key
from pymc_dp.curator.single import (
    check_count_share,
    check_release_noise,
    checked_family,
    noise_settings,
    release_from_totals,
)

__all__ = ["group_codes", "release_grouped"]


def release_grouped(
    x: npt.ArrayLike | Any,
    family: Any,
    *,
    by: npt.ArrayLike | str,
    groups: Sequence[GroupKey],
    sizes: str | Mapping[GroupKey, int] | Sequence[int],
    epsilon: float | None = None,
    rng: int | np.random.Generator | None = None,
    budget: Any = None,
    label: str | None = None,
    by_name: str | None = None,
    column: str | None = None,
    client: Any = None,
    count_share: float | str | None = None,
    **release_kwargs: Any,
) -> ReleaseSet:
    """Release the sufficient statistics of each group of ``x`` under differential privacy.

    One pass over the records sums every group's statistic exactly
    (:mod:`pymc_dp.curator.grouped_sums`, on any engine :mod:`pymc_dp.curator.frames` reads), then
    each group gets the noise of :func:`pymc_dp.release`, with the same family, window, ε and
    mechanism, so each group's noise is calibrated to Δ/ε exactly as an ungrouped release of that
    group's records would be. Each record is in exactly one group, so by parallel
    composition the whole set costs ε once: a ``budget`` is checked before any noise is drawn
    (an overspend is refused) and charged once, when every group has been released.

    Parameters
    ----------
    x
        The records: a one-dimensional array (one value per record), or a data frame, lazy
        scan, DuckDB relation, Dask frame or Parquet source (:mod:`pymc_dp.curator.frames`) with
        ``column=`` naming the records and ``by=`` the key column. Lazy input is streamed and
        Dask input reduced on its cluster (``client=``); only integer totals come back.
    family
        PyMC distribution class of one record, as for :func:`pymc_dp.release`.
    by
        The group key of each record, same length as ``x``; for a data frame, the name of
        its key column.
    groups
        The public group keys (strings or integers), in the order the set keeps. They are
        never read from the data: a record whose key is not among them stops the release.
    sizes
        ``"public"`` to declare that the group sizes n_g are public (each is published
        exactly), or the public sizes themselves (a mapping from key to size, or a sequence in
        the order of ``groups``), which are checked against the data. Required: a record that
        moved between groups would change two n_g, which no noise covers, so the guarantee
        holds only for neighbours that replace a record within its group.
    epsilon
        Privacy budget ε > 0 of every group's release, and of the whole set.
    rng
        Seed or generator for a seeded study (``"laplace-float"`` noise), as in
        :func:`pymc_dp.release`; one generator runs through the groups in order.
    budget
        A :class:`~pymc_dp.PrivacyBudget`, charged once for the whole set (ε, or ρ for
        ``mechanism="discrete-gaussian"``).
    label
        Name of the set in the accountant's ledger (default: the family name, grouped).
    by_name
        Name of the grouping variable, kept in the file (e.g. the column name).
    column
        The column of a data frame that holds the records (data frames only).
    client
        A ``dask.distributed.Client`` for Dask input (as in :func:`pymc_dp.release`).
    count_share
        As for :func:`pymc_dp.release`: also release each group's number of records inside
        the window (a windowed family with a one-number statistic, Laplace mechanisms), with
        this share of ε. Every group's sum gets ε·(1 - share), its count ε·share; replacing one
        record moves one group's count by at most 1, so the set still costs ε once.
        ``"auto"``: :data:`~pymc_dp.curator.single.DEFAULT_COUNT_SHARE` where a count applies,
        else none. ``None`` (the default): the sums alone, the files of earlier versions.
    **release_kwargs
        As for :func:`pymc_dp.release`: ``bounds`` (public; ``"private"`` is refused, since
        every group must share one window), ``clamp``, ``mechanism``, ``rho``, ``delta`` and
        the family settings (``trials=``, ...).

    Returns
    -------
    ReleaseSet

    Raises
    ------
    TypeError, ValueError
        If an argument is malformed, a key in ``by`` is missing or not among ``groups``, a
        declared size disagrees with the data, a group has no records, or a record does not
        belong to the family. All checks run before any noise is drawn; messages never quote
        a record's value.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> x = np.array([3, 0, 2, 5, 1, 4])
    >>> site = np.array([1, 2, 1, 2, 2, 1])
    >>> rs = release_grouped(x, pm.Binomial, trials=5, epsilon=0.5, by=site, groups=[1, 2],
    ...                      sizes={1: 3, 2: 3}, rng=0)
    >>> rs.groups, rs.n.tolist(), rs[1].sensitivity
    ((1, 2), [3, 3], 5.0)
    """
    groups = _check_groups(groups)
    bounds = release_kwargs.get("bounds")
    if isinstance(bounds, str):
        raise ValueError(
            "release_grouped needs public bounds=(a, b), one window shared by every group; "
            "private bounds would choose a different window per group"
        )
    unknown = set(release_kwargs) - _RELEASE_OPTIONS - set(_FAMILY_SETTINGS)
    if unknown:
        raise TypeError(
            f"release_grouped got unexpected option(s) {sorted(unknown)}; it takes "
            f"{sorted(_RELEASE_OPTIONS | set(_FAMILY_SETTINGS))} besides its own arguments"
        )
    if by_name is not None and not isinstance(by_name, str):
        raise TypeError(f"by_name must be a string (got {by_name!r})")
    fam = checked_family(family, _family_settings(release_kwargs))
    mechanism, gaussian, eps, generator = noise_settings(
        release_kwargs.get("mechanism"), rng, epsilon, release_kwargs.get("rho"),
        release_kwargs.get("delta", 1e-9),
    )  # fmt: skip
    clamp = check_bool(release_kwargs.get("clamp", False), "clamp")
    count_share = check_count_share(count_share, fam, gaussian)
    counted = count_share is not None
    if fam.needs_bounds:
        if bounds is None:
            fam.check_bounds(None)  # names the missing window
        window = fam.check_bounds(bounds)
    elif bounds is not None:
        raise TypeError(f"bounds apply only to families with unbounded statistics, not {fam!r}")
    else:
        window = fam.domain
    if is_frame(x):
        if not isinstance(by, str):
            raise TypeError(
                "for a data frame, by= names its column of group keys (got "
                f"{type(by).__name__}); column= names the records"
            )
        if column is None:
            raise ValueError("pass column= naming the records (and by= the group keys)")
        by_name = by if by_name is None else by_name
        plan = GroupedPlan(
            FamilyPlan.for_release(
                fam,
                window if fam.needs_bounds else None,
                clamp=clamp,
                name=f"column {column!r}",
                count=counted,
            ),
            groups,
            f"column {by!r}",
        )
        n, totals = exact_totals(x, plan, [column, by], client=client)
        if n == 0:
            raise ValueError(f"column {column!r} must not be empty")
    else:
        if column is not None or client is not None:
            raise TypeError(
                "column= and client= apply to data frames; for arrays pass x and by= themselves"
            )
        x = check_records(x, "x")
        keys = _check_keys(by, int(x.shape[0]))
        plan = GroupedPlan(
            FamilyPlan.for_release(
                fam, window if fam.needs_bounds else None, clamp=clamp, count=counted
            ),
            groups,
        )
        _, totals = combine_totals(
            plan.totals_of(x[start : start + BATCH], keys[start : start + BATCH])
            for start in range(0, int(x.shape[0]), BATCH)
        )
    per_group = plan.split(totals)
    counts = np.array([size for size, _ in per_group])
    _check_sizes(sizes, groups, counts)
    empty = [g for g, c in zip(groups, counts, strict=True) if c == 0]
    if empty:
        raise ValueError(
            f"groups {empty!r} have no records; a release needs n >= 1, so drop them from groups"
        )
    # Every group's noise and the budget are checked before any noise is drawn.
    sum_epsilon = eps if count_share is None else eps * (1.0 - count_share)
    for size in counts:
        check_release_noise(fam, window, int(size), gaussian=gaussian, epsilon=sum_epsilon)
    label = label if label is not None else f"{fam.name} by {by_name or 'group'}"
    if budget is not None:
        # A trial charge on a copy refuses an overspend before any noise is drawn; the real
        # charge, once for the whole set (parallel composition), follows the last group.
        _charge_once(_copy_budget(budget), mechanism, epsilon, release_kwargs, label)
    delta = release_kwargs.get("delta", 1e-9)
    releases = {}
    for key, (size, group_totals) in zip(groups, per_group, strict=True):
        releases[key] = release_from_totals(
            fam, plan.plan, window, size, group_totals, mechanism=mechanism, epsilon=eps,
            delta=delta, rng=generator, count_share=count_share,
        )  # fmt: skip
    if budget is not None:
        _charge_once(budget, mechanism, epsilon, release_kwargs, label)
    return ReleaseSet(releases, by=by_name, budget=budget.receipt() if budget is not None else None)


def _check_keys(by: Any, n_records: int) -> npt.NDArray:
    """The keys of in-memory records: one-dimensional, one per record."""
    if isinstance(by, str):
        raise TypeError(
            "by names a column only for a data frame; for an array x pass the keys themselves"
        )
    try:
        keys = np.asarray(by)
    except (TypeError, ValueError):
        raise TypeError("by must be an array with one group key per record") from None
    if keys.ndim != 1:
        raise ValueError(f"by must be one-dimensional, one key per record (got shape {keys.shape})")
    if keys.shape[0] != n_records:
        raise ValueError(
            f"by must have one key per record: {keys.shape[0]} keys for {n_records} records"
        )
    return keys


def _copy_budget(budget: Any) -> Any:
    from pymc_dp.curator.budget import PrivacyBudget

    if not isinstance(budget, PrivacyBudget):
        raise TypeError(f"budget must be a pymc_dp.PrivacyBudget (got {type(budget).__name__})")
    return PrivacyBudget.from_dict(budget.to_dict())


def _charge_once(
    budget: Any, mechanism: str | None, epsilon: Any, kwargs: Mapping[str, Any], label: str
) -> None:
    """Charge the set's cost, that of one group's release (parallel composition)."""
    from pymc_dp.mechanisms.vetted import DISCRETE_GAUSSIAN

    if mechanism == DISCRETE_GAUSSIAN:
        rho = check_positive(kwargs.get("rho"), "rho")
        charge_release(budget, mechanism, math.sqrt(2.0 * rho), 0.0, label)
    else:
        if epsilon is None:
            raise TypeError("release_grouped needs epsilon=, the privacy budget of the set")
        charge_release(budget, mechanism or "", check_positive(epsilon, "epsilon"), 0.0, label)


_FAMILY_SETTINGS = ("trials", "categories", "alpha", "sigma")
_RELEASE_OPTIONS = frozenset({"bounds", "clamp", "mechanism", "rho", "delta"})


def _family_settings(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if k in _FAMILY_SETTINGS}


def _check_groups(groups: Any) -> tuple[GroupKey, ...]:
    if isinstance(groups, str) or not isinstance(groups, Sequence | np.ndarray):
        raise TypeError(
            f"groups must be a list of the public group keys, e.g. ['a', 'b'] (got "
            f"{type(groups).__name__})"
        )
    keys = tuple(check_key(g, "groups") for g in groups)
    if not keys:
        raise ValueError("groups must list at least one public group key")
    if len({str(k) for k in keys}) != len(keys):
        raise ValueError("groups must be distinct")
    return keys


def group_codes(by: Any, groups: Sequence[GroupKey], *, n_records: int) -> npt.NDArray[np.int64]:
    """The index in ``groups`` of each record's key, refusing missing and unknown keys.

    Keys match by value, and a string group matches the text of a key (so that ``"3"`` in a
    CSV file matches group ``3`` given as an integer, and back). Messages give counts and
    positions, never a record's key.
    """
    try:
        keys = np.asarray(by, dtype=object)
    except (TypeError, ValueError):
        raise TypeError("by must be an array with one group key per record") from None
    if keys.ndim != 1:
        raise ValueError(f"by must be one-dimensional, one key per record (got shape {keys.shape})")
    if n_records >= 0 and keys.shape[0] != n_records:
        raise ValueError(
            f"by must have one key per record: {keys.shape[0]} keys for {n_records} records"
        )
    index: dict[Any, int] = {}
    for i, g in enumerate(groups):
        index[g] = i
        index[str(g)] = i
    codes = np.empty(keys.shape[0], dtype=np.int64)
    missing = unknown = 0
    first_missing = first_unknown = -1
    for row, key in enumerate(keys):
        if is_missing_key(key):
            missing += 1
            first_missing = row if first_missing < 0 else first_missing
            continue
        code = lookup_key(index, key)
        if code is None:
            unknown += 1
            first_unknown = row if first_unknown < 0 else first_unknown
            continue
        codes[row] = code
    if missing:
        raise ValueError(
            f"by has {missing} missing key(s) (the first at index {first_missing}); every record "
            "needs a group key: fill them in or drop those records"
        )
    if unknown:
        raise ValueError(
            f"by has {unknown} key(s) not among groups (the first at index {first_unknown}); the "
            "groups are public and are not read from the data: add the group or drop the records"
        )
    return codes


def _check_sizes(sizes: Any, groups: tuple[GroupKey, ...], counts: np.ndarray) -> None:
    if isinstance(sizes, str):
        if sizes != "public":
            raise ValueError(f"sizes must be 'public' or the public group sizes (got {sizes!r})")
        return
    if sizes is None:
        raise TypeError(
            "release_grouped needs sizes=: 'public' or the public group sizes. Each group's "
            "size is published exactly, so it must be public"
        )
    if isinstance(sizes, Mapping):
        keys = {check_key(k, "sizes keys") for k in sizes}
        if {str(k) for k in keys} != {str(g) for g in groups}:
            raise ValueError("sizes must give one size for each of groups, and no other key")
        by_text = {str(k): v for k, v in sizes.items()}
        declared = [by_text[str(g)] for g in groups]
    elif isinstance(sizes, Sequence | np.ndarray):
        declared = list(sizes)
        if len(declared) != len(groups):
            raise ValueError(
                f"sizes must hold one size per group ({len(groups)}), got {len(declared)}"
            )
    else:
        raise TypeError(
            f"sizes must be 'public', a mapping or a sequence of sizes (got {type(sizes).__name__})"
        )
    for key, size, count in zip(groups, declared, counts, strict=True):
        if isinstance(size, bool) or not isinstance(size, numbers.Integral):
            raise TypeError(f"sizes must be integers (got {size!r} for group {key!r})")
        if int(size) != int(count):
            raise ValueError(
                f"the declared public size of group {key!r} disagrees with the records; "
                "sizes must be the exact, public number of records of each group"
            )
