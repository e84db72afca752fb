"""The Poisson window's mass and edge probabilities as one compiled elementwise operation.

The windowed Poisson's CLT needs, for each θ = e^η, the mass q = P(lo ≤ X ≤ hi) of the window
{lo, ..., hi} and the two edge probabilities ρ_l = P(X = lo - 1)/q and ρ_h = P(X = hi)/q, from
which :meth:`~pymc_dp.families.Poisson.truncated_moments` writes μ̂ and Σ̂ in closed form. As a
PyTensor graph q is an incomplete gamma function, its log and its derivative, and each ρ an exp
of its own: about 70 scalar operations and 13 special functions per group for logp and gradient,
more than the normal–Laplace convolution itself. Here :class:`PoissonWindowOp` has the three
outputs, and a gradient that is a short expression in them (all orders), since
d P(X ≤ k)/dλ = -P(X = k) and d P(X = k)/dη = P(X = k)(k - λ)::

    d log q/dη = λ(ρ_l - ρ_h),   dρ_k/dη = ρ_k (k - μ̂),   μ̂ = λ(1 - ρ_h + ρ_l).

When a function is compiled, a rewrite replaces the forward pass by compiled code: for PyTensor's
C backend one elementwise loop (:class:`PoissonWindowScalar`: one exp for λ, one per edge
probability, and the two tails as short series of ratios, λ/(k + j) above the mode and
(k - j)/λ below it, each term smaller than the last, so every sum is of positive terms), for
Numba (nutpie) the same algorithm in Python (:func:`_poisson_window_core`) compiled by Numba with
a cache key, and for JAX, PyTorch and MLX (or a PyTensor without cache-keyed Numba dispatch) the
graph of :func:`poisson_window_graph` (the incomplete gamma functions, as before). All give
the same function as that graph: a window that holds less than 10⁻¹⁰ of
the mass gets log q = -100 (:data:`~pymc_dp.families.truncated.LOG_TINY`) and ρ = 0.
"""

from __future__ import annotations

import functools
import hashlib
import math
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
from pytensor.tensor.elemwise import Elemwise
from pytensor.tensor.variable import TensorVariable
from scipy import special, stats

from pymc_dp._compat import pullback_op
from pymc_dp.families.truncated import LOG_TINY, f64, guarded_log, log1mexp, logaddexp
from pymc_dp.kernels.numba_mirror import NUMBA_OPTIONS, compile_mirror, mirror_key

__all__ = [
    "MIRROR_HELPERS",
    "POISSON_WINDOW_C",
    "PoissonWindowOp",
    "PoissonWindowScalar",
    "log_factorials",
    "poisson_window",
    "poisson_window_core",
    "poisson_window_graph",
    "poisson_window_parts",
    "window_edges",
]

EMPTY = 1e-10
"""A window with q below this holds no records (as ``window_log_masses``' clamp)."""


def window_edges(lo: float, hi: float) -> tuple[float, float]:
    """The window {lo, ..., hi} as floats, lo clipped at 0; ValueError unless integer edges."""
    lo, hi = float(lo), float(hi)
    if lo != math.floor(lo) or not (math.isinf(hi) or hi == math.floor(hi)) or hi < lo:
        raise ValueError(f"the Poisson window needs integer edges lo <= hi, got ({lo}, {hi})")
    return max(lo, 0.0), hi


def poisson_window_graph(eta: Any, lo: float, hi: float) -> list[TensorVariable]:
    """[log q, ρ_l, ρ_h] of the window {lo, ..., hi} as a PyTensor graph (any backend).

    The graph ``window_log_masses`` and ``truncated_moments`` built before the compiled form:
    log q from the two incomplete gamma tails, each ρ from the log pmf.
    """
    lo, hi = window_edges(lo, hi)
    eta = pt.as_tensor_variable(eta, dtype="float64")
    lam = pt.exp(eta)
    log_l = guarded_log(pt.gammaincc(f64(lo), lam)) if lo > 0 else None
    log_u = guarded_log(pt.gammainc(f64(hi + 1.0), lam)) if np.isfinite(hi) else None
    if log_l is None and log_u is None:
        return [pt.zeros_like(eta), pt.zeros_like(eta), pt.zeros_like(eta)]
    outside = log_u if log_l is None else log_l if log_u is None else logaddexp(log_l, log_u)
    held = outside < -EMPTY
    log_q = pt.switch(held, log1mexp(pt.switch(held, outside, -1.0)), LOG_TINY)

    def rho(k: float) -> TensorVariable:
        return pt.switch(held, pt.exp(k * eta - lam - float(special.gammaln(k + 1.0)) - log_q), 0.0)

    zero = pt.zeros_like(eta)
    return [log_q, rho(lo - 1.0) if lo > 0 else zero, rho(hi) if np.isfinite(hi) else zero]


