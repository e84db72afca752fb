"""Moves along the symmetries of the model: map and translate the covariates, shift and scale y.

Given s, the NIW draw pins Σ_x to the scatter of s within a relative √(2/n); given Σ_x, the
exact law of s pins the scatter as closely, and where the release is weak (d ≥ 4 at n = 1000,
ε = 1: Laplace scale 48–168 on entries near 330) the release hardly moves either. So the
Gibbs draws and the moves of s alone walk along that ridge in steps of a few per cent
(docs/regression.md, "d ≥ 5: where the trap starts").

The moves here walk along it. A map of data sets, applied to every record, maps the state
(φ, s) with it; the five used here are

* map the covariates linearly, x ↦ A x (:func:`transform_covariates`): μ_x ↦ A μ_x,
  Σ_x ↦ A Σ_x Aᵀ, θ_x ↦ A⁻ᵀ θ_x (intercept and σ² kept), B ↦ E B Eᵀ, with
  E = blockdiag(1, A, 1) and B the matrix of s; A = diag g rescales them, x_j ↦ g_j x_j;
  A = V diag(g) Vᵀ with V the axes of the (first node's) Σ_x rescales along them
  (:func:`rescale_principal_axes`: the map reads V, which it keeps, so its Jacobian is taken
  with V's dependence on Σ_x);
* translate the covariates, x ↦ x + c (:func:`translate_covariates`): μ_x ↦ μ_x + c,
  θ₀ ↦ θ₀ − cᵀθ_x, B ↦ M B Mᵀ with M the shear (1, x, y) ↦ (1, x + c, y);
* shift the responses, y ↦ y + x̃ᵀδ (:func:`shift_responses`): θ ↦ θ + δ, X̃ᵀy ↦ X̃ᵀy + Gδ,
  yᵀy ↦ yᵀy + 2δᵀX̃ᵀy + δᵀGδ (G = X̃ᵀX̃ and the rest kept);
* rescale the responses, y ↦ c y (:func:`rescale_responses`): θ ↦ c θ, σ² ↦ c² σ²,
  X̃ᵀy ↦ c X̃ᵀy, yᵀy ↦ c² yᵀy;
* rescale the residuals about the current fit, y ↦ x̃ᵀθ + g (y − x̃ᵀθ) with θ kept
  (:func:`rescale_residuals`): σ² ↦ g² σ², X̃ᵀy ↦ (1 − g) Gθ + g X̃ᵀy,
  yᵀy ↦ (1 − g)² θᵀGθ + 2g(1 − g) θᵀX̃ᵀy + g² yᵀy. The map reads θ, which it keeps, so
  g ↦ T_g is still a group action on the states (T_g T_h = T_gh) and the argument below holds;
  it is the one move that changes the residual sum of squares (by g²), which σ² is tied to.

Each data set drawn from the model at φ maps to one drawn at φ', so the exact law of s is
equivariant: p(s' | φ') #J_s = p(s | φ), #J_s the Jacobian of the map of s. In the
Metropolis–Hastings ratio of the joint target π(φ) p(s | φ) L(z; s), that law and its Jacobian
cancel, and with a symmetric proposal of the group element whose inverse is the proposal's
negative (A the Cayley map of H, H with independent normal entries, rejected where
det A < 0; c ~ N(0, τ² S/n), S the scatter of x, kept; δ ~ N(0, τ² c² G⁻²) with G kept, or
δ ~ N(0, τ² P⁻¹) with P read from G, σ², the noise and the prior, all kept
(:func:`shift_precision`); log c, log g ~ N(0, τ²)) the ratio is

    π(φ') L(z; s') / [π(φ) L(z; s)] · #J_φ,

π the prior in the natural parameters (θ, σ², μ_x, the d(d + 1)/2 entries of Σ_x) and #J_φ the
Jacobian of the map of φ there: #det A^((d + 2) J − 1) (per node #det A from μ_x and
#det A^(d + 1) from Σ_x; #det A⁻¹ once from θ_x; along the axes of Σ_x, that of
:func:`rescale_principal_axes`), 1 for the translation and the shift, c^(p + 2) for y ↦ c y,
g² for the residuals (θ is kept, so the Jacobian of the whole map is block-triangular: that of
s given θ, which cancels, times g²). L is the release's likelihood:
N(z; s, diag w) given the mixing variances, or Laplace(z; s, b) with them integrated out (then
the caller must redraw w | s, z before w is next used, as after the moment move with w
integrated out, and no proposal may depend on w). No CLT quantity enters: the moves are cheap
and exact. tests/test_regression_scale_move.py checks each ratio against the joint density and
a numerical Jacobian, and the moves' invariance on exact draws of the joint.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from pymc_dp.curator.regression.statistics import (
    pack_statistic,
    released_pairs,
    unpack_statistic,
)
from pymc_dp.regression.kernels.collapsed import (
    CollapsedTarget,
    MoveState,
    floored_cholesky,
    move_state,
    pack_parameters,
    replace_where,
    unpack_parameters,
)

__all__ = [
    "MIXING",
    "MOVES",
    "POSTERIOR_SHIFT_FACTOR",
    "SCALE_STEPS",
    "SHIFT_FACTOR",
    "SymmetryState",
    "accept_mapped",
    "cayley",
    "draw_generator",
    "log_nig",
    "mirror_released",
    "posterior_shift_move",
    "principal_scale_move",
    "release_log_likelihood",
    "rescale_principal_axes",
    "rescale_residuals",
    "rescale_responses",
    "residual_scale_move",
    "response_scale_move",
    "scale_move",
    "scale_moves",
    "shift_move",
    "shift_precision",
    "shift_responses",
    "symmetry_state",
    "transform_covariates",
    "translate_covariates",
    "translate_move",
]

SCALE_STEPS = (0.3, 0.1, 0.03)
"""Standard deviations τ of log g (and log c) of the successive moves of one sweep: a fixed
cycle, each step exact, from the wide ridge of a weak release to the narrow one of a strong
one."""
MIXING = 1.0
"""Scale of the off-diagonal entries of H in :func:`scale_move` (module docstring)."""
SHIFT_FACTOR = 0.3
"""τ of :func:`shift_move` per entry of the cycle, in units of that entry (not in :data:`MOVES`
since :func:`posterior_shift_move` replaced it)."""
POSTERIOR_SHIFT_FACTOR = 3.0
"""Step of :func:`posterior_shift_move` per entry τ of the cycle, in units of τ: 0.9, 0.3 and
0.09 of θ's spread along the ridge (accepted about 25, 66 and 89 % at d = 5 on the trap
benchmark's release)."""

