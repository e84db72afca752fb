"""A grouped windowed Normal pair's log density and gradient as one compiled elementwise operation.

The grouped Laplace pair of the windowed Normal and LogNormal families keeps ŝ₁ of each group a
model variable (u, with ŝ₁ = c + d·u, :func:`~pymc_dp.likelihoods.collapsed_pair.first_statistic`)
and integrates ŝ₂ given it (:func:`~pymc_dp.likelihoods.collapsed_pair.given_first_logp`). Per
group that is: the window moments of z ~ N(loc, scale²)
(:func:`~pymc_dp.families.normal_window.window_pair_entries`), the CLT entries
n·(m₁, m₂, v₁₁, v₁₂, v₂₂), u's density (ŝ₁'s normal times the Jacobian d), the Laplace kernel of
y₁ and the normal–Laplace convolution of y₂ given ŝ₁. As a PyTensor graph with autodiff that is
some sixty nodes (fused loops, a Sum per gradient term, the window-moment and convolution
operations), none dominant. Here one scalar kernel computes both log densities (u's and y's) and
their derivatives in (u, loc, scale) by forward-mode differentiation (each number carries its
three partial derivatives; the window moments' and the convolution's partials are their own
closed forms), so NUTS's logp-and-gradient graph holds one elementwise loop over the groups and
the sums over a shared scale.

Backends, as :mod:`~pymc_dp.likelihoods.normal_laplace`: C (the kernel below, which calls
``pmdp_window_moments_z`` and ``pmdp_normal_laplace``), Numba (the Python mirror
:func:`pair_window_scalar`, compiled; PyTensor 3's default and nutpie), and for JAX (numpyro,
blackjax) a rewrite back to the graph of the pieces (:func:`pair_window_graph`) and its autodiff.
The C and the mirror are one algorithm (the tests compare them).
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType, grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.scalar.basic import ScalarOp, float64
from pytensor.tensor.elemwise import Elemwise
from pytensor.tensor.variable import TensorVariable

from pymc_dp._compat import pullback_op
from pymc_dp.families.normal_window import WINDOW_CENTRAL_C, window_pair_entries
from pymc_dp.families.truncated import LOG_TINY
from pymc_dp.kernels.normal_window import EDGE, GL_NODES, GL_WEIGHTS, MIN_D, NARROW
from pymc_dp.kernels.numba_mirror import compile_mirror, mirror_key
from pymc_dp.likelihoods import normal_laplace as _nl
from pymc_dp.likelihoods.collapsed import as_float64
from pymc_dp.likelihoods.collapsed_pair import (
    conditional_second,
    first_statistic_logp,
    first_statistic_map,
    given_first_logp,
)
from pymc_dp.likelihoods.fused_graphs import register_fused_kernel
from pymc_dp.likelihoods.normal_laplace import normal_laplace_core as _normal_laplace_core
from pymc_dp.likelihoods.xla_kernels import XlaKernel

__all__ = [
    "ENTRIES_C",
    "ENTRIES_HELPERS",
    "PairWindowGrad",
    "PairWindowLogp",
    "pair_window_graph",
    "pair_window_logp",
    "pair_window_scalar",
    "released_columns",
    "window_pair_model",
]

ENTRIES_C = r"""
#ifndef PMDP_DUAL3
#define PMDP_DUAL3
/* A number with three partial derivatives (here in (u, loc, scale)): forward-mode
   differentiation. */
typedef struct { double v, du, dl, ds; } pmdp_dual;
static pmdp_dual pmdp_dc(double x) { pmdp_dual r = {x, 0.0, 0.0, 0.0}; return r; }
/* value, with the derivative ka a' + kb b' */
static pmdp_dual pmdp_dlin(pmdp_dual a, double ka, pmdp_dual b, double kb, double value) {
    pmdp_dual r = {value, ka * a.du + kb * b.du, ka * a.dl + kb * b.dl, ka * a.ds + kb * b.ds};
    return r;
}
static pmdp_dual pmdp_dchain(pmdp_dual a, double value, double k) {
    pmdp_dual r = {value, k * a.du, k * a.dl, k * a.ds};
    return r;
}
static pmdp_dual pmdp_dadd(pmdp_dual a, pmdp_dual b) {
    return pmdp_dlin(a, 1.0, b, 1.0, a.v + b.v);
}
static pmdp_dual pmdp_dsub(pmdp_dual a, pmdp_dual b) {
    return pmdp_dlin(a, 1.0, b, -1.0, a.v - b.v);
}
static pmdp_dual pmdp_dmul(pmdp_dual a, pmdp_dual b) {
    return pmdp_dlin(a, b.v, b, a.v, a.v * b.v);
}
static pmdp_dual pmdp_ddiv(pmdp_dual a, pmdp_dual b) {
    double q = a.v / b.v;
    return pmdp_dlin(a, 1.0 / b.v, b, -q / b.v, q);
}
static pmdp_dual pmdp_dk(pmdp_dual a, double k) { return pmdp_dchain(a, k * a.v, k); }
static pmdp_dual pmdp_dsqrt(pmdp_dual a) {
    double r = sqrt(a.v);
    return pmdp_dchain(a, r, 0.5 / r);
}
static pmdp_dual pmdp_dlog(pmdp_dual a) { return pmdp_dchain(a, log(a.v), 1.0 / a.v); }
/* An edge clipped to +-EDGE, as pt.clip (whose gradient passes at the bounds themselves). */
static pmdp_dual pmdp_dclip(pmdp_dual a) {
    if (a.v < -@EDGE@) return pmdp_dc(-@EDGE@);
    if (a.v > @EDGE@) return pmdp_dc(@EDGE@);
    return a;
}
/* log p(u) and log p(y | s1) from the pair's CLT entries n(m1, m2, v11, v12, v22) (duals):
   first_statistic_logp and given_first_logp, as pair_given_entries (which fuses the steps
   where a constant would only add zeros to the partials). lp_y's partials only with grad. */
