"""Real records, with σ unknown (t(x) = (x, x²)) or known (t(x) = x): two declarations.

They are those of :class:`pymc_dp.families.normal.Normal` and
:class:`~pymc_dp.families.normal.NormalKnownSigma`; :mod:`pymc_dp.families.builtin.lognormal`
applies both to log x.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pymc_dp.families.declaration import (
    DEFAULT_SHAPE,
    NIG_KAPPA,
    CommandLine,
    FamilyDeclaration,
    FamilyOption,
    PriorSpec,
)

__all__ = [
    "NIG_PRIOR",
    "NORMAL",
    "NORMAL_KNOWN_SIGMA",
    "NORMAL_MEAN_PRIOR",
    "SIGMA",
    "known_sigma_window_prior",
    "nig_window_prior",
]

SIGMA = FamilyOption(
    "sigma",
    "sigma",
    "known standard deviation (of log x for lognormal); then only sum x is released and the "
    "model's prior is on the mean alone",
)
"""``--sigma``: the known σ of every record (of log x for LogNormal)."""

NIG_PRIOR = PriorSpec(
    "NormalInverseGamma",
    ("mean", "kappa", "alpha", "beta"),
    {"mean": 0.0, "kappa": 1.0, "alpha": 1.0, "beta": 1.0},
    ("mu", "sigma2"),
    "mean=m, kappa=1/8, alpha=2, beta=(w/4)^2",
    note="\ni.e. sigma2 ~ InverseGamma(alpha, beta),\n"
    "mu | sigma2 ~ Normal(mean, sd = sqrt(sigma2 / kappa))",
)
"""σ² ~ InverseGamma(alpha, beta), μ | σ² ~ Normal(mean, σ²/kappa) (on log x for LogNormal)."""

NORMAL_MEAN_PRIOR = PriorSpec(
    "Normal", ("mean", "sd"), {"mean": 0.0, "sd": 10.0}, ("mu",), "mean=m, sd=w/2"
)
"""μ ~ Normal(mean, sd) with σ known."""


def nig_window_prior(m: float, w: float, settings: Mapping[str, Any]) -> dict[str, float]:
    """E[σ²] = (w/4)² and μ ~ t₄(m, w/2) (:data:`~pymc_dp.families.declaration.NIG_KAPPA`).

    Examples
    --------
    >>> nig_window_prior(30.0, 40.0, {})
    {'mean': 30.0, 'kappa': 0.125, 'alpha': 2.0, 'beta': 100.0}
    """
    beta = (DEFAULT_SHAPE - 1.0) * (w / 4.0) ** 2
    return {"mean": m, "kappa": NIG_KAPPA, "alpha": DEFAULT_SHAPE, "beta": beta}


def known_sigma_window_prior(m: float, w: float, settings: Mapping[str, Any]) -> dict[str, float]:
    """μ ~ Normal(m, w/2): the mean anywhere in the window.

    Examples
    --------
    >>> known_sigma_window_prior(30.0, 40.0, {"sigma": 2.0})
    {'mean': 30.0, 'sd': 20.0}
    """
    return {"mean": m, "sd": 0.5 * w}


NORMAL_KNOWN_SIGMA = FamilyDeclaration(
    name="normal_known_sigma",
    implementation="pymc_dp.families.normal:NormalKnownSigma",
    windowed=True,
    prior=NORMAL_MEAN_PRIOR,
    window_prior=known_sigma_window_prior,
    command_line=CommandLine(name="normal", condition="with sigma"),
    options=(SIGMA,),
    statistic_labels=("sum x",),
)

NORMAL = FamilyDeclaration(
    name="normal",
    implementation="pymc_dp.families.normal:Normal",
    windowed=True,
    prior=NIG_PRIOR,
    window_prior=nig_window_prior,
    command_line=CommandLine(
        records="any x: (sum x, sum x^2); sum x with --sigma", release="window"
    ),
    statistic_labels=("sum x", "sum x^2"),
    grouped_link="location-scale",
)
