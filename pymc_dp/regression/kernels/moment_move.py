"""A collapsed move that proposes the parameters through the moments of one record.

For one node the parameters φ = (θ, σ², μ_x, Σ_x) and the mean η = E t(x, y) of one record's
statistic determine each other: η lists the entries of P = E[w wᵀ], w = (1, x, y), and

    μ_x = P_0x,  Σ_x = P_xx − μ_x μ_xᵀ,  θ = P_x̃x̃⁻¹ P_x̃y,  σ² = P_yy − P_x̃yᵀ θ

(with x̃ = (1, x)), valid exactly when P is positive definite; both have (d + 2)(d + 3)/2 − 1
entries. In η the CLT marginal of the release is a normal likelihood, N(z; nη, S) with
S = nΣ_t + diag w, whose covariance changes only slowly with φ. So a normal proposal that
combines it with a normal approximation N(g, Q_g⁻¹) of the prior of η,

    η' ~ N(m, Q⁻¹),   Q = Q_g + n² S⁻¹,   m = Q⁻¹ (Q_g g + n S⁻¹ z),

with S evaluated at a fixed anchor φ̂ (:func:`moment_proposal`), is close to φ | z, w wherever
the release is informative. The move (:func:`moment_move`) is a multiple-try independence move:
its candidates come from this normal, mapped to φ', or from a multivariate t in the unconstrained
parameters centred at the anchor, and are weighed by the exact target over the mixture's density,
which includes the Jacobian of η ↦ u. The Jacobian of η ↦ φ is 1 / det Σ_x (the map is
triangular: μ_x and Σ_x from the moments of x, θ linear in P_x̃y with matrix P_x̃x̃⁻¹, σ² from
P_yy with slope 1).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy.special import gammaln, log_ndtr, ndtr, ndtri

from pymc_dp.curator.regression.statistics import unpack_statistic
from pymc_dp.regression.kernels.collapsed import (
    EIGEN_FLOOR,
    CollapsedTarget,
    Evaluation,
    MoveState,
    Parameters,
    evaluate,
    floor_eigenvalues,
    pack_parameters,
    parameter_log_jacobian,
    propose_statistic,
    shape_of,
    statistic_correction,
    unpack_parameters,
)
from pymc_dp.regression.kernels.conjugate import NIG, draw_nig
from pymc_dp.regression.kernels.data_model import NIW, draw_niw
from pymc_dp.regression.kernels.normal_model import draw_statistic, record_mean, record_moments
from pymc_dp.regression.kernels.psd import batched_cholesky

__all__ = [
    "T_INFLATE",
    "MomentPrior",
    "MomentProposal",
    "fitted_proposal",
    "moment_move",
    "moment_prior",
    "moment_proposal",
    "parameters_from_moments",
    "t_draw",
    "t_log_density",
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
    eta = record_mean(theta, sigma2, loc, cov)  # (draws, ..., m)
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
    >>> eta = record_mean([0.2, -0.5], 0.3, [0.1], [[2.0]])
    >>> u, ok = parameters_from_moments(eta, 1)
    >>> bool(ok), np.round(u, 6).tolist() == np.round(
    ...     pack_parameters([0.2, -0.5], 0.3, [[0.1]], [[[2.0]]]), 6).tolist()
    (True, True)
    """
    eta = np.asarray(eta, dtype=np.float64)
    split = _split(eta[..., :-1], d)
    return _pack(split, eta[..., -1] - split.bound, split.ok & np.all(np.isfinite(eta), axis=-1))


class _Split(NamedTuple):
    """η without its last entry E y², read as moments of x and x̃y."""

    bound: np.ndarray  # least E y² with σ² > 0: P_x̃yᵀ P_x̃x̃⁻¹ P_x̃y = P_x̃yᵀ θ
    ok: np.ndarray  # whether Σ_x ≻ 0 (else the other fields are arbitrary and finite)
    theta: np.ndarray
    loc: np.ndarray
    cov: np.ndarray


