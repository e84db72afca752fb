"""The exact multinomial sums of :mod:`pymc_dp.kernels.exact_counts`, compiled with Numba.

:func:`~pymc_dp.kernels.exact_counts.multinomial_log_likelihood` and
:func:`~pymc_dp.kernels.exact_counts.multinomial_expected_counts` run the forward(–backward)
recursion over categories with NumPy: for the few hundred records of a typical group most of
their cost is Python's (60 µs for the likelihood and 100–150 µs for the expected counts at
n = 50–200, K = 3), and a grouped release pays it once per group and gradient. Here is the same
algorithm, one release at a time, in compiled loops:

- each category's log-terms a_j(s) = s log(n θ_j) − log s! + log k(y_j − s), s = 0…n;
- each convolution of two tables in linear space, each scaled by its largest term, which is exact
  to rounding for sums of positive terms wherever no term underflows; an output below 1e-280 of
  the scaled product (where terms may have underflowed) is recomputed in log space, or, in the
  last convolution, dropped when its bound (from its largest product) is 40 nats below the
  other terms' sum;
- log p(y | θ) = log n! − n log n + log Σ_c (a_0 ⊛ … ⊛ a_(K−2))(c) · a_(K−1)(n − c), and E[s_j | y]
  from the convolution of the tables before and after category j.

The results agree with the NumPy kernels to rounding (``tests/test_multinomial_jit.py``).
"""

from __future__ import annotations

import math

import numba
import numpy as np
import numpy.typing as npt

from pymc_dp.kernels.exact_counts import NoiseLaw

__all__ = [
    "JIT_MAX_N",
    "JIT_MAX_N_EXPECTED",
    "multinomial_expected_counts_jit",
    "multinomial_log_likelihood_jit",
]

JIT_MAX_N = 300
"""Largest n for which the compiled likelihood is used (2–14× faster than NumPy up to here,
measured at K = 3): above it NumPy's trimmed sum, which skips the terms that carry no mass, costs
less than the full O(K n²) convolutions."""

JIT_MAX_N_EXPECTED = 500
"""The same for the expected counts (the gradient), which NumPy does not trim: the compiled ones
cost 0.4× NumPy's at n = 400 and 1.1× at n = 600."""

# As in exact_counts: below 1e-280 of the scaled product an output may have lost terms to
# underflow (its true value is then below 2e-280 of it); a group of terms bounded 40 nats below
# the rest changes a log-sum by < 1e-17.
_DEEP = 1e-280
_LOG_DEEP_BOUND = math.log(2e-280)
_NEGLIGIBLE = 40.0


@numba.njit(cache=True)
def _terms(y, p, n, gaussian, b, log_c):  # pragma: no cover - compiled
    k = y.shape[0]
    out = np.empty((k, n + 1))
    for j in range(k):
        log_np = math.log(n * p[j]) if p[j] > 0.0 else -math.inf
        for s in range(n + 1):
            d = y[j] - s
            noise = -0.5 * (d / b) ** 2 + log_c if gaussian else -abs(d) / b + log_c
            base = 0.0 if s == 0 else s * log_np - math.lgamma(s + 1.0)
            out[j, s] = base + noise
    return out


@numba.njit(cache=True)
def _log_sum(x):  # pragma: no cover - compiled
    top = np.max(x)
    if not np.isfinite(top):
        return top
    return math.log(np.sum(np.exp(x - top))) + top


@numba.njit(cache=True)
def _lazy_convolve(f, g, n):  # pragma: no cover - compiled
    """(h, deep): h(c) = log Σ_{s ≤ c} exp(f(c − s) + g(s)), c = 0…n, with bounds at ``deep``.

    At the ``deep`` outputs products may have underflowed and h holds an upper bound instead.
    """
    out = np.full(n + 1, -math.inf)
    deep = np.zeros(n + 1, dtype=np.bool_)
    mf, mg = np.max(f), np.max(g)
    if not (np.isfinite(mf) and np.isfinite(mg)):
        return out, deep
    ef, eg = np.exp(f - mf), np.exp(g - mg)
    for c in range(n + 1):
        acc = 0.0
        for s in range(c + 1):
            acc += ef[c - s] * eg[s]
        if acc >= _DEEP:
            out[c] = math.log(acc) + mf + mg
        else:  # each of the ≤ n + 1 lost products is below 2.2e-308
            out[c] = _LOG_DEEP_BOUND + mf + mg
            deep[c] = True
    return out, deep


@numba.njit(cache=True)
def _exact_row(f, g, c):  # pragma: no cover - compiled
    """Output c of the convolution in log space."""
    top = -math.inf
    for s in range(c + 1):
        top = max(top, f[c - s] + g[s])
    if top == -math.inf:
        return top
    acc = 0.0
    for s in range(c + 1):
        acc += math.exp(f[c - s] + g[s] - top)
    return math.log(acc) + top


