"""Positive semi-definiteness of second-moment matrices with a fixed, public corner entry.

``B = [X, y]ᵀ[X, y]`` (with the intercept column) is PSD for every data set, and so is
``E[x xᵀ]`` for every distribution of x with ``x_0 = 1``. A noisy or sampled version may not be.
Both matrices have the form ``[[c, bᵀ], [b, C]]`` with ``c > 0`` fixed (``n``, or 1), and are PSD
exactly when the Schur complement ``K = C − b bᵀ / c`` is: ``K`` is the centred scatter (or
covariance) matrix of the remaining variables.

:func:`project_psd` clips the eigenvalues of ``K`` at ``floor``; it keeps ``c`` and ``b`` (the
sums, or means) and moves only ``C``. For ``floor = 0`` the result is the nearest matrix to the
input, in the Frobenius norm, among the PSD matrices with the same ``c`` and ``b``: the map
``C ↦ K`` is a translation, and eigenvalue clipping is the Frobenius projection onto the PSD cone
(Higham 1988).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["batched_cholesky", "min_schur_eigenvalue", "project_psd", "schur_complement"]


def schur_complement(b: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """``C − b bᵀ / c`` for ``B = [[c, bᵀ], [b, C]]`` of shape ``(..., q, q)``.

    Examples
    --------
    >>> schur_complement([[2.0, 2.0], [2.0, 3.0]]).tolist()
    [[1.0]]
    """
    b = np.asarray(b, dtype=np.float64)
    corner = b[..., :1, :1]
    edge = b[..., 1:, :1]
    return b[..., 1:, 1:] - edge * np.swapaxes(edge, -1, -2) / corner


def min_schur_eigenvalue(b: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Smallest eigenvalue of :func:`schur_complement`; ``B`` is PSD iff it is >= 0.

    Examples
    --------
    >>> float(min_schur_eigenvalue([[1.0, 2.0], [2.0, 3.0]]))
    -1.0
    """
    return np.linalg.eigvalsh(schur_complement(b))[..., 0]


def project_psd(b: npt.ArrayLike, *, floor: npt.ArrayLike = 0.0) -> npt.NDArray[np.float64]:
    """Clip the eigenvalues of the Schur complement of ``B`` at ``floor``, keeping row 0.

    Parameters
    ----------
    b
        Symmetric matrices ``[[c, bᵀ], [b, C]]`` with ``c > 0``, shape ``(..., q, q)``.
    floor
        Smallest eigenvalue allowed in the Schur complement, broadcastable to ``(...)``; 0 gives
        the nearest PSD matrix with the same first row, a positive value a strictly PD one.

    Returns
    -------
    numpy.ndarray
        Same shape; equal to ``b`` (up to rounding) wherever its Schur complement already has
        all eigenvalues >= ``floor``.

    References
    ----------
    Higham, N. J. (1988), "Computing a nearest symmetric positive semidefinite matrix",
    *Linear Algebra and its Applications* 103, 103-118.

    Examples
    --------
    >>> out = project_psd([[1.0, 2.0], [2.0, 3.0]])
    >>> out.tolist()
    [[1.0, 2.0], [2.0, 4.0]]
    """
    b = np.array(b, dtype=np.float64)
    floor = np.asarray(floor, dtype=np.float64)
    lam, vec = np.linalg.eigh(schur_complement(b))
    lam = np.maximum(lam, floor[..., None])
    k = (vec * lam[..., None, :]) @ np.swapaxes(vec, -1, -2)
    edge = b[..., 1:, :1]
    b[..., 1:, 1:] = (
        0.5 * (k + np.swapaxes(k, -1, -2)) + edge * np.swapaxes(edge, -1, -2) / b[..., :1, :1]
    )
    return b


_PIVOT_PASS_MAX = 16
"""Largest k of k × k matrices whose failed members :func:`batched_cholesky` finds in one vectorised
pass; above it the pass's k steps cost more than a LAPACK call per member (77 × 77, 440
members: 147 against 21 ms; 9 × 9: 1.7 against 4.1 ms; 3 × 3: 0.4 against 4.2 ms)."""


def _positive_pivots(a: np.ndarray) -> np.ndarray:
    """Which members of a batch of symmetric matrices have a Cholesky factor, ``(...)``.

    The column-by-column algorithm over the whole batch: a member fails at its first pivot
    that is not positive (or NaN), LAPACK's test. k NumPy passes for k × k matrices, where a
    loop over the members costs one LAPACK call each.
    """
    k = a.shape[-1]
    chol = np.zeros_like(a)
    ok = np.ones(a.shape[:-2], dtype=bool)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        for j in range(k):
            pivot = a[..., j, j] - np.sum(chol[..., j, :j] ** 2, axis=-1)
            ok &= pivot > 0
            root = np.sqrt(np.where(ok, pivot, 1.0))
            chol[..., j, j] = root
            below = a[..., j + 1 :, j] - (chol[..., j + 1 :, :j] @ chol[..., j, :j, None])[..., 0]
            chol[..., j + 1 :, j] = below / root[..., None]
    return ok


def batched_cholesky(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cholesky factors of a batch, and which members have one (the others get the identity).

    NumPy's batched call raises if any member fails. Then the members without a factor are
    found in one vectorised pass (:func:`_positive_pivots`) and replaced by the identity for a
    second batched call: a batch of proposals of s nearly always holds a few whose Gram matrix
    is not positive definite, and a loop over the members took half the batched engine's time.
    Only where the two tests disagree (a pivot at rounding level) is each member factored
    alone, and for k above ``_PIVOT_PASS_MAX`` every member.
    """
    try:
        return np.linalg.cholesky(a), np.ones(a.shape[:-2], dtype=bool)
    except np.linalg.LinAlgError:
        pass
    eye = np.eye(a.shape[-1])
    if a.shape[-1] <= _PIVOT_PASS_MAX:
        ok = _positive_pivots(a)
        try:
            chol = np.linalg.cholesky(np.where(ok[..., None, None], a, eye))
            finite = np.all(np.isfinite(chol), axis=(-2, -1))
            return np.where(finite[..., None, None], chol, eye), ok & finite
        except np.linalg.LinAlgError:
            pass
    flat = a.reshape(-1, *a.shape[-2:])
    out = np.broadcast_to(eye, flat.shape).copy()
    ok = np.zeros(flat.shape[0], dtype=bool)
    for i, mat in enumerate(flat):
        try:
            factor = np.linalg.cholesky(mat)
        except np.linalg.LinAlgError:
            continue
        ok[i] = np.all(np.isfinite(factor))
        if ok[i]:
            out[i] = factor
    return out.reshape(a.shape), ok.reshape(a.shape[:-2])