def _numpy_window(eta: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, ...]:
    """The same three numbers with SciPy (the Op's ``perform``, and the tests' reference)."""
    eta = np.asarray(eta, dtype=np.float64)
    lam = np.exp(eta)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        lower = special.pdtr(lo - 1.0, lam) if lo > 0 else np.zeros_like(lam)
        upper = special.pdtrc(hi, lam) if np.isfinite(hi) else np.zeros_like(lam)
        # Each tail clamped at e^-100, as guarded_log does in the graph.
        tiny = math.exp(LOG_TINY)
        if lo > 0:
            lower = np.maximum(lower, tiny)
        if np.isfinite(hi):
            upper = np.maximum(upper, tiny)
        outside = lower + upper
        q = np.array(1.0 - outside, dtype=np.float64)
        if np.isfinite(hi):  # most of the mass outside: sum q over the window instead
            far = np.flatnonzero(outside > 0.5)
            ks = np.arange(lo, hi + 1.0)
            q.flat[far] = [stats.poisson(m).pmf(ks).sum() for m in np.ravel(lam)[far]]
        elif lo > 0:
            q = np.array(special.pdtrc(lo - 1.0, lam), dtype=np.float64)
        held = q > EMPTY
        log_q = np.where(held, np.log(np.where(held, q, 1.0)), LOG_TINY)

        def rho(k: float) -> np.ndarray:
            pmf = np.exp(k * eta - lam - special.gammaln(k + 1.0)) if k > 0 else np.exp(-lam)
            return np.where(held, pmf / q, 0.0)

        rho_l = rho(lo - 1.0) if lo > 0 else np.zeros_like(lam)
        rho_h = rho(hi) if np.isfinite(hi) else np.zeros_like(lam)
    return log_q, rho_l, rho_h


@pullback_op
class PoissonWindowOp(Op):
    """[log q, ρ_l, ρ_h] of Poisson(e^η) on the window {lo, ..., hi}, elementwise in η.

    Use :func:`poisson_window` to call it; see the module docstring for the gradient.
    """

    __props__ = ("lo", "hi")

    def __init__(self, lo: float, hi: float):
        self.lo, self.hi = window_edges(lo, hi)

    def make_node(self, eta: Any) -> Apply:  # noqa: D102
        eta = pt.as_tensor_variable(eta, dtype="float64")
        out_type = pt.TensorType("float64", shape=eta.type.shape)
        return Apply(self, [eta], [out_type() for _ in range(3)])

    def perform(self, node: Apply, inputs: list, output_storage: list) -> None:  # noqa: D102
        for storage, value in zip(output_storage, _numpy_window(inputs[0], self.lo, self.hi)):
            storage[0] = np.asarray(value, dtype=np.float64)

    def pullback(self, inputs: list, outputs: list, output_grads: list) -> list:  # noqa: D102
        (eta,) = inputs
        log_q, rho_l, rho_h = outputs
        lam = pt.exp(eta)
        mean = lam * (1.0 - rho_h + rho_l)
        # An empty window's outputs are constants (log q clamped, ρ = 0).
        held = log_q > LOG_TINY
        partials = (
            pt.switch(held, lam * (rho_l - rho_h), 0.0),
            rho_l * (self.lo - 1.0 - mean),
            rho_h * (self.hi - mean) if np.isfinite(self.hi) else pt.zeros_like(eta),
        )
        total = pt.zeros_like(eta)
        for g, partial in zip(output_grads, partials):
            if not isinstance(g.type, DisconnectedType):
                total = total + g * partial
        return [total]


