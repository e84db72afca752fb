"""Normal data model for the covariates, with a normal–inverse-Wishart prior (Gibbs-SS-Update).

Instead of plugging in fixed moments of x, Gibbs-SS-Update models the covariates as
``x ~ N(μ_x, Σ_x)`` with ``(μ_x, Σ_x) ~ NIW(m, κ, ν, Ψ)``::

    Σ_x ~ InverseWishart(ν, Ψ),    μ_x | Σ_x ~ N(m, Σ_x / κ),

and updates ``(μ_x, Σ_x)`` inside the Gibbs loop from the current latent statistic s, whose
covariate block holds ``Σ_i x_i`` and ``Σ_i x_i x_iᵀ`` (Bernstein & Sheldon 2019, §3.4.4 and
Figure 3). The CLT moments of s then come from the current draw: ``E[x xᵀ]`` and the
fourth-moment covariance ``Φ`` of a normal vector (Isserlis), :func:`normal_x_moments`.

Why the update is exact given s
-------------------------------
Under the normal data model ``(Σ x, Σ x xᵀ)`` is sufficient for ``(μ_x, Σ_x)``, and the responses
depend on x only through θ and σ². Hence the records given their covariate sums are independent
of ``(μ_x, Σ_x)``, and ``p(μ_x, Σ_x | s, θ, σ²)`` is the conjugate NIW posterior given those
sums (:func:`niw_update`). The only approximation of Gibbs-SS-Update is the CLT for s (and the
data model itself).

Bounded covariates
------------------
The release needs a box for x, while a normal has unbounded support; the normal is a model of
the data, not of the box. As in the paper (whose Figure 3 discussion attributes the small
miscalibration of Gibbs-SS-Update to "approximations in the calculation of multivariate normal
distribution fourth moments from a data prior"), the box enters only through the sensitivity:
the sampler neither truncates the normal nor renormalises its moments. This is accurate when the
box holds almost all of the normal's mass, and is a plain approximation otherwise (e.g. for
uniform covariates the normal fourth moments overstate Φ, which makes the posterior somewhat
wider). The tests draw the covariates from the normal model and redraw the rare trials with a
record outside the box, which conditions the data-generating process on the box; the redrawn
fraction is reported and kept below 1 %.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from pymc_dp.curator.regression.statistics import unpack_statistic
from pymc_dp.regression.kernels.moments import XMoments

__all__ = ["NIW", "check_niw", "draw_niw", "niw_update", "normal_x_moments"]


class NIW(NamedTuple):
    """Normal–inverse-Wishart distribution of ``(μ_x, Σ_x)``; leading batch dimensions allowed."""

    loc: npt.NDArray[np.float64]
    """m, shape ``(..., d)``."""
    kappa: npt.NDArray[np.float64]
    """κ > 0: μ_x | Σ_x has covariance Σ_x / κ, shape ``(...)``."""
    dof: npt.NDArray[np.float64]
    """ν > d − 1 degrees of freedom, shape ``(...)``."""
    scale: npt.NDArray[np.float64]
    """Ψ, symmetric positive definite, shape ``(..., d, d)``; ``E Σ_x = Ψ / (ν − d − 1)``."""

    @property
    def batch_shape(self) -> tuple[int, ...]:
        """Broadcast batch shape of the four parameters."""
        return np.broadcast_shapes(
            self.loc.shape[:-1], self.kappa.shape, self.dof.shape, self.scale.shape[:-2]
        )


def check_niw(prior: object, name: str = "x_prior") -> NIW:
    """Return ``prior`` as a float :class:`NIW` after checking shapes and values.

    Accepts a :class:`NIW` or a 4-sequence ``(loc, kappa, dof, scale)``.

    Raises
    ------
    TypeError
        If ``prior`` is not a 4-sequence.
    ValueError
        If a parameter is non-finite, shapes disagree, ``kappa <= 0``, ``dof <= d − 1`` or
        ``scale`` is not symmetric positive definite.

    Examples
    --------
    >>> check_niw(([0.0], 1.0, 5.0, [[1.0]])).batch_shape
    ()
    """
    try:
        loc, kappa, dof, scale = (np.asarray(v, dtype=np.float64) for v in prior)
    except (TypeError, ValueError):
        raise TypeError(
            f"{name} must be a NIW or a sequence (loc, kappa, dof, scale) (got {prior!r})"
        ) from None
    if loc.ndim < 1 or scale.shape[-2:] != (loc.shape[-1],) * 2:
        raise ValueError(
            f"{name}: loc must have shape (..., d) and scale (..., d, d) (got {loc.shape} and "
            f"{scale.shape})"
        )
    for label, v in (("loc", loc), ("kappa", kappa), ("dof", dof), ("scale", scale)):
        if not np.all(np.isfinite(v)):
            raise ValueError(f"{name}.{label} must be finite")
    d = loc.shape[-1]
    if np.any(kappa <= 0):
        raise ValueError(f"{name}.kappa must be > 0 (got {kappa})")
    if np.any(dof <= d - 1):
        raise ValueError(f"{name}.dof must be > d - 1 = {d - 1} (got {dof})")
    if not np.allclose(scale, np.swapaxes(scale, -1, -2)):
        raise ValueError(f"{name}.scale must be symmetric")
    try:
        np.linalg.cholesky(scale)
    except np.linalg.LinAlgError:
        raise ValueError(f"{name}.scale must be positive definite") from None
    out = NIW(loc, kappa, dof, scale)
    try:
        out.batch_shape
    except ValueError:
        raise ValueError(f"{name}: the batch shapes of the parameters do not broadcast") from None
    return out


def niw_update(prior: NIW, *, statistic: npt.ArrayLike, n: npt.ArrayLike) -> NIW:
    """Conjugate NIW posterior given the covariate block of the regression statistic ``s``.

    With ``x̄ = Σx / n`` and the centred scatter ``C = Σ x xᵀ − n x̄ x̄ᵀ`` (PSD for valid s)::

        κ_n = κ + n,  ν_n = ν + n,  m_n = (κ m + Σx) / κ_n,
        Ψ_n = Ψ + C + (κ n / κ_n) (x̄ − m)(x̄ − m)ᵀ.

    Parameters
    ----------
    prior
        :class:`NIW` prior, broadcastable to the batch of ``statistic``.
    statistic
        Released-layout statistic, shape ``(..., m)``.
    n
        Number of records, broadcastable to ``(...)``.

    Returns
    -------
    NIW
        Posterior parameters, with the broadcast batch shape.

    Examples
    --------
    >>> from pymc_dp.curator.regression.statistics import regression_statistic
    >>> s = regression_statistic([[0.0], [2.0]], [0.0, 0.0])
    >>> post = niw_update(NIW(np.zeros(1), np.array(2.0), np.array(3.0), np.eye(1)), statistic=s,
    ...                   n=2)
    >>> post.loc.tolist(), float(post.kappa), float(post.dof), post.scale.tolist()
    ([0.5], 4.0, 5.0, [[4.0]])
    """
    b = unpack_statistic(statistic, n)
    d = prior.loc.shape[-1]
    n = np.asarray(n, dtype=np.float64)
    total = b[..., 0, 1 : d + 1]
    second = b[..., 1 : d + 1, 1 : d + 1]
    mean = total / n[..., None]
    scatter = second - n[..., None, None] * mean[..., :, None] * mean[..., None, :]
    kappa_n = prior.kappa + n
    diff = mean - prior.loc
    shrink = (prior.kappa * n / kappa_n)[..., None, None]
    scale_n = prior.scale + scatter + shrink * diff[..., :, None] * diff[..., None, :]
    return NIW(
        (prior.kappa[..., None] * prior.loc + total) / kappa_n[..., None],
        kappa_n,
        prior.dof + n,
        0.5 * (scale_n + np.swapaxes(scale_n, -1, -2)),
    )


def draw_niw(
    rng: np.random.Generator, niw: NIW, *, size: tuple[int, ...] = ()
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Draw ``(μ_x, Σ_x)`` from a batch of NIW distributions.

    ``Σ_x⁻¹ ~ Wishart(ν, Ψ⁻¹)`` by the Bartlett decomposition: with ``Ψ = R Rᵀ`` and ``A`` lower
    triangular, ``A_ii² ~ χ²(ν − i)``, ``A_ij ~ N(0, 1)`` below the diagonal, ``Σ_x = Gᵀ G`` for
    ``G = A⁻¹ Rᵀ``. Then ``μ_x = m + chol(Σ_x) ξ / √κ``.

    Parameters
    ----------
    rng
        Source of randomness.
    niw
        Parameters with batch shape ``batch``.
    size
        Extra leading sample dimensions.

    Returns
    -------
    loc : numpy.ndarray
        μ_x, shape ``(*size, *batch, d)``.
    cov : numpy.ndarray
        Σ_x, shape ``(*size, *batch, d, d)``.

    Examples
    --------
    >>> niw = NIW(np.zeros(2), np.array(1.0), np.array(5.0), np.eye(2))
    >>> mu, cov = draw_niw(np.random.default_rng(0), niw, size=(4,))
    >>> mu.shape, cov.shape
    ((4, 2), (4, 2, 2))
    """
    batch = tuple(size) + niw.batch_shape
    d = niw.loc.shape[-1]
    dof = np.broadcast_to(niw.dof, batch)
    a = np.tril(rng.standard_normal((*batch, d, d)), -1)
    diag = np.sqrt(rng.chisquare(dof[..., None] - np.arange(d)))
    a = a + diag[..., :, None] * np.eye(d)
    chol_t = np.broadcast_to(np.swapaxes(np.linalg.cholesky(niw.scale), -1, -2), (*batch, d, d))
    g = np.linalg.solve(a, chol_t)
    cov = np.swapaxes(g, -1, -2) @ g
    cov = 0.5 * (cov + np.swapaxes(cov, -1, -2))
    xi = rng.standard_normal((*batch, d))
    try:
        root = np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        # With ν = d (the default prior of x) a χ²₁ diagonal near 0 makes Σ_x's eigenvalues
        # span more than float64 resolves, and Gᵀ G fails its own Cholesky (seen once in 8·10⁵
        # draws at d = 3). Gᵀ is a square root of Σ_x as well, so μ_x has the same law; the
        # Cholesky factor stays where it works, so that seeded draws are unchanged there.
        root = np.swapaxes(g, -1, -2)
    loc = (
        niw.loc
        + (root @ xi[..., None])[..., 0] / np.sqrt(np.broadcast_to(niw.kappa, batch))[..., None]
    )
    return loc, cov


