"""Collapsed moves for private regression under a normal model of the covariates.

The model: (θ, σ²) ~ NIG, every node j has its own covariates' normal model (μ_x, Σ_x)_j ~ NIW_j,
the statistic s_j has its exact law given these (:mod:`pymc_dp.regression.kernels.normal_model`),
and the release is z_j = s_j + noise with noise ~ N(0, diag w_j): the Laplace mechanism's mixing
variances (drawn by their own Gibbs step) or the Gaussian mechanism's fixed variance.

Gibbs-SS (Bernstein & Sheldon 2019, Algorithm 1) alternates θ | s and s | θ. θ | s is as narrow as
the data allow, θ | z as wide as the noise, so where privacy bites θ barely moves. The move here
changes all parameters φ = (θ, σ², μ_x, Σ_x) and s together, as a partially collapsed sampler
does (van Dyk & Park 2008), so that s does not pin φ:

1. φ' = φ + L ξ, a random walk on the unconstrained scale of :func:`pack_parameters`;
2. s' ~ q(s | φ', z, w) ∝ N(s; nμ_t(φ'), nΣ_t(φ')) N(z; s, diag w): the CLT normal of s times the
   noise (NormProduct), drawn without inverting the CLT covariance;
3. accept (φ', s') by the Metropolis–Hastings ratio of the *exact* model, which simplifies to

   π(φ') m(φ') r(s', φ') / [π(φ) m(φ) r(s, φ)],

   with m(φ) = N(z; nμ_t(φ), nΣ_t(φ) + diag w) the CLT's marginal of z (s integrated out) and
   r(s, φ) = p(s | φ) / N(s; nμ_t(φ), nΣ_t(φ)) the exact law over its CLT approximation.

The ratio is applied in two stages (delayed acceptance, Christen & Fox 2005): φ' must first pass
π m, which needs no s; only then is s' drawn and r compared. If the CLT were exact, r would be
constant and the move would be a random walk on the marginal of φ | z, w followed by an exact draw
of s; r makes it exact for the model whatever n. A statistic s' that no data set can have (B(s')
not PSD) has p(s' | φ') = 0 and is rejected. :func:`refresh_statistic` is the same move with φ
kept (an independence sampler for s).

Everything is batched over leading dimensions (chains, calibration trials); the node axis J sits
just before the core dimensions of the per-node arrays.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy.special import gammaln, multigammaln

from pymc_dp.curator.regression.statistics import unpack_statistic
from pymc_dp.regression.kernels.conjugate import NIG
from pymc_dp.regression.kernels.data_model import NIW
from pymc_dp.regression.kernels.normal_model import draw_statistic, record_moments
from pymc_dp.regression.kernels.psd import batched_cholesky
from pymc_dp.regression.kernels.shape_law import XShape, shape_term, standardised

__all__ = [
    "EIGEN_FLOOR",
    "CollapsedTarget",
    "Evaluation",
    "MoveState",
    "Parameters",
    "collapsed_move",
    "collapsed_target",
    "evaluate",
    "floor_eigenvalues",
    "floored_cholesky",
    "move_state",
    "n_parameters",
    "pack_parameters",
    "parameter_log_jacobian",
    "propose_statistic",
    "redraw_statistic",
    "refresh_statistic",
    "replace_where",
    "shape_correction",
    "statistic_correction",
    "unpack_parameters",
]

_LOG_2PI = float(np.log(2.0 * np.pi))
# Relative jitter on the CLT covariance of s before its Cholesky factor: the normal model's
# Σ_t is positive definite, but barely when σ² or Σ_x is tiny.
_JITTER = 1e-10


class _Constants(NamedTuple):
    """Parts of the log densities that depend on the priors and n only."""

    precision_chol: np.ndarray  # Λ = L Lᵀ, (..., p, p)
    nig: np.ndarray  # Σ log L_ii + a log b − log Γ(a), (...)
    scale_chol: np.ndarray  # Ψ = R Rᵀ, (..., J, d, d)
    niw: np.ndarray  # of the NIW density, (..., J)
    statistic: np.ndarray  # of the exact density of s, (J,)


class CollapsedTarget(NamedTuple):
    """What the moves need besides the state; build it with :func:`collapsed_target`."""

    released: npt.NDArray[np.float64]
    """z, ``(..., J, m)``."""
    noise_variance: npt.NDArray[np.float64]
    """Variances w of the noise given the mixing variables, ``(..., J, m)``."""
    n: npt.NDArray[np.float64]
    """Records per node, ``(J,)``."""
    prior: NIG
    x_prior: NIW
    """Batch ``(..., J)``."""
    constants: _Constants
    x_shape: XShape | None = None
    """With released degree 3–4 moments of x (d = 1): the shape family's (γ, κ) and the
    moments (:mod:`~pymc_dp.regression.kernels.shape_law`); the law of s is then the normal
    model's times :func:`shape_correction`. ``None``: the normal model of x."""


