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
distances on a grid of θ are computed once per (family, n, window, noise) and θ, and cached,
so a batch of releases pays for them once; only the θ rows that can decide a release's answer
are computed (:func:`window_clt_trust` says why the others cannot change it).

Counts live on the integers, but the CLT normal does not: the distance is computed on
:data:`_FINE` points per integer, except under noise of scale β ≥ :data:`_COARSE_NOISE`, where
integer cells (the normal's mass over [k − ½, k + ½] against the atom at k) change it little:
moving mass within a cell changes the noise-convolved CDFs by a term in sup|k′| = 1/(2β²), k the
Laplace density, so the change falls like 1/β². Measured over Poisson and Geometric windows at
n = 10–100: at most 3.4·10⁻⁴ at β = 40 and 7.4·10⁻⁵ at β = 100
(``tests/test_window_trust.py``), against the level :data:`WINDOW_KS_LEVEL` = 0.01.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import numpy.typing as npt
from scipy import fft, signal, special, stats

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
_SMALL_N = 16
"""Up to this n the distance is computed at n itself; above, on a grid of n (:func:`_ks_table`)."""
_FINE = 8
"""Counts: points per integer, so that the CLT normal is resolved beside the exact law."""
_COARSE_NOISE = 100.0
"""Counts: the Laplace noise scale from which :func:`_ks_core` takes integer cells (the module
docstring says what that changes)."""


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
    """(q, step, first): the law of one record's t̂_j on the lattice step·(first + m).

    ``theta`` may be a batch (on the leading axes; (μ, σ²) on the last for the Normal pair):
    one row of q per θ. Counts get the integers (step 1): :func:`_refine` puts their sums on
    the finer lattice.
    """
    a, b = family.latent_window(bounds)
    if family.discrete:
        q = np.exp(window_record_log_pmf(family.record_distribution(theta), (int(a), int(b))))
        return q, 1.0, 0
    if j == 0:
        step = (b - a) / _CELLS
        first = math.floor(min(0.0, a) / step)
        lattice = Lattice(step, first, math.ceil(max(0.0, b) / step) - first + 1)
        q = np.exp(lattice_record_log_law(record_law(family, theta), (a, b), lattice))
        return q, step, first
    # t̂₂ = z² inside the window: the masses of each lattice cell's two preimages ±√t.
    law = record_law(family, theta)
    mu, sd = np.asarray(law.a)[..., None], np.asarray(law.b)[..., None]  # θ batch, if any
    low = 0.0 if a <= 0.0 <= b else min(a * a, b * b)
    high = max(a * a, b * b)
    step = (high - low) / _CELLS
    m = np.arange(math.ceil(high / step) + 1)
    edges = np.sqrt(np.clip(step * np.concatenate([[0.0], m + 0.5]), 0.0, None))
    lo_e, hi_e = edges[:-1], edges[1:]

    def mass(lo, hi):
        lo, hi = np.maximum(lo, a), np.minimum(hi, b)
        return np.where(hi > lo, stats.norm.cdf(hi, mu, sd) - stats.norm.cdf(lo, mu, sd), 0.0)

    q = mass(lo_e, hi_e) + mass(-hi_e, -lo_e)
    q[..., 0] += 1.0 - q.sum(axis=-1)  # every record outside the window adds 0
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
    points = step * (n * first + np.arange(n * (q.size - 1) + 1))
    if family.discrete:
        points, pmf = _refine(points, _n_fold(q[None], n), _FINE)
        return points, pmf[0]
    return points, _n_fold(q[None], n)[0]


def _refine(
    points: npt.NDArray[np.float64], pmf: npt.NDArray[np.float64], factor: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """An integer-valued law on ``factor`` points per integer (zero between the integers)."""
    if factor == 1:
        return points, pmf
    fine = np.zeros((*pmf.shape[:-1], (pmf.shape[-1] - 1) * factor + 1))
    fine[..., ::factor] = pmf
    return points[0] + np.arange(fine.shape[-1]) / factor, fine


def _n_fold(q: npt.NDArray[np.float64], n: int) -> npt.NDArray[np.float64]:
    """The n-fold convolution of each row of ``q`` (one record's law per row), normalised."""
    size = n * (q.shape[-1] - 1) + 1
    length = fft.next_fast_len(size, real=True)
    spectrum = fft.rfft(q, length, axis=-1)
    power = np.ones_like(spectrum)
    base, c = spectrum, n
    while c:  # repeated squaring
        if c & 1:
            power = power * base
        base, c = base * base, c >> 1
    pmf = np.maximum(fft.irfft(power, length, axis=-1)[..., :size], 0.0)
    return pmf / pmf.sum(axis=-1, keepdims=True)


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
) -> tuple[float, list[float], list[float]]:
    """:func:`clt_ks`, and the mean and variance of each component of ŝ."""
    lower, upper, _, _ = family.record_region(n, bounds)
    worst, means, variances = 0.0, [], []
    for j in range(family.stat_size):
        points, pmf = window_sum_law(family, theta, bounds, n, j)
        ks, mean, var = _ks_rows(points, pmf[None], (lower[j], upper[j]), scale)
        worst = max(worst, float(ks[0]))
        means.append(float(mean[0]))
        variances.append(float(var[0]))
    return worst, means, variances


def _ks_rows(
    points: npt.NDArray[np.float64],
    pmf: npt.NDArray[np.float64],
    region: tuple[float, float],
    scale: float,
) -> tuple[npt.NDArray, npt.NDArray, npt.NDArray]:
    """(KS, mean, variance) of each row of ``pmf`` (laws on ``points``) against its CLT normal.

    The normal has the row's mean and variance, truncated to ``region`` as
    ``likelihood="clt"`` does; both laws are convolved with Laplace noise of scale ``scale``.
    """
    step = points[1] - points[0]
    mean = pmf @ points
    var = np.maximum(np.einsum("ts,ts->t", pmf, (points - mean[:, None]) ** 2), 0.0)
    sd = np.sqrt(var)
    # A point mass, or noise so wide that the distance is below 10⁻⁴: no distance to compute.
    skip = (sd <= 0.0) | (scale > 50.0 * sd)
    ks = np.zeros(pmf.shape[0])
    if np.all(skip):
        return ks, mean, var
    rows = ~skip
    pmf, mean_r, sd_r = pmf[rows], mean[rows, None], sd[rows, None]
    edges = np.concatenate([points - step / 2, [points[-1] + step / 2]])
    # scipy.stats' norm.cdf, without building a frozen law per call
    cdf = special.ndtr((np.clip(edges, *region) - mean_r) / sd_r)
    clt = np.diff(cdf, axis=-1) / np.maximum(cdf[:, -1:] - cdf[:, :1], 1e-300)
    gap = np.cumsum(pmf, axis=-1) - np.cumsum(clt, axis=-1)
    ks[rows] = _laplace_smoothed_sup(gap, step / scale) if scale > 0.0 else np.max(np.abs(gap), -1)
    return ks, mean, var


_NOISE_TAIL = 12.0
"""Laplace scales at which the lattice noise kernel used to be cut: :func:`_laplace_smoothed_sup`
adds the mass beyond (e⁻¹²) times sup|gap|, so that its distance is never below the cut one's."""


def _laplace_smoothed_sup(gap: npt.NDArray[np.float64], h: float) -> npt.NDArray[np.float64]:
    """The sup over the lattice of |gap * κ| for each row, κ the Laplace noise's cell masses.

    ``gap`` is F_exact − F_clt on a lattice of step h (in noise scales), zero before its first
    point and (up to rounding) after its last; κ_k = P(Laplace ∈ [(k − ½)h, (k + ½)h]), i.e.
    1 − e^{−h/2} at k = 0 and sinh(h/2) r^{|k|} elsewhere, r = e^{−h}: geometric off the centre,
    so the convolution is two first-order recursions (one each way), O(points) per row where an
    FFT over the noise's width (12 scales each side, 10⁵ points at ε = 0.1) cost 100 times as
    much. Off the gap's support the convolution decays geometrically, so its sup is attained
    on the support or one point beyond either end: only those points are computed.

    Until 2026-11-29 the kernel was cut at :data:`_NOISE_TAIL` scales each side and the
    convolution taken by FFT; the two differ by at most the cut mass T = e^{−(H + ½)h}
    (H = ⌈12/h⌉ + 1 cells) times sup|gap|. e^{−(H − ½)h} sup|gap| is added to the result, so
    that the rule is never less strict than before (at most 2·10⁻⁵ stricter;
    tests/test_window_trust.py).

    Examples
    --------
    One point where the CDFs differ by 1, under noise ten points wide: what remains is the
    centre cell's mass 1 − e^{−h/2}.

    >>> gap = np.array([[0.0, 0.0, 1.0, 0.0, 0.0]])
    >>> round(float(_laplace_smoothed_sup(gap, 0.1)[0]), 4), round(-math.expm1(-0.05), 4)
    (0.0488, 0.0488)
    """
    rows = gap.shape[0]
    padded = np.concatenate([np.zeros((rows, 1)), gap, np.zeros((rows, 1))], axis=-1)
    r = math.exp(-h)
    side = -0.5 * math.exp(-h / 2.0) * math.expm1(-h)  # κ_1 = sinh(h/2) r; κ_{k+1} = r κ_k
    # causal[i] = Σ_{k ≥ 1} κ_k gap[i − k]: y[i] = r y[i − 1] + κ_1 x[i − 1].
    causal = signal.lfilter([0.0, side], [1.0, -r], padded, axis=-1)
    anti = signal.lfilter([0.0, side], [1.0, -r], padded[:, ::-1], axis=-1)[:, ::-1]
    smoothed = -math.expm1(-h / 2.0) * padded + causal + anti
    cut = math.exp(-(math.ceil(_NOISE_TAIL / h) + 0.5) * h)  # ≥ the cut mass (one cell more)
    return np.max(np.abs(smoothed), axis=-1) + cut * np.max(np.abs(gap), axis=-1)


def _reduced(n: int, scale: float) -> tuple[int, float, float]:
    """(m, noise, shrink): the n and noise whose table stands for n records under ``scale``."""
    # Beyond n₀ the distance is that of n₀ records at the same noise-to-spread ratio, times
    # √(n₀/n): the leading (skewness) order, within 2% of the direct computation for
    # n = 300 and 1000 over the cases of benchmarks/clt_accuracy.py, at a fraction of its cost.
    m = min(n, _DIRECT_N)
    if _SMALL_N < m < _DIRECT_N:
        # So too between: n is rounded down to an eighth-octave grid (n/m < 1.1), so that the
        # groups of a grouped release share a few tables rather than one per n. With the noise
        # rounding below, distances near the level move by −1e-3 to +5e-3 (mostly up: stricter)
        # over Poisson, Geometric and Exponential windows at n = 17–99 (tests/test_window_trust.py).
        m = max(int(2.0 ** (math.floor(8.0 * math.log2(m)) / 8.0)), _SMALL_N)
    shrink = math.sqrt(m / n)
    noise = scale * shrink
    if n > m and noise > 0.0:
        # Rounded down to a quarter-octave grid, so that the groups of a grouped release (each
        # its own n) share a few tables; less noise never lowers the distance much, so the
        # rounding can only make the rule stricter.
        noise = 2.0 ** (math.floor(4.0 * math.log2(noise)) / 4.0)
    return m, noise, shrink


def _ks_table(
    family: TruncatedFamily,
    n: int,
    bounds: tuple[float, float],
    scale: float,
    rows: npt.NDArray[np.intp] | None = None,
) -> tuple[npt.NDArray, npt.NDArray, npt.NDArray]:
    """(mean, var, KS) of the window sum over the family's θ grid (only ``rows``, if given)."""
    m, noise, shrink = _reduced(n, scale)
    if rows is None:
        mean, var, ks = _ks_core(family, m, bounds, noise)
    else:
        mean, var, ks = _ks_core_rows(family, m, bounds, noise, rows)
    return mean * n / m, var * n / m, ks * shrink


@functools.lru_cache(maxsize=8)
def _record_laws(
    family: TruncatedFamily, bounds: tuple[float, float], j: int
) -> tuple[npt.NDArray[np.float64], float, int]:
    """(q, step, first): one record's t̂_j law at every θ of the grid (a row each), cached.

    They do not depend on n, and a grouped release asks for many n (every group below
    :data:`_DIRECT_N` records has its own).
    """
    # The lattice depends on the window only, so every θ's law has the same points, and the
    # laws of the whole grid come from one batched call.
    return _component_law(family, family.window_theta_grid(bounds, _THETA_NODES), bounds, j)


@functools.lru_cache(maxsize=8)
def _record_moments(
    family: TruncatedFamily, bounds: tuple[float, float]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(mean, var, third central moment) of one record's t̂ at every θ of the grid, cached.

    Each of shape (θ, component). n records' window sum (the n-fold convolution of
    :func:`_n_fold`, normalised like these) has n times them, up to the convolution's rounding.
    """
    moments = []
    for j in range(family.stat_size):
        q, step, first = _record_laws(family, bounds, j)
        q = q / q.sum(axis=-1, keepdims=True)
        points = step * (first + np.arange(q.shape[-1]))
        mean = q @ points
        centred = points - mean[:, None]
        moments.append(
            (mean, np.einsum("ts,ts->t", q, centred**2), np.einsum("ts,ts->t", q, centred**3))
        )
    mean, var, third = (np.stack(part, axis=-1) for part in zip(*moments, strict=True))
    return mean, var, third


class _SumLaws:
    """The n-fold laws of one (family, n, window), one row per θ, convolved as asked."""

    def __init__(self) -> None:
        self.rows: list[dict[int, npt.NDArray[np.float64]]] = []


@functools.lru_cache(maxsize=2)
def _sum_laws(family: TruncatedFamily, n: int, bounds: tuple[float, float]) -> _SumLaws:
    """The (mutable) n-fold laws of :func:`_n_fold_rows`, cached.

    They do not depend on the noise, and the groups of a grouped release ask for the same n at
    several noise levels (one per quarter octave). At most two are kept (a full one is about
    61 θ × 32 000 lattice points for counts at n = 100).
    """
    laws = _SumLaws()
    laws.rows = [{} for _ in range(family.stat_size)]
    return laws


def _n_fold_rows(
    family: TruncatedFamily, n: int, bounds: tuple[float, float], j: int, rows: npt.NDArray
) -> npt.NDArray[np.float64]:
    """The n-fold law of t̂_j at the θ grid's ``rows`` (one row each), each convolved once."""
    done = _sum_laws(family, n, bounds).rows[j]
    todo = [int(r) for r in rows if int(r) not in done]
    if todo:
        q = _record_laws(family, bounds, j)[0]
        done.update(zip(todo, _n_fold(q[todo], n), strict=True))
    return np.stack([done[int(r)] for r in rows])


_BLOCK = 16
"""θ rows convolved with the noise at once (bounds the memory of :func:`_ks_rows`)."""


def _ks_of_rows(
    family: TruncatedFamily,
    n: int,
    bounds: tuple[float, float],
    scale: float,
    rows: npt.NDArray[np.intp],
) -> tuple[npt.NDArray, npt.NDArray, npt.NDArray]:
    """(mean, var, KS) of ``n`` records' window sum at the θ grid's ``rows``."""
    # Each family spans its own θ (TruncatedFamily.window_theta_grid): a rate, a probability,
    # a mean, or (μ, σ²).
    lower, upper, _, _ = family.record_region(n, bounds)
    # Counts: the CLT normal is resolved beside the exact law on _FINE points per integer, unless
    # the noise is so wide that integer cells change the distance by under 10⁻⁴ (module
    # docstring): then the convolutions are _FINE times shorter.
    factor = 1 if scale >= _COARSE_NOISE else _FINE
    ks, means, variances = [], [], []
    for j in range(family.stat_size):
        q, step, first = _record_laws(family, bounds, j)
        points = step * (n * first + np.arange(n * (q.shape[-1] - 1) + 1))
        blocks = []
        for i in range(0, rows.size, _BLOCK):
            pmf = _n_fold_rows(family, n, bounds, j, rows[i : i + _BLOCK])
            block_points = points
            if family.discrete:
                block_points, pmf = _refine(points, pmf, factor)
            blocks.append(_ks_rows(block_points, pmf, (lower[j], upper[j]), scale))
        ks_j, mean_j, var_j = (np.concatenate(part) for part in zip(*blocks, strict=True))
        ks.append(ks_j)
        means.append(mean_j)
        variances.append(var_j)
    return np.stack(means, axis=-1), np.stack(variances, axis=-1), np.max(ks, axis=0)


@functools.lru_cache(maxsize=256)
def _ks_core(
    family: TruncatedFamily, n: int, bounds: tuple[float, float], scale: float
) -> tuple[npt.NDArray, npt.NDArray, npt.NDArray]:
    """(mean, var, KS) of ``n`` records' window sum over the whole θ grid, cached.

    The full table: what :func:`window_clt_trust` computed until 2026-12-01 (it now asks
    :func:`_ks_core_rows` for the rows that can decide; the tests compare the two).
    """
    size = _record_laws(family, bounds, 0)[0].shape[0]
    return _ks_of_rows(family, n, bounds, scale, np.arange(size))


class _RowTable:
    """(mean, var, KS) of one (family, n, window, noise), filled row by row as asked."""

    def __init__(self, size: int, k: int) -> None:
        self.mean = np.full((size, k), np.nan)
        self.var = np.full((size, k), np.nan)
        self.ks = np.full(size, np.nan)
        self.done = np.zeros(size, dtype=bool)


@functools.lru_cache(maxsize=256)
def _row_table(
    family: TruncatedFamily, n: int, bounds: tuple[float, float], scale: float
) -> _RowTable:
    """The (mutable) table of :func:`_ks_core_rows`, one per key, cached."""
    size = _record_laws(family, bounds, 0)[0].shape[0]
    return _RowTable(size, family.stat_size)


def _ks_core_rows(
    family: TruncatedFamily,
    n: int,
    bounds: tuple[float, float],
    scale: float,
    rows: npt.NDArray[np.intp],
) -> tuple[npt.NDArray, npt.NDArray, npt.NDArray]:
    """:func:`_ks_core` at ``rows`` only, computing each row once (rows do not interact)."""
    table = _row_table(family, n, bounds, scale)
    todo = rows[~table.done[rows]]
    if todo.size:
        mean, var, ks = _ks_of_rows(family, n, bounds, scale, todo)
        table.mean[todo], table.var[todo], table.ks[todo] = mean, var, ks
        table.done[todo] = True
        seen = _largest_seen(family, bounds)
        seen[todo] = np.maximum(seen[todo], ks)
    return table.mean[rows], table.var[rows], table.ks[rows]


@functools.lru_cache(maxsize=8)
def _largest_seen(family: TruncatedFamily, bounds: tuple[float, float]) -> npt.NDArray:
    """The largest distance computed so far at each θ row, over every n and noise (mutable).

    The θ where the CLT is worst are much the same at every n and noise (those whose window
    cuts the records' law), so :func:`window_clt_trust` computes them first.
    """
    return np.full(_record_laws(family, bounds, 0)[0].shape[0], -np.inf)


def _clear_caches() -> None:
    """Empty every table (for tests and benchmarks that time or compare from scratch)."""
    for cached in (_ks_core, _row_table, _largest_seen, _sum_laws, _record_laws, _record_moments):
        cached.cache_clear()


_NEAR = 3.0
"""θ is consistent with y where n E[t̂ | θ] lies within this many sds of y (every component)."""
_ROW_MARGIN = 0.01
"""Slack, in those sds, with which :func:`window_clt_trust` picks the θ rows to compute from
one record's moments: n times them is the n-fold law's mean and variance up to the
convolution's rounding, which moves the distance to y by at most 4·10⁻⁸ sd on the grouped
releases of ``benchmarks/grouped_speed.py`` (G = 50, ε = 0.1 and 1), so no row outside the
slack can enter the decision."""


def _sd_distance(
    y: npt.NDArray[np.float64], mean: npt.NDArray, var: npt.NDArray, scale: float
) -> npt.NDArray[np.float64]:
    """Largest over components of |y − mean| in sds of y (the law's and the noise's)."""
    return np.max(np.abs(y - mean) / np.sqrt(var + 2.0 * scale**2), axis=-1)


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
    hold wherever the posterior may put it. Where no θ of the grid is that close, over the
    closest ones.

    Only the θ rows of the grid that can decide are convolved and compared, so the answer is
    that of the whole table (``tests/test_window_trust.py``): the rows near y follow from the
    law's mean and variance, n times one record's (computed for every θ once per family and
    window), so they are picked before any convolution, with a slack (:data:`_ROW_MARGIN`)
    above the convolution's rounding, and no other row can enter the sup. They are computed
    likely largest first (the largest distance seen at that θ for other n or noise, then the
    skewness term), and once a row near y is above the level the CLT is untrusted whatever the
    others give: the reason then says "at least" that distance. A trusted release has every
    row near y computed, so its distance is the whole table's.

    Examples
    --------
    >>> from pymc_dp.families import Exponential
    >>> window_clt_trust(Exponential(), 10, 3.0, 0.15, (0.0, 1.5))[0]
    False
    >>> window_clt_trust(Exponential(), 1000, 300.0, 15.0, (0.0, 1.5))[0]
    True
    """
    bounds = (float(bounds[0]), float(bounds[1]))
    n, scale = int(n), float(scale)
    y = np.asarray(released, dtype=np.float64).reshape(-1)
    # The rows that can be near y or closest to it: with |d − d̃| ≤ δ (d̃ from one record's
    # moments), {d ≤ 3} and argmin d both lie in {d̃ ≤ max(3, min d̃) + 2δ}.
    mean_1, var_1, third_1 = _record_moments(family, bounds)
    rough = _sd_distance(y, n * mean_1, n * var_1, scale)
    rows = np.flatnonzero(rough <= max(_NEAR, float(np.min(rough))) + _ROW_MARGIN)
    m, noise, _ = _reduced(n, scale)
    done = _row_table(family, m, bounds, noise).done[rows]
    if not np.all(done):
        # Likely largest first: the largest distance seen at the row (other n and noise), then
        # the skewness of the table's y (its m records and noise), the distance's leading term.
        # Only the order of the work depends on them.
        skew = np.max(np.abs(m * third_1[rows]) / (m * var_1[rows] + 2.0 * noise**2) ** 1.5, -1)
        order = np.lexsort((-skew, -_largest_seen(family, bounds)[rows]))
        rows, done = rows[order], done[order]
        rows = np.concatenate([rows[done], rows[~done]])  # what is known costs nothing
    known = stop = int(np.sum(done))
    while True:
        if stop:
            mean, var, table = _ks_table(family, n, bounds, scale, rows[:stop])
            distance = _sd_distance(y, mean, var, scale)
            near = distance <= _NEAR
            if stop == rows.size:
                if not np.any(near):
                    near = distance <= np.min(distance)
                ks, bound = float(np.max(table[near])), "up to"
                break
            if np.any(table[near] > WINDOW_KS_LEVEL):
                ks, bound = float(np.max(table[near])), "at least"
                break
        # The likeliest block first; if it passes, the release is likely trusted, and a
        # trusted one needs every row: the rest at once (fewer, larger convolutions).
        stop = min(known + _BLOCK, rows.size) if stop == known else rows.size
    reason = (
        f"KS distance of the CLT law of y from its exact law {bound} {ks:.3g} over the θ "
        f"consistent with y (trusted where ≤ {WINDOW_KS_LEVEL:g}; n = {n}, noise scale "
        f"{scale:.3g})"
    )
    return ks <= WINDOW_KS_LEVEL, reason
