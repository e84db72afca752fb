"""The fused C kernels as XLA custom calls: NumPyro and BlackJAX run the kernels C runs.

JAX has no C backend of PyTensor's, so until now each fused kernel
(:mod:`~pymc_dp.likelihoods.fused_graphs`) and the normal–Laplace convolution reached JAX as
the PyTensor graph of their pieces, and XLA compiled that graph (erfcx branches, window
moments through their derivatives) into one CPU loop per fused piece: 150 loops for a grouped
windowed Poisson model, 270 for the windowed Normal, each a call of its own, so a jitted
logp-and-gradient at 50 groups cost 137 and 340 µs against the hand-written model's 41 and 99.
XLA runs a foreign function through its FFI (:mod:`jax.ffi`) as one call; here each kernel's
own C source is compiled with a C++ handler around it (the loop over the broadcast elements),
once per machine, with PyTensor's compiler into PyTensor's compile directory, and registered as
a custom call target. The JAX function of the log densities is that call under a
:func:`jax.custom_vjp` whose backward pass is the kernel's gradient, the same call asked for
partials; the gradient ``Op`` is the call itself.

Where the library cannot be built (no C++ compiler, or a JAX without :mod:`jax.ffi`), a warning
says so once and the rewrites to graph forms stay in force: the numbers are the same, the speed
is the graph's.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytensor

__all__ = [
    "XlaKernel",
    "funcify",
    "jax_functions",
    "kernel_of",
    "ready",
    "register",
    "registered",
    "unless_called",
]


@dataclass(frozen=True)
class XlaKernel:
    """A scalar C kernel, elementwise over broadcast float64 inputs, as XLA will call it.

    Parameters
    ----------
    name
        The kernel's name (its custom call target is ``pmdp_{name}_{hash}``).
    c_source
        The C that defines the kernel (the ``Op``'s ``c_support_code``).
    c_call
        One C statement that fills ``double o[n_out]``: the partials of each log density in
        the first ``n_wrt`` inputs (where ``grad`` is nonzero), then the log densities. It
        names the inputs ``{x}`` (``x[0][i], x[1][i], ...``) and the spec ``{s}``
        (``s[0], s[1], ...``), e.g. ``"pmdp_window_sum({x}, {s}, grad, o);"``.
    nin, n_spec, n_wrt, n_logp
        How many inputs, spec numbers (the window, passed as one attribute), inputs the
        gradient differentiates in, and log densities.
    """

    name: str
    c_source: str
    c_call: str
    nin: int
    n_spec: int
    n_wrt: int
    n_logp: int

    @property
    def n_out(self) -> int:
        """The gradient's outputs: ``n_logp * n_wrt`` partials, then the ``n_logp`` densities."""
        return self.n_logp * (self.n_wrt + 1)

    def cpp(self) -> str:
        """The C++ of the custom call: the kernel's C, then the loop over the elements."""
        x = ", ".join(f"x[{k}][i]" for k in range(self.nin))
        s = ", ".join(f"s[{k}]" for k in range(self.n_spec))
        call = self.c_call.format(x=x, s=s)
        first = self.n_logp * self.n_wrt
        return _CPP.format(
            source=self.c_source,
            name=self.name,
            nin=self.nin,
            n_spec=self.n_spec,
            n_out=self.n_out,
            n_logp=self.n_logp,
            first=first,
            call=call,
        )


_CPP = r"""
#include <cmath>
#include <cstddef>
#include <cstdint>
#include "xla/ffi/api/ffi.h"
namespace ffi = xla::ffi;
{source}
static ffi::Error pmdp_{name}_loop(ffi::RemainingArgs args, ffi::RemainingRets rets,
                                   ffi::Span<const double> spec, int64_t grad) {{
    const double *x[{nin}];
    double *out[{n_out}];
    double s[{n_spec} + 1];
    if (args.size() != {nin} || spec.size() < {n_spec})
        return ffi::Error::InvalidArgument("pmdp_{name}: wrong number of inputs or spec");
    size_t n = 0;
    for (int k = 0; k < {nin}; ++k) {{
        auto b = args.get<ffi::Buffer<ffi::F64>>(k);
        if (b.has_error()) return b.error();
        if (k > 0 && b.value().element_count() != n)
            return ffi::Error::InvalidArgument("pmdp_{name}: inputs of different sizes");
        x[k] = b.value().typed_data();
        n = b.value().element_count();
    }}
    for (int k = 0; k < {n_spec}; ++k) s[k] = spec[k];
    const int n_ret = grad ? {n_out} : {n_logp}, skip = grad ? 0 : {first};
    if (rets.size() != (size_t)n_ret)
        return ffi::Error::InvalidArgument("pmdp_{name}: wrong number of outputs");
    for (int k = 0; k < n_ret; ++k) {{
        auto r = rets.get<ffi::Buffer<ffi::F64>>(k);
        if (r.has_error()) return r.error();
        out[k] = r.value()->typed_data();
    }}
    for (size_t i = 0; i < n; ++i) {{
        double o[{n_out}];
        {call}
        for (int k = 0; k < n_ret; ++k) out[k][i] = o[skip + k];
    }}
    return ffi::Error::Success();
}}
XLA_FFI_DEFINE_HANDLER_SYMBOL(pmdp_{name}_ffi, pmdp_{name}_loop,
    ffi::Ffi::Bind().RemainingArgs().RemainingRets()
        .Attr<ffi::Span<const double>>("spec").Attr<int64_t>("grad"));
"""

# The ``Op`` classes with a kernel: class -> (kernel, spec numbers of an op, "logp" or "grad").
_REGISTRY: dict[type, tuple[XlaKernel, Callable[[Any], tuple[float, ...]], str]] = {}
_targets: dict[str, str | None] = {}  # kernel name -> registered target, or None (failed)
_lock = threading.Lock()


def _flags() -> list[str]:
    """PyTensor's own flags for its C (so the call rounds as the C backend does), for a library."""
    from pytensor.link.c.cmodule import GCC_compiler

    machine = [a for a in GCC_compiler.compile_args() if not a.startswith("-D")]
    return ["-O3", "-fno-math-errno", *machine, "-shared", "-fPIC", "-std=c++17", "-w"]


def register(
    kernel: XlaKernel,
    logp_class: type,
    grad_class: type,
    spec_numbers: Callable[[Any], tuple[float, ...]],
) -> None:
    """Give a kernel's two scalar ``Op`` classes their custom call (when JAX compiles them).

    ``spec_numbers(op)`` are the numbers the kernel's ``{s}`` names, from the operation.
    """
    _REGISTRY[logp_class] = (kernel, spec_numbers, "logp")
    _REGISTRY[grad_class] = (kernel, spec_numbers, "grad")


def registered() -> tuple[type, ...]:
    """The ``Op`` classes with a custom call (:mod:`~pymc_dp.model.backends` registers them)."""
    return tuple(_REGISTRY)


def kernel_of(op_class: type) -> XlaKernel | None:
    """The kernel of an ``Op`` class, or None."""
    entry = _REGISTRY.get(op_class)
    return entry[0] if entry else None


def ready(kernel: XlaKernel) -> bool:
    """Build (once per machine) and register the kernel's custom call; whether it is there.

    A failure warns once and returns False: the caller keeps the graph form.
    """
    with _lock:
        if kernel.name not in _targets:
            try:
                _targets[kernel.name] = _build_and_register(kernel)
            except Exception as err:  # any failure leaves JAX the graph form, which works
                _targets[kernel.name] = None
                warnings.warn(
                    f"pymc_dp: could not build the XLA custom call of the {kernel.name} kernel "
                    f"({type(err).__name__}: {str(err)[:700]}); JAX runs its PyTensor graph "
                    "instead (the same numbers, slower). A C++ compiler (pytensor.config.cxx) "
                    "and a JAX with jax.ffi give the compiled kernel.",
                    RuntimeWarning,
                    stacklevel=2,
                )
        return _targets[kernel.name] is not None


def _build_and_register(kernel: XlaKernel) -> str:
    import jax

    cxx = pytensor.config.cxx
    if not cxx:
        raise RuntimeError("PyTensor has no C++ compiler (pytensor.config.cxx is empty)")
    source, flags = kernel.cpp(), _flags()
    key = hashlib.sha256("\n".join((source, jax.__version__, cxx, *flags)).encode()).hexdigest()
    key = key[:16]
    directory = os.path.join(pytensor.config.compiledir, "pymc_dp_xla")
    os.makedirs(directory, exist_ok=True)
    library = os.path.join(directory, f"{kernel.name}_{key}.so")
    if not os.path.exists(library):
        # Built in a temporary file, then renamed: processes building at once never read a
        # half-written library.
        with tempfile.TemporaryDirectory(dir=directory) as tmp:
            cc = os.path.join(tmp, "kernel.cc")
            with open(cc, "w") as f:
                f.write(source)
            built = os.path.join(tmp, "kernel.so")
            command = [cxx, *flags, "-I", jax.ffi.include_dir(), cc, "-o", built]
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"{cxx} exited with {done.returncode}: {done.stderr[:600]}")
            os.replace(built, library)
    handler = getattr(ctypes.cdll.LoadLibrary(library), f"pmdp_{kernel.name}_ffi")
    target = f"pmdp_{kernel.name}_{key}"
    jax.ffi.register_ffi_target(target, jax.ffi.pycapsule(handler), platform="cpu")
    return target