@_vectorize_node.register(PoissonWindowOp)
def _vectorize_poisson_window(op: PoissonWindowOp, node: Apply, *batched_inputs: Any) -> Any:
    return op.make_node(*batched_inputs).outputs


_C_TEMPLATE = r"""
#ifndef PMDP_POISSON_WINDOW
#define PMDP_POISSON_WINDOW
#include <math.h>
static double pmdp_poisson_below(double k, double lam, double pk, double tol);
/* P(X >= k) of X ~ Poisson(lam) given pk = P(X = k), k >= 1. Above the mode the terms
   p_{k+j} = pk prod lam/(k+i) decrease, so the sum stops when a term adds less than 1e-17 of
   the sum or less than tol in all (a tail that only enters 1 - tail needs no more); below the
   mode the complement is the (smaller) lower tail. */
static double pmdp_poisson_above(double k, double lam, double pk, double tol) {
    if (lam < k) {
        double t = 1.0, s = 1.0, j, stop = pk > 0.0 ? tol / pk : INFINITY;
        for (j = 1.0; t > 1e-17 * s && t > stop; j += 1.0) {
            t *= lam / (k + j);
            s += t;
        }
        return pk * s;
    }
    return 1.0 - pmdp_poisson_below(k - 1.0, lam, pk * k / lam, 1e-18);
}
/* P(X <= k) given pk, k >= 0: p_{k-j} = pk prod (k-i)/lam below the mode (at most k terms). */
static double pmdp_poisson_below(double k, double lam, double pk, double tol) {
    if (lam > k) {
        double t = 1.0, s = 1.0, j, stop = pk > 0.0 ? tol / pk : INFINITY, inv = 1.0 / lam;
        for (j = 0.0; j < k && t > 1e-17 * s && t > stop; j += 1.0) {
            t *= (k - j) * inv;
            s += t;
        }
        return pk * s;
    }
    return 1.0 - pmdp_poisson_above(k + 1.0, lam, pk * lam / (k + 1.0), 1e-18);
}
/* q, 1 - q, rho_l, rho_h and (with want_log) log q of the window {lo..hi} (lo >= 0; hi = inf for
   none); lg_l and lg_h are log (lo-1)! and log hi!. Returns whether the window holds mass
   (q > EMPTY); where it does not, o = {e^LOG_TINY, 1, 0, 0, LOG_TINY}. A kernel that needs q
   and 1 - q takes them here, not back from log q (a log1p, exp and expm1 a group: about 8% of
   the window sum's kernel, docs/scale.md). */
static int pmdp_poisson_window_parts(double eta, double lo, double hi, double lg_l, double lg_h,
                                     int want_log, double *o) {
    double lam = exp(eta), tiny = @TINY@, outside = 0.0, pl = 0.0, ph = 0.0;
    if (lo > 0.0) {
        double l = lo - 1.0;
        pl = l > 0.0 ? exp(l * eta - lam - lg_l) : exp(-lam);
        double lower = lam > 0.0 ? pmdp_poisson_below(l, lam, pl, 1e-18) : 1.0;
        outside += lower > tiny ? lower : tiny;
    }
    if (isfinite(hi)) {
        ph = hi > 0.0 ? exp(hi * eta - lam - lg_h) : exp(-lam);
        double upper =
            lam > 0.0 ? pmdp_poisson_above(hi + 1.0, lam, ph * lam / (hi + 1.0), 1e-18) : 0.0;
        outside += upper > tiny ? upper : tiny;
    }
    double q = 1.0 - outside, out = outside, log_q = want_log ? log1p(-outside) : 0.0;
    if (!isfinite(hi) && lo > 0.0 && lam > 0.0) {
        /* No upper edge: q is the upper tail itself, with no cancellation. */
        q = pmdp_poisson_above(lo, lam, pl * lam / lo, 0.0);
        out = 1.0 - q;
        log_q = want_log ? log(q) : 0.0;
    } else if (outside > 0.5 && isfinite(hi) && lam > 0.0) {
        /* Most of the mass outside: 1 - outside would keep 1e-16/q of q, so q is summed over
           the window instead, from its end nearer the mode (terms decrease away from it). */
        double t, s, k;
        if (lam <= lo) {
            t = s = lo > 0.0 ? pl * lam / lo : exp(-lam);
            for (k = lo + 1.0; k <= hi && t > 1e-17 * s; k += 1.0) {
                t *= lam / k;
                s += t;
            }
        } else {
            t = s = ph;
            for (k = hi; k > lo && (k > lam || t > 1e-17 * s); k -= 1.0) {
                t *= k / lam;
                s += t;
            }
        }
        q = s;
        out = 1.0 - s;
        log_q = want_log ? log(s) : 0.0;
    }
    if (!(q > @EMPTY@)) {
        o[0] = @TINY@;
        o[1] = 1.0;
        o[2] = o[3] = 0.0;
        o[4] = @LOG_TINY@;
        return 0;
    }
    o[0] = q;
    o[1] = out;
    o[2] = pl / q;
    o[3] = ph / q;
    o[4] = log_q;
    return 1;
}
/* log q, rho_l, rho_h of the window (pmdp_poisson_window_parts). */
static void pmdp_poisson_window(double eta, double lo, double hi, double lg_l, double lg_h,
                                double *o) {
    double p[5];
    pmdp_poisson_window_parts(eta, lo, hi, lg_l, lg_h, 1, p);
    o[0] = p[4];
    o[1] = p[2];
    o[2] = p[3];
}
#endif
"""
_C_SUPPORT = (
    _C_TEMPLATE.replace("@TINY@", repr(math.exp(LOG_TINY)))
    .replace("@EMPTY@", repr(EMPTY))
    .replace("@LOG_TINY@", repr(LOG_TINY))
)
_C_VERSION = (1, int(hashlib.sha256(_C_SUPPORT.encode()).hexdigest()[:12], 16))
POISSON_WINDOW_C = _C_SUPPORT
"""The C of ``pmdp_poisson_window(eta, lo, hi, lg_l, lg_h, o)``, for kernels that call it."""


