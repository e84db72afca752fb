"""Closed-form window moments of the Normal families as one PyTensor Op (paper §3.3, Lemma 1).

The windowed Normal families need (log q, μ̂, Σ̂) of t(z) = z or (z, z²) on each window. Written
as a PyTensor graph (by autodiff of the truncated log-partition, or even in closed form with
erfcx, reflections and quadrature switches), NUTS differentiates that graph once more and the
result takes minutes to rewrite and compile. Here the moments of the standardised window come
from one NumPy kernel (:func:`pymc_dp.kernels.normal_window.standard_window_moments`) inside an
Op whose gradient is a short polynomial in its own outputs:

for Z = Φ(β) - Φ(α), r_α = φ(α)/Z, r_β = φ(β)/Z and any g, ∂_β E g(X) = r_β (g(β) - E g(X)) and
∂_α E g(X) = -r_α (g(α) - E g(X)). Hence ∂ log Z = (-r_α, r_β), ∂m = (r_α(m - α), r_β(β - m)),
∂c_j = ±r (edge - m)^j ∓ r c_j - j c_(j-1) ∂m for the central moments c_j, and ∂r_α = (r_α(r_α - α),
-r_α r_β), ∂r_β = (r_α r_β, -r_β(β + r_β)). Derivatives of every order are therefore exact, and
a model's logp-and-gradient graph stays small.

When a function is compiled, a rewrite replaces the Op's forward pass by compiled code rather
than a Python call of about 120 µs: for PyTensor's C backend one elementwise loop of
:class:`WindowMomentsScalar` (the NumPy kernel in C, with real branches), for JAX and Numba the
same kernel written as a PyTensor graph (:func:`window_moments_graph`); other modes (no
rewrites) call the Op. The gradient, built
symbolically before any rewrite, is still the Op's short polynomial.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytensor.tensor as pt
from pytensor.compile import optdb
from pytensor.gradient import DisconnectedType
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.graph.replace import _vectorize_node
from pytensor.graph.rewriting.basic import in2out, node_rewriter
from pytensor.scalar.basic import ScalarOp, float64
from pytensor.scalar.math import C_CODE_PATH
from pytensor.tensor.elemwise import Elemwise
from pytensor.tensor.variable import TensorVariable

from pymc_dp._compat import pullback_op
from pymc_dp.families.erfcx import erfcx
from pymc_dp.families.truncated import LOG_TINY, f64, normal_log_cdf
from pymc_dp.kernels.normal_window import (
    EDGE,
    GL_NODES,
    GL_WEIGHTS,
    MIN_D,
    NARROW,
    standard_window_moments,
)

__all__ = [
    "WINDOW_CENTRAL_C",
    "WINDOW_MOMENTS_C",
    "NormalWindowMoments",
    "WindowMomentsOp",
    "WindowMomentsScalar",
    "window_moments",
    "window_moments_graph",
    "window_pair_entries",
]


@pullback_op
class WindowMomentsOp(Op):
    """(log Z, E X, c₂, c₃, c₄, φ(α)/Z, φ(β)/Z) of N(0, 1) truncated to [α, β], elementwise.

    An empty window (Z below about e^-100 e^-α²) gives log Z = -inf and zeros, with zero
    gradients. Use :func:`window_moments` to call it.
    """

    __props__ = ()

    def make_node(self, alpha: Any, beta: Any) -> Apply:  # noqa: D102
        alpha, beta = pt.broadcast_arrays(
            pt.as_tensor_variable(alpha, dtype="float64"),
            pt.as_tensor_variable(beta, dtype="float64"),
        )
        out_type = pt.TensorType("float64", shape=alpha.type.shape)
        return Apply(self, [alpha, beta], [out_type() for _ in range(7)])

    def perform(self, node: Apply, inputs: list, output_storage: list) -> None:  # noqa: D102
        m = standard_window_moments(*inputs)
        values = (m.log_z, m.mean, *np.moveaxis(m.central, -1, 0), m.ratio_lo, m.ratio_hi)
        for storage, value in zip(output_storage, values):
            storage[0] = np.asarray(value, dtype=np.float64)

    def pullback(self, inputs: list, outputs: list, output_grads: list) -> list:  # noqa: D102
        alpha, beta = inputs
        _, m, c2, c3, c4, r_lo, r_hi = outputs
        dm = (r_lo * (m - alpha), r_hi * (beta - m))
        dev = (alpha - m, beta - m)
        sign = (-r_lo, r_hi)
        partials = [
            (-r_lo, r_hi),  # log Z
            dm,
            tuple(sign[e] * (dev[e] ** 2 - c2) for e in (0, 1)),
            tuple(sign[e] * (dev[e] ** 3 - c3) - 3 * c2 * dm[e] for e in (0, 1)),
            tuple(sign[e] * (dev[e] ** 4 - c4) - 4 * c3 * dm[e] for e in (0, 1)),
            (r_lo * (r_lo - alpha), -r_lo * r_hi),
            (r_lo * r_hi, -r_hi * (beta + r_hi)),
        ]
        grads = [pt.zeros_like(alpha), pt.zeros_like(beta)]
        for g, partial in zip(output_grads, partials):
            if isinstance(g.type, DisconnectedType):
                continue
            grads = [total + g * p for total, p in zip(grads, partial)]
        return grads


_window_moments_op = WindowMomentsOp()


@_vectorize_node.register(WindowMomentsOp)
def _vectorize_window_moments(op: WindowMomentsOp, node: Apply, *batched_inputs: Any) -> Any:
    # Elementwise: a batch of edges is the same Op on the batched arrays.
    return op.make_node(*batched_inputs).outputs


def window_moments_graph(alpha: Any, beta: Any) -> list[TensorVariable]:
    """The outputs of :class:`WindowMomentsOp` as a PyTensor graph, elementwise in (α, β).

    Line for line :func:`~pymc_dp.kernels.normal_window.standard_window_moments` (see its notes:
    reflection, erfcx-scaled mass, moments of X - max(lo, 0) by recursion, Gauss–Legendre
    quadrature on narrow windows). Both branches are computed and one is selected, so only the
    forward values are meaningful: differentiate :class:`WindowMomentsOp`, not this graph.
    """
    alpha, beta = pt.broadcast_arrays(
        pt.as_tensor_variable(alpha, dtype="float64"), pt.as_tensor_variable(beta, dtype="float64")
    )
    flip = pt.lt(alpha + beta, 0)
    lo = pt.switch(flip, -beta, alpha)
    hi = pt.switch(flip, -alpha, beta)
    a, b = lo / np.sqrt(2.0), hi / np.sqrt(2.0)
    exponent = (a - b) * (a + b)
    ratio = pt.exp(exponent)
    d_raw = erfcx(a) - ratio * erfcx(b)
    ok = pt.gt(d_raw, MIN_D)
    d = pt.switch(ok, d_raw, 1.0)
    log_z = np.log(0.5) - a * a + pt.log(d)
    r_lo = np.sqrt(2.0 / np.pi) / d
    r_hi = r_lo * ratio
    u = pt.maximum(lo, 0.0)
    d_lo, d_hi = lo - u, hi - u
    raw = [-u - r_lo * pt.expm1(exponent)]
    prev2, prev = pt.ones_like(u), raw[0]
    p_lo, p_hi = d_lo, d_hi
    for j in range(2, 5):
        nxt = -u * prev + (j - 1) * prev2 + p_lo * r_lo - p_hi * r_hi
        raw.append(nxt)
        prev2, prev = prev, nxt
        p_lo, p_hi = p_lo * d_lo, p_hi * d_hi
    narrow = pt.lt((hi - lo) * (2 * hi - lo), NARROW)
    pad = pt.shape_padright
    y = pad((lo + hi) / 2 - u) + pad((hi - lo) / 2) * GL_NODES
    weights = GL_WEIGHTS * pt.exp(-y * (y + 2 * pad(u)) / 2)
    total = weights.sum(axis=-1)
    power = y
    for j in range(4):
        raw[j] = pt.switch(narrow, (weights * power).sum(axis=-1) / total, raw[j])
        power = power * y
    m1, m2, m3, m4 = raw
    c2 = m2 - m1 * m1
    c3 = m3 - 3 * m1 * m2 + 2 * m1**3
    c4 = m4 - 4 * m1 * m3 + 6 * m1 * m1 * m2 - 3 * m1**4
    sign = pt.switch(flip, -1.0, 1.0)
    values = (
        pt.switch(ok, log_z, -np.inf),
        sign * (u + m1),
        c2,
        sign * c3,
        c4,
        pt.switch(flip, r_hi, r_lo),
        pt.switch(flip, r_lo, r_hi),
    )
    return [values[0], *(pt.switch(ok, v, 0.0) for v in values[1:])]


_C_CENTRAL_TEMPLATE = r"""
#ifndef PMDP_WINDOW_CENTRAL
#define PMDP_WINDOW_CENTRAL
#include <math.h>
static const double pmdp_gl_nodes[20] = {@NODES@};
static const double pmdp_gl_weights[20] = {@WEIGHTS@};
/* o[1..6] = (E X, c2, c3, c4, phi(alpha)/Z, phi(beta)/Z) of N(0, 1) truncated to the window,
   reflected to [lo, hi] with lo + hi >= 0 (flip), from r_lo = phi(lo)/Z, r_hi = phi(hi)/Z and
   grow = e^((lo^2 - hi^2)/2) - 1: the recursion of standard_window_moments, or Gauss-Legendre
   quadrature on narrow windows. */
