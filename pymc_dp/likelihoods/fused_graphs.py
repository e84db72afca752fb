"""Graph forms of a fused elementwise kernel: the rewrites every such kernel registers.

A fused kernel (:mod:`~pymc_dp.likelihoods.pair_window`,
:mod:`~pymc_dp.likelihoods.counted_window`, :mod:`~pymc_dp.likelihoods.window_sum`) is a pair
of scalar operations with a ``spec``: one returns the log densities (``[log p(u), log p(y | u)]``,
or one ``log p(y)``), the other their partials in the first ``n_wrt`` inputs followed by the
log densities. Each also has a PyTensor graph of the same
numbers. Three rewrites follow from that shape, and are registered here once:

* the log density as its graph, and the gradient as the graph's autodiff, on the backends that
  have no compiled form of the kernel (JAX; Numba where its implementation could not be
  registered);
* the log density read off the gradient's outputs where both are compiled together (NUTS), so
  the kernel runs once per evaluation, not twice.

A kernel that gives its C as an :class:`~pymc_dp.likelihoods.xla_kernels.XlaKernel` runs on JAX
as that C, an XLA custom call; the graph forms are then JAX's only where the call cannot be
built.

:func:`register_fused_kernel` registers those with the kernel's Numba implementations, one
compiled core serving both operations.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytensor.tensor as pt
from pytensor.compile import optdb
from pytensor.graph.basic import Apply
from pytensor.graph.rewriting.basic import node_rewriter
from pytensor.tensor.elemwise import Elemwise
from pytensor.tensor.rewriting.basic import register_specialize

from pymc_dp.likelihoods import xla_kernels
from pymc_dp.likelihoods.numba_ops import register_numba_scalar
from pymc_dp.likelihoods.xla_kernels import XlaKernel

__all__ = ["register_fused_kernel", "register_graph_forms"]


def register_fused_kernel(
    name: str,
    logp_class: type,
    grad_class: type,
    graph: Callable[..., Sequence[Any]],
    n_wrt: int,
    grad_elemwise: Callable[[tuple], Elemwise],
    numba_core: Callable[[], Callable],
    numba_args: Callable[[tuple], tuple],
    numba_key: str,
    n_logp: int = 2,
    xla: XlaKernel | None = None,
) -> None:
    """Register a fused kernel's Numba implementations, then :func:`register_graph_forms`.

    Parameters
    ----------
    name, logp_class, grad_class, graph, n_wrt, grad_elemwise, n_logp, xla
        As for :func:`register_graph_forms`.
    numba_core
        Returns the kernel's compiled core, called as ``core(*inputs, *numba_args(spec),
        with_grad)``; it returns the gradient's outputs (partials, then the log densities).
    numba_args
        The core's arguments after the operation's inputs, from its ``spec``.
    numba_key
        The core's source key (:func:`~pymc_dp.kernels.numba_mirror.mirror_key`), part of
        Numba's cache key with the spec.

    The C kernel's arguments after its inputs are ``numba_args(spec)`` too.
    """
    first = n_logp * n_wrt  # where the log densities start among the core's outputs

    def numba_logp(op: Any) -> tuple[Callable, str]:
        core, extra = numba_core(), numba_args(op.spec)

        def kernel_logp(*inputs):
            out = core(*inputs, *extra, False)
            return out[first], out[first + 1]

        def kernel_logp_one(*inputs):
            return core(*inputs, *extra, False)[first]

        if n_logp == 1:
            return kernel_logp_one, f"pmdp_{name}_logp_{op.spec!r}_{numba_key}"

        return kernel_logp, f"pmdp_{name}_logp_{op.spec!r}_{numba_key}"

    def numba_grad(op: Any) -> tuple[Callable, str]:
        core, extra = numba_core(), numba_args(op.spec)

        def kernel_grad(*inputs):
            return core(*inputs, *extra, True)

        return kernel_grad, f"pmdp_{name}_grad_{op.spec!r}_{numba_key}"

    has_numba = register_numba_scalar(logp_class, numba_logp)
    has_numba = register_numba_scalar(grad_class, numba_grad) and has_numba
    if xla is not None:
        xla_kernels.register(xla, logp_class, grad_class, lambda op: numba_args(op.spec))
    register_graph_forms(
        name, logp_class, grad_class, graph, n_wrt, grad_elemwise, has_numba, n_logp, xla
    )


def register_graph_forms(
    name: str,
    logp_class: type,
    grad_class: type,
    graph: Callable[..., Sequence[Any]],
    n_wrt: int,
    grad_elemwise: Callable[[tuple], Elemwise],
    has_numba: bool,
    n_logp: int = 2,
    xla: XlaKernel | None = None,
) -> None:
    """Register the three rewrites of a fused kernel under ``pmdp_{name}_…``.

    Parameters
    ----------
    name
        The kernel's name in the rewrites' names (``pmdp_{name}_logp_as_graph``,
        ``pmdp_{name}_grad_as_graph``, ``pmdp_{name}_logp_from_grad``).
    logp_class, grad_class
        The scalar operations of the log densities and of their gradient; both carry ``spec``.
    graph
        ``graph(*inputs, spec)``: the log densities as a PyTensor graph (a list).
    n_wrt
        How many leading inputs the gradient differentiates in (its outputs are the partials of
        the first log density, then those of the next, then the log densities).
    grad_elemwise
        ``grad_elemwise(spec)``: the gradient's ``Elemwise`` (cached, so equal operations are
        the same one).
    has_numba
        Whether the kernel's Numba implementation was registered; where it was not, Numba
        takes the graph forms too.
    n_logp
        How many log densities the kernel returns: 2 (``log p(u)``, ``log p(y | u)``) or 1.
    xla
        The kernel as an XLA custom call (registered with
        :func:`~pymc_dp.likelihoods.xla_kernels.register`): where it builds, JAX keeps the
        operations and the graph forms are not used.
    """

    @node_rewriter([Elemwise])
    def logp_as_graph(fgraph: Any, node: Apply) -> list | None:
        if not isinstance(node.op.scalar_op, logp_class):
            return None
        return list(graph(*node.inputs, node.op.scalar_op.spec))

    @node_rewriter([Elemwise])
    def grad_as_graph(fgraph: Any, node: Apply) -> list | None:
        if not isinstance(node.op.scalar_op, grad_class):
            return None
        # Elementwise, so the gradient of each log density's sum is each element's partial;
        # inputs are broadcast first so that each partial keeps the output's shape.
        full = pt.broadcast_arrays(*node.inputs)
        densities = list(graph(*full, node.op.scalar_op.spec))
        wrt = full[:n_wrt]
        parts = [
            part
            for lp in densities
            for part in pt.grad(lp.sum(), wrt, disconnected_inputs="ignore")
        ]
        return [*parts, *densities]

    @node_rewriter([Elemwise])
    def logp_from_grad(fgraph: Any, node: Apply) -> list | None:
        # logp and dlogp compiled together (NUTS) evaluate the kernel once, not twice.
        if not isinstance(node.op.scalar_op, logp_class):
            return None
        grad_op = grad_elemwise(node.op.scalar_op.spec)
        for client, _ in fgraph.clients[node.inputs[0]]:
            if client != "output" and client.op == grad_op and client.inputs == node.inputs:
                return client.outputs[n_logp * n_wrt :]
        return None

    # Only the JAX (and, without the Numba implementation, the Numba) mode queries these tags;
    # the C and Numba backends keep the compiled kernel, and JAX keeps it where its custom call
    # builds. Without the Numba implementation the rewrites serve Numba too, so always apply.
    tags = ("jax",) if has_numba else ("jax", "numba")
    called = xla if has_numba else None
    for kind, rewrite in (("logp", logp_as_graph), ("grad", grad_as_graph)):
        rewrite = xla_kernels.unless_called(rewrite, called)
        optdb["specialize"].register(f"pmdp_{name}_{kind}_as_graph", rewrite, *tags)
    register_specialize(logp_from_grad, name=f"pmdp_{name}_logp_from_grad")
