"""The built-in families' declarations, one module each (:mod:`pymc_dp.families.declaration`).

These modules import nothing heavy, so that ``pymc-dp --help`` lists the families, their options
and their priors without loading PyTensor; each names the class that implements its family.
"""

from __future__ import annotations

from pymc_dp.families.builtin.bernoulli import BERNOULLI
from pymc_dp.families.builtin.binomial import BINOMIAL
from pymc_dp.families.builtin.categorical import CATEGORICAL
from pymc_dp.families.builtin.exponential import EXPONENTIAL
from pymc_dp.families.builtin.gamma import GAMMA
from pymc_dp.families.builtin.geometric import GEOMETRIC
from pymc_dp.families.builtin.lognormal import LOGNORMAL, LOGNORMAL_KNOWN_SIGMA
from pymc_dp.families.builtin.normal import NORMAL, NORMAL_KNOWN_SIGMA
from pymc_dp.families.builtin.poisson import POISSON

__all__ = [
    "BERNOULLI",
    "BINOMIAL",
    "BUILTIN_FAMILIES",
    "CATEGORICAL",
    "EXPONENTIAL",
    "GAMMA",
    "GEOMETRIC",
    "LOGNORMAL",
    "LOGNORMAL_KNOWN_SIGMA",
    "NORMAL",
    "NORMAL_KNOWN_SIGMA",
    "POISSON",
]

BUILTIN_FAMILIES = (
    BERNOULLI,
    BINOMIAL,
    CATEGORICAL,
    EXPONENTIAL,
    GAMMA,
    POISSON,
    GEOMETRIC,
    NORMAL_KNOWN_SIGMA,
    NORMAL,
    LOGNORMAL_KNOWN_SIGMA,
    LOGNORMAL,
)
"""Registered first, in this order: the order ``pymc-dp --help`` lists them in, and the order
in which families claim a PyMC distribution (a known-σ family first: it claims ``pm.Normal``
with a constant σ, the other family any ``pm.Normal``)."""
