"""A grouped windowed Poisson release with its window counts: both log densities as one kernel.

Each group's release is y = (window sum, window count) with Laplace noise (b₁, b₂); the node
(:func:`~pymc_dp.model.nodes.counted.grouped_counted_y`) keeps the window sum ŝ₁ a model
variable (u, with ŝ₁ = c + d·u, :func:`~pymc_dp.likelihoods.collapsed_pair.first_statistic`) and
integrates the count given it (:func:`~pymc_dp.likelihoods.collapsed_pair.given_first_logp`).
Per group that is: the Poisson window's mass and edge probabilities at η = log λ
(:func:`~pymc_dp.families.poisson_window.poisson_window`), the truncated moments
(:meth:`~pymc_dp.families.Poisson.truncated_moments`), the CLT entries of (sum, count)
(:meth:`~pymc_dp.families.TruncatedFamily.counted_clt`), u's density and y's. As a graph with
autodiff that is about a hundred nodes per call (the counted CLT vectorised over the groups by
``vectorize_graph``, with its stacks and indexing, two window operations, the convolution), 5.7×
the hand-written latent model. Here one scalar kernel computes both log densities and their
derivatives in (u, η) by forward-mode differentiation: the window's three numbers come from
``pmdp_poisson_window``, their η-derivatives in closed form (d log q/dη = λ(ρ_l − ρ_h),
dρ_k/dη = ρ_k(k − μ̂), as :class:`~pymc_dp.families.poisson_window.PoissonWindowOp`), carried
as (value, ∂/∂η) pairs through the CLT entries (:func:`poisson_window_entries`), and the
densities given the entries from ``pmdp_pair_given_entries``, the windowed Normal pair's
(:mod:`~pymc_dp.likelihoods.pair_window`). NUTS's logp-and-gradient graph holds one
elementwise loop over the groups.

Backends as :mod:`~pymc_dp.likelihoods.pair_window`: C (the kernel below), Numba (the Python
mirror :func:`counted_poisson_scalar`, compiled; PyTensor 3's default and nutpie), and for JAX
(numpyro, blackjax) a rewrite back to the graph of the pieces (:func:`counted_poisson_graph`)
and its autodiff.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType, grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.scalar.basic import ScalarOp, float64
from pytensor.tensor.elemwise import Elemwise
from pytensor.tensor.variable import TensorVariable

from pymc_dp._compat import pullback_op
from pymc_dp.families import poisson_window as _pw
from pymc_dp.families.counts import poisson_window_moments
from pymc_dp.kernels.numba_mirror import compile_mirror, mirror_key
from pymc_dp.likelihoods import normal_laplace as _nl
from pymc_dp.likelihoods import pair_window as _pair
from pymc_dp.likelihoods.collapsed import as_float64
from pymc_dp.likelihoods.collapsed_pair import (
    conditional_second,
    first_statistic_logp,
    first_statistic_map,
    given_first_logp,
)
from pymc_dp.likelihoods.fused_graphs import register_fused_kernel
from pymc_dp.likelihoods.pair_window import pair_given_entries, released_columns
from pymc_dp.likelihoods.xla_kernels import XlaKernel

__all__ = [
    "CountedPoissonGrad",
    "CountedPoissonLogp",
    "PoissonWindowKernel",
    "counted_poisson_entries",
    "counted_poisson_graph",
    "counted_poisson_logp",
    "counted_poisson_model",
    "counted_poisson_scalar",
    "counted_window_spec",
    "poisson_window_entries",
]

_C_KERNEL = r"""
#ifndef PMDP_COUNTED_POISSON
#define PMDP_COUNTED_POISSON
/* e[2k], e[2k + 1] = the value and eta-derivative of n(m1, m2, v11, v12, v22)[k], the CLT
   entries of (window sum, window count): counted_poisson_entries. Plain pairs rather than
   duals: a dual's unused slots would cost products by zero that IEEE arithmetic keeps. */
