"""Batched regression samplers in NumPy: Gibbs-SS (the paper's) and the default collapsed one."""

from pymc_dp.regression.engine.collapsed import CollapsedTrace, sample_regression
from pymc_dp.regression.engine.gibbs_ss import RegressionTrace, sample_gibbs_ss

__all__ = ["CollapsedTrace", "RegressionTrace", "sample_gibbs_ss", "sample_regression"]