Proposal = tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]
Mapped = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, Any]
"""A map's image (θ', σ²', μ_x', Σ_x', B') and log #J_φ; a coordinate it keeps is the same array."""


class SymmetryState(NamedTuple):
    """(φ, s) in natural coordinates, with the terms of the log target that the moves change.

    :func:`scale_moves` builds it once per sweep (:func:`symmetry_state`), so that the moves
    neither unpack nor pack φ and s, and evaluate each term at their proposal only, and only
    where the map changes its coordinates: the current state's terms are carried.
    """

    theta: npt.NDArray[np.float64]
    """``(..., p)``."""
    sigma2: npt.NDArray[np.float64]
    """``(...)``."""
    x_loc: npt.NDArray[np.float64]
    """``(..., J, d)``."""
    x_cov: npt.NDArray[np.float64]
    """``(..., J, d, d)``."""
    matrix: npt.NDArray[np.float64]
    """B of s per node, ``(..., J, d + 2, d + 2)``."""
    log_nig: npt.NDArray[np.float64]
    """log NIG(θ, σ²) up to constants, ``(...)``."""
    log_niw: npt.NDArray[np.float64]
    """Σ_j log NIW(μ_x, Σ_x) up to constants, ``(...)``."""
    log_likelihood: npt.NDArray[np.float64]
    """log L(z; s) up to constants, ``(...)``: given w, or Laplace with w integrated out."""


def _quad(vec: np.ndarray, mat: np.ndarray) -> np.ndarray:
    return np.einsum("...i,...ij,...j->...", vec, mat, vec)


def _log_niw(loc: np.ndarray, cov: np.ndarray, target: CollapsedTarget) -> np.ndarray:
    """Σ_j log NIW(μ_x, Σ_x) up to constants, ``(...)``; −∞ where Σ_x is not PD."""
    x_prior = target.x_prior
    d = loc.shape[-1]
    sign, logdet = np.linalg.slogdet(cov)
    inv = np.linalg.inv(cov)
    niw = (
        -0.5 * (x_prior.dof + d + 2.0) * logdet
        - 0.5 * x_prior.kappa * _quad(loc - x_prior.loc, inv)
        - 0.5 * np.einsum("...ij,...ji->...", x_prior.scale, inv)
    )
    return np.sum(np.where(sign > 0, niw, -np.inf), axis=-1)


def log_nig(theta: np.ndarray, sigma2: np.ndarray, target: CollapsedTarget) -> np.ndarray:
    """The log NIG(θ, σ²) up to constants, ``(...)``."""
    prior = target.prior
    p = theta.shape[-1]
    quad = _quad(theta - prior.mean, prior.precision)
    return -(0.5 * p + prior.shape + 1.0) * np.log(sigma2) - (0.5 * quad + prior.scale) / sigma2


def release_log_likelihood(
    matrix: np.ndarray, target: CollapsedTarget, laplace_scale
) -> np.ndarray:
    """The log L(z; s) up to constants: given w, or Laplace with w integrated out."""
    resid = target.released - pack_statistic(matrix)
    if laplace_scale is None:
        return -0.5 * np.sum(resid**2 / target.noise_variance, axis=(-2, -1))
    return -np.sum(np.abs(resid) / laplace_scale, axis=(-2, -1))