static void pmdp_window_central(int flip, double lo, double hi, double r_lo, double r_hi,
                                double grow, double *o) {
    int j, k;
    double u = lo > 0.0 ? lo : 0.0, d_lo = lo - u, d_hi = hi - u;
    double raw[4];
    raw[0] = -u - r_lo * grow;
    double prev2 = 1.0, prev = raw[0], p_lo = d_lo, p_hi = d_hi;
    for (j = 2; j < 5; j++) {
        double nxt = -u * prev + (j - 1) * prev2 + p_lo * r_lo - p_hi * r_hi;
        raw[j - 1] = nxt;
        prev2 = prev;
        prev = nxt;
        p_lo *= d_lo;
        p_hi *= d_hi;
    }
    if ((hi - lo) * (2.0 * hi - lo) < @NARROW@) {
        double mid = (lo + hi) / 2.0 - u, half = (hi - lo) / 2.0, total = 0.0;
        double sums[4] = {0.0, 0.0, 0.0, 0.0};
        for (k = 0; k < 20; k++) {
            double y = mid + half * pmdp_gl_nodes[k];
            double w = pmdp_gl_weights[k] * exp(-y * (y + 2.0 * u) / 2.0), power = y;
            total += w;
            for (j = 0; j < 4; j++) {
                sums[j] += w * power;
                power *= y;
            }
        }
        for (j = 0; j < 4; j++) raw[j] = sums[j] / total;
    }
    double m1 = raw[0], m2 = raw[1], m3 = raw[2], m4 = raw[3];
    double sign = flip ? -1.0 : 1.0;
    o[1] = sign * (u + m1);
    o[2] = m2 - m1 * m1;
    o[3] = sign * (m3 - 3.0 * m1 * m2 + 2.0 * m1 * m1 * m1);
    o[4] = m4 - 4.0 * m1 * m3 + 6.0 * m1 * m1 * m2 - 3.0 * m1 * m1 * m1 * m1;
    /* Reflecting swapped the edges: phi(lo)/Z belongs to -beta when flipped. */
    o[5] = flip ? r_hi : r_lo;
    o[6] = flip ? r_lo : r_hi;
}
#endif
"""
_C_TEMPLATE = r"""
#ifndef PMDP_WINDOW_MOMENTS
#define PMDP_WINDOW_MOMENTS
/* (log Z, E X, c2, c3, c4, phi(alpha)/Z, phi(beta)/Z) of N(0, 1) truncated to [alpha, beta]:
   standard_window_moments line for line, with real branches (quadrature on narrow windows
   only). */
