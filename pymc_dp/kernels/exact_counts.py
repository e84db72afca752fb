"""Exact likelihoods of released counts, with no CLT: sums over every value of s.

For Bernoulli and Binomial records s ~ Binomial(N, θ) exactly (N = n · trials), and for
Categorical records the K counts are s ~ Multinomial(n, θ). The release adds noise with a known
law to s, so

    p(y | θ) = Σ_s p(s | θ) · k(y - s),

where k is the noise law of the mechanism that made the release (:class:`NoiseLaw`): the
Laplace density, or the discrete Laplace or discrete Gaussian probability of an integer. A
Binomial sum runs over the counts within the noise's reach of y (every count left out has noise
density below e^-40 of its peak, :data:`NOISE_TAIL`), as its PyTensor twin does; one multinomial
release is summed over each category's central window of counts only where the terms left out
are proved below 1.7e-15 of the sum (:func:`_trimmed_log_likelihood`).

The multinomial sum runs over count vectors with Σ s = n. It factorises over categories given
the total, so a forward recursion over categories in log space,

    F_1(c) = a_1(c),   F_j(c) = log Σ_{s ≤ c} exp(F_{j-1}(c - s) + a_j(s)),
    a_j(s) = s log θ_j - log s! + log k(y_j - s),

gives log p(y | θ) = log n! + F_K(n) in O(K n²), and the same tables sample s | θ, y exactly
backwards (category K first). These NumPy kernels batch over leading axes; the PyTensor versions
for NUTS are in :mod:`pymc_dp.likelihoods.exact`.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from scipy.special import gammaln, xlogy

from pymc_dp.kernels.numeric import log_sum_exp

__all__ = [
    "MAX_BATCH_TERMS",
    "NOISE_KINDS",
    "NOISE_TAIL",
    "NoiseLaw",
    "binomial_expected_count",
    "binomial_log_likelihood",
    "binomial_noise_support",
    "binomial_suffstat_weights",
    "draw_binomial_suffstat",
    "draw_multinomial_suffstat",
    "multinomial_expected_counts",
    "multinomial_log_likelihood",
]

NOISE_TAIL = 40.0
"""The windowed sums leave out every s whose noise density is below e^-40 ≈ 4e-18 of its peak."""

NOISE_KINDS = ("laplace", "discrete-laplace", "discrete-gaussian")
"""Noise laws: the Laplace density (the float mechanism), and the integer laws of OpenDP's
vetted mechanisms on a count (quantum 1)."""


class NoiseLaw(NamedTuple):
    """The law of y - s for one component of a release.

    Parameters
    ----------
    kind
        ``"laplace"``: density exp(-abs(d)/b) / (2b). ``"discrete-laplace"``: probability
        exp(-abs(d)/b) · tanh(1/(2b)) of an integer d. ``"discrete-gaussian"``: probability
        e^{-d²/(2b²)} / Z(b) of an integer d.
    scale
        b: the Laplace scale Δ/ε, or the Gaussian's σ.

    Examples
    --------
    >>> law = NoiseLaw("discrete-laplace", 2.0)
    >>> round(float(np.exp(law.logpdf(np.arange(-60, 61))).sum()), 12)
    1.0
    """

    kind: str
    scale: float

    @property
    def log_constant(self) -> float:
        """The log density's term free of d: -log 2b, log tanh(1/(2b)) or -log Z(b).

        Raises
        ------
        ValueError
            If ``kind`` is not one of :data:`NOISE_KINDS`.
        """
        b = float(self.scale)
        if self.kind == "laplace":
            return -math.log(2.0 * b)
        if self.kind == "discrete-laplace":
            return log_tanh_half_inverse(b)
        if self.kind == "discrete-gaussian":
            return -discrete_gaussian_log_normaliser(b)
        raise ValueError(f"noise kind must be one of {NOISE_KINDS} (got {self.kind!r})")

    @property
    def half_width(self) -> float:
        """W with k(d) ≤ k(0) · e^{-NOISE_TAIL} wherever abs(d) > W: the negligible tails."""
        return float(self.reach(NOISE_TAIL))

    def reach(self, nats: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """The largest abs(d) with log k(0) − log k(d) ≤ ``nats`` (0 where ``nats`` ≤ 0)."""
        nats = np.maximum(np.asarray(nats, dtype=np.float64), 0.0)
        b = float(self.scale)
        if self.kind == "discrete-gaussian":
            return b * np.sqrt(2.0 * nats)
        return b * nats

    def logpdf(self, d: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Log density (or probability, for the integer laws) of the noise at ``d``."""
        d = np.asarray(d, dtype=np.float64)
        b = float(self.scale)
        if self.kind == "discrete-gaussian":
            return -0.5 * (d / b) ** 2 + self.log_constant
        return -np.abs(d) / b + self.log_constant


