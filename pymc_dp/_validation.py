"""Argument checks used at the public API boundary.

Every check names the argument, the value it got and the rule it broke, so that a caller can fix
the call without reading the source. ``TypeError`` is for the wrong kind of object, ``ValueError``
for a value of the right kind that breaks a rule. Checks run before any noise is drawn.
"""

from __future__ import annotations

import numbers

import numpy as np
import numpy.typing as npt

__all__ = [
    "check_finite_array",
    "check_int",
    "check_positive",
    "check_rng",
]


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
        raise TypeError(f"{name} must be a real number (got {type(value).__name__}: {value!r})")
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0 (got {value!r})")
    return float(value)


def check_int(value: object, name: str, *, minimum: int) -> int:
    """Return ``value`` as an int after checking it is an integer >= ``minimum``.

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
        raise TypeError(f"{name} must be an integer (got {type(value).__name__}: {value!r})")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum} (got {value!r})")
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
    arr = np.asarray(value)
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
