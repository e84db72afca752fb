"""Gibbs-SS kernel for the latent regression statistic s | θ, σ², z, noise variances.

Algorithm 1, line 4 of Bernstein & Sheldon (2019): ``s ~ NormProduct(n μ_t, n Σ_t, z, diag σ²)``,
a normal (:func:`pymc_dp.kernels.norm_product`). The statistic must also be *valid*: ``B(s)``, the
matrix ``[X, y]ᵀ[X, y]`` it encodes, is PSD for every data set, and the conjugate update needs it
(:mod:`pymc_dp.regression.kernels.conjugate`). The paper projects an invalid draw onto the PSD
matrices. Here the draw is from the normal *restricted* to the valid set, by the constrained-normal
kernel the exponential families use (:func:`pymc_dp.kernels.draw_truncated_normal`) with the valid
set as a :class:`~pymc_dp.kernels.PSDConstraint` (:func:`psd_constraint`): a bounded number of
independent proposals, then exact Gibbs sweeps of the restricted normal in whitened coordinates
from the current, valid s. No projection bias. :func:`pymc_dp.regression.kernels.psd.project_psd` is
used only to make a starting state and for the naive baseline (post-processing of z).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from pymc_dp.curator.regression.statistics import d_from_released, released_pairs, unpack_statistic
from pymc_dp.kernels import PSDConstraint, draw_truncated_normal, norm_product
from pymc_dp.regression.kernels.psd import min_schur_eigenvalue

__all__ = ["SuffStatDraw", "draw_regression_suffstat", "is_valid_statistic", "psd_constraint"]

_RELATIVE_TOL = 1e-12


class SuffStatDraw(NamedTuple):
    """Result of :func:`draw_regression_suffstat`."""

    value: npt.NDArray[np.float64]
    """The new s, shape ``(..., m)``, with ``B(s)`` PSD."""
    n_fallback: int
    """Batch members that moved by Gibbs sweeps (no proposal was valid)."""


@functools.cache
def _psd_basis(d: int) -> npt.NDArray[np.float64]:
    rows, cols = released_pairs(d)
    basis = np.zeros((rows.size, d + 2, d + 2))
    basis[np.arange(rows.size), rows, cols] = 1.0
    basis[np.arange(rows.size), cols, rows] = 1.0
    basis.setflags(write=False)
    return basis


def psd_constraint(n: npt.ArrayLike, d: int) -> PSDConstraint:
    """The valid statistics of n records as a :class:`~pymc_dp.kernels.PSDConstraint`.

    ``B(s) = n e₀e₀ᵀ + Σ_r s_r (E_ij + E_ji)`` over the released pairs (i, j) (once on the
    diagonal), i.e. :func:`~pymc_dp.curator.regression.statistics.unpack_statistic`.

    Examples
    --------
    >>> from pymc_dp.curator.regression.statistics import regression_statistic
    >>> s = regression_statistic([[0.0], [1.0], [3.0]], [1.0, 0.0, 2.0])
    >>> c = psd_constraint(3, 1)
    >>> bool(c.contains(s)), bool(c.contains(s * [1, 0, 1, 1, 1]))
    (True, False)
    """
    n = np.asarray(n, dtype=np.float64)
    offset = np.zeros((*n.shape, d + 2, d + 2))
    offset[..., 0, 0] = n
    return PSDConstraint(offset, _psd_basis(d), _RELATIVE_TOL)


def is_valid_statistic(s: npt.ArrayLike, n: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """Whether ``B(s)`` (with ``B[0, 0] = n``) is positive semi-definite, shape ``(...)``.

    Eigenvalues of the Schur complement down to ``-1e-12`` times the largest of n and
    ``|B_jj|`` count as 0, so that the output of :func:`~pymc_dp.regression.kernels.psd.project_psd`
    is valid despite rounding, whatever the units of the data.

    Examples
    --------
    >>> from pymc_dp.curator.regression.statistics import regression_statistic
    >>> s = regression_statistic([[0.0], [1.0], [3.0]], [1.0, 0.0, 2.0])
    >>> bool(is_valid_statistic(s, 3)), bool(is_valid_statistic(s * [1, 0, 1, 1, 1], 3))
    (True, False)
    """
    b = unpack_statistic(s, n)
    scale = np.maximum(np.asarray(n), np.max(np.abs(np.diagonal(b, axis1=-2, axis2=-1)), axis=-1))
    return min_schur_eigenvalue(b) >= -_RELATIVE_TOL * scale


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
    sweeps: int = 2,
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
        Independent proposals tried before the Gibbs-sweep fallback (0: always sweep).
    sweeps
        Whitened-coordinate Gibbs sweeps of the fallback.

    Returns
    -------
    SuffStatDraw

    References
    ----------
    Bernstein & Sheldon (2019), Algorithm 1 line 4 and §3.4.3; Rodriguez-Yam, Davis & Scharf
    (2004), "Efficient Gibbs sampling of truncated multivariate normal with application to
    constrained linear regression".

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_dp.curator.regression.statistics import regression_statistic
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
    out = draw_truncated_normal(
        rng,
        mean=mean3,
        cov=cov3,
        lower=-np.inf,
        upper=np.inf,
        current=current,
        constraints=[psd_constraint(n, d_from_released(m))],
        proposals=proposals,
        sweeps=sweeps,
    )
    return SuffStatDraw(out.value, out.n_fallback)
