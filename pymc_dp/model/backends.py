"""Every NUTS backend of ``pm.sample``: JAX implementations of pymc_dp's ``Op`` classes.

``pm.sample(nuts_sampler="nutpie")`` compiles the model with Numba, where PyTensor runs an
``Op`` that has no Numba implementation through its NumPy ``perform`` in object mode, so every
pymc_dp likelihood works there as it is. ``"numpyro"`` and ``"blackjax"`` compile with JAX,
which has no such fallback. This module gives each ``Op`` of pymc_dp a JAX implementation of
the same kind: its own ``perform`` through :func:`jax.pure_callback`, under a
:func:`jax.custom_vjp` whose backward pass is the ``Op``'s own PyTensor gradient, jaxified
(NumPyro and BlackJAX differentiate the forward function with :func:`jax.grad`). The numbers
are those of the default backend; the host call costs what it costs there. The fused C kernels
(the normal–Laplace convolution, the windowed pair, the counted and summed Poisson windows) are
XLA custom calls of their C instead (:mod:`~pymc_dp.likelihoods.xla_kernels`). The collapsed normal
of noisy marginal tables (:class:`~pymc_dp.likelihoods.marginals.CLTLogp`) is written in
jax.numpy instead (:mod:`pymc_dp.likelihoods.marginals_jax`).

PyTensor maps its scalar ``erfcx`` (in the collapsed normal–Laplace likelihood) to JAX only
through tensorflow-probability; :func:`jax.scipy.special.erfcx` is registered in its place, with
its asymptotic series above
:data:`~pymc_dp.kernels.erfcx.ERFCX_SERIES_FROM`: JAX 0.10's own returns 0 for x in about
[26.54, 26.64] (where x² nears the largest float64 exponent), which made a grouped Poisson
window model's every NumPyro transition diverge.

Nothing here imports JAX: :func:`register_when_imported` registers the implementations when
PyTensor's JAX backend is imported (which ``pm.sample`` does for the JAX samplers), so a user
without JAX, or with it but sampling in C, pays nothing.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import math
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from pymc_dp._compat import op_pullback
from pymc_dp.kernels.erfcx import ERFCX_SERIES, ERFCX_SERIES_FROM

__all__ = ["ERFCX_SERIES_FROM", "jax_erfcx", "register_jax", "register_when_imported"]


_JAX_DISPATCH = "pytensor.link.jax.dispatch"
_registered = False


def _output_shapes(op: Any, shapes: Sequence[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """The output shapes of ``op`` for inputs of ``shapes`` (what the host call returns)."""
    from pymc_dp.families.normal_window import WindowMomentsOp
    from pymc_dp.likelihoods.collapsed_pair import PairLogLikelihood
    from pymc_dp.likelihoods.exact import ElementwiseInTheta, ExactLikelihoodOp

    if isinstance(op, ExactLikelihoodOp):
        return [tuple(shape) for shape in op.infer_shape(shapes)]
    if isinstance(op, ElementwiseInTheta):
        return [np.broadcast_shapes(*shapes)]
    if isinstance(op, WindowMomentsOp):
        return [np.broadcast_shapes(*shapes)] * 7
    if isinstance(op, PairLogLikelihood):
        value, mean, cov, scale = shapes
        batch = np.broadcast_shapes(value[:-1], mean[:-1], cov[:-2], scale[:-1])
        return [batch, (*batch, 2), (*batch, 2, 2)]
    raise NotImplementedError(f"no JAX implementation for {type(op).__name__}")


def _host(op: Any, node: Any) -> Callable[..., tuple[np.ndarray, ...]]:
    """The ``Op``'s ``perform`` as a function of arrays (what JAX calls back on the host)."""

    def host(*arrays: Any) -> tuple[np.ndarray, ...]:
        storage: list[list[Any]] = [[None] for _ in node.outputs]
        op.perform(node, [np.asarray(a, dtype=np.float64) for a in arrays], storage)
        return tuple(np.asarray(s[0], dtype=np.float64) for s in storage)

    return host


