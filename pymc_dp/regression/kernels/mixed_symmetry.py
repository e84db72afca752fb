"""Moves along the mixed model's symmetries: map and translate the normal covariates, move y.

The mixed model of x (:mod:`~pymc_dp.regression.kernels.mixed_model`: x_b ~ Bernoulli(π), the
other covariates x_n given x_b normal with mean m_g per group and one covariance Σ) pins φ to s and
s to φ as the normal model does, so its Gibbs draws and random walks walk the ridge between them
in small steps (at d = 3, n = 1000, ε = 1 the smallest ESS of (θ, σ²) was 33 of 4000 draws,
docs/regression.md, "The mixed model at d ≥ 3"). The moves here are those of
:mod:`~pymc_dp.regression.kernels.scale_move` carried over: maps of data sets, applied to every
record, that map (φ, s) with them, with rows (1, x_b, x_n, y) of B (binary covariate first):

* map the normal covariates linearly, x_n ↦ A x_n (:func:`transform_normal_covariates`):
  m_g ↦ A m_g for both groups, Σ ↦ A Σ Aᵀ, their slopes θ_n ↦ A⁻ᵀ θ_n, B ↦ E B Eᵀ with
  E = blockdiag(1, 1, A, 1); #J_φ = #det A^(d₂ + 2) (#det A from each group's mean,
  #det A^(d₂ + 1) from Σ, #det A⁻¹ from θ_n);
* translate them by group, x_n ↦ x_n + c₀ + (c₁ − c₀) x_b (:func:`translate_groups`):
  m_g ↦ m_g + c_g, θ₀ ↦ θ₀ − c₀ᵀθ_n, θ_b ↦ θ_b − (c₁ − c₀)ᵀθ_n, B ↦ M B Mᵀ with M that shear;
  unit Jacobians, and the group sizes and the scatter W within the groups are kept, so a
  proposal of (c₀, c₁) that reads W only is symmetric;
* the moves of y of :mod:`~pymc_dp.regression.kernels.scale_move` (shift by x̃ᵀδ, rescale y,
  rescale the residuals), which do not touch x and so are the same for any model of x.

The cell model (every covariate binary, :mod:`~pymc_dp.regression.kernels.cell_model`) has no
continuous map of x; :func:`mixed_symmetry_moves` runs the moves of y alone on it.

No map touches the binary column (rows and columns 0 and 1 of B are kept, to the bit), so
``Σ x_b = Σ x_b²`` stays the same whole number, and π keeps its value. Each data set drawn at φ
maps to one drawn at φ', so the exact law of s is equivariant and cancels with its Jacobian; the
Metropolis–Hastings ratio is π(φ') L(z; s') #J_φ / [π(φ) L(z; s)], π the prior in the natural
parameters, L the noise's density (Laplace with the mixing variances integrated out, as the
mixed model's target holds it, or N(z; s, diag w)). tests/test_regression_mixed_symmetry.py
checks each ratio against the joint density and a numerical Jacobian, and Geweke's check.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from pymc_dp.curator.regression.statistics import (
    d_from_released,
    pack_statistic,
    unpack_statistic,
)
from pymc_dp.regression.kernels.cell_model import CellParameters
from pymc_dp.regression.kernels.conjugate import NIG
from pymc_dp.regression.kernels.level_model import LevelParameters, level_parts
from pymc_dp.regression.kernels.mixed_model import MixedParameters, group_parts
from pymc_dp.regression.kernels.mixed_move import (
    MixedState,
    MixedTarget,
    log_group_prior,
    mixed_state,
    pack_cells,
    pack_levels,
    pack_mixed,
    select_state,
    unpack_cells,
    unpack_levels,
    unpack_mixed,
)
from pymc_dp.regression.kernels.psd import batched_cholesky
from pymc_dp.regression.kernels.scale_move import (
    MIXING,
    POSTERIOR_SHIFT_FACTOR,
    SCALE_STEPS,
    Mapped,
    SymmetryState,
    accept_mapped,
    cayley,
    draw_generator,
    log_nig,
    mirror_released,
    posterior_shift_move,
    release_log_likelihood,
    residual_scale_move,
    response_scale_move,
)

__all__ = [
    "CELL_SYMMETRY_MIN_D",
    "MIXED_SYMMETRY_MIN_D",
    "mixed_symmetry_moves",
    "mixed_symmetry_state",
    "normal_covariate_move",
    "transform_normal_covariates",
    "translate_groups",
    "translate_groups_move",
]

MIXED_SYMMETRY_MIN_D = 3
"""Covariates (the binary one included) from which the mixed model's sweep runs the moves."""
CELL_SYMMETRY_MIN_D = 5
"""Covariates from which the cell model's sweep runs the moves of y (it has no map of x). A
factor's releases, n = 1000, ε = 1, 4 chains × (500 + 1000), ESS per CPU second with / without
them: 0.86–0.89× at d = 3 (two releases), 1.08–1.74× at d = 5 (three), 20× at d = 10 (one;
R-hat 1.348 → 1.022)."""


