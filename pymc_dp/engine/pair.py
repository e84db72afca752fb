"""Posterior draws for many windowed (Σz, Σz²) releases, with ŝ integrated out (collapsed).

The window's (Σz, Σz²) of Normal and LogNormal records is released with Laplace noise on each
component. With ŝ integrated out, θ = (μ, σ²) | y has the Normal–Inverse-Gamma prior times the
bivariate normal–Laplace convolution (:mod:`pymc_dp.kernels.collapsed_pair`): two dimensions, so
:func:`sample_collapsed_pair` tabulates each release's posterior on (μ, log σ²) on an
adaptive grid and runs exact Metropolis–Hastings chains with it as an independent proposal
(:mod:`pymc_dp.kernels.independence`), then draws ŝ, the statistic of all records and σ² from
their exact conditionals. This is what :func:`pymc_dp.engine.gibbs.sample_gibbs` runs by default for
these families, and what :class:`~pymc_dp.IndependenceStep` does inside ``pm.sample``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy import stats

from pymc_dp.engine.batch import ReleaseBatch
from pymc_dp.engine.moments import batched_moments, conditional_all_records
from pymc_dp.families import ExponentialFamily, TruncatedFamily
from pymc_dp.kernels import draw_noise_variance
from pymc_dp.kernels.collapsed_pair import draw_pair_suffstat, pair_log_likelihood
from pymc_dp.kernels.independence import fit_plane_proposal, independence_chain

__all__ = ["pair_collapsible", "sample_collapsed_pair"]


def pair_collapsible(family: ExponentialFamily) -> bool:
    """Whether a family releases a window's (Σz, Σz²) (the collapsed pair engine applies).

    Examples
    --------
    >>> from pymc_dp.families import Exponential, LogNormal, Normal
    >>> pair_collapsible(Normal()), pair_collapsible(LogNormal()), pair_collapsible(Exponential())
    (True, True, False)
    """
    return isinstance(family, TruncatedFamily) and family.stat_size == 2


def sample_collapsed_pair(
    rng: np.random.Generator, batch: ReleaseBatch, *, draws: int, chains: int = 1
) -> tuple[npt.NDArray, npt.NDArray, npt.NDArray, npt.NDArray]:
    """Draw (θ, (ŝ, s), σ²) | y for a batch of windowed (Σz, Σz²) releases.

    Parameters
    ----------
    rng
        Source of randomness.
    batch
        Releases y (shape ``(B, 2)``) of :class:`~pymc_dp.families.Normal` or
        :class:`~pymc_dp.families.LogNormal` records with Laplace noise on each component, their
        window and Normal–Inverse-Gamma hyperparameters (m, κ, α, β), each of shape ``(B,)``.
    draws
        Draws per chain.
    chains
        Chains per release, each started from its own prior draw; they share the release's
        proposal.

    Returns
    -------
    theta, suffstat, noise_variance, accepted
        Shapes ``(chains, draws, B, 2)``, ``(chains, draws, B, 4)``, ``(chains, draws, B, 2)``
        and ``(chains, draws, B)``.
    """
    family, n, scale = batch.family, batch.n, batch.noise.scale
    moments = batched_moments(family, n, batch.bounds)
    y = np.asarray(batch.released, dtype=np.float64).reshape(-1, 2)
    releases = y.shape[0]
    mean0, kappa, alpha, beta = (np.broadcast_to(p, (releases,)) for p in batch.params)
    theta = np.empty((chains, draws, releases, 2))
    accepted = np.empty((chains, draws, releases), dtype=bool)
    for b in range(releases):

        def log_posterior(z, b=b):
            z = np.atleast_2d(z)
            sigma2 = np.exp(z[:, 1])
            mean, cov = moments(np.stack([z[:, 0], sigma2], -1))
            loglik = pair_log_likelihood(
                released=y[b], mean=mean[:, :2], cov=cov[:, :2, :2], scale=scale
            ).log_likelihood
            logprior = (
                stats.invgamma.logpdf(sigma2, alpha[b], scale=beta[b])
                + z[:, 1]  # the Jacobian of σ² = e^z
                + stats.norm.logpdf(z[:, 0], mean0[b], np.sqrt(sigma2 / kappa[b]))
            )
            return np.where(np.isfinite(loglik), loglik + logprior, -np.inf)

        # One proposal per release, fitted from the prior's location and spread as
        # IndependenceStep fits it (a grid from the prior's box, mixed with a proposal fitted at
        # the mode where the posterior is far narrower), serves every chain: each is an exact
        # chain started from its own prior draw.
        prior_mean_s2 = beta[b] / max(alpha[b] - 1.0, 0.5)
        loc = np.array([mean0[b], np.log(prior_mean_s2)])
        spread = np.diag([prior_mean_s2 / kappa[b], 1.0 / alpha[b]])
        proposal = fit_plane_proposal(rng, log_posterior, loc, loc, spread)
        for c in range(chains):
            start_theta = family.draw_conjugate(
                rng, (mean0[b : b + 1], kappa[b : b + 1], alpha[b : b + 1], beta[b : b + 1])
            )[0]
            start = np.array([start_theta[0], np.log(start_theta[1])])
            out = independence_chain(rng, log_posterior, proposal, start, draws)
            theta[c, :, b] = np.stack([out.draws[:, 0], np.exp(out.draws[:, 1])], -1)
            accepted[c, :, b] = out.accepted
    flat = theta.reshape(-1, 2)
    mean, cov = moments(flat)
    y_rows = np.broadcast_to(y, theta.shape).reshape(-1, 2)
    s_hat = draw_pair_suffstat(
        rng, released=y_rows, mean=mean[:, :2], cov=cov[:, :2, :2], scale=scale
    )
    s_all = conditional_all_records(rng, family, n, mean, cov, s_hat)
    sigma2 = draw_noise_variance(rng, residual=y_rows - s_hat, scale=scale)
    shape = theta.shape[:-1]
    return (
        theta,
        np.concatenate([s_hat, s_all], -1).reshape(*shape, 4),
        sigma2.reshape(*shape, 2),
        accepted,
    )
