"""Exact likelihoods of released counts as PyTensor log-probabilities (no CLT), for NUTS.

A released statistic is y = s + noise: an exact law of s given θ (:class:`StatisticLaw`)
combined with the mechanism's noise law (:class:`~pymc_dp.kernels.exact_counts.NoiseLaw`,
:func:`noise_logpdf`, :func:`draw_noise`). :func:`released_statistic` makes the observed node
of any such pair, for one release or one per group, so a new law of s, or a new noise law,
is added in one place. The laws here are the counts of :mod:`pymc_dp.kernels.exact_counts`:
for a Binomial count, a PyTensor log-sum over the s within the noise's reach of y (a window whose
left-out terms are bounded in :func:`binomial_exact_logp`; :class:`BinomialCounts`), and for
Multinomial counts the NumPy forward recursion over categories inside an ``Op`` whose gradient
is E[s | θ, y] / θ (forward-backward), which keeps the graph small and quick to compile (autodiff
through the recursion's gathers took seconds to compile and ~0.5 ms per gradient at n = 100)
(:class:`MultinomialCounts`). :func:`ExactReleasedCount` and :func:`ExactReleasedCounts` are the
observed nodes that :class:`~pymc_dp.NoisySuffStat` adds with ``likelihood="exact"``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.gradient import disconnected_grad, grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.graph.replace import _vectorize_node
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.extra_ops import broadcast_shape
from pytensor.tensor.variable import TensorVariable

from pymc_dp._compat import pullback_op
from pymc_dp.kernels.exact_counts import (
    NOISE_TAIL,
    NoiseLaw,
    multinomial_expected_counts,
    multinomial_log_likelihood,
)
from pymc_dp.likelihoods.multinomial_window import window_logp, window_table

__all__ = [
    "NOISE_TAIL",
    "BinomialCounts",
    "ElementwiseInTheta",
    "ExactLikelihoodOp",
    "ExactReleasedCount",
    "ExactReleasedCounts",
    "MultinomialCounts",
    "MultinomialLogLikelihood",
    "StatisticLaw",
    "binomial_exact_logp",
    "draw_noise",
    "multinomial_exact_logp",
    "noise_half_width",
    "noise_logpdf",
    "released_statistic",
]


def noise_logpdf(d: Any, noise: NoiseLaw) -> TensorVariable:
    """Log density (probability, for integer laws) of the noise at ``d``, as PyTensor.

    :meth:`NoiseLaw.logpdf <pymc_dp.kernels.exact_counts.NoiseLaw.logpdf>` in PyTensor.
    """
    b = float(noise.scale)
    if noise.kind == "discrete-gaussian":
        return -0.5 * pt.sqr(d / b) + noise.log_constant
    return -pt.abs(d) / b + noise.log_constant


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


def noise_half_width(noise: NoiseLaw) -> float:
    """W with k(d) ≤ k(0) · e^{-NOISE_TAIL} wherever abs(d) > W: the noise's negligible tails."""
    return noise.half_width