class _NodeTarget(NamedTuple):
    """The mixed target as one node of :mod:`~pymc_dp.regression.kernels.scale_move`'s moves."""

    released: npt.NDArray[np.float64]
    """z, ``(..., 1, m)``."""
    noise_variance: npt.NDArray[np.float64]
    prior: NIG


def _node_target(target: MixedTarget) -> tuple[_NodeTarget, np.ndarray | None]:
    """``target`` with a node axis, and its Laplace scale with one (``None``: Gaussian noise)."""
    released = np.asarray(target.released, dtype=np.float64)
    variance = np.broadcast_to(np.asarray(target.noise_variance, float), released.shape)
    laplace = target.laplace_scale
    if laplace is not None:
        laplace = np.asarray(laplace, dtype=np.float64)[..., None, :]
    node = _NodeTarget(released[..., None, :], variance[..., None, :], target.prior)
    return node, laplace


def mixed_symmetry_state(
    params: npt.ArrayLike, suffstat: npt.ArrayLike, target: MixedTarget
) -> tuple[SymmetryState, npt.NDArray[np.float64]]:
    """(φ, s) in natural coordinates as a one-node :class:`SymmetryState`, and π.

    ``x_loc`` holds the groups' means ``(..., 2, d₂)``, ``x_cov`` Σ ``(..., d₂, d₂)``,
    ``log_niw`` :func:`~pymc_dp.regression.kernels.mixed_move.log_group_prior`; for the cell
    model d₂ = 0 and ``log_niw`` 0 (its Dirichlet prior of π is a constant), π the cells'.
    """
    node, laplace = _node_target(target)
    matrix = unpack_statistic(np.asarray(suffstat, dtype=np.float64), target.n)[..., None, :, :]
    if target.cells is not None:
        # Every covariate binary: x has no continuous symmetry, the moves of y remain.
        cells, _ = unpack_cells(params, target.cells)
        batch = np.shape(cells.sigma2)
        loc, cov, log_x = np.zeros((*batch, 2, 0)), np.zeros((*batch, 0, 0)), np.zeros(batch)
        par = MixedParameters(cells.theta, cells.sigma2, cells.probs, loc, cov)
    else:
        if target.levels is not None:
            par, _ = unpack_levels(params, target.levels)
        else:
            par, _ = unpack_mixed(params, d_from_released(np.shape(target.released)[-1]))
        log_x = log_group_prior(par.group_loc, par.x_cov, target.x_prior)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        state = SymmetryState(par.theta, par.sigma2, par.group_loc, par.x_cov, matrix,
                              log_nig(par.theta, par.sigma2, node), log_x,
                              release_log_likelihood(matrix, node, laplace))  # fmt: skip
    return state, (par.probs if target.levels is not None else par.prob)


