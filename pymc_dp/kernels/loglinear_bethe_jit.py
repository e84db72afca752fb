"""Damped loopy belief propagation sweeps of :mod:`pymc_dp.kernels.loglinear_bethe`, compiled.

One sweep of :class:`~pymc_dp.kernels.loglinear_bethe.BetheMoments` touches a few hundred
messages of a few levels each (15 ternary columns with all 2-way tables: 210 directed edges of
3 levels), so in NumPy its cost is the ten or so array calls per sweep, not the arithmetic. Here
is the same synchronous (Jacobi) update in compiled loops: every message is recomputed from the
previous sweep's messages, log-summed over the source level, shifted to a maximum of 0 and
damped; the sweeps stop when no message moves by more than ``tol``. The results agree with the
NumPy sweeps to rounding (``tests/test_loglinear_moments.py``).
"""

from __future__ import annotations

import math

import numba
import numpy as np

__all__ = ["bp_sweeps", "bp_sweeps_numpy"]


@numba.njit(cache=True)
def bp_sweeps(single, oriented, src, dst, rev, msg, damping, tol, max_iter):  # pragma: no cover
    """Run damped loopy BP sweeps from ``msg``; return (messages, sweeps run, last change).

    ``single`` (K, L) and ``oriented`` (D, L, L) are the log-potentials (the pair ones oriented
    source level × destination level per directed edge d = ``src[d]`` → ``dst[d]``, ``rev[d]``
    the opposite edge). Stops after the first sweep whose largest change is below ``tol`` or not
    finite, or after ``max_iter`` sweeps.
    """
    n_edges, width = msg.shape
    k_cols = single.shape[0]
    msg = msg.copy()
    new = np.empty_like(msg)
    incoming = np.empty((k_cols, width))
    cavity = np.empty(width)
    delta = 0.0
    sweeps = 0
    for _ in range(max_iter):
        sweeps += 1
        incoming[:, :] = 0.0
        for d in range(n_edges):
            for v in range(width):
                incoming[dst[d], v] += msg[d, v]
        delta = 0.0
        for d in range(n_edges):
            s, r = src[d], rev[d]
            for v in range(width):
                cavity[v] = single[s, v] + incoming[s, v] - msg[r, v]
            top = -np.inf
            for v in range(width):
                for w in range(width):
                    x = cavity[v] + oriented[d, v, w]
                    if x > top:
                        top = x
            best = -np.inf
            for w in range(width):
                total = 0.0
                for v in range(width):
                    total += math.exp(cavity[v] + oriented[d, v, w] - top)
                new[d, w] = math.log(total) + top
                if new[d, w] > best:
                    best = new[d, w]
            for w in range(width):
                value = (1.0 - damping) * (new[d, w] - best) + damping * msg[d, w]
                change = abs(value - msg[d, w])
                if math.isnan(change) or math.isnan(delta):
                    delta = math.nan
                elif change > delta:
                    delta = change
                new[d, w] = value
        msg, new = new, msg
        if not math.isfinite(delta) or delta < tol:
            break
    return msg, sweeps, delta


def bp_sweeps_numpy(
    single: np.ndarray,
    oriented: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    rev: np.ndarray,
    msg: np.ndarray,
    damping: float,
    tol: float,
    max_iter: int,
) -> tuple[np.ndarray, int, float]:
    """The same sweeps in NumPy: the reference for tests and benchmarks (array-call bound)."""
    delta, it = 0.0, 0
    for it in range(max_iter):
        incoming = np.zeros(single.shape)
        np.add.at(incoming, dst, msg)
        cavity = single[src] + incoming[src] - msg[rev]
        x = cavity[:, :, None] + oriented
        top = x.max(axis=(1, 2), keepdims=True)
        new = np.log(np.exp(x - top).sum(axis=1)) + top[:, 0]
        new -= new.max(axis=1, keepdims=True)
        new = (1.0 - damping) * new + damping * msg
        delta = float(np.max(np.abs(new - msg))) if msg.size else 0.0
        msg = new
        if not np.isfinite(delta) or delta < tol:
            break
    return msg, it + 1, delta
