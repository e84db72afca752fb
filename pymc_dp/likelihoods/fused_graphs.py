"""Graph forms of a fused elementwise kernel: the rewrites every such kernel registers.

A fused kernel (:mod:`~pymc_dp.likelihoods.pair_window`,
:mod:`~pymc_dp.likelihoods.counted_window`) is a pair of scalar operations with a ``spec``: one
returns the log densities ``[log p(u), log p(y | u)]``, the other their partials in the first
``n_wrt`` inputs followed by both log densities. Each also has a PyTensor graph of the same
numbers. Three rewrites follow from that shape, and are registered here once:

* the log density as its graph, and the gradient as the graph's autodiff, on the backends that
  have no compiled form of the kernel (JAX; Numba where its implementation could not be
  registered);
* the log density read off the gradient's outputs where both are compiled together (NUTS), so
  the kernel runs once per evaluation, not twice.
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

__all__ = ["register_graph_forms"]


def register_graph_forms(
    name: str,
    logp_class: type,
    grad_class: type,
    graph: Callable[..., Sequence[Any]],
    n_wrt: int,
    grad_elemwise: Callable[[tuple], Elemwise],
    has_numba: bool,
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
        ``graph(*inputs, spec)``: the two log densities as a PyTensor graph.
    n_wrt
        How many leading inputs the gradient differentiates in (its outputs are the partials of
        ``log p(u)``, then those of ``log p(y | u)``, then both log densities).
    grad_elemwise
        ``grad_elemwise(spec)``: the gradient's ``Elemwise`` (cached, so equal operations are
        the same one).
    has_numba
        Whether the kernel's Numba implementation was registered; where it was not, Numba
        takes the graph forms too.
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
        lp_u, lp_y = graph(*full, node.op.scalar_op.spec)
        wrt = full[:n_wrt]
        parts = [
            *pt.grad(lp_u.sum(), wrt, disconnected_inputs="ignore"),
            *pt.grad(lp_y.sum(), wrt, disconnected_inputs="ignore"),
        ]
        return [*parts, lp_u, lp_y]

    @node_rewriter([Elemwise])
    def logp_from_grad(fgraph: Any, node: Apply) -> list | None:
        # logp and dlogp compiled together (NUTS) evaluate the kernel once, not twice.
        if not isinstance(node.op.scalar_op, logp_class):
            return None
        grad_op = grad_elemwise(node.op.scalar_op.spec)
        for client, _ in fgraph.clients[node.inputs[0]]:
            if client != "output" and client.op == grad_op and client.inputs == node.inputs:
                return client.outputs[2 * n_wrt :]
        return None

    # Only the JAX (and, without the Numba implementation, the Numba) mode queries these tags;
    # the C and Numba backends keep the compiled kernel.
    tags = ("jax",) if has_numba else ("jax", "numba")
    for kind, rewrite in (("logp", logp_as_graph), ("grad", grad_as_graph)):
        optdb["specialize"].register(f"pmdp_{name}_{kind}_as_graph", rewrite, *tags)
    register_specialize(logp_from_grad, name=f"pmdp_{name}_logp_from_grad")
