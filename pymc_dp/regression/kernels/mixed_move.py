"""Moves of the mixed model's sampler: s alone, and (φ, s) jointly with s re-proposed.

The target is the posterior of φ = (θ, σ², π, m₀, m₁, Σ) and the statistic s given the release z
(:mod:`~pymc_dp.regression.kernels.mixed_model`; binary covariate first): ``p(φ) p(s | φ) p(z | s)``
with the noise's own density, ``N(z; s, diag w)`` for Gaussian noise and the product of
Laplace(z_j; s_j, b) for Laplace noise (:attr:`MixedTarget.laplace_scale`; Algorithm 1's mixing
variances are integrated out, not sampled: the chain then never waits for them to let s move).
Both moves propose s from the same normal, the CLT law of s, ``N(n μ_t, n Σ_t)``, times
``N(z; s, diag w)`` (for Laplace noise w = 2b², its variance), on the coordinates the model leaves
free. ``Σ x_b²`` is not one of them: it is ``Σ x_b = k``, whose two readings in z combine into one
(precisions add). k's marginal under that normal is rounded to the whole numbers of
``[1, n − 1]`` (a normal variable rounded to the nearest integer, so each k has the mass of its
unit interval), and the other free coordinates are drawn from their normal conditional given k.

With probability :data:`DEFENSIVE_SHARE` s comes instead from the CLT law alone, the readings
left out (drawn the same way), and every density is that of the mixture. The readings can ask
for an s that the exact law at φ rules out (the Gram matrix ``[X, y]ᵀ[X, y]`` is positive
semi-definite; a φ far from the data puts it nowhere near the readings): every proposal is then
refused, and under Gaussian noise, whose variances w never change, a chain that started from
the prior was seen stuck at one state for all 2000 iterations (``pymc-dp fit`` of scikit-learn's
diabetes data in raw units). The law at φ alone gives s the exact law allows, so the chain
walks φ towards the data. Every ratio uses the exact law of s, so the CLT only shapes the
proposal.

* :func:`statistic_move`: an independence proposal of s at the current φ.
* :func:`independence_move`: u from a t fitted to the tuning states, s re-proposed.
* :func:`joint_move`: a random walk of φ's unconstrained vector u (:func:`pack_mixed`), with s
  drawn from the proposal at the new φ. If that proposal were s's exact conditional, the ratio
  would be the ratio of φ's marginal posteriors: a collapsed move, which is what carries the
  mixing where the release pins s loosely.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy import special

from pymc_dp.curator.regression.statistics import (
    d_from_released,
    released_pairs,
    unpack_statistic,
)
from pymc_dp.kernels.numeric import NormalInterval, log_normal_mass, log_sum_exp, normal_interval
from pymc_dp.regression.kernels.cell_model import (
    CUBE_FLOOR,
    CellLayout,
    CellParameters,
    cell_layout,
    cell_marginal_logpdf,
    cell_record_moments,
    cell_statistic_logpdf,
    release_cell_probs,
)
from pymc_dp.regression.kernels.collapsed import floored_cholesky
from pymc_dp.regression.kernels.conjugate import NIG
from pymc_dp.regression.kernels.data_model import NIW
from pymc_dp.regression.kernels.level_model import (
    LevelLayout,
    LevelParameters,
    level_layout,
    level_record_moments,
    level_statistic_logpdf,
    pair_layout,
)
from pymc_dp.regression.kernels.mixed_model import (
    MixedParameters,
    log_prob_prior,
    mixed_record_moments,
    mixed_statistic_logpdf,
    tied_positions,
)
from pymc_dp.regression.kernels.moment_move import t_draw, t_log_density
from pymc_dp.regression.kernels.psd import batched_cholesky

__all__ = [
    "DEFENSIVE_SHARE",
    "MixedState",
    "MixedTarget",
    "independence_move",
    "joint_move",
    "log_group_prior",
    "log_prior",
    "mixed_state",
    "moved_state",
    "n_cell_parameters",
    "n_level_parameters",
    "n_mixed_parameters",
    "pack_cells",
    "pack_levels",
    "pack_mixed",
    "select_state",
    "statistic_move",
    "unpack_cells",
    "unpack_levels",
    "unpack_mixed",
]


class MixedTarget(NamedTuple):
    """What the moves condition on, batch first (binary covariate first in every array)."""

    released: npt.NDArray[np.float64]
    """z, ``(..., m)``."""
    noise_variance: npt.NDArray[np.float64]
    """w, ``(..., m)``: the Gaussian noise's variances, or what the proposal of s takes for them
    (with :attr:`laplace_scale`)."""
    n: float
    prior: NIG
    """Of (θ, σ²)."""
    x_prior: NIW | None
    """Of (m_g, Σ) (module docstring of :mod:`~pymc_dp.regression.kernels.mixed_model`)."""
    cells: CellLayout | None = None
    """The cell model's layout (:mod:`~pymc_dp.regression.kernels.cell_model`: every covariate
    binary, no ``x_prior``), or ``None`` for the mixed model."""
    laplace_scale: npt.NDArray[np.float64] | None = None
    """Laplace noise's scale b, ``(..., 1)`` or ``(..., m)``: the target holds its density, and
    w only shapes the proposal. ``None``: the noise is ``N(0, diag w)``. With w redrawn given s
    each iteration instead (Algorithm 1), the chains mixed 1.5–4× slower: the smallest bulk ESS
    of (θ, σ²), 4 chains × (500 + 1000), n = 1000, ε = 1, went from 207–229 to 658–902 for the
    cell model at d = 5 and from 1169–1213 to 1761–2003 for the mixed model at d = 2 (two
    releases each)."""
    levels: LevelLayout | None = None
    """The level model's layout (:mod:`~pymc_dp.regression.kernels.level_model`: a factor of K
    levels, its columns first, beside normal covariates), or ``None``."""
    counts_law: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]] | None = None
    """The cube's law of its six counts in the proposal of s, mean ``(..., 6)`` and covariance
    ``(..., 6, 6)``, fitted to the chain's tuning states
    (:func:`~pymc_dp.regression.engine.mixed.mixed_sweep`), or ``None``: the readings'
    (:func:`_flat_counts_posterior`)."""


def noise_terms(
    spread: npt.ArrayLike, laplace: bool, shape: tuple[int, ...]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64] | None]:
    """:attr:`MixedTarget.noise_variance` and :attr:`MixedTarget.laplace_scale` of a batch.

    ``spread`` is each release's Laplace scale b (``laplace``) or Gaussian sd, ``(batch,)``;
    ``shape`` is z's. Laplace noise gives w = 2b² (its variance, which only shapes the
    proposal of s) and b; Gaussian noise gives w = sd² and ``None``.

    Examples
    --------
    >>> w, b = noise_terms([2.0], True, (1, 3))
    >>> w.tolist(), b.tolist()
    ([[8.0, 8.0, 8.0]], [[2.0]])
    >>> noise_terms([2.0], False, (1, 2))[1] is None
    True
    """
    spread = np.asarray(spread, dtype=np.float64)[:, None]
    noise = np.broadcast_to((2.0 if laplace else 1.0) * spread**2, shape).copy()
    return noise, (spread if laplace else None)


@functools.cache
def _lower(d2: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows, cols = np.tril_indices(d2)
    return rows, cols, np.arange(d2)


def n_mixed_parameters(d: int) -> int:
    """Length of u: θ (d + 1), log σ², logit π, m₀ and m₁ (d − 1 each), Σ's log-Cholesky.

    Examples
    --------
    >>> n_mixed_parameters(1), n_mixed_parameters(2)
    (4, 8)
    """
    d2 = d - 1
    return d + 3 + 2 * d2 + d2 * (d2 + 1) // 2


def pack_mixed(par: MixedParameters) -> npt.NDArray[np.float64]:
    """Unconstrained vector ``(θ, log σ², logit π, m₀, m₁, log-Cholesky of Σ)``.

    Examples
    --------
    >>> par = MixedParameters(np.array([0.0, 1.0, 0.5]), np.array(2.0), np.array(0.5),
    ...                       np.array([[0.0], [1.0]]), np.array([[4.0]]))
    >>> np.round(pack_mixed(par), 4).tolist()
    [0.0, 1.0, 0.5, 0.6931, 0.0, 0.0, 1.0, 0.6931]
    """
    theta = np.asarray(par.theta, dtype=np.float64)
    loc = np.asarray(par.group_loc, dtype=np.float64)
    return _joined([
        theta,
        np.log(par.sigma2)[..., None],
        special.logit(par.prob)[..., None],
        loc.reshape(*loc.shape[:-2], loc.shape[-2] * loc.shape[-1]),
        _log_cholesky(par.x_cov),
    ])  # fmt: skip


def unpack_mixed(u: npt.ArrayLike, d: int) -> tuple[MixedParameters, npt.NDArray[np.float64]]:
    """φ from :func:`pack_mixed`'s vector, and ``log |∂φ/∂u|`` ``(...)``.

    The Jacobian: σ² = e^v gives σ²; π = logistic(l) gives π(1 − π); Σ = L Lᵀ with free
    log L_ii gives 2^d₂ Π_i L_ii^(d₂ − i + 2).

    Examples
    --------
    >>> par = MixedParameters(np.array([0.0, 1.0, 0.5]), np.array(2.0), np.array(0.5),
    ...                       np.array([[0.0], [1.0]]), np.array([[4.0]]))
    >>> back, log_jac = unpack_mixed(pack_mixed(par), 2)
    >>> float(back.sigma2), float(back.prob), back.x_cov.tolist()
    (2.0, 0.5, [[4.0]])
    >>> bool(np.isclose(log_jac, np.log(2.0) + np.log(0.25) + np.log(2.0 * 4.0)))
    True
    """
    u = np.asarray(u, dtype=np.float64)
    p, d2 = d + 1, d - 1
    batch = u.shape[:-1]
    loc = u[..., p + 2 : p + 2 + 2 * d2].reshape(*batch, 2, d2)
    cov, log_jac_cov = _covariance(u[..., p + 2 + 2 * d2 :], d2)
    with np.errstate(over="ignore"):
        sigma2 = np.exp(u[..., p])
    prob = special.expit(u[..., p + 1])
    log_jac = (
        u[..., p]
        + special.log_expit(u[..., p + 1])
        + special.log_expit(-u[..., p + 1])
        + log_jac_cov
    )
    return MixedParameters(u[..., :p], sigma2, prob, loc, cov), log_jac


def _log_cholesky(cov: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Σ's free coordinates: its Cholesky factor's lower triangle, the diagonal as logs."""
    chol = np.linalg.cholesky(np.asarray(cov, dtype=np.float64))
    rows, cols, diag = _lower(chol.shape[-1])
    chol[..., diag, diag] = np.log(chol[..., diag, diag])
    return chol[..., rows, cols]


