"""PyMC distributions for the latent variables of a :class:`~pymc_dp.NoisySuffStat` node."""

from pymc_dp.distributions.noise_variance import LaplaceNoiseVariance, NoiseVarianceRV
from pymc_dp.distributions.suffstat import (
    ScaledSimplexTransform,
    SuffStatNormal,
    SuffStatRV,
    SuffStatSimplexNormal,
)
from pymc_dp.distributions.window import WindowSuffStat, WindowSuffStatRV

__all__ = [
    "LaplaceNoiseVariance",
    "NoiseVarianceRV",
    "ScaledSimplexTransform",
    "SuffStatNormal",
    "SuffStatRV",
    "SuffStatSimplexNormal",
    "WindowSuffStat",
    "WindowSuffStatRV",
]
