"""Exact likelihood of a windowed count release: the n-fold convolution of one record's law.

A windowed count release (Poisson or Geometric records, window [a, b]) sums
t̂(x) = x · 1[a ≤ x ≤ b] over n records: a record outside the window adds 0. One record's t̂
has a law q on {0, …, b}: q(k) = P(x = k) inside the window, and q(0) also holds every record
outside it. The window sum ŝ has law q^{∗n}, the n-fold convolution, so

    p(y | θ) = Σ_s q^{∗n}(s) · k(y - s)

with k the noise law of the release, exactly up to floating point (no CLT, nothing truncated).
q^{∗n} is computed by FFT, whose error is about 1e-16 of the largest probability. So that the
terms that carry the sum keep their relative accuracy wherever θ lies, q is first tilted,
q_τ(k) ∝ q(k) e^{τk}, with τ chosen so that q_τ^{∗n} is centred where the terms of the sum are
largest (its saddle point), and q^{∗n}(s) = M(τ)^n e^{-τs} q_τ^{∗n}(s), M(τ) = Σ_k q(k) e^{τk}.

The gradient of log p(y | θ) in log q(j) is n times the posterior probability that one record
has t̂ = j given y; PyTensor gets it from :func:`window_sum_log_likelihood` (see
:mod:`pymc_dp.likelihoods.exact`), so NUTS and the grid sampler use the same kernel.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy import fft, signal

from pymc_dp.kernels.exact_counts import NoiseLaw

__all__ = [
    "draw_window_sum",
    "window_record_log_pmf",
    "window_sum_log_likelihood",
]

_NEWTON_STEPS = 200


def window_record_log_pmf(
    dist, window: tuple[int, int], upper: int | None = None
) -> npt.NDArray[np.float64]:
    """Log q(k), k = 0, …, b: the law of one record's windowed statistic t̂ = x · 1[a ≤ x ≤ b].

    Parameters
    ----------
    dist
        The record's law as a (possibly batched) frozen ``scipy.stats`` discrete distribution.
    window
        Integer window (a, b), a ≥ 0.
    upper
        Length of the last axis minus one (default b).

    Returns
    -------
    ndarray
        Shape ``dist``'s batch shape plus ``(upper + 1,)``.
    """
    lo, hi = (int(v) for v in window)
    top = hi if upper is None else int(upper)
    k = np.arange(top + 1, dtype=np.float64)
    args = [np.asarray(a, dtype=np.float64)[..., None] for a in dist.args]
    frozen = dist.dist(*args, **dist.kwds)
    inside = (k >= lo) & (k <= hi)
    with np.errstate(divide="ignore"):
        log_q = np.where(inside, frozen.logpmf(k), -np.inf)
        outside = np.logaddexp(frozen.logcdf(lo - 1.0), frozen.logsf(float(hi)))[..., 0]
    log_q[..., 0] = np.logaddexp(log_q[..., 0], outside)
    return log_q


def _tilt(log_q: npt.NDArray[np.float64], n: int, y: float, noise: NoiseLaw) -> float:
    """The tilt τ that centres q_τ^{∗n} on the largest terms of Σ_s q^{∗n}(s) k(y - s).

    Those terms peak where the slope of log q^{∗n}, about -τ at the mean n·m(τ) of q_τ^{∗n},
    meets the slope of log k(y - s): n·m(τ) = y while τ is within ±1/b for the Laplace laws
    (beyond, the noise is flatter than the tail and τ = ±1/b), and n·m(τ) + τb² = y for the
    discrete Gaussian. m(τ) increases with τ, so a safeguarded Newton iteration finds it; the
    tilted mean need only land within a fraction of an sd of its target.
    """
    k = np.arange(log_q.shape[-1], dtype=np.float64)
    b = float(noise.scale)
    extra = b * b if noise.kind == "discrete-gaussian" else 0.0

    finite = np.isfinite(log_q)
    k, log_q = k[finite], log_q[finite]

    def excess(tau: float) -> tuple[float, float, float]:
        lt = log_q + tau * k
        p = np.exp(lt - np.max(lt))
        p /= p.sum()
        mean = float(p @ k)
        var = max(float(p @ (k - mean) ** 2), 0.0)
        return n * mean + tau * extra - y, n * var + extra, math.sqrt(n * var)

    if extra:
        lo, hi = (y - float(k[-1]) * n) / extra - 1.0, y / extra + 1.0
    else:
        lo, hi = -1.0 / b, 1.0 / b
        # A target beyond the reach of the tilt: the noise is flatter than the tail there.
        if excess(lo)[0] >= 0.0:
            return lo
        if excess(hi)[0] <= 0.0:
            return hi
    tau = min(max(0.0, lo), hi)
    for _ in range(_NEWTON_STEPS):
        gap, slope, sd = excess(tau)
        if abs(gap) <= 0.25 * sd + 0.5:
            return tau
        if gap < 0.0:
            lo = tau
        else:
            hi = tau
        step = tau - gap / slope if slope > 0.0 else math.nan
        tau = step if lo < step < hi else 0.5 * (lo + hi)
        if hi - lo < 1e-12 * (1.0 + abs(tau)):
            break
    return tau


def _tilted(log_q: npt.NDArray[np.float64], tau: float) -> tuple[npt.NDArray, float]:
    """(q_τ normalised, log M(τ))."""
    lt = log_q + tau * np.arange(log_q.shape[-1])
    top = float(np.max(lt))
    q = np.exp(lt - top)
    total = float(q.sum())
    return q / total, top + math.log(total)


def _int_power(z: npt.NDArray[np.complex128], c: int) -> npt.NDArray[np.complex128]:
    """Z**c by repeated squaring: about 2·log2(c) complex products.

    A complex ``**`` takes a log and an exp per element (6.5 ms against 0.3 ms for 25 000
    elements, c = 100).
    """
    out, base = None, z
    while c:
        if c & 1:
            out = base if out is None else out * base
        c >>= 1
        if c:
            base = base * base
    return np.ones_like(z) if out is None else out


def _powers(q: npt.NDArray[np.float64], n: int, counts: tuple[int, ...]) -> list[npt.NDArray]:
    """q^{∗c} for each c in ``counts`` (c ≤ n), by one FFT; small negative errors set to 0."""
    top = q.size - 1
    length = fft.next_fast_len(n * top + 1, real=True)
    spectrum = fft.rfft(q, length)
    return [
        np.maximum(fft.irfft(_int_power(spectrum, c), length)[: c * top + 1], 0.0)
        if c
        else np.ones(1)
        for c in counts
    ]


def _terms(
    log_q: npt.NDArray[np.float64], n: int, y: float, noise: NoiseLaw, counts: tuple[int, ...]
) -> tuple[npt.NDArray, float, list[npt.NDArray], npt.NDArray, float]:
    """(q_τ, log M(τ), [q_τ^{∗c} for c in counts], w, log scale of w) for one release.

    w(s) = e^{-τs} k(y - s) over s = 0, …, n·b, divided by its largest value e^peak, so that
    Σ_s q^{∗n}(s) k(y - s) = M(τ)^n e^peak Σ_s q_τ^{∗n}(s) w(s).
    """
    tau = _tilt(log_q, n, y, noise)
    q, log_m = _tilted(log_q, tau)
    powers = _powers(q, n, counts)
    s = np.arange(n * (log_q.size - 1) + 1, dtype=np.float64)
    log_w = -tau * s + noise.logpdf(y - s)
    peak = float(np.max(log_w))
    return q, log_m, powers, np.exp(log_w - peak), peak


def _rows(
    log_q: npt.ArrayLike, released: npt.ArrayLike
) -> tuple[npt.NDArray, npt.NDArray, tuple[int, ...]]:
    """``log_q`` as rows ``(m, b + 1)`` and ``released`` as ``(m,)``, with their batch shape."""
    log_q = np.asarray(log_q, dtype=np.float64)
    y = np.asarray(released, dtype=np.float64)
    batch = np.broadcast_shapes(log_q.shape[:-1], y.shape)
    rows = np.broadcast_to(log_q, (*batch, log_q.shape[-1])).reshape(-1, log_q.shape[-1])
    return rows, np.broadcast_to(y, batch).reshape(-1), batch


def _one_log_likelihood(
    log_q: npt.NDArray[np.float64], n: int, y: float, noise: NoiseLaw, gradient: bool
) -> tuple[float, npt.NDArray[np.float64] | None]:
    if not (np.isfinite(y) and np.any(np.isfinite(log_q))) or np.any(~(log_q < 1e-9)):
        # θ off its support (a sampler's trial point: λ = inf or NaN) gives no law of one record.
        return -math.inf, (np.zeros_like(log_q) if gradient else None)
    counts = (n, n - 1) if gradient else (n,)
    q, log_m, powers, w, peak = _terms(log_q, n, y, noise, counts)
    # Not np.dot: a BLAS call, whose threads spin on a busy machine (15 ms for 5·10⁴ terms).
    total = float(np.sum(powers[0] * w))
    if not total > 0.0:
        return -math.inf, (np.zeros_like(log_q) if gradient else None)
    log_lik = math.log(total) + peak + n * log_m
    if not gradient:
        return log_lik, None
    # C(j) = Σ_u q_τ^{∗(n-1)}(u) w(u + j): a correlation, by FFT.
    corr = signal.fftconvolve(w, powers[1][::-1], mode="valid")
    return log_lik, n * q * np.maximum(corr, 0.0) / total


def window_sum_log_likelihood(
    log_q: npt.ArrayLike,
    n: int,
    released: npt.ArrayLike,
    noise: NoiseLaw,
    *,
    gradient: bool = False,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64] | None]:
    """Log p(y | q) = log Σ_s q^{∗n}(s) k(y - s), and optionally its gradient in log q.

    Parameters
    ----------
    log_q
        Log law of one record's windowed statistic over {0, …, b}, shape ``(..., b + 1)``
        (:func:`window_record_log_pmf`).
    n
        Number of records.
    released
        Released value y, broadcasting against ``log_q``'s batch shape.
    noise
        The release's noise law.
    gradient
        Also return ∂ log p / ∂ log q(j) = n · P(t̂ = j for one record | y).

    Returns
    -------
    (ndarray, ndarray or None)
        Log-likelihoods with the batch shape, and gradients shaped like ``log_q``.

    Examples
    --------
    One Poisson(2) record in the window [0, 3], released with discrete Laplace noise:

    >>> from scipy import stats
    >>> law = NoiseLaw("discrete-laplace", 1.0)
    >>> log_q = window_record_log_pmf(stats.poisson(2.0), (0, 3))
    >>> ll, _ = window_sum_log_likelihood(log_q, 1, 2.0, law)
    >>> direct = np.log(np.sum(np.exp(log_q + law.logpdf(2.0 - np.arange(4)))))
    >>> bool(np.isclose(ll, direct, rtol=1e-12))
    True
    """
    log_q, y, batch = _rows(log_q, released)
    out = np.empty(y.size)
    grads = np.empty(log_q.shape) if gradient else None
    for i in range(y.size):
        out[i], g = _one_log_likelihood(log_q[i], int(n), float(y[i]), noise, gradient)
        if gradient:
            grads[i] = g
    return out.reshape(batch), (grads.reshape(*batch, -1) if gradient else None)


def draw_window_sum(
    rng: np.random.Generator,
    log_q: npt.ArrayLike,
    n: int,
    released: npt.ArrayLike,
    noise: NoiseLaw,
) -> npt.NDArray[np.float64]:
    """Exact draws of the window sum ŝ | θ, y ∝ q^{∗n}(ŝ) k(y - ŝ), one per batch element.

    ``log_q`` (shape ``(..., b + 1)``) and ``released`` broadcast; the result has the batch shape.
    """
    log_q, y, batch = _rows(log_q, released)
    out = np.empty(y.size)
    for i in range(y.size):
        _, _, (power,), w, _ = _terms(log_q[i], int(n), float(y[i]), noise, (int(n),))
        cdf = np.cumsum(power * w)
        out[i] = float(np.searchsorted(cdf, rng.uniform() * cdf[-1], side="right"))
    return out.reshape(batch)