def binomial_exact_logp(value: Any, theta: Any, total: Any, noise: NoiseLaw) -> TensorVariable:
    """Log p(y | θ) = log Σ_s Binomial(s; N, θ) · k(y - s), over the s the noise lets through.

    The sum runs over s in [c - W, c + W] ∩ [0, N], c = y clipped to [0, N], with
    W = :func:`noise_half_width`: every s left out has k(y - s) ≤ k(y - c) · e^{-40}, so,
    whatever θ, the terms left out add up to at most k(y - c) · e^{-40} · Σ_s Binomial(s; N, θ)
    = k(y - c) · e^{-40}. The result is a lower bound on the exact likelihood L(θ) within a
    relative 4e-18 · k(y - c)/L(θ), below 1e-12 wherever L(θ) is above 4e-6 of k(y - c) (for y in
    [0, N], the noise's peak density; wherever θ has posterior mass, L(θ) is within a few orders
    of magnitude of its largest value, which is at least k(0)/(1 + 2.6 sd(s)/b)). The window
    depends on y only, so the log binomial coefficients and the noise terms are constants of the
    compiled graph, and an evaluation costs one exponential per s in the window, vectorised
    over every release or group.

    Parameters
    ----------
    value
        The released y, shape ``()`` or ``(G,)``.
    theta
        Success probabilities, broadcasting against ``value`` (a leading batch of θ is fine).
    total
        N = n · trials: an int, or one per group.
    noise
        The release's noise law.

    Returns
    -------
    TensorVariable
        Log p(y | θ), with the broadcast shape of ``value`` and ``theta``.

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_dp.kernels.exact_counts import binomial_log_likelihood
    >>> law = NoiseLaw("laplace", 0.5)
    >>> got = binomial_exact_logp(37.3, 0.4, 100, law).eval()
    >>> bool(np.isclose(got, binomial_log_likelihood(37.3, 0.4, 100, law), rtol=1e-12))
    True
    """
    totals = np.asarray(total, dtype=np.float64)
    width = noise_half_width(noise)
    terms = int(min(np.max(totals) + 1.0, 2.0 * math.floor(width) + 2.0))
    value = pt.as_tensor_variable(value).astype("float64")
    theta = pt.as_tensor_variable(theta).astype("float64")
    n = pt.as_tensor_variable(totals)
    # Centred on y clipped to [0, N]: a y beyond N (or below 0) keeps the counts within W of
    # N (or 0), whose noise terms are the largest, rather than the one nearest count.
    centre = pt.clip(value, 0.0, n)
    first = pt.clip(pt.ceil(centre - width), 0.0, n)
    last = pt.clip(pt.floor(centre + width), 0.0, n)
    s = first[..., None] + pt.arange(terms, dtype="float64")
    inside = s <= last[..., None]
    s = pt.switch(inside, s, first[..., None])
    n_ = n[..., None]
    # Constants once the observed y is: binomial coefficients and noise terms of the window.
    fixed = (
        pt.gammaln(n_ + 1.0)
        - pt.gammaln(s + 1.0)
        - pt.gammaln(n_ - s + 1.0)
        + noise_logpdf(value[..., None] - s, noise)
    )
    fixed = pt.switch(inside, fixed, -np.inf)
    log_p = pt.log(theta)[..., None]
    log_q = pt.log1p(-theta)[..., None]
    terms_ = (
        fixed
        + pt.switch(pt.gt(s, 0.0), s * log_p, 0.0)
        + pt.switch(pt.gt(n_ - s, 0.0), (n_ - s) * log_q, 0.0)
    )
    top = disconnected_grad(pt.max(terms_, axis=-1, keepdims=True))
    top = pt.switch(pt.isinf(top), 0.0, top)
    return top[..., 0] + pt.log(pt.sum(pt.exp(terms_ - top), axis=-1))


@pullback_op
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


class ElementwiseInTheta:
    """Mixin of a likelihood ``Op`` on (y, θ) that is elementwise over their broadcast.

    Its output has the broadcast shape of y and θ, and a batch of inputs is the same Op on the
    batched arrays, so :class:`~pymc_dp.GridStep`'s vectorised grid evaluates a whole batch of
    θ in one call.
    """

    def make_node(self, value: Any, theta: Any) -> Apply:  # noqa: D102
        value, theta = (pt.as_tensor_variable(x).astype("float64") for x in (value, theta))
        ndim = max(value.type.ndim, theta.type.ndim)
        out = pt.TensorType("float64", shape=(None,) * ndim)()
        return Apply(self, [value, theta], [out])

    def infer_shape(self, *args: Any) -> list:  # noqa: D102
        # (fgraph, node, shapes) in PyTensor 2, (node, shapes) in PyTensor 3
        value, theta = args[-1]
        return [broadcast_shape(value, theta, arrays_are_shapes=True)]

    @staticmethod
    def sum_to_theta(d_theta: TensorVariable, theta: TensorVariable) -> TensorVariable:
        """A gradient in θ summed over the batch dimensions θ was broadcast along."""
        extra = d_theta.type.ndim - theta.type.ndim
        return pt.sum(d_theta, axis=tuple(range(extra))) if extra > 0 else d_theta


@_vectorize_node.register(ElementwiseInTheta)
def _vectorize_elementwise(op: ElementwiseInTheta, node: Apply, *batched_inputs: Any) -> Any:
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
        outputs[0][0] = self._one(*inputs, self.n)

    def _one(self, value: np.ndarray, theta: np.ndarray, n: int) -> np.ndarray:
        """The output for one release of ``n`` records."""
        # One release of a few hundred records: the compiled sums skip NumPy's per-call cost
        # (imported here: Numba loads only when an exact multinomial sum is evaluated).
        from pymc_dp.kernels.multinomial_jit import (
            JIT_MAX_N,
            JIT_MAX_N_EXPECTED,
            multinomial_expected_counts_jit,
            multinomial_log_likelihood_jit,
        )

        one = value.ndim == 1 and theta.ndim == 1
        jit = one and n <= (JIT_MAX_N_EXPECTED if self.gradient else JIT_MAX_N)
        if self.gradient:
            expected = multinomial_expected_counts_jit if jit else multinomial_expected_counts
            mean = expected(value, theta, n, self.noise)
            # A category with θ_j = 0 has s_j = 0 for sure: no pull on θ_j from the data.
            out = np.divide(mean, theta, out=np.zeros_like(mean), where=theta > 0)
        else:
            log_likelihood = multinomial_log_likelihood_jit if jit else multinomial_log_likelihood
            out = log_likelihood(value, theta, n, self.noise)
        return np.asarray(out, dtype=np.float64)


