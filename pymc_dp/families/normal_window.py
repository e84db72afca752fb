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

When a function is compiled for PyTensor's default (C), JAX or Numba backends, a rewrite replaces
the Op by the same kernel written as a PyTensor graph (:func:`window_moments_graph`): the forward
pass is then fused C (or JAX, or Numba) code rather than a Python call of about 120 µs, while the
gradient, built symbolically before any rewrite, is still the Op's short polynomial.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.graph.replace import _vectorize_node
from pytensor.graph.rewriting.basic import node_rewriter
from pytensor.tensor.rewriting.basic import register_specialize
from pytensor.tensor.variable import TensorVariable

from pymc_dp.families.truncated import LOG_TINY, f64, normal_log_cdf
from pymc_dp.kernels.normal_window import (
    EDGE,
    GL_NODES,
    GL_WEIGHTS,
    MIN_D,
    NARROW,
    standard_window_moments,
)

__all__ = ["NormalWindowMoments", "WindowMomentsOp", "window_moments", "window_moments_graph"]


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

    def L_op(self, inputs: list, outputs: list, output_grads: list) -> list:  # noqa: D102
        # PyTensor 2 calls L_op; PyTensor 3 calls pullback.
        return self.pullback(inputs, outputs, output_grads)

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
    d_raw = pt.erfcx(a) - ratio * pt.erfcx(b)
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


@register_specialize
@node_rewriter([WindowMomentsOp])
def _window_moments_as_graph(fgraph: Any, node: Apply) -> list | None:
    """Compile the Op's forward pass as a graph (see the module docstring)."""
    return [
        pt.cast(value, out.dtype) if value.dtype != out.dtype else value
        for value, out in zip(window_moments_graph(*node.inputs), node.outputs)
    ]


def window_moments(alpha: Any, beta: Any) -> list[TensorVariable]:
    """[log Z, E X, c₂, c₃, c₄, φ(α)/Z, φ(β)/Z] of N(0, 1) on [α, β] (edges clipped to ±30)."""
    clip = lambda v: pt.clip(pt.as_tensor_variable(v, dtype="float64"), -EDGE, EDGE)  # noqa: E731
    return _window_moments_op(clip(alpha), clip(beta))


class NormalWindowMoments:
    """Closed-form truncated-normal window moments for the Normal families.

    Overrides the autodiff of the truncated log-partition (Lemma 1) by :class:`WindowMomentsOp`.
    A family using it provides ``_location_scale_of(θ) -> (loc, scale)`` of its latent normal.
    """

    def _location_scale_of(self, theta: TensorVariable) -> tuple[TensorVariable, Any]:
        raise NotImplementedError

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
