"""Positive records modelled on log x, with σ unknown or known: the Normal's declarations.

They are those of :class:`pymc_dp.families.normal.LogNormal` and
:class:`~pymc_dp.families.normal.LogNormalKnownSigma`.
"""

from __future__ import annotations

from pymc_dp.families.builtin.normal import (
    NIG_PRIOR,
    NORMAL_MEAN_PRIOR,
    SIGMA,
    known_sigma_window_prior,
    nig_window_prior,
)
from pymc_dp.families.declaration import CommandLine, FamilyDeclaration

__all__ = ["LOGNORMAL", "LOGNORMAL_KNOWN_SIGMA"]

LOGNORMAL_KNOWN_SIGMA = FamilyDeclaration(
    name="lognormal_known_sigma",
    implementation="pymc_dp.families.normal:LogNormalKnownSigma",
    windowed=True,
    prior=NORMAL_MEAN_PRIOR,
    window_prior=known_sigma_window_prior,
    command_line=CommandLine(name="lognormal", condition="with sigma"),
    options=(SIGMA,),
    statistic_labels=("sum log x",),
)

LOGNORMAL = FamilyDeclaration(
    name="lognormal",
    implementation="pymc_dp.families.normal:LogNormal",
    windowed=True,
    prior=NIG_PRIOR,
    window_prior=nig_window_prior,
    command_line=CommandLine(records="x > 0: the same on log x", release="window"),
    statistic_labels=("sum log x", "sum (log x)^2"),
    grouped_link="location-scale",
)
