"""Likelihoods of grouped releases: one released count (or K counts) per group.

The exact per-group terms are those of :mod:`pymc_dp.likelihoods.exact` and
:mod:`pymc_dp.likelihoods.exact_windows`, in one observed node of shape ``(G,)`` whose
log-probability is elementwise over the groups, so ArviZ's pointwise log-likelihood has one entry
per group. ``likelihood="auto"`` decides per group: :class:`CltLaw` (the collapsed CLT, with s
integrated out in closed form) where the CLT is trusted and :class:`MixedLaw` to hold both kinds
of group in one node (:func:`GroupedMixed`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytensor
import pytensor.tensor as pt
from pytensor.graph.basic import Variable
from pytensor.tensor.variable import TensorVariable

from pymc_dp.families import ExponentialFamily
from pymc_dp.families.truncated import TruncatedFamily
from pymc_dp.kernels.exact_counts import NoiseLaw
from pymc_dp.likelihoods.clt import grouped_released_clt
from pymc_dp.likelihoods.collapsed import normal_laplace_logp, truncated_clt_draw
from pymc_dp.likelihoods.collapsed_gaussian import normal_normal_logp
from pymc_dp.likelihoods.exact import (
    BinomialCounts,
    MultinomialCounts,
    StatisticLaw,
    released_statistic,
)
from pymc_dp.likelihoods.exact_windows import WindowCounts

__all__ = [
    "CltLaw",
    "GroupedExactCount",
    "GroupedExactCounts",
    "GroupedExactWindowSum",
    "GroupedMixed",
    "MixedLaw",
]


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
    observed = kwargs.get("observed")
    known = None if observed is None or isinstance(observed, Variable) else observed
    law = MultinomialCounts(_sizes(n), categories, released=known)
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


class CltLaw(StatisticLaw):
    """s_g ~ N(n_g μ(θ_g), n_g Σ(θ_g)) on its region: the CLT, with s integrated out in closed form.

    The log density is the normal–Laplace convolution (:func:`normal_laplace_logp`) or, for
    Gaussian noise, the normal product (:func:`normal_normal_logp`) of each group, from one
    vectorised graph of the family's moments (:func:`grouped_released_clt`).

    Parameters
    ----------
    sizes
        Records per group n_g.
    family, bounds
        The family (one-number statistic) and its window (``None`` if it has none).
    """

    def __init__(
        self,
        sizes: Sequence[int],
        family: ExponentialFamily,
        bounds: tuple[float, float] | None,
    ):
        super().__init__(sizes)
        self.family, self.bounds = family, bounds

    def logp(self, value, theta, noise):  # noqa: D102
        mean, var, lower, upper = grouped_released_clt(self.family, theta, self.sizes, self.bounds)
        logpdf = normal_normal_logp if noise.kind == "discrete-gaussian" else normal_laplace_logp
        return logpdf(value, mean, var, lower, upper, float(noise.scale))

    @functools.cached_property
    def _moments(self) -> tuple[Any, np.ndarray, np.ndarray]:
        # Compiled on the first posterior predictive draw only.
        theta = pt.tensor("theta", dtype="float64", shape=(len(self.sizes),))
        mean, var, lower, upper = grouped_released_clt(self.family, theta, self.sizes, self.bounds)
        return pytensor.function([theta], [mean, var]), lower, upper

    def draw(self, rng, theta, size):  # noqa: D102
        moments, lower, upper = self._moments
        mean, var = moments(np.asarray(theta, dtype=np.float64).reshape(-1))
        shape = np.broadcast_shapes(size or (), mean.shape)
        return truncated_clt_draw(rng, mean, var, lower, upper, shape)


class MixedLaw(StatisticLaw):
    """One law for some groups and another for the rest: the groups' laws as chosen one by one.

    Parameters
    ----------
    parts
        ``(indices, law)`` pairs: the groups (positions, together every group once) and the law
        of their statistic, whose ``sizes`` are those groups' in that order.
    """

    def __init__(self, parts: Sequence[tuple[Sequence[int], StatisticLaw]]):
        self.parts = [(np.asarray(index, dtype=np.int64), law) for index, law in parts]
        count = sum(len(index) for index, _ in self.parts)
        if sorted(np.concatenate([index for index, _ in self.parts]).tolist()) != list(
            range(count)
        ):
            raise ValueError("the parts must hold every group exactly once")
        self.grouped, self.sizes = True, np.arange(count)  # the group positions

    def logp(self, value, theta, noise):  # noqa: D102
        value = pt.as_tensor_variable(value)
        out = pt.zeros(value.shape, dtype="float64")
        for index, law in self.parts:
            out = pt.set_subtensor(
                out[..., index], law.logp(value[..., index], theta[..., index], noise)
            )
        return out

    def draw(self, rng, theta, size):  # noqa: D102
        theta = np.asarray(theta, dtype=np.float64)
        out = np.zeros(np.broadcast_shapes(size or (), theta.shape))
        for index, law in self.parts:
            out[..., index] = law.draw(rng, theta[..., index], out[..., index].shape)
        return out


def GroupedMixed(
    name: str,
    theta: Any,
    *,
    parts: Sequence[tuple[Sequence[int], StatisticLaw]],
    noise: NoiseLaw,
    **kwargs: Any,
) -> TensorVariable:
    """Released scalar statistics of G groups, each group with the likelihood chosen for it.

    Parameters
    ----------
    parts
        As for :class:`MixedLaw`.
    name, theta, noise, **kwargs
        As for :func:`~pymc_dp.likelihoods.exact.released_statistic`; θ has shape ``(G,)``.
    """
    return released_statistic(name, theta, law=MixedLaw(parts), noise=noise, **kwargs)
