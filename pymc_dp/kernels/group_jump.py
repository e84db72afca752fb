"""Metropolis–Hastings jumps of conditionally independent group effects between their modes.

In a partially pooled model η_g ~ N(μ, τ²), the groups are independent given (μ, τ), so each
η_g may be moved by its own Metropolis–Hastings step inside a sweep. Gradient samplers (NUTS)
move each η_g locally and cannot cross from one mode of its conditional to another: a windowed
release has a far mode (θ so large that few records fall in the window), where a chain that
wanders in during warm-up stays. :func:`jump` proposes every η_g independently of its current
value, from a two-part mixture that reaches both the mode the release points to and the
population's spread, and accepts each group by its own ratio; the move leaves each conditional
(so the joint posterior) invariant whatever the proposal, so it needs no tuning to be exact,
only to be useful.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy import special, stats

__all__ = ["JumpProposal", "jump"]

_LOG_HALF = float(np.log(0.5))


class JumpProposal(NamedTuple):
    """The fixed half of the proposal, from public values: η̂_g and its standard error."""

    estimate: npt.NDArray[np.float64]
    """Each group's estimate of η_g from its own release, shape ``(G,)``; NaN where it has none."""
    sd: npt.NDArray[np.float64]
    """Its standard error, shape ``(G,)`` (positive)."""


def _log_mixture(
    eta: npt.NDArray, proposal: JumpProposal, mu: float, tau: float
) -> npt.NDArray[np.float64]:
    """Log density of the proposal: ½ N(η̂_g, sd_g²) + ½ N(μ, τ²), or the second alone."""
    population = stats.norm.logpdf(eta, mu, tau)
    has = np.isfinite(proposal.estimate)
    own = stats.norm.logpdf(eta, np.where(has, proposal.estimate, mu), proposal.sd)
    both = special.logsumexp([own, population], axis=0) + _LOG_HALF
    return np.where(has, both, population)


def jump(
    rng: np.random.Generator,
    *,
    current: npt.NDArray[np.float64],
    log_target: Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]],
    proposal: JumpProposal,
    mu: float,
    tau: float,
    current_log_target: npt.NDArray[np.float64] | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """One independence Metropolis–Hastings step for every group at once.

    Parameters
    ----------
    rng
        Source of randomness.
    current
        The groups' current η_g, shape ``(..., G)`` (leading dimensions: independent chains).
    log_target
        Each group's conditional log density, elementwise: η of ``current``'s shape → the same
        shape (up to a constant per group); NaN is read as ``-inf``.
    proposal
        Each group's own estimate and its standard error (:class:`JumpProposal`).
    mu, tau
        The population's mean and scale now (held fixed by this step).
    current_log_target
        ``log_target(current)``, if already known.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        The new η_g (the current value wherever the jump is refused, bit for bit) and which
        groups jumped.

    Notes
    -----
    The proposal draws each η'_g from ½ N(η̂_g, sd_g²) + ½ N(μ, τ²) (the population part alone
    where η̂_g is NaN), whatever η_g is; it is accepted with probability
    min(1, π(η')q(η) / (π(η)q(η'))). Both parts depend only on values this step holds fixed,
    so the step is reversible with respect to each group's conditional.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import stats
    >>> rng = np.random.default_rng(0)
    >>> target = lambda eta: np.logaddexp(stats.norm.logpdf(eta, -3, 0.3),
    ...                                   stats.norm.logpdf(eta, 3, 0.3))
    >>> prop = JumpProposal(np.array([3.0]), np.array([1.0]))
    >>> eta, draws = np.array([-3.0]), []
    >>> for _ in range(4000):
    ...     eta, _ = jump(rng, current=eta, log_target=target, proposal=prop, mu=0.0, tau=3.0)
    ...     draws.append(eta[0])
    >>> round(float(np.mean(np.array(draws) > 0)), 1)  # both modes, half the mass each
    0.5
    """
    current = np.asarray(current, dtype=np.float64)
    if tau <= 0.0 or not np.isfinite(tau):
        raise ValueError(f"tau must be positive and finite (got {tau})")
    has = np.isfinite(proposal.estimate)
    own = rng.normal(np.where(has, proposal.estimate, mu), proposal.sd, size=current.shape)
    population = rng.normal(mu, tau, size=current.shape)
    use_own = has & (rng.uniform(size=current.shape) < 0.5)
    candidate = np.where(use_own, own, population)
    before = current_log_target if current_log_target is not None else log_target(current)
    after = np.asarray(log_target(candidate), dtype=np.float64)
    after = np.where(np.isnan(after), -np.inf, after)
    with np.errstate(invalid="ignore"):
        log_ratio = (
            after
            - before
            + _log_mixture(current, proposal, mu, tau)
            - _log_mixture(candidate, proposal, mu, tau)
        )
    accepted = np.log(rng.uniform(size=current.shape)) < np.where(
        np.isnan(log_ratio), -np.inf, log_ratio
    )
    return np.where(accepted, candidate, current), accepted
