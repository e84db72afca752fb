"""Vetted noise: OpenDP's discrete Laplace and Gaussian samplers on integers, and noisy min.

Floating-point Laplace samples leak the exact statistic through their low-order bits
(Mironov 2012). The samplers here add noise to integers only, drawn by OpenDP's ``contrib``
measurements from the operating system's randomness (they cannot be seeded). Float statistics
reach them through :mod:`pymc_dp.curator.fixed_point`: quantised, summed exactly, and scaled back.
Private windows choose among public candidates by their integer rank scores
(:func:`noisy_min_index`, OpenDP's report-noisy-max), never by a floating-point draw.

The privacy of each draw is checked against OpenDP's own privacy map: the map at one unit of
input distance, scaled by the sensitivity (linearly for ε, quadratically for ρ), must not
exceed the budget asked for.
"""

from __future__ import annotations

import functools
import importlib.metadata
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from pymc_dp._validation import check_positive

__all__ = [
    "DISCRETE_GAUSSIAN",
    "DISCRETE_LAPLACE",
    "LAPLACE_FLOAT",
    "MECHANISMS",
    "discrete_gaussian_mechanism",
    "discrete_laplace_mechanism",
    "library_version",
    "noisy_min_index",
    "rho_for_approx_dp",
    "zcdp_to_approx_dp",
]

DISCRETE_LAPLACE = "discrete-laplace"
"""Vetted pure-DP mechanism (the default of :func:`pymc_dp.release`)."""
DISCRETE_GAUSSIAN = "discrete-gaussian"
"""Vetted ρ-zCDP mechanism."""
LAPLACE_FLOAT = "laplace-float"
"""Floating-point Laplace (numpy), for studies and tests only: seedable, not vetted."""
MECHANISMS = (DISCRETE_LAPLACE, DISCRETE_GAUSSIAN, LAPLACE_FLOAT)

_MAX_UNITS = 2.0**52
"""Largest noise scale in quanta: beyond, noise on an int64 total could overflow."""


@functools.cache
def _opendp() -> Any:
    try:
        import opendp.prelude as dp
    except ImportError:  # pragma: no cover - opendp is a core dependency
        raise ImportError(
            "vetted releases need OpenDP: pip install 'opendp>=0.16' (or pass rng= for a "
            "seeded study release with floating-point noise)"
        ) from None
    dp.enable_features("contrib")
    return dp


def library_version() -> str:
    """The sampler library and its version, as recorded in a release: ``"opendp 0.16.0"``."""
    _opendp()
    return f"opendp {importlib.metadata.version('opendp')}"


def discrete_laplace_mechanism(
    total: Sequence[int], *, sensitivity: float, epsilon: float
) -> npt.NDArray[np.int64]:
    """Add discrete Laplace noise (OpenDP ``make_laplace`` on int64 vectors) to ``total``.

    ``P(noise = k) ∝ exp(-|k| / b)`` with b = sensitivity / epsilon, on every component.

    Parameters
    ----------
    total
        The exact integer statistic (e.g. :func:`pymc_dp.curator.fixed_point.exact_total`).
    sensitivity
        L1 sensitivity of ``total`` in its integer units (quanta), over all components.
    epsilon
        Privacy parameter ε > 0.

    Returns
    -------
    numpy.ndarray of int64
        The noisy integers.

    Raises
    ------
    ValueError
        If the scale is above 2⁵² units, a total is beyond int64, or OpenDP's privacy map
        reports more than ε.

    Examples
    --------
    >>> discrete_laplace_mechanism([10, 20], sensitivity=2.0, epsilon=1.0).dtype
    dtype('int64')
    """
    sensitivity = check_positive(sensitivity, "sensitivity")
    epsilon = check_positive(epsilon, "epsilon")
    scale = _check_units(sensitivity / epsilon)
    dp = _opendp()
    meas = dp.m.make_laplace(
        dp.vector_domain(dp.atom_domain(T="i64")), dp.l1_distance(T="i64"), scale=scale
    )
    spent = meas.map(1) * sensitivity
    if spent > epsilon * (1 + 1e-9):
        raise ValueError(f"OpenDP's privacy map gives ε = {spent} > {epsilon}")  # pragma: no cover
    return np.asarray(meas(_int_list(total)), dtype=np.int64)


def discrete_gaussian_mechanism(
    total: Sequence[int], *, sensitivity: float, rho: float
) -> npt.NDArray[np.int64]:
    """Add discrete Gaussian noise (OpenDP ``make_gaussian`` on int64 vectors) to ``total``.

    P(noise = k) ∝ exp(-k² / (2σ²)) with σ = Δ₂ / √(2ρ), which is ρ-zCDP (Canonne, Kamath &
    Steinke 2020).

    Parameters
    ----------
    total
        The exact integer statistic.
    sensitivity
        L2 sensitivity Δ₂ of ``total`` in its integer units (quanta).
    rho
        zCDP parameter ρ > 0.

    Returns
    -------
    numpy.ndarray of int64

    Examples
    --------
    >>> discrete_gaussian_mechanism([0], sensitivity=1.0, rho=0.5).shape
    (1,)
    """
    sensitivity = check_positive(sensitivity, "sensitivity")
    rho = check_positive(rho, "rho")
    sigma = _check_units(sensitivity / math.sqrt(2.0 * rho))
    dp = _opendp()
    meas = dp.m.make_gaussian(
        dp.vector_domain(dp.atom_domain(T="i64")), dp.l2_distance(T="i64"), scale=sigma
    )
    spent = meas.map(1) * sensitivity**2
    if spent > rho * (1 + 1e-9):
        raise ValueError(f"OpenDP's privacy map gives ρ = {spent} > {rho}")  # pragma: no cover
    return np.asarray(meas(_int_list(total)), dtype=np.int64)


