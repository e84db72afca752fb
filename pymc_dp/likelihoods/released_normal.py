"""The normal law of a released vector y | θ, σ² ~ N(m(θ), V(θ) + diag σ²), for NUTS.

A partially collapsed node evaluates this density, and its gradient, at every leapfrog step.
PyMC's ``MvNormal`` does so through a Cholesky factor and triangular solves, each a separate
Python-level Op call; for the k ≤ 4 components of a released statistic an unrolled LDLᵀ
factorisation in elementwise arithmetic is the same computation, as stable as Cholesky (no
square roots, no pivoting needed for a positive-definite matrix), and PyTensor fuses it into one
compiled loop. Larger k falls back to ``MvNormal``'s density.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.tensor.variable import TensorVariable

__all__ = ["ReleasedNormal", "small_mvnormal_logp"]

_UNROLL = 4
"""Largest k whose LDLᵀ is unrolled (k³/6 scalar terms: 11 at k = 4)."""


def small_mvnormal_logp(
    value: TensorVariable, mean: TensorVariable, cov: TensorVariable
) -> TensorVariable:
    """Log density of N(mean, cov) at ``value`` (last axis of length k; ``cov`` is k × k).

    For static k ≤ 4 by an unrolled LDLᵀ decomposition, cov = L D Lᵀ with unit lower L:
    log p = -½ (k log 2π + Σ log d_i + Σ z_i² / d_i) with L z = value - mean. A matrix that is
    not positive definite (some d_i ≤ 0) gives -inf.
    """
    k = value.type.shape[-1]
    if k is None or k > _UNROLL:
        return pm.logp(pm.MvNormal.dist(mean, cov), value)
    r = value - mean
    c = [[cov[..., i, j] for j in range(k)] for i in range(k)]
    lower = [[None] * k for _ in range(k)]
    d: list[Any] = []
    z: list[Any] = []
    for i in range(k):
        for j in range(i):
            acc = c[i][j] - sum(lower[i][m] * lower[j][m] * d[m] for m in range(j))
            lower[i][j] = acc / d[j]
        d.append(c[i][i] - sum(pt.sqr(lower[i][m]) * d[m] for m in range(i)))
        z.append(r[..., i] - sum(lower[i][m] * z[m] for m in range(i)))
    positive = pt.all(pt.stack([di > 0 for di in d]), axis=0)
    safe = [pt.switch(positive, di, 1.0) for di in d]
    quad = sum(pt.sqr(zi) / di for zi, di in zip(z, safe))
    logdet = sum(pt.log(di) for di in safe)
    logp = -0.5 * (k * np.log(2 * np.pi) + logdet + quad)
    return pt.switch(positive, logp, -np.inf)


def _random(mean: Any, cov: Any, rng: np.random.Generator, size: Any) -> np.ndarray:
    return rng.multivariate_normal(mean, cov, size=size, method="cholesky")


def ReleasedNormal(name: str, mean: Any, cov: Any, **kwargs: Any) -> TensorVariable:
    """A k-variate normal with :func:`small_mvnormal_logp` as its density (a ``CustomDist``).

    Parameters
    ----------
    name
        Variable name.
    mean, cov
        Mean ``(k,)`` and covariance ``(k, k)``.
    **kwargs
        Passed to :class:`pymc.CustomDist` (``observed``, ``dims``).
    """
    return pm.CustomDist(
        name,
        mean,
        cov,
        logp=lambda value, m, v: small_mvnormal_logp(value, m, v),
        random=_random,
        signature="(k),(k,k)->(k)",
        **kwargs,
    )