static void pmdp_pair_given_entries(pmdp_dual uu, pmdp_dual m1, pmdp_dual m2, pmdp_dual v11,
                                    pmdp_dual v12, pmdp_dual v22, double y1, double y2,
                                    double b1, double b2, int grad, pmdp_dual *lp_u_out,
                                    pmdp_dual *lp_y_out) {
    /* u's density: s1 = c + d u ~ N(m1, var), var floored */
    double floor = 1e-6 * b1, noise_var = 2.0 * b1 * b1;
    pmdp_dual var = v11;
    var.v += floor * floor;
    double inv_var = 1.0 / var.v;
    pmdp_dual inv = pmdp_dchain(var, inv_var + 1.0 / noise_var, -inv_var * inv_var);
    double dval = 1.0 / sqrt(inv.v);
    pmdp_dual d = pmdp_dchain(inv, dval, -0.5 * dval * dval * dval);
    pmdp_dual mean_y = pmdp_ddiv(m1, var);
    mean_y.v += y1 / noise_var;
    pmdp_dual c = pmdp_dmul(pmdp_dchain(d, dval * dval, 2.0 * dval), mean_y);
    pmdp_dual s1 = pmdp_dadd(c, pmdp_dmul(d, uu));
    pmdp_dual gap = pmdp_dsub(s1, m1);
    /* log(2 pi var) - 2 log d is one log, of 2 pi (1 + var / noise_var) */
    double shrink = 1.0 + var.v / noise_var;
    *lp_u_out = pmdp_dsub(
        pmdp_dk(pmdp_ddiv(pmdp_dmul(gap, gap), var), -0.5),
        pmdp_dchain(var, 0.5 * log(2.0 * 3.14159265358979323846 * shrink),
                    0.5 / (noise_var + var.v)));
    /* y given s1: Laplace on y1, the normal-Laplace convolution of s2 | s1 on y2 */
    pmdp_dual slope = pmdp_ddiv(v12, pmdp_dadd(v11, pmdp_dc(1e-300)));
    pmdp_dual centre = pmdp_dadd(m2, pmdp_dmul(slope, pmdp_dsub(s1, m1)));
    pmdp_dual var2 = pmdp_dsub(v22, pmdp_dmul(slope, v12));
    pmdp_dual wide = pmdp_dk(pmdp_dsqrt(pmdp_dadd(var2, pmdp_dc(b2 * b2))), 40.0);
    pmdp_dual lo = pmdp_dsub(centre, wide), hi = pmdp_dadd(centre, wide);
    double g[6];
    double second = pmdp_normal_laplace(y2, centre.v, var2.v, lo.v, hi.v, b2, grad ? g : NULL);
    double off = y1 - s1.v, sign = (off > 0.0) - (off < 0.0);
    pmdp_dual lp_y = pmdp_dchain(s1, -log(2.0 * b1) - fabs(off) / b1, sign / b1);
    if (grad) {
        pmdp_dual part = pmdp_dlin(pmdp_dlin(centre, g[1], var2, g[2], 0.0), 1.0,
                                   pmdp_dlin(lo, g[3], hi, g[4], 0.0), 1.0, second);
        lp_y = pmdp_dadd(lp_y, part);
    } else {
        lp_y.v += second;
    }
    *lp_y_out = lp_y;
}
#endif
"""
_C_KERNEL = r"""
#ifndef PMDP_PAIR_WINDOW
#define PMDP_PAIR_WINDOW
/* (Z, E X, c2, c3, c4, phi(alpha)/Z, phi(beta)/Z) of N(0, 1) truncated to [alpha, beta], all 0
   for an empty window: _window_moments_core line for line (2Z = erfc(a) - erfc(b), four special
   functions where pmdp_window_moments's erfcx form takes seven, and Z rather than log Z). */
static void pmdp_window_moments_z(double alpha, double beta, double *o) {
    int flip = alpha + beta < 0.0, k;
    double lo = flip ? -beta : alpha, hi = flip ? -alpha : beta;
    double a = lo / 1.4142135623730951, b = hi / 1.4142135623730951;
    double expo = (a - b) * (a + b), ratio = exp(expo);
    double grow = ratio < 0.5 ? ratio - 1.0 : expm1(expo);
    double mass = erfc(a) - erfc(b);
    /* e^(-a^2) with a^2 carried exactly (Dekker's split) */
    double square = a * a, split = 134217729.0 * a;
    double high = split - (split - a), low = a - high;
    double tail = exp(-square) * (1.0 - (((high * high - square) + 2.0 * high * low) + low * low));
    if (!(mass > @MIN_D@ * tail)) {
        for (k = 0; k < 7; k++) o[k] = 0.0;
        return;
    }
    double r_lo = 0.7978845608028654 * tail / mass;
    o[0] = 0.5 * mass;
    pmdp_window_central(flip, lo, hi, r_lo, r_lo * ratio, grow, o);
}
/* o[0..5]: d lp_u/d(u, loc, scale), d lp_y/d(u, loc, scale) (with grad); o[6] = lp_u, o[7] = lp_y:
   window_pair_entries, first_statistic_logp and given_first_logp, as _pair_window_core. */
