"""The exact likelihood of grouped Categorical counts over the noise's window, on every backend.

For each group g, log p(y_g | θ_g) = log Σ_s Multinomial(s; n_g, θ_g) · Π_j k(y_gj − s_j), the sum
over the count vectors s (Σ_j s_j = n_g) that the noise lets through: those whose noise term
Π_j k(y_gj − s_j) is within e^-:data:`NOISE_TAIL` of its largest value over the simplex, k_max.
Every term left out is at most Multinomial(s; n_g, θ_g) · k_max · e^-40, so together at most
k_max · e^-40 whatever θ: the result is a lower bound on the exact likelihood L(θ) within a
relative e^-40 · k_max / L(θ) ≈ 4·10⁻¹⁸ · k_max / L(θ), below 10⁻¹² wherever L(θ) is above
4·10⁻⁶ of k_max (as for :func:`~pymc_dp.likelihoods.exact.binomial_exact_logp`; where θ has
posterior mass L(θ) is within a few orders of magnitude of its largest value).

The kept s depend on y only, so they, their log multinomial coefficients and their noise terms
are constants of the graph (:func:`window_table`, computed once at model build), and an
evaluation is one log-sum-exp of (coefficient + noise + Σ_j s_j log θ_gj) over a table of shape
(groups, terms), padded with −∞, with its gradient E[s | y, θ] / θ. :class:`TableLogLikelihood`
computes both in one compiled pass (:mod:`pymc_dp.kernels.multinomial_table`, which also leaves
out the terms 40 nats below each group's largest, within a stated bound) on the C and Numba
(nutpie) backends; JAX (numpyro, blackjax) takes the same numbers as a PyTensor graph
(:func:`table_graph`), where the recursion of
:class:`~pymc_dp.likelihoods.exact.GroupedMultinomialLogLikelihood` is a Python ``Op``. It is
used while the table holds at most :data:`WINDOW_MAX_TERMS` entries (padding included): a group
of n records and K = 3 has at most (n + 1)(n + 2)/2 of them (5151 at n = 100), fewer where the
noise is narrow (at most about (40 b)² at Laplace scale b, whatever n; (40 b)³/2 for K = 4, so
K = 4 fits at ε ≥ 0.9 with Δ = 2). The kept vectors are enumerated directly
(:func:`~pymc_dp.kernels.count_window.kept_counts`), not filtered from the box of K − 1 counts
within the noise's reach of y, which holds 5 (K = 3) and 14-19 (K = 4) times as many.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytensor.tensor as pt
from pytensor.compile import optdb
from pytensor.gradient import DisconnectedType, grad_not_implemented, grad_undefined
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.graph.rewriting.basic import node_rewriter
from pytensor.tensor.variable import TensorVariable
from scipy import special

from pymc_dp._compat import pullback_op
from pymc_dp.kernels.count_window import kept_counts
from pymc_dp.kernels.exact_counts import NOISE_TAIL, NoiseLaw
from pymc_dp.kernels.multinomial_table import TAIL, compiled_table_log_likelihood, table_key
from pymc_dp.likelihoods.numba_ops import register_numba_scalar

__all__ = [
    "NOISE_TAIL",
    "WINDOW_MAX_TERMS",
    "TableLogLikelihood",
    "table_graph",
    "window_logp",
    "window_table",
]


WINDOW_MAX_TERMS = 400_000
"""Largest table (groups × terms, padded) summed over the window (about 2 ms per logp and
gradient on the C backend as a graph, before the compiled kernel); larger tables use the
compiled recursion ``Op``."""


def _group_terms(
    y: np.ndarray, n: int, noise: NoiseLaw, budget: float
) -> tuple[np.ndarray, np.ndarray] | None:
    """(s, constant) of one group's kept count vectors, or None if more than ``budget``."""
    s = kept_counts(y, n, noise, budget)
    if s is None:
        return None
    coefficient = special.gammaln(n + 1.0) - np.sum(special.gammaln(s + 1.0), axis=1)
    return s, coefficient


def window_table(
    released: npt.ArrayLike, sizes: Sequence[int], noise: NoiseLaw
) -> tuple[np.ndarray, np.ndarray] | None:
    """The kept count vectors of every group and their log coefficients, padded.

    Parameters
    ----------
    released
        The released counts, shape ``(G, K)``.
    sizes
        Records per group n_g.
    noise
        The release's noise law.

    Returns
    -------
    (s, coefficient) or None
        s of shape ``(G, T, K)`` and log n_g! − Σ_j log s_j! of shape ``(G, T)`` (−∞ on the
        padding), T the most terms of any group; None if G · T would exceed
        :data:`WINDOW_MAX_TERMS`.
    """
    y = np.asarray(released, dtype=np.float64)
    groups = [
        _group_terms(row, int(n), noise, WINDOW_MAX_TERMS) for row, n in zip(y, sizes, strict=True)
    ]
    if any(g is None for g in groups):
        return None
    most = max(len(s) for s, _ in groups)
    if most * len(groups) > WINDOW_MAX_TERMS:
        return None
    s_out = np.zeros((len(groups), most, y.shape[1]))
    c_out = np.full((len(groups), most), -np.inf)
    for g, (s, c) in enumerate(groups):
        s_out[g, : len(s)] = s
        c_out[g, : len(s)] = c
    return s_out, c_out


