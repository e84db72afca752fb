"""The normal–Laplace convolution as one compiled elementwise operation, with its gradient.

:func:`~pymc_dp.likelihoods.collapsed.normal_laplace_logp` (every collapsed Laplace node, scalar,
pair and grouped) is evaluated here. Written as a PyTensor graph it needs both branches of every
tail (a fused loop computes all of a ``switch``'s branches) and autodiff doubles that: about 470
scalar operations per group, 25 times the hand-written latent model's. In C with real branches the
log density and its six partial derivatives cost a few special functions each.

With z = (y − m)/sd, a = (L − m)/sd, b = (U − m)/sd, r = sd/b_noise and ĉ = clip(z, a, b)::

    p(y) = (S_L + S_R) / (2 b_noise Z),   Z = Φ(b) − Φ(a),
    S_L = e^{−rz + r²/2} [Φ(ĉ − r) − Φ(a − r)]   (s ≤ y; empty when z ≤ a),
    S_R = e^{ rz + r²/2} [Φ(−ĉ − r) − Φ(−b − r)]  (s ≥ y; empty when z ≥ b).

Each piece is kept in log space as −r(z − ĉ) + LS(ĉ) + log(1 − e^u), where LS(c) = log(e^{r²/2 − rc}
Φ(c − r)) is written without cancelling terms (−c²/2 plus a log Mills ratio when c < r), so no
regime of sd/b_noise needs a separate approximation. The derivatives are closed forms of the same
quantities (∂S/∂z = r(S_R − S_L), ∂S/∂a = −φ(a)e^{−r|z−a|}, ∂S/∂b = φ(b)e^{−r|z−b|}, and
∂S/∂r below), chained to (y, m, v, L, U, b_noise) through sd = √(v + (10⁻⁶ b_noise)²).

The Numba backend (nutpie, and PyTensor 3's default mode) compiles the Python mirror of the C
(:func:`normal_laplace_scalar`, the reference the C is tested against) with Numba. JAX (numpyro,
blackjax) runs the C as an XLA custom call (:mod:`~pymc_dp.likelihoods.xla_kernels`); where
that cannot be built, a rewrite replaces each operation by :func:`normal_laplace_graph`, the
same formula as a PyTensor graph, and the gradient operation by that graph's autodiff (so does
Numba with a PyTensor too old to take a Numba implementation). Without a C compiler the Python
``impl`` runs.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytensor.tensor as pt
from pytensor.compile import optdb
from pytensor.graph.basic import Apply
from pytensor.graph.rewriting.basic import in2out, node_rewriter
from pytensor.scalar.basic import ScalarOp, float64
from pytensor.tensor.elemwise import Elemwise
from pytensor.tensor.rewriting.basic import register_specialize
from pytensor.tensor.variable import TensorVariable

from pymc_dp._compat import pullback_op
from pymc_dp.kernels.numba_mirror import compile_mirror, mirror_key
from pymc_dp.likelihoods import xla_kernels
from pymc_dp.likelihoods.numba_ops import register_numba_scalar
from pymc_dp.likelihoods.xla_kernels import XlaKernel

__all__ = [
    "MIRROR_HELPERS",
    "MIRROR_INLINE",
    "NORMAL_LAPLACE_C",
    "NormalLaplacePartials",
    "drop_unused_partials",
    "grad_as_graph",
    "logp_as_graph",
    "normal_laplace",
    "normal_laplace_core",
    "normal_laplace_graph",
    "normal_laplace_scalar",
]

FLOOR = 1e-6
"""The normal's sd is floored by adding (10⁻⁶·b_noise)² to its variance: finite at θ's edge (p = 0
or 1), a relative change of 10⁻¹² in the convolution."""

NEGLIGIBLE_NOISE = 1e-5
"""Below this ratio b/sd, :func:`normal_laplace_graph` takes the noise-free limit."""

_C_SUPPORT = r"""
#ifndef PMDP_NORMAL_LAPLACE
#define PMDP_NORMAL_LAPLACE
#include <math.h>
/* log(Phi(x) e^{x^2/2}) for x <= 0: erfc while it is representable, else the Mills series. */
static double pmdp_log_mills(double x) {
    if (x > -37.0) return log(0.5 * erfc(-x * 0.70710678118654752440)) + 0.5 * x * x;
    double q = 1.0 / (x * x);
    return -0.91893853320467274178 - log(-x)
           + log1p(q * (-1.0 + q * (3.0 + q * (-15.0 + q * (105.0 - 945.0 * q)))));
}
/* log_mills(x1) - log_mills(x2) for x1, x2 < -37, given d = x2 - x1 exactly (x1 and x2 may
   round to the same number), without cancelling the two logs. */
