"""Argument checks used at the public API boundary.

Every check names the argument, the value it got and the rule it broke, so that a caller can fix
the call without reading the source. ``TypeError`` is for the wrong kind of object, ``ValueError``
for a value of the right kind that breaks a rule. Checks run before any noise is drawn.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "MAX_CATEGORIES",
    "MAX_N",
    "check_bool",
    "check_finite_array",
    "check_int",
    "check_json_numbers",
    "check_noise_scale",
    "check_not_masked",
    "check_positive",
    "check_records",
    "check_rng",
    "check_zcdp_fields",
    "describe_records",
    "json_float",
]

MAX_CATEGORIES = 10**6
"""Largest number of categories a Categorical release takes (each is a noisy count)."""
MAX_N = 2**53
"""Largest n a release records: every count up to it is exact in a float64."""


def _shown(value: object) -> str:
    """``repr(value)``, shortened so that a huge integer does not flood a message."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


def check_positive(value: object, name: str) -> float:
    """Return ``value`` as a float after checking it is a finite real number > 0.

    Examples
    --------
    >>> check_positive(0.5, "epsilon")
    0.5
    >>> check_positive(-1, "epsilon")
    Traceback (most recent call last):
    ...
    ValueError: epsilon must be a finite number > 0 (got -1)
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{name} must be a real number (got {type(value).__name__}: {_shown(value)})"
        )
    try:
        number = float(value)
    except OverflowError:  # an int beyond the float range
        number = float("inf")
    if not np.isfinite(number) or number <= 0:
        raise ValueError(f"{name} must be a finite number > 0 (got {_shown(value)})")
    return number


MAX_NOISE_SCALE = 1e150
"""Largest noise scale Δ/ε accepted anywhere: the analyst's mixing variances hold 2 (Δ/ε)²,
which must stay finite with room to spare."""


def check_noise_scale(sensitivity: float, epsilon: float) -> float:
    """The noise scale Δ/ε of checked ``sensitivity`` and ``epsilon``, refused above 1e150.

    A release whose noise is that large carries no information, and its fit would overflow
    (2 (Δ/ε)² is the Laplace noise's variance).

    Examples
    --------
    >>> check_noise_scale(2.0, 0.5)
    4.0
    >>> check_noise_scale(1.0, 1e-300)
    Traceback (most recent call last):
    ...
    ValueError: epsilon=1e-300 is too small for sensitivity=1: the noise scale ...
    """
    with np.errstate(over="ignore"):
        scale = float(np.float64(sensitivity) / np.float64(epsilon))
    if not scale <= MAX_NOISE_SCALE:
        raise ValueError(
            f"epsilon={epsilon:g} is too small for sensitivity={sensitivity:g}: the noise scale "
            f"sensitivity/epsilon = {scale:.3g} is above {MAX_NOISE_SCALE:g}, so the release "
            "would carry no information and its fit would overflow; raise epsilon"
        )
    return scale


def check_bool(value: object, name: str) -> bool:
    """Return ``value`` after checking it is a bool (``True``/``False``, NumPy's too).

    Examples
    --------
    >>> check_bool(1, "clamp")
    Traceback (most recent call last):
    ...
    TypeError: clamp must be True or False (got int: 1)
    """
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be True or False (got {type(value).__name__}: {value!r})")
    return bool(value)


def check_not_masked(value: object, name: str) -> None:
    """Refuse a NumPy masked array: its masked entries would silently count as records.

    Examples
    --------
    >>> check_not_masked(np.ma.masked_array([1, 2], mask=[0, 1]), "x")
    Traceback (most recent call last):
    ...
    TypeError: x is a masked array; ...
    """
    if isinstance(value, np.ma.MaskedArray):
        raise TypeError(
            f"{name} is a masked array; masked entries would count as records, and n is "
            "public, so pymc_dp does not drop them: give a plain array with a value for "
            "every record (fix or fill the masked ones with a rule that does not look at "
            "the data)"
        )


def check_records(value: object, name: str) -> np.ndarray:
    """``value`` as a NumPy array of records, refusing masked and ragged input by name.

    Examples
    --------
    >>> check_records([[0], [0, 1]], "x")
    Traceback (most recent call last):
    ...
    ValueError: x must be an array with one value (or one row) per record (got a ragged ...
    """
    check_not_masked(value, name)
    try:
        return np.asarray(value)
    except (ValueError, TypeError):
        raise ValueError(
            f"{name} must be an array with one value (or one row) per record (got a ragged "
            "sequence); give every record the same number of values"
        ) from None


def check_int(value: object, name: str, *, minimum: int, maximum: int | None = None) -> int:
    """Return ``value`` as an int after checking ``minimum <= value <= maximum``.

    Examples
    --------
    >>> check_int(3, "categories", minimum=2)
    3
    >>> check_int(1, "categories", minimum=2)
    Traceback (most recent call last):
    ...
    ValueError: categories must be an integer >= 2 (got 1)
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer (got {type(value).__name__}: {_shown(value)})")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum} (got {_shown(value)})")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be an integer <= {maximum} (got {_shown(value)})")
    return int(value)


def check_finite_array(value: object, name: str, *, ndim: int | None = None) -> npt.NDArray:
    """Return ``value`` as a non-empty, finite, numeric NumPy array.

    Parameters
    ----------
    value
        Array-like to check.
    name
        Argument name used in error messages.
    ndim
        Required number of dimensions, if any.
    """
    arr = check_records(value, name)
    if arr.dtype.kind in "mM":
        raise TypeError(
            f"{name} must be a real numeric array (got dtype {arr.dtype}); convert times and "
            "durations to numbers in a stated unit first, e.g. x / np.timedelta64(1, 's')"
        )
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.integer)
        or np.issubdtype(arr.dtype, np.floating)
        or np.issubdtype(arr.dtype, np.bool_)
    ):
        raise TypeError(f"{name} must be a real numeric array (got dtype {arr.dtype})")
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional (got shape {arr.shape})")
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty")
    if np.issubdtype(arr.dtype, np.inexact) and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must not contain NaN or infinite values")
    return arr