def _map_normal_covariates(state: SymmetryState, generator: np.ndarray) -> Mapped:
    # The factor's f columns (the binary one: f = 1) sit before the normal covariates.
    levels, d2 = state.x_loc.shape[-2], generator.shape[-1]
    first = levels  # B's rows: intercept, f = K − 1 columns of the factor, x_n, y
    a = cayley(generator)
    theta = state.theta.copy()
    theta[..., first:] = (np.linalg.inv(a).swapaxes(-1, -2) @ theta[..., first:, None])[..., 0]
    loc = (a[..., None, :, :] @ state.x_loc[..., None])[..., 0]
    cov = a @ state.x_cov @ a.swapaxes(-1, -2)
    cov = 0.5 * (cov + cov.swapaxes(-1, -2))
    size = levels + d2 + 1
    e = np.zeros((*generator.shape[:-2], 1, size, size))
    e[..., :first, :first] = np.eye(first)
    e[..., size - 1, size - 1] = 1.0
    e[..., first : first + d2, first : first + d2] = a[..., None, :, :]
    matrix = mirror_released(e @ state.matrix @ e.swapaxes(-1, -2))
    sign, log_det = np.linalg.slogdet(a)
    # #det A from each level's mean, #det A^(d₂ + 1) from Σ, #det A⁻¹ from θ_n.
    log_jac = np.where(sign > 0, (d2 + levels) * log_det, -np.inf)
    return theta, state.sigma2, loc, cov, matrix, log_jac


def _map_groups(state: SymmetryState, offset: np.ndarray) -> Mapped:
    levels, d2 = offset.shape[-2], offset.shape[-1]
    first = levels
    c0 = offset[..., 0, :]
    shifts = offset[..., 1:, :] - c0[..., None, :]  # c_g − c₀ for the factor's columns
    theta = state.theta.copy()
    slopes = theta[..., first:]
    theta[..., 0] = theta[..., 0] - np.sum(c0 * slopes, axis=-1)
    theta[..., 1:first] = theta[..., 1:first] - np.sum(shifts * slopes[..., None, :], axis=-1)
    size = levels + d2 + 1
    shear = np.broadcast_to(np.eye(size), (*offset.shape[:-2], 1, size, size)).copy()
    shear[..., first : first + d2, 0] = c0[..., None, :]
    shear[..., first : first + d2, 1:first] = np.swapaxes(shifts, -1, -2)[..., None, :, :]
    matrix = mirror_released(shear @ state.matrix @ shear.swapaxes(-1, -2))
    return theta, state.sigma2, state.x_loc + offset, state.x_cov, matrix, 0.0


def _propose(
    state: SymmetryState, mapped: Mapped, target: MixedTarget
) -> tuple[SymmetryState, npt.NDArray[np.float64]]:
    """The image of a map of x and the log π(φ') L(z; s') #J_φ / [π(φ) L(z; s)]."""
    theta, sigma2, loc, cov, matrix, log_jac = mapped
    node, laplace = _node_target(target)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        new = SymmetryState(theta, sigma2, loc, cov, matrix, log_nig(theta, sigma2, node),
                            log_group_prior(loc, cov, target.x_prior),
                            release_log_likelihood(matrix, node, laplace))  # fmt: skip
        ratio = (new.log_nig - state.log_nig + new.log_niw - state.log_niw + log_jac
                 + new.log_likelihood - state.log_likelihood)  # fmt: skip
    return new, ratio


def _proposal(mapper, params, suffstat, element, target):
    """A public map's (u', s', log ratio) at (u, s)."""
    state, prob = mixed_symmetry_state(params, suffstat, target)
    new, ratio = _propose(state, mapper(state, np.asarray(element, dtype=np.float64)), target)
    u = pack_mixed(MixedParameters(new.theta, new.sigma2, prob, new.x_loc, new.x_cov))
    return u, pack_statistic(new.matrix[..., 0, :, :]), ratio


