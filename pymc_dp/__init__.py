"""pymc_dp: noise-aware Bayesian inference from differentially private releases, in PyMC.

Curators release noisy sufficient statistics with :func:`release`; analysts add a
:class:`NoisySuffStat` node to an ordinary PyMC model and call ``pm.sample()``, which assigns the
DP Gibbs step methods of Bernstein & Sheldon (2018) to the node's variables.
"""

from pymc_dp.baselines import naive_posterior, nonprivate_posterior
from pymc_dp.budget import BudgetExceededError, PrivacyBudget
from pymc_dp.evaluation import (
    calibration_quantiles,
    ecdf,
    interval_coverage,
    ks_band,
    ks_statistic,
    mmd2_unbiased,
)
from pymc_dp.grouped_release import release_grouped
from pymc_dp.latent import sample_latent
from pymc_dp.noisy_suffstat import NoisySuffStat
from pymc_dp.regression import (
    CovariateModelStep,
    NoisyRegressionStat,
    RegressionConjugateStep,
    RegressionNoiseVarianceStep,
    RegressionRelease,
    RegressionSuffStatStep,
    release_regression,
)
from pymc_dp.release import Release, release
from pymc_dp.release_set import ReleaseSet
from pymc_dp.step_methods import (
    ConjugateStep,
    GridStep,
    IndependenceStep,
    NoiseVarianceStep,
    NormProductStep,
    RecordStep,
)

__version__ = "0.1.0"

__all__ = [
    "BudgetExceededError",
    "ConjugateStep",
    "CovariateModelStep",
    "GridStep",
    "IndependenceStep",
    "NoiseVarianceStep",
    "NoisyRegressionStat",
    "NoisySuffStat",
    "NormProductStep",
    "PrivacyBudget",
    "RecordStep",
    "RegressionConjugateStep",
    "RegressionNoiseVarianceStep",
    "RegressionRelease",
    "RegressionSuffStatStep",
    "Release",
    "ReleaseSet",
    "calibration_quantiles",
    "ecdf",
    "interval_coverage",
    "ks_band",
    "ks_statistic",
    "mmd2_unbiased",
    "naive_posterior",
    "nonprivate_posterior",
    "release",
    "release_grouped",
    "release_regression",
    "sample_latent",
]


def __getattr__(name: str):
    # ``pmdp.models`` after ``import pymc_dp as pmdp``, without importing it eagerly.
    if name == "models":
        import importlib

        return importlib.import_module("pymc_dp.models")
    raise AttributeError(f"module 'pymc_dp' has no attribute {name!r}")
