"""The curator's side of regression: the statistic, the release, its record, its sensitivity.

:mod:`~pymc_dp.curator.regression.statistics` lays out [X, y]ᵀ[X, y] (the analyst's side reads
it too), :func:`release_regression` releases it (:mod:`~pymc_dp.curator.regression.release`) as a
:class:`RegressionRelease`, at the exact L1 or L2 sensitivity over the public box
(:mod:`~pymc_dp.curator.regression.sensitivity`). Like all of :mod:`pymc_dp.curator`, it imports
no inference code.
"""

from pymc_dp.curator.regression.record import MomentRelease, RegressionRelease
from pymc_dp.curator.regression.release import release_regression
from pymc_dp.curator.regression.sensitivity import regression_sensitivity

__all__ = ["MomentRelease", "RegressionRelease", "regression_sensitivity", "release_regression"]
