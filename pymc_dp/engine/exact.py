"""Exact-likelihood posteriors of released counts for many releases at once (no CLT).

The batched engine's ``likelihood="exact"`` paths (:func:`pymc_dp.engine.gibbs.sample_gibbs`):

- **Binomial / Bernoulli**: θ | y is one-dimensional with the exact likelihood
  Σ_s Binomial(s; N, θ) k(y - s) (:func:`~pymc_dp.kernels.exact_counts.binomial_log_likelihood`),
  tabulated on an adaptive grid over logit θ and drawn from independently, then s | θ, y exactly.
- **Categorical**: an exact Gibbs sampler, θ | s from its Dirichlet, then s | θ, y exactly by
  backward sampling over categories
  (:func:`~pymc_dp.kernels.exact_counts.draw_multinomial_suffstat`).

- **Windowed Poisson / Geometric**: θ | y on the same adaptive grid over z (log λ, logit p), with
  the exact likelihood of the window sum (the n-fold convolution of one record's windowed
  statistic, :func:`~pymc_dp.kernels.exact_windows.window_sum_log_likelihood`), then the window
  sum ŝ | θ, y exactly; the statistic of all records given ŝ comes from their joint CLT, as in
  the collapsed engine (it is not part of the likelihood).

σ² | s, y (the Laplace scale mixture) follows for Laplace noise, so the trace has the same
variables as the CLT paths.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy import stats

from pymc_dp.engine.batch import ReleaseBatch
from pymc_dp.engine.collapsed import log_posterior
from pymc_dp.engine.moments import statistic_of_all_records
from pymc_dp.kernels import draw_from_grid, draw_noise_variance, grid_density
from pymc_dp.kernels.exact_counts import (
    NoiseLaw,
    binomial_log_likelihood,
    draw_binomial_suffstat,
    draw_multinomial_suffstat,
)
from pymc_dp.kernels.exact_windows import (
    draw_window_sum,
    window_record_log_pmf,
    window_sum_log_likelihood,
)

__all__ = ["sample_exact_binomial", "sample_exact_categorical", "sample_exact_window"]

_MAX_ELEMENTS = 2**24
"""Largest array (in float64 elements) an exact kernel builds at once; batches are split."""


def _chunks(rows: int, per_row: int) -> list[slice]:
    step = max(1, _MAX_ELEMENTS // max(per_row, 1))
    return [slice(i, min(i + step, rows)) for i in range(0, rows, step)]


def _noise_variance(
    rng: np.random.Generator, noise: NoiseLaw, residual: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    if noise.kind != "laplace":
        return np.full(residual.shape, np.nan)
    return draw_noise_variance(rng, residual=residual, scale=noise.scale)


def sample_exact_binomial(
    rng: np.random.Generator, batch: ReleaseBatch, *, draws: int
) -> tuple[npt.NDArray, npt.NDArray, npt.NDArray]:
    """Independent draws of (θ, s, σ²) | y for a batch of released Binomial counts.

    As :func:`~pymc_dp.engine.collapsed.sample_collapsed`, with the exact likelihood: ``batch``
    holds counts (shape ``(B,)``) of a Bernoulli or Binomial family and their Beta priors
    ``(alpha, beta)``, each of shape ``(B,)``. σ² is NaN for integer noise, which has no scale
    mixture.
    """
    noise = batch.noise
    y = np.asarray(batch.released, dtype=np.float64).reshape(-1)
    alpha, beta = (np.asarray(p, dtype=np.float64).reshape(-1, 1) for p in batch.params)
    total = batch.n * batch.family.trials
    theta = np.empty((draws, y.size))
    for rows in _chunks(y.size, 3 * 1024 * (total + 1)):
        y_c, a_c, b_c = y[rows, None], alpha[rows], beta[rows]

        def log_density(z, y_c=y_c, a_c=a_c, b_c=b_c):
            # logit-scale density: Beta(θ) · θ(1 - θ) (the Jacobian) · p(y | θ).
            log_theta, log_rest = -np.logaddexp(0.0, -z), -np.logaddexp(0.0, z)
            prior = a_c * log_theta + b_c * log_rest
            p = np.exp(log_theta)
            return prior + binomial_log_likelihood(y_c, p, total, noise)

        count = y_c[:, 0].clip(0, total)  # the bracket search starts at the noiseless posterior
        center = stats.beta.median(a_c[:, 0] + count, b_c[:, 0] + total - count)
        center = np.log(center) - np.log1p(-center)
        grid = grid_density(log_density, center=center)
        z = draw_from_grid(rng, grid, size=draws)
        theta[:, rows] = 1.0 / (1.0 + np.exp(-z))
    s = np.empty_like(theta)
    for rows in _chunks(y.size, draws * (total + 1)):
        s[:, rows] = draw_binomial_suffstat(
            rng, released=y[rows], theta=theta[:, rows], total=total, noise=noise
        )
    sigma2 = _noise_variance(rng, noise, y - s)
    return theta, s[..., None], sigma2[..., None]


def sample_exact_categorical(
    rng: np.random.Generator, batch: ReleaseBatch, *, draws: int, tune: int
) -> tuple[npt.NDArray, npt.NDArray, npt.NDArray]:
    """Exact Gibbs draws of (θ, s, σ²) | y for a batch of released Categorical counts.

    θ | s is the conjugate Dirichlet and s | θ, y the exact multinomial conditional, so the
    chain targets the exact posterior (no CLT). ``batch`` holds the counts ``(B, K)`` and
    ``params = (alpha,)`` of shape ``(B, K)``; ``draws`` are kept after ``tune`` discarded
    iterations. Returns θ, s and σ², each of shape ``(draws, B, K)``.
    """
    family, n, noise = batch.family, batch.n, batch.noise
    y = np.asarray(batch.released, dtype=np.float64)
    (alpha,) = batch.params
    alpha = np.broadcast_to(np.asarray(alpha, dtype=np.float64), y.shape)
    theta = family.draw_conjugate(rng, (alpha,))
    keep = [np.empty((draws, *y.shape)) for _ in range(3)]
    chunks = _chunks(y.shape[0], (n + 1) ** 2)
    s = np.empty_like(y)
    for it in range(tune + draws):
        for rows in chunks:
            s[rows] = draw_multinomial_suffstat(
                rng, released=y[rows], theta=theta[rows], n=n, noise=noise
            )
        theta = family.draw_conjugate(rng, family.conjugate_update((alpha,), s, n))
        if it >= tune:
            keep[0][it - tune], keep[1][it - tune] = theta, s
            keep[2][it - tune] = _noise_variance(rng, noise, y - s)
    return keep[0], keep[1], keep[2]


def sample_exact_window(
    rng: np.random.Generator, batch: ReleaseBatch, *, draws: int
) -> tuple[npt.NDArray, npt.NDArray, npt.NDArray]:
    """Independent draws of (θ, (ŝ, s), σ²) | y for a batch of windowed count releases.

    ``batch`` holds window sums (shape ``(B,)``) of a Poisson or Geometric family, their
    window and conjugate priors (each ``(B,)``); ``draws`` are per release. Returns θ, the
    stacked (ŝ, s) and σ², of shapes ``(draws, B)``, ``(draws, B, 2)`` and ``(draws, B, 1)``
    (σ² is NaN for integer noise).
    """
    family, n, bounds, noise = batch.family, batch.n, batch.bounds, batch.noise
    y = np.asarray(batch.released, dtype=np.float64).reshape(-1)
    params = batch.params
    window = tuple(int(v) for v in family.latent_window(bounds))
    log_prior = log_posterior(family, n, bounds, clt=False)
    cols = [y, np.ones_like(y), *(np.broadcast_to(p, y.shape) for p in params)]
    cols = [np.asarray(c, dtype=np.float64)[:, None] for c in cols]

    def log_density(z):
        theta = family.prior_transform_backward(z)
        log_q = window_record_log_pmf(family.record_distribution(theta), window)
        log_lik, _ = window_sum_log_likelihood(log_q, n, y[:, None], noise)
        return log_prior(np.asarray(z, dtype=np.float64), *cols) + log_lik

    start = family.draw_conjugate(rng, tuple(np.broadcast_to(p, y.shape) for p in params))
    grid = grid_density(log_density, center=family.prior_transform_forward(start))
    theta = family.prior_transform_backward(draw_from_grid(rng, grid, size=draws))
    log_q = window_record_log_pmf(family.record_distribution(theta), window)
    s_hat = draw_window_sum(rng, log_q, n, y, noise)
    s_all = statistic_of_all_records(rng, family, n, bounds, theta, s_hat)
    sigma2 = _noise_variance(rng, noise, y - s_hat)
    return theta, np.stack([s_hat, s_all], axis=-1), sigma2[..., None]
