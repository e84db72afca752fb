"""The exact posterior p(θ | y) of a Binomial release, by summing over every s (no CLT).

For Binomial records, s = Σ x_i ~ Binomial(n·trials, θ) exactly, so
p(θ | y) ∝ Beta(θ; α, β) Σ_{s=0}^{n·trials} Binomial(s; n·trials, θ) Laplace(y; s, Δ/ε).
Evaluated on a grid of θ, this is the reference the Gibbs sampler is tested against, and a
usable posterior when n·trials is small.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy import stats
from scipy.integrate import trapezoid
from scipy.special import logsumexp

from pymc_dp.curator.record import Release
from pymc_dp.families import Binomial

__all__ = ["GridPosterior", "exact_posterior"]


class GridPosterior(NamedTuple):
    """A posterior density tabulated on a grid."""

    grid: npt.NDArray[np.float64]
    density: npt.NDArray[np.float64]

    def mean(self) -> float:
        """Posterior mean."""
        return float(trapezoid(self.grid * self.density, self.grid))

    def sd(self) -> float:
        """Posterior standard deviation."""
        m = self.mean()
        return float(np.sqrt(trapezoid((self.grid - m) ** 2 * self.density, self.grid)))

    def cdf(self, theta: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Posterior CDF at ``theta``, by the trapezoid rule on the grid."""
        steps = 0.5 * (self.density[1:] + self.density[:-1]) * np.diff(self.grid)
        cum = np.concatenate([[0.0], np.cumsum(steps)])
        return np.interp(theta, self.grid, cum)


def exact_posterior(
    release: Release, *, prior: Sequence[float], grid_size: int = 2001
) -> GridPosterior:
    """Exact p(θ | y) on a grid for a Bernoulli or Binomial release with a Beta prior.

    Parameters
    ----------
    release
        A Bernoulli or Binomial :class:`~pymc_dp.Release`.
    prior
        ``(alpha, beta)`` of the Beta prior on θ.
    grid_size
        Number of grid points in (0, 1).

    Returns
    -------
    GridPosterior
        Normalised density on the grid.

    Examples
    --------
    >>> import pymc as pm, pymc_dp as pmdp
    >>> rel = pmdp.release([1, 0, 1, 1, 0], pm.Bernoulli, epsilon=1.0, rng=0)
    >>> post = exact_posterior(rel, prior=(1, 1))
    >>> round(float(post.cdf(1.0)), 6)
    1.0
    """
    family = release.get_family()
    if not isinstance(family, Binomial):
        raise ValueError(f"exact_posterior needs a Bernoulli or Binomial release (got {family!r})")
    alpha, beta = family.check_prior(prior)
    total = release.n * family.trials
    # Cell midpoints keep θ away from 0 and 1, where the log pmf is -inf.
    grid = (np.arange(grid_size) + 0.5) / grid_size
    s = np.arange(total + 1)
    log_lik_noise = stats.laplace.logpdf(release.value, loc=s, scale=release.scale)
    log_pmf = stats.binom.logpmf(s[None, :], total, grid[:, None])
    log_post = stats.beta.logpdf(grid, alpha, beta) + logsumexp(log_pmf + log_lik_noise, axis=1)
    density = np.exp(log_post - np.max(log_post))
    density /= trapezoid(density, grid)
    return GridPosterior(grid, density)
