"""Noisy marginal count tables of categorical columns (:func:`pymc_dp.release_marginals`).

The release is the cell counts of each queried marginal, with vetted integer noise from OpenDP:
discrete Laplace at the L1 sensitivity 2M, or the discrete Gaussian at the L2 sensitivity √(2M),
for M marginals under replace-one neighbours (replacing one record moves one count of each table
down by one and one up by one, or leaves the table alone). The domains are public: the labels of
every column are declared by the curator, never read from the data, and a record outside them is
an error (dropping it silently would change what the release says, not its privacy).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from pymc_dp._validation import check_positive
from pymc_dp.curator.budget import PrivacyBudget
from pymc_dp.kernels.loglinear import LogLinearDomain
from pymc_dp.mechanisms.laplace import laplace_mechanism
from pymc_dp.mechanisms.vetted import (
    DISCRETE_GAUSSIAN,
    DISCRETE_LAPLACE,
    LAPLACE_FLOAT,
    discrete_gaussian_mechanism,
    discrete_laplace_mechanism,
    library_version,
    zcdp_to_approx_dp,
)

__all__ = [
    "KIND",
    "MarginalRelease",
    "marginal_tables",
    "marginals_sensitivity",
    "read_marginal_release",
    "release_marginals",
    "write_marginal_release",
]

KIND = "marginals"
"""The ``kind`` field of a marginal release file."""
_MECHANISMS = (DISCRETE_LAPLACE, DISCRETE_GAUSSIAN, LAPLACE_FLOAT)


def marginals_sensitivity(n_marginals: int, norm: str) -> float:
    """Sensitivity of M concatenated marginal tables under replace-one neighbours.

    Each table changes in at most two cells, by -1 and +1: L1 = 2M and L2 = √(2M).

    Examples
    --------
    >>> marginals_sensitivity(3, "l1"), round(marginals_sensitivity(3, "l2"), 4)
    (6.0, 2.4495)
    """
    if norm == "l1":
        return 2.0 * n_marginals
    if norm == "l2":
        return math.sqrt(2.0 * n_marginals)
    raise ValueError(f"norm must be 'l1' or 'l2' (got {norm!r})")


@dataclasses.dataclass(frozen=True, eq=False)
class MarginalRelease:
    """Noisy marginal count tables of categorical columns over public domains.

    Attributes
    ----------
    columns : tuple of str
        The column names.
    domains : tuple of tuple
        The public labels of each column, in the order that defines its level codes.
    marginals : tuple of tuple of str
        The queried marginals, each a tuple of column names.
    value : tuple of numpy.ndarray
        The noisy table of each marginal, shaped by its columns' domain sizes.
    n : int
        The number of records (public under replace-one neighbours).
    mechanism : str
        ``"discrete-laplace"``, ``"discrete-gaussian"`` or ``"laplace-float"`` (seeded studies).
    sensitivity : float
        L1 (Laplace) or L2 (Gaussian) sensitivity of all tables together.
    noise_scale : float
        b = Δ/ε of the Laplace laws, or σ = Δ₂/√(2ρ) of the Gaussian.
    epsilon, rho, delta : float or None
        The guarantee: ε-DP (Laplace), or ρ-zCDP with the ε of (ε, δ)-DP when δ was given.
    library : str
        The sampler library and version.
    """

    columns: tuple[str, ...]
    domains: tuple[tuple[Any, ...], ...]
    marginals: tuple[tuple[str, ...], ...]
    value: tuple[npt.NDArray[np.float64], ...]
    n: int
    mechanism: str
    sensitivity: float
    noise_scale: float
    epsilon: float | None = None
    rho: float | None = None
    delta: float | None = None
    library: str = ""

    def __post_init__(self) -> None:
        columns = tuple(str(c) for c in self.columns)
        if len(set(columns)) != len(columns):
            raise ValueError(f"columns must be distinct (got {columns})")
        domains = tuple(tuple(d) for d in self.domains)
        if len(domains) != len(columns):
            raise ValueError("domains must give one list of labels per column")
        marginals = tuple(tuple(str(c) for c in m) for m in self.marginals)
        object.__setattr__(self, "columns", columns)
        object.__setattr__(self, "domains", domains)
        object.__setattr__(self, "marginals", marginals)
        dom = self.domain  # checks the sizes and marginals
        values = []
        for m, v, size in zip(marginals, self.value, dom.table_sizes, strict=True):
            shape = tuple(len(domains[columns.index(c)]) for c in m)
            v = np.array(v, dtype=float)
            if v.size != size or not np.all(np.isfinite(v)):
                raise ValueError(f"the table of {m} must hold {size} finite counts")
            v = v.reshape(shape)
            v.setflags(write=False)
            values.append(v)
        object.__setattr__(self, "value", tuple(values))
        if self.mechanism not in _MECHANISMS:
            raise ValueError(f"mechanism must be one of {list(_MECHANISMS)}")
        if isinstance(self.n, bool) or int(self.n) != self.n or self.n < 1:
            raise ValueError(f"n must be a positive integer (got {self.n!r})")
        object.__setattr__(self, "n", int(self.n))
        check_positive(self.noise_scale, "noise_scale")
        check_positive(self.sensitivity, "sensitivity")

    @functools.cached_property
    def domain(self) -> LogLinearDomain:
        """The product domain and the features of the marginals (:class:`LogLinearDomain`).

        Built once per release: the domain caches its own projection and feature matrices, which
        every likelihood, the Laplace fit and the synthetic data read.
        """
        index = {c: k for k, c in enumerate(self.columns)}
        for m in self.marginals:
            for c in m:
                if c not in index:
                    raise ValueError(f"marginal {m} names {c!r}, not one of {self.columns}")
        return LogLinearDomain(
            tuple(len(d) for d in self.domains),
            tuple(tuple(index[c] for c in m) for m in self.marginals),
        )

    @property
    def y(self) -> npt.NDArray[np.float64]:
        """The noisy tables concatenated (each row-major), in the order of ``marginals``."""
        return np.concatenate([v.ravel() for v in self.value])

    @property
    def gaussian(self) -> bool:
        """Whether the noise is the discrete Gaussian."""
        return self.mechanism == DISCRETE_GAUSSIAN

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the release (``kind: "marginals"``)."""
        return {
            "kind": KIND,
            "format_version": 1,
            "columns": list(self.columns),
            "domains": [list(d) for d in self.domains],
            "marginals": [list(m) for m in self.marginals],
            "value": [v.ravel().tolist() for v in self.value],
            "n": self.n,
            "mechanism": self.mechanism,
            "sensitivity": self.sensitivity,
            "noise_scale": self.noise_scale,
            "epsilon": self.epsilon,
            "rho": self.rho,
            "delta": self.delta,
            "library": self.library,
        }

    def to_json(self, **kwargs: Any) -> str:
        """The release as JSON text."""
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MarginalRelease:
        """Rebuild a release from :meth:`to_dict`'s output, checking its fields."""
        if not isinstance(data, Mapping) or data.get("kind") != KIND:
            raise ValueError("not a marginal release (its kind must be 'marginals')")
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in fields})

    @classmethod
    def from_json(cls, text: str) -> MarginalRelease:
        """Rebuild a release from :meth:`to_json`'s output."""
        return cls.from_dict(json.loads(text))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MarginalRelease):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]