static void pmdp_poisson_window_entries(double eta, double n, double lo, double hi, double lg_l,
                                        double lg_h, double *e) {
    double w[5];
    int held = pmdp_poisson_window_parts(eta, lo, hi, lg_l, lg_h, 0, w), finite = isfinite(hi);
    double lam = exp(eta), mean0 = lam * (1.0 - w[3] + w[2]);
    double dlog_q = held ? lam * (w[2] - w[3]) : 0.0;
    double mean = lam, dmean = lam, second = lam * lam, dsecond = 2.0 * lam * lam;
    if (finite) {
        double rho = w[3], drho = w[3] * (hi - mean0), top = lam * (lam + hi);
        mean -= lam * rho;
        dmean -= lam * (rho + drho);
        second -= rho * top;
        dsecond -= drho * top + rho * lam * (2.0 * lam + hi);
    }
    if (lo > 0.0) {
        double rho = w[2], drho = w[2] * (lo - 1.0 - mean0), top = lam * (lam + lo - 1.0);
        mean += lam * rho;
        dmean += lam * (rho + drho);
        second += rho * top;
        dsecond += drho * top + rho * lam * (2.0 * lam + lo - 1.0);
    }
    double var = second + mean - mean * mean, dvar = dsecond + dmean - 2.0 * mean * dmean;
    if (!held) mean = dmean = var = dvar = 0.0;
    double q = w[0], dq = q * dlog_q, out = w[1], dout = -dq;
    double qm = q * mean, dqm = dq * mean + q * dmean;
    double qo = q * out, dqo = dq * out + q * dout;
    double t = var + mean * mean, dt = dvar + 2.0 * mean * dmean;
    e[0] = n * qm;
    e[1] = n * dqm;
    e[2] = n * q;
    e[3] = n * dq;
    e[4] = n * (q * t - qm * qm);
    e[5] = n * (dq * t + q * dt - 2.0 * qm * dqm);
    e[6] = n * qo * mean;
    e[7] = n * (dqo * mean + qo * dmean);
    e[8] = n * qo;
    e[9] = n * dqo;
}
/* o[0..3]: d lp_u/d(u, eta), d lp_y/d(u, eta) (with grad); o[4] = lp_u, o[5] = lp_y:
   counted_poisson_entries, then pmdp_pair_given_entries. Duals carry (u, eta, unused). */
static void pmdp_counted_poisson(double u, double eta, double n, double y1, double y2,
                                 double b1, double b2, double lo, double hi, double lg_l,
                                 double lg_h, int grad, double *o) {
    pmdp_dual uu = {u, 1.0, 0.0, 0.0}, d[5];
    double e[10];
    int k;
    pmdp_poisson_window_entries(eta, n, lo, hi, lg_l, lg_h, e);
    for (k = 0; k < 5; k++) {
        pmdp_dual entry = {e[2 * k], 0.0, e[2 * k + 1], 0.0};
        d[k] = entry;
    }
    pmdp_dual lp_u, lp_y;
    pmdp_pair_given_entries(uu, d[0], d[1], d[2], d[3], d[4], y1, y2, b1, b2, grad, &lp_u,
                            &lp_y);
    if (grad) {
        o[0] = lp_u.du; o[1] = lp_u.dl;
        o[2] = lp_y.du; o[3] = lp_y.dl;
    }
    o[4] = lp_u.v;
    o[5] = lp_y.v;
}
#endif
"""
C_ALL = _nl.NORMAL_LAPLACE_C + _pw.POISSON_WINDOW_C + _pair.ENTRIES_C + _C_KERNEL
"""The kernel's C with all it calls (:mod:`~pymc_dp.likelihoods.window_sum` builds on it)."""
_C_VERSION = (1, int(hashlib.sha256(C_ALL.encode()).hexdigest()[:12], 16))


def counted_window_spec(lo: float, hi: float) -> tuple[float, float]:
    """The centre window {lo, ..., hi} of a Poisson release (integer edges, lo ≥ 0, hi ≤ ∞).

    Raises
    ------
    ValueError
        If the edges are not integers with lo ≤ hi.
    """
    return _pw.window_edges(lo, hi)