def _backward(op: Any, node: Any) -> tuple[Callable[..., Any], list[int]]:
    """The ``Op``'s gradient as a JAX function of (inputs, outputs, cotangents).

    Returns the function and the outputs whose cotangents it takes: an ``Op`` with first
    derivatives through its first output only (:class:`PairLogLikelihood`) takes that one.
    """
    import pytensor.tensor as pt
    from pytensor.gradient import DisconnectedType, NullType
    from pytensor.graph.fg import FunctionGraph
    from pytensor.link.jax.dispatch import jax_funcify

    inputs = [x.type() for x in node.inputs]
    outputs = [x.type() for x in node.outputs]
    cotangents = [x.type() for x in node.outputs]
    try:
        grads = op_pullback(op, inputs, outputs, cotangents)
        used = list(range(len(outputs)))
    except NotImplementedError:
        first_only = [cotangents[0]] + [DisconnectedType()() for _ in outputs[1:]]
        grads = op_pullback(op, inputs, outputs, first_only)
        used = [0]
    grads = [
        pt.zeros_like(x) if isinstance(g.type, NullType | DisconnectedType) else g
        for g, x in zip(grads, inputs)
    ]
    graph = FunctionGraph(inputs + outputs + [cotangents[i] for i in used], grads, clone=True)
    return jax_funcify(graph), used


def _sum_to_shape(grad: Any, shape: tuple[int, ...]) -> Any:
    """A cotangent summed over the axes its input was broadcast along."""
    import jax.numpy as jnp

    grad = jnp.asarray(grad)
    extra = grad.ndim - len(shape)
    if extra > 0:
        grad = grad.sum(axis=tuple(range(extra)))
    kept = tuple(i for i, (g, s) in enumerate(zip(grad.shape, shape)) if s == 1 and g != 1)
    if kept:
        grad = grad.sum(axis=kept, keepdims=True)
    return jnp.broadcast_to(grad, shape)


def _jax_op(op: Any, node: Any) -> Callable[..., Any]:
    """The JAX implementation of one applied ``Op``: a host call with the ``Op``'s gradient."""
    import jax
    import jax.numpy as jnp

    host = _host(op, node)
    single = len(node.outputs) == 1

    def forward(*args: Any) -> Any:
        shapes = _output_shapes(op, [jnp.shape(a) for a in args])
        specs = tuple(jax.ShapeDtypeStruct(s, jnp.float64) for s in shapes)
        # "sequential": a vmapped call (a Blockwise over groups) runs the Op once per group,
        # as PyTensor's Blockwise does in C.
        return jax.pure_callback(host, specs, *args, vmap_method="sequential")

    if getattr(op, "gradient", False):
        # The gradient Ops themselves: NUTS takes no second derivatives.
        return lambda *args: forward(*args)[0] if single else forward(*args)

    backward: dict[str, Any] = {}

    @jax.custom_vjp
    def apply(*args: Any) -> Any:
        return forward(*args)

    def apply_forward(*args: Any) -> tuple[Any, Any]:
        out = forward(*args)
        return out, (args, out)

    def apply_backward(residuals: Any, cotangent: Any) -> tuple[Any, ...]:
        args, out = residuals
        if "fn" not in backward:  # jaxified once, on the first gradient
            backward["fn"] = _backward(op, node)
        fn, used = backward["fn"]
        grads = fn(*args, *out, *[cotangent[i] for i in used])
        grads = grads if isinstance(grads, list | tuple) else [grads]
        return tuple(_sum_to_shape(g, jnp.shape(a)) for g, a in zip(grads, args))

    apply.defvjp(apply_forward, apply_backward)
    return lambda *args: apply(*args)[0] if single else apply(*args)