def write_marginal_release(release: MarginalRelease, path: str | Path) -> Path:
    """Write a :class:`MarginalRelease` as indented JSON; return the path."""
    if not isinstance(release, MarginalRelease):
        raise TypeError(f"release must be a MarginalRelease (got {type(release).__name__})")
    path = Path(path)
    path.write_text(release.to_json(indent=2) + "\n", encoding="utf-8")
    return path


def read_marginal_release(path: str | Path) -> MarginalRelease:
    """Read a release written by :func:`write_marginal_release`."""
    return MarginalRelease.from_json(Path(path).read_text(encoding="utf-8"))


def _column_values(data: Any, column: str) -> np.ndarray:
    if isinstance(data, Mapping):
        if column not in data:
            raise ValueError(f"columns names {column!r}, which data does not hold")
        return np.asarray(data[column], dtype=object)
    import narwhals.stable.v2 as nw

    try:
        frame = nw.from_native(data)
    except TypeError:
        raise TypeError(
            "data must be a mapping of column name to values or a data frame (pandas, Polars, "
            f"DuckDB, ...; got {type(data).__name__})"
        ) from None
    if column not in frame.columns:
        raise ValueError(f"columns names {column!r}, which data does not hold")
    selected = frame.select(column)
    if isinstance(selected, nw.LazyFrame):
        selected = selected.collect()
    return np.asarray(selected.get_column(column).to_list(), dtype=object)


