"""A normal draw restricted to the valid region of s, with bounded work.

The sufficient statistic must stay in its valid region (0 ≤ s ≤ n·trials, counts ≥ 0 on the
simplex). The paper draws from the normal until the draw is valid; that loop is unbounded when the
normal puts little mass on the region. Here a fixed number of independent proposals is tried, and
if none is valid the state moves by exact Gibbs sweeps of the truncated normal in whitened
coordinates (Geweke 1991; Rodriguez-Yam, Davis & Scharf 2004) started from the current, valid s.

A sweep draw that rounding has put outside the region (an ill-conditioned PSD constraint) is
rejected, z_i keeping its value, and so is a whole fallback move that ends outside: the returned
state is always in the region (issue 34).

Both branches leave the truncated normal invariant and the branch probability does not depend on
the current state, so their mixture is a valid MCMC kernel for s. For one-dimensional s one
whitened Gibbs update is an exact independent draw.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy.stats import truncnorm

from pymc_dp.kernels.constraints import Constraint

__all__ = ["TruncatedDraw", "draw_truncated_normal"]

# Eigenvalues below this fraction of the largest are treated as exact zeros: the normal lives on
# an affine subspace (K counts that sum to n).
_RANK_TOL = 1e-10


class TruncatedDraw(NamedTuple):
    """Result of :func:`draw_truncated_normal`."""

    value: npt.NDArray[np.float64]
    """The new state, shape ``(..., k)``."""
    n_fallback: int
    """How many batch members moved by Gibbs sweeps because no proposal was valid."""


def draw_truncated_normal(
    rng: np.random.Generator,
    *,
    mean: npt.ArrayLike,
    cov: npt.ArrayLike,
    lower: npt.ArrayLike,
    upper: npt.ArrayLike,
    current: npt.ArrayLike,
    constraints: Sequence[Constraint] = (),
    proposals: int = 16,
    sweeps: int = 4,
) -> TruncatedDraw:
    """Move ``current`` under N(mean, cov) restricted to the box ``lower ≤ s ≤ upper``.

    Further convex ``constraints`` (:mod:`pymc_dp.kernels.constraints`) may cut the box down.

    Parameters
    ----------
    rng
        Source of randomness.
    mean, cov
        Normal mean ``(..., k)`` and PSD covariance ``(..., k, k)``, which may be singular.
    lower, upper
        Box of the valid region, broadcastable to ``(..., k)``; ``±inf`` allowed.
    current
        Current state inside the region, ``(..., k)``; used only when no proposal is valid.
    constraints
        Extra convex constraints, batched like ``mean``.
    proposals
        Number of independent normal proposals tried first (bounded, vectorised); 0 goes
        straight to the Gibbs sweeps.
    sweeps
        Number of whitened-coordinate Gibbs sweeps in the fallback.

    Returns
    -------
    TruncatedDraw
        The new state and the number of batch members that used the fallback.

    Examples
    --------
    >>> import numpy as np
    >>> out = draw_truncated_normal(np.random.default_rng(1), mean=[-5.0], cov=[[1.0]],
    ...                             lower=0.0, upper=10.0, current=[1.0])
    >>> bool(0 <= out.value[0] <= 10)
    True
    """
    mean = np.asarray(mean, dtype=np.float64)
    cov = np.asarray(cov, dtype=np.float64)
    batch, k = mean.shape[:-1], mean.shape[-1]
    lower = np.broadcast_to(np.asarray(lower, dtype=np.float64), mean.shape)
    upper = np.broadcast_to(np.asarray(upper, dtype=np.float64), mean.shape)
    current = np.broadcast_to(np.asarray(current, dtype=np.float64), mean.shape)

    eigval, eigvec = np.linalg.eigh(cov)
    keep = eigval > _RANK_TOL * np.max(eigval, axis=-1, keepdims=True)
    root = np.where(keep, np.sqrt(np.where(keep, eigval, 0.0)), 0.0)
    factor = eigvec * root[..., None, :]

    if proposals > 0:
        z = rng.standard_normal((proposals, *batch, k))
        cand = mean + (factor @ z[..., None])[..., 0]
        valid = np.all((cand >= lower) & (cand <= upper), axis=-1)
        for constraint in constraints:
            valid &= constraint.contains(cand)
        found = np.any(valid, axis=0)
        first = np.argmax(valid, axis=0)
        value = np.take_along_axis(cand, first[None, ..., None], axis=0)[0]
    else:  # straight to the Gibbs sweeps
        found = np.zeros(batch, dtype=bool)
        value = current.copy()

    missing = ~found
    n_fallback = int(np.count_nonzero(missing))
    if n_fallback:
        value = value.copy()
        value[missing] = _gibbs_sweeps(
            rng,
            mean=mean[missing],
            factor=factor[missing],
            eigvec=eigvec[missing],
            root=root[missing],
            lower=lower[missing],
            upper=upper[missing],
            current=current[missing],
            constraints=[c.select(missing) for c in constraints],
            sweeps=sweeps,
        )
    # Rounding in ``factor @ z`` can leave a value a few ulps outside a bound it should touch.
    value = np.clip(value, lower, upper)
    return TruncatedDraw(value, n_fallback)


def _gibbs_sweeps(
    rng: np.random.Generator,
    *,
    mean: npt.NDArray,
    factor: npt.NDArray,
    eigvec: npt.NDArray,
    root: npt.NDArray,
    lower: npt.NDArray,
    upper: npt.NDArray,
    current: npt.NDArray,
    constraints: Sequence[Constraint],
    sweeps: int,
) -> npt.NDArray:
    """Gibbs sweeps over whitened coordinates z, with s = mean + factor @ z, for a flat batch."""
    k = mean.shape[-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        proj = (np.swapaxes(eigvec, -1, -2) @ (current - mean)[..., None])[..., 0]
        z = np.where(root > 0, proj / root, 0.0)
    for _ in range(sweeps):
        for i in range(k):
            active = root[:, i] > 0
            if not np.any(active):
                continue
            col = factor[:, :, i]
            rest = mean + (factor @ z[..., None])[..., 0] - col * z[:, i : i + 1]
            with np.errstate(divide="ignore", invalid="ignore"):
                t_lo = (lower - rest) / col
                t_hi = (upper - rest) / col
            pos, neg = col > 0, col < 0
            lo = np.max(np.where(pos, t_lo, np.where(neg, t_hi, -np.inf)), axis=-1)
            hi = np.min(np.where(pos, t_hi, np.where(neg, t_lo, np.inf)), axis=-1)
            # Each constraint's interval along the line through the current, feasible point
            # (some constraints need a feasible base point), shifted to the line's origin.
            here = rest + col * z[:, i : i + 1]
            for constraint in constraints:
                c_lo, c_hi = constraint.line_interval(here, col)
                lo = np.maximum(lo, c_lo + z[:, i])
                hi = np.minimum(hi, c_hi + z[:, i])
            # Rounding can make the interval empty by a few ulps; keep z_i where it is then.
            ok = active & (lo < hi)
            if np.any(ok):
                old = z[ok, i]
                z[ok, i] = truncnorm.rvs(lo[ok], hi[ok], random_state=rng)
                # In exact arithmetic the draw is inside. With an ill-conditioned constraint
                # matrix rounding in the line interval can let it out. Such a draw is rejected,
                # so z_i keeps its value and the state stays valid.
                moved = np.flatnonzero(ok)
                point = mean[moved] + (factor[moved] @ z[moved, :, None])[..., 0]
                inside = np.ones(moved.size, dtype=bool)
                for constraint in constraints:
                    inside &= constraint.select(ok).contains(point)
                z[moved[~inside], i] = old[~inside]
    value = mean + (factor @ z[..., None])[..., 0]
    # Dropping current − mean along the directions of zero variance (rounding) can put the
    # sweeps' start, and so their end, outside: such a move is rejected as a whole.
    inside = np.ones(value.shape[0], dtype=bool)
    for constraint in constraints:
        inside &= constraint.contains(value)
    return np.where(inside[:, None], value, current)
