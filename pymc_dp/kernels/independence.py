"""Independence proposals fitted to a small posterior, and the Metropolis–Hastings chain on them.

Where s is integrated out, θ's posterior has a few dimensions and a density that is cheap to
evaluate on a batch of points but has no closed form. A proposal fitted once to it makes
Metropolis–Hastings an *independence* sampler: exact, and close to independent draws where the
fit is good. :func:`fit_independence_proposal` finds the mode (BFGS), widens the curvature
there and matches a multivariate t to the posterior's mean and covariance by a few rounds of
importance sampling (with Laplace noise far wider than sd(s) the log density is smooth only
within about sd(s) of its peak and falls linearly beyond, so the curvature alone understates the
spread many times); in two dimensions a posterior the t fits badly (curved, skewed, a funnel,
two modes) is tabulated on an adaptive grid instead (:mod:`pymc_dp.kernels.plane_grid`), mixed
with the t for the tails. A fixed two-dimensional posterior gets :func:`fit_plane_proposal`: a
grid from the prior's box, which sees far modes, mixed with the mode's proposal where the
posterior is far narrower than the prior. :func:`independence_chain` runs the chain. The same
fit serves :class:`~pymc_dp.IndependenceStep` inside ``pm.sample`` and the batched engine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from scipy import optimize, stats

from pymc_dp.kernels.plane_grid import (
    PlaneGrid,
    draw_plane_grid,
    fit_plane_grid,
    plane_grid_logpdf,
)

__all__ = [
    "GridMixture",
    "IndependenceDraws",
    "ProposalMixture",
    "fit_grid_proposal",
    "fit_independence_proposal",
    "fit_plane_proposal",
    "independence_chain",
]

LogDensity = Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]]
"""A batched log density: rows of points ``(m, d)`` → ``(m,)``, ``-inf`` off the support."""

_DF = 5.0  # the proposal's degrees of freedom: tails heavier than any posterior here
_WIDEN = 3.0  # the Laplace approximation's scale is widened this much before the rounds
_ROUNDS = 4
_PILOT = 256
_PILOT_DF = 3.0
_TAILS = 0.05  # the t's share of a two-dimensional proposal, for what lies beyond the grid
_PRIOR_SHARE = 0.25  # the prior grid's share beside a mode's proposal (fit_plane_proposal)
_GOOD_FIT = 0.9  # importance efficiency of the t above which no grid is tabulated


class GridMixture:
    """The tabulated posterior (most of the time) or the fitted t (for the tails)."""

    def __init__(self, grid: PlaneGrid, t: Any):
        self.grid, self.t = grid, t
        self.shape = t.shape

    def rvs(self, size: int, random_state: np.random.Generator) -> npt.NDArray[np.float64]:
        """Draw ``size`` points, shape ``(size, 2)``."""
        z = draw_plane_grid(random_state, self.grid, size)
        tails = random_state.uniform(size=size) < _TAILS
        if tails.any():
            z[tails] = np.asarray(self.t.rvs(size=int(tails.sum()), random_state=random_state))
        return z

    def logpdf(self, z: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Log density at the rows of ``z``."""
        z = np.atleast_2d(z)
        return np.logaddexp(
            np.log1p(-_TAILS) + plane_grid_logpdf(self.grid, z),
            np.log(_TAILS) + np.atleast_1d(self.t.logpdf(z)),
        )


