"""Exact likelihoods of released counts as PyTensor log-probabilities (no CLT), for NUTS.

The same sums as :mod:`pymc_dp.kernels.exact_counts`: a log-sum over every s = 0, …, N for a
Binomial count, written in PyTensor so that θ's gradient comes from autodiff; and, for
Multinomial counts, the NumPy forward recursion over categories inside an ``Op`` whose gradient
is E[s | θ, y] / θ (forward-backward), which keeps the graph small and quick to compile (autodiff
through the recursion's gathers took seconds to compile and ~0.5 ms per gradient at n = 100).
:func:`ExactReleasedCount` and
:func:`ExactReleasedCounts` are the observed nodes that
:class:`~pymc_dp.NoisySuffStat` adds with ``likelihood="exact"``.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.gradient import grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.graph.replace import _vectorize_node
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.extra_ops import broadcast_shape
from pytensor.tensor.variable import TensorVariable

from pymc_dp.kernels.exact_counts import (
    NoiseLaw,
    binomial_expected_count,
    binomial_log_likelihood,
    discrete_gaussian_log_normaliser,
    log_tanh_half_inverse,
    multinomial_expected_counts,
    multinomial_log_likelihood,
)

__all__ = [
    "BinomialLogLikelihood",
    "ExactLikelihoodOp",
    "ExactReleasedCount",
    "ExactReleasedCounts",
    "MultinomialLogLikelihood",
    "binomial_exact_logp",
    "draw_noise",
    "multinomial_exact_logp",
    "noise_logpdf",
]


def noise_logpdf(d: Any, noise: NoiseLaw) -> TensorVariable:
    """Log density (probability, for integer laws) of the noise at ``d``, as PyTensor."""
    b = float(noise.scale)
    if noise.kind == "laplace":
        return -pt.abs(d) / b - math.log(2.0 * b)
    if noise.kind == "discrete-laplace":
        return -pt.abs(d) / b + log_tanh_half_inverse(b)
    if noise.kind == "discrete-gaussian":
        return -0.5 * pt.sqr(d / b) - discrete_gaussian_log_normaliser(b)
    raise ValueError(f"unknown noise kind {noise.kind!r}")


def draw_noise(rng: np.random.Generator, noise: NoiseLaw, size: Any) -> np.ndarray:
    """Draws of the noise law (for posterior predictive releases)."""
    b = float(noise.scale)
    if noise.kind == "laplace":
        return rng.laplace(0.0, b, size=size)
    if noise.kind == "discrete-laplace":
        # The difference of two geometric counts is two-sided geometric: P(k) ∝ e^{-|k|/b}.
        p = -math.expm1(-1.0 / b)
        return (rng.geometric(p, size=size) - rng.geometric(p, size=size)).astype(np.float64)
    if b >= 2.0:
        # Rounded normal draws: their law differs from the discrete Gaussian by a relative
        # O(1/(24 b²)), well below what predictive checks resolve.
        return np.round(rng.normal(0.0, b, size=size))
    half = math.ceil(40.0 * b) + 1
    k = np.arange(-half, half + 1)
    w = np.exp(-0.5 * (k / b) ** 2)
    return rng.choice(k, size=size, p=w / w.sum()).astype(np.float64)


def binomial_exact_logp(value: Any, theta: Any, total: int, noise: NoiseLaw) -> TensorVariable:
    """Log p(y | θ) = log Σ_s Binomial(s; total, θ) · k(y - s), summed over every s.

    ``value`` and ``theta`` are scalars or broadcast elementwise (:class:`BinomialLogLikelihood`).
    """
    return BinomialLogLikelihood(total, noise)(value, theta)


class ExactLikelihoodOp(Op):
    """Base of the exact-likelihood Ops: log p(y | ·) of ``n`` records under a noise law.

    With ``gradient=True`` the Op outputs instead the gradient in its input number
    :attr:`wrt` (a vector like that input), which the plain Op's gradient uses, so NUTS can run
    on it. Subclasses set :attr:`ndims` (the inputs' dimensions), :attr:`signatures` (the
    plain and gradient gufunc signatures, for PyTensor's ``Blockwise``) and :meth:`perform`.
    """

    __props__ = ("n", "kind", "scale", "gradient")
    ndims: ClassVar[tuple[int, int]]
    signatures: ClassVar[tuple[str, str]]
    wrt: ClassVar[int]

    def __init__(self, n: int, noise: NoiseLaw, gradient: bool = False):
        self.n = int(n)
        self.kind = str(noise.kind)
        self.scale = float(noise.scale)
        self.gradient = bool(gradient)
        self.gufunc_signature = self.signatures[int(self.gradient)]

    @property
    def noise(self) -> NoiseLaw:
        """The noise law."""
        return NoiseLaw(self.kind, self.scale)

    def make_node(self, *inputs: Any) -> Apply:  # noqa: D102
        inputs = [pt.as_tensor_variable(x).astype("float64") for x in inputs]
        if tuple(x.type.ndim for x in inputs) != self.ndims:
            raise TypeError(f"{type(self).__name__} takes inputs of dimensions {self.ndims}")
        out = inputs[self.wrt].type() if self.gradient else pt.dscalar()
        return Apply(self, inputs, [out])

    def infer_shape(self, *args: Any) -> list:  # noqa: D102
        # (fgraph, node, shapes) in PyTensor 2, (node, shapes) in PyTensor 3
        shapes = args[-1]
        return [shapes[self.wrt]] if self.gradient else [()]

    def pullback(self, inputs, outputs, cotangents):  # noqa: D102
        if self.gradient:
            return [grad_not_implemented(self, i, x) for i, x in enumerate(inputs)]
        d_wrt = type(self)(self.n, self.noise, gradient=True)(*inputs)
        return [
            cotangents[0] * d_wrt if i == self.wrt else grad_not_implemented(self, i, x)
            for i, x in enumerate(inputs)
        ]

    def L_op(self, inputs, outputs, output_grads):  # noqa: D102
        # PyTensor 2 calls L_op; PyTensor 3 calls pullback.
        return self.pullback(inputs, outputs, output_grads)


class BinomialLogLikelihood(ExactLikelihoodOp):
    """log p(y | θ) of released Binomial counts out of ``n`` trials, elementwise over y and θ.

    With ``gradient=True`` the output is instead ∂ log p / ∂θ = E[s]/θ - (n - E[s])/(1 - θ).
    A NumPy kernel rather than a PyTensor graph: in GridStep's quickly compiled graphs a
    log-sum over the n + 1 counts ran element by element in Python (4 s per grid at n = 5000).
    """

    ndims = (0, 0)
    signatures = ("(),()->()", "(),()->()")
    wrt = 1

    def make_node(self, value: Any, theta: Any) -> Apply:  # noqa: D102
        value, theta = (pt.as_tensor_variable(x).astype("float64") for x in (value, theta))
        ndim = max(value.type.ndim, theta.type.ndim)
        out = pt.TensorType("float64", shape=(None,) * ndim)()
        return Apply(self, [value, theta], [out])

    def infer_shape(self, *args: Any) -> list:  # noqa: D102
        value, theta = args[-1]
        return [broadcast_shape(value, theta, arrays_are_shapes=True)]

    def perform(self, node, inputs, outputs) -> None:  # noqa: D102
        value, theta = inputs
        if self.gradient:
            mean = binomial_expected_count(value, theta, self.n, self.noise)
            with np.errstate(divide="ignore", invalid="ignore"):
                out = np.where(theta > 0, mean / theta, 0.0) - np.where(
                    theta < 1, (self.n - mean) / (1.0 - theta), 0.0
                )
        else:
            out = binomial_log_likelihood(value, theta, self.n, self.noise)
        outputs[0][0] = np.asarray(out, dtype=np.float64)

    def pullback(self, inputs, outputs, cotangents):  # noqa: D102
        grads = super().pullback(inputs, outputs, cotangents)
        theta = inputs[1]
        extra = grads[1].type.ndim - theta.type.ndim
        if extra > 0 and not self.gradient:  # θ was broadcast against a batch of values
            grads[1] = pt.sum(grads[1], axis=tuple(range(extra)))
        return grads


@_vectorize_node.register(BinomialLogLikelihood)
def _vectorize_binomial(op: BinomialLogLikelihood, node: Apply, *batched_inputs: Any) -> Any:
    # Elementwise: a batch is the same Op on the batched arrays.
    return op.make_node(*batched_inputs).outputs


class MultinomialLogLikelihood(ExactLikelihoodOp):
    """log p(y | θ) of K released counts, s ~ Multinomial(n, θ) summed out exactly.

    Inputs are the released counts ``y`` and θ, each of shape ``(K,)``. With
    ``gradient=True`` the output is instead ∂ log p / ∂θ = E[s | θ, y] / θ (shape ``(K,)``).
    """

    ndims = (1, 1)
    signatures = ("(k),(k)->()", "(k),(k)->(k)")
    wrt = 1

    def perform(self, node, inputs, outputs) -> None:  # noqa: D102
        value, theta = inputs
        if self.gradient:
            mean = multinomial_expected_counts(value, theta, self.n, self.noise)
            # A category with θ_j = 0 has s_j = 0 for sure: no pull on θ_j from the data.
            out = np.divide(mean, theta, out=np.zeros_like(mean), where=theta > 0)
        else:
            out = multinomial_log_likelihood(value, theta, self.n, self.noise)
        outputs[0][0] = np.asarray(out, dtype=np.float64)


def multinomial_exact_logp(
    value: Any, theta: Any, n: int, noise: NoiseLaw, categories: int
) -> TensorVariable:
    """Log p(y | θ) of K released counts, s ~ Multinomial(n, θ), by the forward recursion.

    ``value`` and ``theta`` have shape ``(K,)`` with K = ``categories``; cost O(K n²) per
    evaluation, and as much again for the gradient.
    """
    value = pt.as_tensor_variable(value)
    theta = pt.as_tensor_variable(theta)
    if value.type.shape[-1:] not in ((None,), (int(categories),)):
        raise ValueError(f"value must hold {categories} counts (got shape {value.type.shape})")
    op = MultinomialLogLikelihood(n, noise)
    if value.type.ndim > 1 or theta.type.ndim > 1:
        op = Blockwise(op)
    return op(value, theta)


def ExactReleasedCount(
    name: str, theta: Any, *, total: int, noise: NoiseLaw, **kwargs: Any
) -> TensorVariable:
    """A released Binomial count with s summed out exactly (a ``CustomDist``).

    Parameters
    ----------
    name
        Variable name.
    theta
        Success probability p.
    total
        Trials behind s: n · trials.
    noise
        The release's noise law.
    **kwargs
        Passed to :class:`pymc.CustomDist` (``observed``).
    """

    def random(p, rng=None, size=None):
        s = rng.binomial(total, p, size=size)
        return s + draw_noise(rng, noise, np.shape(s))

    return pm.CustomDist(
        name,
        theta,
        logp=lambda value, p: binomial_exact_logp(value, p, total, noise),
        random=random,
        signature="()->()",
        dtype="float64",
        **kwargs,
    )


def ExactReleasedCounts(
    name: str, theta: Any, *, n: int, categories: int, noise: NoiseLaw, **kwargs: Any
) -> TensorVariable:
    """K released counts with the multinomial s summed out exactly (a ``CustomDist``).

    Parameters
    ----------
    name
        Variable name.
    theta
        Category probabilities, shape ``(K,)``.
    n
        Number of records.
    categories
        K.
    noise
        The release's noise law.
    **kwargs
        Passed to :class:`pymc.CustomDist` (``observed``, ``dims``).
    """

    def random(p, rng=None, size=None):
        s = rng.multinomial(n, p, size=size)
        return s + draw_noise(rng, noise, np.shape(s))

    return pm.CustomDist(
        name,
        theta,
        logp=lambda value, p: multinomial_exact_logp(value, p, n, noise, categories),
        random=random,
        signature="(k)->(k)",
        dtype="float64",
        **kwargs,
    )