# ---- the same algorithm in Python (Numba compiles it; the tests compare it with the C) --------
def _above_series(k: float, lam: float, pk: float, tol: float) -> float:
    t = s = 1.0
    stop = tol / pk if pk > 0.0 else math.inf
    j = 1.0
    while t > 1e-17 * s and t > stop:
        t *= lam / (k + j)
        s += t
        j += 1.0
    return pk * s


def _below_series(k: float, lam: float, pk: float, tol: float) -> float:
    t = s = 1.0
    stop = tol / pk if pk > 0.0 else math.inf
    inv = 1.0 / lam
    j = 0.0
    while j < k and t > 1e-17 * s and t > stop:
        t *= (k - j) * inv
        s += t
        j += 1.0
    return pk * s


# The C's two tails call each other once; here each calls the other's series directly (Numba's
# cache cannot link mutually recursive functions).
def _above(k: float, lam: float, pk: float, tol: float) -> float:
    if lam < k:
        return _above_series(k, lam, pk, tol)
    return 1.0 - _below_series(k - 1.0, lam, pk * k / lam, 1e-18)


def _below(k: float, lam: float, pk: float, tol: float) -> float:
    if lam > k:
        return _below_series(k, lam, pk, tol)
    return 1.0 - _above_series(k + 1.0, lam, pk * lam / (k + 1.0), 1e-18)