def collapsed_target(
    released: npt.ArrayLike,
    noise_variance: npt.ArrayLike,
    n: npt.ArrayLike,
    prior: NIG,
    x_prior: NIW,
) -> CollapsedTarget:
    """Bundle released values, noise variances, sizes and priors, with their constants.

    Replace the noise variances of a target with ``target._replace(noise_variance=w)``.

    Parameters
    ----------
    released, noise_variance
        ``(..., J, m)``.
    n
        Records per node, ``(J,)``.
    prior
        NIG prior of (θ, σ²), batch broadcastable to ``(...)``.
    x_prior
        NIW priors of the nodes' (μ_x, Σ_x), batch broadcastable to ``(..., J)``.
    """
    n = np.asarray(n, dtype=np.float64).reshape(-1)
    d = x_prior.loc.shape[-1]
    p = d + 1
    precision_chol = np.linalg.cholesky(prior.precision)
    diag_p = np.arange(p)
    a, b = np.asarray(prior.shape, float), np.asarray(prior.scale, float)
    nig = np.sum(np.log(precision_chol[..., diag_p, diag_p]), -1) + a * np.log(b) - gammaln(a)
    scale_chol = np.linalg.cholesky(x_prior.scale)
    diag = np.arange(d)
    nu, kappa = np.asarray(x_prior.dof, float), np.asarray(x_prior.kappa, float)
    niw = (
        nu * np.sum(np.log(scale_chol[..., diag, diag]), -1)
        - 0.5 * nu * d * np.log(2.0)
        - multigammaln(0.5 * nu, d)
        - 0.5 * d * (_LOG_2PI - np.log(kappa))
    )
    dof = n - 1
    statistic = (
        -0.5 * d * (_LOG_2PI + np.log(n))
        - 0.5 * dof * d * np.log(2.0)
        - multigammaln(0.5 * dof, d)
        - 0.5 * p * _LOG_2PI
        - gammaln(0.5 * (n - p))
    )
    return CollapsedTarget(
        np.asarray(released, dtype=np.float64),
        np.asarray(noise_variance, dtype=np.float64),
        n,
        prior,
        x_prior,
        _Constants(precision_chol, nig, scale_chol, niw, statistic),
    )