def window_logp(
    value: Any, theta: Any, table: tuple[np.ndarray, np.ndarray], noise: NoiseLaw
) -> TensorVariable:
    """Log p(y_g | θ_g) of each group, shape ``(G,)``, from :func:`window_table`'s table.

    ``value`` (the released counts) and ``theta`` have shape ``(G, K)``; the noise terms are
    computed from ``value`` (constants when it is the observed data).
    """
    s, coefficient = table
    value = pt.as_tensor_variable(value).astype("float64")
    theta = pt.as_tensor_variable(theta).astype("float64")
    d = value[:, None, :] - s
    b = float(noise.scale)
    per_count = -0.5 * pt.sqr(d / b) if noise.kind == "discrete-gaussian" else -pt.abs(d) / b
    fixed = coefficient + pt.sum(per_count, axis=-1) + s.shape[-1] * noise.log_constant
    return TableLogLikelihood()(theta, pt.constant(np.ascontiguousarray(s)), fixed)[0]


def table_graph(theta: Any, s: Any, fixed: Any) -> list[TensorVariable]:
    """:class:`TableLogLikelihood`'s outputs as a PyTensor graph (JAX), the gradient by autodiff.

    Σ_j s_j log θ_j as K products of (G, T) planes: a (G, T, K) product with a switch for
    0 · log 0 took 1.1 (C) to 1.6 (Numba) times as long on the benchmark's table. θ_j = 0 is
    read as the smallest normal double, as in the compiled kernel.
    """
    log_theta = pt.log(pt.maximum(theta, np.finfo(np.float64).tiny))
    counts = sum(s[..., j] * log_theta[:, j, None] for j in range(int(s.type.shape[-1])))
    logp = pt.logsumexp(fixed + counts, axis=-1)
    return [logp, pt.grad(logp.sum(), theta)]


@pullback_op
class TableLogLikelihood(Op):
    """Each group's log p(y_g | θ_g) ``(G,)`` and its gradient in θ ``(G, K)`` from the table.

    Inputs θ ``(G, K)``, the kept count vectors s ``(G, T, K)`` and their constant terms
    ``(G, T)`` (:func:`window_logp`). One compiled pass
    (:func:`~pymc_dp.kernels.multinomial_table.table_log_likelihood`, which leaves out the terms
    :data:`~pymc_dp.kernels.multinomial_table.TAIL` nats below a group's largest, with its
    bound) gives both outputs: the gradient of the first is the second, so logp and dlogp
    compiled together (NUTS) run it once. The C backend calls the Numba build from
    ``perform``; Numba (nutpie) compiles it into the graph; JAX (numpyro, blackjax) takes
    :func:`table_graph` instead.
    """

    __props__ = ()

    def make_node(self, theta: Any, s: Any, fixed: Any) -> Apply:  # noqa: D102
        theta = pt.as_tensor_variable(theta).astype("float64")
        s = pt.as_tensor_variable(s).astype("float64")
        fixed = pt.as_tensor_variable(fixed).astype("float64")
        if theta.type.ndim != 2 or s.type.ndim != 3 or fixed.type.ndim != 2:
            raise TypeError("TableLogLikelihood takes θ (G, K), s (G, T, K) and fixed (G, T)")
        outputs = [pt.tensor(dtype="float64", shape=(theta.type.shape[0],)), theta.type()]
        return Apply(self, [theta, s, fixed], outputs)

    def perform(self, node: Apply, inputs: list, outputs: list) -> None:  # noqa: D102
        theta, s, fixed = (np.ascontiguousarray(v, dtype=np.float64) for v in inputs)
        logp, grad = compiled_table_log_likelihood()(theta, s, fixed, TAIL)
        outputs[0][0], outputs[1][0] = logp, grad

    def infer_shape(self, *args: Any) -> list:  # noqa: D102
        # (fgraph, node, shapes) before PyTensor 3, (node, shapes) from it.
        shapes = args[-1]
        return [(shapes[0][0],), shapes[0]]

    def pullback(self, inputs: list, outputs: list, cotangents: list) -> list:  # noqa: D102
        _, s, fixed = inputs
        g_logp, g_grad = cotangents
        if not isinstance(g_grad.type, DisconnectedType):
            return [grad_not_implemented(self, i, v) for i, v in enumerate(inputs)]
        return [
            g_logp[:, None] * outputs[1],
            grad_undefined(self, 1, s, "the table of count vectors is a constant"),
            grad_not_implemented(self, 2, fixed, "the noise terms are constants of the release"),
        ]


def _numba_table(op: Any) -> tuple[Any, str]:
    kernel = compiled_table_log_likelihood()

    def table_log_likelihood(theta, s, fixed):
        return kernel(theta, s, fixed, TAIL)

    return table_log_likelihood, f"pmdp_multinomial_table_{TAIL!r}_{table_key()}"


@node_rewriter([TableLogLikelihood])
def _table_as_graph(fgraph: Any, node: Apply) -> list | None:
    return table_graph(*node.inputs)


# JAX (and Numba, where PyTensor cannot take the compiled kernel) take the graph form.
_HAS_NUMBA = register_numba_scalar(TableLogLikelihood, _numba_table)
_GRAPH_TAGS = ("jax",) if _HAS_NUMBA else ("jax", "numba")
optdb["specialize"].register("pmdp_multinomial_table_as_graph", _table_as_graph, *_GRAPH_TAGS)