# ---- the same algorithm in Python (Numba compiles it; the tests compare it with the C) --------
def _counted_poisson_core(
    u: float,
    eta: float,
    n: float,
    y1: float,
    y2: float,
    b1: float,
    b2: float,
    lo: float,
    hi: float,
    lg_l: float,
    lg_h: float,
    grad: bool,
) -> tuple:
    """``pmdp_counted_poisson`` line for line: (four partials (0 without ``grad``), lp_u, lp_y)."""
    e = poisson_window_entries(eta, n, lo, hi, lg_l, lg_h)
    m1, m2, v11 = (
        (e[0][0], 0.0, e[0][1], 0.0),
        (e[1][0], 0.0, e[1][1], 0.0),
        (e[2][0], 0.0, e[2][1], 0.0),
    )
    v12, v22 = (e[3][0], 0.0, e[3][1], 0.0), (e[4][0], 0.0, e[4][1], 0.0)
    lp_u, lp_y = pair_given_entries((u, 1.0, 0.0, 0.0), m1, m2, v11, v12, v22, y1, y2, b1, b2, grad)
    if grad:
        return (lp_u[1], lp_u[2], lp_y[1], lp_y[2], lp_u[0], lp_y[0])
    return (0.0, 0.0, 0.0, 0.0, lp_u[0], lp_y[0])


def poisson_window_entries(
    eta: float, n: float, lo: float, hi: float, lg_l: float, lg_h: float
) -> tuple:
    """``pmdp_poisson_window_entries`` line for line: n(m₁, m₂, v₁₁, v₁₂, v₂₂) and ∂/∂η.

    The CLT entries of (window sum, window count) of n Poisson(e^η) records on {lo, ..., hi}
    (``lg_l``, ``lg_h`` = log (lo − 1)!, log hi!), each as (value, ∂/∂η).
    """
    w = _poisson_window_parts(eta, lo, hi, lg_l, lg_h, False)
    lam = math.exp(eta)
    mean0 = lam * (1.0 - w[3] + w[2])
    held = w[5]
    dlog_q = lam * (w[2] - w[3]) if held else 0.0
    mean, dmean, second, dsecond = lam, lam, lam * lam, 2.0 * lam * lam
    if math.isfinite(hi):
        rho, drho, top = w[3], w[3] * (hi - mean0), lam * (lam + hi)
        mean -= lam * rho
        dmean -= lam * (rho + drho)
        second -= rho * top
        dsecond -= drho * top + rho * lam * (2.0 * lam + hi)
    if lo > 0.0:
        rho, drho, top = w[2], w[2] * (lo - 1.0 - mean0), lam * (lam + lo - 1.0)
        mean += lam * rho
        dmean += lam * (rho + drho)
        second += rho * top
        dsecond += drho * top + rho * lam * (2.0 * lam + lo - 1.0)
    var, dvar = second + mean - mean * mean, dsecond + dmean - 2.0 * mean * dmean
    if not held:
        mean = dmean = var = dvar = 0.0
    q = w[0]
    dq = q * dlog_q
    out, dout = w[1], -dq
    qm, dqm = q * mean, dq * mean + q * dmean
    qo, dqo = q * out, dq * out + q * dout
    t, dt = var + mean * mean, dvar + 2.0 * mean * dmean
    return (
        (n * qm, n * dqm),
        (n * q, n * dq),
        (n * (q * t - qm * qm), n * (dq * t + q * dt - 2.0 * qm * dqm)),
        (n * qo * mean, n * (dqo * mean + qo * dmean)),
        (n * qo, n * dqo),
    )


_poisson_window_parts = _pw.poisson_window_parts


def counted_poisson_scalar(*args: float, grad: bool = False) -> tuple:
    """The kernel in Python: (lp_u, lp_y), or with ``grad`` the four partials then both.

    ``args`` are (u, η, n, y₁, y₂, b₁, b₂, lo, hi): the inputs of :func:`counted_poisson_logp`,
    then its ``spec``.
    """
    return _impl(tuple(args[7:]), args[:7], grad)


def _impl(spec: tuple, inputs: tuple, grad: bool) -> tuple:
    lo, hi = spec
    out = _counted_poisson_core(
        *(float(x) for x in inputs), lo, hi, *_pw.log_factorials(lo, hi), grad
    )
    return out if grad else out[4:]