static double pmdp_log_mills_diff(double x1, double x2, double d) {
    double q1 = 1.0 / (x1 * x1), q2 = 1.0 / (x2 * x2);
    double p1 = q1 * (-1.0 + q1 * (3.0 + q1 * (-15.0 + q1 * (105.0 - 945.0 * q1))));
    double p2 = q2 * (-1.0 + q2 * (3.0 + q2 * (-15.0 + q2 * (105.0 - 945.0 * q2))));
    return log1p(d / x1) + log1p(p1) - log1p(p2);
}
/* log(e^{r^2/2 - r c} Phi(c - r)) with no cancelling terms. */
static double pmdp_ls(double c, double r) {
    double x = c - r;
    if (x < 0.0) return -0.5 * c * c + pmdp_log_mills(x);
    return r * (0.5 * r - c) + log1p(-0.5 * erfc(x * 0.70710678118654752440));
}
/* log(1 - e^u), u < 0 */
static double pmdp_log1mexp(double u) {
    return u > -0.69314718055994530942 ? log(-expm1(u)) : log1p(-exp(u));
}
static double pmdp_logphi(double x) { return -0.5 * x * x - 0.91893853320467274178; }
/* x - 1/R(x), R the Mills ratio, given inv_r = 1/R(x): the series where the difference cancels. */
static double pmdp_mills_gap(double x, double inv_r) {
    if (x <= 30.0) return x - inv_r;
    double q = 1.0 / (x * x);
    return (-1.0 + q * (2.0 + q * (-10.0 + q * (74.0 - 706.0 * q)))) / x;
}
/* Whether y lies inside the region, far from both edges (no truncation term, none of the
   corrections below is taken: a^2 - z^2 > 2(|z| + r) + 82 implies Mills' bound puts each below
   e^-40, since LS(z) >= -z^2/2 - 0.92 - |z - r|), and the convolution e^{r^2/2}(A + B),
   A = e^{-rz} Phi(z - r), B = e^{rz} Phi(-z - r), is exact in linear space: either both pieces
   are representable (|z| + r < 30), or y is far from m against the noise (|z| - r > 9, as
   under wide noise at posterior draws) and r|z| < 300: then the larger piece is at least
   e^{-300}/2 and the smaller is below e^{-(|z| - r)^2/2} < 3e-18 of it, so that its erfc
   underflowing (absolute error 5e-324 times e^{300}) changes nothing. */
static int pmdp_nl_plain(double y, double lo, double hi, double z, double a, double b,
                         double r) {
    double az = fabs(z);
    if (!(y > lo && y < hi && a < -9.0 && b > 9.0)) return 0;
    if (!(az + r < 30.0 || (az - r > 9.0 && r * az < 300.0))) return 0;
    if (a - r > -1.0 || -b - r > -1.0) return 0;
    double room = 2.0 * (az + r) + 82.0, z2 = z * z;
    return a * a - z2 > room && b * b - z2 > room;
}
/* The same density and partials in that case, in linear space: two erfc, two exp, one log
   (log(2 s_b) aside), where the general path takes logs of each piece. Where |z| - r > 9 (about
   half the groups of a window at eps = 0.1) the smaller piece is dropped: with u = |z| - r,
   S = e^{r^2/2 - r|z|}(1 + d) with |d| <= 2 phi(u)/u < 3e-19, so log S, the tilt (-sign z, off
   by d) and the Mills term (phi(u)/(1 + d) < 1.1e-18) are exact to rounding without special
   functions. */
static double pmdp_normal_laplace_plain(double z, double r, double sd, double sb, double *g) {
    double az = fabs(z), value, fz, fr, dsd;
    if (az - r > 9.0) {
        value = r * (0.5 * r - az) - log(2.0 * sb);
        if (!g) return value;
        fz = z > 0.0 ? -r : r;
        fr = r - az;
        dsd = r / sb;
    } else {
        double e = exp(r * z);
        double A = 0.5 * erfc((r - z) * 0.70710678118654752440) / e;
        double B = 0.5 * erfc((z + r) * 0.70710678118654752440) * e;
        double S = A + B;
        value = 0.5 * r * r + log(S) - log(2.0 * sb);
        if (!g) return value;
        double inv_s = 1.0 / S, tilt = (B - A) * inv_s; /* w_R - w_L */
        /* phi(z) e^{-r^2/2} / S: each piece's Mills term times its share */
        double mills = 0.39894228040143267794 * exp(-0.5 * (z * z + r * r)) * inv_s;
        fz = r * tilt;
        fr = r + z * tilt - 2.0 * mills;
        /* -z fz / sd + fr / sb with r / sd = 1 / sb: the z tilt terms cancel analytically
           (each is |z| / r times the sum where y is far from m under wide noise). */
        dsd = (r - 2.0 * mills) / sb;
    }
    g[0] = fz / sd;
    g[1] = -fz / sd;
    g[2] = dsd / (2.0 * sd);
    g[3] = 0.0;
    g[4] = 0.0;
    g[5] = -1.0 / sb - fr * sd / (sb * sb) + dsd * 1e-12 * sb / sd;
    return value;
}
/* log p(y) of y = s + Laplace(0, s_b), s ~ N(m, v) truncated to [lo, hi]; g (6, or NULL) gets
   the partial derivatives in (y, m, v, lo, hi, s_b). */
