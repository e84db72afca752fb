"""The :class:`ReleaseSet` record: one :class:`~pymc_dp.Release` per public group, in one file.

Written by the curator (:func:`pymc_dp.release_grouped`, :mod:`pymc_dp.curator.grouped`), read
by the analyst (:class:`~pymc_dp.NoisySuffStat` with ``dims``). The set holds the groups' keys,
in order, and each group's release; every group shares the family, window, ε and mechanism.

The set is ε-DP as a whole by parallel composition, provided the group keys and sizes are
public; :mod:`pymc_dp.curator.grouped` and the documentation's privacy page say why.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import types
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from pymc_dp._validation import check_json_numbers
from pymc_dp.curator.budget import check_receipt
from pymc_dp.curator.record import Release
from pymc_dp.curator.strict_json import strict_loads

__all__ = ["MISSING_KEY_TEXT", "GroupKey", "ReleaseSet", "check_key", "is_grouped_record"]

GroupKey = str | int
"""A public group key: a string, or an integer (a code such as a stage or a year)."""

_SET_FORMAT_VERSION = 1
MISSING_KEY_TEXT = frozenset({"", "na", "nan", "null", "none", "n/a"})
"""Group keys (after stripping, any case) that mean "missing"."""


def check_key(key: Any, name: str) -> GroupKey:
    """A group key as ``str`` or ``int``; anything else (floats, booleans, None) is refused."""
    if isinstance(key, bool | np.bool_) or not isinstance(key, str | numbers.Integral):
        raise TypeError(
            f"{name} must be strings or integers, the public group keys (got "
            f"{type(key).__name__}: {key!r})"
        )
    if isinstance(key, str):
        if key.strip().lower() in MISSING_KEY_TEXT:
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

    The group keys, their public sizes and the released statistics are the properties
    ``groups``, ``n`` and ``value`` (shapes ``(G,)`` and ``(G, *stat_shape)``).

    Notes
    -----
    The set is ``epsilon``-DP as a whole (parallel composition: each record is in one group),
    provided the group keys and sizes are public; see :mod:`pymc_dp.curator.release_set`.

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
            key = check_key(key, "group keys")
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
            receipt = check_receipt(self.budget)
            object.__setattr__(self, "budget", types.MappingProxyType(receipt))
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

    @property
    def window_count(self) -> npt.NDArray[np.float64] | None:
        """Released window counts, shape ``(G,)``, or ``None`` for sums released alone."""
        if self.first.window_count is None:
            return None
        return np.array([rel.window_count for rel in self.releases.values()], dtype=np.float64)

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
            key = check_key(key, "groups")
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
        return cls.from_dict(strict_loads(text))


_SHARED_FIELDS = (
    "family",
    "family_params",
    "bounds",
    "epsilon",
    "sensitivity",
    "mechanism",
    "bounds_epsilon",
    "bounds_mechanism",
    "clamped",
    "quantum",
    "record_quantum",
    "rho",
    "delta",
    "count_epsilon",
)


def _plain(budget: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if budget is None else dict(budget)


def is_grouped_record(data: Any) -> bool:
    """Whether parsed JSON ``data`` is a grouped release (has ``"kind": "grouped"``)."""
    return isinstance(data, Mapping) and data.get("kind") == "grouped"
