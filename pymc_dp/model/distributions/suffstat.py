"""The latent sufficient statistic s: its CLT normal on the valid region, as PyMC distributions.

``s | θ ~ N(nμ(θ), nΣ(θ))`` (Eq. 1 of Bernstein & Sheldon 2018) restricted to where a sum of
records can lie. Two shapes occur for bounded families:

* :class:`SuffStatNormal`: one component in ``[lower, upper]`` (Bernoulli, Binomial), a normal
  truncated to the interval and normalised there.
* :class:`SuffStatSimplexNormal`: K counts that sum to ``total`` (Categorical). The covariance
  has rank K - 1; the density is that of the first K - 1 counts, restricted to counts ≥ 0.

Both are free variables of the model, sampled by :class:`~pymc_dp.NormProductStep`, and their
logp makes ``pm.sample(step=pm.NUTS(...))`` on the same model a cross-check.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.distributions.dist_math import check_parameters, log_diff_normal_cdf
from pymc.distributions.distribution import Continuous
from pymc.distributions.transforms import Interval, _default_transform
from pymc.logprob.transforms import SimplexTransform, Transform
from pytensor.tensor.random.op import RandomVariable

from pymc_dp.kernels import draw_truncated_normal
from pymc_dp.likelihoods.collapsed import truncated_clt_draw

__all__ = [
    "ScaledSimplexTransform",
    "SuffStatNormal",
    "SuffStatRV",
    "SuffStatSimplexNormal",
]


class SuffStatRV(RandomVariable):
    """Base class of the ops of a latent sufficient statistic (used to recognise s)."""

    dtype = "floatX"


class ScalarSuffStatRV(SuffStatRV):
    """s ~ N(mean, var) truncated to [lower, upper]."""

    name = "suffstat_normal"
    signature = "(),(),(),()->()"
    _print_name = ("SuffStatNormal", "\\operatorname{SuffStatNormal}")

    @classmethod
    def rng_fn(cls, rng, mean, var, lower, upper, size):
        return truncated_clt_draw(rng, mean, var, lower, upper, size)


class SimplexSuffStatRV(SuffStatRV):
    """K counts ~ N(mean, cov) on {s ≥ 0, Σ s = total}; cov has rank K - 1."""

    name = "suffstat_simplex_normal"
    signature = "(k),(k,k),()->(k)"
    _print_name = ("SuffStatSimplexNormal", "\\operatorname{SuffStatSimplexNormal}")

    @classmethod
    def rng_fn(cls, rng, mean, cov, total, size):
        if size is not None:
            mean = np.broadcast_to(mean, (*size, mean.shape[-1]))
        start = np.broadcast_to(np.asarray(total)[..., None] / mean.shape[-1], mean.shape)
        return draw_truncated_normal(
            rng, mean=mean, cov=cov, lower=0.0, upper=np.inf, current=start
        ).value


scalar_suffstat = ScalarSuffStatRV()
simplex_suffstat = SimplexSuffStatRV()


class SuffStatNormal(Continuous):
    """Latent scalar sufficient statistic: N(mean, var) truncated to ``[lower, upper]``.

    Parameters
    ----------
    mean, var
        CLT mean nμ(θ) and variance nΣ(θ).
    lower, upper
        Valid region of s, e.g. ``0`` and ``n * trials``.
    """

    rv_op = scalar_suffstat

    @classmethod
    def dist(cls, mean, var, lower, upper, **kwargs):  # noqa: D102
        return super().dist([mean, var, lower, upper], **kwargs)

    def support_point(rv, size, mean, var, lower, upper):  # noqa: D102
        # Strictly inside the interval, so the interval transform is finite.
        margin = 1e-3 * (upper - lower)
        point = pt.clip(mean, lower + margin, upper - margin)
        if not rv_size_is_none(size):
            point = pt.full(size, point)
        return point

    def logp(value, mean, var, lower, upper):  # noqa: D102
        sd = pt.sqrt(var)
        logp = (
            -0.5 * pt.log(2 * np.pi * var)
            - 0.5 * pt.sqr(value - mean) / var
            - log_diff_normal_cdf(mean, sd, upper, lower)
        )
        logp = pt.switch((value < lower) | (value > upper), -np.inf, logp)
        return check_parameters(logp, var > 0, lower < upper, msg="var > 0, lower < upper")


class ScaledSimplexTransform(Transform):
    """Maps K counts summing to ``total`` to K - 1 unconstrained reals (PyMC's simplex, scaled)."""

    # No underscore: PyMC reads the variable name back from "{name}_{transform}__" by its last one.
    name = "scaledsimplex"
    ndim_supp = 1

    def __init__(self) -> None:
        self._simplex = SimplexTransform()

    def forward(self, value, *inputs):  # noqa: D102
        return self._simplex.forward(value / inputs[-1], *inputs)

    def backward(self, value, *inputs):  # noqa: D102
        return inputs[-1] * self._simplex.backward(value, *inputs)

    def log_jac_det(self, value, *inputs):  # noqa: D102
        k_free = pt.cast(value.shape[-1], value.dtype)
        return self._simplex.log_jac_det(value, *inputs) + k_free * pt.log(inputs[-1])


class SuffStatSimplexNormal(Continuous):
    """Latent category counts: N(mean, cov) on ``{s ≥ 0, Σ s = total}``.

    The density is the normal density of the first K - 1 counts (the last is ``total`` minus
    their sum), left unnormalised over the orthant: that normaliser has no closed form and is
    one whenever the CLT is a sensible approximation.

    Parameters
    ----------
    mean
        CLT mean n·p, shape ``(K,)``.
    cov
        CLT covariance n(diag p - p pᵀ), shape ``(K, K)``.
    total
        n, the number of records.
    """

    rv_op = simplex_suffstat

    @classmethod
    def dist(cls, mean, cov, total, **kwargs):  # noqa: D102
        return super().dist([mean, cov, total], **kwargs)

    def support_point(rv, size, mean, cov, total):  # noqa: D102
        # Shrink the CLT mean towards the centre of the simplex so every count is positive.
        k = pt.cast(mean.shape[-1], mean.dtype)
        point = 0.99 * pt.clip(mean, 0, total) + 0.01 * total / k
        point = point * total / pt.sum(point, axis=-1, keepdims=True)
        if not rv_size_is_none(size):
            point = pt.full((*size, mean.shape[-1]), point)
        return point

    def logp(value, mean, cov, total):  # noqa: D102
        free = pm.logp(pm.MvNormal.dist(mean[..., :-1], cov[..., :-1, :-1]), value[..., :-1])
        return pt.switch(pt.any(value < 0, axis=-1), -np.inf, free)


def rv_size_is_none(size) -> bool:
    """Whether a distribution's ``size`` argument is absent (PyMC passes a NoneConst)."""
    return size is None or getattr(size.type, "__class__", None).__name__ == "NoneTypeT"


@_default_transform.register(ScalarSuffStatRV)
def _scalar_suffstat_transform(op, rv):
    return Interval(bounds_fn=lambda *inputs: (inputs[-2], inputs[-1]))


@_default_transform.register(SimplexSuffStatRV)
def _simplex_suffstat_transform(op, rv):
    return ScaledSimplexTransform()