static void pmdp_window_moments(double alpha, double beta, double *o) {
    int flip = alpha + beta < 0.0, k;
    double lo = flip ? -beta : alpha, hi = flip ? -alpha : beta;
    double a = lo / 1.4142135623730951, b = hi / 1.4142135623730951;
    double expo = (a - b) * (a + b), ratio = exp(expo);
    double d = Faddeeva::erfcx(a) - ratio * Faddeeva::erfcx(b);
    if (!(d > @MIN_D@)) {
        o[0] = -INFINITY;
        for (k = 1; k < 7; k++) o[k] = 0.0;
        return;
    }
    double r_lo = @SQRT_2_OVER_PI@ / d;
    o[0] = log(0.5) - a * a + log(d);
    pmdp_window_central(flip, lo, hi, r_lo, r_lo * ratio, expm1(expo), o);
}
#endif
"""
_C_CENTRAL = _C_CENTRAL_TEMPLATE
_C_SUPPORT = _C_TEMPLATE
for _key, _value in {
    "@NODES@": ", ".join(repr(float(x)) for x in GL_NODES),
    "@WEIGHTS@": ", ".join(repr(float(x)) for x in GL_WEIGHTS),
    "@MIN_D@": repr(MIN_D),
    "@SQRT_2_OVER_PI@": repr(float(np.sqrt(2.0 / np.pi))),
    "@NARROW@": repr(NARROW),
}.items():
    _C_CENTRAL = _C_CENTRAL.replace(_key, _value)
    _C_SUPPORT = _C_SUPPORT.replace(_key, _value)
WINDOW_CENTRAL_C = _C_CENTRAL
"""The C of ``pmdp_window_central``: a window's moments from its edge densities over Z (no
special function but the quadrature's exp), shared by the kernels that find Z their own way."""
WINDOW_MOMENTS_C = _C_CENTRAL + _C_SUPPORT
"""The C of ``pmdp_window_moments`` (needs PyTensor's Faddeeva erfcx), for operations that
call it inside a larger kernel."""
_C_VERSION = (2, int(hashlib.sha256(WINDOW_MOMENTS_C.encode()).hexdigest()[:12], 16))


