"""Counts 0, 1, 2, ... over a window: the declaration of ``families.counts.Poisson``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pymc_dp.families.declaration import (
    DEFAULT_SHAPE,
    CommandLine,
    FamilyDeclaration,
    PriorSpec,
)

__all__ = ["POISSON", "poisson_window_prior"]


def poisson_window_prior(m: float, w: float, settings: Mapping[str, Any]) -> dict[str, float]:
    """λ ~ Gamma(2, 2/m): λ is the record mean, and the Gamma's mean shape/rate is m.

    Examples
    --------
    >>> poisson_window_prior(200.0, 400.0, {})
    {'alpha': 2.0, 'beta': 0.01}
    """
    return {"alpha": DEFAULT_SHAPE, "beta": DEFAULT_SHAPE / m}


POISSON = FamilyDeclaration(
    name="poisson",
    implementation="pymc_dp.families.counts:Poisson",
    windowed=True,
    prior=PriorSpec(
        "Gamma", ("alpha", "beta"), {"alpha": 1.0, "beta": 1.0}, ("lam",), "alpha=2, beta=2/m"
    ),
    window_prior=poisson_window_prior,
    command_line=CommandLine(records="counts 0, 1, 2, ...", release="window"),
    grouped_link="log",
)