def _covariance(free: np.ndarray, d2: int) -> tuple[np.ndarray, np.ndarray]:
    """Σ = L Lᵀ from :func:`_log_cholesky`'s coordinates, and ``log |∂Σ/∂free|``.

    The Jacobian is 2^d₂ Π_i L_ii^(d₂ − i + 2).
    """
    rows, cols, diag = _lower(d2)
    chol = np.zeros((*free.shape[:-1], d2, d2))
    chol[..., rows, cols] = free
    log_diag = chol[..., diag, diag].copy()
    with np.errstate(over="ignore"):
        chol[..., diag, diag] = np.exp(log_diag)
    log_jac = d2 * np.log(2.0) + log_diag @ (d2 + 2.0 - np.arange(1, d2 + 1))
    return chol @ np.swapaxes(chol, -1, -2), log_jac


def _probabilities(ratios: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """π = softmax(0, l) from the C − 1 free log ratios, and ``log |∂π/∂l|`` = Σ_c log π_c."""
    logits = np.concatenate([np.zeros((*ratios.shape[:-1], 1)), ratios], axis=-1)
    log_probs = logits - log_sum_exp(logits, keepdims=True)
    return np.exp(log_probs), np.sum(log_probs, axis=-1)


def _log_ratios(probs: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """log(π_c / π₀) for c ≥ 1: :func:`_probabilities`' coordinates."""
    probs = np.asarray(probs, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.log(probs[..., 1:]) - np.log(probs[..., :1])


def _joined(pieces: list[np.ndarray]) -> npt.NDArray[np.float64]:
    """The pieces ``(..., k_i)`` broadcast over their batch and joined on the last axis."""
    batch = np.broadcast_shapes(*(a.shape[:-1] for a in pieces))
    return np.concatenate([np.broadcast_to(a, (*batch, a.shape[-1])) for a in pieces], axis=-1)


def _quad(vec: np.ndarray, mat: np.ndarray) -> np.ndarray:
    return np.einsum("...i,...ij,...j->...", vec, mat, vec)


def log_prior(
    par: MixedParameters | CellParameters | LevelParameters, target: MixedTarget
) -> npt.NDArray[np.float64]:
    """The log prior of φ up to a constant, ``(...)``.

    NIG(θ, σ²); for the mixed model π's prior, InverseWishart(Σ) and N(m_g; c, Σ/κ) for both
    groups; for the level model the same for every level, and the Dirichlet(1, …, 1) of π, a
    constant as in the cell model (its tilt cancels,
    :mod:`~pymc_dp.regression.kernels.cell_model`).
    """
    prior = target.prior
    p = par.theta.shape[-1]
    quad = _quad(par.theta - prior.mean, prior.precision)
    out = (
        -(0.5 * p + prior.shape + 1.0) * np.log(par.sigma2)
        - (0.5 * quad + prior.scale) / par.sigma2
    )
    if target.cells is not None:
        return out
    if target.levels is None:
        out = out + log_prob_prior(par.prob, target.n)
    if par.group_loc.shape[-1]:
        out = out + log_group_prior(par.group_loc, par.x_cov, target.x_prior)
    return out


def log_group_prior(
    group_loc: npt.ArrayLike, x_cov: npt.ArrayLike, x_prior: NIW
) -> npt.NDArray[np.float64]:
    """Log of InverseWishart(Σ) Π_g N(m_g; c, Σ/κ) up to a constant, ``(...)``.

    −∞ where Σ is not positive definite (never a raise: Σ = L Lᵀ from u can lose definiteness
    to rounding far out).
    """
    group_loc = np.asarray(group_loc, dtype=np.float64)
    d2 = group_loc.shape[-1]
    chol, definite = batched_cholesky(np.asarray(x_cov, dtype=np.float64))
    diag = np.arange(d2)
    logdet = 2.0 * np.sum(np.log(np.abs(chol[..., diag, diag])), axis=-1)
    inv = np.linalg.solve(np.swapaxes(chol, -1, -2), np.linalg.solve(chol, np.eye(d2)))
    diff = group_loc - np.asarray(x_prior.loc)[..., None, :]
    return np.where(
        definite,
        -0.5 * (x_prior.dof + d2 + 1.0 + group_loc.shape[-2]) * logdet
        - 0.5 * x_prior.kappa * np.sum(_quad(diff, inv[..., None, :, :]), axis=-1)
        - 0.5 * np.einsum("...ij,...ji->...", x_prior.scale, inv),
        -np.inf,
    )


def n_cell_parameters(layout: CellLayout) -> int:
    """Length of the cell model's u: θ (d + 1), log σ², log(π_c / π₀) for c ≥ 1.

    Examples
    --------
    >>> from pymc_dp.regression.kernels.cell_model import cell_layout
    >>> n_cell_parameters(cell_layout(2, "pair")), n_cell_parameters(cell_layout(3, "categories"))
    (7, 8)
    >>> n_cell_parameters(cell_layout(3, "cube"))  # π integrated out: θ and log σ² only
    5
    """
    if layout.hidden:
        return layout.d + 2
    return layout.d + 2 + len(layout.positions)


def pack_cells(par: CellParameters) -> npt.NDArray[np.float64]:
    """Unconstrained vector ``(θ, log σ², log(π_c / π₀) for c ≥ 1)``.

    ``(θ, log σ²)`` where ``par.probs`` is ``None`` (the cube, whose moves integrate π out).

    Examples
    --------
    >>> par = CellParameters(np.array([0.0, 1.0]), np.array(2.0), np.array([0.5, 0.5]))
    >>> np.round(pack_cells(par), 4).tolist()
    [0.0, 1.0, 0.6931, 0.0]
    """
    theta = np.asarray(par.theta, dtype=np.float64)
    if par.probs is None:
        return _joined([theta, np.log(par.sigma2)[..., None]])
    return _joined([theta, np.log(par.sigma2)[..., None], _log_ratios(par.probs)])


def unpack_cells(
    u: npt.ArrayLike, layout: CellLayout
) -> tuple[CellParameters, npt.NDArray[np.float64]]:
    """φ from :func:`pack_cells`'s vector, and ``log |∂φ/∂u|`` ``(...)``.

    The Jacobian: σ² = e^v gives σ²; π = softmax(0, l) (C − 1 free ratios) gives Π_c π_c.

    Examples
    --------
    >>> from pymc_dp.regression.kernels.cell_model import cell_layout
    >>> par = CellParameters(np.array([0.0, 1.0]), np.array(2.0), np.array([0.25, 0.75]))
    >>> back, log_jac = unpack_cells(pack_cells(par), cell_layout(1, "categories"))
    >>> float(back.sigma2), np.round(back.probs, 12).tolist()
    (2.0, [0.25, 0.75])
    >>> bool(np.isclose(log_jac, np.log(2.0) + np.log(0.25 * 0.75)))
    True
    """
    u = np.asarray(u, dtype=np.float64)
    p = layout.d + 1
    with np.errstate(over="ignore"):
        sigma2 = np.exp(u[..., p])
    if layout.hidden:  # the cube: π integrated out (None)
        return CellParameters(u[..., :p], sigma2, None), u[..., p]
    probs, log_jac_probs = _probabilities(u[..., p + 1 :])
    return CellParameters(u[..., :p], sigma2, probs), u[..., p] + log_jac_probs


def n_level_parameters(layout: LevelLayout) -> int:
    """Length of the level model's u.

    θ (d + 1), log σ², C − 1 log ratios of π, the r mean rows (d₂ each: the K level means of
    a factor, the three free corners' of a pair) and Σ's log-Cholesky coordinates.

    Examples
    --------
    >>> from pymc_dp.regression.kernels.level_model import level_layout
    >>> n_level_parameters(level_layout(3, 3))  # 4 + 1 + 2 + 3 + 1
    11
    """
    d2 = layout.d - layout.columns
    return layout.d + 1 + layout.levels + layout.means * d2 + d2 * (d2 + 1) // 2


def pack_levels(par: LevelParameters) -> npt.NDArray[np.float64]:
    """Unconstrained vector ``(θ, log σ², log(π_c / π₀) for c ≥ 1, m_g, log-Cholesky of Σ)``.

    Examples
    --------
    >>> par = LevelParameters(np.zeros(3), np.array(1.0), np.array([0.25, 0.75]),
    ...                       np.array([[0.0], [1.0]]), np.array([[4.0]]))
    >>> np.round(pack_levels(par), 4).tolist()
    [0.0, 0.0, 0.0, 0.0, 1.0986, 0.0, 1.0, 0.6931]
    """
    loc = np.asarray(par.group_loc, dtype=np.float64)
    return _joined([
        np.asarray(par.theta, dtype=np.float64),
        np.log(par.sigma2)[..., None],
        _log_ratios(par.probs),
        loc.reshape(*loc.shape[:-2], loc.shape[-2] * loc.shape[-1]),
        _log_cholesky(par.x_cov),
    ])  # fmt: skip


def unpack_levels(
    u: npt.ArrayLike, layout: LevelLayout
) -> tuple[LevelParameters, npt.NDArray[np.float64]]:
    """φ from :func:`pack_levels`'s vector, and ``log |∂φ/∂u|`` ``(...)``.

    Examples
    --------
    >>> from pymc_dp.regression.kernels.level_model import level_layout
    >>> par = LevelParameters(np.zeros(3), np.array(1.0), np.array([0.25, 0.75]),
    ...                       np.array([[0.0], [1.0]]), np.array([[4.0]]))
    >>> back, log_jac = unpack_levels(pack_levels(par), level_layout(2, 2))
    >>> np.round(back.probs, 12).tolist(), back.x_cov.tolist()
    ([0.25, 0.75], [[4.0]])
    >>> bool(np.isclose(log_jac, np.log(1.0) + np.log(0.25 * 0.75) + np.log(2.0 * 4.0)))
    True
    """
    u = np.asarray(u, dtype=np.float64)
    p, levels, rows = layout.d + 1, layout.levels, layout.means
    d2 = layout.d - layout.columns
    start = p + levels  # after θ, log σ² and the C − 1 ratios
    probs, log_jac_probs = _probabilities(u[..., p + 1 : start])
    loc = u[..., start : start + rows * d2].reshape(*u.shape[:-1], rows, d2)
    cov, log_jac_cov = _covariance(u[..., start + rows * d2 :], d2)
    with np.errstate(over="ignore"):
        sigma2 = np.exp(u[..., p])
    log_jac = u[..., p] + log_jac_probs + log_jac_cov
    return LevelParameters(u[..., :p], sigma2, probs, loc, cov), log_jac


DEFENSIVE_SHARE = 0.1
"""Share of proposals of s from its CLT law at φ without the readings (module docstring)."""
READINGS_SHARE = 0.3
"""Share of the cube's proposals whose counts come from the readings' normal once their law is
fitted (:attr:`MixedTarget.counts_law`): a Gaussian fitted to a chain's tuning states has lighter
tails than the counts' law, and with the fitted law alone a chain of one release in 20 (n = 100,
ε = 1) sat in such a tail, 2 % of its moves accepted."""


def _shares(members: int) -> np.ndarray:
    """Each member's share of the proposal (:class:`_Proposal`)."""
    if members == 2:
        return np.array([1.0 - DEFENSIVE_SHARE, DEFENSIVE_SHARE])
    return np.array([1.0 - DEFENSIVE_SHARE - READINGS_SHARE, DEFENSIVE_SHARE, READINGS_SHARE])


class _Proposal(NamedTuple):
    """The normal proposal of s at one φ (module docstring), reduced to the free coordinates.

    The integer coordinates k (``J`` of them) come first, one at a time from their normal
    conditionals, each rounded; then the others given k. Every field has a leading axis of 2:
    the normal with the readings, and the law alone; for the cube once its counts' law is fitted
    (:attr:`MixedTarget.counts_law`) a third, that law first and the readings' normal last.
    """

    k_mean: np.ndarray
    """``(..., J)``."""
    k_chol: np.ndarray
    """Cholesky factor of k's covariance, ``(..., J, J)``."""
    rest_mean: np.ndarray | None = None
    """Mean of the other free coordinates at k's mean, ``(..., R)``."""
    rest_slope: np.ndarray | None = None
    """Their change per unit of k, ``(..., R, J)``."""
    rest_chol: np.ndarray | None = None
    """Cholesky factor of their conditional covariance, ``(..., R, R)``."""
    exact: tuple[np.ndarray, np.ndarray] | None = None
    """The cube's (θ, σ²), no leading axis of 2: its other coordinates given k come from their
    exact moments at k's Gram matrix (:func:`_exact_responses`), and the three fields above
    are ``None``."""


class _Free(NamedTuple):
    """The statistic's free coordinates under a model of x."""

    k: np.ndarray
    """Released positions of the integer coordinates."""
    readers: tuple[np.ndarray, ...]
    """Per integer coordinate, the released positions that read it."""
    rest: np.ndarray
    """Positions of the continuous coordinates."""
    cells: str | None
    """The cell layout's kind, or ``None`` for the mixed model (k ∈ [1, n − 1])."""


@functools.cache
def _mixed_free(d: int) -> _Free:
    pos_k, pos_kk = tied_positions(d)
    m = (d + 2) * (d + 3) // 2 - 1
    rest = np.array([j for j in range(m) if j not in (pos_k, pos_kk)])
    return _Free(np.array([pos_k]), (np.array([pos_k, pos_kk]),), rest, None)


@functools.cache
def _cell_free(d: int, kind: str) -> _Free:
    layout = cell_layout(d, kind)
    return _Free(layout.positions, layout.readers, layout.response_positions, layout.kind)


@functools.cache
def _level_free(d: int, levels: int, kind: str) -> _Free:
    if kind == "pair":  # the three counts have the cell model's pair's bounds
        layout = pair_layout(d)
        return _Free(layout.counts, layout.readers, layout.rest, "pair")
    layout = level_layout(d, levels)
    return _Free(layout.counts, layout.readers, layout.rest, "levels")


def _free(target: MixedTarget) -> _Free:
    if target.levels is not None:
        layout = target.levels
        return _level_free(layout.d, layout.levels, layout.kind)
    if target.cells is None:
        return _mixed_free(d_from_released(target.released.shape[-1]))
    return _cell_free(target.cells.d, target.cells.kind)


def _bounds(free: _Free, j: int, k: np.ndarray, n: float) -> tuple[np.ndarray, np.ndarray]:
    """The whole numbers k_j can take given k₀ … k_{j−1} (``k[..., :j]``)."""
    shape = k.shape[:-1]
    if free.cells is None:
        return np.full(shape, 1.0), np.full(shape, n - 1.0)
    if free.cells == "categories":
        return np.zeros(shape), n - np.sum(k[..., :j], axis=-1)
    if free.cells == "levels":  # every level, the reference and the later ones, keeps a record
        later = free.k.size - j
        return np.full(shape, 1.0), n - np.sum(k[..., :j], axis=-1) - later
    if free.cells == "cube":
        return _cube_bounds(j, k, n)
    if j < 2:  # the pair: Σx₁, Σx₂, then Σx₁x₂ between the two cells' bounds
        return np.zeros(shape), np.full(shape, n)
    return np.maximum(0.0, k[..., 0] + k[..., 1] - n), np.minimum(k[..., 0], k[..., 1])


def _cube_bounds(j: int, k: np.ndarray, n: float) -> tuple[np.ndarray, np.ndarray]:
    """The whole values of the cube's k_j that leave a non-empty fiber, given k₀ … k_{j−1}.

    k = (Σx₁, Σx₂, Σx₃, Σx₁x₂, Σx₁x₃, Σx₂x₃); a fiber is non-empty when some triple count t
    leaves every cell count ≥ 0.

    The sums are free in [0, n] and each of Σx₁x₂, Σx₁x₃ has its two-way table's bounds. Given
    those, t must lie in [t₋, t₊] = [max(0, c₁₂ + c₁₃ − c₁), min(c₁₂, c₁₃)] (cells 100, 110, 101,
    111), and c₂₃ − t in [max(0, −R), M] where R = n − c₁ − c₂ − c₃ + c₁₂ + c₁₃ (cell 000) and
    M = min(c₂ − c₁₂, c₃ − c₁₃) (cells 010, 001): so c₂₃ ∈ [t₋ + max(0, −R), t₊ + M], an
    interval that is never empty under the earlier bounds (R + M and M are two-way cells).
    """
    shape = k.shape[:-1]
    if j < 3:
        return np.zeros(shape), np.full(shape, n)
    if j < 5:
        a, b = k[..., 0], k[..., j - 2]
        return np.maximum(0.0, a + b - n), np.minimum(a, b)
    c1, c2, c3, c12, c13 = (k[..., i] for i in range(5))
    least = np.maximum(0.0, c12 + c13 - c1)
    most = np.minimum(c12, c13)
    rest = n - c1 - c2 - c3 + c12 + c13
    return least + np.maximum(0.0, -rest), most + np.minimum(c2 - c12, c3 - c13)


def _proposal(
    par: MixedParameters | CellParameters | LevelParameters, target: MixedTarget
) -> _Proposal:
    free = _free(target)
    keep = np.concatenate([free.k, free.rest])
    if target.levels is not None:
        mean, cov = level_record_moments(par, target.levels)
    elif target.cells is None:
        mean, cov = mixed_record_moments(par)
    else:
        mean, cov = cell_record_moments(par, target.cells)
    n = target.n
    clt_mean = n * mean[..., keep]
    clt_cov = n * cov[..., keep[:, None], keep[None, :]]
    w, z = target.noise_variance, target.released
    # Every reading of an integer coordinate: precisions add.
    prec_k = np.stack([np.sum(1.0 / w[..., r], axis=-1) for r in free.readers], axis=-1)
    z_k = np.stack([np.sum(z[..., r] / w[..., r], axis=-1) for r in free.readers], axis=-1)
    w_r = np.concatenate([1.0 / prec_k, w[..., free.rest]], axis=-1)
    z_r = np.concatenate([z_k / prec_k, z[..., free.rest]], axis=-1)
    if target.cells is not None and target.cells.hidden:
        post_mean, post_cov = _flat_counts_posterior(clt_mean, clt_cov, z_r, w_r, free.k.size)
    else:
        # N(clt) × N(z_r; r, diag w_r) = N(r; a + G (z − a), S − G S), G = S (S + diag w)⁻¹.
        total = clt_cov + w_r[..., :, None] * np.eye(w_r.shape[-1])
        chol = floored_cholesky(total)
        half = np.linalg.solve(chol, clt_cov)
        gain = np.swapaxes(half, -1, -2)
        post_mean = clt_mean + (gain @ np.linalg.solve(chol, (z_r - clt_mean)[..., None]))[..., 0]
        post_cov = clt_cov - gain @ half
    post_cov = 0.5 * (post_cov + np.swapaxes(post_cov, -1, -2))
    if target.counts_law is None:
        mean, cov = np.stack([post_mean, clt_mean]), np.stack([post_cov, clt_cov])
    else:  # the cube once tuned: the fitted law, the law alone, the readings' normal
        fitted_mean, fitted_cov = _fitted_counts(post_mean, post_cov, target.counts_law)
        mean = np.stack([fitted_mean, clt_mean, post_mean])
        cov = np.stack([fitted_cov, clt_cov, post_cov])
    j = free.k.size
    # k's variance vanishes as π nears 0 or 1 and is not finite far out: floor it, and give
    # a non-finite one unit variance (any proposal that is a function of φ keeps the move exact).
    cov_kk = cov[..., :j, :j] + 1e-12 * np.eye(j)
    cov_kk = np.where(
        np.all(np.isfinite(cov_kk), axis=(-2, -1))[..., None, None], cov_kk, np.eye(j)
    )
    if target.cells is not None and target.cells.hidden:  # the rest from _exact_responses
        return _Proposal(mean[..., :j], floored_cholesky(cov_kk), exact=(par.theta, par.sigma2))
    if j == 1:  # the mixed model: a division and a square root, no factorisation
        k_chol = np.sqrt(cov_kk)
        slope = np.swapaxes(cov[..., :1, 1:] / cov_kk, -1, -2)
    else:
        k_chol = floored_cholesky(cov_kk)
        slope = np.swapaxes(np.linalg.solve(cov_kk, cov[..., :j, j:]), -1, -2)
    cond = cov[..., j:, j:] - slope @ cov[..., :j, j:]
    return _Proposal(
        mean[..., :j],
        k_chol,
        mean[..., j:],
        slope,
        floored_cholesky(0.5 * (cond + np.swapaxes(cond, -1, -2))),
    )


def _truncated_normal(rng: np.random.Generator, interval: NormalInterval) -> np.ndarray:
    """Standard normal draws restricted to an interval, by inversion.

    The interval is :func:`~pymc_dp.kernels.numeric.normal_interval`'s, mirrored below 0.
    In log space: F = (1 − U)Φ(a) + UΦ(b) is formed as a log-sum, so neither tail underflows.
    """
    flip, a, b, log_a, log_b = interval
    u = rng.uniform(size=a.shape)
    with np.errstate(divide="ignore"):
        log_f = np.logaddexp(np.log1p(-u) + log_a, np.log(u) + log_b)
    x = np.clip(special.ndtri_exp(np.minimum(log_f, 0.0)), a, b)
    return np.where(flip, -x, x)


def _integer_steps(
    prop: _Proposal, free: _Free, n: float, rng: np.random.Generator | None, k: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """The integer coordinates, drawn (``rng``) or given (``k``), and their log q.

    k_j given the earlier ones is normal (k's mean and Cholesky factor), restricted to the
    unit intervals around the whole numbers it can take (:func:`_bounds`) and rounded: the
    mass of k_j's interval over that of its range.
    """
    shape = prop.k_mean.shape
    out = np.zeros(shape) if k is None else k
    white = np.zeros(shape)
    log_q = np.zeros(shape[:-1])
    for j in range(shape[-1]):
        sd = prop.k_chol[..., j, j]
        centre = prop.k_mean[..., j] + np.sum(prop.k_chol[..., j, :j] * white[..., :j], axis=-1)
        lo, hi = _bounds(free, j, out, n)
        # k_j's range, mirrored once for the draw and for its mass (one log Φ per end).
        whole = normal_interval((lo - 0.5 - centre) / sd, (hi + 0.5 - centre) / sd)
        if k is None:
            x = centre + sd * _truncated_normal(rng, whole)
            out[..., j] = np.clip(np.round(x), lo, np.maximum(lo, hi))
        kj = out[..., j]
        # k_j's own unit interval, then its mass over the range's.
        own = normal_interval((kj - 0.5 - centre) / sd, (kj + 0.5 - centre) / sd)
        log_q = log_q + log_normal_mass(own) - log_normal_mass(whole)
        white[..., j] = (kj - centre) / sd
    return out, log_q


def _flat_counts_posterior(
    clt_mean: np.ndarray, clt_cov: np.ndarray, z_r: np.ndarray, w_r: np.ndarray, j: int
) -> tuple[np.ndarray, np.ndarray]:
    """The normal with the readings where the first ``j`` coordinates (the counts) are flat.

    For the cube, whose moves integrate π out: the counts' law is then nearly flat (the size of
    their fiber, :func:`~pymc_dp.regression.kernels.cell_model.cell_marginal_logpdf`), so the
    proposal keeps the CLT's law of the other coordinates given the counts and drops its law of
    the counts (their marginal precision, ``Λ_kk − Λ_kr Λ_rr⁻¹ Λ_rk``), leaving the readings to
    place them. With the CLT's own law of the counts at a fixed π the move of s was accepted at
    10 % and θ's bulk ESS was 4–7 of 2000 draws.
    """
    size = clt_cov.shape[-1]
    prec = np.linalg.inv(clt_cov + 1e-9 * np.eye(size))
    rest = prec[..., j:, j:]
    tie = prec[..., :j, j:]
    prec = prec.copy()
    prec[..., :j, :j] = tie @ np.linalg.solve(rest, np.swapaxes(tie, -1, -2))
    post_prec = prec + (1.0 / w_r)[..., :, None] * np.eye(size)
    post_cov = np.linalg.inv(post_prec)
    info = (prec @ clt_mean[..., None])[..., 0] + z_r / w_r
    return (post_cov @ info[..., None])[..., 0], post_cov


def _exact_responses(
    k: np.ndarray, prop: _Proposal, target: MixedTarget
) -> tuple[np.ndarray, np.ndarray]:
    """The cube's other coordinates given its counts: mean and Cholesky factor, leading axis 2.

    Given the counts the covariates are known, so A is, and ``b = X̃ᵀy ~ N(Aθ, σ²A)`` with
    ``Cov(b, yᵀy) = 2σ²Aθ``, ``E yᵀy = θᵀAθ + nσ²``, ``Var yᵀy = 4σ²θᵀAθ + 2nσ⁴``: that normal
    times the readings (first), and alone. The joint normal at one π (the other cell layouts')
    has yᵀy's mean linear in k where it is quadratic, and its variance fixed where it is A's: over
    the spread of counts the cube's integrated π leaves, the moves' log weights had an sd of 12
    (n = 100, ε = 1; 0.6 for the pair, whose π is in the state) and 5 % of them were accepted.
    """
    theta, sigma2 = prop.exact
    free = _free(target)
    n = target.n
    p = theta.shape[-1]
    s = np.zeros((*k.shape[:-1], target.released.shape[-1]))
    for j, readers in enumerate(free.readers):
        s[..., readers] = k[..., j, None]
    gram = unpack_statistic(s, n)[..., :p, :p]
    sigma2 = sigma2[..., None]
    mean_b = (gram @ theta[..., None])[..., 0]
    fit = np.sum(theta * mean_b, axis=-1, keepdims=True)
    mean = np.concatenate([mean_b, fit + n * sigma2], axis=-1)
    tie = 2.0 * sigma2 * mean_b
    cov = np.concatenate(
        [
            np.concatenate([sigma2[..., None] * gram, tie[..., :, None]], axis=-1),
            np.concatenate([tie, 4.0 * sigma2 * fit + 2.0 * n * sigma2**2], axis=-1)[..., None, :],
        ],
        axis=-2,
    )
    rows = released_pairs(p - 1)[0][free.rest]  # b's entries, then yᵀy (row p)
    mean, cov = mean[..., rows], cov[..., rows[:, None], rows[None, :]]
    w, z = target.noise_variance[..., free.rest], target.released[..., free.rest]
    chol = floored_cholesky(cov + w[..., :, None] * np.eye(rows.size))
    half = np.linalg.solve(chol, cov)
    post_mean = (
        mean + (np.swapaxes(half, -1, -2) @ np.linalg.solve(chol, (z - mean)[..., None]))[..., 0]
    )
    post_cov = cov - np.swapaxes(half, -1, -2) @ half
    return (
        np.stack([post_mean, mean]),
        np.stack([floored_cholesky(0.5 * (post_cov + np.swapaxes(post_cov, -1, -2))),
                  floored_cholesky(cov)]),
    )  # fmt: skip


COUNTS_INFLATE = 1.2**2
"""The cube's fitted law of the counts in the proposal: its covariance over the tuning states'."""


def _fitted_counts(
    mean: np.ndarray, cov: np.ndarray, law: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """The cube's proposal with the counts' law fitted to the tuning states (the others unused).

    Integrated over π the counts' law is |fiber(k)| times the readings' Laplace densities within
    the cube's bounds; the readings' normal alone (:func:`_flat_counts_posterior`) left log
    weights with an sd of 3 at n = 100, ε = 1 (8 % of the moves accepted; 18 % with the counts'
    posterior mean and covariance, θ's bulk ESS of 2000 draws from 180 to 1380).
    """
    j = law[0].shape[-1]
    mean = np.array(np.broadcast_arrays(mean, law[0][..., :1])[0])
    cov = np.broadcast_to(cov, (*mean.shape, mean.shape[-1])).copy()
    mean[..., :j] = law[0]
    cov[..., :j, :] = 0.0
    cov[..., :, :j] = 0.0
    cov[..., :j, :j] = COUNTS_INFLATE * law[1] + 0.25 * np.eye(j)  # sd ≥ half a record
    return mean, cov


def _pick(prop: _Proposal, member: np.ndarray) -> _Proposal:
    """Each batch member's member of the proposal."""

    def take(a: np.ndarray) -> np.ndarray:
        at = member.reshape(member.shape + (1,) * (a.ndim - 1 - member.ndim))
        out = a[0]
        for i in range(1, a.shape[0]):
            out = np.where(at == i, a[i], out)
        return out

    return _Proposal(*(None if a is None else take(a) for a in prop[:5]), prop.exact)


def _draw(rng: np.random.Generator, prop: _Proposal, target: MixedTarget) -> np.ndarray:
    free = _free(target)
    u = rng.uniform(size=prop.k_mean.shape[1:-1])
    alone = u < DEFENSIVE_SHARE
    member = alone.astype(np.intp)
    if prop.k_mean.shape[0] == 3:  # the cube once tuned (_shares)
        member = np.where(u >= 1.0 - READINGS_SHARE, 2, member)
    part = _pick(prop, member)
    k, _ = _integer_steps(part, free, target.n, rng, None)
    noise = rng.standard_normal((*k.shape[:-1], free.rest.size, 1))
    if prop.exact is None:
        rest_mean = part.rest_mean + (part.rest_slope @ (k - part.k_mean)[..., None])[..., 0]
        rest_chol = part.rest_chol
    else:
        means, chols = _exact_responses(k, prop, target)
        rest_mean = np.where(alone[..., None], means[1], means[0])
        rest_chol = np.where(alone[..., None, None], chols[1], chols[0])
    other = rest_mean + (rest_chol @ noise)[..., 0]
    s = np.zeros((*k.shape[:-1], target.released.shape[-1]))
    for j, readers in enumerate(free.readers):
        s[..., readers] = k[..., j, None]
    s[..., free.rest] = other
    return s


def _log_q(s: np.ndarray, prop: _Proposal, target: MixedTarget) -> np.ndarray:
    free = _free(target)
    k = np.broadcast_to(s[..., free.k], prop.k_mean.shape).copy()
    _, log_k = _integer_steps(prop, free, target.n, None, k)
    if prop.exact is None:
        rest_mean = prop.rest_mean + (prop.rest_slope @ (k - prop.k_mean)[..., None])[..., 0]
        rest_chol = prop.rest_chol
    else:
        rest_mean, rest_chol = _exact_responses(s[..., free.k], prop, target)
        members = [0, 1, 0][: prop.k_mean.shape[0]]  # the readings' members take the first
        rest_mean, rest_chol = rest_mean[members], rest_chol[members]
    white = np.linalg.solve(rest_chol, (s[..., free.rest] - rest_mean)[..., None])[..., 0]
    diag = np.arange(free.rest.size)
    log_det = np.sum(np.log(rest_chol[..., diag, diag]), axis=-1)
    log_c = log_k - 0.5 * np.sum(white**2, axis=-1) - log_det
    shares = _shares(log_c.shape[0])
    log_c = log_c + np.log(shares).reshape(shares.size, *(1,) * (log_c.ndim - 1))
    total = np.logaddexp(log_c[0], log_c[1]) if shares.size == 2 else log_sum_exp(log_c, axis=0)
    return total - 0.5 * free.rest.size * np.log(2 * np.pi)


class MixedState(NamedTuple):
    """A chain's state and what the moves reuse at it."""

    params: npt.NDArray[np.float64]
    """u, ``(..., k)``."""
    suffstat: npt.NDArray[np.float64]
    """s, ``(..., m)``."""
    log_target: npt.NDArray[np.float64]
    """``log p(φ) + log |∂φ/∂u| + log p(s | φ) + log N(z; s, w)``, ``(...)``."""
    log_q: npt.NDArray[np.float64]
    """log density of s under the proposal at φ, ``(...)``."""


def _unpacked(
    u: np.ndarray, target: MixedTarget
) -> tuple[MixedParameters | CellParameters, np.ndarray]:
    """φ and the log Jacobian of u ↦ φ at u."""
    if target.levels is not None:
        return unpack_levels(u, target.levels)
    if target.cells is None:
        return unpack_mixed(u, d_from_released(target.released.shape[-1]))
    par, log_jac = unpack_cells(u, target.cells)
    if target.cells.hidden:  # π integrated out: the proposal of s takes the release's
        par = par._replace(
            probs=release_cell_probs(target.released, target.n, target.cells, floor=CUBE_FLOOR)
        )
    return par, log_jac


def _log_target(
    par: MixedParameters | CellParameters | LevelParameters,
    log_jac: np.ndarray,
    s: np.ndarray,
    target: MixedTarget,
) -> np.ndarray:
    """The log target at (φ, s) (−∞ where undefined)."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        if target.laplace_scale is None:
            noise = -0.5 * np.sum((target.released - s) ** 2 / target.noise_variance, axis=-1)
        else:
            noise = -np.sum(np.abs(target.released - s) / target.laplace_scale, axis=-1)
        if target.levels is not None:
            law = level_statistic_logpdf(s, par, target.n, target.levels)
        elif target.cells is None:
            law = mixed_statistic_logpdf(s, par, target.n)
        elif target.cells.hidden:
            law = cell_marginal_logpdf(s, par, target.n, target.cells)
        else:
            law = cell_statistic_logpdf(s, par, target.n, target.cells)
        log_t = log_prior(par, target) + log_jac + law + noise
    return np.where(np.isfinite(log_t), log_t, -np.inf)


def mixed_state(u: npt.ArrayLike, s: npt.ArrayLike, target: MixedTarget) -> MixedState:
    """The state at (u, s) under ``target`` (after w or φ changed outside the moves)."""
    u = np.asarray(u, dtype=np.float64)
    s = np.asarray(s, dtype=np.float64)
    par, log_jac = _unpacked(u, target)
    return MixedState(u, s, _log_target(par, log_jac, s, target),
                      _log_q(s, _proposal(par, target), target))  # fmt: skip


def _accept(rng, new: MixedState, old: MixedState, log_ratio: np.ndarray):
    with np.errstate(invalid="ignore"):
        ok = np.log(rng.uniform(size=log_ratio.shape)) < log_ratio
    ok &= np.isfinite(log_ratio)
    return select_state(ok, new, old), ok


def select_state(mask: npt.ArrayLike, new: MixedState, old: MixedState) -> MixedState:
    """``new`` where ``mask`` holds, else ``old`` (batched)."""
    mask = np.asarray(mask, dtype=bool)
    pick = mask[..., None]
    return MixedState(
        np.where(pick, new.params, old.params),
        np.where(pick, new.suffstat, old.suffstat),
        np.where(mask, new.log_target, old.log_target),
        np.where(mask, new.log_q, old.log_q),
    )


def _move_statistic(rng, state, target, par, log_jac, prop):
    """:func:`statistic_move` given φ, its log Jacobian and the proposal at state's u."""
    s_new = _draw(rng, prop, target)
    new = MixedState(state.params, s_new, _log_target(par, log_jac, s_new, target),
                     _log_q(s_new, prop, target))  # fmt: skip
    ratio = new.log_target - state.log_target + state.log_q - new.log_q
    return _accept(rng, new, state, ratio)


def statistic_move(
    rng: np.random.Generator, state: MixedState, target: MixedTarget
) -> tuple[MixedState, npt.NDArray[np.bool_]]:
    """A new s from the normal proposal at the current φ (independence Metropolis–Hastings)."""
    par, log_jac = _unpacked(state.params, target)
    return _move_statistic(rng, state, target, par, log_jac, _proposal(par, target))


def moved_state(
    rng: np.random.Generator, u: npt.ArrayLike, s: npt.ArrayLike, target: MixedTarget
) -> tuple[MixedState, npt.NDArray[np.bool_]]:
    """:func:`mixed_state` at (u, s) followed by :func:`statistic_move`, φ's proposal built once."""
    u = np.asarray(u, dtype=np.float64)
    s = np.asarray(s, dtype=np.float64)
    par, log_jac = _unpacked(u, target)
    prop = _proposal(par, target)
    state = MixedState(u, s, _log_target(par, log_jac, s, target), _log_q(s, prop, target))
    return _move_statistic(rng, state, target, par, log_jac, prop)


def joint_move(
    rng: np.random.Generator, state: MixedState, target: MixedTarget, factor: np.ndarray
) -> tuple[MixedState, npt.NDArray[np.bool_]]:
    """Move to u + L ξ (``factor`` L ``(..., k, k)``) with s from the proposal at the new φ.

    ``state.log_q`` must be the proposal's density of the current s at the current φ
    (:func:`mixed_state` after anything but these moves changed the state).
    """
    u = state.params
    u_new = u + (factor @ rng.standard_normal((*u.shape, 1)))[..., 0]
    par, log_jac = _unpacked(u_new, target)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        prop = _proposal(par, target)
        s_new = _draw(rng, prop, target)
        log_t = _log_target(par, log_jac, s_new, target)
        new = MixedState(u_new, s_new, log_t, _log_q(s_new, prop, target))
    ratio = new.log_target - state.log_target + state.log_q - new.log_q
    return _accept(rng, new, state, ratio)


def independence_move(
    rng: np.random.Generator,
    state: MixedState,
    target: MixedTarget,
    centre: np.ndarray,
    chol: np.ndarray,
    tries: int = 1,
) -> tuple[MixedState, npt.NDArray[np.bool_]]:
    """Move to one of ``tries`` candidates u from a multivariate t, each with s re-proposed.

    The t (location ``centre``, scale L Lᵀ, 5 degrees of freedom:
    :func:`~pymc_dp.regression.kernels.moment_move.t_draw`) is fitted to the tuning states;
    each candidate's s comes from the normal proposal at its φ. This is the multiple-try
    Metropolis of Liu, Liang & Wong (2000) for independence proposals: with weights
    ω = π(u, s) / (t(u) q(s | u)), a candidate is picked with probability ∝ ω and accepted
    with probability min(1, Σ_candidates ω / (Σ_others ω + ω_current)). All candidates are
    evaluated in one batched pass.
    """
    u_new = t_draw(rng, centre, chol, tries)
    par, log_jac = _unpacked(u_new, target)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        prop = _proposal(par, target)
        s_new = _draw(rng, prop, target)
        log_t = _log_target(par, log_jac, s_new, target)
        log_q = _log_q(s_new, prop, target)
        log_w = log_t - log_q - t_log_density(u_new, centre, chol)
        log_w = np.where(np.isfinite(log_w), log_w, -np.inf)
        log_w_now = state.log_target - state.log_q - t_log_density(state.params, centre, chol)
        total = log_sum_exp(log_w, axis=0)
        gumbel = log_w - np.log(-np.log(rng.uniform(size=log_w.shape)))
        pick = np.argmax(gumbel, axis=0)
        chosen = np.take_along_axis(log_w, pick[None], axis=0)[0]
        others = np.logaddexp(np.log(-np.expm1(chosen - total)) + total, log_w_now)
        ratio = total - others
    new = MixedState(
        np.take_along_axis(u_new, pick[None, ..., None], axis=0)[0],
        np.take_along_axis(s_new, pick[None, ..., None], axis=0)[0],
        np.take_along_axis(log_t, pick[None], axis=0)[0],
        np.take_along_axis(log_q, pick[None], axis=0)[0],
    )
    return _accept(rng, new, state, np.where(np.isfinite(total), ratio, -np.inf))
