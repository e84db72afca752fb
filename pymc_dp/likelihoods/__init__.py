"""p(y | θ) of a release: a law of the statistic s combined with the mechanism's noise law.

The law of s is the CLT normal N(nμ(θ), nΣ(θ)), or exact: a sum over every count
(:mod:`~pymc_dp.likelihoods.exact`, :mod:`~pymc_dp.likelihoods.exact_windows`), a lattice for a
window sum of continuous records (:mod:`~pymc_dp.likelihoods.lattice_windows`). The noise law is
Laplace, OpenDP's discrete Laplace, or the (discrete) Gaussian (:func:`noise_law`). Integrating
s out gives the collapsed normal–Laplace (:mod:`~pymc_dp.likelihoods.collapsed`), normal–normal
(:mod:`~pymc_dp.likelihoods.collapsed_gaussian`) and bivariate normal–Laplace
(:mod:`~pymc_dp.likelihoods.collapsed_pair`) likelihoods; :mod:`~pymc_dp.likelihoods.grouped`
holds one release per group. An exact law of s (:class:`~pymc_dp.likelihoods.exact.StatisticLaw`)
and a noise law make an observed node in one place,
:func:`~pymc_dp.likelihoods.exact.released_statistic`; the collapsed CLT likelihoods share
:class:`~pymc_dp.likelihoods.collapsed.CollapsedNormal`. :func:`choose_likelihood` is the
``likelihood="auto"`` rule.
"""

from pymc_dp.likelihoods.choice import (
    LIKELIHOODS,
    CltWarning,
    LikelihoodChoice,
    choose_likelihood,
    clt_trust,
    noise_law,
)
from pymc_dp.likelihoods.collapsed import CollapsedLaplace, CollapsedLaplaceRV
from pymc_dp.likelihoods.collapsed_gaussian import CollapsedGaussian, CollapsedGaussianRV
from pymc_dp.likelihoods.collapsed_pair import CollapsedLaplacePair
from pymc_dp.likelihoods.exact import (
    ExactReleasedCount,
    ExactReleasedCounts,
    StatisticLaw,
    released_statistic,
)
from pymc_dp.likelihoods.exact_windows import ExactReleasedWindowSum
from pymc_dp.likelihoods.lattice_windows import LatticeReleasedWindowSum
from pymc_dp.likelihoods.released_normal import ReleasedNormal, small_mvnormal_logp

__all__ = [
    "LIKELIHOODS",
    "CltWarning",
    "CollapsedGaussian",
    "CollapsedGaussianRV",
    "CollapsedLaplace",
    "CollapsedLaplacePair",
    "CollapsedLaplaceRV",
    "ExactReleasedCount",
    "ExactReleasedCounts",
    "ExactReleasedWindowSum",
    "LatticeReleasedWindowSum",
    "LikelihoodChoice",
    "ReleasedNormal",
    "StatisticLaw",
    "choose_likelihood",
    "clt_trust",
    "noise_law",
    "released_statistic",
    "small_mvnormal_logp",
]