def _evaluate(
    mapped: Mapped, target: CollapsedTarget, laplace_scale, current: SymmetryState | None = None
) -> SymmetryState:
    """The state at ``mapped``'s image, its terms taken from ``current`` where the map kept them."""
    theta, sigma2, loc, cov, matrix, _ = mapped
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        if current is not None and theta is current.theta and sigma2 is current.sigma2:
            nig = current.log_nig
        else:
            nig = log_nig(theta, sigma2, target)
        if current is not None and loc is current.x_loc and cov is current.x_cov:
            niw = current.log_niw
        else:
            niw = _log_niw(loc, cov, target)
        likelihood = release_log_likelihood(matrix, target, laplace_scale)
    return SymmetryState(theta, sigma2, loc, cov, matrix, nig, niw, likelihood)


def _from_vectors(
    u: npt.ArrayLike, suffstat: npt.ArrayLike, target: CollapsedTarget, laplace_scale
) -> SymmetryState:
    s = np.asarray(suffstat, dtype=np.float64)
    par = unpack_parameters(u, target.x_prior.loc.shape[-1], s.shape[-2])
    matrix = unpack_statistic(s, target.n)
    return _evaluate((par.theta, par.sigma2, par.x_loc, par.x_cov, matrix, 0.0), target,
                     laplace_scale)  # fmt: skip


def symmetry_state(
    state: MoveState, *, target: CollapsedTarget, laplace_scale: npt.ArrayLike | None = None
) -> SymmetryState:
    """The :class:`SymmetryState` of a collapsed chain's state.

    ``laplace_scale`` as :func:`transform_covariates`; the moves must be given the same.
    """
    return _from_vectors(state.params, state.suffstat, target, laplace_scale)


def _propose(
    state: SymmetryState, mapped: Mapped, target: CollapsedTarget, laplace_scale
) -> tuple[SymmetryState, npt.NDArray[np.float64]]:
    """The image and the log π(φ') L(z; s') #J_φ / [π(φ) L(z; s)]."""
    new = _evaluate(mapped, target, laplace_scale, state)
    with np.errstate(invalid="ignore"):
        ratio = (new.log_nig - state.log_nig + new.log_niw - state.log_niw + mapped[-1]
                 + new.log_likelihood - state.log_likelihood)  # fmt: skip
    return new, ratio


def _proposal(
    mapper: Callable[[SymmetryState, np.ndarray], Mapped],
    u: npt.ArrayLike,
    suffstat: npt.ArrayLike,
    element: npt.ArrayLike,
    target: CollapsedTarget,
    laplace_scale,
) -> Proposal:
    """A public map's (u', s', log ratio) at (u, s)."""
    state = _from_vectors(u, suffstat, target, laplace_scale)
    new, ratio = _propose(state, mapper(state, np.asarray(element, dtype=np.float64)), target,
                          laplace_scale)  # fmt: skip
    u_new = pack_parameters(new.theta, new.sigma2, new.x_loc, new.x_cov)
    return u_new, pack_statistic(new.matrix), ratio


def mirror_released(matrix: np.ndarray) -> np.ndarray:
    """The released entries of a map's B mirrored, as a packed and unpacked s would be."""
    rows, cols = released_pairs(matrix.shape[-1] - 2)
    matrix[..., cols, rows] = matrix[..., rows, cols]
    return matrix