def normal_x_moments(loc: npt.ArrayLike, cov: npt.ArrayLike) -> XMoments:
    """Moments of ``x = (1, x_1, ..., x_d)`` for ``(x_1, ..., x_d) ~ N(μ, Σ_x)``.

    With the intercept's mean 1 and variance 0 (``μ̃ = (1, μ)``, ``Σ̃ = 0 ⊕ Σ_x``),
    ``E[x_a x_b] = μ̃_a μ̃_b + Σ̃_ab`` and, by Isserlis' theorem (odd central moments vanish),
    ``Cov(x_a x_b, x_c x_e) = μ̃_a μ̃_c Σ̃_be + μ̃_a μ̃_e Σ̃_bc + μ̃_b μ̃_c Σ̃_ae + μ̃_b μ̃_e Σ̃_ac
    + Σ̃_ac Σ̃_be + Σ̃_ae Σ̃_bc``.

    Parameters
    ----------
    loc
        μ, shape ``(..., d)``.
    cov
        Σ_x, shape ``(..., d, d)``.

    Returns
    -------
    XMoments
        With batch shape ``(...)``.

    Examples
    --------
    x ~ N(1, 2): E x² = 3, Var x² = 4μ²σ² + 2σ⁴ = 16.

    >>> mom = normal_x_moments([1.0], [[2.0]])
    >>> float(mom.second[1, 1]), float(mom.fourth_cov[1, 1, 1, 1])
    (3.0, 16.0)
    """
    loc = np.asarray(loc, dtype=np.float64)
    cov = np.asarray(cov, dtype=np.float64)
    batch = np.broadcast_shapes(loc.shape[:-1], cov.shape[:-2])
    d = loc.shape[-1]
    mu = np.concatenate([np.ones((*batch, 1)), np.broadcast_to(loc, (*batch, d))], axis=-1)
    sig = np.zeros((*batch, d + 1, d + 1))
    sig[..., 1:, 1:] = cov
    second = mu[..., :, None] * mu[..., None, :] + sig
    mm = mu[..., :, None] * mu[..., None, :]  # μ̃_a μ̃_c, indexed (a, c)
    phi = (
        np.einsum("...ac,...be->...abce", mm, sig)
        + np.einsum("...ae,...bc->...abce", mm, sig)
        + np.einsum("...bc,...ae->...abce", mm, sig)
        + np.einsum("...be,...ac->...abce", mm, sig)
        + np.einsum("...ac,...be->...abce", sig, sig)
        + np.einsum("...ae,...bc->...abce", sig, sig)
    )
    return XMoments(second, phi)
