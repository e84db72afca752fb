"""A collapsed move that proposes the parameters through the moments of one record.

For one node the parameters φ = (θ, σ², μ_x, Σ_x) and the mean η = E t(x, y) of one record's
statistic determine each other: η lists the entries of P = E[w wᵀ], w = (1, x, y), and

    μ_x = P_0x,  Σ_x = P_xx − μ_x μ_xᵀ,  θ = P_x̃x̃⁻¹ P_x̃y,  σ² = P_yy − P_x̃yᵀ θ

(with x̃ = (1, x)), valid exactly when P is positive definite; both have (d + 2)(d + 3)/2 − 1
entries. In η the CLT marginal of the release is a normal likelihood, N(z; nη, S) with
S = nΣ_t + diag w, whose covariance changes only slowly with φ. So a normal proposal that
combines it with a normal approximation N(g, Q_g⁻¹) of the prior of η,

    η' ~ N(m, Q⁻¹),   Q = Q_g + n² S⁻¹,   m = Q⁻¹ (Q_g g + n S⁻¹ z),

with S evaluated at the current φ, is close to φ | z, w wherever the release is informative. The
move (:func:`moment_move`) draws η', maps it to φ', and applies the same two-stage ratio as
:func:`~pymc_dp.regression.collapsed.collapsed_move`, with the proposal densities (forward at the
current S, reverse at the proposed one) and the Jacobian of η ↦ u in the first stage. The
Jacobian of η ↦ φ is 1 / det Σ_x (the map is triangular: μ_x and Σ_x from the moments of x,
θ linear in P_x̃y with matrix P_x̃x̃⁻¹, σ² from P_yy with slope 1).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy.special import gammaln, log_ndtr, ndtr, ndtri

from pymc_dp.regression.collapsed import (
    CollapsedTarget,
    Evaluation,
    MoveState,
    Parameters,
    evaluate,
    pack_parameters,
    parameter_log_jacobian,
    propose_statistic,
    replace_where,
    statistic_correction,
    unpack_parameters,
)
from pymc_dp.regression.conjugate import NIG, draw_nig
from pymc_dp.regression.data_model import NIW, draw_niw
from pymc_dp.regression.normal_model import record_moments
from pymc_dp.regression.statistics import unpack_statistic

__all__ = [
    "MomentPrior",
    "MomentProposal",
    "moment_move",
    "moment_prior",
    "moment_proposal",
    "parameters_from_moments",
]


class MomentPrior(NamedTuple):
    """Normal approximation N(mean, precision⁻¹) of the prior of η, batch first."""

    mean: npt.NDArray[np.float64]
    precision: npt.NDArray[np.float64]


def moment_prior(
    rng: np.random.Generator, prior: NIG, x_prior: NIW, *, draws: int = 2000
) -> MomentPrior:
    """Fit :class:`MomentPrior` to prior draws of η, leaving out each coordinate's outer 2 %.

    The NIG and NIW priors can have heavy tails, in which the sample covariance of η is
    dominated by a few draws; the trimmed moments describe the bulk, which is what a proposal
    needs. ``x_prior`` has no node axis here (one node).

    Examples
    --------
    >>> fit = moment_prior(np.random.default_rng(0),
    ...     NIG(np.zeros(2), np.eye(2), np.array(5.0), np.array(4.0)),
    ...     NIW(np.zeros(1), np.array(1.0), np.array(5.0), np.eye(1)))
    >>> fit.mean.shape, fit.precision.shape
    ((5,), (5, 5))
    """
    theta, sigma2 = draw_nig(rng, prior, size=(draws,))
    loc, cov = draw_niw(rng, x_prior, size=(draws,))
    eta, _ = record_moments(theta, sigma2, loc, cov)  # (draws, ..., m)
    lo, hi = np.quantile(eta, [0.02, 0.98], axis=0)
    inside = np.all((eta >= lo) & (eta <= hi), axis=-1)  # (draws, ...)
    weight = inside / np.maximum(inside.sum(axis=0), 1)
    mean = np.einsum("k...,k...i->...i", weight, eta)
    centred = eta - mean
    cov = np.einsum("k...,k...i,k...j->...ij", weight, centred, centred)
    m = eta.shape[-1]
    cov = cov + 1e-9 * np.max(np.abs(cov), axis=(-2, -1))[..., None, None] * np.eye(m)
    return MomentPrior(mean, np.linalg.inv(cov))


def parameters_from_moments(
    eta: npt.ArrayLike, d: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Unconstrained u for one node from η ``(..., m)``, and where η is a valid moment vector.

    Invalid members get an arbitrary finite u.

    Examples
    --------
    >>> eta, _ = record_moments([0.2, -0.5], 0.3, [0.1], [[2.0]])
    >>> u, ok = parameters_from_moments(eta, 1)
    >>> bool(ok), np.round(u, 6).tolist() == np.round(
    ...     pack_parameters([0.2, -0.5], 0.3, [[0.1]], [[[2.0]]]), 6).tolist()
    (True, True)
    """
    eta = np.asarray(eta, dtype=np.float64)
    p = d + 1
    second = unpack_statistic(eta, 1.0)
    gram = second[..., :p, :p]
    loc = gram[..., 0, 1:]
    cov = gram[..., 1:, 1:] - loc[..., :, None] * loc[..., None, :]
    ok = np.all(np.isfinite(second), axis=(-2, -1))
    safe_cov = np.where(ok[..., None, None], cov, np.eye(d))
    eig = np.linalg.eigvalsh(safe_cov)[..., 0]
    ok &= eig > 0
    safe_cov = np.where(ok[..., None, None], safe_cov, np.eye(d))
    safe_gram = np.where(ok[..., None, None], gram, np.eye(p))
    theta = np.linalg.solve(safe_gram, second[..., :p, p][..., None])[..., 0]
    sigma2 = second[..., p, p] - np.sum(second[..., :p, p] * theta, axis=-1)
    ok &= sigma2 > 0
    theta = np.where(ok[..., None], theta, 0.0)
    sigma2 = np.where(ok, sigma2, 1.0)
    loc = np.where(ok[..., None], loc, 0.0)
    return pack_parameters(theta, sigma2, loc[..., None, :], safe_cov[..., None, :, :]), ok


