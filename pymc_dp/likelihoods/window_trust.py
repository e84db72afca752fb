"""When the CLT for a window sum can be trusted, and what the exact likelihood of one costs.

The CLT normal for a released window sum ŝ = Σ t̂(z_i) departs from its exact law through the
shape of one record's windowed statistic t̂: records outside the window put an atom at 0, so a
window that few records reach (or that cuts the bulk of the law) makes t̂ very skewed, and the
departure shrinks only like 1/√n and with the noise. ``benchmarks/clt_accuracy.py --windows``
measures it: the Kolmogorov distance between the CLT law of y and its exact law, over families,
windows, n and the noise-to-spread ratio r = β/sd(ŝ). It matches the Edgeworth expansion's
skewness-and-kurtosis term where t̂ is mildly skewed, and is up to 7 times larger where one
record's law has a large atom apart from its continuous part (n = 10, few records in the
window), so the rule computes the distance itself rather than a formula for it.

:func:`clt_ks` computes it for one θ: the exact law of ŝ (the n-fold convolution of t̂'s law on a
fine lattice, :func:`window_sum_law`) and the CLT normal of the same mean and variance, truncated
to ŝ's range as ``likelihood="clt"`` does, both convolved with the release's Laplace noise. The
rule (:func:`window_clt_trust`): the CLT is trusted where that distance is at most
:data:`WINDOW_KS_LEVEL` (the level of the rule for counts) at every θ consistent with the
public y (n E[t̂ | θ] within three sds of y, for every component of the statistic). The
distances on a grid of θ are computed once per (family, n, window, noise) and cached, so a
batch of releases pays for them once.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import numpy.typing as npt
from scipy import fft, special, stats

from pymc_dp.families import TruncatedFamily
from pymc_dp.families.record_laws import record_law
from pymc_dp.kernels.exact_windows import window_record_log_pmf
from pymc_dp.kernels.lattice_windows import Lattice, lattice_for, lattice_record_log_law

__all__ = [
    "LATTICE_MAX_TERMS",
    "RECORDS_MAX_N",
    "WINDOW_KS_LEVEL",
    "clt_ks",
    "continuous_exact_cost",
    "window_clt_trust",
    "window_sum_law",
]

WINDOW_KS_LEVEL = 0.01
"""Largest predicted KS distance between the CLT law of y and its exact law that is trusted."""

LATTICE_MAX_TERMS = 100_000
"""The lattice likelihood of a continuous window sum (:mod:`pymc_dp.kernels.lattice_windows`)
is affordable for ``"auto"`` while n · (lattice points) is at most this (one FFT of that length
per evaluation)."""

RECORDS_MAX_N = 100
"""``"auto"`` uses the record-level sampler (:mod:`pymc_dp.engine.records`) up to this many
records. It mixes well wherever the noise dominates (ESS 690-760 per 1000 iterations at
n = 10-100, ε = 0.1, ``benchmarks/exact_windows_ess.py --mixing``) but slowly where the release
pins the window sum and the window cuts the records' law (12 per 1000 at n = 100, ε = 1): θ then
trades off against how many records fall outside, which single-record moves change slowly."""

_THETA_NODES = 61
"""Points along a scalar θ where the distance is tabulated (each family's
:meth:`~pymc_dp.families.TruncatedFamily.window_theta_grid` spans its θ with them)."""
_CELLS = 64
"""Lattice cells across the window for the laws behind :func:`clt_ks`: the distances differ from
those on 256 cells by at most 0.002 over the cases of ``benchmarks/clt_accuracy.py``."""
_DIRECT_N = 100
"""Largest n whose records :func:`window_clt_trust` convolves itself (:func:`_ks_table`)."""
_FINE = 8
"""Counts: points per integer, so that the CLT normal is resolved beside the exact law."""


def continuous_exact_cost(
    family: TruncatedFamily, n: int, bounds: tuple[float, float], scale: float
) -> tuple[int, int]:
    """(cost, budget) of the exact likelihood of a continuous window sum.

    One-number statistics: n · lattice points (:func:`~pymc_dp.kernels.lattice_windows.
    lattice_for`) against :data:`LATTICE_MAX_TERMS`; (Σz, Σz²): n records against
    :data:`RECORDS_MAX_N`.
    """
    if family.stat_size == 2:
        return n, RECORDS_MAX_N
    lattice = lattice_for(family.latent_window(bounds), n=n, noise_scale=scale)
    return n * lattice.size, LATTICE_MAX_TERMS


def _component_law(
    family: TruncatedFamily, theta: npt.NDArray, bounds: tuple[float, float], j: int
) -> tuple[npt.NDArray[np.float64], float, int]:
    """(q, step, first): the law of one record's t̂_j on the lattice step·(first + m)."""
    a, b = family.latent_window(bounds)
    if family.discrete:
        q_int = np.exp(window_record_log_pmf(family.record_distribution(theta), (int(a), int(b))))
        q = np.zeros((q_int.size - 1) * _FINE + 1)
        q[::_FINE] = q_int
        return q, 1.0 / _FINE, 0
    if j == 0:
        step = (b - a) / _CELLS
        first = math.floor(min(0.0, a) / step)
        lattice = Lattice(step, first, math.ceil(max(0.0, b) / step) - first + 1)
        q = np.exp(lattice_record_log_law(record_law(family, theta), (a, b), lattice))
        return q, step, first
    # t̂₂ = z² inside the window: the masses of each lattice cell's two preimages ±√t.
    law = record_law(family, theta)
    low = 0.0 if a <= 0.0 <= b else min(a * a, b * b)
    high = max(a * a, b * b)
    step = (high - low) / _CELLS
    m = np.arange(math.ceil(high / step) + 1)
    edges = np.sqrt(np.clip(step * np.concatenate([[0.0], m + 0.5]), 0.0, None))
    lo_e, hi_e = edges[:-1], edges[1:]

    def mass(lo, hi):
        lo, hi = np.maximum(lo, a), np.minimum(hi, b)
        cdf = stats.norm.cdf(np.stack([lo, hi]), float(law.a), float(law.b))
        return np.where(hi > lo, cdf[1] - cdf[0], 0.0)

    q = mass(lo_e, hi_e) + mass(-hi_e, -lo_e)
    q[0] += 1.0 - q.sum()  # every record outside the window adds 0
    return q, step, 0