# ---- the scalar operations --------------------------------------------------------------------
class PoissonWindowKernel(ScalarOp):
    """A scalar kernel of a Poisson window {lo, ..., hi} (a property, ``spec``), in C.

    A subclass names its C function (called with its inputs, then lo, hi, log (lo − 1)!,
    log hi!, the gradient flag and the output buffer ``o``), the C that defines it and a
    version of that C.
    """

    c_function: ClassVar[str]
    c_source: ClassVar[str]
    c_version: ClassVar[tuple]

    def __init__(self, spec: tuple[float, float], name: str | None = None):
        super().__init__(name=name)
        self.spec = counted_window_spec(*spec)

    def output_types(self, types: Any) -> list:
        """Every output is a float64."""
        return [float64] * self.nout

    def c_support_code(self, **kwargs: Any) -> str:
        """The C that defines the kernel (``c_source``)."""
        return self.c_source

    def c_code_cache_version(self) -> tuple:
        """``c_version``: a hash of ``c_source``, so that an edit of the C recompiles."""
        return self.c_version

    def _call(self, inp: list, grad: int) -> str:
        lo, hi = self.spec
        lg_l, lg_h = _pw.log_factorials(lo, hi)
        edge = repr(hi) if math.isfinite(hi) else "INFINITY"
        window = f"{lo!r}, {edge}, {lg_l!r}, {lg_h!r}"
        return f"{self.c_function}({', '.join(inp)}, {window}, {grad}, o)"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.spec == other.spec

    def __hash__(self) -> int:
        return hash((type(self), self.spec))


@pullback_op
class _CountedPoissonBase(PoissonWindowKernel):
    """Inputs (u, η, n, y₁, y₂, b₁, b₂); the window {lo, ..., hi} is a property."""

    nin = 7
    c_function = "pmdp_counted_poisson"
    c_source = C_ALL
    c_version = _C_VERSION


class CountedPoissonLogp(_CountedPoissonBase):
    """(log p(u), log p(y | ŝ₁)) of one group of a counted Poisson window (module docstring)."""

    nout = 2

    def impl(self, *inputs: float) -> tuple:  # noqa: D102
        return _impl(self.spec, inputs, False)

    def c_code(self, node: Apply, name: str, inp: list, out: list, sub: dict) -> str:  # noqa: D102
        return f"{{ double o[6]; {self._call(inp, 0)}; {out[0]} = o[4]; {out[1]} = o[5]; }}"

    def pullback(self, inputs: list, outputs: list, output_grads: list) -> list:  # noqa: D102
        parts = CountedPoissonGrad(self.spec, name="counted_poisson_grad")(*inputs)
        grads = [None, None]
        for k, g in enumerate(output_grads):
            if isinstance(g.type, DisconnectedType):
                continue
            for j in range(2):
                term = g * parts[2 * k + j]
                grads[j] = term if grads[j] is None else grads[j] + term
        rest = [grad_not_implemented(self, i, x) for i, x in enumerate(inputs) if i >= 2]
        return [g if g is not None else inputs[j].zeros_like() for j, g in enumerate(grads)] + rest


class CountedPoissonGrad(_CountedPoissonBase):
    """d lp_u/d(u, η), d lp_y/d(u, η), then lp_u and lp_y.

    The log densities are outputs too: a rewrite hands them to the forward operation, so that a
    function of both (NUTS) evaluates the kernel once.
    """

    nout = 6

    def impl(self, *inputs: float) -> tuple:  # noqa: D102
        return _impl(self.spec, inputs, True)

    def c_code(self, node: Apply, name: str, inp: list, out: list, sub: dict) -> str:  # noqa: D102
        stores = " ".join(f"{o} = o[{i}];" for i, o in enumerate(out))
        return f"{{ double o[6]; {self._call(inp, 1)}; {stores} }}"

    def pullback(self, inputs: list, outputs: list, output_grads: list) -> list:  # noqa: D102
        raise NotImplementedError("second derivatives of the counted window's log density")


@functools.cache
def _elemwise(kind: str, spec: tuple) -> Elemwise:
    scalar = {"logp": CountedPoissonLogp, "grad": CountedPoissonGrad}[kind]
    return Elemwise(scalar(spec, name=f"counted_poisson_{kind}"))


