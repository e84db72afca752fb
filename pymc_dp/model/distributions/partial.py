"""Latent variables of a partially collapsed node (a released vector statistic).

For a vector statistic the node is y | θ, σ² ~ N(nμ(θ), nΣ(θ) + diag σ²) with s integrated out,
σ² ~ Exponential(rate 1/(2b²)) per component (so that y | θ is Laplace around s), and s kept as
an auxiliary variable that only the Gibbs steps use. The sampler is the partially collapsed
Gibbs sampler of van Dyk & Park (2008), in this order:

1. θ | σ², y (s integrated out): NUTS on the model's logp, which holds no s;
2. s | θ, σ², y: :class:`~pymc_dp.NormProductStep`;
3. σ² | s, y: :class:`~pymc_dp.NoiseVarianceStep`.

Step 1 draws from a marginal of the joint (θ, s) | σ², y and step 2 completes it, so steps 1–2
are a blocked draw of (θ, s) | σ², y; step 3 is an ordinary Gibbs draw. The variables here make
that possible in PyMC: s carries the CLT moments as parameters (the step reads them) but adds
nothing to the logp, and σ² carries y and s as parameters (the step reads the residual) while
its logp is its prior.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt

from pymc_dp.model.distributions.noise_variance import LaplaceNoiseVariance, NoiseVarianceRV
from pymc_dp.model.distributions.suffstat import SimplexSuffStatRV, SuffStatSimplexNormal
from pymc_dp.model.distributions.window import WindowSuffStat, WindowSuffStatRV, in_window_region

__all__ = [
    "AuxiliarySimplexSuffStat",
    "AuxiliaryWindowSuffStat",
    "LaplaceMixingVariance",
    "MixingVarianceRV",
]


class MixingVarianceRV(NoiseVarianceRV):
    """σ² ~ Exponential(rate 1/(2b²)): the Laplace mixing variance before y is seen."""

    name = "laplace_mixing_variance"
    _print_name = ("LaplaceMixingVariance", "\\operatorname{LaplaceMixingVariance}")

    @classmethod
    def rng_fn(cls, rng, released, suffstat, scale, size):  # noqa: D102
        shape = np.broadcast_shapes(np.shape(released), np.shape(suffstat), np.shape(scale))
        return rng.exponential(2 * np.square(scale), size=size if size is not None else shape)


class LaplaceMixingVariance(LaplaceNoiseVariance):
    """Laplace mixing variance σ² with its prior density, Exponential(rate 1/(2b²)).

    Parameters are those of :class:`~pymc_dp.model.distributions.LaplaceNoiseVariance` (y, s, b);
    only b enters the density, y and s are there for :class:`~pymc_dp.NoiseVarianceStep`.
    """

    rv_op = MixingVarianceRV()

    def logp(value, released, suffstat, scale):  # noqa: D102
        b2 = pt.sqr(scale)
        logp = -pt.log(2 * b2) - value / (2 * b2) + 0 * (released - suffstat)
        return pt.switch(value > 0, logp, -np.inf)


class AuxiliarySimplexSuffStatRV(SimplexSuffStatRV):
    """Category counts kept beside a collapsed likelihood (no density of their own)."""

    name = "auxiliary_simplex_suffstat"


class AuxiliarySimplexSuffStat(SuffStatSimplexNormal):
    """Category counts s on the scaled simplex, adding nothing to the model's logp."""

    rv_op = AuxiliarySimplexSuffStatRV()

    def logp(value, mean, cov, total):  # noqa: D102
        return pt.switch(pt.any(value < 0, axis=-1), -np.inf, 0.0 * pt.sum(value, axis=-1))


class AuxiliaryWindowSuffStatRV(WindowSuffStatRV):
    """The stacked (ŝ, s) kept beside a collapsed likelihood (no density of their own)."""

    name = "auxiliary_window_suffstat"


class AuxiliaryWindowSuffStat(WindowSuffStat):
    """The stacked (ŝ, s) on its valid region, adding nothing to the model's logp."""

    rv_op = AuxiliaryWindowSuffStatRV()

    def logp(value, mean, cov, lower, upper, out_lower, out_upper, total, quadratic):  # noqa: D102
        inside = in_window_region(value, lower, upper, out_lower, out_upper, total, quadratic)
        return pt.switch(inside, 0.0, -np.inf)
