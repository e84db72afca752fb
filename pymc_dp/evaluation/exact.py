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
from pymc_dp.kernels.exact_counts import NoiseLaw, binomial_log_likelihood

__all__ = ["GridPosterior", "exact_posterior", "exponential_window_posterior"]


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
    release: Release,
    *,
    prior: Sequence[float],
    grid_size: int = 2001,
    theta_range: tuple[float, float] = (0.0, 1.0),
) -> GridPosterior:
    """Exact p(θ | y) on a grid for a Bernoulli or Binomial release with a Beta prior.

    Parameters
    ----------
    release
        A Bernoulli or Binomial :class:`~pymc_dp.Release`.
    prior
        ``(alpha, beta)`` of the Beta prior on θ.
    grid_size
        Number of grid points in ``theta_range``.
    theta_range
        The θ interval tabulated, (0, 1) by default; narrower where the posterior is, e.g.
        ``(0, 1e-4)`` for a rare event among 10⁶ records, which (0, 1) would put in one cell.

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
    lo, hi = (float(v) for v in theta_range)
    if not 0.0 <= lo < hi <= 1.0:
        raise ValueError(f"theta_range must satisfy 0 ≤ lower < upper ≤ 1 (got {theta_range})")
    grid = lo + (hi - lo) * (np.arange(grid_size) + 0.5) / grid_size
    # The sum over the counts within the noise's reach of y (all but e^-40 of the noise's
    # peak), so that 10⁶ records cost what 100 do.
    noise = NoiseLaw("laplace", float(release.scale))
    log_lik = binomial_log_likelihood(float(np.ravel(release.value)[0]), grid, total, noise)
    log_post = stats.beta.logpdf(grid, alpha, beta) + log_lik
    density = np.exp(log_post - np.max(log_post))
    density /= trapezoid(density, grid)
    return GridPosterior(grid, density)


def _laplace_logpdf(
    y: float, loc: npt.NDArray[np.float64], scale: float
) -> npt.NDArray[np.float64]:
    """Log density of Laplace(loc, scale) at y, finite however far y lies from loc.

    SciPy's ``stats.laplace.logpdf`` returns -inf beyond about 745 scales, which would make the
    posterior NaN when every lattice point is that far from the release.
    """
    return -np.abs(y - np.asarray(loc, dtype=float)) / scale - np.log(2.0 * scale)


def _window_sum_pmf(lam: float, n: int, window: tuple[float, float], step: float) -> np.ndarray:
    """Law of Σ x_i 1[a ≤ x_i ≤ b], x_i ~ Exponential(lam), on the lattice step·k (FFT).

    Each lattice cell's mass is split between its two ends so that the record's mean is kept
    exactly (the split adds at most step²/4 of variance per record).
    """
    a, b = window
    size = 1 << int(np.ceil(np.log2(n * b / step + 3)))
    edges = np.arange(0.0, b + 2 * step, step)
    lo, hi = np.clip(edges[:-1], a, b), np.clip(edges[1:], a, b)
    mass = np.exp(-lam * lo) - np.exp(-lam * hi)
    safe = np.where(mass > 0, mass, 1.0)
    centroid = np.where(
        mass > 0, (lo * np.exp(-lam * lo) - hi * np.exp(-lam * hi)) / safe + 1.0 / lam, lo
    )
    one = np.zeros(size)
    one[0] = max(1.0 - mass.sum(), 0.0)  # records outside the window contribute 0
    k = np.arange(mass.size)
    frac = np.clip(centroid / step - k, 0.0, 1.0)
    np.add.at(one, k, mass * (1 - frac))
    np.add.at(one, k + 1, mass * frac)
    return np.maximum(np.fft.irfft(np.fft.rfft(one) ** n, size), 0.0)


def exponential_window_posterior(
    release: Release,
    *,
    prior: Sequence[float],
    theta_range: tuple[float, float] | None = None,
    grid_size: int = 400,
    step: float = 0.02,
) -> GridPosterior:
    """Exact p(λ | y) over λ's whole support for a windowed Exponential release, Gamma prior.

    The window sum's law is the n-fold convolution of one record's windowed statistic on a
    lattice (FFT), convolved with the Laplace noise at y; λ is tabulated on a log-spaced grid
    spanning the prior's central 1 - 2e-12 mass, so that every mode is included. The window sum
    E[x 1(a ≤ x ≤ b)] is not monotone in λ: a small λ that puts most records above b explains
    the same sum, so the posterior can hold a second, far mode (found by this function, missed
    by references that only tabulate λ near the main mode).

    Parameters
    ----------
    release
        An Exponential release with bounds ``(a, b)``.
    prior
        ``(alpha, beta)`` of the Gamma(shape, rate) prior on λ.
    theta_range
        λ range of the grid; by default the prior's quantiles 1e-12 and 1 - 1e-12.
    grid_size
        Grid points in log λ.
    step
        Lattice step of the window sum.

    Returns
    -------
    GridPosterior
        Normalised density of λ on the grid.
    """
    if release.family != "exponential" or release.bounds is None:
        raise ValueError("exponential_window_posterior needs a windowed Exponential release")
    alpha, rate = (float(v) for v in prior)
    gamma = stats.gamma(alpha, scale=1.0 / rate)
    lo, hi = theta_range or (gamma.ppf(1e-12), gamma.isf(1e-12))
    grid = np.exp(np.linspace(np.log(lo), np.log(hi), grid_size))
    window = (max(float(release.bounds[0]), 0.0), float(release.bounds[1]))
    log_lik = np.empty(grid_size)
    for i, lam in enumerate(grid):
        pmf = _window_sum_pmf(lam, release.n, window, step)
        s = np.arange(pmf.size) * step
        noise = _laplace_logpdf(release.value, s, release.scale)
        with np.errstate(divide="ignore"):
            log_lik[i] = logsumexp(np.log(pmf) + noise)
    log_post = gamma.logpdf(grid) + log_lik
    density = np.exp(log_post - np.max(log_post))
    density /= trapezoid(density, grid)
    return GridPosterior(grid, density)