@pullback_op
class WindowMomentsScalar(ScalarOp):
    """:class:`WindowMomentsOp`'s forward pass as a scalar operation compiled to C.

    The C is :func:`~pymc_dp.kernels.normal_window.standard_window_moments` with real
    branches: the narrow-window quadrature, which the graph form computes for every window and
    then discards, runs only where it is taken, and the erfcx are PyTensor's own (Faddeeva).
    No gradient: the Op's polynomial is built before this replaces it.
    """

    nin = 2
    nout = 7

    def output_types(self, types: Any) -> list:  # noqa: D102
        return [float64] * self.nout

    def impl(self, alpha: float, beta: float) -> tuple:  # noqa: D102
        m = standard_window_moments(alpha, beta)
        values = (m.log_z, m.mean, *m.central, m.ratio_lo, m.ratio_hi)
        return tuple(float(v) for v in values)

    def c_header_dirs(self, **kwargs: Any) -> list:  # noqa: D102
        return [str(C_CODE_PATH)]

    def c_support_code(self, **kwargs: Any) -> str:  # noqa: D102
        # PyTensor's erfcx (Faddeeva) with the kernel; each multi-output Elemwise is a module
        # of its own, so the copy never meets the one a fused erfcx brings.
        return (C_CODE_PATH / "Faddeeva.cc").read_text(encoding="utf-8") + WINDOW_MOMENTS_C

    def c_code(self, node: Apply, name: str, inp: list, out: list, sub: dict) -> str:  # noqa: D102
        stores = " ".join(f"{o} = m[{i}];" for i, o in enumerate(out))
        return f"{{ double m[7]; pmdp_window_moments({inp[0]}, {inp[1]}, m); {stores} }}"

    def c_code_cache_version(self) -> tuple:  # noqa: D102
        return _C_VERSION

    def pullback(self, inputs: list, outputs: list, output_grads: list) -> list:  # noqa: D102
        raise NotImplementedError("differentiate WindowMomentsOp, whose gradient is closed form")

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other)

    def __hash__(self) -> int:
        return hash(type(self))


_window_moments_elemwise = Elemwise(WindowMomentsScalar(name="window_moments"))


def _cast_like(values: list, outputs: list) -> list:
    return [
        pt.cast(value, out.dtype) if value.dtype != out.dtype else value
        for value, out in zip(values, outputs)
    ]


@node_rewriter([WindowMomentsOp])
def _window_moments_as_scalar(fgraph: Any, node: Apply) -> list | None:
    """C backend: the Op's forward pass as one elementwise loop (see the module docstring)."""
    return _cast_like(_window_moments_elemwise(*node.inputs), node.outputs)


