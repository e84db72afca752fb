"""Curator side: the exact statistic of a release and its noise, for every mechanism.

:func:`noisy_statistic` is the one place where :func:`pymc_dp.release` turns validated records
into a noisy statistic. The vetted mechanisms (``"discrete-laplace"``, ``"discrete-gaussian"``)
round the exact total s (:mod:`pymc_dp.curator.exact_sums`, the same bit for bit from every input)
to a public statistic quantum q_s (:mod:`pymc_dp.curator.fixed_point`) and add OpenDP's integer
noise; integer statistics (counts) are used as they are (quantum 1). The floating-point sampler
(``"laplace-float"``) is kept, by name, for seeded studies: it adds noise to the exact total.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from pymc_dp.curator.fixed_point import MAX_TOTAL, choose_quantum, quantised_sensitivity
from pymc_dp.families import ExponentialFamily
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
    "ExactTotal",
    "NoisyStatistic",
    "check_mechanism",
    "is_integer_statistic",
    "noisy_statistic",
    "vetted_gaussian_total",
    "vetted_laplace_total",
]


class ExactTotal(NamedTuple):
    """An exact statistic s: component j is ``totals[j] · units[j]``, exactly.

    ``totals`` are Python integers (the exact sums of :mod:`pymc_dp.curator.exact_sums`, the same
    from every engine, partitioning and order) and ``units`` powers of two (the record grid's
    ``record_quantum ** (j + 1)``, or 1 for counts).

    Examples
    --------
    >>> s = ExactTotal((7, -3), (0.25, 0.0625))
    >>> s.as_float().tolist(), s.in_quanta(0.5).tolist()
    ([1.75, -0.1875], [4, 0])
    """

    totals: tuple[int, ...]
    units: tuple[float, ...]

    def as_float(self) -> npt.NDArray[np.float64]:
        """The statistic as floats (beyond 2**53 units, rounded to nearest, the same everywhere)."""
        return np.array([float(t) * u for t, u in zip(self.totals, self.units, strict=True)])

    def in_quanta(self, quantum: float) -> npt.NDArray[np.int64]:
        """round(s / quantum) per component, computed exactly (ties to even), as int64.

        Why rounding the total is as private as rounding each record: neighbouring totals s,
        s' satisfy ‖s - s'‖ <= Δ, and round(s_j / q) - s_j / q lies in [-1/2, 1/2], so each
        component of round(s / q) - round(s' / q) differs from (s - s') / q by at most 1. The
        sensitivity in quanta is therefore at most Δ/q + d (L1) or Δ₂/q + √d (L2), the same
        inflation :func:`~pymc_dp.curator.fixed_point.quantised_sensitivity` gives per-record
        rounding.
        """
        q = Fraction(float(quantum))
        out = [
            round(Fraction(t) * Fraction(float(u)) / q)
            for t, u in zip(self.totals, self.units, strict=True)
        ]
        if any(abs(v) >= MAX_TOTAL for v in out):
            raise ValueError(
                f"the statistic is beyond {MAX_TOTAL} quanta of {quantum!r}; choose the "
                "quantum with choose_quantum from public bounds of t"
            )
        return np.array(out, dtype=np.int64)


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
    total: ExactTotal,
    window: tuple[float, float],
    *,
    n: int,
    mechanism: str,
    sensitivity: float,
    epsilon: float | None,
    rho: float | None,
    rng: np.random.Generator | None,
    magnitude: float,
) -> NoisyStatistic:
    """The noisy statistic of a release, from its exact total, under ``mechanism``.

    Parameters
    ----------
    fam, window
        The family and the window (the domain for bounded families).
    total
        The exact statistic s (:class:`ExactTotal`), the same bit for bit from every input.
    n
        Number of records (public).
    mechanism
        A name from :data:`pymc_dp.mechanisms.vetted.MECHANISMS`.
    sensitivity
        Sensitivity of the exact statistic: L1, or L2 for ``"discrete-gaussian"``.
    epsilon, rho
        The budget: ε for the Laplace mechanisms, ρ for the Gaussian.
    rng
        Generator of the float sampler; ``None`` for the vetted ones.
    magnitude
        Public bound on abs(s): n · max abs(t).

    Returns
    -------
    NoisyStatistic
    """
    if mechanism == LAPLACE_FLOAT:
        value = laplace_mechanism(
            total.as_float().reshape(fam.stat_shape),
            sensitivity=sensitivity,
            epsilon=epsilon,
            rng=rng,
            magnitude=magnitude,
        )
        return NoisyStatistic(value, sensitivity, None, f"numpy {np.__version__}")
    norm = "l2" if mechanism == DISCRETE_GAUSSIAN else "l1"
    scale = sensitivity / epsilon if norm == "l1" else sensitivity / math.sqrt(2.0 * rho)
    if is_integer_statistic(fam):
        # s is a whole number already: rounding to q = 1 moves nothing, so no rounding term.
        quantum, units = 1.0, sensitivity
        if magnitude >= 2.0**62:
            raise ValueError(
                f"n · max |t| = {magnitude:.3g} is beyond 2**62: the exact integer statistic "
                "could overflow; release fewer records at a time"
            )
    else:
        quantum = choose_quantum(t_bounds=_t_bounds(fam, window), n=max(n, 1), noise_scale=scale)
        units = quantised_sensitivity(sensitivity, quantum, len(total.totals), norm)
    counts = total.in_quanta(quantum)
    if mechanism == DISCRETE_LAPLACE:
        noisy = discrete_laplace_mechanism(counts, sensitivity=units, epsilon=epsilon)
    else:
        noisy = discrete_gaussian_mechanism(counts, sensitivity=units, rho=rho)
    value = (noisy.astype(np.float64) * quantum).reshape(fam.stat_shape)
    return NoisyStatistic(value, units * quantum, quantum, library_version())


def _t_bounds(fam: ExponentialFamily, window: tuple[float, float]) -> npt.NDArray[np.float64]:
    """Public range of each component of one record's t(x) over the window (and 0 outside)."""
    tmin, tmax = fam.statistic_range(*fam.latent_window(window))
    lower = np.minimum(np.asarray(tmin, dtype=np.float64), 0.0)
    upper = np.maximum(np.asarray(tmax, dtype=np.float64), 0.0)
    return np.stack([lower, upper], axis=-1).reshape(-1, 2)