class GroupedMultinomialLogLikelihood(MultinomialLogLikelihood):
    """:class:`MultinomialLogLikelihood` of G groups in one operation: y, θ of shape ``(G, K)``.

    ``n`` holds each group's records. The output is each group's log p(y_g | θ_g), shape
    ``(G,)`` (with ``gradient=True``, ∂/∂θ of their sum, ``(G, K)``). One operation for every
    group, where one per group made a graph of G operations and their gradients that took
    minutes to compile at G = 500.
    """

    ndims = (2, 2)
    signatures = ("(g,k),(g,k)->(g)", "(g,k),(g,k)->(g,k)")

    def __init__(self, n: Sequence[int], noise: NoiseLaw, gradient: bool = False):
        super().__init__(0, noise, gradient)
        self.n = tuple(int(v) for v in n)

    def make_node(self, *inputs: Any) -> Apply:
        node = super().make_node(*inputs)
        return node if self.gradient else Apply(self, node.inputs, [pt.dvector()])

    def infer_shape(self, *args: Any) -> list:
        shapes = args[-1]
        return [shapes[1]] if self.gradient else [(shapes[0][0],)]

    def perform(self, node, inputs, outputs) -> None:
        value, theta = inputs
        if value.shape[0] != len(self.n) or theta.shape[0] != len(self.n):
            raise ValueError(f"y and θ need one row per group ({len(self.n)})")
        outputs[0][0] = np.stack(
            [self._one(v, t, n) for v, t, n in zip(value, theta, self.n, strict=True)]
        )

    def pullback(self, inputs, outputs, cotangents):
        if self.gradient:
            return [grad_not_implemented(self, i, x) for i, x in enumerate(inputs)]
        # Row g of the gradient Op is ∂ log p_g / ∂θ_g: each row takes its group's cotangent.
        d_theta = type(self)(self.n, self.noise, gradient=True)(*inputs)
        return [grad_not_implemented(self, 0, inputs[0]), cotangents[0][:, None] * d_theta]


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


class StatisticLaw:
    """The exact law of a released statistic s given θ, for one release or one per group.

    Subclasses give log p(y | θ) of one release under a noise law (:meth:`log_likelihood`,
    the sum over s) and draws of s (:meth:`draw`); :func:`released_statistic` combines them
    with the noise law into an observed node.

    Parameters
    ----------
    sizes
        What s counts over (records, or trials): an int for one release, or one per group
        (then y and θ have the groups first and the node's log density is one term per group).
    """

    signature: ClassVar[str] = "()->()"
    """The gufunc signature θ -> y of one release."""

    def __init__(self, sizes: int | Sequence[int]):
        self.grouped = np.ndim(sizes) > 0
        self.sizes = np.asarray(sizes) if self.grouped else int(sizes)

    def log_likelihood(
        self, value: Any, theta: Any, size: int, noise: NoiseLaw
    ) -> TensorVariable:  # pragma: no cover - every law defines it
        """Log p(y | θ) of one release of ``size``, as PyTensor."""
        raise NotImplementedError

    def logp(self, value: Any, theta: Any, noise: NoiseLaw) -> TensorVariable:
        """Log p(y | θ): of the release, or per group (stacked along the groups)."""
        if not self.grouped:
            return self.log_likelihood(value, theta, self.sizes, noise)
        return pt.stack(
            [
                self.log_likelihood(value[g], theta[g], int(size), noise)
                for g, size in enumerate(self.sizes)
            ]
        )

    def draw(
        self, rng: np.random.Generator, theta: Any, size: Any
    ) -> np.ndarray:  # pragma: no cover - every law defines it
        """Draws of s given θ (for posterior predictive releases)."""
        raise NotImplementedError


class BinomialCounts(StatisticLaw):
    """s ~ Binomial(N, p): a released count of N = n · trials trials (``sizes``)."""

    def log_likelihood(self, value, theta, size, noise):  # noqa: D102
        return binomial_exact_logp(value, theta, size, noise)

    def logp(self, value, theta, noise):  # noqa: D102
        # One vectorised graph for every group (binomial_exact_logp broadcasts over them).
        return binomial_exact_logp(value, theta, self.sizes, noise)

    def draw(self, rng, theta, size):  # noqa: D102
        return rng.binomial(self.sizes, theta, size=size)


