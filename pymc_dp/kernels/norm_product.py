"""NormProduct: the product of the CLT normal for s with the normal noise model for y.

Algorithm 1, line 5 of Bernstein & Sheldon (2018): the full conditional of s given θ, σ² and y is
proportional to N(s; nμ, nΣ) · N(y; s, diag σ²), a normal. We use the form that never inverts the
CLT covariance, because that covariance is singular for K category counts that sum to n.

The same update serves truncated families (Algorithm 2), where only the first k components of a
longer latent vector (the statistic of the records inside the window) are released: the factor
N(y; s[:k], diag σ²) then conditions the whole vector through its covariance.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["norm_product"]


def norm_product(
    mean1: npt.ArrayLike,
    cov1: npt.ArrayLike,
    mean2: npt.ArrayLike,
    var2: npt.ArrayLike,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Moments of the normal ∝ N(s; mean1, cov1) · N(mean2; s[:k], diag var2) (NormProduct).

    Parameters
    ----------
    mean1
        Mean of the first factor, shape ``(..., m)``.
    cov1
        Covariance of the first factor, shape ``(..., m, m)``; positive semi-definite, may be
        singular.
    mean2
        The noisy observation of the first ``k <= m`` components, shape ``(..., k)``.
    var2
        Its noise variances, shape ``(..., k)``; strictly positive.

    Returns
    -------
    mean3 : numpy.ndarray
        ``mean1 + cov1[:, :k] S⁻¹ (mean2 - mean1[:k])`` with ``S = cov1[:k, :k] + diag var2``,
        shape ``(..., m)``.
    cov3 : numpy.ndarray
        ``cov1 - cov1[:, :k] S⁻¹ cov1[:k, :]``, shape ``(..., m, m)``, symmetric PSD.

    Notes
    -----
    With ``S = L Lᵀ`` and ``W = L⁻¹ cov1[:k, :]``, ``cov3 = cov1 - WᵀW`` and
    ``mean3 = mean1 + Wᵀ L⁻¹ (mean2 - mean1[:k])``. For ``k = m`` this equals the textbook
    ``(cov1⁻¹ + cov2⁻¹)⁻¹`` form whenever ``cov1`` is invertible, and stays defined when it is
    not. If ``cov1 @ c = 0`` for a vector ``c`` (counts summing to n), then ``cov3 @ c = 0`` and
    ``mean3 @ c = mean1 @ c``: the product keeps the constraint exactly.

    References
    ----------
    Bernstein & Sheldon (2018), Algorithm 1 and subroutine NormProduct; Petersen & Pedersen,
    "The Matrix Cookbook", §8.1.8.

    Examples
    --------
    >>> m, c = norm_product([0.0], [[1.0]], [2.0], [1.0])
    >>> round(float(m[0]), 12), round(float(c[0, 0]), 12)
    (1.0, 0.5)
    """
    mean1 = np.asarray(mean1, dtype=np.float64)
    cov1 = np.asarray(cov1, dtype=np.float64)
    mean2 = np.asarray(mean2, dtype=np.float64)
    var2 = np.asarray(var2, dtype=np.float64)
    if np.any(var2 <= 0):
        raise ValueError("var2 must be strictly positive")
    k = mean2.shape[-1]
    if k > mean1.shape[-1]:
        raise ValueError(f"mean2 observes {k} components but mean1 has only {mean1.shape[-1]}")
    total = cov1[..., :k, :k] + var2[..., :, None] * np.eye(k)
    chol = np.linalg.cholesky(total)
    w = np.linalg.solve(chol, cov1[..., :k, :])
    resid = np.linalg.solve(chol, (mean2 - mean1[..., :k])[..., None])
    mean3 = mean1 + (np.swapaxes(w, -1, -2) @ resid)[..., 0]
    cov3 = cov1 - np.swapaxes(w, -1, -2) @ w
    cov3 = 0.5 * (cov3 + np.swapaxes(cov3, -1, -2))
    return mean3, cov3