static double pmdp_normal_laplace(double y, double m, double v, double lo, double hi, double sb,
                                  double *g) {
    double sd = sqrt(v + 1e-12 * sb * sb), r = sd / sb;
    double z = (y - m) / sd, a = (lo - m) / sd, b = (hi - m) / sd;
    if (pmdp_nl_plain(y, lo, hi, z, a, b, r))
        return pmdp_normal_laplace_plain(z, r, sd, sb, g);
    double c = z < a ? a : (z > b ? b : z);
    /* Distances in y's own units: standardising would round away a y just outside the region
       under tiny noise, where (y - U)/s_b is still of order one. */
    double yc = y < lo ? lo : (y > hi ? hi : y);
    /* r(z - c), r(c - a), r(b - c) */
    double e = (y - yc) / sb, rca = (yc - lo) / sb, rbc = (hi - yc) / sb;
    int has_l = y > lo, has_r = y < hi;
    /* Each correction log(1 - e^u) is needed only when Mills' bound leaves e^u above e^-40 (it
       is otherwise -e^u, under 5e-18); log Z only when a tail of the region holds 1e-19. */
    double log_l = -INFINITY, log_r = -INFINITY, ls_l = 0.0, ls_r = 0.0, k_l = 0.0, k_r = 0.0;
    int fix_l = 0, fix_r = 0, fix_z = a > -9.0 || b < 9.0;
    if (has_l) {
        ls_l = pmdp_ls(c, r);
        fix_l = a - r > -1.0 || -0.5 * a * a - rca - ls_l > -40.0;
        if (fix_l) k_l = pmdp_log1mexp(pmdp_ls(a, r) - ls_l - rca);
        log_l = -e + ls_l + k_l;
    }
    if (has_r) {
        ls_r = pmdp_ls(-c, r);
        fix_r = -b - r > -1.0 || -0.5 * b * b - rbc - ls_r > -40.0;
        if (fix_r) k_r = pmdp_log1mexp(pmdp_ls(-b, r) - ls_r - rbc);
        log_r = e + ls_r + k_r;
    }
    /* log S_L - log S_R; under tiny noise both pieces are about -log r and differ by ~z/r,
       so their difference is taken analytically where both sit in the Mills series. */
    double diff = log_l - log_r;
    if (has_l && has_r && c - r < -37.0 && -c - r < -37.0)
        diff = -2.0 * e + pmdp_log_mills_diff(c - r, -c - r, -2.0 * c) + k_l - k_r;
    double shrink = expm1(-fabs(diff)), gap = 1.0 + shrink; /* gap = e^{-|diff|} */
    double log_s = (log_l > log_r ? log_l : log_r) + log1p(gap);
    double log_z = 0.0;
    if (fix_z) {
        double phi_b = pmdp_ls(b, 0.0);
        log_z = phi_b + pmdp_log1mexp(pmdp_ls(a, 0.0) - phi_b);
    }
    if (g) {
        /* The pieces' shares of S, and each boundary term of dS over S with the piece's large
           exponent r(z - c) cancelled analytically (~1e8 for y far outside under tiny noise). */
        double big = 1.0 / (1.0 + gap), small = gap / (1.0 + gap);
        double wl = diff > 0.0 ? big : small, wr = diff > 0.0 ? small : big;
        double l_c = 0.0, l_a = 0.0, r_c = 0.0, r_b = 0.0, fr = 0.0;
        if (has_l) {
            double inv_r = exp(pmdp_logphi(c) - ls_l);  /* 1/R(r - c) */
            double grow = fix_l ? expm1(-k_l) : 0.0;      /* e^{-k} - 1 */
            l_c = wl * inv_r * (1.0 + grow);
            if (fix_l) l_a = wl * exp(pmdp_logphi(a) - rca - ls_l - k_l);
            /* (r - z) wl - l_c, whose two terms are each about r */
            fr += wl * (pmdp_mills_gap(r - c, inv_r) - e / r - inv_r * grow) + l_a;
        }
        if (has_r) {
            double inv_r = exp(pmdp_logphi(c) - ls_r);  /* 1/R(r + c) */
            double grow = fix_r ? expm1(-k_r) : 0.0;
            r_c = wr * inv_r * (1.0 + grow);
            if (fix_r) r_b = wr * exp(pmdp_logphi(b) - rbc - ls_r - k_r);
            fr += wr * (pmdp_mills_gap(r + c, inv_r) + e / r - inv_r * grow) + r_b;
        }
        double fz = r * (diff > 0.0 ? shrink : -shrink) / (1.0 + gap); /* r (wr - wl) */
        double fa = (fix_z ? exp(pmdp_logphi(a) - log_z) : 0.0) - (has_l ? l_a : r_c);
        double fb = (has_r ? r_b : l_c) - (fix_z ? exp(pmdp_logphi(b) - log_z) : 0.0);
        double dsd = -(z * fz + a * fa + b * fb) / sd + fr / sb;
        g[0] = fz / sd;
        g[1] = -(fz + fa + fb) / sd;
        g[2] = dsd / (2.0 * sd);
        g[3] = fa / sd;
        g[4] = fb / sd;
        g[5] = -1.0 / sb - fr * sd / (sb * sb) + dsd * 1e-12 * sb / sd;
    }
    return log_s - log_z - log(2.0 * sb);
}
#endif
"""
NORMAL_LAPLACE_C = _C_SUPPORT
"""The C of ``pmdp_normal_laplace``, for operations that call it inside a larger kernel."""
_C_VERSION = (14, int(hashlib.sha256(_C_SUPPORT.encode()).hexdigest()[:12], 16))
"""PyTensor's cache key: changes with the C (as the kernels that include it key theirs)."""


