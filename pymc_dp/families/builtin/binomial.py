"""Successes out of public trials: the declaration of ``families.binomial.Binomial``."""

from __future__ import annotations

from pymc_dp.families.declaration import CommandLine, FamilyDeclaration, FamilyOption, PriorSpec

__all__ = ["BINOMIAL", "TRIALS"]

TRIALS = FamilyOption("trials", "trials", "trials per record", kind="count")
"""``--trials T``: the public number of trials of every record."""

BINOMIAL = FamilyDeclaration(
    name="binomial",
    implementation="pymc_dp.families.binomial:Binomial",
    prior=PriorSpec("Beta", ("alpha", "beta"), {"alpha": 1.0, "beta": 1.0}, ("p",)),
    command_line=CommandLine(records="successes out of --trials T", release="sensitivity T"),
    options=(TRIALS,),
    grouped_link="logit",
)
