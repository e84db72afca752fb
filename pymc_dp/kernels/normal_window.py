"""Moments of a standard normal truncated to a window, in NumPy (paper §3.3, Lemma 1).

The windowed Normal families need, for each window [α, β] in standard units, log Z, the mean
and the central moments of order 2–4 of X ~ N(0, 1) restricted to it, plus the Mills-type ratios
φ(α)/Z and φ(β)/Z: every derivative of those quantities in (α, β) is a polynomial in them
(:mod:`pymc_dp.families.normal_window`), so one NumPy kernel serves the likelihood and all of its
gradients.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy.special import erfcx

__all__ = [
    "EDGE",
    "GL_NODES",
    "GL_WEIGHTS",
    "MIN_D",
    "NARROW",
    "WindowMoments",
    "standard_window_moments",
]

EDGE = 30.0
"""Standardised window edges are clipped to [-30, 30] by the callers: beyond, a tail holds less
than e^-450 of the mass, which changes no kept window's moments."""
MIN_D = 1e-50
"""A window whose scaled mass D (below) is under this has Z < e^-100 (times e^-a²) and is
reported empty; the floor keeps the ratios 1/D, and their derivatives, finite."""
_SQRT_2_OVER_PI = float(np.sqrt(2.0 / np.pi))
NARROW = 4.0
"""Windows with width · (width + far edge) below this (standardised) take their moments from
Gauss–Legendre quadrature: there the recursion's terms are about 1/width and cancel (a relative
error near 1e-6 in Var X² for a window 0.05 sd wide, 10 sd from the mean); the density varies
by at most e^4 over such a window, which 20 nodes integrate to double precision."""
GL_NODES, GL_WEIGHTS = np.polynomial.legendre.leggauss(20)
"""20-node Gauss–Legendre rule on [-1, 1] for the narrow windows."""


class WindowMoments(NamedTuple):
    """Moments of N(0, 1) truncated to [α, β]; every field has the broadcast shape of (α, β).

    In an empty window (Z below the floor) ``log_z`` is ``-inf`` and every other field is 0.
    """

    log_z: npt.NDArray[np.float64]
    """log Z, Z = Φ(β) - Φ(α)."""
    mean: npt.NDArray[np.float64]
    """E X."""
    central: npt.NDArray[np.float64]
    """E (X - E X)^j for j = 2, 3, 4, stacked on a new last axis."""
    ratio_lo: npt.NDArray[np.float64]
    """φ(α) / Z."""
    ratio_hi: npt.NDArray[np.float64]
    """φ(β) / Z."""


def standard_window_moments(alpha: npt.ArrayLike, beta: npt.ArrayLike) -> WindowMoments:
    """Moments of X ~ N(0, 1) truncated to [α, β], for edges within ±:data:`EDGE`.

    Parameters
    ----------
    alpha, beta
        Window edges in standard units, broadcastable, α ≤ β.

    Returns
    -------
    WindowMoments

    Notes
    -----
    The window is first reflected to have a non-negative midpoint (``|lo| <= hi``). With
    a = lo/√2, b = hi/√2 and D = erfcx(a) - e^(a² - b²) erfcx(b), Z = e^(-a²) D / 2, and the
    ratios φ(lo)/Z = √(2/π)/D and φ(hi)/Z = √(2/π) e^(a² - b²)/D need no exponent of their own.
    The raw moments of Y = X - u, u = max(lo, 0) the point of the window nearest the mode, follow
    from E Y^j = -u E Y^(j-1) + (j-1) E Y^(j-2) + (lo-u)^(j-1) φ(lo)/Z - (hi-u)^(j-1) φ(hi)/Z
    (integration by parts); shifting by u keeps them of the order of the window's spread, so
    central moments are not small differences of large numbers.

    Examples
    --------
    >>> from scipy import stats
    >>> m = standard_window_moments(-1.0, 2.0)
    >>> ref = stats.truncnorm(-1.0, 2.0)
    >>> bool(np.isclose(m.mean, ref.mean()) and np.isclose(m.central[0], ref.var()))
    True
    """
    alpha, beta = np.broadcast_arrays(
        np.asarray(alpha, dtype=np.float64), np.asarray(beta, dtype=np.float64)
    )
    flip = alpha + beta < 0
    lo = np.where(flip, -beta, alpha)
    hi = np.where(flip, -alpha, beta)
    a, b = lo / np.sqrt(2.0), hi / np.sqrt(2.0)
    exponent = (a - b) * (a + b)  # a² - b² <= 0
    ratio = np.exp(exponent)
    d_raw = erfcx(a) - ratio * erfcx(b)
    ok = d_raw > MIN_D
    d = np.where(ok, d_raw, 1.0)
    log_z = np.log(0.5) - a * a + np.log(d)
    r_lo = _SQRT_2_OVER_PI / d
    r_hi = r_lo * ratio
    u = np.maximum(lo, 0.0)
    d_lo, d_hi = lo - u, hi - u
    # j = 1 with φ(lo) - φ(hi) as φ(lo)(1 - e^(a² - b²)): exact for narrow windows.
    raw = [-u - r_lo * np.expm1(exponent)]
    prev2, prev = np.ones_like(u), raw[0]
    p_lo, p_hi = d_lo, d_hi
    for j in range(2, 5):
        nxt = -u * prev + (j - 1) * prev2 + p_lo * r_lo - p_hi * r_hi
        raw.append(nxt)
        prev2, prev = prev, nxt
        p_lo, p_hi = p_lo * d_lo, p_hi * d_hi
    narrow = (hi - lo) * (2 * hi - lo) < NARROW
    if np.any(narrow):
        # E Y^j by quadrature, Y = X - u on [lo - u, hi - u]; weights φ(x)/φ(u) <= 1.
        nodes = ((lo + hi) / 2)[..., None] + ((hi - lo) / 2)[..., None] * GL_NODES
        y = nodes - u[..., None]
        weights = GL_WEIGHTS * np.exp(-y * (y + 2 * u[..., None]) / 2)
        total = weights.sum(axis=-1)
        power = y
        for j in range(4):
            raw[j] = np.where(narrow, (weights * power).sum(axis=-1) / total, raw[j])
            power = power * y
    m1, m2, m3, m4 = raw
    c2 = m2 - m1 * m1
    c3 = m3 - 3 * m1 * m2 + 2 * m1**3
    c4 = m4 - 4 * m1 * m3 + 6 * m1 * m1 * m2 - 3 * m1**4
    sign = np.where(flip, -1.0, 1.0)
    mean = sign * (u + m1)
    central = np.stack([c2, sign * c3, c4], axis=-1)
    # Reflecting swapped the edges: φ(lo)/Z belongs to -β when flipped.
    ratio_lo = np.where(flip, r_hi, r_lo)
    ratio_hi = np.where(flip, r_lo, r_hi)
    zero = np.zeros_like(mean)
    return WindowMoments(
        log_z=np.where(ok, log_z, -np.inf),
        mean=np.where(ok, mean, zero),
        central=np.where(ok[..., None], central, 0.0),
        ratio_lo=np.where(ok, ratio_lo, zero),
        ratio_hi=np.where(ok, ratio_hi, zero),
    )
