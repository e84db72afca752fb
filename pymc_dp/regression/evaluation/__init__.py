"""Regression baselines (non-private, naive) and posterior predictive checks."""

from pymc_dp.regression.evaluation.baselines import (
    naive_regression_posterior,
    nonprivate_regression_posterior,
)
from pymc_dp.regression.evaluation.predictive import (
    posterior_predictive,
    predictive_coverage,
    predictive_draws,
)

__all__ = [
    "naive_regression_posterior",
    "nonprivate_regression_posterior",
    "posterior_predictive",
    "predictive_coverage",
    "predictive_draws",
]