def cayley(generator: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """A = (I − H/2)⁻¹ (I + H/2), ``(..., d, d)``: H ↦ −H gives A⁻¹ exactly.

    Examples
    --------
    >>> h = np.array([[0.2, -0.1], [0.3, 0.0]])
    >>> bool(np.allclose(cayley(h) @ cayley(-h), np.eye(2)))
    True
    """
    h = 0.5 * np.asarray(generator, dtype=np.float64)
    eye = np.eye(h.shape[-1])
    return np.linalg.solve(eye - h, eye + h)


def draw_generator(
    rng: np.random.Generator, shape: tuple[int, ...], d: int, step: float, mixing: float
) -> npt.NDArray[np.float64]:
    """H ``(*shape, d, d)``: H_jj ~ N(0, step²), H_jk ~ N(0, (mixing · step)² / d) for j ≠ k."""
    sd = np.full((d, d), mixing * step / np.sqrt(d))
    np.fill_diagonal(sd, step)
    return sd * rng.standard_normal((*shape, d, d))


def _map_covariates(state: SymmetryState, generator: np.ndarray) -> Mapped:
    d = generator.shape[-1]
    a = cayley(generator)
    theta = state.theta.copy()
    theta[..., 1:] = (np.linalg.inv(a).swapaxes(-1, -2) @ theta[..., 1:, None])[..., 0]
    node_a = a[..., None, :, :]
    loc = (node_a @ state.x_loc[..., None])[..., 0]
    cov = node_a @ state.x_cov @ node_a.swapaxes(-1, -2)
    cov = 0.5 * (cov + cov.swapaxes(-1, -2))
    e = np.zeros((*generator.shape[:-2], 1, d + 2, d + 2))
    e[..., 0, 0] = e[..., d + 1, d + 1] = 1.0
    e[..., 1 : d + 1, 1 : d + 1] = node_a
    matrix = mirror_released(e @ state.matrix @ e.swapaxes(-1, -2))
    nodes = matrix.shape[-3]
    sign, log_det = np.linalg.slogdet(a)
    log_jac = np.where(sign > 0, ((d + 2.0) * nodes - 1.0) * log_det, -np.inf)
    return theta, state.sigma2, loc, cov, matrix, log_jac


def _map_principal_axes(state: SymmetryState, log_g: np.ndarray) -> Mapped:
    d = log_g.shape[-1]
    lam, vec = np.linalg.eigh(state.x_cov[..., 0, :, :])
    # The Cayley generator whose map is V diag(g) Vᵀ: (g − 1) / (g + 1) = tanh(log g / 2).
    h = (vec * 2.0 * np.tanh(0.5 * log_g)[..., None, :]) @ vec.swapaxes(-1, -2)
    *image, log_jac = _map_covariates(state, h)
    lam_new = lam * np.exp(2.0 * log_g)
    i, k = np.triu_indices(d, 1)
    with np.errstate(divide="ignore"):
        spread = np.sum(np.log(np.abs(lam_new[..., i] - lam_new[..., k]))
                        - np.log(np.abs(lam[..., i] - lam[..., k])), axis=-1)  # fmt: skip
    return (*image, log_jac - (d - 1.0) * np.sum(log_g, axis=-1) + spread)


def _map_translation(state: SymmetryState, c: np.ndarray) -> Mapped:
    d = c.shape[-1]
    theta = state.theta.copy()
    theta[..., 0] = theta[..., 0] - np.sum(c * theta[..., 1:], axis=-1)
    loc = state.x_loc + c[..., None, :]
    shear = np.broadcast_to(np.eye(d + 2), (*c.shape[:-1], 1, d + 2, d + 2)).copy()
    shear[..., 1 : d + 1, 0] = c[..., None, :]
    matrix = mirror_released(shear @ state.matrix @ shear.swapaxes(-1, -2))
    return theta, state.sigma2, loc, state.x_cov, matrix, 0.0


def _map_shift(state: SymmetryState, delta: np.ndarray) -> Mapped:
    p = delta.shape[-1]
    b_mat = state.matrix
    gram, xty = b_mat[..., :p, :p], b_mat[..., :p, p]
    node_delta = delta[..., None, :]
    g_delta = (gram @ node_delta[..., None])[..., 0]
    new = b_mat.copy()
    new[..., :p, p] = new[..., p, :p] = xty + g_delta
    new[..., p, p] = (
        b_mat[..., p, p] + 2.0 * np.sum(node_delta * xty, -1) + np.sum(node_delta * g_delta, -1)
    )
    return state.theta + delta, state.sigma2, state.x_loc, state.x_cov, new, 0.0


def _map_response_scale(state: SymmetryState, log_c: np.ndarray) -> Mapped:
    p = state.theta.shape[-1]
    c = np.exp(log_c)
    e = np.ones((*log_c.shape, 1, p + 1))
    e[..., p] = c[..., None]
    matrix = state.matrix * e[..., :, None] * e[..., None, :]
    return (state.theta * c[..., None], state.sigma2 * c**2, state.x_loc, state.x_cov, matrix,
            (p + 2.0) * log_c)  # fmt: skip


def _map_residual_scale(state: SymmetryState, log_g: np.ndarray) -> Mapped:
    p = state.theta.shape[-1]
    g = np.exp(log_g)[..., None]  # per node
    b_mat = state.matrix
    gram, xty = b_mat[..., :p, :p], b_mat[..., :p, p]
    node_theta = state.theta[..., None, :]
    g_theta = (gram @ node_theta[..., None])[..., 0]
    new = b_mat.copy()
    new[..., :p, p] = new[..., p, :p] = (1.0 - g)[..., None] * g_theta + g[..., None] * xty
    new[..., p, p] = ((1.0 - g) ** 2 * np.sum(node_theta * g_theta, -1)
                      + 2.0 * g * (1.0 - g) * np.sum(node_theta * xty, -1)
                      + g**2 * b_mat[..., p, p])  # fmt: skip
    sigma2 = state.sigma2 * np.exp(2.0 * log_g)
    return state.theta, sigma2, state.x_loc, state.x_cov, new, 2.0 * log_g


def transform_covariates(
    u: npt.ArrayLike,
    suffstat: npt.ArrayLike,
    generator: npt.ArrayLike,
    *,
    target: CollapsedTarget,
    laplace_scale: npt.ArrayLike | None = None,
) -> Proposal:
    """The state after x ↦ A x, A = (I − H/2)⁻¹ (I + H/2), and the log Metropolis–Hastings ratio.

    μ_x ↦ A μ_x, Σ_x ↦ A Σ_x Aᵀ, θ_x ↦ A⁻ᵀ θ_x (intercept and σ² kept), B ↦ E B Eᵀ with
    E = blockdiag(1, A, 1); #J_φ = #det A^((d + 2) J − 1) (μ_x gives #det A per node, Σ_x
    #det A^(d + 1), θ_x #det A⁻¹ once). A is the Cayley transform of H, which H ↦ −H inverts
    exactly (the matrix exponential would too, at many times the cost in a batch); a diagonal
    H rescales, x_j ↦ g_j x_j with g_j = (1 + H_jj/2) / (1 − H_jj/2).

    Parameters
    ----------
    u, suffstat
        Unconstrained φ ``(..., k)`` and s ``(..., J, m)``.
    generator
        H, ``(..., d, d)``.
    target
        Released values, noise variances, sizes and priors, under the normal model of x.
    laplace_scale
        Laplace scale b, broadcastable to z: the ratio is then that of φ, s | z with the mixing
        variances integrated out; ``None``: given them (``target.noise_variance``).

    Returns
    -------
    u_new, suffstat_new, log_ratio : numpy.ndarray
    """
    return _proposal(_map_covariates, u, suffstat, generator, target, laplace_scale)


def rescale_principal_axes(
    u: npt.ArrayLike,
    suffstat: npt.ArrayLike,
    log_g: npt.ArrayLike,
    *,
    target: CollapsedTarget,
    laplace_scale: npt.ArrayLike | None = None,
) -> Proposal:
    """The state after x ↦ V diag(g) Vᵀ x, V the axes of the first node's Σ_x, and the log ratio.

    ``log_g`` ``(..., d)`` in ascending order of Σ_x's eigenvalues λ. The map reads V, so its
    Jacobian is not that of a fixed A: the first node's Σ_x keeps its eigenvectors and its
    eigenvalues go to g_k² λ_k, Jacobian Π g_k² Π_{i<k} |g_i² λ_i − g_k² λ_k| / |λ_i − λ_k| (the
    volume element of symmetric matrices in eigen-coordinates), where a fixed A gives
    #det A^(d + 1); given that Σ_x the rest maps with a fixed A (Jacobians as
    :func:`transform_covariates`), so the whole Jacobian is their product. A keeps V, so −log g
    maps back. Arguments and returns as :func:`transform_covariates`.
    """
    return _proposal(_map_principal_axes, u, suffstat, log_g, target, laplace_scale)


def translate_covariates(
    u: npt.ArrayLike,
    suffstat: npt.ArrayLike,
    offset: npt.ArrayLike,
    *,
    target: CollapsedTarget,
    laplace_scale: npt.ArrayLike | None = None,
) -> Proposal:
    """The state after x ↦ x + c, ``offset`` c ``(..., d)``, and the log ratio.

    μ_x ↦ μ_x + c, θ₀ ↦ θ₀ − cᵀθ_x, B ↦ M B Mᵀ with M the shear (1, x, y) ↦ (1, x + c, y):
    unit Jacobians; the scatter of x is kept, so a proposal of c that reads it only is
    symmetric. Arguments and returns as :func:`transform_covariates`.
    """
    return _proposal(_map_translation, u, suffstat, offset, target, laplace_scale)


def shift_responses(
    u: npt.ArrayLike,
    suffstat: npt.ArrayLike,
    delta: npt.ArrayLike,
    *,
    target: CollapsedTarget,
    laplace_scale: npt.ArrayLike | None = None,
) -> Proposal:
    """The state after y ↦ y + x̃ᵀδ, ``delta`` ``(..., p)``, and the log ratio.

    The map of s is a shear (unit Jacobian) that keeps G = X̃ᵀX̃; a proposal of δ that depends on
    G only is therefore symmetric. Arguments and returns as :func:`transform_covariates`.
    """
    return _proposal(_map_shift, u, suffstat, delta, target, laplace_scale)


def rescale_responses(
    u: npt.ArrayLike,
    suffstat: npt.ArrayLike,
    log_c: npt.ArrayLike,
    *,
    target: CollapsedTarget,
    laplace_scale: npt.ArrayLike | None = None,
) -> Proposal:
    """The state after y ↦ c y, ``log_c`` ``(...)``, and the log ratio.

    Arguments and returns as :func:`transform_covariates`.
    """
    return _proposal(_map_response_scale, u, suffstat, log_c, target, laplace_scale)


def rescale_residuals(
    u: npt.ArrayLike,
    suffstat: npt.ArrayLike,
    log_g: npt.ArrayLike,
    *,
    target: CollapsedTarget,
    laplace_scale: npt.ArrayLike | None = None,
) -> Proposal:
    """The state after y ↦ x̃ᵀθ + g (y − x̃ᵀθ), θ the current one, ``log_g`` ``(...)``, and the ratio.

    σ² ↦ g² σ² (θ, μ_x, Σ_x kept; #J_φ = g²); G kept, X̃ᵀy ↦ (1 − g) Gθ + g X̃ᵀy and
    yᵀy ↦ (1 − g)² θᵀGθ + 2g(1 − g) θᵀX̃ᵀy + g² yᵀy, so the residual sum of squares at θ
    scales by g². Arguments and returns as :func:`transform_covariates`.
    """
    return _proposal(_map_residual_scale, u, suffstat, log_g, target, laplace_scale)


def _noise_variance(
    target: CollapsedTarget, laplace_scale: npt.ArrayLike | None
) -> npt.NDArray[np.float64]:
    """The release's noise variance per entry: the mixing variances w, or 2b² with w integrated out.

    Never w in the second case: that move's target has w integrated out, and a proposal that
    read w would not keep it.
    """
    if laplace_scale is None:
        return target.noise_variance
    return np.broadcast_to(2.0 * np.asarray(laplace_scale, float) ** 2, target.released.shape)


def _step(
    rng: np.random.Generator,
    state: SymmetryState,
    mapped: Mapped,
    target: CollapsedTarget,
    laplace_scale,
) -> tuple[SymmetryState, npt.NDArray[np.bool_]]:
    """Propose ``mapped`` and accept it by its ratio."""
    new, ratio = _propose(state, mapped, target, laplace_scale)
    return accept_mapped(rng, state, new, ratio)


def accept_mapped(
    rng: np.random.Generator, state: SymmetryState, new: SymmetryState, ratio: npt.ArrayLike
) -> tuple[SymmetryState, npt.NDArray[np.bool_]]:
    """``new`` where a uniform's log falls below the finite log ``ratio``, else ``state``."""
    with np.errstate(invalid="ignore"):
        took = np.log(rng.uniform(size=ratio.shape)) < ratio
    took &= np.isfinite(ratio)
    if took.all():
        return new, took
    if not took.any():
        return state, took
    return SymmetryState(*(
        np.where(took.reshape(took.shape + (1,) * (np.ndim(a) - took.ndim)), a, b)
        for a, b in zip(new, state, strict=True)
    )), took  # fmt: skip


def scale_move(
    rng: np.random.Generator,
    state: SymmetryState,
    *,
    target: CollapsedTarget,
    step: float,
    laplace_scale: npt.ArrayLike | None = None,
    mixing: float | None = None,
) -> tuple[SymmetryState, npt.NDArray[np.bool_]]:
    """One Metropolis–Hastings linear map of the covariates, x ↦ A x, A the Cayley map of H.

    H_jj ~ N(0, step²) rescale the covariates; H_jk ~ N(0, (mixing · step)² / d), j ≠ k, mix
    them (their correlations in Σ_x and the cross-products of s move together).

    Parameters
    ----------
    rng
        Source of randomness.
    state
        Current (φ, s), s ``(..., J, m)``, from :func:`symmetry_state`.
    target
        As :func:`transform_covariates`. Not with the shape family of x (its held raw moments
        are not mapped).
    step
        Standard deviation τ of each H_jj (about log g_j).
    laplace_scale
        As :func:`transform_covariates`; the same as ``state`` was built with.
    mixing
        Scale of the off-diagonal entries of H; 0 rescales only; default :data:`MIXING`.

    Returns
    -------
    state : SymmetryState
    moved : numpy.ndarray
        Which batch members moved.
    """
    if target.x_shape is not None:
        raise ValueError("scale_move does not rescale the shape family's moments; x_shape=None")
    d = target.x_prior.loc.shape[-1]
    mixing = MIXING if mixing is None else mixing
    h = draw_generator(rng, np.shape(state.sigma2), d, step, mixing)
    return _step(rng, state, _map_covariates(state, h), target, laplace_scale)


def principal_scale_move(
    rng: np.random.Generator,
    state: SymmetryState,
    *,
    target: CollapsedTarget,
    step: float,
    laplace_scale: npt.ArrayLike | None = None,
) -> tuple[SymmetryState, npt.NDArray[np.bool_]]:
    """One Metropolis–Hastings rescaling of the covariates along the principal axes of Σ_x.

    :func:`rescale_principal_axes` with log g_k ~ N(0, step²) independent: the image has the
    same axes, so −log g (in whatever order its eigenvalues now fall) is drawn there with the
    same density. Where Σ_x is nearly singular (the funnel at d ≥ 4, docs/regression.md) this
    stretches its thin axis alone, which the per-covariate rescalings of :func:`scale_move` do
    only together with the others. Not in :data:`MOVES`: at d = 5 on the trap benchmark's
    release it raised the smallest ESS of log diag Σ_x 1.1–1.8× for 11–34 % more CPU time, at
    d = 3 it halved the ESS of (θ, σ²) per CPU second (docs/regression.md, "Moves for σ², θ and
    diag Σ_x"). Arguments and returns as :func:`scale_move`.
    """
    if target.x_shape is not None:
        raise ValueError(
            "principal_scale_move does not rescale the shape family's moments; x_shape=None"
        )
    d = target.x_prior.loc.shape[-1]
    log_g = step * rng.standard_normal((*np.shape(state.sigma2), d))
    return _step(rng, state, _map_principal_axes(state, log_g), target, laplace_scale)


def shift_move(
    rng: np.random.Generator,
    state: SymmetryState,
    *,
    target: CollapsedTarget,
    step: float,
    laplace_scale: npt.ArrayLike | None = None,
) -> tuple[SymmetryState, npt.NDArray[np.bool_]]:
    """One Metropolis–Hastings shift of y by x̃ᵀδ, δ ~ N(0, step² c² G⁻²).

    G is X̃ᵀX̃ summed over the nodes, c the noise's root-mean-square sd: δ then has the spread of
    G⁻¹X̃ᵀy under noise of sd c on X̃ᵀy, which moves θ along the ridge where θ and X̃ᵀy hold each
    other (θ | s has sd about σ / √n, the release's noise on X̃ᵀy is far wider). With
    ``laplace_scale`` c is √2 b, not from w: that move's target has w integrated out, and a
    proposal that read w would not keep it. Arguments and returns as :func:`scale_move`.
    """
    p = state.theta.shape[-1]
    gram = np.sum(state.matrix[..., :p, :p], axis=-3)
    variance = _noise_variance(target, laplace_scale)
    noise = np.sqrt(np.mean(variance, axis=(-2, -1)))
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        xi = rng.standard_normal((*np.shape(state.sigma2), p, 1))
        delta = step * noise[..., None] * np.linalg.solve(gram, xi)[..., 0]
    return _step(rng, state, _map_shift(state, delta), target, laplace_scale)


def _shift_precision(
    state: SymmetryState, target: CollapsedTarget, laplace_scale
) -> npt.NDArray[np.float64]:
    p = state.theta.shape[-1]
    gram = state.matrix[..., :p, :p]
    variance = _noise_variance(target, laplace_scale)
    noise = np.mean(variance, axis=-1)[..., None, None] * np.eye(p)
    sigma2 = state.sigma2[..., None, None]
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        release = gram @ np.linalg.solve(sigma2[..., None] * gram + noise, gram)
        precision = np.sum(release, axis=-3) + target.prior.precision / sigma2
    return 0.5 * (precision + precision.swapaxes(-1, -2))


def shift_precision(
    u: npt.ArrayLike,
    suffstat: npt.ArrayLike,
    *,
    target: CollapsedTarget,
    laplace_scale: npt.ArrayLike | None = None,
) -> npt.NDArray[np.float64]:
    """P = Σ_j G_j (σ² G_j + c_j² I)⁻¹ G_j + Λ / σ², ``(..., p, p)``.

    The precision of θ given the released X̃ᵀy of every node j (X̃ᵀy = G_j θ + N(0, σ² G_j) +
    noise of variance c_j², c_j² the node's mean noise variance), G_j and σ², under the NIG
    prior's Λ: the spread of θ along the ridge the shift walks. G_j, σ², the noise and Λ are all
    kept by y ↦ y + x̃ᵀδ, so a proposal of δ from P is symmetric. With ``laplace_scale``
    c_j² = 2b² (not w: as :func:`shift_move`). Arguments as :func:`transform_covariates`.
    """
    state = _from_vectors(u, suffstat, target, laplace_scale)
    return _shift_precision(state, target, laplace_scale)


def posterior_shift_move(
    rng: np.random.Generator,
    state: SymmetryState,
    *,
    target: CollapsedTarget,
    step: float,
    laplace_scale: npt.ArrayLike | None = None,
) -> tuple[SymmetryState, npt.NDArray[np.bool_]]:
    """One Metropolis–Hastings shift of y by x̃ᵀδ, δ ~ N(0, step² P⁻¹), P of :func:`shift_precision`.

    Unlike :func:`shift_move`'s c² G⁻², P⁻¹ stays bounded where G is nearly singular (at d = 5
    on the trap benchmark's release the posterior's G has eigenvalues near 2 against 1000: there
    G⁻¹ proposed θ steps hundreds of prior sds long) and includes the prior, so ``step`` is in
    units of θ's spread along the ridge. Arguments and returns as :func:`scale_move`.
    """
    precision = _shift_precision(state, target, laplace_scale)
    xi = rng.standard_normal((*precision.shape[:-1], 1))
    # P is positive definite wherever σ² > 0: Λ is, and the release's part is semi-definite.
    # Far outside the posterior rounding can break that; P is kept by the shift, so its floored
    # form is too, and the proposal stays symmetric.
    chol = floored_cholesky(precision)
    delta = step * np.linalg.solve(chol.swapaxes(-1, -2), xi)[..., 0]
    return _step(rng, state, _map_shift(state, delta), target, laplace_scale)


def translate_move(
    rng: np.random.Generator,
    state: SymmetryState,
    *,
    target: CollapsedTarget,
    step: float,
    laplace_scale: npt.ArrayLike | None = None,
) -> tuple[SymmetryState, npt.NDArray[np.bool_]]:
    """One Metropolis–Hastings translation of the covariates, c ~ N(0, step² S / n).

    S is the scatter of x (Σxxᵀ − n x̄x̄ᵀ) and n the records, both summed over the nodes: the
    translation keeps them. Arguments and returns as :func:`scale_move`.
    """
    d = target.x_prior.loc.shape[-1]
    b_mat = state.matrix
    sums = b_mat[..., 0, 1 : d + 1]
    scatter = b_mat[..., 1 : d + 1, 1 : d + 1] - (
        sums[..., :, None] * sums[..., None, :] / target.n[:, None, None]
    )
    # Positive definite in a valid state (p(s | φ) > 0 needs it).
    chol = np.linalg.cholesky(np.sum(scatter, axis=-3) / np.sum(target.n))
    xi = rng.standard_normal((*np.shape(state.sigma2), d, 1))
    offset = step * (chol @ xi)[..., 0]
    return _step(rng, state, _map_translation(state, offset), target, laplace_scale)


Move = Callable[..., tuple[SymmetryState, npt.NDArray[np.bool_]]]


def _log_scale_move(mapper: Callable[[SymmetryState, np.ndarray], Mapped], name: str,
                    what: str) -> Move:  # fmt: skip
    """The move that proposes ``mapper``'s map with log factor ~ N(0, step²) in every chain."""

    def move(
        rng: np.random.Generator,
        state: SymmetryState,
        *,
        target: CollapsedTarget,
        step: float,
        laplace_scale: npt.ArrayLike | None = None,
    ) -> tuple[SymmetryState, npt.NDArray[np.bool_]]:
        h = step * rng.standard_normal(np.shape(state.sigma2))
        return _step(rng, state, mapper(state, h), target, laplace_scale)

    move.__name__ = move.__qualname__ = name
    move.__doc__ = (
        f"One Metropolis–Hastings rescaling of {what}, its log factor ~ N(0, step²).\n\n"
        "    Arguments and returns as :func:`scale_move`.\n    "
    )
    return move


response_scale_move = _log_scale_move(_map_response_scale, "response_scale_move", "y")
residual_scale_move = _log_scale_move(
    _map_residual_scale, "residual_scale_move", "the residuals about x̃ᵀθ"
)


MOVES: tuple[tuple[Move, float], ...] = (
    (scale_move, 1.0),
    (translate_move, 1.0),
    (posterior_shift_move, POSTERIOR_SHIFT_FACTOR),
    (response_scale_move, 1.0),
    (residual_scale_move, 1.0),
)
"""The moves of one entry τ of the cycle of :func:`scale_moves`, in order, each with its step
in units of τ."""


def scale_moves(
    rng: np.random.Generator,
    state: MoveState,
    *,
    target: CollapsedTarget,
    steps: tuple[float, ...] = SCALE_STEPS,
    laplace_scale: npt.ArrayLike | None = None,
    moves: tuple[tuple[Move, float], ...] = MOVES,
    refresh: bool = True,
) -> tuple[MoveState, npt.NDArray[np.float64]]:
    """Per entry τ of ``steps``, each move of ``moves`` with step τ times its factor, in order.

    :data:`MOVES`: x ↦ A x, x ↦ x + c, y ↦ y + x̃ᵀδ (:func:`posterior_shift_move`, factor
    :data:`POSTERIOR_SHIFT_FACTOR`), y ↦ c y, y ↦ x̃ᵀθ + g (y − x̃ᵀθ). The moves run on the
    :class:`SymmetryState`, built once. Arguments as :func:`scale_move`, and

    Parameters
    ----------
    refresh
        Re-evaluate the surrogate and correction where anything moved (a quarter of the
        sweep's cost for one chain); ``False`` leaves them stale there, for a caller that
        reads φ and s only.

    Returns
    -------
    state : MoveState
    taken : numpy.ndarray
        Fraction of the moves taken per batch member.
    """
    count = len(moves) * len(steps)
    if count == 0:
        return state, np.zeros(np.shape(state.params)[:-1])
    current = symmetry_state(state, target=target, laplace_scale=laplace_scale)
    taken = np.zeros(np.shape(current.sigma2))
    for step in steps:
        for move, factor in moves:
            current, took = move(rng, current, target=target, step=factor * step,
                                 laplace_scale=laplace_scale)  # fmt: skip
            taken += took
    moved = taken > 0
    if np.any(moved):
        u = pack_parameters(current.theta, current.sigma2, current.x_loc, current.x_cov)
        s = pack_statistic(current.matrix)
        new = move_state(u, s, target) if refresh else MoveState(u, s, *state[2:])
        state = replace_where(moved, new, state)
    return state, taken / count
