"""One record's law, as the exact likelihoods of continuous window sums need it.

The continuous windowed families are scale or location–scale families on the latent scale:
Gamma (and Exponential) records are z = e/λ with e ~ Gamma(α, 1); Normal and LogNormal records
(z = log x) are z = μ + σe with e ~ N(0, 1). :func:`record_law` gives the law the lattice
likelihood (:mod:`pymc_dp.kernels.lattice_windows`) integrates; :func:`location_scale` and
:func:`standard_records` give the map the record-level sampler moves θ along
(:mod:`pymc_dp.kernels.records`).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pymc_dp.families.base import ExponentialFamily
from pymc_dp.families.gamma import Gamma
from pymc_dp.families.normal import Normal, NormalKnownSigma
from pymc_dp.families.truncated import TruncatedFamily
from pymc_dp.kernels.lattice_windows import RecordLaw

__all__ = [
    "continuous_window",
    "location_scale",
    "record_law",
    "standard_records",
    "theta_step",
]


def continuous_window(family: ExponentialFamily) -> bool:
    """Whether ``family`` releases a window sum of continuous records (not counts).

    Examples
    --------
    >>> from pymc_dp.families import Exponential, Normal, Poisson
    >>> continuous_window(Exponential()), continuous_window(Normal()), continuous_window(Poisson())
    (True, True, False)
    """
    continuous = (Gamma, Normal, NormalKnownSigma)
    return isinstance(family, TruncatedFamily) and isinstance(family, continuous)


def record_law(family: TruncatedFamily, theta: npt.ArrayLike) -> RecordLaw:
    """The law of one record on the latent scale at θ (a batch of θ allowed).

    θ is the rate λ (Gamma, Exponential), the mean μ (Normal or LogNormal with known σ), or
    (μ, σ²) on the last axis (Normal, LogNormal).
    """
    theta = np.asarray(theta, dtype=np.float64)
    if isinstance(family, Gamma):
        return RecordLaw("gamma", np.full_like(theta, family.alpha), theta)
    if isinstance(family, NormalKnownSigma):
        return RecordLaw("normal", theta, np.full_like(theta, family.sigma))
    if isinstance(family, Normal):
        return RecordLaw("normal", theta[..., 0], np.sqrt(theta[..., 1]))
    raise TypeError(f"{family!r} has no continuous record law")


def location_scale(
    family: TruncatedFamily, theta: npt.ArrayLike
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(m, c) with records z = m + c·e, e from :func:`standard_records` (θ batched)."""
    law = record_law(family, theta)
    if law.kind == "gamma":
        return np.zeros_like(law.b), 1.0 / law.b
    return law.a, law.b


def standard_records(
    family: TruncatedFamily, rng: np.random.Generator, size: tuple[int, ...]
) -> npt.NDArray[np.float64]:
    """Draws of e, the record standardised by :func:`location_scale` (its law is free of θ)."""
    if isinstance(family, Gamma):
        return rng.gamma(family.alpha, size=size)
    return rng.standard_normal(size=size)


def theta_step(family: TruncatedFamily, theta: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """A finite-difference step for a scalar θ: 10⁻⁵ of λ, or of σ + abs(μ) for a mean."""
    theta = np.asarray(theta, dtype=np.float64)
    if isinstance(family, Gamma):
        return 1e-5 * theta
    return 1e-5 * (np.abs(theta) + family.sigma)