@numba.njit(cache=True)
def _log_convolve(f, g, n):  # pragma: no cover - compiled
    """h(c) = log Σ_{s ≤ c} exp(f(c − s) + g(s)), c = 0…n, every output exact."""
    out, deep = _lazy_convolve(f, g, n)
    for c in range(n + 1):
        if deep[c]:
            out[c] = _exact_row(f, g, c)
    return out


@numba.njit(cache=True)
def _combine(f, g, n, other):  # pragma: no cover - compiled
    """Log-terms (f ⊛ g)(n − c) + other(c), c = 0…n.

    An output of f ⊛ g deep in the tails is computed exactly only if its bound, (r + 1) times its
    largest product at r = n − c, could matter to the log-sum of the terms; the outputs dropped
    are each below e^-40/(n + 1) of the rest, together below e^-40 of it.
    """
    h, deep = _lazy_convolve(f, g, n)
    terms = h[::-1] + other
    deep = deep[::-1]
    if not np.any(deep):
        return terms
    kept = -math.inf
    for c in range(n + 1):
        if not deep[c]:
            kept = np.logaddexp(kept, terms[c])
    limit = kept - _NEGLIGIBLE - math.log(n + 1.0)
    for c in range(n + 1):
        if not deep[c]:
            continue
        r, top = n - c, -math.inf
        for s in range(r + 1):
            top = max(top, f[r - s] + g[s])
        bound = top + math.log(r + 1.0) + other[c]
        terms[c] = _exact_row(f, g, r) + other[c] if bound > limit else -math.inf
    return terms


@numba.njit(cache=True)
def _chain(terms, n, first, step, count):  # pragma: no cover - compiled
    """Tables T_0…T_(count−1): T_0 = terms[first], T_i = T_(i−1) ⊛ terms[first + i·step]."""
    out = np.empty((max(count, 1), n + 1))
    out[0] = terms[first]
    for i in range(1, count):
        out[i] = _log_convolve(out[i - 1], terms[first + i * step], n)
    return out


@numba.njit(cache=True)
def _log_likelihood(y, p, n, gaussian, b, log_c):  # pragma: no cover - compiled
    terms = _terms(y, p, n, gaussian, b, log_c)
    k = y.shape[0]
    if k == 2:
        closing = terms[0][::-1] + terms[1]
    else:
        closing = _combine(_chain(terms, n, 0, 1, k - 2)[k - 3], terms[k - 2], n, terms[k - 1])
    log_n = n * math.log(n) if n > 0 else 0.0
    return math.lgamma(n + 1.0) - log_n + _log_sum(closing)


@numba.njit(cache=True)
def _expected_counts(y, p, n, gaussian, b, log_c):  # pragma: no cover - compiled
    terms = _terms(y, p, n, gaussian, b, log_c)
    k = y.shape[0]
    m = max(k - 2, 1)
    forward = _chain(terms, n, 0, 1, m)  # forward[i]: categories 0…i
    backward = _chain(terms, n, k - 1, -1, m)  # backward[i]: categories K−1−i…K−1
    means = np.empty(k)
    s = np.arange(n + 1).astype(np.float64)
    for j in range(k):
        # s_j = v with the others' table at total n − v.
        if k == 2:
            logw = terms[j] + terms[1 - j][::-1]
        elif j == 0:
            logw = _combine(backward[k - 3], terms[1], n, terms[0])
        elif j == k - 1:
            logw = _combine(forward[k - 3], terms[k - 2], n, terms[j])
        else:
            logw = _combine(forward[j - 1], backward[k - 2 - j], n, terms[j])
        top = np.max(logw)
        w = np.exp(logw - top)
        means[j] = np.sum(w * s) / np.sum(w)
    return means


def _noise_args(noise: NoiseLaw) -> tuple[bool, float, float]:
    return noise.kind == "discrete-gaussian", float(noise.scale), float(noise.log_constant)


def multinomial_log_likelihood_jit(
    released: npt.ArrayLike, theta: npt.ArrayLike, n: int, noise: NoiseLaw
) -> float:
    """Exact log p(y | θ) of one release of K counts (``(K,)`` each), compiled.

    The value of :func:`~pymc_dp.kernels.exact_counts.multinomial_log_likelihood`.
    """
    y = np.ascontiguousarray(released, dtype=np.float64)
    p = np.ascontiguousarray(theta, dtype=np.float64)
    return float(_log_likelihood(y, p, int(n), *_noise_args(noise)))


def multinomial_expected_counts_jit(
    released: npt.ArrayLike, theta: npt.ArrayLike, n: int, noise: NoiseLaw
) -> npt.NDArray[np.float64]:
    """E[s | θ, y] of one release of K counts (``(K,)`` each), compiled.

    The value of :func:`~pymc_dp.kernels.exact_counts.multinomial_expected_counts`.
    """
    y = np.ascontiguousarray(released, dtype=np.float64)
    p = np.ascontiguousarray(theta, dtype=np.float64)
    return _expected_counts(y, p, int(n), *_noise_args(noise))
