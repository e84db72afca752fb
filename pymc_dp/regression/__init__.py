"""Private Bayesian linear regression (Bernstein & Sheldon 2019), laid out by role.

The curator's side is :mod:`pymc_dp.curator.regression`: :func:`release_regression` publishes
the noisy statistic [X, y]ᵀ[X, y] (its layout in :mod:`~pymc_dp.curator.regression.statistics`;
optionally with noisy moments of the covariates) as a :class:`RegressionRelease`, at the exact
sensitivity; its names are re-exported here.

This package is the analyst's side: :mod:`~pymc_dp.regression.kernels` (pure NumPy: CLT
moments, the Normal–Inverse-Gamma and normal–inverse-Wishart updates, the collapsed target and its
moves), :mod:`~pymc_dp.regression.model` (:class:`NoisyRegressionStat` and the step methods that
``pm.sample`` assigns to it, registered when it is imported), :mod:`~pymc_dp.regression.engine`
(batched samplers: Gibbs-SS and the default collapsed sampler) and
:mod:`~pymc_dp.regression.evaluation` (baselines, posterior predictive checks).
"""

from pymc_dp.curator.regression.release import MomentRelease, RegressionRelease, release_regression
from pymc_dp.curator.regression.sensitivity import regression_sensitivity
from pymc_dp.curator.regression.statistics import (
    pack_statistic,
    regression_statistic,
    released_pairs,
    unpack_statistic,
)
from pymc_dp.regression.engine.cells import CellTrace, sample_cell_regression
from pymc_dp.regression.engine.collapsed import CollapsedTrace, sample_regression
from pymc_dp.regression.engine.gibbs_ss import RegressionTrace, sample_gibbs_ss
from pymc_dp.regression.engine.levels import LevelTrace, sample_level_regression
from pymc_dp.regression.engine.mixed import MixedTrace, sample_mixed_regression
from pymc_dp.regression.engine.x_model_gibbs import XModelTrace, sample_x_model
from pymc_dp.regression.evaluation.baselines import (
    naive_regression_posterior,
    nonprivate_regression_posterior,
)
from pymc_dp.regression.evaluation.predictive import (
    posterior_predictive,
    predictive_coverage,
    predictive_draws,
)
from pymc_dp.regression.kernels.conjugate import NIG, check_nig, draw_nig, nig_update
from pymc_dp.regression.kernels.data_model import (
    NIW,
    check_niw,
    draw_niw,
    niw_update,
    normal_x_moments,
)
from pymc_dp.regression.kernels.moments import (
    XMoments,
    empirical_x_moments,
    suffstat_moments,
    x_moments_from_monomial_means,
    x_moments_from_release,
)
from pymc_dp.regression.kernels.psd import project_psd
from pymc_dp.regression.kernels.suffstat import draw_regression_suffstat, is_valid_statistic
from pymc_dp.regression.kernels.x_models import ShapePrior, binary_x_moments, shape_x_moments
from pymc_dp.regression.model.cell_step import RegressionCellStep
from pymc_dp.regression.model.collapsed_step import RegressionCollapsedStep
from pymc_dp.regression.model.default_prior import default_mixed_x_prior, default_x_prior
from pymc_dp.regression.model.level_step import RegressionLevelStep
from pymc_dp.regression.model.mcmc_ind import mcmc_ind_model, sample_mcmc_ind
from pymc_dp.regression.model.mixed_step import RegressionMixedStep
from pymc_dp.regression.model.noisy_regression import (
    NoisyRegressionInfo,
    NoisyRegressionStat,
    nig_prior_parameters,
    regression_attrs,
    statistic_labels,
)
from pymc_dp.regression.model.steps import (
    BinaryCovariateStep,
    CovariateModelStep,
    RegressionConjugateStep,
    RegressionNoiseVarianceStep,
    RegressionSuffStatStep,
)

__all__ = [
    "NIG",
    "NIW",
    "BinaryCovariateStep",
    "CellTrace",
    "CollapsedTrace",
    "CovariateModelStep",
    "LevelTrace",
    "MixedTrace",
    "MomentRelease",
    "NoisyRegressionInfo",
    "NoisyRegressionStat",
    "RegressionCellStep",
    "RegressionCollapsedStep",
    "RegressionConjugateStep",
    "RegressionLevelStep",
    "RegressionMixedStep",
    "RegressionNoiseVarianceStep",
    "RegressionRelease",
    "RegressionSuffStatStep",
    "RegressionTrace",
    "ShapePrior",
    "XModelTrace",
    "XMoments",
    "binary_x_moments",
    "check_nig",
    "check_niw",
    "default_mixed_x_prior",
    "default_x_prior",
    "draw_nig",
    "draw_niw",
    "draw_regression_suffstat",
    "empirical_x_moments",
    "is_valid_statistic",
    "mcmc_ind_model",
    "naive_regression_posterior",
    "nig_prior_parameters",
    "nig_update",
    "niw_update",
    "nonprivate_regression_posterior",
    "normal_x_moments",
    "pack_statistic",
    "posterior_predictive",
    "predictive_coverage",
    "predictive_draws",
    "project_psd",
    "regression_attrs",
    "regression_sensitivity",
    "regression_statistic",
    "release_regression",
    "released_pairs",
    "sample_cell_regression",
    "sample_gibbs_ss",
    "sample_level_regression",
    "sample_mcmc_ind",
    "sample_mixed_regression",
    "sample_regression",
    "sample_x_model",
    "shape_x_moments",
    "statistic_labels",
    "suffstat_moments",
    "unpack_statistic",
    "x_moments_from_monomial_means",
    "x_moments_from_release",
]
