"""A release file of several columns, each with its public names: :class:`ReleaseFile`.

``pymc-dp release`` writes one when a call releases several columns (an explicit split of ε,
sequential composition), a regression (whose covariates and response have names the
:class:`~pymc_dp.regression.RegressionRelease` does not hold), or a Categorical column with
public category labels. Each entry is a :class:`ColumnRelease`: the release itself, unchanged,
beside the names an analyst needs to read the posterior (the column, the category labels, the
covariates). Names are public: they come from the curator's arguments, never from the records.

This module is on the curator's side too: it imports no inference code.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from pymc_dp.regression.release_record import RegressionRelease
from pymc_dp.release_record import Release

__all__ = ["KIND", "ColumnRelease", "ReleaseFile", "is_release_file"]

KIND = "pymc_dp.columns"
"""The ``kind`` field of a release file."""
_FORMAT_VERSION = 1


def _names(values: Any, what: str) -> tuple[str, ...]:
    """Distinct, non-empty strings without surrounding spaces, as a tuple."""
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise TypeError(f"{what} must be a list of strings (got {values!r})")
    names = tuple(values)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"{what} must be strings (got {name!r})")
        if not name or name != name.strip():
            raise ValueError(f"{what} must be non-empty, without surrounding spaces (got {name!r})")
    if len(set(names)) != len(names):
        raise ValueError(f"{what} must be distinct (got {', '.join(names)})")
    return names


@dataclasses.dataclass(frozen=True)
class ColumnRelease:
    """One release of a :class:`ReleaseFile`, with the public names of what it released.

    Attributes
    ----------
    column : str
        The released column (for a regression, the response).
    release : Release or RegressionRelease
        The release itself.
    labels : tuple of str or None
        A Categorical release's public category labels, in the order of its codes 0..K-1
        (``None``: the codes are the labels).
    covariates : tuple of str or None
        A regression's covariate columns, in the order of ``release.x_bounds``.

    Examples
    --------
    >>> import pymc as pm, pymc_dp as pmdp
    >>> rel = pmdp.release([0, 2, 1, 2], pm.Categorical, categories=3, epsilon=1.0, rng=0)
    >>> entry = ColumnRelease("colour", rel, labels=("red", "green", "blue"))
    >>> ColumnRelease.from_dict(entry.to_dict()).labels
    ('red', 'green', 'blue')
    """

    column: str
    release: Release | RegressionRelease
    labels: tuple[str, ...] | None = None
    covariates: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "column", _names([self.column], "column")[0])
        rel = self.release
        if not isinstance(rel, Release | RegressionRelease):
            raise TypeError(
                f"release must be a pymc_dp.Release or RegressionRelease (got {type(rel).__name__})"
            )
        if self.labels is not None:
            labels = _names(self.labels, "labels")
            family = rel.get_family() if isinstance(rel, Release) else None
            categories = getattr(family, "categories", None)
            if categories is None:
                raise ValueError("labels apply only to a Categorical release")
            if len(labels) != categories:
                raise ValueError(
                    f"labels must name the release's {categories} categories (got {len(labels)})"
                )
            object.__setattr__(self, "labels", labels)
        if self.covariates is not None:
            if not isinstance(rel, RegressionRelease):
                raise ValueError("covariates apply only to a regression release")
            covariates = _names(self.covariates, "covariates")
            if len(covariates) != rel.d:
                raise ValueError(
                    f"covariates must name the release's {rel.d} covariates (got {len(covariates)})"
                )
            if self.column in covariates:
                raise ValueError(f"the response {self.column!r} is also a covariate")
            object.__setattr__(self, "covariates", covariates)

    @property
    def is_regression(self) -> bool:
        """Whether the entry is a regression release."""
        return isinstance(self.release, RegressionRelease)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary."""
        return {
            "column": self.column,
            "labels": None if self.labels is None else list(self.labels),
            "covariates": None if self.covariates is None else list(self.covariates),
            "release": self.release.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ColumnRelease:
        """Rebuild an entry from :meth:`to_dict` output, checking every field."""
        if not isinstance(data, Mapping):
            raise TypeError(f"a release file entry must be an object (got {data!r})")
        fields = {"column", "labels", "covariates", "release"}
        if set(data) - fields or "column" not in data or "release" not in data:
            raise ValueError(f"a release file entry needs the fields {sorted(fields)}")
        inner = data["release"]
        if not isinstance(inner, Mapping):
            raise TypeError(f"release must be an object (got {type(inner).__name__})")
        # A regression release says so in its kind; a family release has none.
        regression = "kind" in inner
        rel = RegressionRelease.from_dict(inner) if regression else Release.from_dict(inner)
        return cls(
            data["column"], rel, labels=data.get("labels"), covariates=data.get("covariates")
        )


@dataclasses.dataclass(frozen=True)
class ReleaseFile:
    """Several releases of one data set made in one call, each with its column's names.

    Attributes
    ----------
    releases : tuple of ColumnRelease
        The releases, in the order of the call; their columns are distinct.
    epsilon : float
        Privacy cost of the whole call: the sum of the releases' ε (sequential composition).
    budget : Mapping or None
        What a :class:`~pymc_dp.budget.PrivacyBudget` recorded when it charged the call, once.

    Examples
    --------
    >>> import pymc as pm, pymc_dp as pmdp
    >>> a = pmdp.release([0, 1, 1], pm.Bernoulli, epsilon=0.3, rng=0)
    >>> b = pmdp.release([2, 0, 5], pm.Poisson, bounds=(0, 10), epsilon=0.7, rng=1)
    >>> rf = ReleaseFile((ColumnRelease("smoker", a), ColumnRelease("visits", b)), epsilon=1.0)
    >>> rf.columns, rf["visits"].release.family
    (('smoker', 'visits'), 'poisson')
    >>> ReleaseFile.from_json(rf.to_json()).columns
    ('smoker', 'visits')
    """

    releases: tuple[ColumnRelease, ...]
    epsilon: float
    budget: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        releases = tuple(self.releases)
        if not releases or not all(isinstance(r, ColumnRelease) for r in releases):
            raise TypeError("releases must be a non-empty sequence of ColumnRelease")
        _names([r.column for r in releases], "the columns of a release file")
        object.__setattr__(self, "releases", releases)
        total = math.fsum(r.release.total_epsilon for r in releases)
        epsilon = self.epsilon
        if isinstance(epsilon, bool) or not isinstance(epsilon, int | float):
            raise TypeError(f"epsilon must be a number (got {epsilon!r})")
        if not math.isclose(float(epsilon), total, rel_tol=1e-9):
            raise ValueError(
                f"epsilon must be the sum of the releases' epsilon, {total:g} (got {epsilon!r})"
            )
        object.__setattr__(self, "epsilon", float(epsilon))
        if self.budget is not None and not isinstance(self.budget, Mapping):
            raise TypeError(f"budget must be an object (got {self.budget!r})")

    @property
    def columns(self) -> tuple[str, ...]:
        """The released columns, in order."""
        return tuple(r.column for r in self.releases)

    def __len__(self) -> int:
        return len(self.releases)

    def __getitem__(self, column: str) -> ColumnRelease:
        """The entry of ``column``; a ``ValueError`` naming the columns if there is none."""
        for entry in self.releases:
            if entry.column == column:
                return entry
        raise ValueError(
            f"no release of column {column!r}; the file holds {', '.join(map(repr, self.columns))}"
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary (:meth:`from_dict` reads it back)."""
        return {
            "format_version": _FORMAT_VERSION,
            "kind": KIND,
            "epsilon": self.epsilon,
            "budget": None if self.budget is None else dict(self.budget),
            "releases": [r.to_dict() for r in self.releases],
        }

    def to_json(self, **kwargs: Any) -> str:
        """Serialise to a JSON string; ``kwargs`` go to :func:`json.dumps`."""
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReleaseFile:
        """Rebuild a release file from :meth:`to_dict` output, checking every field."""
        if not is_release_file(data):
            raise ValueError(f"a release file has kind {KIND!r}")
        data = dict(data)
        version = data.pop("format_version", None)
        if version != _FORMAT_VERSION or isinstance(version, bool):
            raise ValueError(
                f"unsupported release file format_version {version!r}; this version of "
                f"pymc_dp reads format_version {_FORMAT_VERSION}"
            )
        data.pop("kind")
        fields = {"epsilon", "budget", "releases"}
        if set(data) != fields:
            raise ValueError(
                f"a release file needs the fields {sorted(fields)} (got {sorted(data)})"
            )
        if not isinstance(data["releases"], list):
            raise TypeError("releases must be a list")
        entries = tuple(ColumnRelease.from_dict(r) for r in data["releases"])
        return cls(entries, epsilon=data["epsilon"], budget=data["budget"])

    @classmethod
    def from_json(cls, text: str) -> ReleaseFile:
        """Rebuild a release file from :meth:`to_json` output."""
        return cls.from_dict(json.loads(text))


def is_release_file(data: Any) -> bool:
    """Whether parsed JSON is a :class:`ReleaseFile` (its ``kind`` says so)."""
    return isinstance(data, Mapping) and data.get("kind") == KIND