@node_rewriter([WindowMomentsOp])
def _window_moments_as_graph(fgraph: Any, node: Apply) -> list | None:
    """JAX, Numba (and PyTorch, MLX): the forward pass as a PyTensor graph (they compile no C)."""
    return _cast_like(window_moments_graph(*node.inputs), node.outputs)


# The graph form where the linker compiles no C (the C backend's queries lack these tags). The
# C loop is put in after the graph rewrites, just before fusion, for the C backend only
# ("cxx_only" is excluded by the other linkers): PyTensor 3's fact inference fails on a
# multi-output Elemwise that a rewrite's query walks through, and a late pass meets none.
optdb["specialize"].register(
    "pmdp_window_moments_as_graph", _window_moments_as_graph, "jax", "numba", "pytorch", "mlx"
)
optdb.register(
    "pmdp_window_moments_as_c",
    in2out(_window_moments_as_scalar),
    "fast_run",
    "cxx_only",
    position=47.5,
)


def window_moments(alpha: Any, beta: Any) -> list[TensorVariable]:
    """[log Z, E X, c₂, c₃, c₄, φ(α)/Z, φ(β)/Z] of N(0, 1) on [α, β] (edges clipped to ±30)."""
    clip = lambda v: pt.clip(pt.as_tensor_variable(v, dtype="float64"), -EDGE, EDGE)  # noqa: E731
    return _window_moments_op(clip(alpha), clip(beta))


def window_pair_entries(
    loc: Any, scale: Any, spec: tuple[float, float, bool, bool]
) -> tuple[TensorVariable, ...]:
    """One record's CLT entries (m₁, m₂, v₁₁, v₁₂, v₂₂) of (z, z²) on the window, elementwise.

    z ~ N(loc, scale²); ``spec`` is (v, w, lower_empty, upper_empty) of
    :meth:`NormalWindowMoments.window_spec`. The records outside the window count as zeros
    (the random-sum CLT, Prop. 1).
    """
    v, w, lower_empty, upper_empty = spec
    alpha = f64(-EDGE) if lower_empty else (v - loc) / scale
    beta = f64(EDGE) if upper_empty else (w - loc) / scale
    log_z, mean, c2, c3, c4, _, _ = window_moments(alpha, beta)
    if lower_empty and upper_empty:
        log_q = f64(0.0)
    else:
        log_q = pt.switch(pt.gt(log_z, LOG_TINY), log_z, LOG_TINY)
    # truncated_moments and joint_clt, entry by entry.
    scale_2 = pt.sqr(scale)
    ez = loc + scale * mean
    var_d = scale_2 * c2
    skew_d = scale_2 * scale * c3
    cov_12 = 2 * ez * var_d + skew_d
    var_2 = 4 * pt.sqr(ez) * var_d + 4 * ez * skew_d + pt.sqr(scale_2) * (c4 - pt.sqr(c2))
    mu_1, mu_2, s_11, s_12, s_22 = ez, pt.sqr(ez) + var_d, var_d, cov_12, var_2
    # q(Σ̂ + μ̂μ̂ᵀ) - q²μ̂μ̂ᵀ as qΣ̂ + q(1 - q)μ̂μ̂ᵀ: no q² (which PyTensor would rewrite as
    # one more exp per entry) and no cancellation when q is near 1. An empty window's
    # moments are finite (the Op reports zeros), so zero weights zero every entry, as
    # truncated_moments' zeroed μ̂ and Σ̂ do.
    empty = pt.or_(pt.le(log_q, LOG_TINY), pt.isinf(log_z))
    q = pt.switch(empty, 0.0, pt.exp(log_q))
    spread = pt.switch(empty, 0.0, q * -pt.expm1(log_q))
    return (
        q * mu_1,
        q * mu_2,
        q * s_11 + spread * mu_1 * mu_1,
        q * s_12 + spread * mu_1 * mu_2,
        q * s_22 + spread * mu_2 * mu_2,
    )