@functools.cache
def _lower(d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lower-triangle rows and columns of a d × d matrix, and its diagonal's indices.

    Cached: ``np.tril_indices`` costs more than the rest of an unpacking.
    """
    rows, cols = np.tril_indices(d)
    return rows, cols, np.arange(d)


def n_parameters(d: int, nodes: int = 1) -> int:
    """Length ``k = (d + 2) + J (d + d(d + 1)/2)`` of the unconstrained parameter vector.

    Examples
    --------
    >>> n_parameters(1), n_parameters(2), n_parameters(2, nodes=2)
    (5, 9, 14)
    """
    return d + 2 + nodes * (d + d * (d + 1) // 2)


def pack_parameters(
    theta: npt.ArrayLike, sigma2: npt.ArrayLike, x_loc: npt.ArrayLike, x_cov: npt.ArrayLike
) -> npt.NDArray[np.float64]:
    """Unconstrained vector ``(θ, log σ², [μ_x, log-Cholesky of Σ_x] per node)``.

    Parameters
    ----------
    theta, sigma2
        ``(..., p)`` and ``(...)``.
    x_loc, x_cov
        ``(..., J, d)`` and ``(..., J, d, d)``.

    Examples
    --------
    >>> u = pack_parameters([0.5, 1.0], 2.0, [[0.0]], [[[4.0]]])
    >>> np.round(u, 4).tolist()  # log 2, then log √4
    [0.5, 1.0, 0.6931, 0.0, 0.6931]
    """
    theta = np.asarray(theta, dtype=np.float64)
    sigma2 = np.asarray(sigma2, dtype=np.float64)
    x_loc = np.asarray(x_loc, dtype=np.float64)
    chol = np.linalg.cholesky(np.asarray(x_cov, dtype=np.float64))
    d = x_loc.shape[-1]
    rows, cols, diag = _lower(d)
    chol[..., diag, diag] = np.log(chol[..., diag, diag])
    per_node = np.concatenate([np.broadcast_to(x_loc, chol.shape[:-1]), chol[..., rows, cols]], -1)
    batch = np.broadcast_shapes(theta.shape[:-1], sigma2.shape, per_node.shape[:-2])
    per_node = np.broadcast_to(per_node, (*batch, *per_node.shape[-2:]))
    return np.concatenate(
        [
            np.broadcast_to(theta, (*batch, theta.shape[-1])),
            np.broadcast_to(np.log(sigma2), batch)[..., None],
            per_node.reshape(*batch, -1),
        ],
        axis=-1,
    )


class Parameters(NamedTuple):
    """Natural parameters from :func:`unpack_parameters`."""

    theta: npt.NDArray[np.float64]
    sigma2: npt.NDArray[np.float64]
    log_sigma2: npt.NDArray[np.float64]
    x_loc: npt.NDArray[np.float64]
    """``(..., J, d)``."""
    x_cov: npt.NDArray[np.float64]
    """``(..., J, d, d)``."""
    x_chol: npt.NDArray[np.float64]
    """Cholesky factor of Σ_x."""
    x_log_diag: npt.NDArray[np.float64]
    """log of its diagonal, ``(..., J, d)``."""


def unpack_parameters(u: npt.ArrayLike, d: int, nodes: int = 1) -> Parameters:
    """Natural parameters from the vector of :func:`pack_parameters`.

    Examples
    --------
    >>> par = unpack_parameters(pack_parameters([0.5, 1.0], 2.0, [[0.0]], [[[4.0]]]), 1)
    >>> float(par.sigma2), par.x_cov.tolist()
    (2.0, [[[4.0]]])
    """
    u = np.asarray(u, dtype=np.float64)
    p = d + 1
    per = d + d * (d + 1) // 2
    batch = u.shape[:-1]
    node = u[..., p + 1 :].reshape(*batch, nodes, per)
    rows, cols, diag = _lower(d)
    chol = np.zeros((*batch, nodes, d, d))
    chol[..., rows, cols] = node[..., d:]
    log_diag = chol[..., diag, diag].copy()
    with np.errstate(over="ignore"):
        chol[..., diag, diag] = np.exp(log_diag)
        sigma2 = np.exp(u[..., p])
    return Parameters(
        u[..., :p], sigma2, u[..., p], node[..., :d], chol @ np.swapaxes(chol, -1, -2), chol,
        log_diag,
    )  # fmt: skip


def parameter_log_jacobian(par: Parameters) -> npt.NDArray[np.float64]:
    """Log |∂(θ, σ², μ_x, Σ_x) / ∂u| of :func:`unpack_parameters`, ``(...)``.

    σ² = exp(u) gives σ²; Σ_x = L Lᵀ with free log L_ii gives 2^d Π_i L_ii^(d − i + 2),
    i = 1..d (the Jacobian of L ↦ L Lᵀ is 2^d Π L_ii^(d − i + 1)), per node.

    Examples
    --------
    >>> par = unpack_parameters(pack_parameters([0.0, 0.0], 2.0, [[0.0]], [[[4.0]]]), 1)
    >>> bool(np.isclose(parameter_log_jacobian(par), np.log(2.0) + np.log(2.0 * 4.0)))
    True
    """
    d = par.x_loc.shape[-1]
    per_node = d * np.log(2.0) + par.x_log_diag @ (d + 2.0 - np.arange(1, d + 1))
    return par.log_sigma2 + np.sum(per_node, axis=-1)


class Evaluation(NamedTuple):
    """Everything :func:`evaluate` computes at one φ, kept for the second stage of a move."""

    params: Parameters
    surrogate: npt.NDArray[np.float64]
    """log π(φ) + Σ_j log m_j(φ) on the unconstrained scale, ``(...)``; −∞ where undefined."""
    x_chol_inv: np.ndarray
    clt_mean: np.ndarray
    """nμ_t, ``(..., J, m)``."""
    clt_cov: np.ndarray
    clt_chol: np.ndarray
    marginal_chol_inv: np.ndarray
    """Inverse Cholesky factor of nΣ_t + diag w."""


EIGEN_FLOOR = 1e-9
"""Where a proposal's covariance or precision is not positive definite, its eigenvalues are
floored at this share of the largest (:func:`floor_eigenvalues`)."""


def floor_eigenvalues(a: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """``a``, with each member not ``ok`` replaced by its symmetric part, eigenvalues floored.

    For the proposals' covariances and precisions, which are positive definite in exact
    arithmetic but not always in floating point far outside the posterior: a start drawn from
    an inverse-Wishart prior of x with ν < d can have Σ_x ≈ 10¹⁰ on a box of width 4, where the
    record statistic's CLT covariance is indefinite or singular. A move whose proposal is built
    from a floored matrix stays exact when the matrix is a function of what the move keeps fixed
    (the anchor, or the invariants of a symmetric move). Members that are ``ok`` are returned
    unchanged, so chains that never meet such a state are the same to the bit.
    """
    if np.all(ok):
        return a
    sym = 0.5 * (a + np.swapaxes(a, -1, -2))
    value, vector = np.linalg.eigh(np.where(ok[..., None, None], np.eye(a.shape[-1]), sym))
    value = np.maximum(value, EIGEN_FLOOR * np.max(np.abs(value), axis=-1, keepdims=True))
    floored = (vector * value[..., None, :]) @ np.swapaxes(vector, -1, -2)
    return np.where(ok[..., None, None], a, 0.5 * (floored + np.swapaxes(floored, -1, -2)))


def floored_cholesky(a: np.ndarray) -> np.ndarray:
    """Cholesky factors of a batch, eigenvalues floored (:func:`floor_eigenvalues`) where needed."""
    chol, ok = batched_cholesky(a)
    return chol if np.all(ok) else np.linalg.cholesky(floor_eigenvalues(a, ok))


def _log_diag_sum(chol: np.ndarray) -> np.ndarray:
    k = chol.shape[-1]
    return np.sum(np.log(chol.reshape(*chol.shape[:-2], k * k)[..., :: k + 1]), axis=-1)


def evaluate(u: npt.ArrayLike, target: CollapsedTarget) -> Evaluation:
    """The first-stage log density log π(φ) + Σ_j log m_j(φ) at ``u`` ``(..., k)``.

    The prior is NIG × Π_j NIW on the unconstrained scale (Jacobian of log σ² and of the
    log-Cholesky factor of Σ_x included); m_j is the CLT marginal of z_j.
    """
    u = np.asarray(u, dtype=np.float64)
    cst = target.constants
    d = target.x_prior.loc.shape[-1]
    nodes = target.released.shape[-2]
    par = unpack_parameters(u, d, nodes)
    p = d + 1
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        # θ | σ² ~ N(μ, σ² Λ⁻¹) and σ² ~ InvGamma(a, b), with the Jacobian σ² of log σ².
        white = ((par.theta - target.prior.mean)[..., None, :] @ cst.precision_chol)[..., 0, :]
        prior = (
            cst.nig
            - 0.5 * p * (_LOG_2PI + par.log_sigma2)
            - 0.5 * np.sum(white**2, axis=-1) / par.sigma2
            - (target.prior.shape + 1.0) * par.log_sigma2
            - target.prior.scale / par.sigma2
        )
        # (μ_x, Σ_x) ~ NIW per node.
        chol_inv = np.linalg.inv(par.x_chol)
        centred = (chol_inv @ (par.x_loc - target.x_prior.loc)[..., None])[..., 0]
        logdet = 2.0 * np.sum(par.x_log_diag, axis=-1)
        nu = target.x_prior.dof
        niw = (
            cst.niw
            - 0.5 * logdet
            - 0.5 * target.x_prior.kappa * np.sum(centred**2, axis=-1)
            - 0.5 * (nu + d + 1) * logdet
            - 0.5 * np.sum((chol_inv @ cst.scale_chol) ** 2, axis=(-2, -1))
        )
        prior = prior + np.sum(niw, axis=-1) + parameter_log_jacobian(par)

        mean, cov = record_moments(
            par.theta[..., None, :], par.sigma2[..., None], par.x_loc, par.x_cov
        )
        m = mean.shape[-1]
        mean = target.n[:, None] * mean
        cov = target.n[:, None, None] * cov
        # The same (jittered) covariance in m, in the proposal and in r, so that the ratio is
        # that of the proposal actually drawn.
        jitter = _JITTER * np.max(np.abs(cov), axis=(-2, -1))
        cov = cov + jitter[..., None, None] * np.eye(m)
        clt_chol, ok1 = batched_cholesky(cov)
        marg_chol, ok2 = batched_cholesky(cov + target.noise_variance[..., :, None] * np.eye(m))
        marg_inv = np.linalg.inv(marg_chol)
        resid = (marg_inv @ (target.released - mean)[..., None])[..., 0]
        marginal = -0.5 * m * _LOG_2PI - _log_diag_sum(marg_chol) - 0.5 * np.sum(resid**2, -1)
        surrogate = prior + np.sum(marginal, axis=-1)
    ok = np.all(ok1 & ok2, axis=-1) & np.isfinite(surrogate)
    return Evaluation(
        par, np.where(ok, surrogate, -np.inf), chol_inv, mean, cov, clt_chol, marg_inv
    )


def shape_of(par: Parameters, target: CollapsedTarget) -> tuple[np.ndarray, np.ndarray] | None:
    """(γ, κ) of the shape family at ``par`` (``(..., J)``), for exact draws of s under it.

    ``None`` under the normal model of x. Drawing s from the shape law itself (rather than the
    normal one, accepted with :func:`shape_correction`'s ratio) keeps the exact-law moves of s
    as free as under the normal model: near the prior's edge κ = 1 + γ² the shape law ties x̄ to
    S closely, and normal draws of x̄ were rejected there.
    """
    if target.x_shape is None:
        return None
    return standardised(target.x_shape, par.x_loc[..., 0], par.x_cov[..., 0, 0])


def shape_correction(s: npt.ArrayLike, par: Parameters, target: CollapsedTarget) -> np.ndarray:
    """Σ_j of the shape family's law of (x̄, S) over the normal one plus the moments' likelihood.

    ``(...)``; zeros without ``target.x_shape`` (the normal model of x). d = 1
    (:mod:`~pymc_dp.regression.kernels.shape_law`).
    """
    s = np.asarray(s, dtype=np.float64)
    if target.x_shape is None:
        return np.zeros(s.shape[:-2])
    b_mat = unpack_statistic(s, target.n)
    xbar = b_mat[..., 0, 1] / target.n
    scatter = b_mat[..., 1, 1] - target.n * xbar**2
    out = shape_term(xbar, scatter, par.x_loc[..., 0], par.x_cov[..., 0, 0], target.n,
                     target.x_shape)  # fmt: skip
    return np.sum(out, axis=-1)


def statistic_correction(s: npt.ArrayLike, ev: Evaluation, target: CollapsedTarget) -> np.ndarray:
    """Σ_j log r(s_j, φ) = log p(s_j | φ) − log N(s_j; nμ_t, nΣ_t), at the φ of ``ev``.

    ``−inf`` for statistics no data set has. p(s | φ) is
    :func:`~pymc_dp.regression.kernels.normal_model.statistic_logpdf`, written here with the factors
    that ``ev`` already holds.
    """
    s = np.asarray(s, dtype=np.float64)
    par = ev.params
    n = target.n
    d = par.x_loc.shape[-1]
    p = d + 1
    b_mat = unpack_statistic(s, n)  # n (J,) against s (..., J, m)
    gram = b_mat[..., :p, :p]
    xty = b_mat[..., :p, p]
    mean = gram[..., 0, 1:] / n[:, None]
    scatter = gram[..., 1:, 1:] - n[:, None, None] * mean[..., :, None] * mean[..., None, :]
    theta = par.theta[..., None, :]
    sigma2 = par.sigma2[..., None]
    log_sigma2 = par.log_sigma2[..., None]
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        gram_chol, ok = batched_cholesky(gram)
        gram_inv_half = np.linalg.inv(gram_chol)
        half_b = (gram_inv_half @ xty[..., None])[..., 0]
        rss = b_mat[..., p, p] - np.sum(half_b**2, axis=-1)
        resid = (gram_inv_half @ (xty - (gram @ theta[..., None])[..., 0])[..., None])[..., 0]
        sign_c, logdet_c = np.linalg.slogdet(scatter)
        chol_inv = ev.x_chol_inv
        logdet_cov = 2.0 * np.sum(par.x_log_diag, axis=-1)
        centred = (chol_inv @ (mean - par.x_loc)[..., None])[..., 0]
        trace = np.sum((chol_inv @ scatter) * chol_inv, axis=(-2, -1))
        half = 0.5 * (n - p)
        exact = (
            target.constants.statistic
            - 0.5 * logdet_cov
            - 0.5 * n * np.sum(centred**2, axis=-1)
            + 0.5 * (n - d - 2) * logdet_c
            - 0.5 * trace
            - 0.5 * (n - 1) * logdet_cov
            - 0.5 * p * log_sigma2
            - _log_diag_sum(gram_chol)
            - 0.5 * np.sum(resid**2, axis=-1) / sigma2
            + (half - 1.0) * np.log(rss)
            - rss / (2.0 * sigma2)
            - half * (np.log(2.0) + log_sigma2)
        )
        white = np.linalg.solve(ev.clt_chol, (s - ev.clt_mean)[..., None])[..., 0]
        clt = -_log_diag_sum(ev.clt_chol) - 0.5 * np.sum(white**2, -1)
        clt = clt - 0.5 * s.shape[-1] * _LOG_2PI
        out = np.sum(exact - clt, axis=-1)
        if target.x_shape is not None:
            out = out + shape_correction(s, par, target)
    valid = np.all(ok & (sign_c > 0) & (rss > 0), axis=-1) & np.isfinite(out)
    return np.where(valid, out, -np.inf)


def propose_statistic(
    rng: np.random.Generator, ev: Evaluation, target: CollapsedTarget
) -> npt.NDArray[np.float64]:
    """S ~ q(s | φ, z, w) at the φ of ``ev``, by conditioning a joint draw (Matheron's rule).

    s0 ~ N(nμ_t, nΣ_t), e ~ N(0, diag w), s = s0 + nΣ_t (nΣ_t + diag w)⁻¹ (z − s0 − e).
    """
    mean = ev.clt_mean
    s0 = mean + (ev.clt_chol @ rng.standard_normal((*mean.shape, 1)))[..., 0]
    e = np.sqrt(target.noise_variance) * rng.standard_normal(mean.shape)
    half = ev.marginal_chol_inv @ (target.released - s0 - e)[..., None]
    return s0 + (ev.clt_cov @ (np.swapaxes(ev.marginal_chol_inv, -1, -2) @ half))[..., 0]


class MoveState(NamedTuple):
    """State of the collapsed chain with the two parts of its log ratio."""

    params: npt.NDArray[np.float64]
    """Unconstrained φ, ``(..., k)``."""
    suffstat: npt.NDArray[np.float64]
    """``(..., J, m)``."""
    surrogate: npt.NDArray[np.float64]
    """log π(φ) + Σ_j log m_j(φ), ``(...)``."""
    correction: npt.NDArray[np.float64]
    """Σ_j log r(s_j, φ), ``(...)``."""


def move_state(u: npt.ArrayLike, suffstat: npt.ArrayLike, target: CollapsedTarget) -> MoveState:
    """Evaluate both parts of the log ratio at (φ, s)."""
    ev = evaluate(u, target)
    return MoveState(
        np.asarray(u, dtype=np.float64),
        np.asarray(suffstat, dtype=np.float64),
        ev.surrogate,
        statistic_correction(suffstat, ev, target),
    )


def replace_where(mask: np.ndarray, new: MoveState, old: MoveState) -> MoveState:
    """``new`` where ``mask`` holds, else ``old`` (batched)."""
    return MoveState(
        np.where(mask[..., None], new.params, old.params),
        np.where(mask[..., None, None], new.suffstat, old.suffstat),
        np.where(mask, new.surrogate, old.surrogate),
        np.where(mask, new.correction, old.correction),
    )


def collapsed_move(
    rng: np.random.Generator,
    state: MoveState,
    *,
    step: npt.ArrayLike,
    target: CollapsedTarget,
) -> tuple[MoveState, npt.NDArray[np.bool_]]:
    """One two-stage Metropolis–Hastings move of (φ, s) jointly (module docstring).

    Parameters
    ----------
    rng
        Source of randomness.
    state
        The current :class:`MoveState`, evaluated under ``target``'s noise variances.
    step
        Lower-triangular factor L of the random walk's covariance, ``(..., k, k)``.
    target
        Released values, noise variances, sizes and priors (:func:`collapsed_target`).

    Returns
    -------
    state : MoveState
    first_stage : numpy.ndarray
        Whether φ' passed the first stage, ``(...)`` (what a random walk's scale is tuned to).

    References
    ----------
    van Dyk & Park (2008), "Partially collapsed Gibbs samplers", *JASA* 103, 790–796;
    Christen & Fox (2005), "Markov chain Monte Carlo using an approximation", *JCGS* 14,
    795–810; Bernstein & Sheldon (2019), §3.4.

    Examples
    --------
    >>> from pymc_dp.regression.kernels.normal_model import draw_statistic
    >>> rng = np.random.default_rng(0)
    >>> s = draw_statistic(rng, theta=[0.0, 1.0], sigma2=0.5, x_loc=[0.0], x_cov=[[1.0]],
    ...                    n=50)[None, None]
    >>> tgt = collapsed_target(s + 1.0, np.ones((1, 1, 5)), [50.0],
    ...     NIG(np.zeros(2), np.eye(2), np.array(3.0), np.array(1.0)),
    ...     NIW(np.zeros((1, 1)), np.ones(1), np.full(1, 4.0), np.eye(1)[None]))
    >>> state = move_state(pack_parameters([[0.0, 1.0]], [0.5], [[[0.0]]], [[[[1.0]]]]), s, tgt)
    >>> new, passed = collapsed_move(rng, state, step=0.1 * np.eye(5)[None], target=tgt)
    >>> new.params.shape, new.suffstat.shape, bool(np.isfinite(new.correction[0]))
    ((1, 5), (1, 1, 5), True)
    """
    u = state.params
    proposal = u + (np.asarray(step) @ rng.standard_normal((*u.shape, 1)))[..., 0]
    ev = evaluate(proposal, target)
    with np.errstate(invalid="ignore"):
        first = np.log(rng.uniform(size=u.shape[:-1])) < ev.surrogate - state.surrogate
    first &= np.isfinite(ev.surrogate)
    if not np.any(first):  # the second stage is not needed (one chain: most of the time)
        return state, first
    s_new = propose_statistic(rng, ev, target)
    correction = statistic_correction(s_new, ev, target)
    with np.errstate(invalid="ignore"):
        second = np.log(rng.uniform(size=u.shape[:-1])) < correction - state.correction
    accept = first & second & np.isfinite(correction)
    new = MoveState(proposal, s_new, ev.surrogate, correction)
    return replace_where(accept, new, state), first


def refresh_statistic(
    rng: np.random.Generator,
    state: MoveState,
    *,
    target: CollapsedTarget,
    evaluation: Evaluation | None = None,
) -> tuple[MoveState, npt.NDArray[np.bool_]]:
    """Move s alone: propose from q(s | φ, z, w) and accept with min(1, r(s', φ)/r(s, φ)).

    Returns the new state and which batch members moved. A current ``correction`` of −∞
    accepts any valid proposal (a way to start the chain). ``evaluation`` is
    :func:`evaluate` at ``state.params``, if already at hand.
    """
    ev = evaluate(state.params, target) if evaluation is None else evaluation
    s_new = propose_statistic(rng, ev, target)
    correction = statistic_correction(s_new, ev, target)
    with np.errstate(invalid="ignore"):
        accept = np.log(rng.uniform(size=correction.shape)) < correction - state.correction
    accept &= np.isfinite(correction)
    new = MoveState(state.params, s_new, ev.surrogate, correction)
    return replace_where(accept, new, state), accept


def redraw_statistic(
    rng: np.random.Generator, state: MoveState, *, target: CollapsedTarget, evaluation: Evaluation
) -> tuple[MoveState, npt.NDArray[np.bool_]]:
    """Move s alone, proposing from its exact law p(s | φ) under the normal model of x.

    s' is accepted with probability min(1, N(z; s', diag w) / N(z; s, diag w)); under the
    shape family of x, s' comes from its law there (:func:`shape_of`). Where the
    noise dwarfs the statistic's own spread (small n, small ε) this proposal is close to
    s | φ, z, w while the CLT one of :func:`refresh_statistic` is not; the two complement
    each other. ``evaluation`` is :func:`evaluate` at ``state.params``.
    """
    par = evaluation.params
    s_new = draw_statistic(
        rng,
        theta=par.theta[..., None, :],
        sigma2=par.sigma2[..., None],
        x_loc=par.x_loc,
        x_cov=par.x_cov,
        n=target.n,
        x_shape=shape_of(par, target),
    )
    w = target.noise_variance
    gap = np.sum(((target.released - state.suffstat) ** 2 - (target.released - s_new) ** 2) / w,
                 axis=(-2, -1))  # fmt: skip
    with np.errstate(invalid="ignore"):
        accept = np.log(rng.uniform(size=gap.shape)) < 0.5 * gap
    accept &= np.isfinite(gap)
    if not np.any(accept):
        return state, accept
    correction = statistic_correction(s_new, evaluation, target)
    accept &= np.isfinite(correction)
    new = MoveState(state.params, s_new, state.surrogate, correction)
    return replace_where(accept, new, state), accept
