"""The grouped multinomial sum over a fixed table of count vectors, and its gradient, in one pass.

For each group g, with the table's kept count vectors s_gt and their constant terms c_gt
(log multinomial coefficient plus log noise density, −∞ on the padding; built by
:func:`pymc_dp.likelihoods.multinomial_window.window_table`),

    log p(y_g | θ_g) = log Σ_t exp(x_gt),    x_gt = c_gt + Σ_j s_gtj log θ_gj,
    ∂/∂θ_gj = E[s_j | y_g, θ_g] / θ_gj,        E[s_j | …] = Σ_t w_gt s_gtj, w the softmax of x.

One pass computes x and its largest value x*, a second adds exp(x − x*) and its moments over
the terms with x > x* − :data:`TAIL` only. Every term left out is below e^(x* − TAIL) and the
sum is at least e^(x*), so the sum loses at most a relative T e^−TAIL (T the terms of the
group), below 1.7·10⁻¹² for the 400 000 terms the graph form allows
(:data:`~pymc_dp.likelihoods.multinomial_window.WINDOW_MAX_TERMS`); each E[s_j] moves by at most
n T e^−TAIL. On the Categorical benchmark's exact groups about half the terms are left out, and
the exps are most of the cost. θ_gj = 0 is read as the smallest normal double (as the graph form
does), so 0 · log 0 = 0.

:func:`table_log_likelihood` is plain Python for Numba
(:func:`~pymc_dp.kernels.numba_mirror.compile_mirror`): the ``Op`` of
:mod:`pymc_dp.likelihoods.multinomial_window` calls the compiled build from its ``perform`` (C
backend) and registers it as its Numba implementation (nutpie).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache

import numpy as np

from pymc_dp.kernels.numba_mirror import compile_mirror, mirror_key

__all__ = ["TAIL", "compiled_table_log_likelihood", "table_key", "table_log_likelihood"]

TAIL = 40.0
"""Terms more than this many nats below a group's largest are left out (module docstring)."""
_TINY = 2.2250738585072014e-308  # the smallest normal double, np.finfo(np.float64).tiny


def table_log_likelihood(theta, table, fixed, tail):  # pragma: no cover - compiled
    """Each group's log p(y_g | θ_g) ``(G,)`` and its gradient in θ ``(G, K)``.

    ``theta`` ``(G, K)``; ``table`` the count vectors ``(G, T, K)``; ``fixed`` their constant
    terms ``(G, T)`` (−∞ on the padding); ``tail`` as :data:`TAIL`. All float64, C-contiguous.
    """
    groups, terms, k = table.shape
    logp = np.empty(groups)
    grad = np.empty((groups, k))
    log_theta = np.empty(k)
    acc = np.empty(k)
    x = np.empty(terms)
    for g in range(groups):
        unknown = False
        for j in range(k):
            unknown = unknown or math.isnan(theta[g, j])
            log_theta[j] = math.log(theta[g, j] if theta[g, j] > _TINY else _TINY)
        top = -math.inf
        for t in range(terms):
            v = fixed[g, t]
            for j in range(k):
                v += table[g, t, j] * log_theta[j]
            x[t] = v
            if v > top:
                top = v
        if unknown or top == -math.inf:  # θ not a number, or no term (an empty table)
            logp[g] = math.nan if unknown else -math.inf
            for j in range(k):
                grad[g, j] = math.nan if unknown else 0.0
            continue
        total = 0.0
        for j in range(k):
            acc[j] = 0.0
        for t in range(terms):
            d = x[t] - top
            if d > -tail:
                e = math.exp(d)
                total += e
                for j in range(k):
                    acc[j] += e * table[g, t, j]
        logp[g] = top + math.log(total)
        for j in range(k):
            grad[g, j] = acc[j] / (total * (theta[g, j] if theta[g, j] > _TINY else _TINY))
    return logp, grad


@cache
def compiled_table_log_likelihood() -> Callable:
    """:func:`table_log_likelihood` compiled by Numba (once per process)."""
    return compile_mirror(globals(), ["table_log_likelihood"], "table_log_likelihood")


def table_key() -> str:
    """The compiled kernel's cache key (:func:`~pymc_dp.kernels.numba_mirror.mirror_key`)."""
    return mirror_key(globals(), ["table_log_likelihood"])
