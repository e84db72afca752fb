"""Exact likelihoods of released counts as PyTensor log-probabilities (no CLT), for NUTS.

The same sums as :mod:`pymc_dp.kernels.exact_counts`, written in PyTensor so that θ's gradient
comes from autodiff: a log-sum over every s = 0, …, N for a Binomial count, and the forward
recursion over categories for Multinomial counts. :func:`ExactReleasedCount` and
:func:`ExactReleasedCounts` are the observed nodes that
:class:`~pymc_dp.NoisySuffStat` adds with ``likelihood="exact"``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.tensor.variable import TensorVariable
from scipy.special import gammaln

from pymc_dp.kernels.exact_counts import (
    NoiseLaw,
    discrete_gaussian_log_normaliser,
    log_tanh_half_inverse,
)

__all__ = [
    "ExactReleasedCount",
    "ExactReleasedCounts",
    "binomial_exact_logp",
    "draw_noise",
    "multinomial_exact_logp",
    "noise_logpdf",
]


def noise_logpdf(d: Any, noise: NoiseLaw) -> TensorVariable:
    """Log density (probability, for integer laws) of the noise at ``d``, as PyTensor."""
    b = float(noise.scale)
    if noise.kind == "laplace":
        return -pt.abs(d) / b - math.log(2.0 * b)
    if noise.kind == "discrete-laplace":
        return -pt.abs(d) / b + log_tanh_half_inverse(b)
    if noise.kind == "discrete-gaussian":
        return -0.5 * pt.sqr(d / b) - discrete_gaussian_log_normaliser(b)
    raise ValueError(f"unknown noise kind {noise.kind!r}")


def draw_noise(rng: np.random.Generator, noise: NoiseLaw, size: Any) -> np.ndarray:
    """Draws of the noise law (for posterior predictive releases)."""
    b = float(noise.scale)
    if noise.kind == "laplace":
        return rng.laplace(0.0, b, size=size)
    if noise.kind == "discrete-laplace":
        # The difference of two geometric counts is two-sided geometric: P(k) ∝ e^{-|k|/b}.
        p = -math.expm1(-1.0 / b)
        return (rng.geometric(p, size=size) - rng.geometric(p, size=size)).astype(np.float64)
    if b >= 2.0:
        # Rounded normal draws: their law differs from the discrete Gaussian by a relative
        # O(1/(24 b²)), well below what predictive checks resolve.
        return np.round(rng.normal(0.0, b, size=size))
    half = math.ceil(40.0 * b) + 1
    k = np.arange(-half, half + 1)
    w = np.exp(-0.5 * (k / b) ** 2)
    return rng.choice(k, size=size, p=w / w.sum()).astype(np.float64)


def _xlogy(x: np.ndarray, y: Any) -> TensorVariable:
    """X · log y with 0 where x = 0 (x a constant array of counts)."""
    return pt.switch(pt.eq(x, 0), 0.0, x * pt.log(y))


def binomial_exact_logp(value: Any, theta: Any, total: int, noise: NoiseLaw) -> TensorVariable:
    """Log p(y | θ) = log Σ_s Binomial(s; total, θ) · k(y - s), summed over every s.

    ``value`` and ``theta`` are scalars (or broadcast elementwise); the sum is over a new last
    axis of length ``total + 1``.
    """
    s = np.arange(total + 1, dtype=np.float64)
    log_choose = gammaln(total + 1.0) - gammaln(s + 1.0) - gammaln(total - s + 1.0)
    theta = pt.as_tensor_variable(theta)[..., None]
    value = pt.as_tensor_variable(value)[..., None]
    terms = log_choose + _xlogy(s, theta) + _xlogy(total - s, 1.0 - theta)
    return pt.logsumexp(terms + noise_logpdf(value - s, noise), axis=-1)


def multinomial_exact_logp(
    value: Any, theta: Any, n: int, noise: NoiseLaw, categories: int
) -> TensorVariable:
    """Log p(y | θ) of K released counts, s ~ Multinomial(n, θ), by the forward recursion.

    ``value`` and ``theta`` have shape ``(K,)`` with K = ``categories``; cost O(K n²) per
    evaluation.
    """
    value = pt.as_tensor_variable(value)
    theta = pt.as_tensor_variable(theta)
    k = int(categories)
    s = np.arange(n + 1, dtype=np.float64)
    c, col = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    shift, mask = np.clip(c - col, 0, n), col <= c

    def terms(j):
        return _xlogy(s, theta[j]) - gammaln(s + 1.0) + noise_logpdf(value[j] - s, noise)

    table = terms(0)
    for j in range(1, k - 1):
        pair = table[shift] + terms(j)[None, :]
        table = pt.logsumexp(pt.switch(mask, pair, -np.inf), axis=-1)
    return gammaln(n + 1.0) + pt.logsumexp(table + terms(k - 1)[::-1])


def ExactReleasedCount(
    name: str, theta: Any, *, total: int, noise: NoiseLaw, **kwargs: Any
) -> TensorVariable:
    """A released Binomial count with s summed out exactly (a ``CustomDist``).

    Parameters
    ----------
    name
        Variable name.
    theta
        Success probability p.
    total
        Trials behind s: n · trials.
    noise
        The release's noise law.
    **kwargs
        Passed to :class:`pymc.CustomDist` (``observed``).
    """

    def random(p, rng=None, size=None):
        s = rng.binomial(total, p, size=size)
        return s + draw_noise(rng, noise, np.shape(s))

    return pm.CustomDist(
        name,
        theta,
        logp=lambda value, p: binomial_exact_logp(value, p, total, noise),
        random=random,
        signature="()->()",
        dtype="float64",
        **kwargs,
    )


def ExactReleasedCounts(
    name: str, theta: Any, *, n: int, categories: int, noise: NoiseLaw, **kwargs: Any
) -> TensorVariable:
    """K released counts with the multinomial s summed out exactly (a ``CustomDist``).

    Parameters
    ----------
    name
        Variable name.
    theta
        Category probabilities, shape ``(K,)``.
    n
        Number of records.
    categories
        K.
    noise
        The release's noise law.
    **kwargs
        Passed to :class:`pymc.CustomDist` (``observed``, ``dims``).
    """

    def random(p, rng=None, size=None):
        s = rng.multinomial(n, p, size=size)
        return s + draw_noise(rng, noise, np.shape(s))

    return pm.CustomDist(
        name,
        theta,
        logp=lambda value, p: multinomial_exact_logp(value, p, n, noise, categories),
        random=random,
        signature="(k)->(k)",
        dtype="float64",
        **kwargs,
    )
