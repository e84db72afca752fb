"""The CLT law of a released statistic, for one release or for every group in one graph.

The CLT moments of s are n times those of one record's statistic (t(x), or t(x)·1[a ≤ x ≤ b]
for a window), and so is the region s lies in. A grouped release therefore needs the record's
moments once, as a graph in one θ, evaluated for every group's θ_g by
:func:`~pytensor.graph.replace.vectorize_graph` and scaled by the vector of n_g: one vectorised
expression whatever the number of groups, instead of a subgraph per group (whose compile time
grew with G and whose evaluation paid PyTensor's per-node overhead G times).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytensor.tensor as pt
from pytensor.graph import rewrite_graph
from pytensor.graph.basic import Constant
from pytensor.graph.replace import vectorize_graph
from pytensor.graph.rewriting.basic import in2out, node_rewriter
from pytensor.tensor.basic import Join, get_underlying_scalar_constant_value
from pytensor.tensor.exceptions import NotScalarConstantError
from pytensor.tensor.subtensor import Subtensor, indices_from_subtensor
from pytensor.tensor.variable import TensorVariable

from pymc_dp.families import ExponentialFamily

__all__ = ["grouped_joint_clt", "grouped_joint_clt_entries", "grouped_released_clt"]


def _core_theta(family: ExponentialFamily) -> TensorVariable:
    """A symbolic θ of one record's shape (scalar, or the family's parameter vector)."""
    return family.prior_example().type()


def _per_group(theta: TensorVariable, core: TensorVariable) -> TensorVariable:
    """θ with the groups first: ``(G, *core shape)``."""
    theta = pt.as_tensor_variable(theta)
    if theta.type.ndim != core.type.ndim + 1:
        raise ValueError(
            f"θ must have the groups first and then θ's shape {core.type.shape} "
            f"(got static shape {theta.type.shape})"
        )
    return theta


def grouped_released_clt(
    family: ExponentialFamily,
    theta: Any,
    sizes: npt.ArrayLike,
    bounds: tuple[float, float] | None,
) -> tuple[TensorVariable, TensorVariable, npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """CLT mean, variance and region of each group's released scalar statistic.

    The same numbers as :meth:`~pymc_dp.families.base.ExponentialFamily.released_clt` of each
    group, from one vectorised graph.

    Parameters
    ----------
    family
        A family whose released statistic is one number.
    theta
        θ_g, the groups first (shape ``(G,)`` for a scalar θ).
    sizes
        n_g, the records of each group.
    bounds
        The window of a windowed family, else ``None``.

    Returns
    -------
    mean, var
        Shape ``(G,)``.
    lower, upper
        The region each group's statistic lies in, shape ``(G,)``.

    Examples
    --------
    >>> import numpy as np, pytensor.tensor as pt
    >>> from pymc_dp.families import Binomial
    >>> mean, var, lower, upper = grouped_released_clt(
    ...     Binomial(trials=3), pt.as_tensor(np.array([0.2, 0.5])), [10, 100], None)
    >>> np.round(mean.eval(), 9).tolist(), np.round(var.eval(), 9).tolist(), upper.tolist()
    ([6.0, 150.0], [4.8, 75.0], [30.0, 300.0])
    """
    core = _core_theta(family)
    theta = _per_group(theta, core)
    n = np.asarray(sizes, dtype=np.float64).reshape(-1)
    # Everything about s is n times the same for one record: moments and region alike.
    mean1, var1, lower1, upper1 = family.released_clt(core, 1, bounds)
    mean, var = vectorize_graph([mean1, var1], replace={core: theta})
    with np.errstate(invalid="ignore"):  # 0 · inf of an unbounded side stays that side
        lower = np.where(np.isinf(lower1), lower1, n * lower1)
        upper = np.where(np.isinf(upper1), upper1, n * upper1)
    return n * pt.reshape(mean, (-1,)), n * pt.reshape(var, (-1,)), lower, upper


@node_rewriter([Subtensor])
def _pick_from_join(fgraph: Any, node: Any) -> list | None:
    """``join(axis, a, b, ...)[:, ..., i, rest]`` → the part holding entry ``i``, indexed.

    What ``pt.stack`` and ``pt.concatenate`` build and indexing takes apart, for parts of known
    length on the axis; PyTensor's own lift (``local_subtensor_of_join``) leaves a constant
    index on the join axis in place.
    """
    joined, *index = node.inputs
    if not (joined.owner and isinstance(joined.owner.op, Join)):
        return None
    axis_var, *parts = joined.owner.inputs
    if not isinstance(axis_var, Constant):
        return None
    axis = int(axis_var.data) % joined.type.ndim
    entries = indices_from_subtensor(index, node.op.idx_list)
    if len(entries) <= axis or any(e != slice(None) for e in entries[:axis]):
        return None
    widths = [p.type.shape[axis] for p in parts]
    if None in widths or isinstance(entries[axis], slice):
        return None
    try:
        at = int(get_underlying_scalar_constant_value(entries[axis])) % sum(widths)
    except NotScalarConstantError:
        return None
    for part, width in zip(parts, widths):
        if at < width:
            return [part[(*entries[:axis], at, *entries[axis + 1 :])]]
        at -= width
    return None


def _simplified(outputs: list[TensorVariable]) -> list[TensorVariable]:
    """``outputs`` with stacks taken apart by indexing removed (canonical rewrites, twice)."""
    for _ in range(2):
        outputs = rewrite_graph(
            outputs, include=("canonicalize",), custom_rewrite=in2out(_pick_from_join)
        )
    return outputs


def grouped_joint_clt_entries(
    family: ExponentialFamily, theta: Any, sizes: npt.ArrayLike, bounds: tuple[float, float]
) -> tuple[list[TensorVariable], dict[tuple[int, int], TensorVariable]]:
    """:func:`grouped_joint_clt` entry by entry: ``(G,)`` means and covariances (i ≤ j).

    The entries are simplified while θ is still one record's and then vectorised, so a
    consumer that reads them one by one (the Normal pair's s₂ | s₁) sees elementwise graphs
    only: stacking them into ``(G, k)`` and ``(G, k, k)`` arrays and indexing those leaves a
    Join, Split or IncSubtensor per entry in the gradient, which cost more than its arithmetic.
    """
    core = _core_theta(family)
    theta = _per_group(theta, core)
    n = np.asarray(sizes, dtype=np.float64).reshape(-1)
    k = family.stat_size
    mean1, cov1 = family.joint_clt(core, 1, bounds)
    pairs = [(i, j) for i in range(k) for j in range(i, k)]
    entries = _simplified([mean1[i] for i in range(k)] + [cov1[i, j] for i, j in pairs])
    entries = [n * e for e in vectorize_graph(entries, replace={core: theta})]
    return entries[:k], dict(zip(pairs, entries[k:]))


def grouped_joint_clt(
    family: ExponentialFamily, theta: Any, sizes: npt.ArrayLike, bounds: tuple[float, float]
) -> tuple[TensorVariable, TensorVariable]:
    """CLT mean ``(G, k)`` and covariance ``(G, k, k)`` of each group's released window vector.

    The released block ŝ of :meth:`~pymc_dp.families.truncated.TruncatedFamily.joint_clt`, for
    every group from one vectorised graph.
    """
    means, covs = grouped_joint_clt_entries(family, theta, sizes, bounds)
    k = len(means)
    rows = [pt.stack([covs[min(i, j), max(i, j)] for j in range(k)], axis=-1) for i in range(k)]
    return pt.stack(means, axis=-1), pt.stack(rows, axis=-2)
