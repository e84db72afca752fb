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

from pymc_dp._compat import pullback_op
from pymc_dp.kernels.collapsed_pair import pair_log_likelihood
from pymc_dp.likelihoods.collapsed import as_float64, normal_laplace_logp

__all__ = [
    "CollapsedLaplacePair",
    "LaplacePairGivenFirst",
    "PairLogLikelihood",
    "conditional_second",
    "first_statistic",
    "first_statistic_logp",
    "first_statistic_map",
    "given_first_logp",
    "pair_given_first_logp",
    "pair_logp",
]


@pullback_op
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


_FLOOR = 1e-6  # as in pymc_dp.likelihoods.collapsed: each variance floored at (1e-6·b)²
_WIDE = 40.0
"""s₂ | s₁ is integrated over a ± 40 sd window: the normal mass outside is below e^-800."""


def _conditional_second(first: Any, mean: Any, cov: Any) -> tuple[Any, Any]:
    """Mean a(s₁) = m₂ + (c/v₁)(s₁ - m₁) and variance w = v₂ - c²/v₁ of s₂ given s₁."""
    entries = (mean[..., 0], mean[..., 1], cov[..., 0, 0], cov[..., 0, 1], cov[..., 1, 1])
    return conditional_second(first, *entries)


def conditional_second(first: Any, m1: Any, m2: Any, v11: Any, v12: Any, v22: Any) -> tuple:
    """Mean and variance of s₂ given s₁ from the pair's CLT entries, NumPy or PyTensor.

    a(s₁) = m₂ + (v₁₂/v₁₁)(s₁ - m₁) and w = v₂₂ - v₁₂²/v₁₁; every argument of the batch shape.
    """
    # + 1e-300: a window holding no mass (v₁ = c = 0) leaves s₂ independent, not 0/0.
    slope = v12 / (v11 + 1e-300)
    return m2 + slope * (first - m1), v22 - slope * v12


def pair_given_first_logp(
    value: Any, first: Any, mean: Any, cov: Any, scale: Any
) -> TensorVariable:
    """Log p(y | s₁, m, V) of a released pair given its first statistic, s₂ integrated out.

    y₁ = s₁ + Laplace(b₁) is a Laplace density; s₂ | s₁ ~ N(a(s₁), w) with
    a(s₁) = m₂ + (c/v₁)(s₁ - m₁) and w = v₂ - c²/v₁, so y₂ | s₁ is the scalar normal–Laplace
    convolution (:func:`~pymc_dp.likelihoods.collapsed.normal_laplace_logp`). Integrating
    s₁ against N(m₁, v₁) gives :func:`pair_logp`; keeping s₁ a model variable instead makes
    one closed-form term per release, where :func:`pair_logp` runs a quadrature.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import integrate, stats
    >>> y, m, b = np.array([1.0, 2.0]), np.zeros(2), np.ones(2)
    >>> v = np.array([[4.0, 1.0], [1.0, 2.0]])
    >>> import pytensor, pytensor.tensor as pt
    >>> s1 = pt.dscalar()
    >>> given = pytensor.function([s1], pair_given_first_logp(y, s1, m, v, b))
    >>> f = lambda x: np.exp(given(x)) * stats.norm.pdf(x, 0, 2)
    >>> joint = integrate.quad(f, -30, 30, points=[1.0])[0]
    >>> bool(np.isclose(np.log(joint), pair_logp(y, m, v, b).eval(), rtol=1e-7))
    True
    """
    value, first, mean, cov, scale = (as_float64(x) for x in (value, first, mean, cov, scale))
    return given_first_logp(value, first, *_conditional_second(first, mean, cov), scale)


def given_first_logp(value: Any, first: Any, centre: Any, var: Any, scale: Any) -> TensorVariable:
    """Log p(y | s₁) with s₂ | s₁ ~ N(centre, var): Laplace on y₁, normal–Laplace on y₂.

    ``value`` and ``scale`` have the pair last; the others are of the batch shape.
    """
    b1, b2 = scale[..., 0], scale[..., 1]
    wide = _WIDE * pt.sqrt(var + pt.sqr(b2))
    first_noise = -pt.log(2.0 * b1) - pt.abs(value[..., 0] - first) / b1
    second = normal_laplace_logp(value[..., 1], centre, var, centre - wide, centre + wide, b2)
    return first_noise + second