static void pmdp_pair_window(double u, double loc, double scale, double n, double y1, double y2,
                             double b1, double b2, double v, double w, int lower_empty,
                             int upper_empty, int grad, double *o) {
    pmdp_dual uu = {u, 1.0, 0.0, 0.0}, ll = {loc, 0.0, 1.0, 0.0}, ss = {scale, 0.0, 0.0, 1.0};
    pmdp_dual alpha = lower_empty ? pmdp_dc(-@EDGE@) : pmdp_ddiv(pmdp_dsub(pmdp_dc(v), ll), ss);
    pmdp_dual beta = upper_empty ? pmdp_dc(@EDGE@) : pmdp_ddiv(pmdp_dsub(pmdp_dc(w), ll), ss);
    alpha = pmdp_dclip(alpha);
    beta = pmdp_dclip(beta);
    double m[7];
    pmdp_window_moments_z(alpha.v, beta.v, m);
    /* the window moments' partials in (alpha, beta), from their own values */
    double a = alpha.v, b = beta.v, mean0 = m[1], c2 = m[2], c3 = m[3], r_lo = m[5], r_hi = m[6];
    double dm_lo = r_lo * (mean0 - a), dm_hi = r_hi * (b - mean0);
    double dv_lo = a - mean0, dv_hi = b - mean0;
    pmdp_dual mean = pmdp_dlin(alpha, dm_lo, beta, dm_hi, mean0);
    pmdp_dual k2 = pmdp_dlin(alpha, -r_lo * (dv_lo * dv_lo - c2), beta,
                             r_hi * (dv_hi * dv_hi - c2), c2);
    pmdp_dual k3 = pmdp_dlin(alpha, -r_lo * (dv_lo * dv_lo * dv_lo - c3) - 3.0 * c2 * dm_lo, beta,
                             r_hi * (dv_hi * dv_hi * dv_hi - c3) - 3.0 * c2 * dm_hi, c3);
    pmdp_dual k4 = pmdp_dlin(
        alpha, -r_lo * (dv_lo * dv_lo * dv_lo * dv_lo - m[4]) - 4.0 * c3 * dm_lo, beta,
        r_hi * (dv_hi * dv_hi * dv_hi * dv_hi - m[4]) - 4.0 * c3 * dm_hi, m[4]);
    pmdp_dual scale_2 = pmdp_dmul(ss, ss);
    pmdp_dual ez = pmdp_dadd(ll, pmdp_dmul(ss, mean));
    pmdp_dual var_d = pmdp_dmul(scale_2, k2);
    pmdp_dual skew_d = pmdp_dmul(pmdp_dmul(scale_2, ss), k3);
    pmdp_dual cov_12 = pmdp_dadd(pmdp_dk(pmdp_dmul(ez, var_d), 2.0), skew_d);
    pmdp_dual ez_2 = pmdp_dmul(ez, ez);
    pmdp_dual var_2 = pmdp_dadd(
        pmdp_dadd(pmdp_dk(pmdp_dmul(ez_2, var_d), 4.0), pmdp_dk(pmdp_dmul(ez, skew_d), 4.0)),
        pmdp_dmul(pmdp_dmul(scale_2, scale_2), pmdp_dsub(k4, pmdp_dmul(k2, k2))));
    pmdp_dual mu_2 = pmdp_dadd(ez_2, var_d);
    /* q = Z where log Z > LOG_TINY (0 below, with zero gradient; 1 for a window with no edge):
       Z's partials are Z times log Z's, and q(1 - q)'s are 1 - 2q times q's. */
    pmdp_dual q = pmdp_dc(0.0), spread = pmdp_dc(0.0);
    double eq = m[0];
    if (lower_empty && upper_empty) {
        if (eq > 0.0) q = pmdp_dc(1.0);
    } else if (eq > @SURELY_KEPT@ || (eq > 0.0 && log(eq) > @LOG_TINY@)) {
        q = pmdp_dlin(alpha, -r_lo * eq, beta, r_hi * eq, eq);
        spread = pmdp_dchain(q, eq * (1.0 - eq), 1.0 - 2.0 * eq);
    }
    pmdp_dual m1 = pmdp_dk(pmdp_dmul(q, ez), n);
    pmdp_dual m2 = pmdp_dk(pmdp_dmul(q, mu_2), n);
    pmdp_dual v11 = pmdp_dk(
        pmdp_dadd(pmdp_dmul(q, var_d), pmdp_dmul(pmdp_dmul(spread, ez), ez)), n);
    pmdp_dual v12 = pmdp_dk(
        pmdp_dadd(pmdp_dmul(q, cov_12), pmdp_dmul(pmdp_dmul(spread, ez), mu_2)), n);
    pmdp_dual v22 = pmdp_dk(
        pmdp_dadd(pmdp_dmul(q, var_2), pmdp_dmul(pmdp_dmul(spread, mu_2), mu_2)), n);
    pmdp_dual lp_u, lp_y;
    pmdp_pair_given_entries(uu, m1, m2, v11, v12, v22, y1, y2, b1, b2, grad, &lp_u, &lp_y);
    if (grad) {
        o[0] = lp_u.du; o[1] = lp_u.dl; o[2] = lp_u.ds;
        o[3] = lp_y.du; o[4] = lp_y.dl; o[5] = lp_y.ds;
    }
    o[6] = lp_u.v;
    o[7] = lp_y.v;
}
#endif
"""
ENTRIES_C = ENTRIES_C.replace("@EDGE@", repr(EDGE))
"""C of the dual numbers (three partials) and ``pmdp_pair_given_entries``: u's and y's log
densities from a pair's CLT entries (after
:data:`~pymc_dp.likelihoods.normal_laplace.NORMAL_LAPLACE_C`)."""
_SURELY_KEPT = 1e4 * math.exp(LOG_TINY)
"""Z above which log Z > :data:`LOG_TINY` needs no log."""
_C_SUPPORT = ENTRIES_C + _C_KERNEL
for _key, _value in {
    "@EDGE@": repr(EDGE),
    "@LOG_TINY@": repr(LOG_TINY),
    "@SURELY_KEPT@": repr(_SURELY_KEPT),
    "@MIN_D@": repr(MIN_D),
}.items():
    _C_SUPPORT = _C_SUPPORT.replace(_key, _value)
_C_ALL = _nl.NORMAL_LAPLACE_C + WINDOW_CENTRAL_C + _C_SUPPORT
_C_VERSION = (2, int(hashlib.sha256(_C_ALL.encode()).hexdigest()[:12], 16))


# ---- the same algorithm in Python (Numba compiles it; the tests compare it with the C) --------
def dual_const(x: float) -> tuple:
    return (x, 0.0, 0.0, 0.0)


def dual_lin(a: tuple, ka: float, b: tuple, kb: float, value: float) -> tuple:
    return (value, ka * a[1] + kb * b[1], ka * a[2] + kb * b[2], ka * a[3] + kb * b[3])


def dual_chain(a: tuple, value: float, k: float) -> tuple:
    return (value, k * a[1], k * a[2], k * a[3])


def dual_add(a: tuple, b: tuple) -> tuple:
    return dual_lin(a, 1.0, b, 1.0, a[0] + b[0])


def dual_sub(a: tuple, b: tuple) -> tuple:
    return dual_lin(a, 1.0, b, -1.0, a[0] - b[0])


def dual_mul(a: tuple, b: tuple) -> tuple:
    return dual_lin(a, b[0], b, a[0], a[0] * b[0])


def dual_div(a: tuple, b: tuple) -> tuple:
    q = a[0] / b[0]
    return dual_lin(a, 1.0 / b[0], b, -q / b[0], q)


def dual_scale(a: tuple, k: float) -> tuple:
    return dual_chain(a, k * a[0], k)


def dual_sqrt(a: tuple) -> tuple:
    r = math.sqrt(a[0])
    return dual_chain(a, r, 0.5 / r)


def dual_log(a: tuple) -> tuple:
    return dual_chain(a, math.log(a[0]), 1.0 / a[0])


_NODES = tuple(float(x) for x in GL_NODES)
_WEIGHTS = tuple(float(x) for x in GL_WEIGHTS)


def plane_lin(a: tuple, ka: float, b: tuple, kb: float, value: float) -> tuple:
    """:func:`dual_lin` for duals of two partials (the window's, in loc and scale)."""
    return (value, ka * a[1] + kb * b[1], ka * a[2] + kb * b[2])


def plane_add(a: tuple, b: tuple) -> tuple:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


def plane_sub(a: tuple, b: tuple) -> tuple:
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


def plane_mul(a: tuple, b: tuple) -> tuple:
    return plane_lin(a, b[0], b, a[0], a[0] * b[0])


def plane_scale(a: tuple, k: float) -> tuple:
    return (k * a[0], k * a[1], k * a[2])


def plane_clip(a: tuple) -> tuple:
    # An edge clipped to ±EDGE, as pt.clip (whose gradient passes at the bounds themselves).
    if a[0] < -EDGE:
        return (-EDGE, 0.0, 0.0)
    if a[0] > EDGE:
        return (EDGE, 0.0, 0.0)
    return a


def _window_moments_core(alpha: float, beta: float) -> tuple:
    """``pmdp_window_moments_z``: :mod:`~pymc_dp.families.normal_window`'s moments, Z for log Z.

    That module's algorithm, with Z written through 2Z = erfc(a) - erfc(b) rather than
    D = erfcx(a) - e^(a² - b²) erfcx(b) = e^(a²) 2Z: the same numbers to rounding (|a| <= EDGE/√2
    here, the edges being clipped, where erfc does not underflow), from four special functions
    where the erfcx form takes seven (e^(a² - b²) - 1 needs no expm1 below 1/2, where it does
    not cancel). The kernel needs Z itself, and log Z only near :data:`LOG_TINY`
    (:func:`_pair_window_core`), so the first output is Z (0 for an empty window).
    """
    flip = alpha + beta < 0.0
    lo = -beta if flip else alpha
    hi = -alpha if flip else beta
    a, b = lo / 1.4142135623730951, hi / 1.4142135623730951
    expo = (a - b) * (a + b)
    ratio = math.exp(expo)
    grow = ratio - 1.0 if ratio < 0.5 else math.expm1(expo)  # e^(a² - b²) - 1
    mass = math.erfc(a) - math.erfc(b)  # 2Z
    # e^(-a²), with a² carried exactly (Dekker's split, as erfcx_scalar): rounding a² costs up
    # to 2e-14 of it at the clipped edge, which the ratios φ/Z would keep.
    square = a * a
    split = 134217729.0 * a
    high = split - (split - a)
    low = a - high
    tail = math.exp(-square) * (1.0 - (((high * high - square) + 2.0 * high * low) + low * low))
    if not mass > MIN_D * tail:
        return (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    r_lo = 0.7978845608028654 * tail / mass
    r_hi = r_lo * ratio
    u = lo if lo > 0.0 else 0.0
    d_lo, d_hi = lo - u, hi - u
    m1 = -u - r_lo * grow
    prev2, prev, p_lo, p_hi = 1.0, m1, d_lo, d_hi
    m2 = -u * prev + prev2 + p_lo * r_lo - p_hi * r_hi
    prev2, prev, p_lo, p_hi = prev, m2, p_lo * d_lo, p_hi * d_hi
    m3 = -u * prev + 2.0 * prev2 + p_lo * r_lo - p_hi * r_hi
    prev2, prev, p_lo, p_hi = prev, m3, p_lo * d_lo, p_hi * d_hi
    m4 = -u * prev + 3.0 * prev2 + p_lo * r_lo - p_hi * r_hi
    if (hi - lo) * (2.0 * hi - lo) < NARROW:
        mid, half = (lo + hi) / 2.0 - u, (hi - lo) / 2.0
        total = s1 = s2 = s3 = s4 = 0.0
        for k in range(20):
            y = mid + half * _NODES[k]
            wk = _WEIGHTS[k] * math.exp(-y * (y + 2.0 * u) / 2.0)
            total += wk
            s1 += wk * y
            s2 += wk * y * y
            s3 += wk * y * y * y
            s4 += wk * y * y * y * y
        m1, m2, m3, m4 = s1 / total, s2 / total, s3 / total, s4 / total
    sign = -1.0 if flip else 1.0
    return (
        0.5 * mass,
        sign * (u + m1),
        m2 - m1 * m1,
        sign * (m3 - 3.0 * m1 * m2 + 2.0 * m1 * m1 * m1),
        m4 - 4.0 * m1 * m3 + 6.0 * m1 * m1 * m2 - 3.0 * m1 * m1 * m1 * m1,
        r_hi if flip else r_lo,
        r_lo if flip else r_hi,
    )


def pair_given_entries(
    uu: tuple,
    m1: tuple,
    m2: tuple,
    v11: tuple,
    v12: tuple,
    v22: tuple,
    y1: float,
    y2: float,
    b1: float,
    b2: float,
    grad: bool,
) -> tuple:
    """``pmdp_pair_given_entries``'s algorithm: the duals (lp_u, lp_y).

    lp_y's partials are 0 without ``grad``. Equal to the C's to rounding.
    """
    floor, noise_var = 1e-6 * b1, 2.0 * b1 * b1
    # Steps are fused where a constant would only add zeros to the partials; log(2π var) -
    # 2 log d is one log, of 2π(1 + var/noise_var).
    var = (v11[0] + floor * floor, v11[1], v11[2], v11[3])
    inv_var = 1.0 / var[0]
    inv = dual_chain(var, inv_var + 1.0 / noise_var, -inv_var * inv_var)
    dval = 1.0 / math.sqrt(inv[0])
    d = dual_chain(inv, dval, -0.5 * dval * dval * dval)
    mean_y = dual_div(m1, var)
    c = dual_mul(dual_chain(d, dval * dval, 2.0 * dval), (mean_y[0] + y1 / noise_var, *mean_y[1:]))
    s1 = dual_add(c, dual_mul(d, uu))
    gap = dual_sub(s1, m1)
    shrink = 1.0 + var[0] / noise_var  # var · inv
    lp_u = dual_sub(
        dual_scale(dual_div(dual_mul(gap, gap), var), -0.5),
        dual_chain(var, 0.5 * math.log(2.0 * math.pi * shrink), 0.5 / (noise_var + var[0])),
    )
    slope = dual_div(v12, dual_add(v11, dual_const(1e-300)))
    centre = dual_add(m2, dual_mul(slope, dual_sub(s1, m1)))
    var2 = dual_sub(v22, dual_mul(slope, v12))
    wide = dual_scale(dual_sqrt(dual_add(var2, dual_const(b2 * b2))), 40.0)
    lo, hi = dual_sub(centre, wide), dual_add(centre, wide)
    g = _normal_laplace_core(y2, centre[0], var2[0], lo[0], hi[0], b2, grad)
    off = y1 - s1[0]
    sign = (1.0 if off > 0.0 else 0.0) - (1.0 if off < 0.0 else 0.0)
    lp_y = dual_chain(s1, -math.log(2.0 * b1) - abs(off) / b1, sign / b1)
    if grad:
        part = dual_lin(
            dual_lin(centre, g[1], var2, g[2], 0.0),
            1.0,
            dual_lin(lo, g[3], hi, g[4], 0.0),
            1.0,
            g[6],
        )
        return lp_u, dual_add(lp_y, part)
    return lp_u, dual_const(lp_y[0] + g[6])


def _pair_window_core(
    u: float,
    loc: float,
    scale: float,
    n: float,
    y1: float,
    y2: float,
    b1: float,
    b2: float,
    v: float,
    w: float,
    lower_empty: bool,
    upper_empty: bool,
    grad: bool,
) -> tuple:
    """``pmdp_pair_window``'s algorithm: (six partials (0 without ``grad``), lp_u, lp_y).

    Equal to the C's to rounding: the same window moments (:func:`_window_moments_core`) and q
    from Z without an exp; here the window's quantities are duals in (loc, scale) alone, which
    saves Numba products the C's compiler finds zero (comments below).
    """
    # Nothing before the entries depends on u: duals in (loc, scale) alone (plane_*), a third
    # fewer products than the C's three partials, lifted to three for the densities.
    ll, ss = (loc, 1.0, 0.0), (scale, 0.0, 1.0)
    inv_scale = 1.0 / scale
    if lower_empty:
        alpha = (-EDGE, 0.0, 0.0)
    else:
        value = (v - loc) / scale
        alpha = plane_clip((value, -inv_scale, -value * inv_scale))
    if upper_empty:
        beta = (EDGE, 0.0, 0.0)
    else:
        value = (w - loc) / scale
        beta = plane_clip((value, -inv_scale, -value * inv_scale))
    m = _window_moments_core(alpha[0], beta[0])
    a, b, mean0, c2, c3, r_lo, r_hi = alpha[0], beta[0], m[1], m[2], m[3], m[5], m[6]
    dm_lo, dm_hi = r_lo * (mean0 - a), r_hi * (b - mean0)
    dv_lo, dv_hi = a - mean0, b - mean0
    mean = plane_lin(alpha, dm_lo, beta, dm_hi, mean0)
    k2 = plane_lin(alpha, -r_lo * (dv_lo * dv_lo - c2), beta, r_hi * (dv_hi * dv_hi - c2), c2)
    k3 = plane_lin(
        alpha,
        -r_lo * (dv_lo * dv_lo * dv_lo - c3) - 3.0 * c2 * dm_lo,
        beta,
        r_hi * (dv_hi * dv_hi * dv_hi - c3) - 3.0 * c2 * dm_hi,
        c3,
    )
    k4 = plane_lin(
        alpha,
        -r_lo * (dv_lo * dv_lo * dv_lo * dv_lo - m[4]) - 4.0 * c3 * dm_lo,
        beta,
        r_hi * (dv_hi * dv_hi * dv_hi * dv_hi - m[4]) - 4.0 * c3 * dm_hi,
        m[4],
    )
    scale_2 = (scale * scale, 0.0, 2.0 * scale)
    ez = plane_add(ll, plane_mul(ss, mean))
    var_d = plane_mul(scale_2, k2)
    skew_d = plane_mul((scale_2[0] * scale, 0.0, 3.0 * scale_2[0]), k3)
    cov_12 = plane_add(plane_scale(plane_mul(ez, var_d), 2.0), skew_d)
    ez_2 = plane_mul(ez, ez)
    var_2 = plane_add(
        plane_add(
            plane_scale(plane_mul(ez_2, var_d), 4.0), plane_scale(plane_mul(ez, skew_d), 4.0)
        ),
        plane_mul(plane_mul(scale_2, scale_2), plane_sub(k4, plane_mul(k2, k2))),
    )
    mu_2 = plane_add(ez_2, var_d)
    # q = e^(log q), log q = log Z clamped at LOG_TINY with zero gradient (0 for the whole
    # line), is Z itself: Z's partials are Z times log Z's, and q(1 - q)'s are 1 - 2q times q's.
    # Equal to rounding to the C's exp and expm1 of log q, and without a log unless Z is near
    # e^LOG_TINY, where the comparison is the C's.
    q = spread = (0.0, 0.0, 0.0)
    eq = m[0]
    if lower_empty and upper_empty:
        if eq > 0.0:
            q = (1.0, 0.0, 0.0)
    elif eq > _SURELY_KEPT or (eq > 0.0 and math.log(eq) > LOG_TINY):
        q = plane_lin(alpha, -r_lo * eq, beta, r_hi * eq, eq)
        grow = 1.0 - 2.0 * eq
        spread = (eq * (1.0 - eq), grow * q[1], grow * q[2])
    m1 = plane_scale(plane_mul(q, ez), n)
    m2 = plane_scale(plane_mul(q, mu_2), n)
    v11 = plane_scale(plane_add(plane_mul(q, var_d), plane_mul(plane_mul(spread, ez), ez)), n)
    v12 = plane_scale(plane_add(plane_mul(q, cov_12), plane_mul(plane_mul(spread, ez), mu_2)), n)
    v22 = plane_scale(plane_add(plane_mul(q, var_2), plane_mul(plane_mul(spread, mu_2), mu_2)), n)
    uu = (u, 1.0, 0.0, 0.0)
    m1, m2, v11, v12, v22 = (
        (m1[0], 0.0, m1[1], m1[2]),
        (m2[0], 0.0, m2[1], m2[2]),
        (v11[0], 0.0, v11[1], v11[2]),
        (v12[0], 0.0, v12[1], v12[2]),
        (v22[0], 0.0, v22[1], v22[2]),
    )
    lp_u, lp_y = pair_given_entries(uu, m1, m2, v11, v12, v22, y1, y2, b1, b2, grad)
    if grad:
        return (lp_u[1], lp_u[2], lp_u[3], lp_y[1], lp_y[2], lp_y[3], lp_u[0], lp_y[0])
    return (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, lp_u[0], lp_y[0])


def pair_window_scalar(*args: float, grad: bool = False) -> tuple:
    """The kernel in Python: (lp_u, lp_y), or with ``grad`` the six partials then both.

    ``args`` are (u, loc, scale, n, y₁, y₂, b₁, b₂, v, w, lower_empty, upper_empty): the inputs
    of :func:`pair_window_logp`, then its ``spec``.
    """
    return _impl(tuple(args[8:]), args[:8], grad)


# ---- the scalar operations --------------------------------------------------------------------
@pullback_op
class _PairWindowBase(ScalarOp):
    """Inputs (u, loc, scale, n, y₁, y₂, b₁, b₂); the window (v, w, empty flags) is a property."""

    nin = 8

    def __init__(self, spec: tuple[float, float, bool, bool], name: str | None = None):
        super().__init__(name=name)
        v, w, lower_empty, upper_empty = spec
        self.spec = (float(v), float(w), bool(lower_empty), bool(upper_empty))

    def output_types(self, types: Any) -> list:
        return [float64] * self.nout

    def c_support_code(self, **kwargs: Any) -> str:
        return _C_ALL

    def c_code_cache_version(self) -> tuple:
        return _C_VERSION

    def _call(self, inp: list, grad: int) -> str:
        v, w, lower_empty, upper_empty = self.spec
        window = f"{_c_float(v)}, {_c_float(w)}, {int(lower_empty)}, {int(upper_empty)}"
        return f"pmdp_pair_window({', '.join(inp)}, {window}, {grad}, o)"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.spec == other.spec

    def __hash__(self) -> int:
        return hash((type(self), self.spec))


def _c_float(x: float) -> str:
    return repr(x) if math.isfinite(x) else ("INFINITY" if x > 0 else "-INFINITY")


class PairWindowLogp(_PairWindowBase):
    """(log p(u), log p(y | ŝ₁)) of one group of the windowed Normal pair (module docstring)."""

    nout = 2

    def impl(self, *inputs: float) -> tuple:  # noqa: D102
        return _impl(self.spec, inputs, False)

    def c_code(self, node: Apply, name: str, inp: list, out: list, sub: dict) -> str:  # noqa: D102
        return f"{{ double o[8]; {self._call(inp, 0)}; {out[0]} = o[6]; {out[1]} = o[7]; }}"

    def pullback(self, inputs: list, outputs: list, output_grads: list) -> list:  # noqa: D102
        parts = PairWindowGrad(self.spec, name="pair_window_grad")(*inputs)
        grads = [None, None, None]
        for k, g in enumerate(output_grads):
            if isinstance(g.type, DisconnectedType):
                continue
            for j in range(3):
                term = g * parts[3 * k + j]
                grads[j] = term if grads[j] is None else grads[j] + term
        rest = [grad_not_implemented(self, i, x) for i, x in enumerate(inputs) if i >= 3]
        return [g if g is not None else inputs[j].zeros_like() for j, g in enumerate(grads)] + rest


class PairWindowGrad(_PairWindowBase):
    """d lp_u/d(u, loc, scale), d lp_y/d(u, loc, scale), then lp_u and lp_y.

    The log densities are outputs too: a rewrite hands them to the forward operation, so that a
    function of both (NUTS) evaluates the kernel once.
    """

    nout = 8

    def impl(self, *inputs: float) -> tuple:  # noqa: D102
        return _impl(self.spec, inputs, True)

    def c_code(self, node: Apply, name: str, inp: list, out: list, sub: dict) -> str:  # noqa: D102
        stores = " ".join(f"{o} = o[{i}];" for i, o in enumerate(out))
        return f"{{ double o[8]; {self._call(inp, 1)}; {stores} }}"

    def pullback(self, inputs: list, outputs: list, output_grads: list) -> list:  # noqa: D102
        raise NotImplementedError("second derivatives of the windowed pair's log density")


def _impl(spec: tuple, inputs: tuple, grad: bool) -> tuple:
    v, w, lower_empty, upper_empty = spec
    args = (*(float(x) for x in inputs), v, w)
    out = _pair_window_core(*args, lower_empty, upper_empty, grad)
    return out if grad else out[6:]


@functools.cache
def _elemwise(kind: str, spec: tuple) -> Elemwise:
    scalar = {"logp": PairWindowLogp, "grad": PairWindowGrad}[kind]
    return Elemwise(scalar(spec, name=f"pair_window_{kind}"))


def pair_window_logp(
    u: Any,
    loc: Any,
    scale: Any,
    n: Any,
    y1: Any,
    y2: Any,
    b1: Any,
    b2: Any,
    spec: tuple[float, float, bool, bool],
) -> list[TensorVariable]:
    """[log p(u), log p(y | ŝ₁)] of each group, elementwise over broadcast inputs (float64).

    u is ŝ₁ in the standard units of :func:`~pymc_dp.likelihoods.collapsed_pair.first_statistic`;
    the records are z ~ N(loc, scale²), n of them; y = (y₁, y₂) is released with Laplace scales
    (b₁, b₂); ``spec`` is the window's (v, w, lower_empty, upper_empty)
    (:meth:`~pymc_dp.families.normal_window.NormalWindowMoments.window_spec`). The same numbers
    as :func:`pair_window_graph`; the gradient in (u, loc, scale) is the kernel's own.
    """
    args = [pt.as_tensor_variable(x) for x in (u, loc, scale, n, y1, y2, b1, b2)]
    args = [pt.cast(x, "float64") if x.dtype != "float64" else x for x in args]
    return _elemwise("logp", _spec(spec))(*args)


def _spec(spec: tuple) -> tuple[float, float, bool, bool]:
    v, w, lower_empty, upper_empty = spec
    return (float(v), float(w), bool(lower_empty), bool(upper_empty))


# ---- the graph form, for JAX ---------------------------------------------------------------------
def pair_window_graph(
    u: Any,
    loc: Any,
    scale: Any,
    n: Any,
    y1: Any,
    y2: Any,
    b1: Any,
    b2: Any,
    spec: tuple[float, float, bool, bool],
) -> list[TensorVariable]:
    """:func:`pair_window_logp` as the PyTensor graph of its pieces (any backend, autodiff).

    This is the graph the grouped node built before the fused operation.
    """
    u, loc, scale, n, y1, y2, b1, b2 = (as_float64(x) for x in (u, loc, scale, n, y1, y2, b1, b2))
    entries = [n * e for e in window_pair_entries(loc, scale, spec)]
    m1, m2, v11, v12, v22 = entries
    c, d, var = first_statistic_map(y1, m1, v11, b1)
    lp_u = first_statistic_logp(u, c, d, m1, var)
    first = c + d * u
    centre, var2 = conditional_second(first, m1, m2, v11, v12, v22)
    value = pt.stack(pt.broadcast_arrays(y1, y2), axis=-1)
    lp_y = given_first_logp(value, first, centre, var2, pt.stack([b1, b2], axis=-1))
    return [lp_u, lp_y]


# ---- Numba: the Python mirror, compiled -------------------------------------------------------
ENTRIES_HELPERS = (
    "dual_const",
    "dual_lin",
    "dual_chain",
    "dual_add",
    "dual_sub",
    "dual_mul",
    "dual_div",
    "dual_scale",
    "dual_sqrt",
    "dual_log",
    "pair_given_entries",
)
"""The mirror of :data:`ENTRIES_C` (dual numbers and ``pair_given_entries``), in the order
:func:`~pymc_dp.kernels.numba_mirror.compile_mirror` compiles them; needs the normal–Laplace
convolution's :data:`~pymc_dp.likelihoods.normal_laplace.MIRROR_HELPERS`."""
_NUMBA_HELPERS = (
    *_nl.MIRROR_HELPERS,
    *ENTRIES_HELPERS,
    "plane_lin",
    "plane_add",
    "plane_sub",
    "plane_mul",
    "plane_scale",
    "plane_clip",
    "_window_moments_core",
    "_pair_window_core",
)
_NUMBA_INLINE = (
    *_nl.MIRROR_INLINE,
    "_normal_laplace_core",
    "pair_given_entries",
    "_window_moments_core",
)
_NAMESPACE = {**vars(_nl), **globals()}


@functools.cache
def _numba_core() -> Callable:
    """:func:`_pair_window_core` compiled by Numba (IEEE, as the C), the convolution's too."""
    return compile_mirror(_NAMESPACE, _NUMBA_HELPERS, "_pair_window_core", _NUMBA_INLINE)


register_fused_kernel(
    "pair_window", PairWindowLogp, PairWindowGrad, pair_window_graph, 3,
    functools.partial(_elemwise, "grad"), _numba_core, tuple,
    mirror_key(_NAMESPACE, _NUMBA_HELPERS, _NUMBA_INLINE),
    xla=XlaKernel("pair_window", _C_ALL, "pmdp_pair_window({x}, {s}, (int)grad, o);", 8, 4, 3, 2),
)  # fmt: skip


# ---- the model's two variables -------------------------------------------------------------------
def released_columns(value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The released pairs' columns y₁ and y₂ of a ``(G, 2)`` array, as contiguous copies.

    The model's graph holds them as constants, and Numba keeps a strided constant as a pointer
    (a "dynamic global"): a function holding one is never written to its on-disk cache.
    """
    return np.ascontiguousarray(value[:, 0]), np.ascontiguousarray(value[:, 1])


def window_pair_model(
    name: str,
    *,
    loc: Any,
    scale: Any,
    n: Any,
    value: np.ndarray,
    noise_scale: float,
    spec: tuple[float, float, bool, bool],
    dims: tuple[str, str],
) -> TensorVariable:
    """Add ``{name}_s1_std`` (u), ``{name}_s1`` (ŝ₁) and the observed y (inside a model context).

    The model of :func:`~pymc_dp.likelihoods.collapsed_pair.first_statistic` and
    :func:`~pymc_dp.likelihoods.collapsed_pair.LaplacePairGivenFirst` for a windowed Normal pair
    released per group (y of shape ``(G, 2)``, one Laplace scale ``noise_scale``), with both log
    densities from :func:`pair_window_logp`: both call it on the same inputs, so the compiled
    function evaluates the kernel once. The CLT entries as a graph serve only ŝ₁ and draws.
    """
    n = np.asarray(n, dtype=np.float64).reshape(-1)
    value = np.asarray(value, dtype=np.float64)
    b = np.float64(noise_scale)
    y1, y2 = released_columns(value)
    spec = _spec(spec)
    m1, m2, v11, v12, v22 = (n * e for e in window_pair_entries(loc, scale, spec))
    c, d, var = first_statistic_map(as_float64(y1), m1, v11, as_float64(b))

    def u_logp(u: Any, c: Any, d: Any, m: Any, v: Any, *inputs: Any) -> TensorVariable:
        return pair_window_logp(u, *inputs, spec)[0]

    def u_random(c: Any, d: Any, m: Any, v: Any, *rest: Any, rng: Any, size: Any) -> Any:
        return (rng.normal(m, np.sqrt(v), size=size) - c) / d

    u = pm.CustomDist(
        f"{name}_s1_std",
        *(c, d, m1, var),
        *(loc, scale, n, y1, y2, b, b),
        logp=u_logp,
        random=u_random,
        dims=dims[0],
    )
    first = pm.Deterministic(f"{name}_s1", c + d * u, dims=dims[0])
    centre, var2 = conditional_second(first, m1, m2, v11, v12, v22)

    def y_logp(value: Any, first: Any, centre: Any, var2: Any, *inputs: Any) -> TensorVariable:
        noise, u, loc, scale, n = inputs
        y1, y2, b1, b2 = value[..., 0], value[..., 1], noise[..., 0], noise[..., 1]
        return pair_window_logp(u, loc, scale, n, y1, y2, b1, b2, spec)[1]

    def y_random(first: Any, centre: Any, var2: Any, *rest: Any, rng: Any, size: Any) -> Any:
        first, centre, var2 = (np.asarray(x, dtype=np.float64) for x in (first, centre, var2))
        shape = size if size is not None else np.broadcast_shapes(first.shape, centre.shape)
        sd = np.sqrt(np.maximum(var2, 0.0))
        s = np.stack([np.broadcast_to(first, shape), rng.normal(centre, sd, size=shape)], axis=-1)
        return s + rng.laplace(0.0, b, size=s.shape)

    return pm.CustomDist(
        name,
        *(first, centre, var2, np.full(2, b)),
        *(u, loc, scale, n),
        logp=y_logp,
        random=y_random,
        signature="(),(),(),(k),(),(),(),()->(k)",
        observed=value,
        dims=dims,
    )
