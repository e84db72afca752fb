"""PyMC distributions for the latent variables of a :class:`~pymc_dp.NoisySuffStat` node."""

from pymc_dp.distributions.collapsed import CollapsedLaplace, CollapsedLaplaceRV
from pymc_dp.distributions.collapsed_gaussian import CollapsedGaussian, CollapsedGaussianRV
from pymc_dp.distributions.noise_variance import LaplaceNoiseVariance, NoiseVarianceRV
from pymc_dp.distributions.partial import (
    AuxiliarySimplexSuffStat,
    AuxiliaryWindowSuffStat,
    LaplaceMixingVariance,
    MixingVarianceRV,
)
from pymc_dp.distributions.released_normal import ReleasedNormal, small_mvnormal_logp
from pymc_dp.distributions.suffstat import (
    ScaledSimplexTransform,
    SuffStatNormal,
    SuffStatRV,
    SuffStatSimplexNormal,
)
from pymc_dp.distributions.window import WindowSuffStat, WindowSuffStatRV

__all__ = [
    "AuxiliarySimplexSuffStat",
    "AuxiliaryWindowSuffStat",
    "CollapsedGaussian",
    "CollapsedGaussianRV",
    "CollapsedLaplace",
    "CollapsedLaplaceRV",
    "LaplaceMixingVariance",
    "LaplaceNoiseVariance",
    "MixingVarianceRV",
    "NoiseVarianceRV",
    "ReleasedNormal",
    "ScaledSimplexTransform",
    "SuffStatNormal",
    "SuffStatRV",
    "SuffStatSimplexNormal",
    "WindowSuffStat",
    "WindowSuffStatRV",
    "small_mvnormal_logp",
]
