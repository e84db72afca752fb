"""The record of a private regression release: :class:`RegressionRelease`, :class:`MomentRelease`.

Curator and analyst share these records; this module imports no inference code and no raw data
ever reaches it. A :class:`RegressionRelease` carries everything the analyst needs (value, n, ε,
Δ and which bound gave it, bounds, the optional noisy moments of the covariates) and nothing
about individual records. :func:`~pymc_dp.curator.regression.release.release_regression` makes one.

File formats
------------
5 (written today)
    Adds ``binary`` (the covariates the curator declared 0/1) and ``factor`` (the dummy
    columns of one factor; written only when declared) to 4. A file without ``factor``
    declares none.
4
    Adds ``rho`` and ``delta`` (Gaussian-mechanism releases, ``"discrete-gaussian"``; ``null``
    and 0 otherwise) to 3.
3
    ``fourth_moments`` holds the degree 3-4 sums of x with the whole moments share of ε;
    ``second_moments`` is ``null``: the degree 1-2 sums of x are entries of the statistic and
    the analyst reads them there (post-processing, no budget). Adds ``sensitivity_bound``.
2
    Adds quantum, record_quantum, library and budget (and a moment release's quantum) to 1.
    Its releases with moments also carry ``second_moments`` (degree 1-2 sums at half the
    moments share); they are read unchanged, and the analyst combines those sums with the
    statistic's (:func:`~pymc_dp.regression.kernels.moments.x_moments_from_release`).
1
    Read; its list ``quantum`` (the record grid steps) is read as ``record_quantum``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from pymc_dp._validation import (
    MAX_N,
    check_bool,
    check_int,
    check_json_numbers,
    check_positive,
    check_zcdp_fields,
)
from pymc_dp.curator.noise import check_mechanism
from pymc_dp.curator.regression.sensitivity import (
    SENSITIVITY_BOUNDS,
    check_box,
    regression_sensitivity,
    regression_sensitivity_l2,
    sum_of_ranges,
)
from pymc_dp.curator.regression.statistics import covariate_powers, d_from_released
from pymc_dp.mechanisms import DISCRETE_GAUSSIAN, LAPLACE_FLOAT

__all__ = [
    "FORMAT_VERSION",
    "FOURTH_DEGREES",
    "SECOND_DEGREES",
    "MomentRelease",
    "RegressionRelease",
    "check_binary",
    "check_factor",
    "check_zero_one_columns",
]

SECOND_DEGREES = (1, 2)
"""Total degrees of the covariate monomials in the "second moments" release of format <= 2 files
(format 3 takes them from the statistic)."""
FOURTH_DEGREES = (3, 4)
"""Total degrees of the covariate monomials in the moments release (with the degree 1-2 sums
in the statistic these give every raw moment up to order 4 that the CLT of the statistic
needs)."""

FORMAT_VERSION = 5
"""Version written by :meth:`RegressionRelease.to_dict`; versions 1 to 4 are read (see above)."""
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
        The released ``z = s + Laplace(0, Δ/ε)`` (or ``s + N(0, τ²)`` for the Gaussian
        mechanism) for ``s`` the statistic of :mod:`pymc_dp.curator.regression.statistics`, shape
        ``(m,)`` (read-only).
    n : int
        Number of records (public; it is the unreleased entry ``B[0, 0]``).
    epsilon : float
        Privacy budget of the statistics release; for ``"discrete-gaussian"`` the ε of the
        (ε, ``delta``)-DP guarantee that ``rho``-zCDP implies (OpenDP's conversion).
    sensitivity : float
        Sensitivity used to scale the noise on ``value``: L1 (Δ), or L2 (Δ₂) for
        ``"discrete-gaussian"``, the fixed-point rounding included for a vetted release.
    x_bounds : tuple
        ``((lower, upper), ...)`` of each of the ``d`` covariates.
    y_bounds : tuple
        ``(lower, upper)`` of the response.
    second_moments : MomentRelease or None
        Format 2 files only: noisy sums of the covariate monomials of degrees 1-2, which the
        statistic already holds. ``None`` in releases made today.
    fourth_moments : MomentRelease or None
        Noisy sums of the covariate monomials of degrees 3-4, released with the moments share
        of the budget, or ``None`` if the moments were not released.
    mechanism : str
        ``"discrete-laplace"`` (vetted, the default), ``"discrete-gaussian"`` (vetted, ρ-zCDP)
        or ``"laplace-float"`` (seeded studies; ``"laplace"`` in format 1 files).
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
        What a :class:`~pymc_dp.curator.budget.PrivacyBudget` recorded when it charged this release.
    sensitivity_bound : str or None
        Which bound on the L1 sensitivity scaled the noise: ``"exact"`` (enumerated over the
        box) or ``"sum-of-ranges"`` (:mod:`pymc_dp.curator.regression.sensitivity`); ``None`` in
        files written before this field existed (they used the sum of ranges).
    rho : float or None
        zCDP budget ρ of a ``"discrete-gaussian"`` release (noise sd τ = Δ₂/√(2ρ)), else
        ``None``.
    delta : float
        δ of the (ε, δ) guarantee of a ``"discrete-gaussian"`` release; 0 otherwise.
    binary : tuple of int
        Indices of the covariates the curator declared binary: every record's value was checked
        to be 0 or 1, and their box holds both. The default model of x treats one such
        covariate as Bernoulli (``NoisyRegressionStat``'s mixed model). Empty (the default, and
        in files written before this field existed) declares nothing.
    factor : tuple of int
        Indices of the covariates the curator declared the dummy columns of one categorical
        factor with ``len(factor) + 1`` levels, in the order of its levels after the reference
        level (all 0, no column): every record's value in them was checked to be 0 or 1 with
        at most one 1, and their box holds 0 and 1. None of them is in ``binary``. Empty (the
        default, and in files written before this field existed) declares nothing.

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_dp.regression import release_regression
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
    sensitivity_bound: str | None = None
    rho: float | None = None
    delta: float = 0.0
    binary: tuple[int, ...] = ()
    factor: tuple[int, ...] = ()

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
        power = 2 if self.fourth_moments is None else 4  # squares, or fourth moments too
        with np.errstate(over="ignore"):
            overflows = not np.isfinite(np.float64(largest) ** power)
        if overflows:
            raise ValueError(
                f"x_bounds and y_bounds reach {largest:.3g}: powers {power} of the records "
                "would overflow a float; choose narrower bounds"
            )
        object.__setattr__(self, "x_bounds", tuple(tuple(map(float, r)) for r in xb))
        object.__setattr__(self, "y_bounds", (float(yb[0, 0]), float(yb[0, 1])))
        object.__setattr__(self, "binary", check_binary(self.binary, xb))
        object.__setattr__(self, "factor", check_factor(self.factor, xb, binary=self.binary))
        mechanism = check_mechanism(self.mechanism, None)
        gaussian = mechanism == DISCRETE_GAUSSIAN
        if gaussian:
            needed, norm = regression_sensitivity_l2(xb, yb[0]), "L2"
        else:
            needed, norm = regression_sensitivity(xb, yb[0]), "L1"
        if self.sensitivity < needed:
            raise ValueError(
                f"sensitivity must be >= {needed}, the {norm} sensitivity over the bounds (got "
                f"{self.sensitivity}); with less noise the release is not private"
            )
        if gaussian and (self.second_moments is not None or self.fourth_moments is not None):
            raise ValueError(
                "a 'discrete-gaussian' regression release has no moments of x (release_regression "
                "refuses moments_share with the Gaussian mechanism)"
            )
        if self.second_moments is not None and self.fourth_moments is None:
            raise ValueError(
                "second_moments (format 2) come with fourth_moments; a release without moments "
                "has neither"
            )
        if self.sensitivity_bound is not None and not isinstance(self.sensitivity_bound, str):
            raise TypeError(f"sensitivity_bound must be a string (got {self.sensitivity_bound!r})")
        if self.sensitivity_bound is not None and self.sensitivity_bound not in SENSITIVITY_BOUNDS:
            raise ValueError(
                f"sensitivity_bound must be one of {SENSITIVITY_BOUNDS} or None (got "
                f"{self.sensitivity_bound!r})"
            )
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
        object.__setattr__(self, "mechanism", mechanism)
        rho, delta = check_zcdp_fields(gaussian, self.rho, self.delta, mechanism)
        object.__setattr__(self, "rho", rho)
        object.__setattr__(self, "delta", delta)
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
        """Noise scale on every statistic component: Laplace b = Δ/ε, or Gaussian τ = Δ₂/√(2ρ)."""
        if self.rho is not None:
            return self.sensitivity / math.sqrt(2.0 * self.rho)
        return self.sensitivity / self.epsilon

    @property
    def total_epsilon(self) -> float:
        """Privacy cost of the whole release (basic composition): statistics plus moments."""
        moments = (self.second_moments, self.fourth_moments)
        return self.epsilon + sum(m.epsilon for m in moments if m is not None)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary (floats round-trip exactly through :mod:`json`)."""
        return {
            "format_version": FORMAT_VERSION,
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
            "sensitivity_bound": self.sensitivity_bound,
            "rho": self.rho,
            "delta": self.delta,
            "binary": list(self.binary),
            # Only when declared, so that a file without a factor stays readable by builds
            # that predate the field.
            **({"factor": list(self.factor)} if self.factor else {}),
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
        version = data.pop("format_version", FORMAT_VERSION)
        if isinstance(version, bool) or not isinstance(version, int) or version not in range(1, 6):
            raise ValueError(
                f"unsupported regression release format_version {version!r}: this version of "
                f"pymc_dp reads formats 1 to {FORMAT_VERSION}"
            )
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
        if "binary" in data and not isinstance(data["binary"], list | tuple):
            raise TypeError(f"binary must be a list of covariate indices (got {data['binary']!r})")
        if "factor" in data and not isinstance(data["factor"], list | tuple):
            raise TypeError(f"factor must be a list of covariate indices (got {data['factor']!r})")
        if "mechanism" in data and not isinstance(data["mechanism"], str):
            raise TypeError(f"mechanism must be a string (got {data['mechanism']!r})")
        for key in ("quantum", "rho", "delta"):
            if data.get(key) is not None:
                check_json_numbers(data[key], key, scalar=True)
        for key in ("second_moments", "fourth_moments"):
            if data.get(key) is not None:
                data[key] = MomentRelease.from_dict(data[key])
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> RegressionRelease:
        """Rebuild a release from :meth:`to_json` output."""
        return cls.from_dict(json.loads(text))


def check_binary(binary: Any, x_bounds: npt.ArrayLike) -> tuple[int, ...]:
    """Covariate indices declared binary, checked: distinct, in range, each box holding 0 and 1.

    Parameters
    ----------
    binary
        Indices into the covariates (``None`` or empty: none).
    x_bounds
        The covariates' box, ``(d, 2)``.

    Returns
    -------
    tuple of int
        The indices, sorted.

    Examples
    --------
    >>> check_binary([1], [(-2.0, 2.0), (0.0, 1.0)])
    (1,)
    >>> check_binary([0], [(0.5, 2.0)])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: binary: covariate 0's box [0.5, 2] must hold 0 and 1 ...
    """
    if binary is None:
        return ()
    if isinstance(binary, str | bytes) or not isinstance(binary, list | tuple | np.ndarray):
        raise TypeError(f"binary must be a sequence of covariate indices (got {binary!r})")
    return tuple(sorted(check_zero_one_columns("binary", binary, x_bounds)))


def check_zero_one_columns(label: str, indices: Any, x_bounds: npt.ArrayLike) -> list[int]:
    """``indices`` as ints, checked: distinct, in range, each box holding 0 and 1.

    ``label`` starts every message (the argument or option that named the columns).

    Examples
    --------
    >>> check_zero_one_columns("binary", [1], [(-2.0, 2.0), (0.0, 1.0)])
    [1]
    """
    box = np.asarray(x_bounds, dtype=np.float64).reshape(-1, 2)
    d = box.shape[0]
    out = []
    for j in indices:
        if isinstance(j, bool) or not isinstance(j, int | np.integer):
            raise TypeError(f"{label} must hold covariate indices (got {j!r})")
        if not 0 <= j < d:
            raise ValueError(f"{label}: {j} is not a covariate index in [0, {d - 1}]")
        lo, hi = box[j]
        if lo > 0.0 or hi < 1.0:
            raise ValueError(
                f"{label}: covariate {int(j)}'s box [{lo:g}, {hi:g}] must hold 0 and 1 ([0, 1] "
                "keeps the sensitivity smallest)"
            )
        out.append(int(j))
    if len(set(out)) != len(out):
        raise ValueError(f"{label} must name each covariate once (got {list(indices)})")
    return out


def check_factor(factor: Any, x_bounds: npt.ArrayLike, *, binary: Any = ()) -> tuple[int, ...]:
    """Covariate indices declared the dummy columns of one factor, checked like ``binary``.

    Distinct, in range, each box holding 0 and 1, and none also declared binary. The order is
    kept: it names the factor's levels after the reference level (all 0).

    Parameters
    ----------
    factor
        Indices into the covariates, one per level but the reference (``None`` or empty:
        none).
    x_bounds
        The covariates' box, ``(d, 2)``.
    binary
        The indices declared binary (checked already): a factor's column may not be one.

    Returns
    -------
    tuple of int
        The indices, in the order given.

    Examples
    --------
    >>> check_factor([2, 1], [(-2.0, 2.0), (0.0, 1.0), (0.0, 1.0)])
    (2, 1)
    >>> check_factor([1], [(-2.0, 2.0), (0.0, 1.0)], binary=(1,))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: factor: covariate(s) [1] are declared in binary= too; declare a factor's ...
    """
    if factor is None:
        return ()
    if isinstance(factor, str | bytes) or not isinstance(factor, list | tuple | np.ndarray):
        raise TypeError(
            "factor must be a sequence of covariate indices, the dummy columns of one factor "
            f"(got {factor!r})"
        )
    out = check_zero_one_columns("factor", factor, x_bounds)
    both = sorted(set(out) & {int(j) for j in binary})
    if both:
        raise ValueError(
            f"factor: covariate(s) {both} are declared in binary= too; declare a factor's "
            "dummy columns in factor= only"
        )
    return tuple(out)


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


def _check_quantum(quantum: Any) -> float | None:
    if quantum is None:
        return None
    q = check_positive(quantum, "quantum")
    if math.frexp(q)[0] != 0.5:
        raise ValueError(f"quantum must be a power of two (got {quantum!r})")
    return q