class ProposalMixture:
    """Two proposals mixed: ``first`` with probability ``weight``, else ``second``."""

    def __init__(self, first: Any, second: Any, weight: float):
        self.first, self.second, self.weight = first, second, weight
        self.shape = second.shape

    def rvs(self, size: int, random_state: np.random.Generator) -> npt.NDArray[np.float64]:
        """Draw ``size`` points, shape ``(size, d)``."""
        z = _draw(self.second, random_state, size)
        pick = random_state.uniform(size=size) < self.weight
        if pick.any():
            z[pick] = _draw(self.first, random_state, int(pick.sum()))
        return z

    def logpdf(self, z: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Log density at the rows of ``z``."""
        z = np.atleast_2d(z)
        return np.logaddexp(
            np.log(self.weight) + np.atleast_1d(self.first.logpdf(z)),
            np.log1p(-self.weight) + np.atleast_1d(self.second.logpdf(z)),
        )


def _draw(proposal: Any, rng: np.random.Generator, size: int) -> npt.NDArray[np.float64]:
    return np.asarray(proposal.rvs(size=size, random_state=rng)).reshape(size, -1)


def _log_weights(
    log_density: LogDensity, proposal: Any, z: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    weight = np.atleast_1d(np.asarray(log_density(z), dtype=np.float64)) - np.atleast_1d(
        proposal.logpdf(z)
    )
    return np.where(np.isfinite(weight), weight, -np.inf)


def fit_independence_proposal(
    rng: np.random.Generator,
    log_density: LogDensity,
    start: npt.ArrayLike,
    *,
    objective: Callable[[npt.NDArray], tuple[float, npt.NDArray]] | None = None,
    rounds: bool = True,
) -> Any:
    """Fit an independence proposal to a posterior of a few dimensions.

    Parameters
    ----------
    rng
        Source of randomness (importance draws).
    log_density
        The posterior's batched log density, up to a constant.
    start
        Where the search for the mode starts.
    objective
        Negative log density and its gradient at one point, for BFGS; without it the gradient
        is taken by finite differences of ``log_density``.
    rounds
        Whether to match the t's moments by importance sampling (about a thousand log
        densities) and, in two dimensions, tabulate a posterior the t fits badly. A posterior
        that changes every iteration is better served by the widened Laplace approximation.

    Returns
    -------
    A frozen ``scipy.stats.multivariate_t`` or a :class:`GridMixture`: both have ``rvs`` and
    ``logpdf``.

    Examples
    --------
    >>> target = stats.multivariate_normal([1.0, 2.0], [[1.0, 0.5], [0.5, 2.0]])
    >>> rng = np.random.default_rng(0)
    >>> proposal = fit_independence_proposal(rng, target.logpdf, np.zeros(2))
    >>> out = independence_chain(rng, target.logpdf, proposal, np.zeros(2), 4000)
    >>> np.round(out.draws.mean(0), 1), bool(out.accepted.mean() > 0.8)
    (array([1., 2.]), True)
    """
    start = np.asarray(start, dtype=np.float64).reshape(-1)
    if objective is None:

        def negative(z):
            value = float(np.atleast_1d(log_density(z[None]))[0])
            return -value if np.isfinite(value) else np.inf

        fit = optimize.minimize(negative, start, method="BFGS")

        def gradient(z):
            return optimize.approx_fprime(z, negative, 1e-6)

    else:
        fit = optimize.minimize(objective, start, jac=True, method="BFGS")

        def gradient(z):
            return objective(z)[1]

    loc = fit.x if np.all(np.isfinite(fit.x)) else start
    hessian = np.empty((loc.size, loc.size))
    for i in range(loc.size):
        step = 1e-4 * max(1.0, abs(loc[i]))
        up, down = loc.copy(), loc.copy()
        up[i] += step
        down[i] -= step
        hessian[i] = (np.asarray(gradient(up)) - np.asarray(gradient(down))) / (2 * step)
    curvature, basis = np.linalg.eigh(0.5 * (hessian + hessian.T))
    if not np.all(np.isfinite(curvature)) or curvature.max() <= 0:
        curvature, basis = np.ones(loc.size), np.eye(loc.size)
    curvature = np.maximum(curvature, 1e-8 * curvature.max())
    shape = (basis / curvature) @ basis.T * _WIDEN**2
    for _ in range(_ROUNDS if rounds else 0):
        pilot = stats.multivariate_t(loc=loc, shape=shape, df=_PILOT_DF)
        z = _draw(pilot, rng, _PILOT)
        log_w = _log_weights(log_density, pilot, z)
        if not np.any(np.isfinite(log_w)):
            break
        w = np.exp(log_w - log_w.max())
        w /= w.sum()
        loc = w @ z
        centred = z - loc
        moment = (centred * w[:, None]).T @ centred
        shape = moment + 1e-12 * np.trace(moment) * np.eye(loc.size)
        if 1.0 / np.sum(w**2) > 0.5 * _PILOT:  # the pilot already fits well
            break
    proposal = stats.multivariate_t(loc=loc, shape=shape, df=_DF)
    if rounds and loc.size == 2 and _efficiency(rng, log_density, proposal) < _GOOD_FIT:
        grid = fit_plane_grid(log_density, loc=loc, scale=proposal.shape)
        proposal = GridMixture(grid, proposal)
    return proposal


def fit_grid_proposal(
    log_density: LogDensity, loc: npt.ArrayLike, scale: npt.ArrayLike
) -> GridMixture:
    """Tabulate a two-dimensional posterior on an adaptive grid and propose from it.

    Unlike :func:`fit_independence_proposal` this needs no mode search, whose one-point
    evaluations cost far more per point than the grid's batches: ``loc`` and ``scale`` (e.g. the
    prior's) only set where the grid starts; it widens and zooms to the posterior's mass
    (:func:`~pymc_dp.kernels.plane_grid.fit_plane_grid`). The t for the tails takes the grid's
    mean and covariance.

    Examples
    --------
    >>> target = stats.multivariate_normal([1.0, 2.0], [[0.01, 0.005], [0.005, 0.02]])
    >>> proposal = fit_grid_proposal(target.logpdf, np.zeros(2), np.eye(2) * 100.0)
    >>> rng = np.random.default_rng(0)
    >>> out = independence_chain(rng, target.logpdf, proposal, np.zeros(2), 4000)
    >>> np.round(out.draws.mean(0), 2), bool(out.accepted.mean() > 0.8)
    (array([1., 2.]), True)
    """
    grid = fit_plane_grid(log_density, loc=loc, scale=scale)
    mass = np.exp(grid.log_mass)
    centres = grid.loc + (grid.leaf_lo + 0.5 * grid.leaf_width) @ grid.chol.T
    mean = mass @ centres
    centred = centres - mean
    cov = (centred * mass[:, None]).T @ centred
    cov += 1e-12 * np.trace(cov) * np.eye(2)
    return GridMixture(grid, stats.multivariate_t(loc=mean, shape=cov, df=_DF))


def _efficiency(rng: np.random.Generator, log_density: LogDensity, proposal: Any) -> float:
    """Importance-sampling efficiency (ESS / draws) of ``proposal`` for the posterior."""
    log_w = _log_weights(log_density, proposal, _draw(proposal, rng, _PILOT))
    if not np.any(np.isfinite(log_w)):
        return 0.0
    w = np.exp(log_w - log_w.max())
    return float(np.sum(w) ** 2 / np.sum(w**2) / _PILOT)


def fit_plane_proposal(
    rng: np.random.Generator,
    log_density: LogDensity,
    start: npt.ArrayLike,
    prior_loc: npt.ArrayLike,
    prior_scale: npt.ArrayLike,
    *,
    objective: Callable[[npt.NDArray], tuple[float, npt.NDArray]] | None = None,
) -> Any:
    """A proposal for a fixed two-dimensional posterior that sees every mode the prior allows.

    A grid tabulated from the prior's box (:func:`fit_grid_proposal`) finds every mode, but
    where the posterior is thousands of times narrower than the prior it resolves it coarsely;
    a proposal fitted at the mode (:func:`fit_independence_proposal`) is sharp there but blind
    to a far mode, and its importance check cannot tell, since it only looks where it proposes.
    The prior's grid is used alone when it fits well (importance efficiency ≥ 0.9), else mixed
    1 : 3 with the mode's proposal, so the far mode is still proposed.

    Examples
    --------
    >>> near = stats.multivariate_normal([0.0, 0.0], np.eye(2) * 1e-4)
    >>> far = stats.multivariate_normal([3.0, 3.0], np.eye(2) * 1e-4)
    >>> def target(z):
    ...     return np.logaddexp(np.log(0.8) + near.logpdf(z), np.log(0.2) + far.logpdf(z))
    >>> rng = np.random.default_rng(0)
    >>> proposal = fit_plane_proposal(rng, target, np.zeros(2), np.zeros(2), np.eye(2) * 4.0)
    >>> out = independence_chain(rng, target, proposal, np.zeros(2), 4000)
    >>> round(float((out.draws[:, 0] > 1.5).mean()), 1)
    0.2
    """
    grid = fit_grid_proposal(log_density, prior_loc, prior_scale)
    if _efficiency(rng, log_density, grid) >= _GOOD_FIT:
        return grid
    mode = fit_independence_proposal(rng, log_density, start, objective=objective)
    return ProposalMixture(grid, mode, _PRIOR_SHARE)


class IndependenceDraws(NamedTuple):
    """Draws of an independence Metropolis–Hastings chain."""

    draws: npt.NDArray[np.float64]
    """The chain's states, ``(draws, d)``."""
    accepted: npt.NDArray[np.bool_]
    """Whether each step moved."""


def independence_chain(
    rng: np.random.Generator,
    log_density: LogDensity,
    proposal: Any,
    start: npt.ArrayLike,
    draws: int,
) -> IndependenceDraws:
    """Run Metropolis–Hastings with an independent proposal; every density in one batch.

    Proposals do not depend on the chain, so all ``draws`` of them and their weights are
    computed at once; only the accept/reject pass is sequential.
    """
    current = np.asarray(start, dtype=np.float64).reshape(-1)
    z = _draw(proposal, rng, draws)
    log_w = _log_weights(log_density, proposal, z)
    weight = float(_log_weights(log_density, proposal, current[None])[0])
    log_u = np.log(rng.uniform(size=draws))
    out = np.empty_like(z)
    accepted = np.zeros(draws, dtype=bool)
    for i in range(draws):
        if log_u[i] < log_w[i] - weight:
            current, weight = z[i], log_w[i]
            accepted[i] = True
        out[i] = current
    return IndependenceDraws(out, accepted)