def jax_erfcx(x: Any) -> Any:
    """erfcx(x) = exp(x²) erfc(x) in JAX, right for every float64 x (and differentiable).

    Examples
    --------
    >>> import jax, numpy as np, scipy.special
    >>> jax.config.update("jax_enable_x64", True)
    >>> x = np.array([-3.0, 0.0, 10.0, 26.6, 1e6])
    >>> bool(np.allclose(jax_erfcx(x), scipy.special.erfcx(x), rtol=1e-14))
    True
    """
    import jax.numpy as jnp
    import jax.scipy.special as jax_special

    x = jnp.asarray(x)
    near = x < ERFCX_SERIES_FROM
    # Each branch sees only arguments it is right for, so neither puts a NaN into the gradient.
    inv = 1.0 / jnp.where(near, ERFCX_SERIES_FROM, x)
    w = jnp.square(inv)
    series = ERFCX_SERIES[-1]
    for c in ERFCX_SERIES[-2::-1]:
        series = c + w * series
    far = series * inv / math.sqrt(math.pi)
    return jnp.where(near, jax_special.erfcx(jnp.where(near, x, 0.0)), far)


def register_jax() -> None:
    """Register the JAX implementations with PyTensor (imports JAX; idempotent)."""
    global _registered
    if _registered:
        return
    import jax.scipy.special as jax_special
    from pytensor.link.jax.dispatch import jax_funcify
    from pytensor.scalar.math import Erfcx

    from pymc_dp.families.normal_window import WindowMomentsOp
    from pymc_dp.likelihoods import xla_kernels
    from pymc_dp.likelihoods.collapsed_pair import PairLogLikelihood
    from pymc_dp.likelihoods.exact import ExactLikelihoodOp
    from pymc_dp.likelihoods.lattice_windows import LatticeWindowLogLikelihood
    from pymc_dp.likelihoods.marginals import CLTLogp
    from pymc_dp.likelihoods.marginals_jax import clt_logp_jax

    @jax_funcify.register(CLTLogp)
    def _funcify_clt(op: Any, node: Any = None, **kwargs: Any) -> Callable[..., Any]:
        return clt_logp_jax(op, node)

    for cls in (ExactLikelihoodOp, LatticeWindowLogLikelihood, PairLogLikelihood, WindowMomentsOp):

        @jax_funcify.register(cls)
        def _funcify(op: Any, node: Any = None, **kwargs: Any) -> Callable[..., Any]:
            return _jax_op(op, node)

    # The kernels' modules register their custom calls when imported: import them all first.
    import pymc_dp.likelihoods.window_sum  # noqa: F401  (imports the other fused kernels)

    for cls in xla_kernels.registered():

        @jax_funcify.register(cls)
        def _funcify_call(op: Any, node: Any = None, **kwargs: Any) -> Callable[..., Any]:
            fn = xla_kernels.funcify(op)
            if fn is None:  # the rewrites put the graph form here first; this is a bug
                raise NotImplementedError(f"{type(op).__name__}: its XLA custom call did not build")
            return fn

    if hasattr(jax_special, "erfcx"):  # JAX >= 0.4.36

        @jax_funcify.register(Erfcx)
        def _funcify_erfcx(op: Any, **kwargs: Any) -> Callable[..., Any]:
            return jax_erfcx

    _registered = True


class _RegisterAfterImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Runs :func:`register_jax` right after PyTensor's JAX backend is imported."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != _JAX_DISPATCH:
            return None
        sys.meta_path.remove(self)  # find the real module, once
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        self._loader = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec: Any) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        register_jax()


def register_when_imported() -> None:
    """Register the JAX implementations now if PyTensor's JAX backend is loaded, else on import."""
    if _JAX_DISPATCH in sys.modules:
        register_jax()
    elif importlib.util.find_spec("jax") is not None and not any(
        isinstance(f, _RegisterAfterImport) for f in sys.meta_path
    ):
        sys.meta_path.insert(0, _RegisterAfterImport())