def _codes(values: np.ndarray, labels: tuple[Any, ...], column: str) -> np.ndarray:
    lookup = {label: code for code, label in enumerate(labels)}
    out = np.empty(len(values), dtype=np.int64)
    for i, v in enumerate(values):
        code = lookup.get(v.item() if isinstance(v, np.generic) else v)
        if code is None:
            raise ValueError(
                f"record {i} of column {column!r} is {v!r}, outside its declared domain "
                f"{list(labels)}: add the label to domains= or recode the data (records are "
                "never dropped silently)"
            )
        out[i] = code
    return out


def marginal_tables(
    data: Any,
    *,
    columns: Sequence[str],
    domains: Mapping[str, Sequence[Any]] | Sequence[Sequence[Any]],
    marginals: Sequence[Sequence[str]],
) -> tuple[tuple[tuple[Any, ...], ...], LogLinearDomain, npt.NDArray[np.int64], int]:
    """The exact tables (concatenated) of the records, with the domains and their features."""
    columns = tuple(columns)
    if isinstance(domains, Mapping):
        missing = [c for c in columns if c not in domains]
        if missing:
            raise ValueError(f"domains must declare the labels of every column (missing {missing})")
        labels = tuple(tuple(domains[c]) for c in columns)
    else:
        labels = tuple(tuple(d) for d in domains)
    if len(labels) != len(columns):
        raise ValueError("domains must give one list of labels per column")
    for c, d in zip(columns, labels, strict=True):
        if len(d) < 2 or len(set(d)) != len(d):
            raise ValueError(f"the domain of {c!r} must hold at least 2 distinct labels")
    index = {c: k for k, c in enumerate(columns)}
    for m in marginals:
        if isinstance(m, str):
            raise TypeError(f"each marginal is a tuple of column names (got the string {m!r})")
        for c in m:
            if c not in index:
                raise ValueError(f"marginal {tuple(m)} names {c!r}, not one of columns={columns}")
    dom = LogLinearDomain(
        tuple(len(d) for d in labels), tuple(tuple(index[c] for c in m) for m in marginals)
    )
    codes = np.stack(
        [_codes(_column_values(data, c), d, c) for c, d in zip(columns, labels, strict=True)],
        axis=1,
    )
    if codes.shape[0] < 1:
        raise ValueError("data holds no records")
    return labels, dom, dom.tables(codes), int(codes.shape[0])