# ---- the same algorithm in Python (no C compiler; the reference for the C in tests) -----------
# The C's constants, as numbers: Numba calls the C library for math.log(2.0) on every
# evaluation, and a product by 1/√2 rounds as the C's does, where a quotient by √2 need not.
_SQRT1_2 = 0.7071067811865476
_INV_SQRT_2PI = 0.3989422804014327
_HALF_LOG_2PI = 0.9189385332046728
_LOG_2 = 0.6931471805599453


def _log_mills(x: float) -> float:
    if x > -37.0:
        return math.log(0.5 * math.erfc(-x * _SQRT1_2)) + 0.5 * x * x
    return -_HALF_LOG_2PI - math.log(-x) + math.log1p(_mills_series(x))


def _mills_series(x: float) -> float:
    q = 1.0 / (x * x)
    return q * (-1.0 + q * (3.0 + q * (-15.0 + q * (105.0 - 945.0 * q))))


def _log_mills_diff(x1: float, x2: float, d: float) -> float:
    return math.log1p(d / x1) + math.log1p(_mills_series(x1)) - math.log1p(_mills_series(x2))


def _ls(c: float, r: float) -> float:
    x = c - r
    if x < 0.0:
        return -0.5 * c * c + _log_mills(x)
    return r * (0.5 * r - c) + math.log1p(-0.5 * math.erfc(x * _SQRT1_2))


def _log1mexp(u: float) -> float:
    return math.log(-math.expm1(u)) if u > -_LOG_2 else math.log1p(-math.exp(u))


def _logphi(x: float) -> float:
    return -0.5 * x * x - _HALF_LOG_2PI


def _mills_gap(x: float, inv_r: float) -> float:
    if x <= 30.0:
        return x - inv_r
    q = 1.0 / (x * x)
    return (-1.0 + q * (2.0 + q * (-10.0 + q * (74.0 - 706.0 * q)))) / x


def _exp(x: float) -> float:
    return 0.0 if x == -math.inf else math.exp(x)


def _plain(y: float, lo: float, hi: float, z: float, a: float, b: float, r: float) -> bool:
    az = abs(z)
    if not (lo < y < hi and a < -9.0 and b > 9.0):
        return False
    if not (az + r < 30.0 or (az - r > 9.0 and r * az < 300.0)):
        return False
    if a - r > -1.0 or -b - r > -1.0:
        return False
    room = 2.0 * (az + r) + 82.0
    return a * a - z * z > room and b * b - z * z > room


def _normal_laplace_plain(
    z: float, r: float, sd: float, sb: float, grad: bool
) -> tuple[float, float, float, float, float, float, float]:
    az = abs(z)
    if az - r > 9.0:  # the smaller piece below 3e-19 of the larger (the C's comment)
        value = r * (0.5 * r - az) - math.log(2.0 * sb)
        if not grad:
            return (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, value)
        fz = -r if z > 0.0 else r
        fr, dsd = r - az, r / sb
    else:
        e = math.exp(r * z)
        big_a = 0.5 * math.erfc((r - z) * _SQRT1_2) / e
        big_b = 0.5 * math.erfc((z + r) * _SQRT1_2) * e
        total = big_a + big_b
        value = 0.5 * r * r + math.log(total) - math.log(2.0 * sb)
        if not grad:
            return (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, value)
        inv_s = 1.0 / total
        tilt = (big_b - big_a) * inv_s
        mills = _INV_SQRT_2PI * math.exp(-0.5 * (z * z + r * r)) * inv_s
        fz = r * tilt
        fr = r + z * tilt - 2.0 * mills
        dsd = (r - 2.0 * mills) / sb  # -z fz / sd + fr / sb, the z tilt terms cancelled (C)
    return (
        fz / sd,
        -fz / sd,
        dsd / (2.0 * sd),
        0.0,
        0.0,
        -1.0 / sb - fr * sd / (sb * sb) + dsd * 1e-12 * sb / sd,
        value,
    )


