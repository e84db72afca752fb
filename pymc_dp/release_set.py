"""Grouped releases: one :class:`~pymc_dp.Release` per public group, at the cost of one.

Real analyses are grouped: one release per hospital, state or site, pooled hierarchically by the
analyst. :func:`release_grouped` splits the records by a public group key and calls
:func:`pymc_dp.release` once per group; :class:`ReleaseSet` holds the results, keyed and ordered
by the groups, and is written to one JSON file.

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

import dataclasses
import json
import math
import numbers
import types
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from pymc_dp._validation import check_json_numbers, check_positive, check_records, check_rng
from pymc_dp.release import _charge, release
from pymc_dp.release_record import Release

__all__ = ["GroupKey", "ReleaseSet", "release_grouped"]

GroupKey = str | int
"""A public group key: a string, or an integer (a code such as a stage or a year)."""

_SET_FORMAT_VERSION = 1
_MISSING_TEXT = frozenset({"", "na", "nan", "null", "none", "n/a"})


def _check_key(key: Any, name: str) -> GroupKey:
    """A group key as ``str`` or ``int``; anything else (floats, booleans, None) is refused."""
    if isinstance(key, bool | np.bool_) or not isinstance(key, str | numbers.Integral):
        raise TypeError(
            f"{name} must be strings or integers, the public group keys (got "
            f"{type(key).__name__}: {key!r})"
        )
    if isinstance(key, str):
        if key.strip().lower() in _MISSING_TEXT:
            raise ValueError(f"{name} must not hold a missing-value marker such as {key!r}")
        return str(key)
    return int(key)


@dataclasses.dataclass(frozen=True, eq=False)
class ReleaseSet:
    """Per-group releases of one family, window, ε and mechanism, keyed by public groups.

    Parameters
    ----------
    releases
        Mapping from group key (string or integer) to that group's :class:`~pymc_dp.Release`,
        in the order of the groups. All must share family, family settings, bounds, ε, ρ, δ,
        sensitivity and mechanism.
    by
        Name of the grouping variable (e.g. ``"hospital"``), for labels; ``None`` if unnamed.
    budget
        What a :class:`~pymc_dp.PrivacyBudget` recorded when it charged the set (once), or
        ``None``.

    Attributes
    ----------
    groups : tuple
        The group keys, in order.
    n : numpy.ndarray
        The public group sizes n_g, shape ``(G,)``.
    value : numpy.ndarray
        The released statistics, shape ``(G, *stat_shape)``.

    Notes
    -----
    The set is ``epsilon``-DP as a whole (parallel composition: each record is in one group),
    provided the group keys and sizes are public; see :mod:`pymc_dp.release_set`.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp as pmdp
    >>> x = np.array([1, 0, 1, 1, 0, 0, 1])
    >>> site = np.array(["a", "b", "a", "a", "b", "b", "b"])
    >>> rs = pmdp.release_grouped(x, pm.Bernoulli, epsilon=1.0, by=site, groups=["a", "b"],
    ...                           sizes="public", rng=0)
    >>> rs.groups, rs.n.tolist(), rs.epsilon
    (('a', 'b'), [3, 4], 1.0)
    >>> ReleaseSet.from_json(rs.to_json()) == rs
    True
    """

    releases: Mapping[GroupKey, Release]
    by: str | None = None
    budget: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.releases, Mapping):
            raise TypeError(
                f"releases must be a mapping from group key to Release (got "
                f"{type(self.releases).__name__})"
            )
        if len(self.releases) == 0:
            raise ValueError("releases must hold at least one group")
        checked: dict[GroupKey, Release] = {}
        for key, rel in self.releases.items():
            key = _check_key(key, "group keys")
            if key in checked or str(key) in {str(k) for k in checked}:
                raise ValueError(f"group keys must be distinct (got {key!r} twice)")
            if not isinstance(rel, Release):
                raise TypeError(
                    f"releases[{key!r}] must be a pymc_dp.Release (got {type(rel).__name__})"
                )
            checked[key] = rel
        first = next(iter(checked.values()))
        for key, rel in checked.items():
            for field in _SHARED_FIELDS:
                if getattr(rel, field) != getattr(first, field):
                    raise ValueError(
                        f"every group's release must share {field} (group {key!r} has "
                        f"{getattr(rel, field)!r}, the first group {getattr(first, field)!r})"
                    )
        if self.by is not None and not isinstance(self.by, str):
            raise TypeError(f"by must be a string naming the groups (got {self.by!r})")
        if self.budget is not None:
            if not isinstance(self.budget, Mapping):
                raise TypeError(f"budget must be a mapping (got {type(self.budget).__name__})")
            object.__setattr__(self, "budget", types.MappingProxyType(dict(self.budget)))
        object.__setattr__(self, "releases", types.MappingProxyType(checked))

    # ---- what every group shares ----------------------------------------------------------
    @property
    def groups(self) -> tuple[GroupKey, ...]:
        """The group keys, in order."""
        return tuple(self.releases)

    @property
    def first(self) -> Release:
        """The first group's release (family, window, ε and noise are shared by all)."""
        return next(iter(self.releases.values()))

    @property
    def family(self) -> str:
        """Family name, e.g. ``"binomial"``."""
        return self.first.family

    @property
    def epsilon(self) -> float:
        """ε of every group's release, which is also that of the whole set."""
        return self.first.epsilon

    @property
    def total_epsilon(self) -> float:
        """Privacy cost of the whole set (parallel composition): that of one group's release."""
        return self.first.total_epsilon

    @property
    def n(self) -> npt.NDArray[np.int64]:
        """Public group sizes n_g, shape ``(G,)``."""
        return np.array([rel.n for rel in self.releases.values()], dtype=np.int64)

    @property
    def value(self) -> npt.NDArray[np.float64]:
        """Released statistics, shape ``(G, *stat_shape)``."""
        return np.stack([rel.value for rel in self.releases.values()])

    def coords(self, dims: str = "group") -> dict[str, list[GroupKey]]:
        """Model coordinates of the groups: ``pm.Model(coords=release_set.coords())``."""
        return {dims: list(self.groups)}

    def __len__(self) -> int:
        return len(self.releases)

    def __getitem__(self, key: GroupKey) -> Release:
        return self.releases[key]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ReleaseSet):
            return NotImplemented
        return (
            self.groups == other.groups
            and all(a == b for a, b in zip(self.releases.values(), other.releases.values()))
            and self.by == other.by
            and json.dumps(_plain(self.budget), sort_keys=True)
            == json.dumps(_plain(other.budget), sort_keys=True)
        )

    __hash__ = None  # type: ignore[assignment]

    # ---- JSON ------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary: the groups in order, and each group's release."""
        return {
            "format_version": _SET_FORMAT_VERSION,
            "kind": "grouped",
            "by": self.by,
            "composition": "parallel",
            "total_epsilon": self.total_epsilon,
            "budget": _plain(self.budget),
            "groups": list(self.groups),
            "releases": [rel.to_dict() for rel in self.releases.values()],
        }

    def to_json(self, **kwargs: Any) -> str:
        """Serialise to a JSON string; ``kwargs`` go to :func:`json.dumps`."""
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReleaseSet:
        """Rebuild a set from :meth:`to_dict` output, checking every field strictly.

        Raises
        ------
        TypeError
            If a field has the wrong type (the message names it).
        ValueError
            If a field is missing, unknown or has a bad value; a group's release is checked as
            :meth:`Release.from_dict` does, and the message names the group.
        """
        if not isinstance(data, Mapping):
            raise TypeError(f"a grouped release must be a mapping (got {type(data).__name__})")
        expected = {
            "format_version",
            "kind",
            "by",
            "composition",
            "total_epsilon",
            "budget",
            "groups",
            "releases",
        }
        if set(data) - expected or {"groups", "releases", "kind"} - set(data):
            raise ValueError(
                f"a grouped release needs the fields {sorted(expected)} (got {sorted(data)})"
            )
        version = data.get("format_version", _SET_FORMAT_VERSION)
        if isinstance(version, bool) or version != _SET_FORMAT_VERSION:
            raise ValueError(
                f"unsupported grouped release format_version {version!r}; this version of "
                f"pymc_dp reads format_version {_SET_FORMAT_VERSION}"
            )
        if data["kind"] != "grouped":
            raise ValueError(f"kind must be 'grouped' (got {data['kind']!r})")
        if data.get("composition", "parallel") != "parallel":
            raise ValueError(f"composition must be 'parallel' (got {data['composition']!r})")
        groups, releases = data["groups"], data["releases"]
        if not isinstance(groups, list):
            raise TypeError(f"groups must be a list of keys (got {type(groups).__name__})")
        if not isinstance(releases, list):
            raise TypeError(f"releases must be a list (got {type(releases).__name__})")
        if len(groups) != len(releases):
            raise ValueError(
                f"groups and releases must have the same length (got {len(groups)} and "
                f"{len(releases)})"
            )
        parsed: dict[GroupKey, Release] = {}
        for key, item in zip(groups, releases, strict=True):
            key = _check_key(key, "groups")
            if key in parsed:
                raise ValueError(f"groups must be distinct (got {key!r} twice)")
            try:
                parsed[key] = Release.from_dict(item)
            except (TypeError, ValueError) as err:
                raise type(err)(f"group {key!r}: {err}") from None
        budget = data.get("budget")
        if budget is not None and not isinstance(budget, Mapping):
            raise TypeError(f"budget must be an object (got {budget!r})")
        rs = cls(parsed, by=data.get("by"), budget=budget)
        if data.get("total_epsilon") is not None:
            check_json_numbers(data["total_epsilon"], "total_epsilon", scalar=True)
            if not math.isclose(data["total_epsilon"], rs.total_epsilon, rel_tol=1e-12):
                raise ValueError(
                    f"total_epsilon {data['total_epsilon']!r} disagrees with the releases "
                    f"(which give {rs.total_epsilon!r})"
                )
        return rs

    @classmethod
    def from_json(cls, text: str) -> ReleaseSet:
        """Rebuild a set from :meth:`to_json` output."""
        return cls.from_dict(json.loads(text))


