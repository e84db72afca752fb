"""Trials to a first success: the declaration of ``families.counts.Geometric``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pymc_dp.families.declaration import (
    DEFAULT_SHAPE,
    CommandLine,
    FamilyDeclaration,
    PriorSpec,
)

__all__ = ["GEOMETRIC", "geometric_window_prior"]


def geometric_window_prior(m: float, w: float, settings: Mapping[str, Any]) -> dict[str, float]:
    """P ~ Beta(2, m − 1): E[1/p] = (α + β − 1)/(α − 1) = m (m ≥ 1; β kept > 0).

    Examples
    --------
    >>> geometric_window_prior(201.0, 400.0, {})
    {'alpha': 2.0, 'beta': 200.0}
    """
    shape = DEFAULT_SHAPE
    return {"alpha": shape, "beta": max((shape - 1.0) * m - (shape - 1.0), 0.5)}


GEOMETRIC = FamilyDeclaration(
    name="geometric",
    implementation="pymc_dp.families.counts:Geometric",
    windowed=True,
    prior=PriorSpec(
        "Beta", ("alpha", "beta"), {"alpha": 1.0, "beta": 1.0}, ("p",), "alpha=2, beta=m-1"
    ),
    window_prior=geometric_window_prior,
    command_line=CommandLine(records="trials to first success 1, 2, ...", release="window"),
)