def normal_laplace_scalar(
    y: float, m: float, v: float, lo: float, hi: float, sb: float, grad: bool = False
) -> Any:
    """Log p(y) and, with ``grad``, its six partial derivatives (the C code, in Python)."""
    out = _normal_laplace_core(y, m, v, lo, hi, sb, grad)
    return out if grad else out[6]


def _normal_laplace_core(
    y: float, m: float, v: float, lo: float, hi: float, sb: float, grad: bool
) -> tuple[float, float, float, float, float, float, float]:
    """(∂/∂y, ∂/∂m, ∂/∂v, ∂/∂L, ∂/∂U, ∂/∂b, log p); the partials are 0 without ``grad``.

    Numba compiles it as written (:func:`_numba_core`): one return type, module-level helpers.
    """
    sd = math.sqrt(v + 1e-12 * sb * sb)
    r = sd / sb
    z, a, b = (y - m) / sd, (lo - m) / sd, (hi - m) / sd
    if _plain(y, lo, hi, z, a, b, r):
        return _normal_laplace_plain(z, r, sd, sb, grad)
    c = min(max(z, a), b)
    yc = min(max(y, lo), hi)
    e, rca, rbc = (y - yc) / sb, (yc - lo) / sb, (hi - yc) / sb
    has_l, has_r = y > lo, y < hi
    log_l = log_r = -math.inf
    ls_l = ls_r = k_l = k_r = 0.0
    fix_l = fix_r = False
    fix_z = a > -9.0 or b < 9.0
    if has_l:
        ls_l = _ls(c, r)
        fix_l = a - r > -1.0 or -0.5 * a * a - rca - ls_l > -40.0
        k_l = _log1mexp(_ls(a, r) - ls_l - rca) if fix_l else 0.0
        log_l = -e + ls_l + k_l
    if has_r:
        ls_r = _ls(-c, r)
        fix_r = -b - r > -1.0 or -0.5 * b * b - rbc - ls_r > -40.0
        k_r = _log1mexp(_ls(-b, r) - ls_r - rbc) if fix_r else 0.0
        log_r = e + ls_r + k_r
    diff = log_l - log_r
    if has_l and has_r and c - r < -37.0 and -c - r < -37.0:
        diff = -2.0 * e + _log_mills_diff(c - r, -c - r, -2.0 * c) + k_l - k_r
    shrink = math.expm1(-abs(diff))
    gap = 1.0 + shrink
    log_s = max(log_l, log_r) + math.log1p(gap)
    log_z = 0.0
    if fix_z:
        phi_b = _ls(b, 0.0)
        log_z = phi_b + _log1mexp(_ls(a, 0.0) - phi_b)
    value = log_s - log_z - math.log(2.0 * sb)
    if not grad:
        return (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, value)
    big, small = 1.0 / (1.0 + gap), gap / (1.0 + gap)
    wl, wr = (big, small) if diff > 0.0 else (small, big)
    l_c = l_a = r_c = r_b = fr = 0.0
    if has_l:
        inv_r = math.exp(_logphi(c) - ls_l)
        grow = math.expm1(-k_l) if fix_l else 0.0
        l_c = wl * inv_r * (1.0 + grow)
        if fix_l:
            l_a = wl * math.exp(_logphi(a) - rca - ls_l - k_l)
        fr += wl * (_mills_gap(r - c, inv_r) - e / r - inv_r * grow) + l_a
    if has_r:
        inv_r = math.exp(_logphi(c) - ls_r)
        grow = math.expm1(-k_r) if fix_r else 0.0
        r_c = wr * inv_r * (1.0 + grow)
        if fix_r:
            r_b = wr * math.exp(_logphi(b) - rbc - ls_r - k_r)
        fr += wr * (_mills_gap(r + c, inv_r) + e / r - inv_r * grow) + r_b
    fz = r * (shrink if diff > 0.0 else -shrink) / (1.0 + gap)
    fa = (math.exp(_logphi(a) - log_z) if fix_z else 0.0) - (l_a if has_l else r_c)
    fb = (r_b if has_r else l_c) - (math.exp(_logphi(b) - log_z) if fix_z else 0.0)
    dsd = -(z * fz + a * fa + b * fb) / sd + fr / sb
    return (
        fz / sd,
        -(fz + fa + fb) / sd,
        dsd / (2.0 * sd),
        fa / sd,
        fb / sd,
        -1.0 / sb - fr * sd / (sb * sb) + dsd * 1e-12 * sb / sd,
        value,
    )


normal_laplace_core = _normal_laplace_core
"""The mirror's core, (∂/∂y, ∂/∂m, ∂/∂v, ∂/∂L, ∂/∂U, ∂/∂b, log p), for mirrors that call it."""


