"""A released pair of statistics with s integrated out, as a PyTensor log-probability.

The windowed Normal and LogNormal families with unknown σ release ŝ = (Σz, Σz²) over a window,
each component with its own Laplace noise. :func:`CollapsedLaplacePair` is their observed node
when s is integrated out entirely: y | θ is the bivariate normal–Laplace convolution of
:mod:`pymc_dp.kernels.collapsed_pair`, evaluated by one Op whose gradient in the CLT mean and
covariance comes from the same quadrature (E[s | y] and E[ssᵀ | y]), so the graph stays small
and NUTS, or a block of θ drawn by :class:`~pymc_dp.IndependenceStep`, samples θ | y without
the Laplace mixing variances that pin θ in the partially collapsed sampler.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType, grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.graph.replace import _vectorize_node
from pytensor.tensor.variable import TensorVariable

from pymc_dp.kernels.collapsed_pair import pair_log_likelihood

__all__ = ["CollapsedLaplacePair", "PairLogLikelihood", "pair_logp"]


class PairLogLikelihood(Op):
    """log p(y | m, V) of a released pair, with d/dm and d/dV as two more outputs.

    Inputs ``y (..., 2)``, ``m (..., 2)``, ``V (..., 2, 2)`` and the Laplace scales
    ``b (..., 2)`` (a grouped release's node broadcasts b to every group), with any leading
    batch dimensions; outputs log p ``(...)`` and its gradients. The gradient outputs are what
    the Op's own gradient uses, so a logp-and-gradient graph evaluates the quadrature once.
    """

    __props__ = ()

    def make_node(self, value: Any, mean: Any, cov: Any, scale: Any) -> Apply:  # noqa: D102
        value, mean, cov, scale = (
            pt.as_tensor_variable(x).astype("float64") for x in (value, mean, cov, scale)
        )
        if value.type.ndim < 1 or mean.type.ndim < 1 or cov.type.ndim < 2 or scale.type.ndim < 1:
            raise TypeError(
                "PairLogLikelihood takes y (..., 2), m (..., 2), V (..., 2, 2), b (..., 2)"
            )
        batch = max(value.type.ndim - 1, mean.type.ndim - 1, cov.type.ndim - 2, scale.type.ndim - 1)
        outputs = [
            pt.TensorType("float64", shape=(None,) * batch)(),
            pt.TensorType("float64", shape=(None,) * batch + (2,))(),
            pt.TensorType("float64", shape=(None,) * batch + (2, 2))(),
        ]
        return Apply(self, [value, mean, cov, scale], outputs)

    def perform(self, node: Apply, inputs: list, output_storage: list) -> None:  # noqa: D102
        value, mean, cov, scale = inputs
        out = pair_log_likelihood(released=value, mean=mean, cov=cov, scale=scale)
        for storage, result in zip(output_storage, out):
            storage[0] = np.asarray(result, dtype=np.float64)

    def pullback(self, inputs: list, outputs: list, cotangents: list) -> list:  # noqa: D102
        value, mean, cov, scale = inputs
        if any(not isinstance(g.type, DisconnectedType) for g in cotangents[1:]):
            raise NotImplementedError("PairLogLikelihood has no second derivatives")
        g = cotangents[0]
        return [
            grad_not_implemented(self, 0, value),
            _sum_to(g[..., None] * outputs[1], mean),
            _sum_to(g[..., None, None] * outputs[2], cov),
            grad_not_implemented(self, 3, scale),
        ]

    def L_op(self, inputs: list, outputs: list, output_grads: list) -> list:  # noqa: D102
        # PyTensor 2 calls L_op; PyTensor 3 calls pullback.
        return self.pullback(inputs, outputs, output_grads)

    def connection_pattern(self, node: Apply) -> list:  # noqa: D102
        return [
            [True, False, False],
            [True, False, False],
            [True, False, False],
            [True, False, False],
        ]


def _sum_to(grad: TensorVariable, like: TensorVariable) -> TensorVariable:
    """Sum a batched gradient over the leading axes that ``like`` was broadcast along."""
    extra = grad.type.ndim - like.type.ndim
    if extra > 0:
        grad = grad.sum(axis=tuple(range(extra)))
    return grad


_pair_op = PairLogLikelihood()


@_vectorize_node.register(PairLogLikelihood)
def _vectorize_pair(op: PairLogLikelihood, node: Apply, *batched: Any) -> Any:
    # The Op takes any leading batch dimensions, so a batch is the same Op on batched arrays.
    return op.make_node(*batched).outputs


def pair_logp(value: Any, mean: Any, cov: Any, scale: Any) -> TensorVariable:
    """Log p(y | m, V) of a released pair (see :class:`PairLogLikelihood`), as PyTensor.

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_dp.kernels.collapsed_pair import normal_laplace_log_density
    >>> y, b = np.array([1.0, -2.0]), np.array([0.5, 2.0])
    >>> got = pair_logp(y, np.zeros(2), np.diag([4.0, 1.0]), b).eval()
    >>> bool(np.isclose(got, normal_laplace_log_density(y, np.array([4.0, 1.0]), b).sum()))
    True
    """
    return _pair_op(value, mean, cov, scale)[0]


def _random(mean: Any, cov: Any, scale: Any, rng: np.random.Generator, size: Any) -> np.ndarray:
    s = rng.multivariate_normal(mean, cov, size=size, method="eigh")
    return s + rng.laplace(0.0, 1.0, size=np.shape(s)) * scale


def CollapsedLaplacePair(
    name: str, mean: Any, cov: Any, scale: Any, **kwargs: Any
) -> TensorVariable:
    """A released pair y = ŝ + Laplace(b) with ŝ ~ N(mean, cov) integrated out (a CustomDist).

    Parameters
    ----------
    name
        Variable name.
    mean, cov
        CLT mean ``(2,)`` and covariance ``(2, 2)`` of the released statistic given θ.
    scale
        Laplace scales ``(2,)`` of the two components (Δ/ε each).
    **kwargs
        Passed to :class:`pymc.CustomDist` (``observed``, ``dims``).

    Notes
    -----
    Random draws (posterior predictive) draw ŝ from its normal and add the noise, as the
    released statistic was made.
    """
    return pm.CustomDist(
        name,
        mean,
        cov,
        scale,
        logp=lambda value, m, v, b: pair_logp(value, m, v, b),
        random=_random,
        signature="(k),(k,k),(k)->(k)",
        **kwargs,
    )