def _random_given_first(
    first: Any, centre: Any, var: Any, scale: Any, rng: np.random.Generator, size: Any
) -> np.ndarray:
    first, centre, var, scale = (
        np.asarray(x, dtype=np.float64) for x in (first, centre, var, scale)
    )
    sd = np.sqrt(np.maximum(var, 0.0))
    shape = size if size is not None else np.broadcast_shapes(first.shape, centre.shape)
    s = np.stack([np.broadcast_to(first, shape), rng.normal(centre, sd, size=shape)], axis=-1)
    return s + rng.laplace(0.0, 1.0, size=s.shape) * scale


def LaplacePairGivenFirst(
    name: str, first: Any, centre: Any, var: Any, scale: Any, **kwargs: Any
) -> TensorVariable:
    """A released pair y = ŝ + Laplace(b) given ŝ₁, with ŝ₂ integrated out (a CustomDist).

    ``first`` is the latent ŝ₁, ``centre`` and ``var`` the mean and variance of ŝ₂ given it
    (:func:`conditional_second`), each of the batch shape, and ``scale`` the noise scales
    ``(2,)``. Draws (posterior predictive) draw ŝ₂ | ŝ₁ from its normal and add the noise.
    Elementwise parameters keep the logp and its gradient free of stacking and indexing.
    """
    return pm.CustomDist(
        name,
        first,
        centre,
        var,
        scale,
        logp=lambda value, s1, c, w, b: given_first_logp(value, s1, c, w, b),
        random=_random_given_first,
        signature="(),(),(),(k)->(k)",
        **kwargs,
    )


def first_statistic(
    name: str, released: Any, mean: Any, var: Any, scale: Any, **kwargs: Any
) -> TensorVariable:
    """ŝ₁ ~ N(m₁, v₁) as a model variable, in standard units of its posterior given y₁ alone.

    The free variable is u with ŝ₁ = c + d·u, where N(c, d²) combines the prior N(m₁, v₁) with
    y₁ read as a normal of the Laplace noise's variance 2b²: d² = 1 / (1/v₁ + 1/(2b²)). So u is
    of order one both where the noise is far wider than ŝ₁'s spread (ŝ₁ ≈ its prior; u ≈ the
    non-centred standard normal) and far narrower (ŝ₁ ≈ y₁ within b), and NUTS needs no small
    step in either. u's density is ŝ₁'s prior times the Jacobian d; the node adds
    ``{name}`` = ŝ₁ as a Deterministic. ``**kwargs`` go to both (``dims``).
    """
    released, mean, var, scale = (as_float64(x) for x in (released, mean, var, scale))
    c, d, var = first_statistic_map(released, mean, var, scale)

    def random(c: Any, d: Any, m: Any, v: Any, rng: np.random.Generator, size: Any) -> Any:
        return (rng.normal(m, np.sqrt(v), size=size) - c) / d

    u = pm.CustomDist(
        f"{name}_std", c, d, mean, var, logp=first_statistic_logp, random=random, **kwargs
    )
    return pm.Deterministic(name, c + d * u, **kwargs)


def first_statistic_map(released: Any, mean: Any, var: Any, scale: Any) -> tuple[Any, Any, Any]:
    """(c, d, v) of :func:`first_statistic`: ŝ₁ = c + d·u, and ŝ₁'s floored prior variance v."""
    var = var + pt.sqr(_FLOOR * scale)  # as the collapsed nodes: v₁ = 0 would divide by zero
    noise_var = 2.0 * pt.sqr(scale)
    d = 1.0 / pt.sqrt(1.0 / var + 1.0 / noise_var)
    c = pt.sqr(d) * (mean / var + released / noise_var)
    return c, d, var


def first_statistic_logp(u: Any, c: Any, d: Any, m: Any, v: Any) -> TensorVariable:
    """Log density of u where ŝ₁ = c + d·u ~ N(m, v): ŝ₁'s normal times the Jacobian d."""
    s1 = c + d * u
    return -0.5 * pt.sqr(s1 - m) / v - 0.5 * pt.log(2.0 * np.pi * v) + pt.log(d)
