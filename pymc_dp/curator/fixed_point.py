"""Fixed-point quantisation of float statistics, so that integer (discrete) noise can be added.

A vetted release never adds noise to a float. The exact statistic S (summed exactly over
records on their public grid, :mod:`pymc_dp.curator.exact_sums`) is rounded to an integer multiple
of a quantum q (a power of two chosen from public values only), discrete noise is added to that
integer, and the release is the noisy integer times q. Rounding a sum whose sensitivity is Δ
moves two neighbouring data sets' rounded totals apart by at most Δ/q + 1 quanta per component,
so the sensitivity in quantum units grows by d (L1) or √d (L2) over d components
(:func:`quantised_sensitivity`); rounding each record's t(x) before summing, as
:func:`quantise` and :func:`exact_total` do for arrays, is covered by the same bound.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import numpy.typing as npt

__all__ = [
    "MAX_NOISE_QUANTA",
    "MAX_TOTAL",
    "NOISE_QUANTA",
    "choose_quantum",
    "exact_total",
    "quantise",
    "quantised_sensitivity",
]

MAX_TOTAL = 2**62
"""Public overflow guard: n · max|t| / q must stay below this, so int64 sums (and the noise
added to them) cannot overflow."""

NOISE_QUANTA = 2**10
"""The quantum is at most 2⁻¹⁰ of both the noise scale and the narrowest component range of t:
rounding then adds at most d/1024 of Δ to the sensitivity, and discrete noise of at least 1024
quanta is within 2.5e-4 (KS) of continuous noise (docs, "Privacy")."""

MAX_NOISE_QUANTA = 2**50
"""The noise scale is at most 2⁵⁰ quanta (the quantum is made coarser for a tiny ε), so that
noisy int64 totals cannot overflow."""

_MIN_EXPONENT = -1022  # smallest normal power of two: t / q stays exact


def choose_quantum(*, t_bounds: npt.ArrayLike, n: int, noise_scale: float) -> float:
    """The quantum q, a power of two, from public values only.

    q is the largest power of two not above ``min(noise_scale, w) / 2**10``, with w the
    narrowest positive range ``upper - lower`` of a component of t (so that the rounding term
    d·q of the sensitivity is at most d/1024 of Δ, which is never below a component's range),
    made coarser if the noise would exceed ``2**50`` quanta, or until
    ``n · max|t| / q < 2**62``, so that integer totals cannot overflow int64.

    Parameters
    ----------
    t_bounds
        Public range of each component of one record's t(x), shape ``(d, 2)`` (lower, upper).
    n
        Number of records (public).
    noise_scale
        Scale of the noise in the statistic's units (Laplace b = Δ/ε, or Gaussian σ), from the
        uncorrected sensitivity.

    Returns
    -------
    float
        The quantum q = 2**k.

    Raises
    ------
    TypeError, ValueError
        If ``t_bounds`` is not a finite ``(d, 2)`` array with lower <= upper, ``n`` is not a
        positive integer, or ``noise_scale`` is not finite and > 0.

    Examples
    --------
    >>> choose_quantum(t_bounds=[[0.0, 1.5]], n=1000, noise_scale=3.0)  # 1.5 / 1024 > 2**-10
    0.0009765625
    >>> choose_quantum(t_bounds=[[-1e15, 1e15]], n=10**6, noise_scale=1e9) == 2.0**19
    True
    """
    bounds = np.asarray(t_bounds, dtype=np.float64)
    if bounds.ndim != 2 or bounds.shape[1] != 2 or bounds.shape[0] < 1:
        raise ValueError(
            f"t_bounds must have shape (d, 2), one (lower, upper) row per component "
            f"(got shape {bounds.shape})"
        )
    if not np.all(np.isfinite(bounds)) or np.any(bounds[:, 0] > bounds[:, 1]):
        raise ValueError("t_bounds must be finite with lower <= upper in every row")
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise TypeError(f"n must be a positive integer (got {n!r})")
    noise_scale = float(noise_scale)
    if not (math.isfinite(noise_scale) and noise_scale > 0):
        raise ValueError(f"noise_scale must be finite and > 0 (got {noise_scale!r})")
    widths = bounds[:, 1] - bounds[:, 0]
    reference = (
        min(noise_scale, float(np.min(widths[widths > 0]))) if np.any(widths > 0) else (noise_scale)
    )
    exponent = max(math.floor(math.log2(reference / NOISE_QUANTA)), _MIN_EXPONENT)
    exponent = max(exponent, math.ceil(math.log2(noise_scale / MAX_NOISE_QUANTA)))
    largest = float(np.max(np.abs(bounds)))
    if largest > 0:
        # Work in exponents: n · max|t| itself may overflow a float.
        exponent = max(exponent, math.floor(math.log2(n) + math.log2(largest)) - 62)
        while float(n) * math.ldexp(largest, -exponent) >= MAX_TOTAL:
            exponent += 1
    return math.ldexp(1.0, exponent)


def quantise(t: npt.ArrayLike, quantum: float) -> npt.NDArray[np.int64]:
    """Round each value of ``t`` to the nearest integer multiple of ``quantum`` (in quanta).

    Ties go to even (``np.rint``). With q a power of two, ``t / q`` is exact, so the only
    rounding is the one covered by :func:`quantised_sensitivity`.

    Parameters
    ----------
    t
        Per-record statistics, shape ``(..., d)``.
    quantum
        A power of two (:func:`choose_quantum`).

    Returns
    -------
    numpy.ndarray of int64
        ``rint(t / quantum)``, same shape as ``t``.

    Raises
    ------
    ValueError
        If ``quantum`` is not a positive power of two, or a value is not finite or beyond
        ``2**62`` quanta (the message quotes no value).

    Examples
    --------
    >>> quantise([[0.3, 1.25], [2.5, -0.75]], 0.5)
    array([[ 1,  2],
           [ 5, -2]])
    """
    quantum = _check_quantum(quantum)
    scaled = np.asarray(t, dtype=np.float64) / quantum
    if not np.all(np.isfinite(scaled)) or np.any(np.abs(scaled) >= MAX_TOTAL):
        raise ValueError(
            f"t must be finite and below {MAX_TOTAL} quanta of {quantum!r} in absolute value; "
            "choose the quantum with choose_quantum from public bounds of t"
        )
    return np.rint(scaled).astype(np.int64)


def exact_total(q_ints: npt.ArrayLike) -> tuple[int, ...]:
    """Exact column sums of quantised statistics, as Python integers.

    Sums are taken in int64 over blocks small enough not to overflow, and the block sums are
    added as Python integers, so the result is exact for any number of rows.

    Parameters
    ----------
    q_ints
        Integer array of shape ``(m, d)`` (e.g. :func:`quantise` output); ``m`` may be 0.

    Returns
    -------
    tuple of int
        The ``d`` column totals.

    Examples
    --------
    >>> exact_total([[2**61, 1], [2**61, 2], [2**61, 3]])
    (6917529027641081856, 6)
    """
    arr = np.asarray(q_ints)
    if arr.ndim != 2:
        raise ValueError(f"q_ints must have shape (m, d) (got shape {arr.shape})")
    if arr.size and arr.dtype.kind not in "iu":
        raise TypeError(f"q_ints must be integers (got dtype {arr.dtype})")
    arr = arr.astype(np.int64, copy=False)
    totals = [0] * arr.shape[1]
    if arr.shape[0] == 0:
        return tuple(totals)
    largest = int(np.max(np.abs(arr.astype(np.float64)))) + 1
    block = max(1, MAX_TOTAL // largest)
    for start in range(0, arr.shape[0], block):
        partial = np.sum(arr[start : start + block], axis=0, dtype=np.int64)
        totals = [a + int(b) for a, b in zip(totals, partial, strict=True)]
    return tuple(totals)


def quantised_sensitivity(delta: float, quantum: float, d: int, norm: Literal["l1", "l2"]) -> float:
    """Sensitivity of the quantised total, in quanta, covering the rounding.

    Each component of one record's quantised statistic is within q/2 of the exact one, so
    replacing a record moves the quantised total by at most Δ + d·q (L1) or Δ₂ + √d·q (L2)
    in the statistic's units.

    Parameters
    ----------
    delta
        Sensitivity Δ (L1) or Δ₂ (L2) of the exact statistic, in its units.
    quantum
        The quantum q.
    d
        Number of released components.
    norm
        ``"l1"`` or ``"l2"``.

    Returns
    -------
    float
        ``delta / q + d`` (L1) or ``delta / q + sqrt(d)`` (L2).

    Examples
    --------
    >>> quantised_sensitivity(1.5, 0.25, 2, "l1"), quantised_sensitivity(1.5, 0.25, 4, "l2")
    (8.0, 8.0)
    """
    delta = float(delta)
    if not (math.isfinite(delta) and delta >= 0):
        raise ValueError(f"delta must be finite and >= 0 (got {delta!r})")
    quantum = _check_quantum(quantum)
    if isinstance(d, bool) or not isinstance(d, int | np.integer) or d < 1:
        raise TypeError(f"d must be a positive integer, the number of components (got {d!r})")
    if norm == "l1":
        return delta / quantum + d
    if norm == "l2":
        return delta / quantum + math.sqrt(d)
    raise ValueError(f"norm must be 'l1' or 'l2' (got {norm!r})")


def _check_quantum(quantum: float) -> float:
    """A positive, finite power of two."""
    q = float(quantum)
    if not (math.isfinite(q) and q > 0) or math.frexp(q)[0] != 0.5:
        raise ValueError(f"quantum must be a positive power of two (got {quantum!r})")
    return q