def transform_normal_covariates(
    params: npt.ArrayLike, suffstat: npt.ArrayLike, generator: npt.ArrayLike, *,
    target: MixedTarget,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """The state after x_n ↦ A x_n, A the Cayley map of H, and the log Metropolis–Hastings ratio.

    Parameters
    ----------
    params, suffstat
        u of :func:`~pymc_dp.regression.kernels.mixed_move.pack_mixed` ``(..., k)`` and s
        ``(..., m)`` (binary covariate first).
    generator
        H, ``(..., d₂, d₂)``.
    target
        The mixed model's target (no cells).

    Returns
    -------
    params_new, suffstat_new, log_ratio : numpy.ndarray
    """
    return _proposal(_map_normal_covariates, params, suffstat, generator, target)


def translate_groups(
    params: npt.ArrayLike, suffstat: npt.ArrayLike, offset: npt.ArrayLike, *,
    target: MixedTarget,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """The state after x_n ↦ x_n + c₀ + (c₁ − c₀) x_b, ``offset`` (c₀, c₁) ``(..., 2, d₂)``.

    Arguments and returns as :func:`transform_normal_covariates`.
    """
    return _proposal(_map_groups, params, suffstat, offset, target)


def normal_covariate_move(
    rng: np.random.Generator, state: SymmetryState, *, target: MixedTarget, step: float
) -> tuple[SymmetryState, npt.NDArray[np.bool_]]:
    """One Metropolis–Hastings map x_n ↦ A x_n, H as :func:`~.scale_move.scale_move`'s."""
    d2 = state.x_cov.shape[-1]
    h = draw_generator(rng, np.shape(state.sigma2), d2, step, MIXING)
    new, ratio = _propose(state, _map_normal_covariates(state, h), target)
    return accept_mapped(rng, state, new, ratio)


def translate_groups_move(
    rng: np.random.Generator, state: SymmetryState, *, target: MixedTarget, step: float
) -> tuple[SymmetryState, npt.NDArray[np.bool_]]:
    """One Metropolis–Hastings translation by group, each c_g independent N(0, step² W / n).

    W, the scatter of x_n within the groups, and n are kept by the map.
    """
    statistic = pack_statistic(state.matrix[..., 0, :, :])
    if target.levels is not None:
        scatter = level_parts(statistic, target.n, target.levels).scatter
    else:
        scatter = group_parts(statistic, target.n).scatter
    # Positive definite in a valid state (the exact law of s needs it); where rounding says
    # otherwise the map keeps W, so offset 0 there keeps the proposal symmetric.
    chol, definite = batched_cholesky(scatter / target.n)
    chol = np.where(definite[..., None, None], chol, 0.0)
    xi = rng.standard_normal((*np.shape(state.sigma2), scatter.shape[-1], state.x_loc.shape[-2]))
    offset = step * np.swapaxes(chol @ xi, -1, -2)
    new, ratio = _propose(state, _map_groups(state, offset), target)
    return accept_mapped(rng, state, new, ratio)


def mixed_symmetry_moves(
    rng: np.random.Generator,
    state: MixedState,
    target: MixedTarget,
    *,
    steps: tuple[float, ...] = SCALE_STEPS,
) -> tuple[MixedState, npt.NDArray[np.float64]]:
    """The symmetry moves of one sweep, in order, per entry τ of ``steps``.

    x_n ↦ A x_n, the translation by group, y ↦ y + x̃ᵀδ (step τ times
    :data:`~.scale_move.POSTERIOR_SHIFT_FACTOR`), y ↦ c y, and the residuals' rescaling.
    Returns the state (rebuilt by :func:`~.mixed_move.mixed_state` where anything moved) and
    the share of the moves taken per batch member.
    """
    current, prob = mixed_symmetry_state(state.params, state.suffstat, target)
    node, laplace = _node_target(target)
    d2 = current.x_cov.shape[-1]
    taken = np.zeros(np.shape(current.sigma2))
    count = 0
    for step in steps:
        if d2:
            current, took = normal_covariate_move(rng, current, target=target, step=step)
            taken += took
            current, took = translate_groups_move(rng, current, target=target, step=step)
            taken += took
            count += 2
        current, took = posterior_shift_move(rng, current, target=node,
                                             step=POSTERIOR_SHIFT_FACTOR * step,
                                             laplace_scale=laplace)  # fmt: skip
        taken += took
        for move in (response_scale_move, residual_scale_move):
            current, took = move(rng, current, target=node, step=step, laplace_scale=laplace)
            taken += took
        count += 3
    moved = taken > 0
    if np.any(moved):
        if target.levels is not None:
            u = pack_levels(LevelParameters(current.theta, current.sigma2, prob, current.x_loc,
                                            current.x_cov))  # fmt: skip
        elif target.cells is None:
            u = pack_mixed(MixedParameters(current.theta, current.sigma2, prob, current.x_loc,
                                           current.x_cov))  # fmt: skip
        else:
            u = pack_cells(CellParameters(current.theta, current.sigma2, prob))
        new = mixed_state(u, pack_statistic(current.matrix[..., 0, :, :]), target)
        state = select_state(moved, new, state)
    return state, taken / max(count, 1)