class NormalWindowMoments:
    """Closed-form truncated-normal window moments for the Normal families.

    Overrides the autodiff of the truncated log-partition (Lemma 1) by :class:`WindowMomentsOp`.
    A family using it provides ``_location_scale_of(θ) -> (loc, scale)`` of its latent normal.
    """

    def _location_scale_of(self, theta: TensorVariable) -> tuple[TensorVariable, Any]:
        raise NotImplementedError

    def location_scale(self, theta: Any) -> tuple[Any, Any]:
        """(loc, scale) of the latent normal of θ (θ's components, as a sequence or stack)."""
        return self._location_scale_of(theta)

    def window_spec(self, bounds: tuple[float, float]) -> tuple[float, float, bool, bool]:
        """Latent window edges (v, w) and whether the lower and upper windows are empty."""
        v, w = self.window_edges(bounds)
        zlo, zhi = self._latent_domain()
        return v, w, bool(v < zlo or (v == zlo and not self.discrete)), bool(w >= zhi)

    def pair_window_entries(
        self, theta_parts: Sequence[Any], bounds: tuple[float, float]
    ) -> tuple[TensorVariable, ...]:
        """One record's CLT entries (m₁, m₂, v₁₁, v₁₂, v₂₂) of the window's (z, z²), elementwise.

        ``theta_parts`` are θ's components (μ, σ²) as tensors of any broadcastable shapes
        (one entry per group, or shared): the same numbers as :meth:`joint_clt`'s ŝ block with
        n = 1, written as one elementwise expression, so that a grouped model's gradient has no
        stacking of θ or of the entries (Join, Split and IncSubtensor nodes that cost more than
        the arithmetic).
        """
        loc, scale = self._location_scale_of(theta_parts)
        return window_pair_entries(loc, scale, self.window_spec(bounds))

    def truncated_moments(
        self,
        theta: TensorVariable,
        bounds: tuple[float, float],
        windows: tuple[str, ...] = ("lower", "centre", "upper"),
    ) -> list[tuple[TensorVariable, TensorVariable, TensorVariable]]:
        """(log q, μ̂, Σ̂) of t on the lower, centre and upper windows (Lemma 1, closed form).

        For z = loc + scale·X with X standard normal on the window, d = z - E z:
        μ̂ = (E z, E z²) and Σ̂ from Var d, E d³ and E d⁴ (t = z uses the first entries only).
        """
        loc, scale = self._location_scale_of(theta)
        k = self.stat_size
        v, w = self.window_edges(bounds)
        zlo, zhi = self._latent_domain()
        lower_empty = v < zlo or (v == zlo and not self.discrete)
        upper_empty = w >= zhi
        spans = {
            "lower": None if lower_empty else (-np.inf, v),
            "centre": (-np.inf if lower_empty else v, np.inf if upper_empty else w),
            "upper": None if upper_empty else (w, np.inf),
        }
        out = []
        for name in windows:
            span = spans[name]
            if span is None:
                out.append((f64(-np.inf), pt.zeros(k), pt.zeros((k, k))))
                continue
            lo, hi = ((e - loc) / scale if np.isfinite(e) else None for e in span)
            alpha = f64(-EDGE) if lo is None else lo
            beta = f64(EDGE) if hi is None else hi
            log_z, mean, c2, c3, c4, _, _ = window_moments(alpha, beta)
            # The tails' log mass exactly as window_log_masses computes it.
            if name == "lower":
                log_q = normal_log_cdf(hi)
            elif name == "upper":
                log_q = normal_log_cdf(-lo)
            elif lo is None and hi is None:
                log_q = f64(0.0)
            else:
                log_q = pt.switch(pt.gt(log_z, LOG_TINY), log_z, LOG_TINY)
            ez = loc + scale * mean
            var_d = scale**2 * c2
            if k == 1:
                mu = pt.stack([ez])
                sigma = pt.reshape(var_d, (1, 1))
            else:
                skew_d = scale**3 * c3
                cov_12 = 2 * ez * var_d + skew_d
                var_2 = 4 * pt.sqr(ez) * var_d + 4 * ez * skew_d + scale**4 * (c4 - pt.sqr(c2))
                mu = pt.stack([ez, pt.sqr(ez) + var_d])
                sigma = pt.stack([pt.stack([var_d, cov_12]), pt.stack([cov_12, var_2])])
            empty = pt.or_(pt.le(log_q, LOG_TINY), pt.isinf(log_z))
            mu = pt.switch(empty, 0.0, mu)
            sigma = pt.switch(empty, 0.0, sigma)
            out.append((log_q, mu, sigma))
        return out
