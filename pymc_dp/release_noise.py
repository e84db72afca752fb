"""Curator side: the exact statistic of a release and its noise, for every mechanism.

:func:`noisy_statistic` is the one place where :func:`pymc_dp.release` turns validated records
into a noisy statistic. The vetted mechanisms (``"discrete-laplace"``, ``"discrete-gaussian"``)
sum integers exactly and add OpenDP's integer noise; integer statistics (counts) are used as
they are (quantum 1), float statistics are quantised first (:mod:`pymc_dp.fixed_point`). The
floating-point sampler (``"laplace-float"``) is kept, by name, for seeded studies.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from pymc_dp.families import ExponentialFamily
from pymc_dp.fixed_point import choose_quantum, exact_total, quantise, quantised_sensitivity
from pymc_dp.mechanisms.laplace import laplace_mechanism
from pymc_dp.mechanisms.vetted import (
    DISCRETE_GAUSSIAN,
    DISCRETE_LAPLACE,
    LAPLACE_FLOAT,
    MECHANISMS,
    discrete_gaussian_mechanism,
    discrete_laplace_mechanism,
    library_version,
)

__all__ = [
    "NoisyStatistic",
    "check_mechanism",
    "is_integer_statistic",
    "noisy_statistic",
    "vetted_laplace_sum",
]

_EXACT_FLOAT_SUM = 2.0**53


class NoisyStatistic(NamedTuple):
    """A noisy statistic and what a release records about its noise."""

    value: npt.NDArray[np.float64]
    """The released statistic, in the statistic's units."""
    sensitivity: float
    """Sensitivity that scales the noise (L1, or L2 for the Gaussian), rounding included."""
    quantum: float | None
    """Fixed-point quantum (1.0 for integer statistics); ``None`` for ``"laplace-float"``."""
    library: str
    """Sampler library and version, e.g. ``"opendp 0.16.0"`` or ``"numpy 2.1.0"``."""


def check_mechanism(mechanism: object, rng: object) -> str:
    """The mechanism to use: ``mechanism`` checked, or the default implied by ``rng``.

    Without ``rng`` the default is the vetted ``"discrete-laplace"``; a seed or generator
    means a study, which gets the seedable ``"laplace-float"``. A vetted mechanism with a seed
    is refused: OpenDP draws from the operating system and cannot be seeded.
    """
    if mechanism is None:
        return DISCRETE_LAPLACE if rng is None else LAPLACE_FLOAT
    if mechanism == "laplace":  # the name of the float sampler in format-1 files
        mechanism = LAPLACE_FLOAT
    if not isinstance(mechanism, str) or mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {list(MECHANISMS)} (got {mechanism!r})")
    if mechanism != LAPLACE_FLOAT and rng is not None:
        raise ValueError(
            f"mechanism={mechanism!r} draws from the operating system's randomness (OpenDP) and "
            "cannot be seeded: drop rng for a real release, or pass mechanism='laplace-float' "
            "for a seeded study"
        )
    return mechanism


def is_integer_statistic(fam: ExponentialFamily) -> bool:
    """Whether every record's t(x) is a whole number (counts): then the quantum is 1."""
    return not fam.needs_bounds or bool(getattr(fam, "discrete", False))


