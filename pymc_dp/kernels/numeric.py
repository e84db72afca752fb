"""Small numerical helpers the kernels share."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy import special

__all__ = ["NormalInterval", "log_normal_mass", "log_sum_exp", "normal_interval"]


def log_sum_exp(
    x: npt.ArrayLike, axis: int = -1, *, keepdims: bool = False
) -> npt.NDArray[np.float64]:
    """``log Σ exp(x)`` along ``axis``, −∞ where every term is −∞.

    ``scipy.special.logsumexp`` costs about 100 µs a call in array-API dispatch, which the
    samplers' per-step kernels (batch 1 under ``pm.sample``) pay thousands of times.

    Examples
    --------
    >>> log_sum_exp(np.log([[1.0, 3.0], [0.0, 0.0]])).tolist()
    [1.3862943611198906, -inf]
    """
    x = np.asarray(x, dtype=np.float64)
    top = np.max(x, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(x - top), axis=axis, keepdims=True)) + top
    return out if keepdims else np.squeeze(out, axis=axis)


class NormalInterval(NamedTuple):
    """A standard normal's interval [lo, hi] mirrored below 0, where log Φ is accurate."""

    flip: npt.NDArray[np.bool_]
    """Where lo > 0: the interval is [−b, −a]."""
    a: npt.NDArray[np.float64]
    b: npt.NDArray[np.float64]
    log_a: npt.NDArray[np.float64]
    """log Φ(a)."""
    log_b: npt.NDArray[np.float64]
    """log Φ(b)."""


def normal_interval(lo: npt.ArrayLike, hi: npt.ArrayLike) -> NormalInterval:
    """[lo, hi] mirrored below 0, with log Φ of both ends.

    One evaluation serves a draw from the interval and its mass (:func:`log_normal_mass`).
    """
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    flip = lo > 0
    a, b = np.where(flip, -hi, lo), np.where(flip, -lo, hi)
    return NormalInterval(flip, a, b, special.log_ndtr(a), special.log_ndtr(b))


def log_normal_mass(interval: NormalInterval) -> npt.NDArray[np.float64]:
    """log(Φ(b) − Φ(a)) of a :func:`normal_interval`, accurate in both tails (no cancellation).

    Examples
    --------
    >>> float(np.exp(log_normal_mass(normal_interval(-1.0, 1.0))))  # doctest: +ELLIPSIS
    0.6826894921...
    >>> float(log_normal_mass(normal_interval(40.0, 41.0)))  # Φ(−40) − Φ(−41), far below 1e-300
    -804.608...
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        diff = np.minimum(interval.log_a - interval.log_b, 0.0)
        return interval.log_b + np.log(-np.expm1(diff))
