"""PyMC distributions for the latent variables of a :class:`~pymc_dp.NoisySuffStat` node.

The latent s (:mod:`~pymc_dp.model.distributions.suffstat`, and for a window
:mod:`~pymc_dp.model.distributions.window`) and the Laplace mixing variance σ²
(:mod:`~pymc_dp.model.distributions.noise_variance`) of the augmented model, and the auxiliary
variables of a partially collapsed one (:mod:`~pymc_dp.model.distributions.partial`). The laws of
the released y are in :mod:`pymc_dp.likelihoods`.
"""

from pymc_dp.model.distributions.noise_variance import LaplaceNoiseVariance, NoiseVarianceRV
from pymc_dp.model.distributions.partial import (
    AuxiliarySimplexSuffStat,
    AuxiliaryWindowSuffStat,
    LaplaceMixingVariance,
    MixingVarianceRV,
)
from pymc_dp.model.distributions.suffstat import (
    ScaledSimplexTransform,
    SuffStatNormal,
    SuffStatRV,
    SuffStatSimplexNormal,
)
from pymc_dp.model.distributions.window import WindowSuffStat, WindowSuffStatRV

__all__ = [
    "AuxiliarySimplexSuffStat",
    "AuxiliaryWindowSuffStat",
    "LaplaceMixingVariance",
    "LaplaceNoiseVariance",
    "MixingVarianceRV",
    "NoiseVarianceRV",
    "ScaledSimplexTransform",
    "SuffStatNormal",
    "SuffStatRV",
    "SuffStatSimplexNormal",
    "WindowSuffStat",
    "WindowSuffStatRV",
]