_SHARED_FIELDS = (
    "family",
    "family_params",
    "bounds",
    "epsilon",
    "sensitivity",
    "mechanism",
    "bounds_epsilon",
    "clamped",
    "quantum",
    "record_quantum",
    "rho",
    "delta",
)


def _plain(budget: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if budget is None else dict(budget)


def is_grouped_record(data: Any) -> bool:
    """Whether parsed JSON ``data`` is a grouped release (has ``"kind": "grouped"``)."""
    return isinstance(data, Mapping) and data.get("kind") == "grouped"


def release_grouped(
    x: npt.ArrayLike,
    family: Any,
    *,
    by: npt.ArrayLike,
    groups: Sequence[GroupKey],
    sizes: str | Mapping[GroupKey, int] | Sequence[int],
    epsilon: float | None = None,
    rng: int | np.random.Generator | None = None,
    budget: Any = None,
    label: str | None = None,
    by_name: str | None = None,
    **release_kwargs: Any,
) -> ReleaseSet:
    """Release the sufficient statistics of each group of ``x`` under differential privacy.

    Calls :func:`pymc_dp.release` once per group, with the same family, window, ε and
    mechanism, so each group's noise is calibrated to Δ/ε exactly as an ungrouped release of
    that group's records would be. Each record is in exactly one group, so by parallel
    composition the whole set costs ε once: a ``budget`` is checked before any noise is drawn
    (an overspend is refused) and charged once, when every group has been released.

    Parameters
    ----------
    x
        The records, a one-dimensional array (one value per record).
    family
        PyMC distribution class of one record, as for :func:`pymc_dp.release`.
    by
        The group key of each record, same length as ``x``.
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
    **release_kwargs
        Passed to :func:`pymc_dp.release`: ``bounds`` (public; ``"private"`` is refused, since
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
    for name in ("column", "client", "budget_label"):
        if name in release_kwargs:
            raise TypeError(f"release_grouped does not take {name}=; pass x as an array")
    if isinstance(release_kwargs.get("bounds"), str):
        raise ValueError(
            "release_grouped needs public bounds=(a, b), one window shared by every group; "
            "private bounds would choose a different window per group"
        )
    if by_name is not None and not isinstance(by_name, str):
        raise TypeError(f"by_name must be a string (got {by_name!r})")
    x = check_records(x, "x")
    codes = group_codes(by, groups, n_records=x.shape[0] if x.ndim else -1)
    counts = np.bincount(codes, minlength=len(groups))
    _check_sizes(sizes, groups, counts)
    empty = [g for g, c in zip(groups, counts, strict=True) if c == 0]
    if empty:
        raise ValueError(
            f"groups {empty!r} have no records; a release needs n >= 1, so drop them from groups"
        )
    order = np.argsort(codes, kind="stable")
    parts = np.split(x[order], np.cumsum(counts)[:-1])
    # Check every group's records (and the arguments) before any noise is drawn or budget spent.
    from pymc_dp.families import get_family

    fam = get_family(family, **_family_settings(release_kwargs))
    if not release_kwargs.get("clamp", False):
        for part in parts:
            fam.validate_data(part)
    generator = check_rng(rng) if rng is not None else None
    label = label if label is not None else f"{fam.name} by {by_name or 'group'}"
    if budget is not None:
        # A trial charge on a copy refuses an overspend before any noise is drawn; the real
        # charge, once for the whole set (parallel composition), follows the last group.
        _charge_once(
            _copy_budget(budget), release_kwargs.get("mechanism"), epsilon, release_kwargs, label
        )
    releases = {
        key: release(part, family, epsilon=epsilon, rng=generator, **release_kwargs)
        for key, part in zip(groups, parts, strict=True)
    }
    if budget is not None:
        _charge_once(budget, release_kwargs.get("mechanism"), epsilon, release_kwargs, label)
    return ReleaseSet(releases, by=by_name, budget=budget.receipt() if budget is not None else None)


def _copy_budget(budget: Any) -> Any:
    from pymc_dp.budget import PrivacyBudget

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
        _charge(budget, mechanism, math.sqrt(2.0 * rho), 0.0, label)
    else:
        if epsilon is None:
            raise TypeError("release_grouped needs epsilon=, the privacy budget of the set")
        _charge(budget, mechanism or "", check_positive(epsilon, "epsilon"), 0.0, label)


def _family_settings(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    names = ("trials", "categories", "alpha", "sigma")
    return {k: v for k, v in kwargs.items() if k in names}


def _check_groups(groups: Any) -> tuple[GroupKey, ...]:
    if isinstance(groups, str) or not isinstance(groups, Sequence | np.ndarray):
        raise TypeError(
            f"groups must be a list of the public group keys, e.g. ['a', 'b'] (got "
            f"{type(groups).__name__})"
        )
    keys = tuple(_check_key(g, "groups") for g in groups)
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
        if _is_missing(key):
            missing += 1
            first_missing = row if first_missing < 0 else first_missing
            continue
        code = _lookup(index, key)
        if code is None:
            unknown += 1
            first_unknown = row if first_unknown < 0 else first_unknown
            continue
        codes[row] = code
    if missing:
        raise ValueError(
            f"by has {missing} missing key(s) (first at record {first_missing}); every record "
            "needs a group key: fill them in or drop those records"
        )
    if unknown:
        raise ValueError(
            f"by has {unknown} key(s) not among groups (first at record {first_unknown}); the "
            "groups are public and are not read from the data: add the group or drop the records"
        )
    return codes


def _is_missing(key: Any) -> bool:
    if key is None:
        return True
    if isinstance(key, float | np.floating):
        return not math.isfinite(key)
    if isinstance(key, str):
        return key.strip().lower() in _MISSING_TEXT
    try:
        import pandas as pd

        return key is pd.NA or key is pd.NaT
    except ImportError:  # pragma: no cover
        return False


def _lookup(index: Mapping[Any, int], key: Any) -> int | None:
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
        keys = {_check_key(k, "sizes keys") for k in sizes}
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