class _Proposal(NamedTuple):
    """N(mean, cov) for η, with its last entry (E y²) truncated to σ² > 0."""

    mean: np.ndarray
    rest_chol: np.ndarray  # Cholesky factor of the covariance of the other entries
    gain: np.ndarray  # regression of the last entry on the others (whitened)
    last_sd: np.ndarray  # conditional sd of the last entry


def _proposal(ev: Evaluation, target: CollapsedTarget, fit: MomentPrior) -> _Proposal:
    """The normal proposal for η at ``ev`` (module docstring), split for the truncation."""
    n = target.n[0]
    s_inv_half = ev.marginal_chol_inv[..., 0, :, :]  # S = M Mᵀ: S⁻¹ = M⁻ᵀ M⁻¹
    s_inv = np.swapaxes(s_inv_half, -1, -2) @ s_inv_half
    cov = np.linalg.inv(fit.precision + n * n * s_inv)
    cov = 0.5 * (cov + np.swapaxes(cov, -1, -2))
    rhs = (fit.precision @ fit.mean[..., None])[..., 0] + n * (
        s_inv @ target.released[..., 0, :, None]
    )[..., 0]
    mean = (cov @ rhs[..., None])[..., 0]
    rest_chol = np.linalg.cholesky(cov[..., :-1, :-1])
    gain = np.linalg.solve(rest_chol, cov[..., :-1, -1:])[..., 0]
    last_var = cov[..., -1, -1] - np.sum(gain**2, axis=-1)
    return _Proposal(mean, rest_chol, gain, np.sqrt(np.maximum(last_var, 1e-300)))