def _poisson_window_parts(
    eta: float, lo: float, hi: float, lg_l: float, lg_h: float, want_log: bool
) -> tuple[float, float, float, float, float, bool]:
    """``pmdp_poisson_window_parts`` line for line.

    Returns (q, 1 − q, ρ_l, ρ_h, log q (0 without ``want_log``), whether the window holds mass).
    """
    lam = math.exp(eta)
    tiny = math.exp(-100.0)
    outside = pl = ph = 0.0
    if lo > 0.0:
        low = lo - 1.0
        pl = math.exp(low * eta - lam - lg_l) if low > 0.0 else math.exp(-lam)
        lower = _below(low, lam, pl, 1e-18) if lam > 0.0 else 1.0
        outside += max(lower, tiny)
    if math.isfinite(hi):
        ph = math.exp(hi * eta - lam - lg_h) if hi > 0.0 else math.exp(-lam)
        upper = _above(hi + 1.0, lam, ph * lam / (hi + 1.0), 1e-18) if lam > 0.0 else 0.0
        outside += max(upper, tiny)
    q, out = 1.0 - outside, outside
    log_q = 0.0
    if want_log:
        log_q = math.log1p(-outside) if outside < 1.0 else -math.inf
    if not math.isfinite(hi) and lo > 0.0 and lam > 0.0:
        q = _above(lo, lam, pl * lam / lo, 0.0)
        out = 1.0 - q
        if want_log:
            log_q = math.log(q) if q > 0.0 else -math.inf
    elif outside > 0.5 and math.isfinite(hi) and lam > 0.0:
        if lam <= lo:
            t = s = pl * lam / lo if lo > 0.0 else math.exp(-lam)
            k = lo + 1.0
            while k <= hi and t > 1e-17 * s:
                t *= lam / k
                s += t
                k += 1.0
        else:
            t = s = ph
            k = hi
            while k > lo and (k > lam or t > 1e-17 * s):
                t *= k / lam
                s += t
                k -= 1.0
        q, out = s, 1.0 - s
        if want_log:
            log_q = math.log(s) if s > 0.0 else -math.inf
    if not q > 1e-10:
        return (tiny, 1.0, 0.0, 0.0, -100.0, False)
    return (q, out, pl / q, ph / q, log_q, True)


def _poisson_window_core(
    eta: float, lo: float, hi: float, lg_l: float, lg_h: float
) -> tuple[float, float, float]:
    """[log q, ρ_l, ρ_h]: the C's ``pmdp_poisson_window`` line for line."""
    parts = _poisson_window_parts(eta, lo, hi, lg_l, lg_h, True)
    return (parts[4], parts[2], parts[3])


def _log_factorials(lo: float, hi: float) -> tuple[float, float]:
    """Log (lo - 1)! and log hi! (0 where unused), the C's constants."""
    lg_l = float(special.gammaln(lo)) if lo > 1 else 0.0
    lg_h = float(special.gammaln(hi + 1.0)) if np.isfinite(hi) else 0.0
    return lg_l, lg_h


poisson_window_core = _poisson_window_core
"""The mirror's core, (log q, ρ_l, ρ_h) given (η, lo, hi, log (lo - 1)!, log hi!)."""
poisson_window_parts = _poisson_window_parts
"""The mirror's (q, 1 − q, ρ_l, ρ_h, log q, held) given the core's inputs and ``want_log``."""
log_factorials = _log_factorials


@pullback_op
class PoissonWindowScalar(ScalarOp):
    """:class:`PoissonWindowOp`'s forward pass as a scalar operation compiled to C.

    No gradient: the Op's expression is built before this replaces it.
    """

    nin = 1
    nout = 3

    def __init__(self, lo: float, hi: float, name: str | None = None):
        super().__init__(name=name)
        self.lo, self.hi = window_edges(lo, hi)

    def output_types(self, types: Any) -> list:  # noqa: D102
        return [float64] * self.nout

    def impl(self, eta: float) -> tuple:  # noqa: D102
        return tuple(float(v) for v in _numpy_window(np.float64(eta), self.lo, self.hi))

    def c_support_code(self, **kwargs: Any) -> str:  # noqa: D102
        return _C_SUPPORT

    def c_code(self, node: Apply, name: str, inp: list, out: list, sub: dict) -> str:  # noqa: D102
        lg_l, lg_h = _log_factorials(self.lo, self.hi)
        hi = repr(self.hi) if np.isfinite(self.hi) else "INFINITY"
        args = f"{inp[0]}, {self.lo!r}, {hi}, {lg_l!r}, {lg_h!r}"
        stores = " ".join(f"{o} = m[{i}];" for i, o in enumerate(out))
        return f"{{ double m[3]; pmdp_poisson_window({args}, m); {stores} }}"

    def c_code_cache_version(self) -> tuple:  # noqa: D102
        return _C_VERSION

    def pullback(self, inputs: list, outputs: list, output_grads: list) -> list:  # noqa: D102
        raise NotImplementedError("differentiate PoissonWindowOp, whose gradient is closed form")

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and (self.lo, self.hi) == (other.lo, other.hi)

    def __hash__(self) -> int:
        return hash((type(self), self.lo, self.hi))