def log_tanh_half_inverse(b: float) -> float:
    """Log tanh(1/(2b)): the log normaliser of the discrete Laplace law of scale b."""
    x = 0.5 / b
    # tanh(x) = (1 - e^{-2x}) / (1 + e^{-2x}), stable for tiny and large x.
    return math.log(-math.expm1(-2.0 * x)) - math.log1p(math.exp(-2.0 * x))


def discrete_gaussian_log_normaliser(sigma: float) -> float:
    """The log normaliser log Σ_k e^{-k²/(2σ²)} of the discrete Gaussian.

    For σ ≥ 2 this is log(σ√(2π)) to within e^{-2π²σ²} < 1e-34 (Poisson summation); below,
    the sum runs over k within ±(40σ + 1) (the rest is below e^-800).
    """
    if sigma >= 2.0:
        return math.log(sigma * math.sqrt(2.0 * math.pi))
    half = math.ceil(40.0 * sigma) + 1
    k = np.arange(-half, half + 1, dtype=np.float64)
    return float(log_sum_exp(-0.5 * (k / sigma) ** 2))


def binomial_suffstat_weights(
    released: npt.ArrayLike,
    theta: npt.ArrayLike,
    total: int,
    noise: NoiseLaw,
    support: tuple[int, int] | None = None,
) -> npt.NDArray[np.float64]:
    """Log [Binomial(s; total, θ) · k(y - s)] for s = 0, …, total, on a new last axis.

    ``released`` and ``theta`` broadcast against each other; the result has their broadcast
    shape plus a last axis of length ``total + 1``, or ``last - first + 1`` for the counts
    ``support = (first, last)`` alone.
    """
    y = np.asarray(released, dtype=np.float64)[..., None]
    p = np.asarray(theta, dtype=np.float64)[..., None]
    first, last = (0, int(total)) if support is None else support
    s = np.arange(first, last + 1, dtype=np.float64)
    log_choose = gammaln(total + 1.0) - gammaln(s + 1.0) - gammaln(total - s + 1.0)
    log_pmf = log_choose + xlogy(s, p) + xlogy(total - s, 1.0 - p)
    return log_pmf + noise.logpdf(y - s)


def binomial_log_likelihood(
    released: npt.ArrayLike, theta: npt.ArrayLike, total: int, noise: NoiseLaw
) -> npt.NDArray[np.float64]:
    """Exact log p(y | θ) of a released Binomial count, s ~ Binomial(total, θ).

    Parameters
    ----------
    released
        Released values y, any shape broadcastable with ``theta``.
    theta
        Success probabilities.
    total
        Number of trials behind s: n · trials (n for Bernoulli records).
    noise
        The release's noise law.

    Returns
    -------
    numpy.ndarray
        log p(y | θ), the broadcast shape of ``released`` and ``theta``.

    Examples
    --------
    >>> from scipy import stats
    >>> law = NoiseLaw("laplace", 2.0)
    >>> direct = np.log(sum(stats.binom.pmf(s, 3, 0.4) * stats.laplace.pdf(1.5, s, 2.0)
    ...                     for s in range(4)))
    >>> bool(np.isclose(binomial_log_likelihood(1.5, 0.4, 3, law), direct, rtol=1e-12))
    True
    """
    return _binomial_batches(released, theta, total, noise, log_sum_exp)