# ---- the scalar operations --------------------------------------------------------------------
@pullback_op
class _NormalLaplaceBase(ScalarOp):
    nin = 6

    def output_types(self, types: Any) -> list:
        return [float64] * self.nout

    def c_support_code(self, **kwargs: Any) -> str:
        return _C_SUPPORT

    def c_code_cache_version(self) -> tuple:
        return _C_VERSION

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other)

    def __hash__(self) -> int:
        return hash(type(self))


class NormalLaplaceLogp(_NormalLaplaceBase):
    """log p(y | m, v, L, U, b) of the truncated normal–Laplace convolution (see the module)."""

    nout = 1

    def impl(self, *inputs: float) -> float:
        return normal_laplace_scalar(*(float(x) for x in inputs))

    def c_code(self, node: Apply, name: str, inp: list, out: list, sub: dict) -> str:
        return f"{out[0]} = pmdp_normal_laplace({', '.join(inp)}, NULL);"

    def pullback(self, inputs: list, outputs: list, output_grads: list) -> list:
        (gz,) = output_grads
        return [gz * part for part in normal_laplace_grad_scalar(*inputs)[:6]]


class NormalLaplaceGrad(_NormalLaplaceBase):
    """The partial derivatives of :class:`NormalLaplaceLogp` in (y, m, v, L, U, b), and logp.

    The log density is a seventh output: a rewrite hands it to the forward operation, so that a
    function of both (NUTS) evaluates the convolution once.
    """

    nout = 7

    def impl(self, *inputs: float) -> tuple:
        return normal_laplace_scalar(*(float(x) for x in inputs), grad=True)

    def c_code(self, node: Apply, name: str, inp: list, out: list, sub: dict) -> str:
        stores = " ".join(f"{o} = g[{i}];" for i, o in enumerate(out[:6]))
        call = f"pmdp_normal_laplace({', '.join(inp)}, g)"
        return f"{{ double g[6]; {out[6]} = {call}; {stores} }}"

    def pullback(self, inputs: list, outputs: list, output_grads: list) -> list:
        raise NotImplementedError("second derivatives of the normal–Laplace convolution")


class NormalLaplacePartials(_NormalLaplaceBase):
    """The outputs ``keep`` (indices into :class:`NormalLaplaceGrad`'s seven), and no others.

    A Numba rewrite (:func:`drop_unused_partials`) puts it where a graph uses only some of the
    gradient's outputs: the grouped CLT node reads ∂/∂m, ∂/∂v and log p alone (y, the region and
    the noise scale are data), and the four others would each be computed and stored in an array
    of their own (2.4 µs of 32 at G = 500).
    """

    def __init__(self, keep: tuple[int, ...], name: str | None = None):
        super().__init__(name=name)
        self.keep = tuple(int(k) for k in keep)
        self.nout = len(self.keep)

    def impl(self, *inputs: float) -> Any:  # noqa: D102
        out = normal_laplace_scalar(*(float(x) for x in inputs), grad=True)
        kept = tuple(out[k] for k in self.keep)
        return kept if self.nout > 1 else kept[0]

    def c_code(self, node: Apply, name: str, inp: list, out: list, sub: dict) -> str:  # noqa: D102
        stores = " ".join(f"{o} = g[{k}];" for k, o in zip(self.keep, out))
        return f"{{ double g[7]; g[6] = pmdp_normal_laplace({', '.join(inp)}, g); {stores} }}"

    def pullback(self, inputs: list, outputs: list, output_grads: list) -> list:  # noqa: D102
        raise NotImplementedError("second derivatives of the normal–Laplace convolution")

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.keep == other.keep

    def __hash__(self) -> int:
        return hash((type(self), self.keep))


normal_laplace_grad_scalar = NormalLaplaceGrad(name="normal_laplace_grad")
_normal_laplace = Elemwise(NormalLaplaceLogp(name="normal_laplace_logp"))
_normal_laplace_grad = Elemwise(normal_laplace_grad_scalar)


def normal_laplace(
    value: Any, mean: Any, var: Any, lower: Any, upper: Any, scale: Any
) -> TensorVariable:
    """Elementwise log p(y | θ) of y = s + Laplace(0, scale), s ~ N(mean, var) on [lower, upper].

    Parameters
    ----------
    value, mean, var, lower, upper, scale
        Broadcastable tensors (cast to float64): the released y, the normal's mean and variance
        before truncation, the valid region of s (lower < upper) and the Laplace scale b = Δ/ε.

    Returns
    -------
    TensorVariable
        The log density; its gradient is the closed form of the module docstring.
    """
    args = [pt.as_tensor_variable(x) for x in (value, mean, var, lower, upper, scale)]
    return _normal_laplace(*(pt.cast(x, "float64") if x.dtype != "float64" else x for x in args))


# ---- the graph form, for the JAX and Numba backends --------------------------------------------
_RSQRT2 = 1 / np.sqrt(2.0)


