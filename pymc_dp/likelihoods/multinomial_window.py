"""The exact likelihood of grouped Categorical counts as one PyTensor graph, for every backend.

For each group g, log p(y_g | θ_g) = log Σ_s Multinomial(s; n_g, θ_g) · Π_j k(y_gj − s_j), the sum
over the count vectors s (Σ_j s_j = n_g) that the noise lets through: those whose noise term
Π_j k(y_gj − s_j) is within e^-:data:`NOISE_TAIL` of its largest value over the simplex, k_max.
Every term left out is at most Multinomial(s; n_g, θ_g) · k_max · e^-40, so together at most
k_max · e^-40 whatever θ: the result is a lower bound on the exact likelihood L(θ) within a
relative e^-40 · k_max / L(θ) ≈ 4·10⁻¹⁸ · k_max / L(θ), below 10⁻¹² wherever L(θ) is above
4·10⁻⁶ of k_max (as for :func:`~pymc_dp.likelihoods.exact.binomial_exact_logp`; where θ has
posterior mass L(θ) is within a few orders of magnitude of its largest value).

The kept s depend on y only, so they, their log multinomial coefficients and their noise terms
are constants of the graph (:func:`window_table`, computed once at model build), and an
evaluation is one log-sum-exp of (coefficient + noise + Σ_j s_j log θ_gj) over a table of shape
(groups, terms), padded with −∞: a graph of a few elementwise operations and one reduction,
whose gradient PyTensor derives (E[s | y, θ] / θ). Being plain PyTensor it compiles for the C,
Numba (nutpie) and JAX (numpyro, blackjax) backends alike, where the recursion of
:class:`~pymc_dp.likelihoods.exact.GroupedMultinomialLogLikelihood` is a Python ``Op``. It is
used while the table holds at most :data:`WINDOW_MAX_TERMS` entries (padding included): a group
of n records and K = 3 has at most (n + 1)(n + 2)/2 of them (5151 at n = 100), fewer where the
noise is narrow (about 2(40 b)² at scale b, whatever n).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytensor.tensor as pt
from pytensor.tensor.variable import TensorVariable
from scipy import special

from pymc_dp.kernels.exact_counts import NOISE_TAIL, NoiseLaw

__all__ = ["NOISE_TAIL", "WINDOW_MAX_TERMS", "window_logp", "window_table"]


WINDOW_MAX_TERMS = 400_000
"""Largest table (groups × terms, padded) evaluated as a graph: about 2 ms per logp and
gradient on the C backend; larger tables use the compiled recursion ``Op``."""


def _group_terms(
    y: np.ndarray, n: int, noise: NoiseLaw, budget: float
) -> tuple[np.ndarray, np.ndarray] | None:
    """(s, constant) of one group's kept count vectors, or None if more than ``budget``."""
    k = y.shape[0]
    width = noise.half_width
    ranges = [
        np.arange(max(0, math.ceil(v - width)), min(n, math.floor(v + width)) + 1) for v in y[:-1]
    ]
    if math.prod(len(r) for r in ranges) > budget:
        return None
    head = np.stack([g.ravel() for g in np.meshgrid(*ranges, indexing="ij")], axis=-1)
    head = head.astype(np.float64).reshape(-1, k - 1)
    last = n - head.sum(axis=1)
    s = np.column_stack([head, last])[(last >= 0) & (last <= n)]
    if len(s) == 0:  # y far outside the noise's reach of the simplex: every s
        every = np.meshgrid(*[np.arange(n + 1.0)] * (k - 1), indexing="ij")
        head = np.stack([g.ravel() for g in every], axis=-1)
        head = head[head.sum(axis=1) <= n]
        s = np.column_stack([head, n - head.sum(axis=1)])
    noise_terms = np.sum(noise.logpdf(y[None, :] - s), axis=1)
    s = s[noise_terms >= np.max(noise_terms) - NOISE_TAIL]
    coefficient = special.gammaln(n + 1.0) - np.sum(special.gammaln(s + 1.0), axis=1)
    return s, coefficient


def window_table(
    released: npt.ArrayLike, sizes: Sequence[int], noise: NoiseLaw
) -> tuple[np.ndarray, np.ndarray] | None:
    """The kept count vectors of every group and their log coefficients, padded.

    Parameters
    ----------
    released
        The released counts, shape ``(G, K)``.
    sizes
        Records per group n_g.
    noise
        The release's noise law.

    Returns
    -------
    (s, coefficient) or None
        s of shape ``(G, T, K)`` and log n_g! − Σ_j log s_j! of shape ``(G, T)`` (−∞ on the
        padding), T the most terms of any group; None if G · T would exceed
        :data:`WINDOW_MAX_TERMS`.
    """
    y = np.asarray(released, dtype=np.float64)
    groups = [
        _group_terms(row, int(n), noise, WINDOW_MAX_TERMS) for row, n in zip(y, sizes, strict=True)
    ]
    if any(g is None for g in groups):
        return None
    most = max(len(s) for s, _ in groups)
    if most * len(groups) > WINDOW_MAX_TERMS:
        return None
    s_out = np.zeros((len(groups), most, y.shape[1]))
    c_out = np.full((len(groups), most), -np.inf)
    for g, (s, c) in enumerate(groups):
        s_out[g, : len(s)] = s
        c_out[g, : len(s)] = c
    return s_out, c_out


def window_logp(
    value: Any, theta: Any, table: tuple[np.ndarray, np.ndarray], noise: NoiseLaw
) -> TensorVariable:
    """Log p(y_g | θ_g) of each group, shape ``(G,)``, from :func:`window_table`'s table.

    ``value`` (the released counts) and ``theta`` have shape ``(G, K)``; the noise terms are
    computed from ``value`` (constants when it is the observed data).
    """
    s, coefficient = table
    value = pt.as_tensor_variable(value).astype("float64")
    theta = pt.as_tensor_variable(theta).astype("float64")
    d = value[:, None, :] - s
    b = float(noise.scale)
    per_count = -0.5 * pt.sqr(d / b) if noise.kind == "discrete-gaussian" else -pt.abs(d) / b
    fixed = coefficient + pt.sum(per_count, axis=-1) + s.shape[-1] * noise.log_constant
    # s_j log θ_j, with 0 · log 0 = 0 (a category of probability 0 holds no record).
    counts = pt.switch(s > 0, s * pt.log(theta)[:, None, :], 0.0)
    return pt.logsumexp(fixed + pt.sum(counts, axis=-1), axis=-1)
