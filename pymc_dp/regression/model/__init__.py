"""The PyMC adapters of regression: :class:`NoisyRegressionStat` and its step methods.

Importing this package registers the step methods (:mod:`~pymc_dp.regression.model.steps`,
:mod:`~pymc_dp.regression.model.collapsed_step`) with ``pm.sample``.
"""

from pymc_dp.regression.model.collapsed_step import RegressionCollapsedStep
from pymc_dp.regression.model.noisy_regression import NoisyRegressionStat
from pymc_dp.regression.model.steps import (
    BinaryCovariateStep,
    CovariateModelStep,
    RegressionConjugateStep,
    RegressionNoiseVarianceStep,
    RegressionSuffStatStep,
)

__all__ = [
    "BinaryCovariateStep",
    "CovariateModelStep",
    "NoisyRegressionStat",
    "RegressionCollapsedStep",
    "RegressionConjugateStep",
    "RegressionNoiseVarianceStep",
    "RegressionSuffStatStep",
]
