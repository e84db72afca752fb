"""CLT moments of the regression statistic t(x, y) given θ, σ² and the moments of x.

With ``x = (1, x_1, ..., x_d)`` (``p = d + 1`` entries), ``y = xᵀθ + e``, ``e ~ N(0, σ²)``
independent of x, the statistic of one record is ``t_r = w_i w_j`` for the released pairs
``(i, j)`` of ``w = (x, y)`` (:mod:`pymc_dp.curator.regression.statistics`). Its mean and covariance
need only ``Σ = E[x xᵀ]`` and ``Φ_ab,cd = Cov(x_a x_b, x_c x_d)`` (Bernstein & Sheldon 2019, §3.4.1,
Eqs. (2)-(3); method note §4).

Derivation (general in d)
-------------------------
Write ``w = M x + e u`` with ``M = [I_p; θᵀ]`` and ``u`` the unit vector of y. Then
``w_i w_j = xᵀ G_ij x + e L_ij + e² u_i u_j`` with ``G_ij = M_i M_jᵀ`` and
``L_ij = (Mx)_i u_j + u_i (Mx)_j``. Since e is independent of x with ``E e = E e³ = 0``,
``E e² = σ²`` and ``Var e² = 2σ⁴``, the three parts are uncorrelated and, with ``S = M Σ Mᵀ``,

* ``E[w_i w_j] = S_ij + σ² u_i u_j``;
* ``Cov(w_i w_j, w_k w_l) = Σ G_ij,ab G_kl,cd Φ_ab,cd``
  ``+ σ² (S_ik u_j u_l + S_il u_j u_k + S_jk u_i u_l + S_jl u_i u_k) + 2σ⁴ u_i u_j u_k u_l``.

For the pairs of the paper these are its formulas, e.g. ``Var(y²) = 2σ⁴ + Σ θθθθ Φ + 4σ² θᵀΣθ``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from pymc_dp.curator.regression.statistics import covariate_powers, released_pairs, statistic_powers
from pymc_dp.regression.kernels.psd import project_psd

__all__ = [
    "XMoments",
    "check_x_moments",
    "empirical_x_moments",
    "suffstat_moments",
    "x_moments_from_monomial_means",
    "x_moments_from_release",
]

_ALL_DEGREES = (0, 1, 2, 3, 4)


class XMoments(NamedTuple):
    """Moments of the covariates with the intercept, ``x = (1, x_1, ..., x_d)``.

    Leading batch dimensions are allowed (one set of moments per release).
    """

    second: npt.NDArray[np.float64]
    """``Σ = E[x xᵀ]``, shape ``(..., p, p)``; ``Σ_00 = 1`` and ``Σ_0j = E x_j``."""
    fourth_cov: npt.NDArray[np.float64]
    """``Φ_ab,cd = Cov(x_a x_b, x_c x_d)``, shape ``(..., p, p, p, p)``."""

    @classmethod
    def stack(cls, moments: list[XMoments]) -> XMoments:
        """Stack unbatched moments along a new leading batch axis."""
        return cls(np.stack([m.second for m in moments]), np.stack([m.fourth_cov for m in moments]))


@functools.cache
def _tensor_index(d: int) -> npt.NDArray[np.intp]:
    """(p, p, p, p) position of the monomial x_a x_b x_c x_e in ``covariate_powers(d, 0..4)``."""
    powers = covariate_powers(d, _ALL_DEGREES)
    lookup = {tuple(row): k for k, row in enumerate(powers.tolist())}
    p = d + 1
    index = np.empty((p, p, p, p), dtype=np.intp)
    for flat in range(p**4):
        abce = np.unravel_index(flat, (p,) * 4)
        expo = np.bincount([a - 1 for a in abce if a > 0], minlength=d)
        index[abce] = lookup[tuple(expo.tolist())]
    return index


def check_x_moments(x_moments: object, p: int) -> XMoments:
    """Check moments of x (with the intercept, p = d + 1) given by a user; return them as floats.

    Leading batch dimensions are allowed. ``second`` and ``fourth_cov`` (as a ``p² × p²``
    matrix) must be finite and positive semi-definite, or the CLT covariance of the statistic is
    not a covariance.

    Raises
    ------
    TypeError
        If ``x_moments`` is not an :class:`XMoments`.
    ValueError
        If shapes do not match p, or values are not finite or not PSD.

    Examples
    --------
    >>> mom = check_x_moments(x_moments_from_monomial_means([1, 1/2, 1/3, 1/4, 1/5], d=1), 2)
    >>> mom.second.shape, mom.fourth_cov.shape
    ((2, 2), (2, 2, 2, 2))
    """
    if not isinstance(x_moments, XMoments):
        raise TypeError(f"x_moments must be an XMoments (got {type(x_moments).__name__})")
    second = np.asarray(x_moments.second, dtype=np.float64)
    phi = np.asarray(x_moments.fourth_cov, dtype=np.float64)
    if second.shape[-2:] != (p, p) or phi.shape[-4:] != (p,) * 4:
        raise ValueError(
            f"x_moments must be for d={p - 1} covariates with the intercept: second (..., {p}, "
            f"{p}) and fourth_cov (..., {p}, {p}, {p}, {p}) (got {second.shape} and {phi.shape})"
        )
    if not (np.all(np.isfinite(second)) and np.all(np.isfinite(phi))):
        raise ValueError("x_moments must be finite")
    flat = phi.reshape(*phi.shape[:-4], p * p, p * p)
    for name, mat in (("second", second), ("fourth_cov", flat)):
        sym = 0.5 * (mat + np.swapaxes(mat, -1, -2))
        tol = 1e-10 * np.maximum(1.0, np.max(np.abs(sym)))
        if np.any(np.linalg.eigvalsh(sym)[..., 0] < -tol):
            raise ValueError(
                f"x_moments.{name} must be positive semi-definite (as moments of a distribution "
                "are); build noisy moments with x_moments_from_monomial_means(..., project=True)"
            )
    return XMoments(second, phi)


def x_moments_from_monomial_means(
    means: npt.ArrayLike, *, d: int, project: bool = False
) -> XMoments:
    """Build :class:`XMoments` from the means of all covariate monomials of degree 0 to 4.

    Parameters
    ----------
    means
        ``E[Π_j x_j^k_j]`` in the order of ``covariate_powers(d, (0, 1, 2, 3, 4))`` (the first is
        the constant 1), shape ``(..., K)``.
    d
        Number of covariates.
    project
        For noisy means: make ``Σ`` PSD by clipping the eigenvalues of the covariance
        ``Σ_11 − μμᵀ`` at 0 (keeping the means μ,
        :func:`~pymc_dp.regression.kernels.psd.project_psd`), rebuild the degree-2 entries from it,
        and clip the eigenvalues of ``Φ``, seen as a symmetric ``p² × p²`` matrix, at 0. Both are
        Frobenius-nearest projections; they make the CLT covariance of the statistic PSD.

    Examples
    --------
    x ~ Uniform(0, 1): E x^k = 1/(k + 1).

    >>> mom = x_moments_from_monomial_means([1, 1/2, 1/3, 1/4, 1/5], d=1)
    >>> round(float(mom.second[1, 1]), 6), round(float(mom.fourth_cov[1, 1, 1, 1]), 6)
    (0.333333, 0.088889)
    """
    means = np.array(means, dtype=np.float64)
    p = d + 1
    if project:
        second = means[..., _tensor_index(d)[0, 0]]
        second = project_psd(second)
        # Put the projected degree-2 means back, so that E4 and Σ stay consistent.
        means[..., _tensor_index(d)[0, 0]] = second
    e4 = means[..., _tensor_index(d)]
    second = e4[..., 0, 0, :, :]
    phi = e4 - second[..., :, :, None, None] * second[..., None, None, :, :]
    if project:
        flat = phi.reshape(*phi.shape[:-4], p * p, p * p)
        flat = 0.5 * (flat + np.swapaxes(flat, -1, -2))
        lam, vec = np.linalg.eigh(flat)
        flat = (vec * np.maximum(lam, 0.0)[..., None, :]) @ np.swapaxes(vec, -1, -2)
        phi = flat.reshape(phi.shape)
    return XMoments(second, phi)


def empirical_x_moments(x: npt.ArrayLike, weights: npt.ArrayLike | None = None) -> XMoments:
    """Moments of the empirical (or a weighted discrete) distribution of covariates ``x`` (n, d).

    Not private when ``x`` is the data: for non-private baselines, for a known finite population,
    and for tests.

    Examples
    --------
    >>> mom = empirical_x_moments([[0.0], [1.0]])
    >>> mom.second.tolist(), float(mom.fourth_cov[0, 1, 0, 1])
    ([[1.0, 0.5], [0.5, 0.5]], 0.25)
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    n, d = x.shape
    w = np.full(n, 1.0 / n) if weights is None else np.asarray(weights, dtype=np.float64)
    w = w / w.sum()
    powers = covariate_powers(d, _ALL_DEGREES)
    means = np.prod(x[:, None, :] ** powers[None, :, :], axis=-1).T @ w
    return x_moments_from_monomial_means(means, d=d)