def counted_poisson_logp(
    u: Any, eta: Any, n: Any, y1: Any, y2: Any, b1: Any, b2: Any, spec: tuple[float, float]
) -> list[TensorVariable]:
    """[log p(u), log p(y | ŝ₁)] of each group, elementwise over broadcast inputs (float64).

    u is ŝ₁ in the standard units of :func:`~pymc_dp.likelihoods.collapsed_pair.first_statistic`;
    n records of Poisson(e^η); y = (y₁, y₂) = (window sum, window count) released with Laplace
    scales (b₁, b₂); ``spec`` the window (lo, hi) (:func:`counted_window_spec`). The same numbers
    as :func:`counted_poisson_graph`; the gradient in (u, η) is the kernel's own.
    """
    args = [pt.as_tensor_variable(x) for x in (u, eta, n, y1, y2, b1, b2)]
    args = [pt.cast(x, "float64") if x.dtype != "float64" else x for x in args]
    return _elemwise("logp", counted_window_spec(*spec))(*args)


# ---- the graph form, for JAX ---------------------------------------------------------------------
def counted_poisson_entries(
    eta: Any, n: Any, spec: tuple[float, float]
) -> tuple[TensorVariable, ...]:
    """The CLT entries n·(m₁, m₂, v₁₁, v₁₂, v₂₂) of (window sum, window count), elementwise.

    :meth:`~pymc_dp.families.Poisson.truncated_moments` of the centre window and
    :meth:`~pymc_dp.families.TruncatedFamily.counted_clt`, written per group (no stacking).
    """
    lo, hi = counted_window_spec(*spec)
    eta, n = as_float64(eta), as_float64(n)
    lam = pt.exp(eta)
    log_q, rho_l, rho_h = _pw.poisson_window(eta, lo, hi)
    mean, var = poisson_window_moments(lam, log_q, rho_l, rho_h, (lo, hi))
    q, out = pt.exp(log_q), -pt.expm1(log_q)
    var_sum = q * (var + pt.sqr(mean)) - pt.sqr(q * mean)
    return n * q * mean, n * q, n * var_sum, n * q * out * mean, n * q * out


def counted_poisson_graph(
    u: Any, eta: Any, n: Any, y1: Any, y2: Any, b1: Any, b2: Any, spec: tuple[float, float]
) -> list[TensorVariable]:
    """:func:`counted_poisson_logp` as the PyTensor graph of its pieces (any backend, autodiff)."""
    u, eta, n, y1, y2, b1, b2 = (as_float64(x) for x in (u, eta, n, y1, y2, b1, b2))
    m1, m2, v11, v12, v22 = counted_poisson_entries(eta, n, spec)
    c, d, var = first_statistic_map(y1, m1, v11, b1)
    lp_u = first_statistic_logp(u, c, d, m1, var)
    first = c + d * u
    centre, var2 = conditional_second(first, m1, m2, v11, v12, v22)
    value = pt.stack(pt.broadcast_arrays(y1, y2), axis=-1)
    lp_y = given_first_logp(value, first, centre, var2, pt.stack([b1, b2], axis=-1))
    return [lp_u, lp_y]


# ---- Numba: the Python mirror, compiled -------------------------------------------------------
NUMBA_HELPERS = (
    *_nl.MIRROR_HELPERS,
    *_pw.MIRROR_HELPERS,
    *_pair.ENTRIES_HELPERS,
    "poisson_window_entries",
    "_counted_poisson_core",
)
"""The mirror's functions in the order ``compile_mirror`` compiles them (the core last)."""
NUMBA_INLINE = ("poisson_window_entries", "_poisson_window_parts")
"""Inlined into its caller (LLVM would leave a function returning tuples a call of its own)."""
NUMBA_NAMESPACE = {**vars(_nl), **vars(_pw), **vars(_pair), **globals()}


@functools.cache
def _numba_core() -> Callable:
    """:func:`_counted_poisson_core` compiled by Numba (IEEE, as the C), its helpers too."""
    return compile_mirror(NUMBA_NAMESPACE, NUMBA_HELPERS, "_counted_poisson_core", NUMBA_INLINE)


