"""Positive records of unknown rate: the declaration of ``families.gamma.Exponential``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pymc_dp.families.declaration import (
    DEFAULT_SHAPE,
    CommandLine,
    FamilyDeclaration,
    PriorSpec,
)

__all__ = ["EXPONENTIAL", "exponential_window_prior"]


def exponential_window_prior(m: float, w: float, settings: Mapping[str, Any]) -> dict[str, float]:
    """λ ~ Gamma(2, m): 1/λ ~ InvGamma(shape, rate) has mean rate/(shape − 1) = m.

    Examples
    --------
    >>> exponential_window_prior(200.0, 400.0, {})
    {'alpha': 2.0, 'beta': 200.0}
    """
    return {"alpha": DEFAULT_SHAPE, "beta": (DEFAULT_SHAPE - 1.0) * m}


EXPONENTIAL = FamilyDeclaration(
    name="exponential",
    implementation="pymc_dp.families.gamma:Exponential",
    windowed=True,
    prior=PriorSpec(
        "Gamma",
        ("alpha", "beta"),
        {"alpha": 1.0, "beta": 1.0},
        ("lam",),
        "alpha=2, beta=m",
        note="(beta is the rate)",
    ),
    window_prior=exponential_window_prior,
    command_line=CommandLine(records="x >= 0", release="window (--bounds or --private-bounds)"),
)