def x_moments_from_release(release: object) -> XMoments:
    """Moments of x from a release's noisy sums (Gibbs-SS-Noisy), made valid.

    The degree 1-2 sums of the covariates are entries of the released statistic (``Σ x_j`` and
    ``Σ x_i x_j``), the degree 3-4 sums are the release's ``fourth_moments``; divided by n they
    are projected as in :func:`x_moments_from_monomial_means` (``project=True``). A format 2
    file also carries noisy degree 1-2 sums of its own (``second_moments``): both estimates are
    then averaged with inverse-variance weights (their Laplace noises are independent). All of
    this is post-processing of the private release: no raw data is touched.

    Parameters
    ----------
    release
        A :class:`~pymc_dp.regression.RegressionRelease` released with ``moments_share``.

    Raises
    ------
    ValueError
        If the release carries no moments.

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_dp.regression import release_regression
    >>> x = np.linspace(-1, 1, 200)[:, None]
    >>> rel = release_regression(x, 0.5 * x[:, 0], x_bounds=[(-1, 1)], y_bounds=(-1, 1),
    ...                          epsilon=100.0, moments_share=0.5, rng=0)
    >>> mom = x_moments_from_release(rel)
    >>> round(float(mom.second[1, 1]), 1)  # E x² = 0.34 for this grid
    0.3
    """
    fourth = getattr(release, "fourth_moments", None)
    if fourth is None:
        raise ValueError(
            "this release carries no moments of x; release it with moments_share= or supply "
            "XMoments from prior knowledge"
        )
    d = release.d
    low_degree = np.asarray(release.value)[_statistic_index(d)]
    second = getattr(release, "second_moments", None)
    if second is not None:
        # Format 2: the statistic's and the separate release's estimates, inverse-variance.
        w_stat, w_mom = 1.0 / release.scale**2, 1.0 / second.scale**2
        low_degree = (w_stat * low_degree + w_mom * second.value) / (w_stat + w_mom)
    means = np.concatenate([[1.0], low_degree / release.n, fourth.value / release.n])
    return x_moments_from_monomial_means(means, d=d, project=True)