def noisy_min_index(scores: Sequence[int], *, sensitivity: int, epsilon: float) -> int:
    """The index of a low score, chosen ε-DP by OpenDP's ``make_noisy_max`` (``negate=True``).

    Report-noisy-min with exponential noise (permute-and-flip, McKenna & Sheldon 2020), sampled
    exactly by OpenDP from the operating system's randomness: ε-DP when replacing one record
    moves every score by at most ``sensitivity`` (in either direction), and at least as likely
    as the exponential mechanism to pick the lowest score.

    Parameters
    ----------
    scores
        Non-negative integer scores below 2**64 (lower is better), one per candidate.
    sensitivity
        Largest change of any score between neighbouring data sets (L∞, a positive integer).
    epsilon
        Privacy parameter ε > 0.

    Returns
    -------
    int
        The chosen index.

    Raises
    ------
    ValueError
        If a score is negative or too large, or OpenDP's privacy map reports more than ε.

    Examples
    --------
    >>> noisy_min_index([90, 0, 90], sensitivity=1, epsilon=5.0)
    1
    """
    epsilon = check_positive(epsilon, "epsilon")
    if isinstance(sensitivity, bool) or not isinstance(sensitivity, int) or sensitivity < 1:
        raise TypeError(f"sensitivity must be a positive integer (got {sensitivity!r})")
    values = [int(v) for v in scores]
    if not values or min(values) < 0 or max(values) >= 2**64:
        raise ValueError("scores must be a non-empty list of integers in [0, 2**64)")
    return int(_noisy_min(sensitivity, epsilon)(values))


@functools.lru_cache(maxsize=16)
def _noisy_min(sensitivity: int, epsilon: float) -> Any:
    """OpenDP's report-noisy-min on u64 scores, its privacy map checked (built once)."""
    dp = _opendp()
    # ε = 2·Δ∞/scale for scores that may move in either direction (OpenDP's map checks it).
    meas = dp.m.make_noisy_max(
        dp.vector_domain(dp.atom_domain(T="u64")),
        dp.linf_distance(T="u64", monotonic=False),
        dp.max_divergence(),
        scale=2.0 * sensitivity / epsilon,
        negate=True,
    )
    spent = meas.map(sensitivity)
    if spent > epsilon * (1 + 1e-9):
        raise ValueError(f"OpenDP's privacy map gives ε = {spent} > {epsilon}")  # pragma: no cover
    return meas


def zcdp_to_approx_dp(rho: float, delta: float) -> float:
    """ε such that ρ-zCDP implies (ε, δ)-DP, by OpenDP's ``make_zCDP_to_approxDP``.

    Examples
    --------
    >>> round(zcdp_to_approx_dp(0.5, 1e-6), 3)
    5.222
    """
    rho = check_positive(rho, "rho")
    delta = check_positive(delta, "delta")
    if delta >= 1:
        raise ValueError(f"delta must lie in (0, 1) (got {delta})")
    dp = _opendp()
    sigma = 1.0 / math.sqrt(2.0 * rho)
    meas = dp.c.make_zCDP_to_approxDP(
        dp.m.make_gaussian(dp.atom_domain(T="i64"), dp.absolute_distance(T="i64"), scale=sigma)
    )
    try:
        return float(meas.map(1).epsilon(delta))
    except dp.OpenDPException:
        # OpenDP's conversion overflows exp(ε) for very large ρ (about 10⁵ and up).
        raise ValueError(
            f"rho={rho} is too large for OpenDP's conversion to (epsilon, delta)-DP at "
            f"delta={delta} (the epsilon overflows); choose a smaller rho"
        ) from None


def rho_for_approx_dp(epsilon: float, delta: float) -> float:
    """The largest ρ whose ρ-zCDP implies (ε, δ)-DP by :func:`zcdp_to_approx_dp`, by bisection.

    For a Gaussian release that must meet an (ε, δ) target: pass the result as ``rho=`` and
    the same ``delta=``.

    Examples
    --------
    >>> rho = rho_for_approx_dp(1.0, 1e-6)
    >>> round(rho, 4), zcdp_to_approx_dp(rho, 1e-6) <= 1.0
    (0.0244, True)
    """
    epsilon = check_positive(epsilon, "epsilon")
    low, high = 0.0, max(epsilon, 1.0)
    while high - low > 1e-12 * high:  # ε(ρ) is increasing in ρ
        mid = 0.5 * (low + high)
        if zcdp_to_approx_dp(mid, delta) <= epsilon:
            low = mid
        else:
            high = mid
    if low == 0.0:  # pragma: no cover - ε(ρ) → 0 as ρ → 0
        raise ValueError(f"no rho gives epsilon={epsilon} at delta={delta}")
    return low


def _check_units(scale: float) -> float:
    if not scale <= _MAX_UNITS:
        raise ValueError(
            f"the noise scale is {scale:.3g} quanta, above 2**52: the noisy integer could "
            "overflow; raise epsilon (or rho)"
        )
    return scale


def _int_list(total: Sequence[int]) -> list[int]:
    values = [int(v) for v in np.atleast_1d(np.asarray(total, dtype=object))]
    if any(abs(v) >= 2**62 for v in values):
        raise ValueError("the integer statistic must stay below 2**62 in absolute value")
    return values
