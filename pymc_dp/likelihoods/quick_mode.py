"""``QUICK_MODE``: the PyTensor mode of graphs evaluated on whole arrays of θ in NumPy.

The step methods' batched conditionals (:class:`~pymc_dp.GridStep`,
:class:`~pymc_dp.IndependenceStep`) and the batched engine's collapsed posteriors evaluate a log
density at hundreds of θ values per release, for thousands of releases, and compile it once
quickly: PyTensor's FAST_COMPILE, Python-linked. There every elementwise operation runs through its
NumPy ufunc, except one with no ufunc, which is looped element by element in Python (about 15 µs
an element). Two kinds had none:

* an n-ary sum or product, or a clip: written here as binary operations;
* the compiled normal–Laplace convolution (:mod:`~pymc_dp.likelihoods.normal_laplace`), a C
  elementwise operation whose Python ``impl`` is a scalar mirror: replaced here by the same
  formula as a graph of ufuncs (:func:`~pymc_dp.likelihoods.normal_laplace.normal_laplace_graph`,
  the JAX backend's form), about a hundred times faster on arrays.
"""

from __future__ import annotations

from functools import reduce
from typing import Any

import pytensor.scalar as ps
import pytensor.tensor as pt
from pytensor.compile.mode import get_mode
from pytensor.graph.rewriting.basic import in2out, node_rewriter
from pytensor.tensor.elemwise import Elemwise

from pymc_dp.likelihoods.normal_laplace import grad_as_graph, logp_as_graph

__all__ = ["QUICK_MODE"]


@node_rewriter([Elemwise])
def _binary_elemwise(fgraph: Any, node: Any) -> list | None:
    """Write an n-ary Add or Mul as binary ones, and Clip as maximum then minimum.

    NumPy's add and multiply take two inputs; an n-ary Add or Mul, or a Clip, has no ufunc (in
    the windowed Normal's conditional that loop cost as much as the likelihood itself).
    """
    op = node.op.scalar_op
    out = node.outputs[0]
    if isinstance(op, (ps.Add, ps.Mul)) and len(node.inputs) > 2:
        result = reduce(pt.add if isinstance(op, ps.Add) else pt.mul, node.inputs)
    elif isinstance(op, ps.Clip):
        x, lower, upper = node.inputs
        result = pt.minimum(pt.maximum(x, lower), upper)
    else:
        return None
    return [result if result.dtype == out.dtype else pt.cast(result, out.dtype)]


# The convolution's graph first, so that its own sums and clips are made binary after it.
QUICK_MODE = get_mode("FAST_COMPILE").register(
    (in2out(logp_as_graph, grad_as_graph), 90.0), (in2out(_binary_elemwise), 100.0)
)
"""PyTensor's FAST_COMPILE (Python-linked, compiled in a fraction of a second) with every
Elemwise left on a NumPy ufunc."""