def _numba_args(spec: tuple[float, float]) -> tuple[float, ...]:
    return (*spec, *_pw.log_factorials(*spec))


register_fused_kernel(
    "counted_poisson", CountedPoissonLogp, CountedPoissonGrad, counted_poisson_graph, 2,
    functools.partial(_elemwise, "grad"), _numba_core, _numba_args,
    mirror_key(NUMBA_NAMESPACE, NUMBA_HELPERS, NUMBA_INLINE),
    xla=XlaKernel("counted_poisson", C_ALL, "pmdp_counted_poisson({x}, {s}, (int)grad, o);",
                  7, 4, 2, 2),
)  # fmt: skip


# ---- the model's two variables -------------------------------------------------------------------
def counted_poisson_model(
    name: str,
    *,
    eta: Any,
    n: Any,
    value: np.ndarray,
    noise_scales: tuple[float, float],
    spec: tuple[float, float],
    dims: tuple[str, str],
) -> TensorVariable:
    """Add ``{name}_s1_std`` (u), ``{name}_s1`` (ŝ₁) and the observed y (inside a model context).

    The model of :func:`~pymc_dp.likelihoods.collapsed_pair.first_statistic` and
    :func:`~pymc_dp.likelihoods.collapsed_pair.LaplacePairGivenFirst` for Poisson(e^η_g)
    records whose window sum and count are released per group (y of shape ``(G, 2)``, Laplace
    scales ``noise_scales``), with both log densities from :func:`counted_poisson_logp`: both
    call it on the same inputs, so the compiled function evaluates the kernel once. The CLT
    entries as a graph serve only ŝ₁ and draws.
    """
    n = np.asarray(n, dtype=np.float64).reshape(-1)
    value = np.asarray(value, dtype=np.float64)
    b1, b2 = (np.float64(b) for b in noise_scales)
    y1, y2 = released_columns(value)
    spec = counted_window_spec(*spec)
    m1, m2, v11, v12, v22 = counted_poisson_entries(eta, n, spec)
    c, d, var = first_statistic_map(as_float64(y1), m1, v11, as_float64(b1))

    def u_logp(u: Any, c: Any, d: Any, m: Any, v: Any, *inputs: Any) -> TensorVariable:
        return counted_poisson_logp(u, *inputs, spec)[0]

    def u_random(c: Any, d: Any, m: Any, v: Any, *rest: Any, rng: Any, size: Any) -> Any:
        return (rng.normal(m, np.sqrt(v), size=size) - c) / d

    u = pm.CustomDist(
        f"{name}_s1_std",
        *(c, d, m1, var),
        *(eta, n, y1, y2, b1, b2),
        logp=u_logp,
        random=u_random,
        dims=dims[0],
    )
    first = pm.Deterministic(f"{name}_s1", c + d * u, dims=dims[0])
    centre, var2 = conditional_second(first, m1, m2, v11, v12, v22)
    scales = np.array([b1, b2])

    def y_logp(value: Any, first: Any, centre: Any, var2: Any, *inputs: Any) -> TensorVariable:
        noise, u, eta, n = inputs
        y1, y2, s1, s2 = value[..., 0], value[..., 1], noise[..., 0], noise[..., 1]
        return counted_poisson_logp(u, eta, n, y1, y2, s1, s2, spec)[1]

    def y_random(first: Any, centre: Any, var2: Any, *rest: Any, rng: Any, size: Any) -> Any:
        first, centre, var2 = (np.asarray(x, dtype=np.float64) for x in (first, centre, var2))
        shape = size if size is not None else np.broadcast_shapes(first.shape, centre.shape)
        sd = np.sqrt(np.maximum(var2, 0.0))
        s = np.stack([np.broadcast_to(first, shape), rng.normal(centre, sd, size=shape)], axis=-1)
        return s + rng.laplace(0.0, 1.0, size=s.shape) * scales

    return pm.CustomDist(
        name,
        *(first, centre, var2, scales),
        *(u, eta, n),
        logp=y_logp,
        random=y_random,
        signature="(),(),(),(k),(),(),()->(k)",
        observed=value,
        dims=dims,
    )
