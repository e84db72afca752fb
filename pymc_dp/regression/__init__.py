"""Private Bayesian linear regression (Bernstein & Sheldon 2019).

Curator side: :func:`release_regression` publishes the noisy sufficient statistics (and,
optionally, noisy moments of the covariates) as a :class:`RegressionRelease`; the statistic layout
is in :mod:`~pymc_dp.regression.statistics` and the sensitivity in
:mod:`~pymc_dp.regression.sensitivity`. These modules import no inference code.

Analyst side (pure NumPy): CLT moments of the statistic (:mod:`~pymc_dp.regression.moments`),
the Normal–Inverse-Gamma conjugate update, the normal–inverse-Wishart data model of x
(:mod:`~pymc_dp.regression.data_model`, Gibbs-SS-Update), the Gibbs-SS kernels and the batched
sampler.

PyMC side: :class:`NoisyRegressionStat` puts a release into a PyMC model whose
Normal–Inverse-Gamma prior is written with ``pm.InverseGamma`` and ``pm.MvNormal``; importing
this package registers its Gibbs-SS step methods (:mod:`~pymc_dp.regression.steps`) with
``pm.sample``. :func:`posterior_predictive` gives predictive draws at new covariates.
"""

from pymc_dp.regression.baselines import (
    naive_regression_posterior,
    nonprivate_regression_posterior,
)
from pymc_dp.regression.collapsed_sampler import CollapsedTrace, sample_regression
from pymc_dp.regression.collapsed_step import RegressionCollapsedStep
from pymc_dp.regression.conjugate import NIG, check_nig, draw_nig, nig_update
from pymc_dp.regression.data_model import NIW, check_niw, draw_niw, niw_update, normal_x_moments
from pymc_dp.regression.default_prior import default_x_prior
from pymc_dp.regression.kernels import draw_regression_suffstat, is_valid_statistic
from pymc_dp.regression.mcmc_ind import mcmc_ind_model, sample_mcmc_ind
from pymc_dp.regression.moments import (
    XMoments,
    empirical_x_moments,
    suffstat_moments,
    x_moments_from_monomial_means,
    x_moments_from_release,
)
from pymc_dp.regression.noisy_regression import (
    NoisyRegressionInfo,
    NoisyRegressionStat,
    nig_prior_parameters,
    statistic_labels,
)
from pymc_dp.regression.predictive import (
    posterior_predictive,
    predictive_coverage,
    predictive_draws,
)
from pymc_dp.regression.psd import project_psd
from pymc_dp.regression.release import MomentRelease, RegressionRelease, release_regression
from pymc_dp.regression.sampler import RegressionTrace, sample_gibbs_ss
from pymc_dp.regression.sensitivity import regression_sensitivity
from pymc_dp.regression.statistics import (
    pack_statistic,
    regression_statistic,
    released_pairs,
    unpack_statistic,
)
from pymc_dp.regression.steps import (
    CovariateModelStep,
    RegressionConjugateStep,
    RegressionNoiseVarianceStep,
    RegressionSuffStatStep,
)

__all__ = [
    "NIG",
    "NIW",
    "CollapsedTrace",
    "CovariateModelStep",
    "MomentRelease",
    "NoisyRegressionInfo",
    "NoisyRegressionStat",
    "RegressionCollapsedStep",
    "RegressionConjugateStep",
    "RegressionNoiseVarianceStep",
    "RegressionRelease",
    "RegressionSuffStatStep",
    "RegressionTrace",
    "XMoments",
    "check_nig",
    "check_niw",
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
    "regression_sensitivity",
    "regression_statistic",
    "release_regression",
    "released_pairs",
    "sample_gibbs_ss",
    "sample_mcmc_ind",
    "sample_regression",
    "statistic_labels",
    "suffstat_moments",
    "unpack_statistic",
    "x_moments_from_monomial_means",
    "x_moments_from_release",
]