def _cast_like(values: list, outputs: list) -> list:
    return [
        pt.cast(value, out.dtype) if value.dtype != out.dtype else value
        for value, out in zip(values, outputs)
    ]


@node_rewriter([PoissonWindowOp])
def _poisson_window_as_scalar(fgraph: Any, node: Apply) -> list | None:
    """C backend: the forward pass as one elementwise loop."""
    op = node.op
    scalar = Elemwise(PoissonWindowScalar(op.lo, op.hi, name="poisson_window"))
    return _cast_like(scalar(*node.inputs), node.outputs)


@node_rewriter([PoissonWindowOp])
def _poisson_window_as_graph(fgraph: Any, node: Apply) -> list | None:
    """JAX, Numba, PyTorch, MLX: the forward pass as the incomplete-gamma graph."""
    return _cast_like(poisson_window_graph(node.inputs[0], node.op.lo, node.op.hi), node.outputs)


MIRROR_HELPERS = (
    "_above_series",
    "_below_series",
    "_above",
    "_below",
    "_poisson_window_parts",
    "_poisson_window_core",
)
"""The mirror's functions in the order ``compile_mirror`` compiles them (the core last)."""
_NUMBA_KEY = mirror_key(globals(), MIRROR_HELPERS)


@functools.cache
def _numba_core() -> Any:
    """:func:`_poisson_window_core` compiled by Numba (IEEE, as the C), helpers compiled too."""
    return compile_mirror(globals(), MIRROR_HELPERS, "_poisson_window_core")


def _register_numba() -> bool:
    """Give the scalar operation a cache-keyed Numba implementation; False where impossible."""
    try:
        from pytensor.link.numba.dispatch import basic as numba_basic
        from pytensor.link.numba.dispatch.basic import register_funcify_and_cache_key
    except ImportError:  # no Numba, or a PyTensor without cache-keyed Numba dispatch
        return False

    @register_funcify_and_cache_key(PoissonWindowScalar)
    def _window_numba(op: Any, node: Apply, **kwargs: Any) -> tuple[Any, str]:
        core = _numba_core()
        lo, hi = op.lo, op.hi
        lg_l, lg_h = _log_factorials(lo, hi)

        @numba_basic.numba_njit(**NUMBA_OPTIONS)
        def poisson_window(eta):
            return core(eta, lo, hi, lg_l, lg_h)

        return poisson_window, f"pmdp_poisson_window_{lo!r}_{hi!r}_{_NUMBA_KEY}"

    return True


# As for the Normal window's moments (normal_window.py): the graph form where the linker compiles
# neither C nor (with a PyTensor that takes one) this Numba implementation, and the loop put in
# late, just before fusion (PyTensor 3's fact inference fails on a multi-output Elemwise that a
# rewrite's query walks through).
_HAS_NUMBA = _register_numba()
optdb["specialize"].register(
    "pmdp_poisson_window_as_graph",
    _poisson_window_as_graph,
    *(("jax", "pytorch", "mlx") if _HAS_NUMBA else ("jax", "numba", "pytorch", "mlx")),
)
optdb.register(
    "pmdp_poisson_window_as_c",
    in2out(_poisson_window_as_scalar),
    "fast_run",
    "cxx_only",
    position=47.5,
)
if _HAS_NUMBA:
    optdb.register(
        "pmdp_poisson_window_as_numba", in2out(_poisson_window_as_scalar), "numba", position=47.5
    )


def poisson_window(eta: Any, lo: float, hi: float) -> list[TensorVariable]:
    """[log q, ρ_l, ρ_h] of Poisson(e^η) on {lo, ..., hi} (hi may be inf), elementwise.

    Examples
    --------
    >>> import numpy as np
    >>> log_q, rho_l, rho_h = poisson_window(np.log(5.0), 0, 10)
    >>> from scipy import stats
    >>> bool(np.isclose(np.exp(log_q.eval()), stats.poisson(5.0).cdf(10)))
    True
    """
    return PoissonWindowOp(lo, hi)(eta)