def vetted_laplace_total(
    total: ExactTotal,
    *,
    t_bounds: npt.NDArray[np.float64],
    n: int,
    sensitivity: float,
    epsilon: float,
) -> NoisyStatistic:
    """An exact total with discrete Laplace noise, rounded to a public statistic quantum.

    Parameters
    ----------
    total
        The exact sums (:class:`ExactTotal`), ``d`` components.
    t_bounds
        Public range of each component of one record's contribution, shape ``(d, 2)``.
    n
        Number of records (public).
    sensitivity
        L1 sensitivity Δ of the exact sums.
    epsilon
        Privacy parameter ε.

    Returns
    -------
    NoisyStatistic
        The noisy sums (shape ``(d,)``), the sensitivity with rounding, the quantum, the library.
    """
    return _vetted_total(total, t_bounds, n, sensitivity, epsilon=epsilon, rho=None)


def vetted_gaussian_total(
    total: ExactTotal,
    *,
    t_bounds: npt.NDArray[np.float64],
    n: int,
    sensitivity: float,
    rho: float,
) -> NoisyStatistic:
    """An exact total with discrete Gaussian noise, rounded to a public statistic quantum.

    The Gaussian counterpart of :func:`vetted_laplace_total`: the quantum is chosen from the
    scale τ = Δ₂/√(2ρ), the rounding adds √d quanta to the L2 sensitivity
    (:func:`~pymc_dp.curator.fixed_point.quantised_sensitivity`), and OpenDP's discrete Gaussian of
    scale (Δ₂/q + √d)/√(2ρ) quanta is ρ-zCDP for that sensitivity.

    Parameters
    ----------
    total
        The exact sums (:class:`ExactTotal`), ``d`` components.
    t_bounds
        Public range of each component of one record's contribution, shape ``(d, 2)``.
    n
        Number of records (public).
    sensitivity
        L2 sensitivity Δ₂ of the exact sums.
    rho
        zCDP parameter ρ.

    Returns
    -------
    NoisyStatistic
        The noisy sums, the L2 sensitivity with rounding, the quantum, the library.
    """
    return _vetted_total(total, t_bounds, n, sensitivity, epsilon=None, rho=rho)


def _vetted_total(
    total: ExactTotal,
    t_bounds: npt.NDArray[np.float64],
    n: int,
    sensitivity: float,
    *,
    epsilon: float | None,
    rho: float | None,
) -> NoisyStatistic:
    """Round ``total`` to a public quantum and add OpenDP's noise: Laplace (ε) or Gaussian (ρ)."""
    gaussian = rho is not None
    scale = sensitivity / math.sqrt(2.0 * rho) if gaussian else sensitivity / epsilon
    quantum = choose_quantum(t_bounds=t_bounds, n=max(n, 1), noise_scale=scale)
    units = quantised_sensitivity(
        sensitivity, quantum, len(total.totals), "l2" if gaussian else "l1"
    )
    counts = total.in_quanta(quantum)
    if gaussian:
        noisy = discrete_gaussian_mechanism(counts, sensitivity=units, rho=rho)
    else:
        noisy = discrete_laplace_mechanism(counts, sensitivity=units, epsilon=epsilon)
    value = noisy.astype(np.float64) * quantum
    return NoisyStatistic(value, units * quantum, quantum, library_version())