def _split(rest: np.ndarray, d: int) -> _Split:
    """θ, μ_x and Σ_x from the entries of η but E y², and the least E y² they allow."""
    p = d + 1
    full = np.concatenate([rest, np.zeros((*rest.shape[:-1], 1))], axis=-1)
    second = unpack_statistic(full, 1.0)
    gram = second[..., :p, :p]
    loc = gram[..., 0, 1:]
    cov = gram[..., 1:, 1:] - loc[..., :, None] * loc[..., None, :]
    ok = np.all(np.isfinite(cov), axis=(-2, -1))
    ok &= np.linalg.eigvalsh(np.where(ok[..., None, None], cov, np.eye(d)))[..., 0] > 0
    xy = second[..., :p, p]
    theta = np.linalg.solve(np.where(ok[..., None, None], gram, np.eye(p)), xy[..., None])[..., 0]
    return _Split(
        np.sum(xy * theta, axis=-1),
        ok,
        theta,
        np.where(ok[..., None], loc, 0.0),
        np.where(ok[..., None, None], cov, np.eye(d)),
    )


def _pack(split: _Split, sigma2: np.ndarray, ok: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unconstrained u from a :class:`_Split` and σ², and which members are valid."""
    ok = ok & (sigma2 > 0)
    theta = np.where(ok[..., None], split.theta, 0.0)
    sigma2 = np.where(ok, sigma2, 1.0)
    loc = np.where(ok[..., None], split.loc, 0.0)
    cov = np.where(ok[..., None, None], split.cov, np.eye(split.cov.shape[-1]))
    return pack_parameters(theta, sigma2, loc[..., None, :], cov[..., None, :, :]), ok


class _Proposal(NamedTuple):
    """N(mean, cov) for η, with its last entry (E y²) truncated to σ² > 0."""

    mean: np.ndarray
    rest_chol: np.ndarray  # Cholesky factor of the covariance of the other entries
    gain: np.ndarray  # regression of the last entry on the others (whitened)
    last_sd: np.ndarray  # conditional sd of the last entry


@functools.lru_cache(maxsize=16)
def _record_cov(anchor: bytes, shape: tuple[int, ...], d: int) -> np.ndarray:
    """Σ_t at the anchor u (given as bytes: after tuning the anchor is fixed, so this is cached)."""
    par = unpack_parameters(np.frombuffer(anchor).reshape(shape), d)
    cov = record_moments(par.theta, par.sigma2, par.x_loc[..., 0, :], par.x_cov[..., 0, :, :])[1]
    cov.flags.writeable = False
    return cov


def _proposal(anchor: np.ndarray, target: CollapsedTarget, fit: MomentPrior) -> _Proposal:
    """The normal proposal for η, S at the anchor's u (module docstring), split to truncate."""
    n = target.n[0]
    clt_cov = _record_cov(anchor.tobytes(), anchor.shape, target.x_prior.loc.shape[-1])
    w = target.noise_variance[..., 0, :]
    eye = np.eye(w.shape[-1])
    noisy = n * clt_cov + w[..., :, None] * eye
    # Inverted as a correlation matrix: the statistic's variances span 10⁸ to 10²¹ at an anchor
    # far outside the posterior, where the plain inverse is singular in floating point. An
    # anchor whose moments overflow carries no information about η: its precision is 0.
    finite = np.all(np.isfinite(noisy), axis=(-2, -1))
    root = 1.0 / np.sqrt(np.where(finite[..., None], np.diagonal(noisy, 0, -2, -1), 1.0))
    corr = np.where(finite[..., None, None], noisy, eye) * root[..., :, None] * root[..., None, :]
    chol, ok = batched_cholesky(corr)
    # A unit diagonal's pivots bound the smallest eigenvalue: floor where one is at rounding.
    ok &= np.min(np.diagonal(chol, 0, -2, -1), axis=-1) ** 2 > EIGEN_FLOOR
    corr_inv = np.linalg.inv(floor_eigenvalues(corr, ok))
    s_inv = root[..., :, None] * corr_inv * root[..., None, :]
    s_inv = np.where(finite[..., None, None], s_inv, 0.0)
    cov = np.linalg.inv(fit.precision + n * n * s_inv)
    cov = 0.5 * (cov + np.swapaxes(cov, -1, -2))
    rhs = (fit.precision @ fit.mean[..., None])[..., 0] + n * (
        s_inv @ target.released[..., 0, :, None]
    )[..., 0]
    return _normal_proposal((cov @ rhs[..., None])[..., 0], cov)


def _normal_proposal(mean: np.ndarray, cov: np.ndarray) -> _Proposal:
    """N(mean, cov) for η as a :class:`_Proposal`: the other entries' factor, then E y² on them.

    A member whose covariance has no Cholesky factor gets it with its eigenvalues floored
    (:func:`~pymc_dp.regression.kernels.collapsed.floor_eigenvalues`).
    """
    rest_chol, ok = batched_cholesky(cov[..., :-1, :-1])
    if not np.all(ok):
        cov = floor_eigenvalues(cov, ok)
        rest_chol = np.linalg.cholesky(cov[..., :-1, :-1])
    gain = np.linalg.solve(rest_chol, cov[..., :-1, -1:])[..., 0]
    last_var = cov[..., -1, -1] - np.sum(gain**2, axis=-1)
    return _Proposal(mean, rest_chol, gain, np.sqrt(np.maximum(last_var, 1e-300)))


def _draw(
    rng: np.random.Generator, prop: _Proposal, d: int, tries: int
) -> tuple[np.ndarray, np.ndarray]:
    """``tries`` draws of η (leading axis): the other entries, then E y² truncated to σ² > 0.

    Returns them as parameters u, and which are valid.
    """
    mean = prop.mean
    white = rng.standard_normal((tries, *mean.shape[:-1], mean.shape[-1] - 1))
    rest = mean[..., :-1] + (prop.rest_chol @ white[..., None])[..., 0]
    centre = mean[..., -1] + np.sum(prop.gain * white, axis=-1)
    split = _split(rest, d)
    low = (split.bound - centre) / prop.last_sd
    # X | X > low for a standard normal X, by inversion of the upper tail (exact in the tails).
    last = centre - prop.last_sd * ndtri(rng.uniform(size=centre.shape) * ndtr(-low))
    return _pack(split, last - split.bound, split.ok & np.isfinite(last))


def _log_density(eta: np.ndarray, sigma2: np.ndarray, prop: _Proposal) -> np.ndarray:
    """Log q(η) up to a constant at the moments η of valid parameters with variance σ²."""
    k = prop.rest_chol.shape[-1]
    diag = prop.rest_chol.reshape(*prop.rest_chol.shape[:-2], k * k)[..., :: k + 1]
    white = np.linalg.solve(prop.rest_chol, (eta[..., :-1] - prop.mean[..., :-1])[..., None])
    white = white[..., 0]
    centre = prop.mean[..., -1] + np.sum(prop.gain * white, axis=-1)
    # The truncation point E y² − σ² (the least E y² given the other entries), as in _split.
    bound = eta[..., -1] - sigma2
    z_last = (eta[..., -1] - centre) / prop.last_sd
    return (
        -np.sum(np.log(diag), axis=-1)
        - 0.5 * np.sum(white**2, axis=-1)
        - np.log(prop.last_sd)
        - 0.5 * z_last**2
        - log_ndtr(-(bound - centre) / prop.last_sd)
    )


def _log_proposal(eta: np.ndarray, par: Parameters, prop: _Proposal) -> np.ndarray:
    """Log q_u(u) = log q_η(η) + log|∂φ/∂u| + log det Σ_x (Jacobians of u ↦ φ ↦ η)."""
    return (
        _log_density(eta, par.sigma2, prop)
        + parameter_log_jacobian(par)
        + 2.0 * np.sum(par.x_log_diag, axis=(-2, -1))
    )


_LOG_2PI = float(np.log(2.0 * np.pi))
_T_DOF = 5.0  # degrees of freedom of the u-space component: tails heavier than the posterior's
T_INFLATE = 1.2**2  # its covariance over the tuned one: an independence proposal a bit wider
FIT_INFLATE = 2.0
"""Covariance of :func:`fitted_proposal`'s normal over the tuning states' covariance of η: wider
than the posterior, as an independence proposal must be, since the window's states can miss its
tails (``pm.sample`` at n = 500, ε = 1, d = 2, 32 candidates, three sweeps in four marginal:
with 1.5, one chain of six seeds' explored θ₁'s tail slowly, ESS 283 of 2000 against 1241 for
the other chain; with 2 that seed gave 1580 for both chains together)."""


def t_draw(
    rng: np.random.Generator, centre: np.ndarray, chol: np.ndarray, tries: int
) -> np.ndarray:
    """``tries`` draws of a multivariate t (leading axis) with location ``centre``, scale L Lᵀ."""
    white = rng.standard_normal((tries, *centre.shape))
    mix = np.sqrt(_T_DOF / rng.chisquare(_T_DOF, size=(tries, *centre.shape[:-1])))
    return centre + mix[..., None] * (chol @ white[..., None])[..., 0]


def t_log_density(u: np.ndarray, centre: np.ndarray, chol: np.ndarray) -> np.ndarray:
    """Normalised log density of :func:`t_draw`'s t at ``u``."""
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
    """The candidates' law of :func:`moment_move`, fixed given the anchor and w.

    Build it with :func:`moment_proposal`.
    """

    eta: _Proposal
    """The normal in η, with S at the anchor."""
    centre: np.ndarray | None
    """Centre of the t in u (the anchor); ``None``: no t component."""
    chol: np.ndarray | None
    """Cholesky factor of the t's scale matrix."""


def moment_proposal(
    anchor: npt.ArrayLike,
    target: CollapsedTarget,
    fit: MomentPrior,
    spread: npt.ArrayLike | None = None,
) -> MomentProposal:
    """The proposal of :func:`moment_move` at a fixed anchor φ̂.

    Parameters
    ----------
    anchor
        The anchor's unconstrained u ``(..., k)``; it must not depend on the chain's current
        state (after tuning: a fixed point).
    target
        Released values, noise variances, sizes and priors.
    fit
        Normal approximation of the prior of η (:func:`moment_prior`).
    spread
        Covariance ``(..., k, k)`` of the posterior of u (the random walk's tuned one) for the
        t component centred at the anchor; like the anchor, it must not depend on the current
        state. ``None``: every candidate from the proposal in η.
    """
    anchor = np.asarray(anchor, dtype=np.float64)
    eta = _proposal(anchor, target, fit)
    if spread is None:
        return MomentProposal(eta, None, None)
    chol = np.linalg.cholesky(np.asarray(spread, dtype=np.float64) * T_INFLATE)
    return MomentProposal(eta, anchor, chol)


def fitted_proposal(
    eta_mean: npt.ArrayLike,
    eta_cov: npt.ArrayLike,
    anchor: npt.ArrayLike,
    spread: npt.ArrayLike,
) -> MomentProposal:
    """The proposal of the w-marginal :func:`moment_move`: a normal in η fitted to the chain.

    The normal has the tuning states' mean of η and their covariance times
    :data:`FIT_INFLATE`; like :func:`moment_proposal`, half the candidates come from a t in u
    centred at ``anchor`` with scale ``spread``. Nothing in it depends on the mixing variances w,
    so it serves the move with w integrated out (``laplace_scale``), whose target is
    φ, s | z; the proposal of :func:`moment_proposal` combines the prior with the release's
    likelihood given the current w instead, which is the better proposal given w.

    Parameters
    ----------
    eta_mean, eta_cov
        Mean ``(..., m)`` and covariance ``(..., m, m)`` of η over tuning states
        (:attr:`~pymc_dp.regression.kernels.adaptation.RandomWalkAdaptation.moment_mean`).
    anchor, spread
        Centre ``(..., k)`` and covariance ``(..., k, k)`` of the t in u (the random walk's
        tuned ones). None of the four may depend on the chain's current state.
    """
    eta_cov = np.asarray(eta_cov, dtype=np.float64) * FIT_INFLATE
    # A jitter as in moment_prior: a window's states can leave a direction (nearly) unexplored.
    jitter = 1e-9 * np.max(np.abs(eta_cov), axis=(-2, -1)) + 1e-300
    eta_cov = eta_cov + jitter[..., None, None] * np.eye(eta_cov.shape[-1])
    eta = _normal_proposal(np.asarray(eta_mean, dtype=np.float64), eta_cov)
    chol = np.linalg.cholesky(np.asarray(spread, dtype=np.float64) * T_INFLATE)
    return MomentProposal(eta, np.asarray(anchor, dtype=np.float64), chol)


def _log_q(par: Parameters, u: np.ndarray, eta: np.ndarray, proposal: MomentProposal) -> np.ndarray:
    """Log density of the candidates' law at u (with ``par`` its parameters, η its moments)."""
    in_eta = _log_proposal(eta, par, proposal.eta)
    if proposal.centre is None:
        return in_eta
    # The mixture needs both densities normalised: _log_density omits (2π)^(−m/2).
    in_eta = in_eta - 0.5 * eta.shape[-1] * _LOG_2PI
    return np.logaddexp(in_eta, t_log_density(u, proposal.centre, proposal.chol))


def _candidates(
    rng: np.random.Generator, proposal: MomentProposal, d: int, tries: int
) -> tuple[np.ndarray, np.ndarray]:
    """``tries`` candidates u from the proposal (leading axis), and which are valid."""
    candidates, valid = _draw(rng, proposal.eta, d, tries)
    if proposal.centre is not None:
        from_t = rng.uniform(size=valid.shape) < 0.5
        drawn_t = t_draw(rng, proposal.centre, proposal.chol, tries)
        candidates = np.where(from_t[..., None], drawn_t, candidates)
        valid |= from_t
    return candidates, valid


def _rows(ev: Evaluation, index: np.ndarray) -> Evaluation:
    """The members ``index`` along the leading axis of a batched :class:`Evaluation`."""
    return Evaluation(Parameters(*(a[index] for a in ev.params)), *(a[index] for a in ev[1:]))


def _take(a: np.ndarray, pick: np.ndarray) -> np.ndarray:
    """``a[pick[b], b, ...]`` for every batch member b (``pick`` has the batch's shape)."""
    rows = pick.size
    flat = a.reshape(a.shape[0] * rows, *a.shape[1 + pick.ndim :])
    return flat[pick.ravel() * rows + np.arange(rows)].reshape(a.shape[1:])


def moment_move(
    rng: np.random.Generator,
    u: npt.ArrayLike,
    suffstat: npt.ArrayLike,
    *,
    proposal: MomentProposal,
    target: CollapsedTarget,
    tries: int = 8,
    laplace_scale: npt.ArrayLike | None = None,
) -> tuple[MoveState, npt.NDArray[np.bool_]]:
    """Two moves of s alone, then a multiple-try independence move of (φ, s).

    At the current φ, s is moved first by a proposal from its exact law (as
    :func:`~pymc_dp.regression.kernels.collapsed.redraw_statistic`), then by one from q(s | φ, z, w)
    (as :func:`~pymc_dp.regression.kernels.collapsed.refresh_statistic`). Then ``tries`` candidates
    φ' are drawn from ``proposal``: from the normal in η with S at a fixed anchor φ̂ (not the
    current state, so that it is an independence proposal given w) or, with a t component,
    with probability 1/2 from a multivariate t in u centred at the anchor
    (:func:`moment_proposal`); each gets s' ~ q(s | φ', z, w). They are weighed by target over
    proposal, w = π(φ') m(φ') r(s', φ') / q(φ'), one is picked in proportion to w and accepted
    with probability min(1, Σ w / (Σ w − w_picked + w_current)) (Liu, Liang & Wong 2000).

    With ``laplace_scale`` b the move targets φ, s | z with the Laplace mixing variances w
    integrated out: the target's noise variances are then only the proposal's (a fixed w̃, the
    same for every state), and every ratio gains the factor Laplace(z; s, b) / N(z; s, w̃) —
    the exact-law move of s has Laplace(z; s', b) / Laplace(z; s, b). Given w, consecutive
    states are tied through w (drawn from the current s); this move is not, which is what
    lets it mix (module docstring of :mod:`~pymc_dp.regression.engine.collapsed`). The
    caller redraws w | s, z before w is next used.

    The candidates do not depend on the state, so all of them, the current φ and the three
    statistics at it (the two proposals and the current s) are evaluated in one batched pass
    before any move is decided: one call per NumPy operation for the whole iteration.

    Parameters
    ----------
    rng
        Source of randomness.
    u, suffstat
        Current unconstrained φ ``(..., k)`` and s ``(..., 1, m)`` of a single node.
    proposal
        The candidates' law: :func:`moment_proposal` given w, :func:`fitted_proposal` for
        the move with w integrated out.
    target
        Released values, noise variances, sizes and priors.
    tries
        Candidates per move.
    laplace_scale
        Laplace scale b of the noise, broadcastable to z ``(..., 1, m)``, for the move with w
        integrated out; ``None``: the move given w.

    Returns
    -------
    state : MoveState
    moved : numpy.ndarray
        Which batch members took a candidate.

    References
    ----------
    Liu, Liang & Wong (2000), "The multiple-try method and local optimization in Metropolis
    sampling", *JASA* 95, 121–134.
    """
    u = np.asarray(u, dtype=np.float64)
    s = np.asarray(suffstat, dtype=np.float64)
    d = target.x_prior.loc.shape[-1]
    n = target.n[0]
    batch = u.shape[:-1]
    candidates, valid = _candidates(rng, proposal, d, tries)
    every_u = np.concatenate([candidates, u[None]])  # row `tries`: the current φ
    ev = evaluate(every_u, target)
    s_clt = propose_statistic(rng, ev, target)  # the candidates' s' and the refresh proposal
    par = Parameters(*(a[tries] for a in ev.params))
    s_exact = draw_statistic(rng, theta=par.theta[..., None, :], sigma2=par.sigma2[..., None],
                             x_loc=par.x_loc, x_cov=par.x_cov, n=target.n,
                             x_shape=shape_of(par, target))  # fmt: skip
    at = np.array([*range(tries + 1), tries, tries])
    every_s = np.concatenate([s_clt, s_exact[None], s[None]])
    correction = statistic_correction(every_s, _rows(ev, at), target)
    z, w = target.released, target.noise_variance
    # The ratios' r with, for w integrated out, log Laplace(z; s, b) − log N(z; s, w̃) (up to a
    # constant); the state keeps r alone.
    ratio = correction
    if laplace_scale is not None:
        resid = z - every_s
        ratio = correction + np.sum(0.5 * resid**2 / w - np.abs(resid) / laplace_scale, (-2, -1))
    every_eta = ev.clt_mean[..., 0, :] / n
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        log_q = _log_q(ev.params, every_u, every_eta, proposal)
    surrogate = ev.surrogate[tries]
    uniform = rng.uniform(size=(3, *batch))

    # s from its exact law: the ratio is the noise's likelihood ratio.
    if laplace_scale is None:
        gap = 0.5 * np.sum(((z - s) ** 2 - (z - s_exact) ** 2) / w, axis=(-2, -1))
    else:
        gap = np.sum((np.abs(z - s) - np.abs(z - s_exact)) / laplace_scale, axis=(-2, -1))
    with np.errstate(invalid="ignore"):
        took = (np.log(uniform[0]) < gap) & np.isfinite(correction[tries + 1])
    s = np.where(took[..., None, None], s_exact, s)
    now = np.where(took, correction[tries + 1], correction[tries + 2])
    ratio_now = np.where(took, ratio[tries + 1], ratio[tries + 2])
    # s from q(s | φ, z, w): the ratio is r(s', φ) / r(s, φ).
    with np.errstate(invalid="ignore"):
        took = np.log(uniform[1]) < ratio[tries] - ratio_now
    took &= np.isfinite(correction[tries])
    s = np.where(took[..., None, None], s_clt[tries], s)
    now = np.where(took, correction[tries], now)
    ratio_now = np.where(took, ratio[tries], ratio_now)

    # The multiple-try move.
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        log_w = ev.surrogate[:tries] + ratio[:tries] - log_q[:tries]
        log_w = np.where(valid & np.isfinite(log_w), log_w, -np.inf)
        log_w_now = surrogate + ratio_now - log_q[tries]
    top = np.max(log_w, axis=0)
    any_ok = np.isfinite(top)
    shift = np.where(any_ok, top, 0.0)
    weights = np.exp(log_w - shift)
    total = np.sum(weights, axis=0)
    # Pick one candidate per batch member in proportion to its weight.
    cumulative = np.cumsum(weights, axis=0)
    pick = np.minimum(np.sum(cumulative < rng.uniform(size=batch) * total, axis=0), tries - 1)
    chosen = _take(weights, pick)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        current = np.where(np.isfinite(log_w_now), np.exp(log_w_now - shift), 0.0)
        accept = any_ok & (uniform[2] < total / (total - chosen + current))
    return (
        MoveState(
            np.where(accept[..., None], _take(candidates, pick), u),
            np.where(accept[..., None, None], _take(s_clt[:tries], pick), s),
            np.where(accept, _take(ev.surrogate[:tries], pick), surrogate),
            np.where(accept, _take(correction[:tries], pick), now),
        ),
        accept,
    )