def describe_records(mask: npt.NDArray[np.bool_]) -> str:
    """How many records ``mask`` marks and where the first is, without any record's value.

    Examples
    --------
    >>> describe_records(np.array([False, True, True]))
    '2 record(s) (the first at index 1)'
    """
    where = np.flatnonzero(mask)
    return f"{where.size} record(s) (the first at index {where[0]})"


OUT_OF_DOMAIN_ADVICE = (
    "the release was stopped. Fix those records, or pass clamp=True (pymc-dp release --clamp) "
    "to clamp every record to the family's public range; do not change the family's settings "
    "to fit the data"
)
"""What a message about records outside a family's domain advises (no record values)."""


def json_float(value: Any, name: str) -> float:
    """``float(value)``, with integers beyond the float range refused by name.

    Examples
    --------
    >>> json_float(10**400, "epsilon")
    Traceback (most recent call last):
    ...
    ValueError: epsilon is too large for a float (got an integer of 401 digits)
    """
    try:
        return float(value)
    except OverflowError:
        raise ValueError(
            f"{name} is too large for a float (got an integer of "
            f"{len(str(abs(int(value))))} digits)"
        ) from None


def check_json_numbers(value: Any, name: str, *, scalar: bool = False) -> None:
    """Check that ``value`` is a number, or (unless ``scalar``) nested lists of numbers.

    Booleans and strings are refused, and so are integers beyond the float range: a release
    file is parsed strictly, with the field named in the error.

    Examples
    --------
    >>> check_json_numbers([1.0, True], "value")
    Traceback (most recent call last):
    ...
    TypeError: value must be a number or a list of numbers (got bool: True)
    """
    if isinstance(value, list | tuple) and not scalar:
        for item in value:
            check_json_numbers(item, name)
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        what = "a number" if scalar else "a number or a list of numbers"
        raise TypeError(f"{name} must be {what} (got {type(value).__name__}: {value!r})")
    json_float(value, name)


def check_rng(rng: object, name: str = "rng") -> np.random.Generator:
    """Return a :class:`numpy.random.Generator` from an int seed, a Generator or ``None``.

    ``None`` seeds from operating-system entropy, which is what a curator releasing real data
    wants; tests and studies pass a seed.
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None:
        return np.random.default_rng()
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool):
        if rng < 0:
            raise ValueError(f"{name} seed must be >= 0 (got {rng})")
        return np.random.default_rng(int(rng))
    raise TypeError(
        f"{name} must be an int seed, a numpy.random.Generator or None (got {type(rng).__name__})"
    )


def check_zcdp_fields(gaussian: bool, rho: object, delta: object, mechanism: str) -> tuple:
    """``(rho, delta)`` of a release record, checked against its mechanism.

    A ``"discrete-gaussian"`` release needs ρ > 0 and δ in (0, 1), the δ at which its (ε, δ)
    guarantee is stated; any other mechanism has ``rho=None`` and ``delta=0``.

    Examples
    --------
    >>> check_zcdp_fields(True, 0.5, 1e-9, "discrete-gaussian")
    (0.5, 1e-09)
    >>> check_zcdp_fields(False, None, 0, "discrete-laplace")
    (None, 0.0)
    """
    if gaussian:
        if rho is None:
            raise ValueError(f"a {mechanism!r} release needs rho, its zCDP budget")
        rho = check_positive(rho, "rho")
        delta = check_positive(delta, "delta")
        if delta >= 1:
            raise ValueError(f"delta must lie in (0, 1) (got {delta})")
        return rho, delta
    if rho is not None:
        raise ValueError(f"rho applies only to 'discrete-gaussian' (got rho={rho!r})")
    if delta != 0:
        raise ValueError(f"delta must be 0 for {mechanism!r} (got {delta!r})")
    return None, 0.0
