"""The latent statistic given θ and y for a Gaussian-mechanism release (no mixing variance).

With s ~ N(m, V) by the CLT and y | s ~ N(s[:k], τ² I), s | θ, y is the normal product
(:func:`~pymc_dp.kernels.norm_product`, Algorithm 1 line 5 with σ² fixed at τ²): no
inverse-Gaussian mixing variance enters, because the noise is normal already. This module
holds the Gaussian noise law's part, the moments of s | θ, y: of a scalar statistic before
its truncation to the valid region (:func:`gaussian_suffstat_moments`), and of a released pair
(Σz, Σz²), left untruncated as the Laplace pair node leaves it (:func:`gaussian_pair_moments`).
The draws are those of each law of s, with ``gaussian=True``:
:func:`~pymc_dp.kernels.collapsed.draw_collapsed_suffstat` and
:func:`~pymc_dp.kernels.collapsed_pair.draw_pair_suffstat`.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pymc_dp.kernels.norm_product import norm_product

__all__ = ["gaussian_pair_moments", "gaussian_suffstat_moments"]

_FLOOR = 1e-6  # as in pymc_dp.likelihoods.collapsed_gaussian: sd floored at 1e-6·τ


def gaussian_suffstat_moments(
    *,
    released: npt.ArrayLike,
    mean: npt.ArrayLike,
    var: npt.ArrayLike,
    scale: npt.ArrayLike,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Mean and sd of s | θ, y before truncation, for a scalar statistic.

    Examples
    --------
    >>> m, sd = gaussian_suffstat_moments(released=2.0, mean=0.0, var=1.0, scale=1.0)
    >>> round(float(m), 6), round(float(sd ** 2), 6)
    (1.0, 0.5)
    """
    y, m, v, t = np.broadcast_arrays(
        *(np.asarray(a, dtype=np.float64) for a in (released, mean, var, scale))
    )
    noise = t * t
    v = v + (_FLOOR * t) ** 2
    total = v + noise
    return (noise * m + v * y) / total, np.sqrt(v * noise / total)


def gaussian_pair_moments(
    *,
    released: npt.ArrayLike,
    mean: npt.ArrayLike,
    cov: npt.ArrayLike,
    scale: npt.ArrayLike,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Mean ``(..., k)`` and covariance ``(..., k, k)`` of a released vector's s | θ, y.

    NormProduct(m, V, y, τ² I) of the CLT mean and covariance of s with the release; the
    scale τ is one for all components.

    Examples
    --------
    >>> m, c = gaussian_pair_moments(released=np.array([2.0, 0.0]), mean=np.zeros(2),
    ...                              cov=np.eye(2), scale=1.0)
    >>> np.round(m, 6).tolist(), np.round(np.diag(c), 6).tolist()
    ([1.0, 0.0], [0.5, 0.5])
    """
    mean = np.asarray(mean, dtype=np.float64)
    cov = np.asarray(cov, dtype=np.float64)
    y = np.broadcast_to(np.asarray(released, dtype=np.float64), mean.shape)
    noise = np.broadcast_to(np.square(np.asarray(scale, dtype=np.float64)), y.shape)
    return norm_product(mean, cov, y, noise)
