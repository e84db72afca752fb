"""Batched regression samplers in NumPy: Gibbs-SS, the default collapsed one, other x-models.

Gibbs-SS is the paper's; :func:`sample_x_model` is Gibbs-SS with a binary or shape model of the
covariates.
"""

from pymc_dp.regression.engine.collapsed import CollapsedTrace, sample_regression
from pymc_dp.regression.engine.gibbs_ss import RegressionTrace, sample_gibbs_ss
from pymc_dp.regression.engine.x_model_gibbs import XModelTrace, sample_x_model

__all__ = [
    "CollapsedTrace",
    "RegressionTrace",
    "XModelTrace",
    "sample_gibbs_ss",
    "sample_regression",
    "sample_x_model",
]