def binomial_expected_count(
    released: npt.ArrayLike, theta: npt.ArrayLike, total: int, noise: NoiseLaw
) -> npt.NDArray[np.float64]:
    """E[s | θ, y] of a released Binomial count; parameters as :func:`binomial_log_likelihood`.

    The gradient of log p(y | θ) in θ is E[s]/θ - (total - E[s])/(1 - θ).
    """
    first, last = binomial_noise_support(released, total, noise)
    s = np.arange(first, last + 1, dtype=np.float64)

    def mean(logw: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        w = np.exp(logw - np.max(logw, axis=-1, keepdims=True))
        return (w @ s) / np.sum(w, axis=-1)

    return _binomial_batches(released, theta, total, noise, mean)


def binomial_noise_support(released: npt.ArrayLike, total: int, noise: NoiseLaw) -> tuple[int, int]:
    """The counts within the noise's reach of some released y: [c - W, c + W] ∩ [0, N].

    c is y clipped to [0, N] (over a batch, from its smallest to its largest). Every s left out
    has k(y - s) ≤ k(y - c) · e^{-NOISE_TAIL}, so the terms left out of
    Σ_s Binomial(s; N, θ) · k(y - s) add up to at most k(y - c) · e^{-40} whatever θ (the bound
    of :func:`pymc_dp.likelihoods.exact.binomial_exact_logp`, which sums the same window).
    """
    y = np.clip(np.asarray(released, dtype=np.float64), 0.0, total)
    width = noise.half_width
    first = int(np.clip(math.ceil(float(np.min(y)) - width), 0, total))
    last = int(np.clip(math.floor(float(np.max(y)) + width), 0, total))
    return first, last


def _binomial_batches(
    released: npt.ArrayLike,
    theta: npt.ArrayLike,
    total: int,
    noise: NoiseLaw,
    reduce: Any,
) -> npt.NDArray[np.float64]:
    """``reduce`` of the weights over s, in chunks of at most :data:`MAX_BATCH_TERMS` terms.

    A batch of θ (a grid, or 4000 posterior draws) times a sum over 10⁵ counts would
    otherwise hold gigabytes of weights at once. The sum runs over the counts within the noise's
    reach of y (:func:`binomial_noise_support`): for a rare event among 10⁶ records at ε = 1,
    82 counts instead of 10⁶ + 1.
    """
    y, p = np.broadcast_arrays(
        np.asarray(released, dtype=np.float64), np.asarray(theta, dtype=np.float64)
    )
    support = binomial_noise_support(y, total, noise)
    flat_y, flat_p = y.reshape(-1), p.reshape(-1)
    step = max(1, MAX_BATCH_TERMS // (support[1] - support[0] + 1))
    out = np.empty(flat_y.size)
    for start in range(0, flat_y.size, step):
        part = slice(start, start + step)
        weights = binomial_suffstat_weights(flat_y[part], flat_p[part], total, noise, support)
        out[part] = reduce(weights)
    return out.reshape(y.shape)


def draw_binomial_suffstat(
    rng: np.random.Generator,
    *,
    released: npt.ArrayLike,
    theta: npt.ArrayLike,
    total: int,
    noise: NoiseLaw,
) -> npt.NDArray[np.float64]:
    """Exact draws of s | θ, y for released Binomial counts (one per broadcast element)."""
    first = binomial_noise_support(released, total, noise)[0]
    return first + _binomial_batches(released, theta, total, noise, lambda w: _draw_index(rng, w))


def _draw_index(rng: np.random.Generator, logw: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """Draw an index along the last axis with probabilities ∝ exp(logw), batched."""
    w = np.exp(logw - np.max(logw, axis=-1, keepdims=True))
    cum = np.cumsum(w, axis=-1)
    u = rng.uniform(size=cum.shape[:-1])[..., None] * cum[..., -1:]
    return np.minimum(np.sum(cum < u, axis=-1), logw.shape[-1] - 1)


def _category_terms(
    released: npt.NDArray[np.float64], theta: npt.NDArray[np.float64], n: int, noise: NoiseLaw
) -> npt.NDArray[np.float64]:
    """a_j(s) = s log(n θ_j) - log s! + log k(y_j - s), shape (..., K, n + 1).

    The factor n^s makes each a_j a Poisson(n θ_j) log-mass up to a constant, peaked near
    n θ_j rather than at s = 0, so the convolutions keep their precision where the mass is;
    over counts with Σ s_j = n it contributes n^n, which the likelihood takes off again.
    """
    s, log_factorial = _counts(n)
    return xlogy(s, n * theta[..., None]) - log_factorial + noise.logpdf(released[..., None] - s)


@functools.lru_cache(maxsize=16)
def _counts(n: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The counts 0…n and their log factorials (read-only; cached: a third of a term's cost)."""
    s = np.arange(n + 1, dtype=np.float64)
    log_factorial = gammaln(s + 1.0)
    s.flags.writeable = log_factorial.flags.writeable = False
    return s, log_factorial


@functools.lru_cache(maxsize=16)
def _shift_matrix(n: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Index c - s and a log-mask (0 where s ≤ c, -inf above) of the convolution matrix."""
    c, s = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    return np.clip(c - s, 0, n), np.where(s <= c, 0.0, -np.inf)


MAX_BATCH_TERMS = 4_000_000
"""Most terms a batched draw holds at once (32 MB per float64 array); larger batches of
posterior draws are split."""

# Below this (relative to the largest possible term) an output of the linear convolution may
# have lost terms to underflow. Its true value is then below 2e-280 of that largest term: each
# of at most n + 1 lost products is below the smallest normal float, 2.2e-308.
_DEEP = 1e-280
_LOG_DEEP_BOUND = math.log(2e-280)
# A group of terms whose bound is this far below the rest changes a log-sum by < 1e-17.
_NEGLIGIBLE = 40.0


def _lazy_log_convolve(
    f: npt.NDArray[np.float64], g: npt.NDArray[np.float64], n: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_] | None]:
    """(h, deep): h as :func:`_log_convolve`, except at rows ``deep`` (an upper bound there).

    ``deep`` is ``None`` when every row is exact.

    For one pair of vectors, a linear convolution of exp(f - max f) and exp(g - max g): a sum of
    positive terms, accurate to rounding wherever no term underflows, and 5-50x faster than the
    log-space form, which is kept for batches and for outputs deep in the tails.
    """
    mf, mg = np.max(f, axis=-1), np.max(g, axis=-1)
    if f.ndim == 1 and g.ndim == 1 and np.isfinite(mf) and np.isfinite(mg):
        h = np.convolve(np.exp(f - mf), np.exp(g - mg))[: n + 1]
        deep = h < _DEEP
        out = np.log(np.where(deep, 1.0, h)) + (mf + mg)
        if np.any(deep):
            out[deep] = mf + mg + _LOG_DEEP_BOUND
            return out, deep
        return out, None
    return _log_convolve_rows(f, g, n, slice(None)), None


def _log_convolve(
    f: npt.NDArray[np.float64], g: npt.NDArray[np.float64], n: int
) -> npt.NDArray[np.float64]:
    """h(c) = log Σ_{s ≤ c} exp(f(c - s) + g(s)), c = 0…n, along the last axis."""
    out, deep = _lazy_log_convolve(f, g, n)
    if deep is not None:
        rows = np.flatnonzero(deep)
        out[rows] = _log_convolve_rows(f, g, n, rows)
    return out


def _combine(
    f: npt.NDArray[np.float64],
    g: npt.NDArray[np.float64],
    n: int,
    other: npt.NDArray[np.float64],
    reverse: bool = False,
) -> npt.NDArray[np.float64]:
    """Log-terms h(c) + other(c), or h(n - c) + other(c) with ``reverse``, for h = f ⊛ g.

    Rows of h deep in the tails are computed exactly only if their bound could matter to the
    log-sum of the terms (within e^-40 of the rest); otherwise they are dropped.
    """
    h, deep = _lazy_log_convolve(f, g, n)
    if reverse:
        h, deep = h[..., ::-1], (None if deep is None else deep[::-1])
    terms = h + other
    if deep is None:
        return terms
    if np.all(deep) or log_sum_exp(terms[deep]) > log_sum_exp(terms[~deep]) - _NEGLIGIBLE:
        rows = np.flatnonzero(deep)
        terms[rows] = _log_convolve_rows(f, g, n, n - rows if reverse else rows) + other[rows]
    else:
        terms[deep] = -np.inf
    return terms


def _log_convolve_rows(
    f: npt.NDArray[np.float64], g: npt.NDArray[np.float64], n: int, rows: Any
) -> npt.NDArray[np.float64]:
    """Outputs ``rows`` of :func:`_log_convolve`, in log space (batched)."""
    shift, log_mask = _shift_matrix(n)
    return log_sum_exp(f[..., shift[rows]] + (g[..., None, :] + log_mask[rows]))


def _forward(
    terms: npt.NDArray[np.float64], n: int, count: int | None = None
) -> list[npt.NDArray[np.float64]]:
    """Forward tables F_0, …, F_(count-1) (each (..., n + 1)) of the recursion over categories.

    F_j(c) sums the first j + 1 categories' terms over counts with total c; ``count`` defaults
    to K - 1.
    """
    count = terms.shape[-2] - 1 if count is None else count
    tables = [terms[..., 0, :]]
    for j in range(1, count):
        tables.append(_log_convolve(tables[-1], terms[..., j, :], n))
    return tables


def _check_counts(released: npt.ArrayLike, theta: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(released, dtype=np.float64)
    p = np.asarray(theta, dtype=np.float64)
    if y.shape[-1:] != p.shape[-1:] or y.ndim == 0 or y.shape[-1] < 2:
        raise ValueError(
            f"released and theta must end in the same axis of K >= 2 categories "
            f"(got shapes {y.shape} and {p.shape})"
        )
    y, p = np.broadcast_arrays(y, p)
    return y, p


def multinomial_log_likelihood(
    released: npt.ArrayLike, theta: npt.ArrayLike, n: int, noise: NoiseLaw
) -> npt.NDArray[np.float64]:
    """Exact log p(y | θ) of K released counts, s ~ Multinomial(n, θ).

    Parameters
    ----------
    released
        Released counts y, shape ``(..., K)``.
    theta
        Category probabilities, shape ``(..., K)`` (broadcast with ``released``).
    n
        Number of records.
    noise
        The release's noise law, the same on every component.

    Returns
    -------
    numpy.ndarray
        log p(y | θ), the broadcast batch shape.

    Examples
    --------
    >>> import itertools
    >>> from scipy import stats
    >>> law, y, p = NoiseLaw("laplace", 1.5), np.array([1.0, 2.5, -0.5]), np.array([.2, .5, .3])
    >>> direct = np.log(sum(stats.multinomial.pmf(s, 3, p) * np.prod(stats.laplace.pdf(y, s, 1.5))
    ...                     for s in itertools.product(range(4), repeat=3) if sum(s) == 3))
    >>> bool(np.isclose(multinomial_log_likelihood(y, p, 3, law), direct, rtol=1e-12))
    True
    """
    y, p = _check_counts(released, theta)
    k = y.shape[-1]
    if y.ndim == 1:
        trimmed = _trimmed_log_likelihood(_category_terms(y, p, n, noise), n)
        if trimmed is not None:
            return np.float64(trimmed)
    elif y[..., 0].size * (n + 1) ** 2 > MAX_BATCH_TERMS:
        # Row by row, each by the trimmed sum, rather than (n + 1)² log terms per row at once.
        flat_y, flat_p = y.reshape(-1, k), p.reshape(-1, k)
        out = [multinomial_log_likelihood(a, b, n, noise) for a, b in zip(flat_y, flat_p)]
        return np.reshape(out, y.shape[:-1])
    terms = _category_terms(y, p, n, noise)
    # The last category takes whatever the others leave: s_K = n - c.
    if k == 2:
        closing = terms[..., 0, :] + terms[..., 1, ::-1]
    else:
        first = _forward(terms, n, k - 2)[-1]
        closing = _combine(first, terms[..., k - 2, :], n, terms[..., k - 1, ::-1])
    return gammaln(n + 1.0) - xlogy(n, n) + log_sum_exp(closing)


# Each category's trimmed window leaves out at most this share of its own terms' mass on each side.
# At e^-40 a release whose noise sums far from 0 (Σ y = 990.6 at n = 1000, b = 2: the kept sum
# e^-8 of the product of the categories' masses) failed the proof and took the full sum (10x
# dearer); e^-60 widens each window by a third and leaves 26 nats of room.
_TRIM_TAIL = math.exp(-60.0)
# The trimmed sum is used when the terms it leaves out are proved below this share of it.
_TRIM_TOLERANCE = math.exp(-34.0)  # 1.7e-15
# Scaled terms within a window are above e^-745 relative to the product of the categories'
# largest; a trimmed sum this far below that product could have lost terms to underflow.
_TRIM_FLOOR = -500.0


def _trimmed_log_likelihood(terms: npt.NDArray[np.float64], n: int) -> float | None:
    """Log p(y | θ) of one release summed over each category's central window of counts.

    Most of the (n + 1)² terms of the sum (K = 3) are negligible: a_j(s) is peaked (the Poisson
    factor within a few sd(s) of n θ_j, the noise within a few b of y_j). Each category keeps
    the window of counts outside which at most e^-60 of its own mass lies on either side. The
    dropped count vectors have some s_j outside its window. Those with s_j outside sum to at
    most 2e^-60 Z_j · Π_{i ≠ j, m} Z_i · max exp a_m, with Z_i = Σ_s exp a_i(s), for any m ≠ j:
    given s_j and the counts other than s_m, the constraint Σ s = n fixes s_m. The trimmed
    sum is returned only where that bound is below 1.7e-15 of it (a relative error at the
    level of rounding); else ``None``, and the caller sums every term.

    ``terms`` are :func:`_category_terms` of one release, shape ``(K, n + 1)``.
    """
    k = terms.shape[0]
    top = np.max(terms, axis=-1)
    if not np.all(np.isfinite(top)):
        return None
    w = np.exp(terms - top[:, None])
    left = np.cumsum(w, axis=-1)
    right = np.cumsum(w[:, ::-1], axis=-1)[:, ::-1]
    mass = left[:, -1]
    cut = _TRIM_TAIL * mass[:, None]
    lo = np.argmax(left > cut, axis=-1)  # the first count whose left tail is not negligible
    hi = n - np.argmax(right[:, ::-1] > cut, axis=-1)
    # The first K - 1 categories by linear convolution of their windows (all scaled terms in a
    # window are above e^-745 unless the sum is too small to trust, tested below).
    h, offset = w[0, lo[0] : hi[0] + 1], int(lo[0])
    for j in range(1, k - 1):
        h = np.convolve(h, w[j, lo[j] : hi[j] + 1])
        offset += int(lo[j])
    # The last category takes whatever the others leave: s_K = n - c over c in h's support.
    c = np.arange(offset, offset + h.size)
    last = n - c
    keep = (last >= lo[-1]) & (last <= hi[-1])
    total = float(np.dot(h[keep], w[-1, last[keep]]))
    if not total > 0.0:
        return None
    log_kept = math.log(total)
    # Relative to Π_j max_s exp a_j(s): the bound on the dropped terms, and the kept sum.
    # Σ_j 2 e^-60 Π_{i ≠ m_j} Z_i, with m_j the largest Z other than Z_j (scaled: max exp a = 1).
    log_mass = np.log(mass)
    order = np.argsort(log_mass)
    largest = np.where(np.arange(k) == order[-1], log_mass[order[-2]], log_mass[order[-1]])
    log_dropped = math.log(2.0 * _TRIM_TAIL) + float(
        np.logaddexp.reduce(np.sum(log_mass) - largest)
    )
    if log_kept < _TRIM_FLOOR or log_dropped > log_kept + math.log(_TRIM_TOLERANCE):
        return None
    return float(gammaln(n + 1.0) - xlogy(n, n) + np.sum(top) + log_kept)


def draw_multinomial_suffstat(
    rng: np.random.Generator,
    *,
    released: npt.ArrayLike,
    theta: npt.ArrayLike,
    n: int,
    noise: NoiseLaw,
) -> npt.NDArray[np.float64]:
    """Exact draws of the counts s | θ, y (Σ s = n), by backward sampling over categories.

    Parameters are those of :func:`multinomial_log_likelihood`; returns counts of shape
    ``(..., K)``, one draw per batch element. A batch that would hold more than
    :data:`MAX_BATCH_TERMS` terms of the recursion at once (4000 posterior draws at n = 100
    already would) is drawn one element at a time, by the fast one-release recursion.
    """
    y, p = _check_counts(released, theta)
    k = y.shape[-1]
    if y[..., 0].size * max(k - 2, 1) * (n + 1) ** 2 > MAX_BATCH_TERMS:
        flat_y, flat_p = y.reshape(-1, k), p.reshape(-1, k)
        out = np.stack([_draw_counts(rng, a, b, n, noise) for a, b in zip(flat_y, flat_p)])
        return out.reshape(y.shape)
    return _draw_counts(rng, y, p, n, noise)


def _draw_counts(
    rng: np.random.Generator,
    y: npt.NDArray[np.float64],
    p: npt.NDArray[np.float64],
    n: int,
    noise: NoiseLaw,
) -> npt.NDArray[np.float64]:
    """Backward sampling of the counts for a batch (or one release) of checked y and θ."""
    terms = _category_terms(y, p, n, noise)
    tables = _forward(terms, n)
    k = y.shape[-1]
    batch = y.shape[:-1]
    counts = np.zeros((*batch, k), dtype=np.int64)
    left = np.full(batch, n, dtype=np.int64)
    s = np.arange(n + 1)
    for j in range(k - 1, 0, -1):
        # s_j ∝ F_{j-1}(left - s_j) · a_j(s_j) over s_j ≤ left.
        rest = np.take_along_axis(
            tables[j - 1], np.clip(left[..., None] - s, 0, n).reshape(*batch, n + 1), axis=-1
        )
        logw = np.where(s <= left[..., None], rest + terms[..., j, :], -np.inf)
        counts[..., j] = _draw_index(rng, logw)
        left = left - counts[..., j]
    counts[..., 0] = left
    return counts.astype(np.float64)


def multinomial_expected_counts(
    released: npt.ArrayLike, theta: npt.ArrayLike, n: int, noise: NoiseLaw
) -> npt.NDArray[np.float64]:
    """E[s | θ, y] of K released counts, s ~ Multinomial(n, θ), by forward-backward recursion.

    It is also the gradient of :func:`multinomial_log_likelihood` in log θ: log p(y | θ) is
    log Σ_s exp(Σ_j s_j log θ_j + …). Each category's marginal is its own terms times the
    convolution of the forward table before it and the backward table after it, so the cost is
    O(K n²), as for the likelihood. Parameters are those of
    :func:`multinomial_log_likelihood`; returns shape ``(..., K)``.
    """
    y, p = _check_counts(released, theta)
    terms = _category_terms(y, p, n, noise)
    k = y.shape[-1]
    s = np.arange(n + 1, dtype=np.float64)
    # forward[i] sums categories 0…i; backward[i] sums categories K-1-i…K-1.
    forward = _forward(terms, n, max(k - 2, 1))
    backward = _forward(terms[..., ::-1, :], n, max(k - 2, 1))
    means = []
    for j in range(k):
        # s_j = v leaves n - v to the other categories.
        if k == 2:
            logw = terms[..., j, :] + terms[..., 1 - j, ::-1]
        elif j == 0:
            logw = _combine(backward[k - 3], terms[..., 1, :], n, terms[..., 0, :], reverse=True)
        elif j == k - 1:
            logw = _combine(forward[k - 3], terms[..., k - 2, :], n, terms[..., j, :], reverse=True)
        else:
            logw = _combine(forward[j - 1], backward[k - 2 - j], n, terms[..., j, :], reverse=True)
        w = np.exp(logw - np.max(logw, axis=-1, keepdims=True))
        means.append(np.sum(w * s, axis=-1) / np.sum(w, axis=-1))
    return np.stack(means, axis=-1)
