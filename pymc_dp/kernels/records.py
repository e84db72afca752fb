"""Kernels of the record-level sampler: the n records of a windowed release as latent variables.

The records z_1, …, z_n (on the latent scale) are drawn with θ, so the likelihood is the noise
density k(y - ŝ(z)) of the released window sum ŝ(z) = Σ 1[a ≤ z_i ≤ b] t(z_i): exact, with no
CLT (Ju, Awan, Gong & Rao 2022). Two kernels:

* :func:`sweep_records`: z_i | z_{-i}, θ, y for i = 1, …, n in turn, by Metropolis–Hastings
  with the record's own law as proposal; the ratio is that of the noise densities, at least
  e^{-Δ/β} = e^{-ε} for a Laplace release (Ju et al.'s record update).
* :func:`slice_sample`: a univariate slice sampler (Neal 2003, stepping out and shrinkage) for
  a batch of independent targets, which the ancillary step of the interweaving sampler
  (:mod:`pymc_dp.engine.records`) uses to move θ with the standardised records fixed.

Both take a generator first and batch over a leading axis.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

__all__ = ["slice_sample", "sweep_records", "window_statistic"]

_PYTHON_ROWS = 4
"""Batches up to this size sweep row by row in plain Python floats (an order of magnitude less
overhead per record than NumPy calls on tiny arrays)."""


def window_statistic(
    records: npt.NDArray[np.float64], window: tuple[float, float], k: int
) -> npt.NDArray[np.float64]:
    """t̂ per record, shape ``(*records.shape, k)``: (z, z²)[:k] inside the window, else 0.

    Examples
    --------
    >>> window_statistic(np.array([0.5, 2.0]), (0.0, 1.0), 2).tolist()
    [[0.5, 0.25], [0.0, 0.0]]
    """
    z = np.asarray(records, dtype=np.float64)
    inside = (z >= window[0]) & (z <= window[1])
    powers = [z, z * z][:k]
    return np.stack([np.where(inside, p, 0.0) for p in powers], axis=-1)


def sweep_records(
    rng: np.random.Generator,
    *,
    records: npt.NDArray[np.float64],
    proposals: npt.NDArray[np.float64],
    window: tuple[float, float],
    k: int,
    released: npt.NDArray[np.float64],
    noise_scale: float,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """One Metropolis–Hastings sweep over the records, in order, for a batch of releases.

    Record i moves to ``proposals[:, i]`` (a draw from the record's law at the current θ) with
    probability min(1, k(y - ŝ')/k(y - ŝ)), k the Laplace density of scale ``noise_scale`` and
    ŝ' the window sum with record i replaced; later records see the updated sum.

    Parameters
    ----------
    rng
        Source of the acceptance draws.
    records, proposals
        Shape ``(B, n)``.
    window
        (a, b) on the latent scale.
    k
        Components of t: 1 for t(z) = z, 2 for (z, z²).
    released
        y, shape ``(B, k)``.
    noise_scale
        Laplace scale β.

    Returns
    -------
    records, acceptance
        The new records ``(B, n)`` and each row's share of accepted moves ``(B,)``.
    """
    t_old = window_statistic(records, window, k)
    delta = window_statistic(proposals, window, k) - t_old
    residual = np.asarray(released, dtype=np.float64) - t_old.sum(axis=1)
    log_u = np.log(rng.uniform(size=records.shape)) * noise_scale
    rows, n = records.shape
    accept = np.zeros(records.shape, dtype=bool)
    if rows <= _PYTHON_ROWS:
        for row in range(rows):
            accept[row] = _sweep_row(
                residual[row].tolist(), delta[row].tolist(), log_u[row].tolist()
            )
    else:
        gain_now = np.abs(residual).sum(axis=1)
        for i in range(n):
            moved = residual - delta[:, i]
            gain = np.abs(moved).sum(axis=1)
            ok = log_u[:, i] < gain_now - gain
            residual = np.where(ok[:, None], moved, residual)
            gain_now = np.where(ok, gain, gain_now)
            accept[:, i] = ok
    return np.where(accept, proposals, records), accept.mean(axis=1)


def _sweep_row(residual: list[float], delta: list[list[float]], log_u: list[float]) -> list[bool]:
    """One row of :func:`sweep_records` in Python floats: the residual y - ŝ is the state."""
    out = []
    if len(residual) == 1:
        (r,) = residual
        for (d,), u in zip(delta, log_u, strict=True):
            moved = r - d
            ok = u < abs(r) - abs(moved)
            if ok:
                r = moved
            out.append(ok)
        return out
    r1, r2 = residual
    for (d1, d2), u in zip(delta, log_u, strict=True):
        m1, m2 = r1 - d1, r2 - d2
        ok = u < abs(r1) + abs(r2) - abs(m1) - abs(m2)
        if ok:
            r1, r2 = m1, m2
        out.append(ok)
    return out


def slice_sample(
    rng: np.random.Generator,
    *,
    x: npt.NDArray[np.float64],
    log_density: Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]],
    width: npt.NDArray[np.float64],
    max_steps: int = 32,
) -> tuple[npt.NDArray[np.float64], int]:
    """One slice-sampling update of each of a batch of univariate targets (Neal 2003, §4).

    Stepping out by ``width`` (at most ``max_steps`` steps in all, split at random between the
    two sides), then shrinkage; the update leaves each target invariant for any width.

    Parameters
    ----------
    rng
        Source of randomness.
    x
        Current points, shape ``(B,)``.
    log_density
        Vectorised log density (up to a constant per row): ``(B,)`` points -> ``(B,)`` values.
    width
        Initial interval widths, broadcastable to ``(B,)``.
    max_steps
        Limit on stepping out.

    Returns
    -------
    x, evaluations
        New points and the number of calls to ``log_density``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = np.zeros(4000)
    >>> for _ in range(20):
    ...     x, _ = slice_sample(rng, x=x, log_density=lambda v: -0.5 * v**2, width=1.0)
    >>> round(float(x.mean()), 1), round(float(x.std()), 1)
    (0.0, 1.0)
    """
    x = np.asarray(x, dtype=np.float64)
    width = np.broadcast_to(np.asarray(width, dtype=np.float64), x.shape)
    level = log_density(x) - rng.exponential(size=x.shape)
    calls = 1
    left = x - width * rng.uniform(size=x.shape)
    right = left + width
    left_steps = np.floor(max_steps * rng.uniform(size=x.shape))
    right_steps = max_steps - 1 - left_steps
    for side in ("left", "right"):
        steps = left_steps if side == "left" else right_steps
        active = steps > 0
        while np.any(active):
            end = left if side == "left" else right
            calls += 1
            out = active & (log_density(end) > level)
            if side == "left":
                left = np.where(out, left - width, left)
            else:
                right = np.where(out, right + width, right)
            steps = steps - out
            active = out & (steps > 0)
    new = x.copy()
    done = np.zeros(x.shape, dtype=bool)
    for _ in range(200):
        candidate = left + (right - left) * rng.uniform(size=x.shape)
        calls += 1
        ok = ~done & (log_density(candidate) > level)
        new = np.where(ok, candidate, new)
        done |= ok
        if np.all(done):
            break
        below = candidate < x
        left = np.where(~done & below, candidate, left)
        right = np.where(~done & ~below, candidate, right)
    return new, calls
