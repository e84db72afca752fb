"""Gibbs-SS kernel for the latent regression statistic s | θ, σ², z, noise variances.

Algorithm 1, line 4 of Bernstein & Sheldon (2019): ``s ~ NormProduct(n μ_t, n Σ_t, z, diag σ²)``,
a normal (:func:`pymc_dp.kernels.norm_product`). The statistic must also be *valid*: ``B(s)``, the
matrix ``[X, y]ᵀ[X, y]`` it encodes, is PSD for every data set, and the conjugate update needs it
(:mod:`pymc_dp.regression.conjugate`). The paper projects an invalid draw onto the PSD matrices.
Here the draw is from the normal *restricted* to the valid set, with bounded work:

1. up to ``proposals`` independent draws from the normal; the first valid one is returned. Given
   that one is valid, it is an exact draw from the restricted normal.
2. If none is valid (the normal puts little mass on the valid set), one elliptical slice sampling
   update (Murray, Adams & MacKay 2010) with the validity indicator as likelihood moves the
   current, valid s; it leaves the restricted normal invariant. Its bracket shrinks towards the
   current state, so it stops after at most ``max_shrinks`` steps (keeping the current state if
   none was valid, which has vanishing probability for a state inside the valid set).

The probability of branch 1 does not depend on the current state, so the mixture leaves the
restricted normal invariant: no projection bias. :func:`pymc_dp.regression.psd.project_psd` is
used only to make a starting state and for the naive baseline (post-processing of z).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from pymc_dp.kernels import norm_product
from pymc_dp.regression.psd import min_schur_eigenvalue
from pymc_dp.regression.statistics import unpack_statistic

__all__ = ["SuffStatDraw", "draw_regression_suffstat", "is_valid_statistic"]

_RELATIVE_TOL = 1e-12


class SuffStatDraw(NamedTuple):
    """Result of :func:`draw_regression_suffstat`."""

    value: npt.NDArray[np.float64]
    """The new s, shape ``(..., m)``, with ``B(s)`` PSD."""
    n_fallback: int
    """Batch members that moved by elliptical slice sampling (no proposal was valid)."""
    n_stuck: int
    """Batch members whose slice sampler found no valid point and kept the current s."""


def is_valid_statistic(s: npt.ArrayLike, n: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """Whether ``B(s)`` (with ``B[0, 0] = n``) is positive semi-definite, shape ``(...)``.

    Eigenvalues of the Schur complement down to ``-1e-12`` times the largest of n and
    ``|B_jj|`` count as 0, so that the output of :func:`~pymc_dp.regression.psd.project_psd` is
    valid despite rounding, whatever the units of the data.

    Examples
    --------
    >>> from pymc_dp.regression.statistics import regression_statistic
    >>> s = regression_statistic([[0.0], [1.0], [3.0]], [1.0, 0.0, 2.0])
    >>> bool(is_valid_statistic(s, 3)), bool(is_valid_statistic(s * [1, 0, 1, 1, 1], 3))
    (True, False)
    """
    b = unpack_statistic(s, n)
    scale = np.maximum(np.asarray(n), np.max(np.abs(np.diagonal(b, axis1=-2, axis2=-1)), axis=-1))
    return min_schur_eigenvalue(b) >= -_RELATIVE_TOL * scale


def _psd_factor(cov: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """F with F Fᵀ = cov for PSD, possibly singular, cov (eigendecomposition)."""
    lam, vec = np.linalg.eigh(cov)
    return vec * np.sqrt(np.maximum(lam, 0.0))[..., None, :]


def draw_regression_suffstat(
    rng: np.random.Generator,
    *,
    clt_mean: npt.ArrayLike,
    clt_cov: npt.ArrayLike,
    released: npt.ArrayLike,
    noise_variance: npt.ArrayLike,
    n: npt.ArrayLike,
    current: npt.ArrayLike,
    proposals: int = 8,
    max_shrinks: int = 60,
) -> SuffStatDraw:
    """Draw s ~ NormProduct(nμ_t, nΣ_t, z, diag σ²) restricted to ``B(s)`` PSD.

    Parameters
    ----------
    rng
        Source of randomness.
    clt_mean, clt_cov
        ``n μ_t`` of shape ``(batch, m)`` and ``n Σ_t`` of shape ``(batch, m, m)``.
    released, noise_variance
        Released z and the current noise variances σ², shape ``(batch, m)``.
    n
        Number of records, broadcastable to ``(batch,)``.
    current
        Current s, valid, shape ``(batch, m)``.
    proposals
        Independent proposals tried before the slice-sampling fallback (0: always slice).
    max_shrinks
        Bound on the slice sampler's bracket shrinkages.

    Returns
    -------
    SuffStatDraw

    References
    ----------
    Bernstein & Sheldon (2019), Algorithm 1 line 4 and §3.4.3; Murray, Adams & MacKay (2010),
    "Elliptical slice sampling", AISTATS.

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_dp.regression.statistics import regression_statistic
    >>> s = regression_statistic([[0.0], [1.0], [3.0], [2.0]], [1.0, 0.0, 2.0, 2.0])[None]
    >>> out = draw_regression_suffstat(np.random.default_rng(0), clt_mean=s,
    ...     clt_cov=np.eye(5)[None], released=s, noise_variance=np.ones((1, 5)), n=4, current=s)
    >>> out.value.shape, bool(is_valid_statistic(out.value, 4)[0])
    ((1, 5), True)
    """
    current = np.asarray(current, dtype=np.float64)
    batch, m = current.shape
    n = np.broadcast_to(np.asarray(n, dtype=np.float64), (batch,))
    mean3, cov3 = norm_product(clt_mean, clt_cov, released, noise_variance)
    factor = _psd_factor(cov3)

    out = current.copy()
    found = np.zeros(batch, dtype=bool)
    if proposals > 0:
        noise = rng.standard_normal((proposals, batch, m))
        cand = mean3 + np.einsum("bij,kbj->kbi", factor, noise)
        valid = is_valid_statistic(cand, n)  # (proposals, batch)
        first = np.argmax(valid, axis=0)
        found = valid[first, np.arange(batch)]
        out = np.where(found[:, None], cand[first, np.arange(batch)], current)

    need = np.flatnonzero(~found)
    n_stuck = 0
    if need.size:
        out[need], n_stuck = _elliptical_slice(
            rng, mean3[need], factor[need], current[need], n[need], max_shrinks
        )
    return SuffStatDraw(out, int(need.size), n_stuck)


def _elliptical_slice(
    rng: np.random.Generator,
    mean: npt.NDArray[np.float64],
    factor: npt.NDArray[np.float64],
    current: npt.NDArray[np.float64],
    n: npt.NDArray[np.float64],
    max_shrinks: int,
) -> tuple[npt.NDArray[np.float64], int]:
    """One elliptical slice update per row for N(mean, F Fᵀ) times the validity indicator.

    The indicator likelihood is 1 at the (valid) current state, so every valid point on the
    ellipse is inside the slice.
    """
    rows = current.shape[0]
    nu = np.einsum("bij,bj->bi", factor, rng.standard_normal(current.shape))
    centred = current - mean
    angle = rng.uniform(0.0, 2.0 * np.pi, size=rows)
    lo, hi = angle - 2.0 * np.pi, angle.copy()
    out = current.copy()
    todo = np.ones(rows, dtype=bool)
    for _ in range(max_shrinks):
        idx = np.flatnonzero(todo)
        if idx.size == 0:
            break
        prop = (
            mean[idx]
            + centred[idx] * np.cos(angle[idx])[:, None]
            + nu[idx] * np.sin(angle[idx])[:, None]
        )
        ok = is_valid_statistic(prop, n[idx])
        out[idx[ok]] = prop[ok]
        todo[idx[ok]] = False
        bad = idx[~ok]
        neg = angle[bad] < 0
        lo[bad] = np.where(neg, angle[bad], lo[bad])
        hi[bad] = np.where(neg, hi[bad], angle[bad])
        angle[bad] = rng.uniform(lo[bad], hi[bad])
    return out, int(np.count_nonzero(todo))
