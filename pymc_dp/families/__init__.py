"""Exponential-family declarations and the registry that maps PyMC distributions to them.

Adding a family is one declaration: subclass :class:`ExponentialFamily` and list it in
``_FAMILIES``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pymc_dp.families.base import ExponentialFamily
from pymc_dp.families.binomial import Bernoulli, Binomial
from pymc_dp.families.categorical import Categorical
from pymc_dp.families.counts import Geometric, Poisson
from pymc_dp.families.gamma import Exponential, Gamma
from pymc_dp.families.normal import LogNormal, LogNormalKnownSigma, Normal, NormalKnownSigma
from pymc_dp.families.truncated import TruncatedFamily

__all__ = [
    "Bernoulli",
    "Binomial",
    "Categorical",
    "Exponential",
    "ExponentialFamily",
    "Gamma",
    "Geometric",
    "LogNormal",
    "LogNormalKnownSigma",
    "Normal",
    "NormalKnownSigma",
    "Poisson",
    "TruncatedFamily",
    "family_from_dist",
    "get_family",
]

# Order matters where one PyMC class has two families: the known-σ one claims a constant σ.
_FAMILIES: tuple[type[ExponentialFamily], ...] = (
    Bernoulli,
    Binomial,
    Categorical,
    Exponential,
    Gamma,
    Poisson,
    Geometric,
    NormalKnownSigma,
    Normal,
    LogNormalKnownSigma,
    LogNormal,
)


def get_family(family: Any, **params: Any) -> ExponentialFamily:
    """Build the family for a PyMC distribution class (``pm.Binomial``) or a family name.

    Parameters
    ----------
    family
        A PyMC distribution class such as ``pm.Bernoulli``, or a name such as ``"bernoulli"``.
    **params
        The family's settings, e.g. ``trials=5`` or ``categories=3``.

    Raises
    ------
    ValueError
        If the family is not supported.
    TypeError
        If ``params`` holds a setting the family does not take.

    Examples
    --------
    >>> import pymc as pm
    >>> get_family(pm.Binomial, trials=5)
    Binomial(trials=5)
    """
    candidates = [cls for cls in _FAMILIES if family is cls.pymc_distribution or family == cls.name]
    for cls in candidates:
        if set(params) == set(_settings(cls)):
            return cls(**params)
    if len(candidates) == 1:
        (cls,) = candidates
        settings = _settings(cls)
        extra, missing = sorted(set(params) - set(settings)), sorted(set(settings) - set(params))
        needs = ", ".join(f"{name}=..." for name in settings) or "no settings"
        problem = f"unexpected {extra}" if extra else f"missing {missing}"
        raise TypeError(f"the {cls.name} family takes {needs}; {problem}")
    if candidates:
        options = " or ".join(
            ", ".join(f"{name}=..." for name in _settings(cls)) or "no settings"
            for cls in candidates
        )
        got = ", ".join(sorted(params)) or "none"
        raise TypeError(f"the {candidates[0].name} family takes {options} (got {got})")
    names = ", ".join(f"pm.{c.pymc_distribution.__name__}" for c in _FAMILIES)
    raise ValueError(f"family {family!r} is not supported; supported families: {names}")


def family_from_dist(dist: Any) -> ExponentialFamily:
    """The family of a ``pm.<Dist>.dist(...)`` variable, with settings read from it.

    Raises
    ------
    TypeError
        If ``dist`` is not a distribution of a supported family.

    Examples
    --------
    >>> import pymc as pm
    >>> family_from_dist(pm.Binomial.dist(n=5, p=0.3))
    Binomial(trials=5)
    """
    if getattr(dist, "owner", None) is not None:
        for cls in _FAMILIES:
            family = cls.from_dist(dist)
            if family is not None:
                return family
    names = ", ".join(f"pm.{c.pymc_distribution.__name__}.dist(...)" for c in _FAMILIES)
    raise TypeError(f"dist must be one of {names} (got {dist!r})")


def _settings(cls: type[ExponentialFamily]) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.init]
