"""The Laplace noise variance σ², as a PyMC distribution conditional on (y, s).

The augmented model of Bernstein & Sheldon (2018) is σ² ~ Exp(rate 1/(2b²)), y ~ N(s, σ²). The
same joint density factorises as Laplace(y; s, b) · p(σ² | y, s). A :class:`NoisySuffStat` node
writes it the second way: y is an ordinary ``pm.Laplace`` observed node, and σ² is this
distribution, whose parameters are the released y and the latent s. The model's logp is then the
Laplace model exactly, while σ² is visible in the trace and sampled by
:class:`~pymc_dp.NoiseVarianceStep` from its exact conditional.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pymc.distributions.continuous import PositiveContinuous
from pymc.distributions.dist_math import check_parameters
from pytensor.tensor.random.op import RandomVariable

from pymc_dp.kernels import draw_noise_variance
from pymc_dp.model.distributions.suffstat import rv_size_is_none

__all__ = ["LaplaceNoiseVariance", "NoiseVarianceRV"]


class NoiseVarianceRV(RandomVariable):
    """σ² | y, s: 1/σ² ~ InverseGaussian(1/(b|y - s|), 1/b²)."""

    name = "laplace_noise_variance"
    signature = "(),(),()->()"
    dtype = "floatX"
    _print_name = ("LaplaceNoiseVariance", "\\operatorname{LaplaceNoiseVariance}")

    @classmethod
    def rng_fn(cls, rng, released, suffstat, scale, size):  # noqa: D102
        residual = np.asarray(released) - np.asarray(suffstat)
        if size is not None:
            residual = np.broadcast_to(residual, size)
        return draw_noise_variance(rng, residual=residual, scale=scale)


noise_variance = NoiseVarianceRV()


class LaplaceNoiseVariance(PositiveContinuous):
    """Mixing variance σ² of Laplace noise, conditional on the released y and the latent s.

    Parameters
    ----------
    released
        The released statistic y (the observed node, or its value).
    suffstat
        The latent sufficient statistic s.
    scale
        Laplace scale b = Δ/ε.

    Notes
    -----
    Density: N(y - s; 0, σ²) · Exp(σ²; 1/(2b²)) / Laplace(y - s; 0, b) (Appendix B).
    """

    rv_op = noise_variance

    @classmethod
    def dist(cls, released, suffstat, scale, **kwargs):  # noqa: D102
        return super().dist([released, suffstat, scale], **kwargs)

    def support_point(rv, size, released, suffstat, scale):  # noqa: D102
        # The prior mean 2b²; any positive start works for a Gibbs draw.
        point = 2 * pt.sqr(scale) + pt.zeros_like(released - suffstat)
        if not rv_size_is_none(size):
            point = pt.full(size, point)
        return point

    def logp(value, released, suffstat, scale):  # noqa: D102
        r = released - suffstat
        b2 = pt.sqr(scale)
        logp = (
            -0.5 * pt.log(2 * np.pi * value)
            - pt.sqr(r) / (2 * value)
            - pt.log(2 * b2)
            - value / (2 * b2)
            + pt.log(2 * scale)
            + pt.abs(r) / scale
        )
        logp = pt.switch(value > 0, logp, -np.inf)
        return check_parameters(logp, scale > 0, msg="scale > 0")