def _last_bound(rest: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """The least E y² with σ² > 0 given the other entries of η, and whether Σ_x ≻ 0."""
    p = d + 1
    full = np.concatenate([rest, np.zeros((*rest.shape[:-1], 1))], axis=-1)
    second = unpack_statistic(full, 1.0)
    gram = second[..., :p, :p]
    loc = gram[..., 0, 1:]
    cov = gram[..., 1:, 1:] - loc[..., :, None] * loc[..., None, :]
    ok = np.all(np.isfinite(cov), axis=(-2, -1))
    ok &= np.linalg.eigvalsh(np.where(ok[..., None, None], cov, np.eye(d)))[..., 0] > 0
    safe = np.where(ok[..., None, None], gram, np.eye(p))
    xy = second[..., :p, p]
    bound = np.sum(xy * np.linalg.solve(safe, xy[..., None])[..., 0], axis=-1)
    return bound, ok


def _draw(
    rng: np.random.Generator, prop: _Proposal, d: int, tries: int
) -> tuple[np.ndarray, np.ndarray]:
    """``tries`` draws of η (leading axis): the other entries, then E y² truncated to σ² > 0."""
    mean = prop.mean
    white = rng.standard_normal((tries, *mean.shape[:-1], mean.shape[-1] - 1))
    rest = mean[..., :-1] + (prop.rest_chol @ white[..., None])[..., 0]
    centre = mean[..., -1] + np.sum(prop.gain * white, axis=-1)
    bound, ok = _last_bound(rest, d)
    low = (bound - centre) / prop.last_sd
    # X | X > low for a standard normal X, by inversion of the upper tail (exact in the tails).
    last = centre - prop.last_sd * ndtri(rng.uniform(size=centre.shape) * ndtr(-low))
    return np.concatenate([rest, last[..., None]], axis=-1), ok & np.isfinite(last)


def _log_density(eta: np.ndarray, prop: _Proposal, d: int) -> np.ndarray:
    """Log q(η) up to a constant (−∞ where E y² is below its bound or Σ_x is invalid)."""
    k = prop.rest_chol.shape[-1]
    diag = prop.rest_chol.reshape(*prop.rest_chol.shape[:-2], k * k)[..., :: k + 1]
    white = np.linalg.solve(prop.rest_chol, (eta[..., :-1] - prop.mean[..., :-1])[..., None])
    white = white[..., 0]
    centre = prop.mean[..., -1] + np.sum(prop.gain * white, axis=-1)
    bound, ok = _last_bound(eta[..., :-1], d)
    z_last = (eta[..., -1] - centre) / prop.last_sd
    with np.errstate(divide="ignore"):
        out = (
            -np.sum(np.log(diag), axis=-1)
            - 0.5 * np.sum(white**2, axis=-1)
            - np.log(prop.last_sd)
            - 0.5 * z_last**2
            - log_ndtr(-(bound - centre) / prop.last_sd)
        )
    return np.where(ok & (eta[..., -1] > bound), out, -np.inf)


def _log_proposal(eta: np.ndarray, par: Parameters, prop: _Proposal, d: int) -> np.ndarray:
    """Log q_u(u) = log q_η(η) + log|∂φ/∂u| + log det Σ_x (Jacobians of u ↦ φ ↦ η)."""
    return (
        _log_density(eta, prop, d)
        + parameter_log_jacobian(par)
        + 2.0 * np.sum(par.x_log_diag, axis=(-2, -1))
    )


_LOG_2PI = float(np.log(2.0 * np.pi))
_T_DOF = 5.0  # degrees of freedom of the u-space component: tails heavier than the posterior's
_T_INFLATE = 1.2**2  # its covariance over the tuned one: an independence proposal a bit wider


def _t_draw(
    rng: np.random.Generator, centre: np.ndarray, chol: np.ndarray, tries: int
) -> np.ndarray:
    """``tries`` draws of a multivariate t (leading axis) with location ``centre``, scale L Lᵀ."""
    white = rng.standard_normal((tries, *centre.shape))
    mix = np.sqrt(_T_DOF / rng.chisquare(_T_DOF, size=(tries, *centre.shape[:-1])))
    return centre + mix[..., None] * (chol @ white[..., None])[..., 0]


def _t_log_density(u: np.ndarray, centre: np.ndarray, chol: np.ndarray) -> np.ndarray:
    """Normalised log density of :func:`_t_draw`'s t at ``u``."""
    k = centre.shape[-1]
    white = np.linalg.solve(chol, (u - centre)[..., None])[..., 0]
    diag = chol.reshape(*chol.shape[:-2], k * k)[..., :: k + 1]
    const = gammaln(0.5 * (_T_DOF + k)) - gammaln(0.5 * _T_DOF) - 0.5 * k * np.log(_T_DOF * np.pi)
    return (
        const
        - np.sum(np.log(diag), axis=-1)
        - 0.5 * (_T_DOF + k) * np.log1p(np.sum(white**2, axis=-1) / _T_DOF)
    )


class MomentProposal(NamedTuple):
    """The candidates' law of :func:`moment_move`, fixed given the anchor.

    Build it with :func:`moment_proposal`.
    """

    eta: _Proposal
    """The normal in η, with S at the anchor."""
    centre: np.ndarray | None
    """Centre of the t in u (the anchor's u); ``None``: no t component."""
    chol: np.ndarray | None
    """Cholesky factor of the t's scale matrix."""


def moment_proposal(
    anchor: Evaluation,
    target: CollapsedTarget,
    fit: MomentPrior,
    spread: npt.ArrayLike | None = None,
) -> MomentProposal:
    """The proposal of :func:`moment_move` at a fixed anchor φ̂.

    Parameters
    ----------
    anchor
        :func:`~pymc_dp.regression.collapsed.evaluate` at the anchor φ̂ under ``target``; it
        must not depend on the chain's current state (after tuning: a fixed point).
    target
        Released values, noise variances, sizes and priors.
    fit
        Normal approximation of the prior of η (:func:`moment_prior`).
    spread
        Covariance ``(..., k, k)`` of the posterior of u (the random walk's tuned one) for the
        t component centred at the anchor; like the anchor, it must not depend on the current
        state. ``None``: every candidate from the proposal in η.
    """
    eta = _proposal(anchor, target, fit)
    if spread is None:
        return MomentProposal(eta, None, None)
    par = anchor.params
    centre = pack_parameters(par.theta, par.sigma2, par.x_loc, par.x_cov)
    chol = np.linalg.cholesky(np.asarray(spread, dtype=np.float64) * _T_INFLATE)
    return MomentProposal(eta, centre, chol)


def _log_q(u: np.ndarray, eta: np.ndarray, proposal: MomentProposal, d: int) -> np.ndarray:
    """Log density of the candidates' law at u (with η its moments)."""
    par = unpack_parameters(u, d)
    in_eta = _log_proposal(eta, par, proposal.eta, d)
    if proposal.centre is None:
        return in_eta
    # The mixture needs both densities normalised: _log_density omits (2π)^(−m/2).
    in_eta = in_eta - 0.5 * eta.shape[-1] * _LOG_2PI
    return np.logaddexp(in_eta, _t_log_density(u, proposal.centre, proposal.chol))


def moment_move(
    rng: np.random.Generator,
    state: MoveState,
    *,
    current: Evaluation,
    proposal: MomentProposal,
    target: CollapsedTarget,
    tries: int = 8,
) -> tuple[MoveState, npt.NDArray[np.bool_]]:
    """Multiple-try independence move of (φ, s), with φ proposed through η or in u.

    The proposal for η is the normal of the module docstring with S taken at a fixed anchor φ̂
    (not the current state, so that it is an independence proposal given w); with a t
    component, each candidate comes from it or, with probability 1/2, from a multivariate t in
    u centred at the anchor (:func:`moment_proposal`). s' comes from q(s | φ', z, w). ``tries``
    candidates are drawn and weighed by target over proposal, w = π(φ') m(φ') r(s', φ') / q(φ'),
    one is picked in proportion to w and accepted with probability
    min(1, Σ w / (Σ w − w_picked + w_current)) (Liu, Liang & Wong 2000).

    Parameters
    ----------
    rng
        Source of randomness.
    state
        Current :class:`~pymc_dp.regression.collapsed.MoveState` of a single node (J = 1).
    current
        :func:`~pymc_dp.regression.collapsed.evaluate` at ``state.params`` under ``target``.
    proposal
        The candidates' law (:func:`moment_proposal`).
    target
        Released values, noise variances, sizes and priors.
    tries
        Candidates per move, evaluated in one batched pass.

    Returns
    -------
    state : MoveState
    moved : numpy.ndarray
        Which batch members moved.

    References
    ----------
    Liu, Liang & Wong (2000), "The multiple-try method and local optimization in Metropolis
    sampling", *JASA* 95, 121–134.
    """
    d = target.x_prior.loc.shape[-1]
    n = target.n[0]
    batch = state.params.shape[:-1]
    eta, drawn = _draw(rng, proposal.eta, d, tries)  # (tries, ...)
    candidates, valid = parameters_from_moments(eta, d)
    valid &= drawn
    if proposal.centre is not None:
        from_t = rng.uniform(size=valid.shape) < 0.5
        drawn_t = _t_draw(rng, proposal.centre, proposal.chol, tries)
        candidates = np.where(from_t[..., None], drawn_t, candidates)
        valid |= from_t
    ev = evaluate(candidates, target)
    s_new = propose_statistic(rng, ev, target)
    correction = statistic_correction(s_new, ev, target)
    # The candidates' and the current state's proposal densities in one pass; each at the
    # moments of its own parameters (for those drawn in η, η itself up to round-off).
    every_u = np.concatenate([candidates, state.params[None]])
    every_eta = np.concatenate([ev.clt_mean, current.clt_mean[None]])[..., 0, :] / n
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        log_q = _log_q(every_u, every_eta, proposal, d)
        log_w = ev.surrogate + correction - log_q[:-1]
        log_w = np.where(valid & np.isfinite(log_w), log_w, -np.inf)
        log_w_now = state.surrogate + state.correction - log_q[-1]
    top = np.max(log_w, axis=0)
    any_ok = np.isfinite(top)
    shift = np.where(any_ok, top, 0.0)
    weights = np.exp(log_w - shift)
    total = np.sum(weights, axis=0)
    # Pick one candidate per batch member in proportion to its weight.
    cumulative = np.cumsum(weights, axis=0)
    pick = np.sum(cumulative < rng.uniform(size=batch) * total, axis=0)
    pick = np.minimum(pick, tries - 1)
    chosen = np.take_along_axis(weights, pick[None], axis=0)[0]
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        now = np.where(np.isfinite(log_w_now), np.exp(log_w_now - shift), 0.0)
        ratio = total / (total - chosen + now)
        accept = any_ok & (rng.uniform(size=batch) < ratio)

    def take(a: np.ndarray) -> np.ndarray:
        index = pick.reshape(1, *batch, *(1,) * (a.ndim - 1 - len(batch)))
        return np.take_along_axis(a, index, axis=0)[0]

    new = MoveState(take(candidates), take(s_new), take(ev.surrogate), take(correction))
    return replace_where(accept, new, state), accept