def _ls_graph(c: Any, r: Any) -> TensorVariable:
    x = c - r
    below = x < 0
    t = pt.switch(below, -x, x) * _RSQRT2
    e = pt.erfcx(t)  # one erfcx serves both branches; each stays finite when not taken
    tail = -0.5 * pt.sqr(c) + pt.log(0.5 * e)
    bulk = r * (0.5 * r - c) + pt.log1p(-0.5 * e * pt.exp(-pt.sqr(t)))
    return pt.switch(below, tail, bulk)


def _log1mexp_graph(u: Any) -> TensorVariable:
    return pt.switch(u > -np.log(2.0), pt.log(-pt.expm1(u)), pt.log1p(-pt.exp(u)))


def normal_laplace_graph(
    value: Any, mean: Any, var: Any, lower: Any, upper: Any, scale: Any
) -> TensorVariable:
    """:func:`normal_laplace` as a PyTensor graph (same formula; any backend, autodiff).

    Written without the C code's analytic cancellations, it takes the limit instead where the
    noise is negligible (b < 10⁻⁵ sd): the truncated normal's density at y, or for a y outside
    the region at its nearest end, times the Laplace kernel's mass on the region's side.
    """
    sd = pt.sqrt(var + pt.sqr(FLOOR * scale))
    a, b = (lower - mean) / sd, (upper - mean) / sd
    phi_b = _ls_graph(b, 0.0)
    log_z = phi_b + _log1mexp_graph(_ls_graph(a, 0.0) - phi_b)
    negligible = scale < NEGLIGIBLE_NOISE * sd
    nearest = pt.clip(value, lower, upper)
    inside = pt.minimum(value - lower, upper - value)  # negative outside
    edge = pt.switch(
        inside > 0,
        pt.log1p(-0.5 * pt.exp(-pt.abs(inside) / scale)),
        np.log(0.5) + inside / scale,
    )
    limit = -0.5 * pt.sqr((nearest - mean) / sd) - pt.log(sd) - 0.5 * np.log(2 * np.pi) + edge
    # The exact branch gets a harmless scale there, so that neither branch's gradient is NaN.
    scale = pt.switch(negligible, sd, scale)
    r = sd / scale
    z = (value - mean) / sd
    has_left, has_right = z > a, z < b
    # An empty piece gets the whole region instead, so that its unused branch stays finite.
    c_left = pt.switch(has_left, pt.minimum(z, b), b)
    c_right = pt.switch(has_right, pt.maximum(z, a), a)
    ls_left = _ls_graph(c_left, r)
    left = -r * (z - c_left) + ls_left
    left = left + _log1mexp_graph(_ls_graph(a, r) - ls_left - r * (c_left - a))
    ls_right = _ls_graph(-c_right, r)
    right = r * (z - c_right) + ls_right
    right = right + _log1mexp_graph(_ls_graph(-b, r) - ls_right - r * (b - c_right))
    left = pt.switch(has_left, left, -np.inf)
    right = pt.switch(has_right, right, -np.inf)
    log_s = pt.maximum(left, right) + pt.log1p(pt.exp(-pt.abs(left - right)))
    return pt.switch(negligible, limit, log_s - pt.log(2 * scale)) - log_z


@node_rewriter([_normal_laplace])
def logp_as_graph(fgraph: Any, node: Apply) -> list | None:
    """Replace the compiled log density by :func:`normal_laplace_graph` (JAX; ``QUICK_MODE``)."""
    return [normal_laplace_graph(*node.inputs)]


@node_rewriter([_normal_laplace_grad])
def grad_as_graph(fgraph: Any, node: Apply) -> list | None:
    """Replace the compiled gradient by the graph's autodiff (JAX; ``QUICK_MODE``)."""
    inputs = node.inputs
    # The graph is elementwise, so the gradient of its sum is each element's partial derivative.
    # Inputs are broadcast first so that each partial keeps the output's shape.
    full = pt.broadcast_arrays(*inputs)
    logp = normal_laplace_graph(*full)
    return [*pt.grad(logp.sum(), full), logp]


@node_rewriter([_normal_laplace_grad])
def drop_unused_partials(fgraph: Any, node: Apply) -> dict | None:
    """The gradient operation without the outputs nothing reads (:class:`NormalLaplacePartials`).

    Numba only, after ``specialize`` (where the forward operation takes its log density from the
    gradient's, :func:`_logp_from_grad`).
    """
    keep = tuple(k for k, out in enumerate(node.outputs) if fgraph.clients[out])
    if not keep or len(keep) == len(node.outputs):
        return None
    new = Elemwise(NormalLaplacePartials(keep, name="normal_laplace_partials"))(*node.inputs)
    new = new if isinstance(new, list) else [new]
    return dict(zip((node.outputs[k] for k in keep), new))


