"""Positive records of known shape: the declaration of :class:`pymc_dp.families.gamma.Gamma`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pymc_dp.families.declaration import (
    DEFAULT_SHAPE,
    CommandLine,
    FamilyDeclaration,
    FamilyOption,
    PriorSpec,
)

__all__ = ["GAMMA", "SHAPE", "gamma_window_prior"]

SHAPE = FamilyOption("shape", "alpha", "the known shape alpha of every record")
"""``--shape ALPHA``: the known shape k of every record (the family's ``alpha``)."""


def gamma_window_prior(m: float, w: float, settings: Mapping[str, Any]) -> dict[str, float]:
    """Rate ~ Gamma(2, m/k): the record mean k/rate has prior mean k·β/(shape − 1) = m.

    Examples
    --------
    >>> gamma_window_prior(200.0, 400.0, {"alpha": 2.0})
    {'alpha': 2.0, 'beta': 100.0}
    """
    return {"alpha": DEFAULT_SHAPE, "beta": (DEFAULT_SHAPE - 1.0) * m / float(settings["alpha"])}


GAMMA = FamilyDeclaration(
    name="gamma",
    implementation="pymc_dp.families.gamma:Gamma",
    windowed=True,
    prior=PriorSpec(
        "Gamma", ("alpha", "beta"), {"alpha": 1.0, "beta": 1.0}, ("rate",), "alpha=2, beta=m/k"
    ),
    window_prior=gamma_window_prior,
    command_line=CommandLine(records="x >= 0 with known --shape ALPHA", release="window"),
    options=(SHAPE,),
)