def window_sum_law(
    family: TruncatedFamily,
    theta: npt.ArrayLike,
    bounds: tuple[float, float],
    n: int,
    component: int = 0,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(points, probabilities): the law of a window sum's component on a fine lattice.

    The n-fold convolution of one record's t̂ (a lattice of :data:`_CELLS` cells across the
    window; the integers for counts), by FFT. For one θ.

    Examples
    --------
    >>> from pymc_dp.families import Exponential
    >>> s, p = window_sum_law(Exponential(), 2.0, (0.0, 1.0), 5)
    >>> exact_mean = 5 * (0.5 - 1.5 * math.exp(-2))   # 5 E[z; z ≤ 1] for z ~ Exponential(2)
    >>> round(float(p.sum()), 9), round(float(p @ s), 3), round(exact_mean, 3)
    (1.0, 1.485, 1.485)
    """
    q, step, first = _component_law(family, np.asarray(theta, dtype=np.float64), bounds, component)
    size = n * (q.size - 1) + 1
    length = fft.next_fast_len(size, real=True)
    spectrum = fft.rfft(q, length)
    power = np.ones_like(spectrum)
    base, c = spectrum, n
    while c:  # repeated squaring
        if c & 1:
            power = power * base
        base, c = base * base, c >> 1
    pmf = np.maximum(fft.irfft(power, length)[:size], 0.0)
    return step * (n * first + np.arange(size)), pmf / pmf.sum()


def clt_ks(
    family: TruncatedFamily,
    theta: npt.ArrayLike,
    n: int,
    bounds: tuple[float, float],
    scale: float,
) -> float:
    """KS distance between the CLT law of y and its exact law, largest over components.

    Parameters
    ----------
    family, theta, n, bounds
        The records (one θ), their number and the window.
    scale
        Laplace scale β of the noise (0: none).

    Examples
    --------
    Ten Exponential(2) records over [0, 1], no noise (``benchmarks/clt_accuracy.py``: 0.017):

    >>> from pymc_dp.families import Exponential
    >>> round(clt_ks(Exponential(), 2.0, 10, (0.0, 1.0), 0.0), 3)
    0.017
    """
    return _ks_and_moments(family, theta, n, bounds, scale)[0]


def _ks_and_moments(
    family: TruncatedFamily,
    theta: npt.ArrayLike,
    n: int,
    bounds: tuple[float, float],
    scale: float,
    laws: list | None = None,
) -> tuple[float, list[float], list[float]]:
    """:func:`clt_ks`, and the mean and variance of each component of ŝ.

    ``laws`` are the components' :func:`window_sum_law` at this θ, when already computed.
    """
    lower, upper, _, _ = family.record_region(n, bounds)
    worst, means, variances = 0.0, [], []
    for j in range(family.stat_size):
        points, pmf = laws[j] if laws is not None else window_sum_law(family, theta, bounds, n, j)
        step = points[1] - points[0]
        mean = float(pmf @ points)
        sd = math.sqrt(max(float(pmf @ (points - mean) ** 2), 0.0))
        means.append(mean)
        variances.append(sd * sd)
        if sd <= 0.0 or scale > 50.0 * sd:
            continue  # a point mass, or noise so wide that the distance is below 10⁻⁴
        edges = np.concatenate([points - step / 2, [points[-1] + step / 2]])
        # scipy.stats' norm.cdf and laplace.cdf, without building a frozen law per call
        cdf = special.ndtr((np.clip(edges, lower[j], upper[j]) - mean) / sd)
        clt = np.diff(cdf) / max(cdf[-1] - cdf[0], 1e-300)
        if scale > 0.0:
            half = math.ceil(12.0 * scale / step) + 1
            d = (step * np.arange(-half, half + 2) - step / 2) / scale
            noise = np.diff(
                np.where(d > 0, 1.0 - 0.5 * np.exp(-np.abs(d)), 0.5 * np.exp(-np.abs(d)))
            )
            length = fft.next_fast_len(pmf.size + noise.size, real=True)
            kernel = fft.rfft(noise, length)
            pmf, clt = (fft.irfft(fft.rfft(p, length) * kernel, length) for p in (pmf, clt))
        worst = max(worst, float(np.max(np.abs(np.cumsum(pmf) - np.cumsum(clt)))))
    return worst, means, variances


def _ks_table(
    family: TruncatedFamily, n: int, bounds: tuple[float, float], scale: float
) -> tuple[npt.NDArray, npt.NDArray, npt.NDArray]:
    """(mean, var, KS) of the window sum over the family's θ grid."""
    # Beyond n₀ the distance is that of n₀ records at the same noise-to-spread ratio, times
    # √(n₀/n): the leading (skewness) order, within 2% of the direct computation for
    # n = 300 and 1000 over the cases of benchmarks/clt_accuracy.py, at a fraction of its cost.
    m = min(n, _DIRECT_N)
    shrink = math.sqrt(m / n)
    noise = scale * shrink
    if n > m and noise > 0.0:
        # Rounded down to a quarter-octave grid, so that the groups of a grouped release (each
        # its own n) share a few tables; less noise never lowers the distance much, so the
        # rounding can only make the rule stricter.
        noise = 2.0 ** (math.floor(4.0 * math.log2(noise)) / 4.0)
    mean, var, ks = _ks_core(family, m, bounds, noise)
    return mean * n / m, var * n / m, ks * shrink


