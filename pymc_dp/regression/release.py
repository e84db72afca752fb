"""Curator side: release the regression statistics (and optionally moments of x) with Laplace noise.

This module never imports inference code. A :class:`RegressionRelease` carries everything the
analyst needs (value, n, ε, Δ, bounds, and the optional noisy moments of the covariates) and
nothing about individual records.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import types
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from pymc_dp._validation import (
    MAX_N,
    check_bool,
    check_finite_array,
    check_int,
    check_json_numbers,
    check_positive,
    check_rng,
)
from pymc_dp.exact_sums import BATCH, combine_totals
from pymc_dp.frames import exact_totals, is_frame
from pymc_dp.mechanisms import DISCRETE_GAUSSIAN, LAPLACE_FLOAT, laplace_mechanism, noise_scale
from pymc_dp.regression.exact import RegressionPlan
from pymc_dp.regression.sensitivity import (
    check_box,
    monomial_ranges,
    regression_sensitivity,
    sum_of_ranges,
)
from pymc_dp.regression.statistics import (
    covariate_powers,
    d_from_released,
    statistic_powers,
)
from pymc_dp.release_noise import ExactTotal, check_mechanism, vetted_laplace_total

__all__ = [
    "FOURTH_DEGREES",
    "SECOND_DEGREES",
    "MomentRelease",
    "RegressionRelease",
    "release_regression",
]

SECOND_DEGREES = (1, 2)
"""Total degrees of the covariate monomials in the "second moments" release."""
FOURTH_DEGREES = (3, 4)
"""Total degrees of the covariate monomials in the "fourth moments" release (with the second
moments these give every raw moment up to order 4 that the CLT of the statistic needs)."""

_FORMAT_VERSION = 2
"""Format 2 adds quantum, record_quantum, library and budget (and a moment release's quantum);
format 1 is read, its list ``quantum`` (the record grid steps) as ``record_quantum``."""
_KIND = "regression"


@dataclasses.dataclass(frozen=True, eq=False)
class MomentRelease:
    """Noisy sums ``Σ_i Π_j x_ij^powers[k, j]`` of covariate monomials.

    Attributes
    ----------
    value : numpy.ndarray
        The released noisy sums, shape ``(K,)`` (read-only). Divide by n for moments.
    powers : numpy.ndarray
        Exponents of ``x_1..x_d`` of each monomial, shape ``(K, d)`` (read-only).
    epsilon : float
        Privacy budget spent on this release.
    sensitivity : float
        L1 sensitivity of the sums over the covariate box (sum of the monomials' ranges), the
        fixed-point rounding included for a vetted release.
    quantum : float or None
        Fixed-point quantum of a vetted release; ``None`` for ``"laplace-float"``.
    """

    value: npt.NDArray[np.float64]
    powers: npt.NDArray[np.int64]
    epsilon: float
    sensitivity: float
    quantum: float | None = None

    def __post_init__(self) -> None:
        value = np.array(self.value, dtype=np.float64)
        powers = np.array(self.powers, dtype=np.int64)
        if value.ndim != 1 or powers.ndim != 2 or powers.shape[0] != value.shape[0]:
            raise ValueError(
                f"value (K,) and powers (K, d) do not fit (got {value.shape} and {powers.shape})"
            )
        if not np.all(np.isfinite(value)):
            raise ValueError("value must be finite")
        value.setflags(write=False)
        powers.setflags(write=False)
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "powers", powers)
        object.__setattr__(self, "epsilon", check_positive(self.epsilon, "epsilon"))
        object.__setattr__(self, "sensitivity", check_positive(self.sensitivity, "sensitivity"))
        object.__setattr__(self, "quantum", _check_quantum(self.quantum))

    @property
    def scale(self) -> float:
        """Laplace scale Δ/ε of the noise on every sum."""
        return self.sensitivity / self.epsilon

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary (floats round-trip exactly through :mod:`json`)."""
        return {
            "value": self.value.tolist(),
            "powers": self.powers.tolist(),
            "epsilon": self.epsilon,
            "sensitivity": self.sensitivity,
            "quantum": self.quantum,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MomentRelease:
        """Rebuild from :meth:`to_dict` output, checking every field."""
        _check_keys(
            data,
            {"value", "powers", "epsilon", "sensitivity", "quantum"},
            "a moment release",
            required={"value", "powers", "epsilon", "sensitivity"},
        )
        if data.get("quantum") is not None:
            check_json_numbers(data["quantum"], "quantum", scalar=True)
        _check_fields(data, lists=("value",), scalars=("epsilon", "sensitivity"))
        if not isinstance(data["powers"], list | tuple) or not all(
            isinstance(row, list | tuple)
            and all(isinstance(k, int) and not isinstance(k, bool) for k in row)
            for row in data["powers"]
        ):
            raise TypeError(f"powers must be a list of lists of integers (got {data['powers']!r})")
        return cls(**data)


@dataclasses.dataclass(frozen=True, eq=False)
class RegressionRelease:
    """A differentially private release of linear-regression sufficient statistics.

    Attributes
    ----------
    value : numpy.ndarray
        The released ``z = s + Laplace(0, Δ/ε)`` for ``s`` the statistic of
        :mod:`pymc_dp.regression.statistics`, shape ``(m,)`` (read-only).
    n : int
        Number of records (public; it is the unreleased entry ``B[0, 0]``).
    epsilon : float
        Privacy budget of the statistics release.
    sensitivity : float
        L1 sensitivity Δ used to scale the noise on ``value``.
    x_bounds : tuple
        ``((lower, upper), ...)`` of each of the ``d`` covariates.
    y_bounds : tuple
        ``(lower, upper)`` of the response.
    second_moments, fourth_moments : MomentRelease or None
        Noisy sums of the covariate monomials of degrees 1-2 and 3-4, released with their own
        share of the budget, or ``None`` if the moments were not released.
    mechanism : str
        ``"discrete-laplace"`` (vetted, the default) or ``"laplace-float"`` (seeded studies;
        ``"laplace"`` in format 1 files).
    clamped : bool
        Whether the curator clamped records to the bounds (``clamp=True``) instead of stopping
        at a record outside them. It says the option was on, not whether a record was clamped.
        Files written before this field existed load with ``False``.
    quantum : float or None
        The statistic's quantum q_s of a vetted release: the exact sums were rounded to
        multiples of q_s before integer noise was added, with the rounding in ``sensitivity``;
        ``None`` for ``"laplace-float"``.
    record_quantum : tuple of float or None
        The public grid step (a power of two) of each variable x_1..x_d, y: each record was
        rounded to its grid inside the bounds before the statistic was summed exactly, so the
        sensitivity over the box covers the rounding unchanged. ``None`` in files written
        before this field existed (format 1 files called it ``quantum``).
    library : str or None
        The sampler and its version.
    budget : Mapping or None
        What a :class:`~pymc_dp.budget.PrivacyBudget` recorded when it charged this release.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(size=(100, 1)); y = np.clip(0.5 * x[:, 0], 0, 1)
    >>> rel = release_regression(x, y, x_bounds=[(0, 1)], y_bounds=(0, 1), epsilon=1.0, rng=rng)
    >>> rel.d, rel.value.shape, rel.sensitivity, rel.total_epsilon
    (1, (5,), 5.0, 1.0)
    """

    value: npt.NDArray[np.float64]
    n: int
    epsilon: float
    sensitivity: float
    x_bounds: tuple[tuple[float, float], ...]
    y_bounds: tuple[float, float]
    second_moments: MomentRelease | None = None
    fourth_moments: MomentRelease | None = None
    mechanism: str = LAPLACE_FLOAT
    clamped: bool = False
    quantum: float | None = None
    record_quantum: tuple[float, ...] | None = None
    library: str | None = None
    budget: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        try:
            value = np.array(self.value, dtype=np.float64)
        except OverflowError:
            raise ValueError("value holds a number too large for a float") from None
        except (TypeError, ValueError):
            raise TypeError(f"value must be numbers (got {self.value!r})") from None
        if value.ndim != 1:
            raise ValueError(f"value must be 1-dimensional (got shape {value.shape})")
        d = d_from_released(value.shape[0])
        if not np.all(np.isfinite(value)):
            raise ValueError("value must be finite")
        value.setflags(write=False)
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "n", check_int(self.n, "n", minimum=d + 2, maximum=MAX_N))
        object.__setattr__(self, "clamped", check_bool(self.clamped, "clamped"))
        object.__setattr__(self, "epsilon", check_positive(self.epsilon, "epsilon"))
        object.__setattr__(self, "sensitivity", check_positive(self.sensitivity, "sensitivity"))
        try:
            xb = check_box(self.x_bounds, "x_bounds", size=d)
            yb = check_box(self.y_bounds, "y_bounds", size=1)
        except OverflowError:
            raise ValueError(
                "x_bounds and y_bounds must be finite numbers (got an integer too large for a "
                "float)"
            ) from None
        largest = max(float(np.max(np.abs(xb))), float(np.max(np.abs(yb))), 1.0)
        power = 2 if self.second_moments is None else 4  # squares, or fourth moments too
        with np.errstate(over="ignore"):
            overflows = not np.isfinite(np.float64(largest) ** power)
        if overflows:
            raise ValueError(
                f"x_bounds and y_bounds reach {largest:.3g}: powers {power} of the records "
                "would overflow a float; choose narrower bounds"
            )
        object.__setattr__(self, "x_bounds", tuple(tuple(map(float, r)) for r in xb))
        object.__setattr__(self, "y_bounds", (float(yb[0, 0]), float(yb[0, 1])))
        needed = regression_sensitivity(xb, yb[0])
        if self.sensitivity < needed:
            raise ValueError(
                f"sensitivity must be >= {needed}, the L1 sensitivity over the bounds (got "
                f"{self.sensitivity}); with less noise the release is not ε-DP"
            )
        if (self.second_moments is None) != (self.fourth_moments is None):
            raise ValueError("second_moments and fourth_moments are released together or not")
        for name, mom, degrees in (
            ("second_moments", self.second_moments, SECOND_DEGREES),
            ("fourth_moments", self.fourth_moments, FOURTH_DEGREES),
        ):
            if mom is None:
                continue
            if not isinstance(mom, MomentRelease):
                raise TypeError(f"{name} must be a MomentRelease (got {type(mom).__name__})")
            expected = covariate_powers(d, degrees)
            if mom.powers.shape != expected.shape or np.any(mom.powers != expected):
                raise ValueError(f"{name} must hold the degree {degrees} monomials of x in order")
            if mom.sensitivity < sum_of_ranges(expected, xb[:, 0], xb[:, 1]):
                raise ValueError(f"{name}.sensitivity is below the L1 sensitivity of its sums")
        mechanism = check_mechanism(self.mechanism, None)
        if mechanism == DISCRETE_GAUSSIAN:
            raise ValueError("regression releases support 'discrete-laplace' and 'laplace-float'")
        object.__setattr__(self, "mechanism", mechanism)
        object.__setattr__(self, "quantum", _check_quantum(self.quantum))
        if (self.quantum is None) != (mechanism == LAPLACE_FLOAT):
            raise ValueError(
                f"quantum must be {'None' if mechanism == LAPLACE_FLOAT else 'a power of two'} "
                f"for mechanism {mechanism!r} (got {self.quantum!r})"
            )
        if self.library is not None and not isinstance(self.library, str):
            raise TypeError(f"library must be a string (got {self.library!r})")
        if self.budget is not None:
            if not isinstance(self.budget, Mapping):
                raise TypeError(f"budget must be a mapping (got {type(self.budget).__name__})")
            object.__setattr__(self, "budget", types.MappingProxyType(dict(self.budget)))
        if self.record_quantum is not None:
            if isinstance(self.record_quantum, str) or len(self.record_quantum) != d + 1:
                raise ValueError(
                    f"record_quantum must hold one grid step per variable, {d + 1} "
                    f"(got {self.record_quantum!r})"
                )
            steps = tuple(check_positive(q, "record_quantum") for q in self.record_quantum)
            if any(math.frexp(q)[0] != 0.5 for q in steps):
                raise ValueError(
                    f"record_quantum must hold powers of two (got {self.record_quantum!r})"
                )
            object.__setattr__(self, "record_quantum", steps)

    @property
    def d(self) -> int:
        """Number of covariates (the intercept not counted)."""
        return len(self.x_bounds)

    @property
    def scale(self) -> float:
        """Laplace scale Δ/ε of the noise on every statistic component."""
        return self.sensitivity / self.epsilon

    @property
    def total_epsilon(self) -> float:
        """Privacy cost of the whole release (basic composition): statistics plus moments."""
        moments = (self.second_moments, self.fourth_moments)
        return self.epsilon + sum(m.epsilon for m in moments if m is not None)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary (floats round-trip exactly through :mod:`json`)."""
        return {
            "format_version": _FORMAT_VERSION,
            "kind": _KIND,
            "value": self.value.tolist(),
            "n": self.n,
            "epsilon": self.epsilon,
            "sensitivity": self.sensitivity,
            "x_bounds": [list(b) for b in self.x_bounds],
            "y_bounds": list(self.y_bounds),
            "second_moments": None
            if self.second_moments is None
            else self.second_moments.to_dict(),
            "fourth_moments": None
            if self.fourth_moments is None
            else self.fourth_moments.to_dict(),
            "mechanism": self.mechanism,
            "clamped": self.clamped,
            "quantum": self.quantum,
            "record_quantum": None if self.record_quantum is None else list(self.record_quantum),
            "library": self.library,
            "budget": None if self.budget is None else dict(self.budget),
        }

    def to_json(self, **kwargs: Any) -> str:
        """Serialise to a JSON string; ``kwargs`` go to :func:`json.dumps`.

        Examples
        --------
        >>> rel = RegressionRelease(value=[1.0, 2.0, 3.0, 4.0, 5.0], n=10, epsilon=1.0,
        ...                         sensitivity=5.0, x_bounds=[(0, 1)], y_bounds=(0, 1))
        >>> back = RegressionRelease.from_json(rel.to_json())
        >>> back.value.tolist() == rel.value.tolist(), back.x_bounds, back.n
        (True, ((0.0, 1.0),), 10)
        """
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RegressionRelease:
        """Rebuild a release from :meth:`to_dict` output, checking every field."""
        if not isinstance(data, Mapping):
            raise TypeError(f"a regression release must be a mapping (got {type(data).__name__})")
        data = dict(data)
        version = data.pop("format_version", _FORMAT_VERSION)
        if isinstance(version, bool) or not isinstance(version, int) or version not in (1, 2):
            raise ValueError(f"unsupported regression release format_version {version!r}")
        kind = data.pop("kind", _KIND)
        if kind != _KIND:
            raise ValueError(
                f"this is a {kind!r} release, not a regression release; load it with the class "
                "that wrote it (e.g. pymc_dp.Release.from_json)"
            )
        expected = {f.name for f in dataclasses.fields(cls)}
        required = {"value", "n", "epsilon", "sensitivity", "x_bounds", "y_bounds"}
        _check_keys(data, expected, "a regression release", required=required)
        _check_fields(
            data, lists=("value", "x_bounds", "y_bounds"), scalars=("epsilon", "sensitivity")
        )
        if version == 1 and isinstance(data.get("quantum"), list):
            # Format 1 wrote the record grid steps as "quantum" (before the vetted mechanisms).
            data["record_quantum"] = data.pop("quantum")
        if data.get("record_quantum") is not None:
            _check_fields(data, lists=("record_quantum",), scalars=())
        if "mechanism" in data and not isinstance(data["mechanism"], str):
            raise TypeError(f"mechanism must be a string (got {data['mechanism']!r})")
        if data.get("quantum") is not None:
            check_json_numbers(data["quantum"], "quantum", scalar=True)
        for key in ("second_moments", "fourth_moments"):
            if data.get(key) is not None:
                data[key] = MomentRelease.from_dict(data[key])
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> RegressionRelease:
        """Rebuild a release from :meth:`to_json` output."""
        return cls.from_dict(json.loads(text))


def _check_fields(
    data: Mapping[str, Any], *, lists: tuple[str, ...], scalars: tuple[str, ...]
) -> None:
    """Strict JSON types: numbers (or lists of them) where numbers belong, named on failure."""
    for name in lists:
        if not isinstance(data[name], list | tuple):
            raise TypeError(f"{name} must be a list (got {type(data[name]).__name__})")
        check_json_numbers(data[name], name)
    for name in scalars:
        check_json_numbers(data[name], name, scalar=True)


def _check_keys(
    data: Mapping[str, Any], expected: set[str], what: str, required: set[str] | None = None
) -> None:
    """Raise ValueError unless ``data`` has only ``expected`` keys and all ``required`` ones."""
    required = expected if required is None else required
    if not isinstance(data, Mapping) or set(data) - expected or required - set(data):
        got = sorted(data) if isinstance(data, Mapping) else repr(data)
        raise ValueError(f"{what} needs the fields {sorted(expected)} (got {got})")


def release_regression(
    x: npt.ArrayLike | Any,
    y: npt.ArrayLike | None = None,
    *,
    columns: Any = None,
    client: Any = None,
    x_bounds: Any,
    y_bounds: Any,
    epsilon: float,
    moments_share: float | None = None,
    clamp: bool = False,
    rng: int | np.random.Generator | None = None,
    mechanism: str | None = None,
    budget: Any = None,
    label: str = "regression",
) -> RegressionRelease:
    """Release the sufficient statistics of a linear regression under ε-differential privacy.

    Publishes ``z = s + Laplace(0, Δ/ε)`` on every component of
    ``s = Σ_i t(x_i, y_i)`` (all unique entries of ``[X, y]ᵀ[X, y]`` but ``n``), where ``Δ`` is the
    L1 sensitivity over the box of records (Bernstein & Sheldon 2019, §3.4). With
    ``moments_share`` it also publishes noisy sums of the covariate monomials of degrees 1-2 and
    3-4, which Gibbs-SS-Noisy uses for the CLT moments of ``s``.

    Parameters
    ----------
    x
        Covariates, shape ``(n, d)`` (``(n,)`` for ``d = 1``), without an intercept column; or
        a data frame, relation or Parquet source (:mod:`pymc_dp.frames`) holding covariates
        and response, with ``columns=``. Lazy input is streamed, Dask input reduced on its
        cluster.
    y
        Responses, shape ``(n,)`` (``None`` for a data frame).
    columns
        For a data frame: the names of the ``d`` covariate columns followed by the response
        column, e.g. ``["age", "income", "spend"]``.
    client
        A ``dask.distributed.Client`` for Dask input (default: Dask's current scheduler).
    x_bounds
        ``d`` pairs ``(lower, upper)``, chosen from public knowledge, without looking at the
        data. Every record must lie inside, unless ``clamp`` is set.
    y_bounds
        ``(lower, upper)`` of the response, likewise.
    epsilon
        Total privacy budget ε > 0 of the release.
    moments_share
        If given, the share in (0, 1) of ``epsilon`` spent on the moments of x, half on the
        degree 1-2 sums and half on the degree 3-4 sums; the statistics get the rest.
    clamp
        If ``False`` (the default), a record outside the bounds stops the release. If ``True``,
        every covariate and response is clamped to its bounds and the release records
        ``clamped=True``; the bounds are public, so Δ is unchanged and the release stays ε-DP
        (the model then describes the clamped records).
    rng
        Seed or generator: a study, with ``"laplace-float"`` noise. ``None`` (the default) is a
        real release with vetted noise (OpenDP discrete Laplace on fixed-point sums).
    mechanism
        ``"discrete-laplace"`` (the default without ``rng``) or ``"laplace-float"``.
    budget
        A :class:`~pymc_dp.budget.PrivacyBudget` charged ``epsilon`` before any noise is drawn
        (refused if it would exceed the total); the release records what was spent.
    label
        Name of this release in the accountant's ledger.

    Returns
    -------
    RegressionRelease

    Raises
    ------
    TypeError, ValueError
        For malformed arguments, records outside the bounds (without ``clamp``), fewer records
        than the ``d + 2`` parameters (coefficients and σ²), bounds so wide that the
        statistics overflow, or non-finite values. All checks run before any noise is drawn;
        messages never quote a record's value.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(-1, 1, size=(200, 2))
    >>> y = np.clip(x @ [0.5, -0.2] + 0.1 * rng.standard_normal(200), -2, 2)
    >>> rel = release_regression(x, y, x_bounds=[(-1, 1)] * 2, y_bounds=(-2, 2), epsilon=1.0,
    ...                          moments_share=0.2, rng=1)
    >>> rel.value.shape, rel.epsilon, rel.second_moments.epsilon, rel.total_epsilon
    ((9,), 0.8, 0.1, 1.0)
    """
    epsilon = check_positive(epsilon, "epsilon")
    if moments_share is not None:
        if isinstance(moments_share, bool) or not isinstance(moments_share, numbers.Real):
            raise TypeError(f"moments_share must be a real number (got {moments_share!r})")
        if not 0.0 < moments_share < 1.0:
            raise ValueError(f"moments_share must lie in (0, 1) (got {moments_share!r})")
        # A float32 share would make the parts' ε add up to more than the total.
        moments_share = float(moments_share)
    clamp = check_bool(clamp, "clamp")
    mechanism = check_mechanism(mechanism, rng)
    if mechanism == DISCRETE_GAUSSIAN:
        raise ValueError(
            "mechanism must be 'discrete-laplace' or 'laplace-float' for a regression release "
            "(the Gaussian mechanism is not available here yet)"
        )
    generator = check_rng(rng) if mechanism == LAPLACE_FLOAT else None
    noise = _Noise(mechanism, generator, budget, label)
    if is_frame(x):
        return _release_frame(
            x,
            y,
            columns=columns,
            client=client,
            x_bounds=x_bounds,
            y_bounds=y_bounds,
            epsilon=epsilon,
            moments_share=moments_share,
            clamp=clamp,
            noise=noise,
        )
    if columns is not None or y is None:
        raise TypeError(
            "pass x and y as arrays, or a data frame as x with columns=[*covariates, response]"
        )
    xs = check_finite_array(x, "x")
    if xs.ndim == 1:
        xs = xs[:, None]
    if xs.ndim != 2:
        raise ValueError(f"x must have shape (n, d) (got {xs.shape})")
    ys = check_finite_array(y, "y", ndim=1)
    n, d = xs.shape
    if ys.shape[0] != n:
        raise ValueError(f"y must have one value per row of x: {n} (got {ys.shape[0]})")
    if n < d + 2:
        raise ValueError(
            f"x has n={n} records but the model has d+2={d + 2} parameters ({d + 1} "
            "coefficients with the intercept, and σ²); need n >= d+2"
        )
    try:
        xb = check_box(x_bounds, "x_bounds", size=d)
        yb = check_box(y_bounds, "y_bounds", size=1)[0]
    except OverflowError:
        raise ValueError(
            "x_bounds and y_bounds must be finite numbers (got an integer too large for a float)"
        ) from None
    # Every released sum is of monomials of degree <= 4 (moments) or 2 (statistics) in values
    # bounded by the box: a public bound on |s| for the noise's resolution check.
    largest = max(1.0, float(np.max(np.abs(xb))), float(np.max(np.abs(yb))))
    with np.errstate(over="ignore"):
        magnitude = float(np.float64(n) * np.float64(largest) ** 2)
        moment_magnitude = float(np.float64(n) * np.float64(largest) ** 4)
    if not np.isfinite(moment_magnitude if moments_share is not None else magnitude):
        raise ValueError(
            f"x_bounds and y_bounds reach {largest:.3g}: the sums of squares"
            f"{'' if moments_share is None else ' and fourth powers'} of {n} records would "
            "overflow a float; choose narrower bounds (in other units if need be)"
        )
    xs = xs.astype(np.float64)
    ys = ys.astype(np.float64)
    if clamp:
        xs = np.clip(xs, xb[:, 0], xb[:, 1])
        ys = np.clip(ys, yb[0], yb[1])
    advice = (
        "the release was stopped. The bounds must come from public knowledge, not from the "
        "data: fix those records, or pass clamp=True to clamp every record to the bounds "
        "(recorded in the release; the sensitivity is unchanged)"
    )
    outside = np.any((xs < xb[:, 0]) | (xs > xb[:, 1]), axis=1)
    if np.any(outside):
        raise ValueError(
            f"x has {int(outside.sum())} record(s) outside x_bounds={xb.tolist()}, the first at "
            f"index {int(np.flatnonzero(outside)[0])}; {advice}"
        )
    outside = (ys < yb[0]) | (ys > yb[1])
    if np.any(outside):
        raise ValueError(
            f"y has {int(outside.sum())} value(s) outside y_bounds={yb.tolist()}, the first at "
            f"index {int(np.flatnonzero(outside)[0])}; {advice}"
        )

    plan = RegressionPlan(
        tuple(map(tuple, np.vstack([xb, yb[None, :]]).tolist())),
        moments=moments_share is not None,
        clamp=clamp,
    )
    records = np.column_stack([xs, ys])
    totals = combine_totals(
        plan.batch_totals(records[start : start + BATCH], checked=True)
        for start in range(0, n, BATCH)
    )[1]
    return _noisy_release(plan, n, totals, xb, yb, epsilon, moments_share, noise)


def _release_frame(
    data: Any,
    y: Any,
    *,
    columns: Any,
    client: Any,
    x_bounds: Any,
    y_bounds: Any,
    epsilon: float,
    moments_share: float | None,
    clamp: bool,
    noise: _Noise,
) -> RegressionRelease:
    """:func:`release_regression` of a data frame: one exact pass on its engine, then noise."""
    if y is not None:
        raise TypeError("with a data frame as x, name the response in columns=, and omit y")
    if isinstance(columns, str) or not isinstance(columns, list | tuple) or len(columns) < 2:
        raise TypeError(
            "columns must list the covariate columns and then the response column, e.g. "
            f"columns=['age', 'income', 'spend'] (got {columns!r})"
        )
    columns = [str(c) for c in columns]
    d = len(columns) - 1
    try:
        xb = check_box(x_bounds, "x_bounds", size=d)
        yb = check_box(y_bounds, "y_bounds", size=1)[0]
    except OverflowError:
        raise ValueError(
            "x_bounds and y_bounds must be finite numbers (got an integer too large for a float)"
        ) from None
    plan = RegressionPlan(
        tuple(map(tuple, np.vstack([xb, yb[None, :]]).tolist())),
        moments=moments_share is not None,
        clamp=clamp,
        names=(f"columns {columns[:-1]!r}", f"column {columns[-1]!r}"),
    )
    n, totals = exact_totals(data, plan, columns, client=client)
    if n < d + 2:
        raise ValueError(
            f"the data have n={n} records but the model has d+2={d + 2} parameters ({d + 1} "
            "coefficients with the intercept, and σ²); need n >= d+2"
        )
    return _noisy_release(plan, n, totals, xb, yb, epsilon, moments_share, noise)


def _noisy_release(
    plan: RegressionPlan,
    n: int,
    totals: tuple[int, ...],
    xb: npt.NDArray[np.float64],
    yb: npt.NDArray[np.float64],
    epsilon: float,
    moments_share: float | None,
    noise: _Noise,
) -> RegressionRelease:
    """Noise on exact sums, after every noise scale has been checked (public values only).

    The exact sums (``totals``, the same bit for bit from every input) get the float Laplace
    noise of a study, or, for ``"discrete-laplace"``, are rounded as totals to a public
    statistic quantum and get OpenDP's integer noise (:func:`vetted_laplace_total`).
    """
    d = xb.shape[0]
    largest = max(1.0, float(np.max(np.abs(xb))), float(np.max(np.abs(yb))))
    with np.errstate(over="ignore"):
        magnitude = float(np.float64(n) * np.float64(largest) ** 2)
        moment_magnitude = float(np.float64(n) * np.float64(largest) ** 4)
    if not np.isfinite(moment_magnitude if moments_share is not None else magnitude):
        raise ValueError(
            f"x_bounds and y_bounds reach {largest:.3g}: the sums of squares of {n} records "
            "would overflow a float; choose narrower bounds (in other units if need be)"
        )
    stat_epsilon = epsilon if moments_share is None else epsilon * (1.0 - moments_share)
    sensitivity = regression_sensitivity(xb, yb)
    statistic, *sums = plan.sums(totals)
    exact_blocks = plan.blocks(totals)
    moments: list[tuple[npt.NDArray, npt.NDArray, float]] = []
    if moments_share is not None:
        for degrees, block in zip((SECOND_DEGREES, FOURTH_DEGREES), sums, strict=True):
            powers = covariate_powers(d, degrees)
            moments.append((powers, block, sum_of_ranges(powers, xb[:, 0], xb[:, 1])))
    if noise.budget is not None:
        from pymc_dp.budget import PrivacyBudget

        if not isinstance(noise.budget, PrivacyBudget):
            raise TypeError(
                f"budget must be a pymc_dp.PrivacyBudget (got {type(noise.budget).__name__})"
            )
    # Noise only after every check above, and every noise scale, has passed.
    noise_scale(sensitivity=sensitivity, epsilon=stat_epsilon, magnitude=magnitude)
    for _, _, delta in moments:
        noise_scale(
            sensitivity=delta, epsilon=0.5 * epsilon * moments_share, magnitude=moment_magnitude
        )
    if noise.budget is not None:
        noise.budget.spend(epsilon=epsilon, label=noise.label)  # statistics and moments: ε in all
    generator = noise.rng
    if noise.mechanism == LAPLACE_FLOAT:
        noisy = laplace_mechanism(
            statistic,
            sensitivity=sensitivity,
            epsilon=stat_epsilon,
            rng=generator,
            magnitude=magnitude,
        )
        quantum, library = None, f"numpy {np.__version__}"
        released_moments = [
            MomentRelease(
                value=laplace_mechanism(
                    sums,
                    sensitivity=delta,
                    epsilon=0.5 * epsilon * moments_share,
                    rng=generator,
                    magnitude=moment_magnitude,
                ),
                powers=powers,
                epsilon=0.5 * epsilon * moments_share,
                sensitivity=delta,
            )
            for powers, sums, delta in moments
        ]
    else:
        # Vetted: each exact total rounded to a public quantum (release_noise.ExactTotal).
        stat_powers = statistic_powers(d)
        vetted = vetted_laplace_total(
            ExactTotal(*exact_blocks[0]),
            n=n,
            t_bounds=np.column_stack(
                monomial_ranges(stat_powers, np.append(xb[:, 0], yb[0]), np.append(xb[:, 1], yb[1]))
            ),
            sensitivity=sensitivity,
            epsilon=stat_epsilon,
        )
        noisy, sensitivity = vetted.value, vetted.sensitivity
        quantum, library = vetted.quantum, vetted.library
        released_moments = []
        for (powers, _, delta), block in zip(moments, exact_blocks[1:], strict=True):
            part = vetted_laplace_total(
                ExactTotal(*block),
                n=n,
                t_bounds=np.column_stack(monomial_ranges(powers, xb[:, 0], xb[:, 1])),
                sensitivity=delta,
                epsilon=0.5 * epsilon * moments_share,
            )
            released_moments.append(
                MomentRelease(
                    value=part.value,
                    powers=powers,
                    epsilon=0.5 * epsilon * moments_share,
                    sensitivity=part.sensitivity,
                    quantum=part.quantum,
                )
            )
    return RegressionRelease(
        value=noisy,
        n=n,
        epsilon=stat_epsilon,
        sensitivity=sensitivity,
        x_bounds=tuple(tuple(r) for r in xb.tolist()),
        y_bounds=(float(yb[0]), float(yb[1])),
        second_moments=released_moments[0] if released_moments else None,
        fourth_moments=released_moments[1] if released_moments else None,
        clamped=plan.clamp,
        mechanism=noise.mechanism,
        quantum=quantum,
        record_quantum=plan.quanta,
        library=library,
        budget=None if noise.budget is None else noise.budget.receipt(),
    )


class _Noise(NamedTuple):
    """How a regression release draws its noise: the mechanism, its generator, the accountant."""

    mechanism: str
    rng: np.random.Generator | None
    budget: Any
    label: str


def _check_quantum(quantum: Any) -> float | None:
    if quantum is None:
        return None
    q = check_positive(quantum, "quantum")
    if math.frexp(q)[0] != 0.5:
        raise ValueError(f"quantum must be a power of two (got {quantum!r})")
    return q