@functools.cache
def _statistic_index(d: int) -> npt.NDArray[np.intp]:
    """Position in the released statistic of each degree 1-2 monomial of x, in graded order."""
    stat = statistic_powers(d)
    lookup = {tuple(row[:d]): k for k, row in enumerate(stat.tolist()) if row[d] == 0}
    return np.array(
        [lookup[tuple(row)] for row in covariate_powers(d, (1, 2)).tolist()], dtype=np.intp
    )


def suffstat_moments(
    theta: npt.ArrayLike, sigma2: npt.ArrayLike, x_moments: XMoments
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Mean ``μ_t`` and covariance ``Σ_t`` of one record's released statistic t(x, y).

    The statistic ``s`` of n records is then approximately ``N(n μ_t, n Σ_t)`` (CLT).

    Parameters
    ----------
    theta
        Coefficients (intercept first), shape ``(..., p)``.
    sigma2
        Noise variance σ² of the regression, shape ``(...)``.
    x_moments
        :class:`XMoments` broadcastable to the batch.

    Returns
    -------
    mean : numpy.ndarray
        Shape ``(..., m)``.
    cov : numpy.ndarray
        Shape ``(..., m, m)``, PSD when ``Σ`` and ``Φ`` are.

    References
    ----------
    Bernstein & Sheldon (2019), §3.4.1.

    Examples
    --------
    >>> mom = x_moments_from_monomial_means([1, 1/2, 1/3, 1/4, 1/5], d=1)
    >>> mean, cov = suffstat_moments([0.0, 1.0], 0.5, mom)
    >>> [round(float(v), 4) for v in mean]  # E x, E x², E y, E xy, E y²
    [0.5, 0.3333, 0.5, 0.3333, 0.8333]
    """
    theta = np.asarray(theta, dtype=np.float64)
    sigma2 = np.asarray(sigma2, dtype=np.float64)
    second = np.asarray(x_moments.second, dtype=np.float64)
    phi = np.asarray(x_moments.fourth_cov, dtype=np.float64)
    p = theta.shape[-1]
    rows, cols = released_pairs(p - 1)
    m_mat = np.concatenate(
        [np.broadcast_to(np.eye(p), (*theta.shape[:-1], p, p)), theta[..., None, :]], axis=-2
    )  # (..., p + 1, p)
    s_mat = m_mat @ second @ np.swapaxes(m_mat, -1, -2)
    u = np.zeros(p + 1)
    u[p] = 1.0
    ui, uj = u[rows], u[cols]
    sig = sigma2[..., None]
    mean = s_mat[..., rows, cols] + sig * (ui * uj)

    g = m_mat[..., rows, :, None] * m_mat[..., cols, None, :]  # (..., m, p, p)
    g = g.reshape(*g.shape[:-2], p * p)
    phi_flat = phi.reshape(*phi.shape[:-4], p * p, p * p)
    cov = g @ phi_flat @ np.swapaxes(g, -1, -2)
    cross = (
        s_mat[..., rows[:, None], rows[None, :]] * (uj[:, None] * uj[None, :])
        + s_mat[..., rows[:, None], cols[None, :]] * (uj[:, None] * ui[None, :])
        + s_mat[..., cols[:, None], rows[None, :]] * (ui[:, None] * uj[None, :])
        + s_mat[..., cols[:, None], cols[None, :]] * (ui[:, None] * ui[None, :])
    )
    quartic = np.outer(ui * uj, ui * uj)
    cov = cov + sig[..., None] * cross + 2.0 * (sigma2**2)[..., None, None] * quartic
    cov = 0.5 * (cov + np.swapaxes(cov, -1, -2))
    return mean, cov