@functools.lru_cache(maxsize=2)
def _sum_laws(family: TruncatedFamily, n: int, bounds: tuple[float, float]) -> list:
    """:func:`window_sum_law` of every component at every θ of the grid, cached.

    They do not depend on the noise, and the groups of a grouped release ask for the same n at
    several noise levels (one per quarter octave). At most two tables are kept (each is about
    61 θ × 32 000 lattice points for counts at n = 100).
    """
    grid = family.window_theta_grid(bounds, _THETA_NODES)
    return [
        [window_sum_law(family, th, bounds, n, j) for j in range(family.stat_size)] for th in grid
    ]


@functools.lru_cache(maxsize=256)
def _ks_core(
    family: TruncatedFamily, n: int, bounds: tuple[float, float], scale: float
) -> tuple[npt.NDArray, npt.NDArray, npt.NDArray]:
    """(mean, var, KS) of ``n`` records' window sum over the family's θ grid, cached."""
    # Each family spans its own θ (TruncatedFamily.window_theta_grid): a rate, a probability,
    # a mean, or (μ, σ²).
    grid = family.window_theta_grid(bounds, _THETA_NODES)
    laws = _sum_laws(family, n, bounds)
    rows = [
        _ks_and_moments(family, th, n, bounds, scale, law)
        for th, law in zip(grid, laws, strict=True)
    ]
    ks, means, variances = zip(*rows, strict=True)
    return np.array(means), np.array(variances), np.array(ks)


def window_clt_trust(
    family: TruncatedFamily,
    n: int,
    released: npt.ArrayLike,
    scale: float,
    bounds: tuple[float, float],
) -> tuple[bool, str]:
    """Whether the CLT for a released window sum is accurate (KS ≤ 0.01 at every likely θ).

    The distance (:func:`clt_ks`) is taken at its largest over the θ whose expected window sum
    lies within three sds of the released y (the public value): θ is unknown, and the CLT must
    hold wherever the posterior may put it.

    Examples
    --------
    >>> from pymc_dp.families import Exponential
    >>> window_clt_trust(Exponential(), 10, 3.0, 0.15, (0.0, 1.5))[0]
    False
    >>> window_clt_trust(Exponential(), 1000, 300.0, 15.0, (0.0, 1.5))[0]
    True
    """
    bounds = (float(bounds[0]), float(bounds[1]))
    mean, var, table = _ks_table(family, int(n), bounds, float(scale))
    y = np.asarray(released, dtype=np.float64).reshape(-1)
    distance = np.max(np.abs(y - mean) / np.sqrt(var + 2.0 * scale**2), axis=-1)
    near = distance <= 3.0
    if not np.any(near):
        near = distance <= np.min(distance)
    ks = float(np.max(table[near]))
    reason = (
        f"KS distance of the CLT law of y from its exact law up to {ks:.3g} over the θ "
        f"consistent with y (trusted where ≤ {WINDOW_KS_LEVEL:g}; n = {n}, noise scale "
        f"{scale:.3g})"
    )
    return ks <= WINDOW_KS_LEVEL, reason
