"""How posteriors are judged: calibration and utility measures, baselines, exact references.

:mod:`~pymc_dp.evaluation.measures` holds the measures of Bernstein & Sheldon (2018, §4)
(calibration quantiles, KS and its band, interval coverage, MMD);
:mod:`~pymc_dp.evaluation.baselines` the non-private and naive posteriors;
:mod:`~pymc_dp.evaluation.exact` the exact posterior of a Binomial release.
"""

from pymc_dp.evaluation.baselines import naive_posterior, nonprivate_posterior
from pymc_dp.evaluation.exact import GridPosterior, exact_posterior
from pymc_dp.evaluation.measures import (
    KSBand,
    KSResult,
    calibration_quantiles,
    ecdf,
    interval_coverage,
    ks_band,
    ks_statistic,
    mmd2_unbiased,
)

__all__ = [
    "GridPosterior",
    "KSBand",
    "KSResult",
    "calibration_quantiles",
    "ecdf",
    "exact_posterior",
    "interval_coverage",
    "ks_band",
    "ks_statistic",
    "mmd2_unbiased",
    "naive_posterior",
    "nonprivate_posterior",
]