def release_marginals(
    data: Any,
    *,
    columns: Sequence[str],
    domains: Mapping[str, Sequence[Any]] | Sequence[Sequence[Any]],
    marginals: Sequence[Sequence[str]],
    epsilon: float | None = None,
    rho: float | None = None,
    delta: float | None = None,
    mechanism: str | None = None,
    rng: Any = None,
    budget: PrivacyBudget | None = None,
) -> MarginalRelease:
    """Release noisy marginal count tables of categorical columns.

    Parameters
    ----------
    data
        The records: a mapping of column name to values, or a data frame (pandas, Polars, ...).
    columns
        The columns of the log-linear model, in order.
    domains
        The public labels of each column (a mapping from column name, or one sequence per
        column): declared, never read from the data.
    marginals
        The marginals to release, each a tuple of column names, e.g. ``[("a",), ("a", "b")]``.
    epsilon, rho
        ε for the Laplace mechanisms, or ρ (zCDP) for ``"discrete-gaussian"``.
    delta
        For the Gaussian mechanism, the δ at which to record the ε of (ε, δ)-DP.
    mechanism
        ``"discrete-laplace"`` (default), ``"discrete-gaussian"``, or ``"laplace-float"`` (the
        default with ``rng``; seeded studies only, not a real release).
    rng
        Seed or generator for ``"laplace-float"``.
    budget
        A :class:`~pymc_dp.PrivacyBudget` charged once, before noise is drawn.

    Returns
    -------
    MarginalRelease

    Examples
    --------
    >>> rel = release_marginals(
    ...     {"a": ["x", "y", "y"], "b": [0, 1, 1]}, columns=["a", "b"],
    ...     domains={"a": ["x", "y"], "b": [0, 1]}, marginals=[("a", "b")], epsilon=1.0, rng=0)
    >>> rel.value[0].shape, rel.sensitivity
    ((2, 2), 2.0)
    """
    if mechanism is None:
        mechanism = DISCRETE_LAPLACE if rng is None else LAPLACE_FLOAT
    if mechanism not in _MECHANISMS:
        raise ValueError(f"mechanism must be one of {list(_MECHANISMS)} (got {mechanism!r})")
    if mechanism != LAPLACE_FLOAT and rng is not None:
        raise ValueError(
            f"mechanism={mechanism!r} draws from the operating system (OpenDP) and cannot be "
            "seeded: drop rng, or pass mechanism='laplace-float' for a seeded study"
        )
    gaussian = mechanism == DISCRETE_GAUSSIAN
    if gaussian:
        if epsilon is not None or rho is None:
            raise ValueError("mechanism='discrete-gaussian' takes rho= (zCDP), not epsilon=")
        rho = check_positive(rho, "rho")
    else:
        if rho is not None or epsilon is None or delta is not None:
            raise ValueError(f"mechanism={mechanism!r} takes epsilon= only (not rho= or delta=)")
        epsilon = check_positive(epsilon, "epsilon")
    if budget is not None and not isinstance(budget, PrivacyBudget):
        raise TypeError(f"budget must be a pymc_dp.PrivacyBudget (got {type(budget).__name__})")
    labels, dom, tables, n = marginal_tables(
        data, columns=columns, domains=domains, marginals=marginals
    )
    n_marg = len(dom.marginals)
    if budget is not None:
        budget.spend(epsilon=epsilon, rho=rho, label=f"marginals {list(map(tuple, marginals))}")
    if gaussian:
        sens = marginals_sensitivity(n_marg, "l2")
        noisy = discrete_gaussian_mechanism(tables, sensitivity=sens, rho=rho)
        scale = sens / math.sqrt(2.0 * rho)  # type: ignore[operator]
        if delta is not None:
            epsilon = zcdp_to_approx_dp(rho, delta)  # type: ignore[arg-type]
        library = library_version()
    else:
        sens = marginals_sensitivity(n_marg, "l1")
        scale = sens / epsilon  # type: ignore[operator]
        if mechanism == DISCRETE_LAPLACE:
            noisy = discrete_laplace_mechanism(tables, sensitivity=sens, epsilon=epsilon)
            library = library_version()
        else:
            noisy = laplace_mechanism(
                tables.astype(float),
                sensitivity=sens,
                epsilon=epsilon,
                rng=np.random.default_rng(rng),
                magnitude=float(n),
            )
            library = f"numpy {np.__version__}"
    splits = np.cumsum(dom.table_sizes)[:-1]
    return MarginalRelease(
        columns=tuple(columns),
        domains=labels,
        marginals=tuple(tuple(m) for m in marginals),
        value=tuple(np.split(np.asarray(noisy, dtype=float), splits)),
        n=n,
        mechanism=mechanism,
        sensitivity=sens,
        noise_scale=scale,
        epsilon=epsilon,
        rho=rho,
        delta=delta,
        library=library,
    )
