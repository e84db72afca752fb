"""Normal–Inverse-Gamma prior of (θ, σ²) and its conjugate update from B = [X, y]ᵀ[X, y].

``σ² ~ InverseGamma(shape a, scale b)`` and ``θ | σ² ~ N(μ, σ² Λ⁻¹)``, with ``Λ`` a *precision*
matrix. Given the statistic ``s`` (hence ``XᵀX``, ``Xᵀy``, ``yᵀy``) the posterior is NIG with
(Bernstein & Sheldon 2019, Eq. (1))::

    Λ_n = XᵀX + Λ,   μ_n = Λ_n⁻¹ (Λμ + Xᵀy),   a_n = a + n/2,
    b_n = b + (yᵀy + μᵀΛμ − μ_nᵀ Λ_n μ_n) / 2.

``b_n >= b`` exactly when ``B`` is PSD, which is why sampled statistics must stay PSD.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from pymc_dp.curator.regression.statistics import unpack_statistic

__all__ = ["NIG", "check_nig", "draw_nig", "nig_update"]


class NIG(NamedTuple):
    """Normal–Inverse-Gamma distribution of (θ, σ²); leading batch dimensions allowed."""

    mean: npt.NDArray[np.float64]
    """μ, shape ``(..., p)`` (intercept first)."""
    precision: npt.NDArray[np.float64]
    """Λ, shape ``(..., p, p)``: θ | σ² has covariance σ² Λ⁻¹."""
    shape: npt.NDArray[np.float64]
    """a > 0, shape ``(...)``."""
    scale: npt.NDArray[np.float64]
    """b > 0, shape ``(...)``."""

    @property
    def batch_shape(self) -> tuple[int, ...]:
        """Broadcast batch shape of the four parameters."""
        return np.broadcast_shapes(
            self.mean.shape[:-1], self.precision.shape[:-2], self.shape.shape, self.scale.shape
        )


def check_nig(prior: object, name: str = "prior") -> NIG:
    """Return ``prior`` as a float :class:`NIG` after checking shapes and values.

    Accepts a :class:`NIG` or a 4-sequence ``(mean, precision, shape, scale)``.

    Raises
    ------
    TypeError
        If ``prior`` is not a 4-sequence.
    ValueError
        If a parameter is non-finite, ``precision`` is not symmetric positive definite, shapes
        disagree, or ``shape``/``scale`` is not > 0.

    Examples
    --------
    >>> check_nig(([0.0, 0.0], np.eye(2), 3.0, 1.0)).batch_shape
    ()
    """
    try:
        mean, precision, shape, scale = (np.asarray(v, dtype=np.float64) for v in prior)
    except (TypeError, ValueError):
        raise TypeError(
            f"{name} must be a NIG or a sequence (mean, precision, shape, scale) (got {prior!r})"
        ) from None
    if mean.ndim < 1 or precision.shape[-2:] != (mean.shape[-1],) * 2:
        raise ValueError(
            f"{name}: mean must have shape (..., p) and precision (..., p, p) (got {mean.shape} "
            f"and {precision.shape})"
        )
    for label, v in (("mean", mean), ("precision", precision), ("shape", shape), ("scale", scale)):
        if not np.all(np.isfinite(v)):
            raise ValueError(f"{name}.{label} must be finite")
    if np.any(shape <= 0) or np.any(scale <= 0):
        raise ValueError(f"{name}.shape and {name}.scale must be > 0 (got {shape}, {scale})")
    if not np.allclose(precision, np.swapaxes(precision, -1, -2)):
        raise ValueError(f"{name}.precision must be symmetric")
    try:
        np.linalg.cholesky(precision)
    except np.linalg.LinAlgError:
        raise ValueError(f"{name}.precision must be positive definite") from None
    out = NIG(mean, precision, shape, scale)
    try:
        out.batch_shape
    except ValueError:
        raise ValueError(f"{name}: the batch shapes of the parameters do not broadcast") from None
    return out


def nig_update(prior: NIG, *, statistic: npt.ArrayLike, n: npt.ArrayLike) -> NIG:
    """Conjugate NIG posterior given the (PSD) regression statistic ``s`` of n records.

    Parameters
    ----------
    prior
        :class:`NIG` prior, broadcastable to the batch of ``statistic``.
    statistic
        Released-layout statistic, shape ``(..., m)``
        (:mod:`pymc_dp.curator.regression.statistics`).
    n
        Number of records, broadcastable to ``(...)``.

    Returns
    -------
    NIG
        Posterior parameters, with the broadcast batch shape.

    Examples
    --------
    >>> from pymc_dp.curator.regression.statistics import regression_statistic
    >>> s = regression_statistic([[0.0], [1.0], [2.0]], [1.0, 3.0, 5.0])
    >>> post = nig_update(NIG(np.zeros(2), 1e-6 * np.eye(2), 1.0, 1.0), statistic=s, n=3)
    >>> np.round(post.mean, 4).tolist(), float(post.shape)
    ([1.0, 2.0], 2.5)
    """
    b = unpack_statistic(statistic, n)
    p = b.shape[-1] - 1
    xtx, xty, yty = b[..., :p, :p], b[..., :p, p], b[..., p, p]
    prec_n = xtx + prior.precision
    rhs = (prior.precision @ prior.mean[..., None])[..., 0] + xty
    chol = np.linalg.cholesky(prec_n)
    half = np.linalg.solve(chol, rhs[..., None])  # L⁻¹ r, so μ_nᵀ Λ_n μ_n = |L⁻¹ r|²
    mean_n = np.linalg.solve(np.swapaxes(chol, -1, -2), half)[..., 0]
    prior_quad = np.einsum("...i,...ij,...j->...", prior.mean, prior.precision, prior.mean)
    # ≥ 0 in exact arithmetic for PSD B; rounding must not push b_n below b.
    resid = np.maximum(yty + prior_quad - np.sum(half[..., 0] ** 2, axis=-1), 0.0)
    return NIG(
        mean_n,
        prec_n,
        np.broadcast_to(prior.shape + 0.5 * np.asarray(n, dtype=np.float64), resid.shape) * 1.0,
        prior.scale + 0.5 * resid,
    )


def draw_nig(
    rng: np.random.Generator, nig: NIG, *, size: tuple[int, ...] = ()
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Draw (θ, σ²) from a batch of NIG distributions.

    Parameters
    ----------
    rng
        Source of randomness.
    nig
        Parameters with batch shape ``batch``.
    size
        Extra leading sample dimensions.

    Returns
    -------
    theta : numpy.ndarray
        Shape ``(*size, *batch, p)``.
    sigma2 : numpy.ndarray
        Shape ``(*size, *batch)``.

    Examples
    --------
    >>> nig = NIG(np.zeros(2), np.eye(2), np.array(3.0), np.array(2.0))
    >>> theta, sigma2 = draw_nig(np.random.default_rng(0), nig, size=(5,))
    >>> theta.shape, sigma2.shape
    ((5, 2), (5,))
    """
    batch = tuple(size) + nig.batch_shape
    p = nig.mean.shape[-1]
    sigma2 = np.broadcast_to(nig.scale, batch) / rng.gamma(np.broadcast_to(nig.shape, batch))
    chol = np.linalg.cholesky(nig.precision)  # Λ = L Lᵀ, θ = μ + σ L⁻ᵀ z
    z = rng.standard_normal((*batch, p))
    chol_t = np.broadcast_to(np.swapaxes(chol, -1, -2), (*batch, p, p))
    offset = np.linalg.solve(chol_t, z[..., None])[..., 0]
    return nig.mean + np.sqrt(sigma2)[..., None] * offset, sigma2