def noisy_statistic(
    fam: ExponentialFamily,
    records: npt.NDArray,
    window: tuple[float, float],
    *,
    mechanism: str,
    sensitivity: float,
    epsilon: float | None,
    rho: float | None,
    rng: np.random.Generator | None,
    magnitude: float,
) -> NoisyStatistic:
    """The noisy statistic of validated ``records`` under ``mechanism``.

    Parameters
    ----------
    fam, records, window
        The family, its validated records, and the window (the domain for bounded families).
    mechanism
        A name from :data:`pymc_dp.mechanisms.vetted.MECHANISMS`.
    sensitivity
        Sensitivity of the exact statistic: L1, or L2 for ``"discrete-gaussian"``.
    epsilon, rho
        The budget: ε for the Laplace mechanisms, ρ for the Gaussian.
    rng
        Generator of the float sampler; ``None`` for the vetted ones.
    magnitude
        Public bound on |s| (n · max |t|).

    Returns
    -------
    NoisyStatistic
    """
    if mechanism == LAPLACE_FLOAT:
        statistic = _float_statistic(fam, records, window)
        value = laplace_mechanism(
            statistic, sensitivity=sensitivity, epsilon=epsilon, rng=rng, magnitude=magnitude
        )
        return NoisyStatistic(value, sensitivity, None, f"numpy {np.__version__}")
    norm = "l2" if mechanism == DISCRETE_GAUSSIAN else "l1"
    scale = sensitivity / epsilon if norm == "l1" else sensitivity / math.sqrt(2.0 * rho)
    t = _record_statistics(fam, records, window)
    if is_integer_statistic(fam):
        quantum, units = 1.0, sensitivity
        if magnitude >= 2.0**62:
            raise ValueError(
                f"n · max |t| = {magnitude:.3g} is beyond 2**62: the exact integer statistic "
                "could overflow; release fewer records at a time"
            )
    else:
        quantum = choose_quantum(t_bounds=_t_bounds(fam, window), n=len(records), noise_scale=scale)
        units = quantised_sensitivity(sensitivity, quantum, t.shape[1], norm)
    total = exact_total(quantise(t, quantum))
    if mechanism == DISCRETE_LAPLACE:
        noisy = discrete_laplace_mechanism(total, sensitivity=units, epsilon=epsilon)
    else:
        noisy = discrete_gaussian_mechanism(total, sensitivity=units, rho=rho)
    value = (noisy.astype(np.float64) * quantum).reshape(fam.stat_shape)
    return NoisyStatistic(value, units * quantum, quantum, library_version())


def _float_statistic(
    fam: ExponentialFamily, records: npt.NDArray, window: tuple[float, float]
) -> npt.NDArray[np.float64]:
    if fam.needs_bounds:
        return fam.window_statistic(records, window)
    return fam.sufficient_statistic(records)


def _record_statistics(
    fam: ExponentialFamily, records: npt.NDArray, window: tuple[float, float]
) -> npt.NDArray[np.float64]:
    """t(x_i) of the records that are summed, shape ``(m, d)``."""
    d = int(np.prod(fam.stat_shape, dtype=np.int64))
    if not fam.needs_bounds:
        # Counts: the float sum of whole numbers below 2^53 is exact; it is one row.
        total = np.asarray(fam.sufficient_statistic(records), dtype=np.float64).reshape(1, d)
        if np.any(np.abs(total) >= _EXACT_FLOAT_SUM):
            raise ValueError("the count statistic is beyond 2**53; release fewer records")
        return total
    a, b = window
    inside = np.asarray(records)[(records >= a) & (records <= b)]
    if inside.size == 0:
        return np.zeros((0, d))
    return np.asarray(fam.statistic(fam.to_latent(inside)), dtype=np.float64).reshape(-1, d)


def _t_bounds(fam: ExponentialFamily, window: tuple[float, float]) -> npt.NDArray[np.float64]:
    """Public range of each component of one record's t(x) over the window (and 0 outside)."""
    tmin, tmax = fam.statistic_range(*fam.latent_window(window))
    lower = np.minimum(np.asarray(tmin, dtype=np.float64), 0.0)
    upper = np.maximum(np.asarray(tmax, dtype=np.float64), 0.0)
    return np.stack([lower, upper], axis=-1).reshape(-1, 2)


def vetted_laplace_sum(
    t: npt.NDArray[np.float64],
    *,
    t_bounds: npt.NDArray[np.float64],
    sensitivity: float,
    epsilon: float,
) -> NoisyStatistic:
    """Σ_i t_i with discrete Laplace noise after fixed-point quantisation (float statistics).

    Parameters
    ----------
    t
        Per-record statistics, shape ``(n, d)``.
    t_bounds
        Public range of each component of one record's statistic, shape ``(d, 2)``.
    sensitivity
        L1 sensitivity of the exact sum.
    epsilon
        Privacy parameter ε.

    Returns
    -------
    NoisyStatistic
        The noisy sum (shape ``(d,)``), the sensitivity with rounding, the quantum, the library.
    """
    quantum = choose_quantum(t_bounds=t_bounds, n=max(len(t), 1), noise_scale=sensitivity / epsilon)
    units = quantised_sensitivity(sensitivity, quantum, int(t.shape[1]), "l1")
    total = exact_total(quantise(t, quantum))
    noisy = discrete_laplace_mechanism(total, sensitivity=units, epsilon=epsilon)
    value = noisy.astype(np.float64) * quantum
    return NoisyStatistic(value, units * quantum, quantum, library_version())
