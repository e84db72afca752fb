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
from pytensor.tensor.variable import TensorVariable

from pymc_dp.families.truncated import TruncatedFamily
from pymc_dp.kernels.exact_counts import NoiseLaw
from pymc_dp.likelihoods.exact import BinomialCounts, MultinomialCounts, released_statistic
from pymc_dp.likelihoods.exact_windows import WindowCounts

__all__ = ["GroupedExactCount", "GroupedExactCounts", "GroupedExactWindowSum"]


def _sizes(values: npt.ArrayLike) -> tuple[int, ...]:
    return tuple(int(v) for v in np.asarray(values).reshape(-1))


def GroupedExactCount(
    name: str, theta: Any, *, totals: npt.ArrayLike, noise: NoiseLaw, **kwargs: Any
) -> TensorVariable:
    """Released Binomial counts of G groups, each with s_g summed out exactly.

    Parameters
    ----------
    totals
        Trials behind each s_g: n_g · trials, shape ``(G,)``.
    name, theta, noise, **kwargs
        As for :func:`~pymc_dp.likelihoods.exact.released_statistic`; θ holds the success
        probabilities p_g, shape ``(G,)``, and the noise law is shared (same mechanism, ε and
        Δ in every group).
    """
    law = BinomialCounts(_sizes(totals))
    return released_statistic(name, theta, law=law, noise=noise, **kwargs)


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
    n
        Records per group n_g, shape ``(G,)``.
    categories
        K.
    name, theta, noise, **kwargs
        As for :func:`~pymc_dp.likelihoods.exact.released_statistic`; θ holds each group's
        category probabilities, shape ``(G, K)``, and ``dims`` name the group and the category.
    """
    law = MultinomialCounts(_sizes(n), categories)
    return released_statistic(name, theta, law=law, noise=noise, **kwargs)


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
    family, bounds
        As for :class:`~pymc_dp.likelihoods.exact_windows.WindowCounts` (the window shared).
    n
        Records per group n_g, shape ``(G,)``.
    name, theta, noise, **kwargs
        As for :func:`~pymc_dp.likelihoods.exact.released_statistic`; θ holds the record's
        parameter in each group (Poisson λ_g, Geometric p_g), shape ``(G,)``.
    """
    law = WindowCounts(_sizes(n), family, bounds)
    return released_statistic(name, theta, law=law, noise=noise, **kwargs)
