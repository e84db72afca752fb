"""The exact law of the regression statistic when the covariates are normal.

With records ``x_i ~ N(μ_x, Σ_x)`` and ``y_i = x̃_iᵀθ + e_i``, ``e_i ~ N(0, σ²)`` (``x̃ = (1, x)``),
the statistic ``s`` (:mod:`pymc_dp.curator.regression.statistics`) is a smooth one-to-one function
of

* the covariate mean ``x̄ = Σx / n`` and scatter ``C = Σ x xᵀ − n x̄ x̄ᵀ``, which are independent,
  ``x̄ ~ N(μ_x, Σ_x / n)`` and ``C ~ Wishart(n − 1, Σ_x)``;
* given ``A = X̃ᵀX̃`` (which ``x̄`` and ``C`` fix), ``b = X̃ᵀy ~ N(Aθ, σ² A)``;
* independently of ``b``, the residual sum of squares ``R = yᵀy − bᵀA⁻¹b ~ σ² χ²(n − p)``,
  ``p = d + 1``.

These are the textbook facts of normal sampling and least squares (e.g. Anderson 2003, Thm 3.3.2
and §7.2; Seber & Lee 2003, Thm 3.5), so the density of ``s`` is a product of four standard
densities. The map ``s ↦ (x̄, C, b, R)`` is triangular with a constant Jacobian (``x̄`` takes the
sums of x divided by n, every other block moves its own entries with slope 1), so
:func:`statistic_logpdf` is the density of ``s`` itself.
Its support is exactly the valid statistics (``C`` and ``R`` positive), so no PSD restriction
is needed. The samplers of :mod:`pymc_dp.regression.kernels.collapsed` target this law; the CLT
normal of :mod:`pymc_dp.regression.kernels.moments` only proposes moves.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy.special import gammaln, multigammaln

from pymc_dp.curator.regression.statistics import pack_statistic, released_pairs, unpack_statistic
from pymc_dp.regression.kernels.psd import batched_cholesky

__all__ = [
    "StatisticParts",
    "draw_statistic",
    "record_mean",
    "record_moments",
    "response_logpdf",
    "split_statistic",
    "statistic_from_gram",
    "statistic_logpdf",
]

_LOG_2PI = float(np.log(2.0 * np.pi))


class StatisticParts(NamedTuple):
    """The statistic ``s`` of n records split as in the module docstring (batch first)."""

    mean: npt.NDArray[np.float64]
    """``x̄``, shape ``(..., d)``."""
    scatter: npt.NDArray[np.float64]
    """``C = Σ x xᵀ − n x̄ x̄ᵀ``, shape ``(..., d, d)``."""
    gram: npt.NDArray[np.float64]
    """``A = X̃ᵀX̃`` with the intercept, shape ``(..., p, p)``."""
    xty: npt.NDArray[np.float64]
    """``b = X̃ᵀy``, shape ``(..., p)``."""
    residual: npt.NDArray[np.float64]
    """``R = yᵀy − bᵀA⁻¹b``, shape ``(...)``; ``nan`` where ``A`` is singular."""


def split_statistic(s: npt.ArrayLike, n: npt.ArrayLike) -> StatisticParts:
    """Split released-layout statistics ``s`` ``(..., m)`` of n records into their parts.

    Examples
    --------
    >>> from pymc_dp.curator.regression.statistics import regression_statistic
    >>> parts = split_statistic(regression_statistic([[0.0], [1.0], [2.0]], [1.0, 2.0, 4.0]), 3)
    >>> parts.mean.tolist(), parts.scatter.tolist(), round(float(parts.residual), 6)
    ([1.0], [[2.0]], 0.166667)
    """
    b_mat = unpack_statistic(s, n)
    n = np.asarray(n, dtype=np.float64)
    p = b_mat.shape[-1] - 1
    gram = b_mat[..., :p, :p]
    xty = b_mat[..., :p, p]
    mean = gram[..., 0, 1:] / n[..., None]
    scatter = gram[..., 1:, 1:] - n[..., None, None] * mean[..., :, None] * mean[..., None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        try:
            fitted = np.linalg.solve(gram, xty[..., None])[..., 0]
            residual = b_mat[..., p, p] - np.sum(xty * fitted, axis=-1)
        except np.linalg.LinAlgError:
            residual = _residual_rowwise(gram, xty, b_mat[..., p, p])
    return StatisticParts(mean, scatter, gram, xty, residual)


def _residual_rowwise(gram: np.ndarray, xty: np.ndarray, yty: np.ndarray) -> np.ndarray:
    """``R`` one batch member at a time, ``nan`` where ``A`` is singular."""
    flat_g = gram.reshape(-1, *gram.shape[-2:])
    flat_b = xty.reshape(-1, xty.shape[-1])
    flat_c = np.broadcast_to(yty, gram.shape[:-2]).reshape(-1)
    out = np.full(flat_c.shape, np.nan)
    for i in range(out.size):
        try:
            out[i] = flat_c[i] - flat_b[i] @ np.linalg.solve(flat_g[i], flat_b[i])
        except np.linalg.LinAlgError:
            pass
    return out.reshape(gram.shape[:-2])


def statistic_logpdf(
    s: npt.ArrayLike,
    *,
    theta: npt.ArrayLike,
    sigma2: npt.ArrayLike,
    x_loc: npt.ArrayLike,
    x_cov: npt.ArrayLike,
    n: npt.ArrayLike,
) -> npt.NDArray[np.float64]:
    """Exact log density of the statistic of n records from the normal model (−∞ if invalid).

    Parameters
    ----------
    s
        Statistics in the released layout, shape ``(..., m)``.
    theta, sigma2
        Coefficients ``(..., p)`` (intercept first) and noise variance ``(...)``.
    x_loc, x_cov
        ``μ_x`` ``(..., d)`` and ``Σ_x`` ``(..., d, d)`` of the covariates' normal model.
    n
        Number of records, at least ``d + 2``, broadcastable to the batch.

    Returns
    -------
    numpy.ndarray
        Shape ``(...)``: ``log N(x̄; μ_x, Σ_x/n) + log W(C; n − 1, Σ_x) + log N(b; Aθ, σ²A)
        + log Gamma(R; (n − p)/2, scale 2σ²) − d log n`` (the last term is the Jacobian of
        ``x̄ = Σx / n``); ``−inf`` where ``C`` or ``R`` is not positive.

    Examples
    --------
    A statistic drawn from the law has a finite density, a non-PSD one has none:

    >>> rng = np.random.default_rng(0)
    >>> kw = dict(theta=[0.0, 1.0], sigma2=0.5, x_loc=[0.0], x_cov=[[1.0]], n=20)
    >>> s = draw_statistic(rng, **kw)
    >>> bool(np.isfinite(statistic_logpdf(s, **kw)))
    True
    >>> float(statistic_logpdf(s * [1, 0, 1, 1, 1], **kw))
    -inf
    """
    s = np.asarray(s, dtype=np.float64)
    theta = np.asarray(theta, dtype=np.float64)
    sigma2 = np.asarray(sigma2, dtype=np.float64)
    x_loc = np.asarray(x_loc, dtype=np.float64)
    x_cov = np.asarray(x_cov, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    d = x_loc.shape[-1]
    parts = split_statistic(s, n)

    cov_chol = np.linalg.cholesky(x_cov)
    diag = np.arange(d)
    logdet_cov = 2.0 * np.sum(np.log(cov_chol[..., diag, diag]), axis=-1)
    centred = np.linalg.solve(cov_chol, (parts.mean - x_loc)[..., None])[..., 0]
    # N(x̄; μ_x, Σ_x/n) times the Jacobian n^-d of x̄ = Σx / n: the density of the sums of x.
    out = -0.5 * d * (_LOG_2PI + np.log(n)) - 0.5 * logdet_cov
    out = out - 0.5 * n * np.sum(centred**2, axis=-1)

    dof = n - 1
    # Positive definite, not a positive determinant: from d = 2 a scatter with two negative
    # eigenvalues has one.
    scatter_chol, definite = batched_cholesky(parts.scatter)
    logdet_c = 2.0 * np.sum(np.log(scatter_chol[..., diag, diag]), axis=-1)
    inv_scatter = np.linalg.solve(cov_chol, parts.scatter)
    trace = np.trace(np.linalg.solve(np.swapaxes(cov_chol, -1, -2), inv_scatter), 0, -2, -1)
    out = out + (
        0.5 * (dof - d - 1) * logdet_c
        - 0.5 * trace
        - 0.5 * dof * d * np.log(2.0)
        - 0.5 * dof * logdet_cov
        - multigammaln(0.5 * dof, d)
    )

    out = out + response_logpdf(parts, theta=theta, sigma2=sigma2, n=n)
    valid = definite & np.isfinite(out)
    return np.where(valid, out, -np.inf)


def response_logpdf(
    parts: StatisticParts, *, theta: np.ndarray, sigma2: np.ndarray, n: np.ndarray
) -> npt.NDArray[np.float64]:
    """``log N(b; Aθ, σ²A) + log Gamma(R; (n − p)/2, scale 2σ²)`` given ``A`` (−∞ if invalid).

    −∞ where ``A`` is not positive definite or ``R ≤ 0``. This part of the statistic's law does
    not depend on the model of x: given ``A = X̃ᵀX̃``, ``b = X̃ᵀy ~ N(Aθ, σ²A)`` and,
    independently, ``R ~ σ²χ²(n − p)``, whatever the law of the covariates
    (:func:`statistic_logpdf`, and the mixed model of
    :mod:`~pymc_dp.regression.kernels.mixed_model`).
    """
    p = theta.shape[-1]
    # A positive definite, not of positive determinant (two negative eigenvalues have one).
    gram_chol, definite = batched_cholesky(parts.gram)
    diag = np.arange(p)
    logdet_a = 2.0 * np.sum(np.log(gram_chol[..., diag, diag]), axis=-1)
    resid = parts.xty - (parts.gram @ theta[..., None])[..., 0]
    with np.errstate(invalid="ignore", divide="ignore"):
        white = np.linalg.solve(gram_chol, resid[..., None])[..., 0]
        quad = np.sum(white**2, axis=-1)
        out = -0.5 * p * (_LOG_2PI + np.log(sigma2)) - 0.5 * logdet_a - 0.5 * quad / sigma2
        half = 0.5 * (n - p)
        rss = parts.residual
        out = out + (
            (half - 1.0) * np.log(np.where(rss > 0, rss, 1.0))
            - rss / (2.0 * sigma2)
            - half * np.log(2.0 * sigma2)
            - gammaln(half)
        )
    return np.where(definite & (rss > 0), out, -np.inf)


def record_moments(
    theta: npt.ArrayLike, sigma2: npt.ArrayLike, x_loc: npt.ArrayLike, x_cov: npt.ArrayLike
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Mean ``μ_t`` and covariance ``Σ_t`` of one record's statistic t under the normal model.

    The same numbers as :func:`~pymc_dp.regression.suffstat_moments` with
    :func:`~pymc_dp.regression.normal_x_moments`, computed faster: the record w = (1, x, y) is a
    normal vector with a constant first entry, mean m̃ and second moment P = E[w wᵀ], so by
    Isserlis' theorem the released products ``t_r = w_i w_j`` have ``E t_r = P_ij`` and
    ``Cov(t_r, t_s) = P_ik P_jl + P_il P_jk − 2 m̃_i m̃_j m̃_k m̃_l`` for ``s = (k, l)``.

    Parameters
    ----------
    theta, sigma2, x_loc, x_cov
        As :func:`statistic_logpdf`, with leading batch dimensions.

    Returns
    -------
    mean : numpy.ndarray
        ``(..., m)``.
    cov : numpy.ndarray
        ``(..., m, m)``.

    Examples
    --------
    >>> from pymc_dp.regression import normal_x_moments, suffstat_moments
    >>> args = ([0.2, -0.5, 1.0], 0.3, [0.1, 0.4], [[1.0, 0.2], [0.2, 0.5]])
    >>> ref = suffstat_moments(*args[:2], normal_x_moments(*args[2:]))
    >>> all(np.allclose(a, b) for a, b in zip(record_moments(*args), ref))
    True
    """
    mean, second = _record_second_moments(theta, sigma2, x_loc, x_cov)
    q = mean.shape[-1]
    rows, cols = released_pairs(q - 2)
    m = rows.size
    outer = mean[..., rows] * mean[..., cols]
    # P's entries gathered by flat index (half the time of indexing its two trailing axes).
    flat = second.reshape(*second.shape[:-2], q * q)

    def entries(i: np.ndarray, j: np.ndarray) -> np.ndarray:
        index = (q * i[:, None] + j[None, :]).ravel()
        return np.take(flat, index, axis=-1).reshape(*flat.shape[:-1], m, m)

    cov = (
        entries(rows, rows) * entries(cols, cols)
        + entries(rows, cols) * entries(cols, rows)
        - 2.0 * outer[..., :, None] * outer[..., None, :]
    )
    return flat[..., q * rows + cols], cov


