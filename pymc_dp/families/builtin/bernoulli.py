"""Bernoulli records 0/1: the declaration of :class:`pymc_dp.families.binomial.Bernoulli`."""

from __future__ import annotations

from pymc_dp.families.declaration import CommandLine, FamilyDeclaration, PriorSpec

__all__ = ["BERNOULLI"]

BERNOULLI = FamilyDeclaration(
    name="bernoulli",
    implementation="pymc_dp.families.binomial:Bernoulli",
    # Bounded records: the uniform Beta is scale-free, so no window sets it.
    prior=PriorSpec("Beta", ("alpha", "beta"), {"alpha": 1.0, "beta": 1.0}, ("p",)),
    command_line=CommandLine(records="records 0/1 (or true/false)", release="sensitivity 1"),
    grouped_link="logit",
)
