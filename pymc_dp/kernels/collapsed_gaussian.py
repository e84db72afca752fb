"""The latent statistic given θ and y for a Gaussian-mechanism release (no mixing variance).

With s ~ N(m, V) by the CLT and y | s ~ N(s[:k], τ² I), s | θ, y is the normal product
(:func:`~pymc_dp.kernels.norm_product`, Algorithm 1 line 5 with σ² fixed at τ²): no
inverse-Gaussian mixing variance enters, because the noise is normal already. A scalar
statistic is then a normal truncated to its valid region, drawn exactly
(:func:`draw_gaussian_suffstat`); a released pair (Σz, Σz²) is drawn from its bivariate normal
untruncated, as the Laplace pair node does (:func:`draw_gaussian_pair_suffstat`).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.stats import truncnorm

from pymc_dp.kernels.norm_product import norm_product

__all__ = ["draw_gaussian_pair_suffstat", "draw_gaussian_suffstat", "gaussian_suffstat_moments"]

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


def draw_gaussian_suffstat(
    rng: np.random.Generator,
    *,
    released: npt.ArrayLike,
    mean: npt.ArrayLike,
    var: npt.ArrayLike,
    lower: npt.ArrayLike,
    upper: npt.ArrayLike,
    scale: npt.ArrayLike,
) -> npt.NDArray[np.float64]:
    """Draw s | θ, y exactly: N(μ₃, σ₃²) truncated to [lower, upper].

    Parameters
    ----------
    rng
        Source of randomness.
    released
        The released y.
    mean, var
        Mean and variance of the CLT normal for s given θ (before truncation).
    lower, upper
        The valid region of s.
    scale
        Standard deviation τ of the Gaussian noise.

    Returns
    -------
    numpy.ndarray
        Draws of s, the broadcast shape of the arguments.

    Examples
    --------
    >>> s = draw_gaussian_suffstat(np.random.default_rng(0), released=np.full(20000, 3.0),
    ...                            mean=0.0, var=1.0, lower=-50.0, upper=50.0, scale=1.0)
    >>> round(float(s.mean()), 1), round(float(s.var()), 1)   # N(1.5, 0.5)
    (1.5, 0.5)
    """
    loc, sd = gaussian_suffstat_moments(released=released, mean=mean, var=var, scale=scale)
    lo, hi = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (lower, upper)), loc)[
        :2
    ]
    s = truncnorm.rvs((lo - loc) / sd, (hi - loc) / sd, loc=loc, scale=sd, random_state=rng)
    return np.clip(np.asarray(s, dtype=np.float64), lo, hi)


def draw_gaussian_pair_suffstat(
    rng: np.random.Generator,
    *,
    released: npt.ArrayLike,
    mean: npt.ArrayLike,
    cov: npt.ArrayLike,
    scale: npt.ArrayLike,
) -> npt.NDArray[np.float64]:
    """Draw a released vector's s | θ, y ~ NormProduct(m, V, y, τ² I), untruncated.

    Parameters
    ----------
    rng
        Source of randomness.
    released
        The released y, shape ``(..., k)``.
    mean, cov
        CLT mean ``(..., k)`` and covariance ``(..., k, k)`` of s given θ.
    scale
        Standard deviation τ of the Gaussian noise (one for all components).

    Returns
    -------
    numpy.ndarray
        Draws of s, shape ``(..., k)``.

    Examples
    --------
    >>> s = draw_gaussian_pair_suffstat(np.random.default_rng(0), released=np.array([2.0, 0.0]),
    ...                                 mean=np.zeros((20000, 2)), cov=np.eye(2), scale=1.0)
    >>> np.round(s.mean(0), 1)
    array([ 1., -0.])
    """
    mean = np.asarray(mean, dtype=np.float64)
    cov = np.asarray(cov, dtype=np.float64)
    y = np.broadcast_to(np.asarray(released, dtype=np.float64), mean.shape)
    noise = np.broadcast_to(np.square(np.asarray(scale, dtype=np.float64)), y.shape)
    loc, cov3 = norm_product(mean, cov, y, noise)
    # eigh rather than Cholesky: cov3 may be singular to rounding (a statistic without spread).
    w, u = np.linalg.eigh(cov3)
    root = u * np.sqrt(np.clip(w, 0.0, None))[..., None, :]
    z = rng.standard_normal(loc.shape)
    return loc + (root @ z[..., None])[..., 0]
