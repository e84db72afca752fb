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
    Only where the two tests disagree (a pivot at rounding level) are the members the pass
    kept factored by LAPACK in chunks that find the ones it fails (:func:`_factor_by_halves`),
    and for k above ``_PIVOT_PASS_MAX`` every member that way.
    """
    try:
        return np.linalg.cholesky(a), np.ones(a.shape[:-2], dtype=bool)
    except np.linalg.LinAlgError:
        pass
    eye = np.eye(a.shape[-1])
    if a.shape[-1] <= _PIVOT_PASS_MAX:
        ok = _positive_pivots(a)
        masked = np.where(ok[..., None, None], a, eye)
        try:
            chol = np.linalg.cholesky(masked)
            finite = np.all(np.isfinite(chol), axis=(-2, -1))
            return np.where(finite[..., None, None], chol, eye), ok & finite
        except np.linalg.LinAlgError:
            a = masked  # the members the pass failed get the identity, and are kept failed
    else:
        ok = np.ones(a.shape[:-2], dtype=bool)
    flat = a.reshape(-1, *a.shape[-2:])
    out = np.broadcast_to(eye, flat.shape).copy()
    factored = np.zeros(flat.shape[0], dtype=bool)
    _factor_by_halves(flat, out, factored)
    return out.reshape(a.shape), ok & factored.reshape(a.shape[:-2])


def _factor_by_halves(flat: np.ndarray, out: np.ndarray, ok: np.ndarray) -> None:
    """LAPACK's factor of each member of ``flat`` ``(N, k, k)`` that has one, into ``out``, ``ok``.

    The same factors and verdicts as one call per member (the batched call runs the same
    routine on each), in batched calls over chunks: a chunk whose call raises is halved, down
    to single members, so f failing members cost about 2f·log₂(N/f) calls, not N. The whole
    batch is known to fail. Where some members of 3 000 (5 × 5, the cube's proposals in
    ``tests/test_regression_cell_model.py``) failed at rounding level on every call, the loop
    over every member made 1.44 million LAPACK calls in one test.
    """
    half = flat.shape[0] // 2
    chunks = [(half, flat.shape[0]), (0, half)]
    while chunks:
        lo, hi = chunks.pop()
        if hi == lo:
            continue
        try:
            chol = np.linalg.cholesky(flat[lo:hi])
        except np.linalg.LinAlgError:
            if hi - lo > 1:  # a member alone that fails has no factor
                mid = (lo + hi) // 2
                chunks += [(mid, hi), (lo, mid)]
            continue
        finite = np.all(np.isfinite(chol), axis=(-2, -1))
        out[lo:hi][finite] = chol[finite]
        ok[lo:hi] = finite
