"""Exact likelihoods of grouped releases: one released count (or K counts) per group.

The per-group terms are those of :mod:`pymc_dp.likelihoods.exact` and
:mod:`pymc_dp.likelihoods.exact_windows` (the same functions, called once per group), stacked
into one observed node of shape ``(G,)`` whose log-probability is elementwise over the groups,
so ArviZ's pointwise log-likelihood has one entry per group.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pymc as pm
import pytensor.tensor as pt
from pytensor.tensor.variable import TensorVariable

from pymc_dp.families.truncated import TruncatedFamily
from pymc_dp.kernels.exact_counts import NoiseLaw
from pymc_dp.likelihoods.exact import binomial_exact_logp, draw_noise, multinomial_exact_logp
from pymc_dp.likelihoods.exact_windows import WindowSumLogLikelihood, window_log_q

__all__ = ["GroupedExactCount", "GroupedExactCounts", "GroupedExactWindowSum"]


def GroupedExactCount(
    name: str,
    theta: Any,
    *,
    totals: npt.ArrayLike,
    noise: NoiseLaw,
    **kwargs: Any,
) -> TensorVariable:
    """Released Binomial counts of G groups, each with s_g summed out exactly.

    Parameters
    ----------
    name
        Variable name.
    theta
        Success probabilities p_g, shape ``(G,)``.
    totals
        Trials behind each s_g: n_g · trials, shape ``(G,)``.
    noise
        The releases' noise law (shared: same mechanism, ε and Δ in every group).
    **kwargs
        Passed to :class:`pymc.CustomDist` (``observed``, ``dims``).
    """
    totals = [int(t) for t in np.asarray(totals).reshape(-1)]

    def logp(value, p):
        return pt.stack(
            [binomial_exact_logp(value[g], p[g], total, noise) for g, total in enumerate(totals)]
        )

    def random(p, rng=None, size=None):
        s = rng.binomial(np.asarray(totals), p, size=size)
        return s + draw_noise(rng, noise, np.shape(s))

    return pm.CustomDist(
        name, theta, logp=logp, random=random, signature="()->()", dtype="float64", **kwargs
    )


def GroupedExactCounts(
    name: str,
    theta: Any,
    *,
    n: npt.ArrayLike,
    categories: int,
    noise: NoiseLaw,
    **kwargs: Any,
) -> TensorVariable:
    """Released Categorical counts of G groups, each group's multinomial s summed out exactly.

    Parameters
    ----------
    name
        Variable name.
    theta
        Category probabilities of each group, shape ``(G, K)``.
    n
        Records per group n_g, shape ``(G,)``.
    categories
        K.
    noise
        The releases' noise law.
    **kwargs
        Passed to :class:`pymc.CustomDist` (``observed``, ``dims`` of the group and the
        category).
    """
    sizes = [int(v) for v in np.asarray(n).reshape(-1)]

    def logp(value, p):
        return pt.stack(
            [
                multinomial_exact_logp(value[g], p[g], n_g, noise, categories)
                for g, n_g in enumerate(sizes)
            ]
        )

    def random(p, rng=None, size=None):
        s = rng.multinomial(np.asarray(sizes), p, size=size)
        return s + draw_noise(rng, noise, np.shape(s))

    return pm.CustomDist(
        name, theta, logp=logp, random=random, signature="(k)->(k)", dtype="float64", **kwargs
    )


def GroupedExactWindowSum(
    name: str,
    theta: Any,
    *,
    family: TruncatedFamily,
    n: npt.ArrayLike,
    bounds: tuple[float, float],
    noise: NoiseLaw,
    **kwargs: Any,
) -> TensorVariable:
    """Released window sums of count records of G groups, each summed out exactly.

    Parameters
    ----------
    name
        Variable name.
    theta
        The record's parameter in each group (Poisson λ_g, Geometric p_g), shape ``(G,)``.
    family
        :class:`~pymc_dp.families.Poisson` or :class:`~pymc_dp.families.Geometric`.
    n
        Records per group n_g, shape ``(G,)``.
    bounds
        The shared window (a, b).
    noise
        The releases' noise law.
    **kwargs
        Passed to :class:`pymc.CustomDist` (``observed``, ``dims``).
    """
    sizes = [int(v) for v in np.asarray(n).reshape(-1)]
    lo, hi = family.latent_window(bounds)
    ops = [WindowSumLogLikelihood(size, noise) for size in sizes]

    def logp(value, theta):
        return pt.stack(
            [op(window_log_q(family, theta[g], bounds), value[g]) for g, op in enumerate(ops)]
        )

    def random(theta, rng=None, size=None):
        shape = tuple(size) if size is not None else np.shape(theta)
        theta = np.broadcast_to(np.asarray(theta, dtype=np.float64), shape)
        s = np.zeros(shape)
        for g, n_g in enumerate(sizes):
            x = family.record_distribution(theta[..., g, None]).rvs(
                size=(*shape[:-1], n_g), random_state=rng
            )
            s[..., g] = np.where((x >= lo) & (x <= hi), x, 0).sum(axis=-1)
        return s + draw_noise(rng, noise, s.shape)

    return pm.CustomDist(
        name, theta, logp=logp, random=random, signature="()->()", dtype="float64", **kwargs
    )