def record_mean(
    theta: npt.ArrayLike, sigma2: npt.ArrayLike, x_loc: npt.ArrayLike, x_cov: npt.ArrayLike
) -> npt.NDArray[np.float64]:
    """Mean ``μ_t`` of one record's statistic t under the normal model, ``(..., m)``.

    :func:`record_moments`' first output without its covariance, whose ``(..., m, m)``
    temporaries (m = (d + 2)(d + 3)/2 − 1) dominate memory over large batches: 2 000 prior
    draws for each of 400 chains at d = 4 took about 11 GB in :func:`~pymc_dp.regression.
    kernels.moment_move.moment_prior`, where only the mean is used.

    Examples
    --------
    >>> args = ([0.2, -0.5, 1.0], 0.3, [0.1, 0.4], [[1.0, 0.2], [0.2, 0.5]])
    >>> bool(np.allclose(record_mean(*args), record_moments(*args)[0]))
    True
    """
    mean, second = _record_second_moments(theta, sigma2, x_loc, x_cov)
    rows, cols = released_pairs(mean.shape[-1] - 2)
    return second[..., rows, cols]


def _record_second_moments(
    theta: npt.ArrayLike, sigma2: npt.ArrayLike, x_loc: npt.ArrayLike, x_cov: npt.ArrayLike
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Mean m̃ ``(..., d + 2)`` and second moment P = E[w wᵀ] of the record w = (1, x, y)."""
    theta = np.asarray(theta, dtype=np.float64)
    sigma2 = np.asarray(sigma2, dtype=np.float64)
    x_loc = np.asarray(x_loc, dtype=np.float64)
    x_cov = np.asarray(x_cov, dtype=np.float64)
    d = x_loc.shape[-1]
    p = d + 1
    batch = np.broadcast_shapes(theta.shape[:-1], sigma2.shape, x_loc.shape[:-1], x_cov.shape[:-2])
    # m̃ and the covariance S̃ of w = (1, x, y): y = θ₀ + θ_xᵀx + e.
    slope = np.broadcast_to(theta[..., 1:], (*batch, d))
    cov_xy = (x_cov @ slope[..., None])[..., 0]
    mean = np.empty((*batch, p + 1))
    mean[..., 0] = 1.0
    mean[..., 1:p] = x_loc
    mean[..., p] = theta[..., 0] + np.sum(slope * x_loc, axis=-1)
    second = mean[..., :, None] * mean[..., None, :]
    second[..., 1:p, 1:p] += x_cov
    second[..., 1:p, p] += cov_xy
    second[..., p, 1:p] += cov_xy
    second[..., p, p] += np.sum(slope * cov_xy, axis=-1) + sigma2
    return mean, second


def _shape_mean_scatter(
    rng: np.random.Generator,
    x_loc: np.ndarray,
    x_cov: np.ndarray,
    n: np.ndarray,
    x_shape: tuple[npt.ArrayLike, npt.ArrayLike],
    batch: tuple[int, ...],
) -> tuple[np.ndarray, np.ndarray]:
    """x̄ ``(*batch, 1)`` and S ``(*batch, 1, 1)`` from the shape family's law (d = 1).

    ``NaN`` where (γ, κ) leave no conditional variance (outside the prior; never at a state).
    """
    if x_loc.shape[-1] != 1:
        raise ValueError("x_shape draws the statistic for d = 1 only")
    mu = np.broadcast_to(x_loc[..., 0], batch)
    v = np.broadcast_to(x_cov[..., 0, 0], batch)
    g = np.broadcast_to(np.asarray(x_shape[0], dtype=np.float64), batch)
    k = np.broadcast_to(np.asarray(x_shape[1], dtype=np.float64), batch)
    with np.errstate(invalid="ignore", divide="ignore"):
        c = ((n - 1.0) * k - n + 3.0) / (2.0 * n)
        bad = ~(c > 0)
        c = np.where(bad, 1.0, c)
        scatter = rng.gamma(0.5 * (n - 1.0) / c, 2.0 * c * v)
        cov = (n - 1.0) * g * v**1.5 / n
        beta = cov / (2.0 * c * (n - 1.0) * v**2)
        cond = v / n - beta * cov
        bad |= ~(cond > 0)
        mean = mu + beta * (scatter - (n - 1.0) * v)
        mean = mean + np.sqrt(np.where(bad, 1.0, cond)) * rng.standard_normal(batch)
    mean = np.where(bad, np.nan, mean)
    return mean[..., None], scatter[..., None, None]


def draw_statistic(
    rng: np.random.Generator,
    *,
    theta: npt.ArrayLike,
    sigma2: npt.ArrayLike,
    x_loc: npt.ArrayLike,
    x_cov: npt.ArrayLike,
    n: npt.ArrayLike,
    size: tuple[int, ...] = (),
    x_shape: tuple[npt.ArrayLike, npt.ArrayLike] | None = None,
) -> npt.NDArray[np.float64]:
    """Exact draws of the statistic of n records from the normal model, without the records.

    ``x̄`` and ``C`` (Bartlett), then ``b | A`` and ``R``, then back to ``s``; the cost does not
    depend on n. With ``x_shape`` = (γ, κ) (d = 1, batch as ``sigma2``), x̄ and C = S come
    from the shape family's law instead (:mod:`~pymc_dp.regression.kernels.shape_law`:
    ``S ~ cσ_x² χ²(f)``, x̄ | S normal tied to S through γ); the rest is unchanged.

    Parameters
    ----------
    rng
        Source of randomness.
    theta, sigma2, x_loc, x_cov, n
        As :func:`statistic_logpdf`.
    size
        Extra leading sample dimensions.

    Returns
    -------
    numpy.ndarray
        Shape ``(*size, *batch, m)``.

    Examples
    --------
    >>> s = draw_statistic(np.random.default_rng(1), theta=[0.0, 1.0], sigma2=0.5,
    ...                    x_loc=[0.0], x_cov=[[1.0]], n=20, size=(3,))
    >>> s.shape
    (3, 5)
    """
    theta = np.asarray(theta, dtype=np.float64)
    sigma2 = np.asarray(sigma2, dtype=np.float64)
    x_loc = np.asarray(x_loc, dtype=np.float64)
    x_cov = np.asarray(x_cov, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    d = x_loc.shape[-1]
    p = d + 1
    batch = tuple(size) + np.broadcast_shapes(
        theta.shape[:-1], sigma2.shape, x_loc.shape[:-1], x_cov.shape[:-2], n.shape
    )
    n = np.broadcast_to(n, batch)
    if x_shape is not None:
        mean, scatter = _shape_mean_scatter(rng, x_loc, x_cov, n, x_shape, batch)
    else:
        chol = np.broadcast_to(np.linalg.cholesky(x_cov), (*batch, d, d))
        mean = x_loc + (chol @ rng.standard_normal((*batch, d, 1)))[..., 0] / np.sqrt(n)[..., None]
        # Bartlett: C = L T Tᵀ Lᵀ, T lower triangular, T_ii² ~ χ²(n − 1 − i), T_ij ~ N(0, 1).
        tri = np.tril(rng.standard_normal((*batch, d, d)), -1)
        dof = n[..., None] - 1 - np.arange(d)
        tri = tri + np.sqrt(rng.chisquare(dof, size=(*batch, d)))[..., None] * np.eye(d)
        factor = chol @ tri
        scatter = factor @ np.swapaxes(factor, -1, -2)
    gram = np.empty((*batch, p, p))
    gram[..., 0, 0] = n
    gram[..., 0, 1:] = gram[..., 1:, 0] = n[..., None] * mean
    gram[..., 1:, 1:] = scatter + n[..., None, None] * mean[..., :, None] * mean[..., None, :]
    return statistic_from_gram(rng, gram, theta=theta, sigma2=sigma2, n=n)


def statistic_from_gram(
    rng: np.random.Generator,
    gram: np.ndarray,
    *,
    theta: np.ndarray,
    sigma2: npt.ArrayLike,
    n: np.ndarray,
) -> npt.NDArray[np.float64]:
    """The statistic given ``A = X̃ᵀX̃`` ``(*batch, p, p)``: draws of ``b | A`` and ``R``.

    The responses' part of :func:`draw_statistic` (:func:`response_logpdf` is its law), for
    any model of the covariates; ``n`` has the batch's shape.
    """
    batch, p = gram.shape[:-2], gram.shape[-1]
    gram_chol = np.linalg.cholesky(gram)
    sd = np.sqrt(np.broadcast_to(sigma2, batch))[..., None]
    xty = (gram @ np.broadcast_to(theta, (*batch, p))[..., None])[..., 0]
    xty = xty + sd * (gram_chol @ rng.standard_normal((*batch, p, 1)))[..., 0]
    fitted = np.linalg.solve(gram, xty[..., None])[..., 0]
    rss = np.broadcast_to(sigma2, batch) * rng.chisquare(n - p, size=batch)
    full = np.empty((*batch, p + 1, p + 1))
    full[..., :p, :p] = gram
    full[..., :p, p] = full[..., p, :p] = xty
    full[..., p, p] = rss + np.sum(xty * fitted, axis=-1)
    return pack_statistic(full)