class MultinomialCounts(StatisticLaw):
    """s ~ Multinomial(n, p): K released counts of n records (``sizes``).

    With the ``released`` counts known (``(K,)``, or ``(G, K)`` grouped), the log density sums
    over the s within the noise's reach of y only
    (:func:`~pymc_dp.likelihoods.multinomial_window.window_logp`: one compiled operation, a
    graph on JAX) while that table is small enough; otherwise the linear convolution over every
    s (:class:`MultinomialLogLikelihood`, :class:`GroupedMultinomialLogLikelihood`). The
    window's terms are about (2 · 40 b)^(K−1) at noise scale b whatever n, the convolution's
    (K − 2)(n + 1)², so narrow noise on many records (where the CLT is least accurate for a
    rare category) takes the window.
    """

    signature = "(k)->(k)"

    def __init__(
        self,
        sizes: int | Sequence[int],
        categories: int,
        released: np.ndarray | None = None,
    ):
        super().__init__(sizes)
        self.categories = int(categories)
        self.released = None if released is None else np.asarray(released, dtype=np.float64)

    def log_likelihood(self, value, theta, size, noise):  # noqa: D102
        return multinomial_exact_logp(value, theta, size, noise, self.categories)

    def logp(self, value, theta, noise):  # noqa: D102
        table = None
        if self.released is not None:
            # One release is a table of one group.
            released = self.released if self.grouped else self.released.reshape(1, -1)
            sizes = self.sizes if self.grouped else [self.sizes]
            table = window_table(released, sizes, noise)
        if table is not None and self.grouped:
            return window_logp(value, theta, table, noise)
        if table is not None:
            return window_logp(value[None], theta[None], table, noise)[0]
        if not self.grouped:
            return super().logp(value, theta, noise)
        return GroupedMultinomialLogLikelihood(self.sizes, noise)(value, theta)

    def draw(self, rng, theta, size):  # noqa: D102
        return rng.multinomial(self.sizes, theta, size=size)


def released_statistic(
    name: str, theta: Any, *, law: StatisticLaw, noise: NoiseLaw, **kwargs: Any
) -> TensorVariable:
    """The observed node y = s + noise, s from ``law`` given θ (a ``CustomDist``).

    Parameters
    ----------
    name
        Variable name.
    theta
        The parameter the law of s takes (p, a rate, …; the groups first for a grouped law).
    law
        The law of s given θ.
    noise
        The release's noise law (shared by every group).
    **kwargs
        Passed to :class:`pymc.CustomDist` (``observed``, ``dims``).

    Returns
    -------
    TensorVariable
        The node, whose log density is the law's exact log p(y | θ) and whose random draws are
        new releases s + noise.
    """

    def random(theta, rng=None, size=None):
        s = law.draw(rng, theta, size)
        return s + draw_noise(rng, noise, np.shape(s))

    return pm.CustomDist(
        name,
        theta,
        logp=lambda value, theta: law.logp(value, theta, noise),
        random=random,
        signature=law.signature,
        dtype="float64",
        **kwargs,
    )


def ExactReleasedCount(
    name: str, theta: Any, *, total: int, noise: NoiseLaw, **kwargs: Any
) -> TensorVariable:
    """A released Binomial count with s summed out exactly (a ``CustomDist``).

    Parameters
    ----------
    total
        Trials behind s: n · trials.
    name, theta, noise, **kwargs
        As for :func:`released_statistic`; θ is the success probability p.
    """
    return released_statistic(name, theta, law=BinomialCounts(total), noise=noise, **kwargs)


def ExactReleasedCounts(
    name: str, theta: Any, *, n: int, categories: int, noise: NoiseLaw, **kwargs: Any
) -> TensorVariable:
    """K released counts with the multinomial s summed out exactly (a ``CustomDist``).

    Parameters
    ----------
    n
        Number of records.
    categories
        K.
    name, theta, noise, **kwargs
        As for :func:`released_statistic`; θ is the K category probabilities. An ``observed``
        array of counts lets the sum run over the s within the noise's reach of it
        (:class:`MultinomialCounts`).
    """
    observed = kwargs.get("observed")
    known = isinstance(observed, (np.ndarray, list, tuple))
    released = np.asarray(observed, dtype=np.float64) if known else None
    law = MultinomialCounts(n, categories, released=released)
    return released_statistic(name, theta, law=law, noise=noise, **kwargs)
