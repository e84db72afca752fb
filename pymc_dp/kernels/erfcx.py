"""erfcx(x) = exp(x²) erfc(x) for one float, in plain Python (which Numba compiles as it is).

The Numba build of :data:`pymc_dp.families.erfcx.erfcx`, and the series JAX's erfcx is
completed with (:func:`pymc_dp.model.backends.jax_erfcx`).
"""

from __future__ import annotations

import math

__all__ = ["ERFCX_SERIES", "ERFCX_SERIES_FROM", "erfcx_scalar"]

ERFCX_SERIES_FROM = 25.0
"""x from which :func:`erfcx_scalar` sums the asymptotic series (erfc(x) underflows at 26.6)."""

ERFCX_SERIES = (1.0, -0.5, 0.75, -1.875, 6.5625, -29.53125, 162.421875)
"""erfcx(x) ~ 1/(x√π) Σ_k c_k x^(-2k), c_k = (-1)^k (2k - 1)!! / 2^k; at x ≥ 25 the first
omitted term is below 3e-17 of the sum."""

_SPLIT = 134217729.0  # 2^27 + 1: Dekker's split of a double into two 26-bit halves
_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)
_SERIES_REVERSED = ERFCX_SERIES[::-1]  # Horner's order


def erfcx_scalar(x: float) -> float:
    """exp(x²) erfc(x) for one float, to a few ulp wherever the result is a finite double.

    Below :data:`ERFCX_SERIES_FROM` the product, with x² carried exactly: Dekker's split puts
    the rounding of x·x (up to 1.4e-13 of exp(x²) at |x| = 25, which SciPy's erfcx keeps for
    x < 0) back in as a factor 1 + err. Above it, the asymptotic series. Below about -26.6 the
    value overflows to inf.
    """
    if not x < ERFCX_SERIES_FROM:  # also inf (whose erfcx is 0) and NaN (the series gives NaN)
        inv = 1.0 / x
        w = inv * inv
        total = 0.0
        for c in _SERIES_REVERSED:
            total = c + w * total
        return total * inv * _INV_SQRT_PI
    if x < -27.0:  # exp(x²) > 1e316: the value overflows (and Dekker's split would be NaN)
        return math.inf
    square = x * x
    c = _SPLIT * x
    high = c - (c - x)
    low = x - high
    err = ((high * high - square) + 2.0 * high * low) + low * low
    return math.exp(square) * math.erfc(x) * (1.0 + err)