def unless_called(rewrite: Any, kernel: XlaKernel | None) -> Any:
    """``rewrite`` (a rewrite to a kernel's graph form), skipped where the kernel's call is used.

    ``kernel`` is None where JAX never gets the call (no kernel, or no compiled implementation
    besides the graph): the rewrite then always applies. Whether the call builds is asked when
    a graph is first rewritten, not at import.
    """
    from pytensor.graph.rewriting.basic import node_rewriter

    if kernel is None:
        return rewrite

    @node_rewriter(rewrite.tracks())
    def as_graph_unless_called(fgraph: Any, node: Any) -> list | None:
        if ready(kernel):
            return None
        return rewrite.transform(fgraph, node)

    return as_graph_unless_called


def jax_functions(kernel: XlaKernel, spec: tuple[float, ...]) -> tuple[Callable, Callable]:
    """The JAX functions of the log densities and of the gradient, for one spec.

    Both take the ``nin`` inputs (arrays that broadcast together) and return a tuple: the
    ``n_logp`` log densities, differentiable in the first ``n_wrt`` inputs (a
    :func:`jax.custom_vjp` through the gradient's call), and the ``n_out`` gradient outputs.
    Call :func:`ready` first.
    """
    import jax
    import jax.numpy as jnp

    target = _targets[kernel.name]
    numbers = np.asarray(spec or (0.0,), dtype=np.float64)  # never an empty attribute
    first = kernel.n_logp * kernel.n_wrt

    def call(grad: bool, *xs: Any) -> tuple:
        shape = jax.ShapeDtypeStruct(xs[0].shape, jnp.float64)
        count = kernel.n_out if grad else kernel.n_logp
        # "broadcast_all": a vmapped call (chains, in BlackJAX) is one call over all elements.
        ffi = jax.ffi.ffi_call(target, [shape] * count, vmap_method="broadcast_all")
        return tuple(ffi(*xs, spec=numbers, grad=np.int64(grad)))

    @jax.custom_vjp
    def densities(*xs: Any) -> tuple:
        return call(False, *xs)

    def forward(*xs: Any) -> tuple:
        out = call(True, *xs)
        return out[first:], out[:first]

    def backward(partials: tuple, cotangents: tuple) -> tuple:
        grads = [
            sum(g * partials[k * kernel.n_wrt + j] for k, g in enumerate(cotangents))
            for j in range(kernel.n_wrt)
        ]
        return (*grads, *([None] * (kernel.nin - kernel.n_wrt)))

    densities.defvjp(forward, backward)

    def broadcast(xs: tuple) -> list:
        # Outside the custom_vjp, so that JAX sums each cotangent back to its input's shape.
        return jnp.broadcast_arrays(*(jnp.asarray(x, dtype=jnp.float64) for x in xs))

    def logp(*xs: Any) -> tuple:
        return densities(*broadcast(xs))

    def gradient(*xs: Any) -> tuple:
        return call(True, *broadcast(xs))

    return logp, gradient


def funcify(op: Any) -> Callable[..., Any] | None:
    """The JAX function of an applied scalar ``Op`` of a kernel, or None (no custom call)."""
    entry = _REGISTRY.get(type(op))
    if entry is None:
        return None
    kernel, spec_numbers, kind = entry
    if not ready(kernel):
        return None
    logp, gradient = jax_functions(kernel, tuple(spec_numbers(op)))
    fn = logp if kind == "logp" else gradient
    if kind == "logp" and kernel.n_logp == 1:
        return lambda *xs: fn(*xs)[0]
    return fn