@node_rewriter([_normal_laplace])
def _logp_from_grad(fgraph: Any, node: Apply) -> list | None:
    # logp and dlogp compiled together (NUTS) evaluate the convolution once, not twice.
    for client, _ in fgraph.clients[node.inputs[0]]:
        if client != "output" and client.op == _normal_laplace_grad:
            if client.inputs == node.inputs:
                return [client.outputs[6]]
    return None


# ---- Numba: the Python mirror, compiled -------------------------------------------------------
MIRROR_HELPERS = (
    "_plain",
    "_normal_laplace_plain",
    "_mills_series",
    "_log_mills",
    "_log_mills_diff",
    "_ls",
    "_log1mexp",
    "_logphi",
    "_mills_gap",
    "_exp",
    "_normal_laplace_core",
)
"""The Python mirror's functions, in the order :func:`~pymc_dp.kernels.numba_mirror.compile_mirror`
compiles them (``_normal_laplace_core`` last)."""
MIRROR_INLINE = ("_plain", "_normal_laplace_plain")
"""The helpers Numba inlines into their callers (the convolution's common path)."""
# The core too, into the operations' closures: so that one which returns some outputs
# (NormalLaplacePartials) computes no others (28.6 against 26.5 µs for 500 groups).
_CORE_INLINE = (*MIRROR_INLINE, "_normal_laplace_core")
_NUMBA_KEY = mirror_key(globals(), MIRROR_HELPERS, _CORE_INLINE)


@functools.cache
def _numba_core() -> Callable:
    """:func:`_normal_laplace_core` compiled by Numba, without fastmath (IEEE, as the C).

    Each helper is compiled from its own code, with globals in which the other helpers are the
    compiled ones, so the Python mirror stays plain Python.
    """
    return compile_mirror(globals(), MIRROR_HELPERS, "_normal_laplace_core", _CORE_INLINE)


def _numba_logp(op: Any) -> tuple[Callable, str]:
    core = _numba_core()

    def normal_laplace_logp(y, m, v, lo, hi, sb):
        return core(y, m, v, lo, hi, sb, False)[6]

    return normal_laplace_logp, f"pmdp_normal_laplace_logp_{_NUMBA_KEY}"


def _numba_grad(op: Any) -> tuple[Callable, str]:
    core = _numba_core()

    def normal_laplace_grad(y, m, v, lo, hi, sb):
        return core(y, m, v, lo, hi, sb, True)

    return normal_laplace_grad, f"pmdp_normal_laplace_grad_{_NUMBA_KEY}"


def _numba_partials(op: Any) -> tuple[Callable, str]:
    core = _numba_core()
    # The kept outputs as literal indices (a tuple or, for one, a number, as Elemwise expects):
    # Numba then drops what computes only the others.
    kept = ", ".join(f"out[{k}]" for k in op.keep)
    text = (
        "def normal_laplace_partials(y, m, v, lo, hi, sb):\n"
        "    out = core(y, m, v, lo, hi, sb, True)\n"
        f"    return {kept}\n"
    )
    env = {"core": core}
    exec(text, env)  # the text above, with the operation's indices
    name = "_".join(str(k) for k in op.keep)
    return env["normal_laplace_partials"], f"pmdp_normal_laplace_partials_{name}_{_NUMBA_KEY}"


_HAS_NUMBA = register_numba_scalar(NormalLaplaceLogp, _numba_logp)
_HAS_NUMBA = register_numba_scalar(NormalLaplaceGrad, _numba_grad) and _HAS_NUMBA
_HAS_NUMBA = register_numba_scalar(NormalLaplacePartials, _numba_partials) and _HAS_NUMBA
# Only the JAX (and, where the Numba implementation could not be registered, the Numba) mode
# queries these tags; the C and Numba backends keep the compiled operation.
_GRAPH_TAGS = ("jax",) if _HAS_NUMBA else ("jax", "numba")
# On JAX the convolution is the C above as an XLA custom call where that builds
# (:mod:`~pymc_dp.likelihoods.xla_kernels`); the graph forms are JAX's where it cannot.
_XLA = XlaKernel("normal_laplace", _C_SUPPORT, "o[6] = pmdp_normal_laplace({x}, grad ? o : NULL);",
                 6, 0, 6, 1)  # fmt: skip
xla_kernels.register(_XLA, NormalLaplaceLogp, NormalLaplaceGrad, lambda op: ())


for _name, _rewrite in (("logp", logp_as_graph), ("grad", grad_as_graph)):
    optdb["specialize"].register(
        f"pmdp_normal_laplace_{_name}_as_graph",
        xla_kernels.unless_called(_rewrite, _XLA if _HAS_NUMBA else None),
        *_GRAPH_TAGS,
    )
register_specialize(_logp_from_grad, "pmdp_normal_laplace_logp_from_grad")
if _HAS_NUMBA:
    # After specialize (2) and before the fusion of elementwise loops (48).
    optdb.register(
        "pmdp_normal_laplace_drop_unused_partials",
        in2out(drop_unused_partials),
        "numba",
        position=47.5,
    )
