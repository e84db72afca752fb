"""The DP Gibbs sampler for many independent releases at once, without PyMC's per-model cost.

:func:`sample_gibbs` runs Algorithm 1 of Bernstein & Sheldon (2018) with the same kernels as the
step methods, advancing a whole batch of releases (calibration trials, chains) per NumPy call.
``pm.sample`` is the interface for models; this is for studies that need thousands of posteriors.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
import pytensor
from pytensor.graph.replace import vectorize_graph

from pymc_dp._validation import check_int, check_positive, check_rng
from pymc_dp.families import ExponentialFamily
from pymc_dp.kernels import draw_noise_variance, draw_suffstat

__all__ = ["GibbsTrace", "sample_gibbs"]


class GibbsTrace(NamedTuple):
    """Draws after tuning, each with leading axes ``(draws, batch)``."""

    theta: npt.NDArray[np.float64]
    suffstat: npt.NDArray[np.float64]
    noise_variance: npt.NDArray[np.float64]
    n_fallback: int
    """Total number of s updates that used the bounded fallback."""


@functools.cache
def _batched_moments(family: ExponentialFamily):
    """Compile, once per family, θ of shape (batch, ...) -> (μ, Σ) batched over the batch."""
    core = family.prior_example().type()
    mu, sigma = family.moments(core)
    batched = pytensor.tensor.tensor(dtype=core.dtype, shape=(None, *core.type.shape))
    outs = vectorize_graph([mu, sigma], replace={core: batched})
    return pytensor.function([batched], outs)


def sample_gibbs(
    rng: int | np.random.Generator,
    *,
    family: ExponentialFamily,
    prior: Sequence[npt.ArrayLike],
    released: npt.ArrayLike,
    n: int,
    scale: float,
    draws: int,
    tune: int = 0,
) -> GibbsTrace:
    """Run the DP Gibbs sampler on a batch of releases of the same family and size.

    Parameters
    ----------
    rng
        Seed or generator.
    family
        A bounded family, e.g. ``Binomial(trials=5)``.
    prior
        Conjugate prior hyperparameters, each broadcastable to the batch: ``(alpha, beta)`` of
        shape ``(B,)`` or scalars; ``(alpha,)`` of shape ``(B, K)`` or ``(K,)``.
    released
        Released values y, shape ``(B, *family.stat_shape)``.
    n
        Number of records per release.
    scale
        Laplace scale Δ/ε of the releases.
    draws, tune
        Iterations kept and discarded.

    Returns
    -------
    GibbsTrace
        θ, s and σ² draws.

    Examples
    --------
    >>> from pymc_dp.families import Binomial
    >>> tr = sample_gibbs(0, family=Binomial(trials=5), prior=(3.0, 5.0),
    ...                   released=[1500.0, 400.0], n=1000, scale=50.0, draws=200, tune=100)
    >>> tr.theta.shape
    (200, 2)
    """
    rng = check_rng(rng)
    n = check_int(n, "n", minimum=1)
    scale = check_positive(scale, "scale")
    draws = check_int(draws, "draws", minimum=1)
    tune = check_int(tune, "tune", minimum=0)
    y = np.asarray(released, dtype=np.float64)
    scalar = family.stat_shape == ()
    if y.ndim != 1 + len(family.stat_shape) or y.shape[1:] != family.stat_shape:
        raise ValueError(f"released must have shape (batch, *{family.stat_shape}) (got {y.shape})")
    batch = y.shape[0]
    y_k = y[:, None] if scalar else y
    # Each conjugate hyperparameter has θ's shape, which is the statistic's shape here.
    params = tuple(
        np.broadcast_to(p, (batch, *family.stat_shape))
        for p in family.check_prior(prior, batched=True)
    )
    lower, upper = family.valid_region(n)
    total = None if scalar else np.full(batch, float(n))
    moments = _batched_moments(family)

    theta = family.draw_conjugate(rng, params)
    mu, _ = moments(theta)
    s = np.clip(n * np.reshape(mu, y_k.shape), lower + 1e-3 * upper, 0.999 * upper)
    if total is not None:
        s *= total[:, None] / np.sum(s, axis=-1, keepdims=True)
    sigma2 = np.full(y_k.shape, 2.0 * scale**2)

    keep_theta = np.empty((draws, *theta.shape))
    keep_s = np.empty((draws, *y.shape))
    keep_v = np.empty((draws, *y.shape))
    n_fallback = 0
    for it in range(tune + draws):
        s_stat = s[:, 0] if scalar else s
        theta = family.draw_conjugate(rng, family.conjugate_update(params, s_stat, n))
        mu, sigma = moments(theta)
        clt_mean = n * np.reshape(mu, y_k.shape)
        clt_cov = n * np.reshape(sigma, (*y_k.shape, y_k.shape[-1]))
        out = draw_suffstat(
            rng,
            clt_mean=clt_mean,
            clt_cov=clt_cov,
            released=y_k,
            noise_variance=sigma2,
            lower=lower,
            upper=upper,
            current=s,
            total=total,
        )
        s, n_fallback = out.value, n_fallback + out.n_fallback
        sigma2 = draw_noise_variance(rng, residual=y_k - s, scale=scale)
        if it >= tune:
            keep_theta[it - tune] = theta
            keep_s[it - tune] = np.reshape(s, y.shape)
            keep_v[it - tune] = np.reshape(sigma2, y.shape)
    return GibbsTrace(keep_theta, keep_s, keep_v, n_fallback)
