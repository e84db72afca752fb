"""Release files: :func:`write_release`, :func:`read_release`, and files of several columns.

A release file holds one :class:`~pymc_dp.Release`, one :class:`~pymc_dp.ReleaseSet` (every
group), or a :class:`ReleaseFile` of several columns, each with its public names.

``pymc-dp release`` writes one when a call releases several columns (an explicit split of ε,
sequential composition), a regression (whose covariates and response have names the
:class:`~pymc_dp.regression.RegressionRelease` does not hold), or a Categorical column with
public category labels. Each entry is a :class:`ColumnRelease`: the release itself, unchanged,
beside the names an analyst needs to read the posterior (the column, the category labels, the
covariates). Names are public: they come from the curator's arguments, never from the records.

This module is on the curator's side too: it imports no inference code.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pymc_dp.curator.atomic import write_temporary, write_text_atomic
from pymc_dp.curator.budget import check_receipt
from pymc_dp.curator.data_files import InputFileError
from pymc_dp.curator.record import Release
from pymc_dp.curator.regression.record import RegressionRelease
from pymc_dp.curator.release_set import ReleaseSet, is_grouped_record
from pymc_dp.curator.strict_json import strict_loads

__all__ = [
    "KIND",
    "ColumnRelease",
    "ReleaseFile",
    "is_release_file",
    "read_release",
    "write_release",
]

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
        What a :class:`~pymc_dp.curator.budget.PrivacyBudget` recorded when it charged the call,
        once.

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
        if self.budget is not None:
            object.__setattr__(self, "budget", check_receipt(self.budget))

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
        return cls.from_dict(strict_loads(text))


def is_release_file(data: Any) -> bool:
    """Whether parsed JSON is a :class:`ReleaseFile` (its ``kind`` says so)."""
    return isinstance(data, Mapping) and data.get("kind") == KIND


def write_release(release: Any, path: str | Path, *, overwrite: bool = True) -> Path:
    """Write a release as indented JSON (:meth:`~pymc_dp.Release.to_json`); return the path.

    The file is written whole to a temporary file beside ``path`` and then moved into place,
    so an interrupted write never leaves a truncated release or loses an earlier one.

    Parameters
    ----------
    release
        The release to write: a :class:`~pymc_dp.Release`, a :class:`~pymc_dp.ReleaseSet`
        (every group in one file) or a :class:`~pymc_dp.curator.release_file.ReleaseFile` (several
        columns, with their names).
    path
        The JSON file.
    overwrite
        Whether an existing ``path`` may be replaced. With ``False`` the existence check and
        the write are one atomic step (a hard link), so of several writers racing for one
        path exactly one succeeds.

    Raises
    ------
    InputFileError
        If ``path`` exists and ``overwrite`` is ``False``.
    """
    if not isinstance(release, Release | ReleaseSet | ReleaseFile):
        raise TypeError(
            "release must be a pymc_dp.Release, ReleaseSet or ReleaseFile (got "
            f"{type(release).__name__})"
        )
    path = Path(path)
    text = release.to_json(indent=2) + "\n"
    if overwrite:
        return write_text_atomic(path, text)
    temporary = None
    try:
        temporary = write_temporary(path, text, shared=True)  # a release is meant to be shared
        try:
            try:
                os.link(temporary, path)  # fails if path exists: check and write at once
            except FileExistsError:
                raise
            except OSError:  # a file system without hard links: create exclusively
                with open(path, "x", encoding="utf-8") as handle:
                    handle.write(text)
        except FileExistsError:
            raise InputFileError(
                f"{path} exists; pass --overwrite (overwrite=True) to replace it (a new "
                "release of the same data spends epsilon again)"
            ) from None
    except OSError as err:  # e.g. a full disk: name the file, whatever call failed
        raise OSError(err.errno, err.strerror or str(err), str(path)) from None
    finally:
        if temporary is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
    return path


def read_release(
    path: str | Path, *, allow_grouped: bool = False, allow_columns: bool = False
) -> Any:
    """Read and check a release written by :func:`write_release` or ``pymc-dp release``.

    With ``allow_grouped=True`` a grouped release file gives a :class:`~pymc_dp.ReleaseSet`;
    with ``allow_columns=True`` a file of several columns (or of a regression, or of labelled
    categories) gives a :class:`~pymc_dp.curator.release_file.ReleaseFile`, and so does a bare
    regression release (its covariates unnamed); otherwise only a single
    :class:`~pymc_dp.Release` is accepted.

    Raises
    ------
    FileNotFoundError
        If there is no such file.
    InputFileError
        If the file is not JSON, or not a valid release (the message says which field).

    Examples
    --------
    >>> import pathlib, tempfile, pymc as pm, pymc_dp as pmdp
    >>> rel = pmdp.release([0, 1, 1], pm.Bernoulli, epsilon=1.0, rng=0)
    >>> path = write_release(rel, pathlib.Path(tempfile.mkdtemp()) / "release.json")
    >>> read_release(path) == rel
    True
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        data = strict_loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise InputFileError(f"{path}: not a text file; expected a release in JSON") from None
    except json.JSONDecodeError as err:
        raise InputFileError(
            f"{path}: not valid JSON ({err.msg} at line {err.lineno}, column {err.colno}); "
            "expected a release written by pymc-dp release"
        ) from None
    except ValueError as err:  # strict_loads: a duplicate key, a huge integer, deep nesting
        raise InputFileError(f"{path}: not a valid release file ({err})") from None
    if not isinstance(data, dict):
        raise InputFileError(
            f"{path}: expected a JSON object with the release's fields (got {type(data).__name__})"
        )
    regression = data.get("kind") == "regression"
    if is_release_file(data) or regression:
        if not allow_columns:
            what = "regression release" if regression else "release file of named columns"
            raise InputFileError(
                f"{path}: a {what}; read it with "
                "pymc_dp.curator.read_release(path, allow_columns=True)"
            )
        try:
            if regression:
                from pymc_dp.curator.regression.record import RegressionRelease

                rel = RegressionRelease.from_dict(data)
                return ReleaseFile((ColumnRelease("y", rel),), epsilon=rel.total_epsilon)
            return ReleaseFile.from_dict(data)
        except (TypeError, ValueError) as err:
            kind = "regression release" if regression else "release file"
            raise InputFileError(f"{path}: not a valid pymc_dp {kind}: {err}") from None
    grouped = is_grouped_record(data)
    if grouped and not allow_grouped:
        raise InputFileError(
            f"{path}: a grouped release (one release per group); read it with "
            "pymc_dp.curator.read_release(path, allow_grouped=True)"
        )
    try:
        return ReleaseSet.from_dict(data) if grouped else Release.from_dict(data)
    except (TypeError, ValueError) as err:
        kind = "grouped release" if grouped else "release"
        raise InputFileError(f"{path}: not a valid pymc_dp {kind}: {err}") from None
