"""A released scalar statistic with the latent s integrated out: the normal–Laplace convolution.

For a family whose released statistic is one number, s | θ ~ N(m, v) on its valid region
[L, U] (the CLT, m = nμ(θ), v = nΣ(θ), or the window moments of a truncated family) and
y | s ~ Laplace(s, b) with b = Δ/ε. The likelihood of θ is then the convolution::

    p(y | θ) = 1/Z ∫_L^U N(s; m, v) · e^{-|y - s|/b} / (2b) ds,
    Z = Φ((U - m)/√v) - Φ((L - m)/√v),

which splits at s = y into two pieces, each a shifted normal's mass on an interval::

    s ≤ y:  exp(-(y - m)/b + v/(2b²)) · [Φ((min(y, U) - m⁻)/√v) - Φ((L - m⁻)/√v)],  m⁻ = m + v/b,
    s ≥ y:  exp( (y - m)/b + v/(2b²)) · [Φ((U - m⁺)/√v) - Φ((max(y, L) - m⁺)/√v)],  m⁺ = m - v/b.

:func:`normal_laplace_logp` evaluates it in log space, finite (with finite gradients) far in either
tail, as one compiled elementwise operation with a closed-form gradient
(:mod:`pymc_dp.likelihoods.normal_laplace`); :class:`CollapsedLaplace`
is the observed node that uses it, so NUTS or a one-dimensional grid draw can sample θ | y
directly, without moving s in small steps.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytensor.tensor as pt
from pymc.distributions.dist_math import check_parameters
from pymc.distributions.distribution import Continuous
from pytensor.graph.basic import Variable
from pytensor.tensor.random.op import RandomVariable
from pytensor.tensor.variable import TensorVariable
from scipy.stats import truncnorm

from pymc_dp.families.erfcx import erfcx
from pymc_dp.likelihoods.normal_laplace import normal_laplace

__all__ = [
    "CollapsedLaplace",
    "CollapsedLaplaceRV",
    "CollapsedNormal",
    "CollapsedNormalRV",
    "log_diff_normal_cdf",
    "normal_laplace_logp",
]

_SQRT2 = pt.constant(np.sqrt(2.0), dtype="float64")


def log_diff_normal_cdf(
    mu: TensorVariable, sigma: TensorVariable, x: TensorVariable, y: TensorVariable
) -> TensorVariable:
    """log(Φ((x - mu)/sigma) - Φ((y - mu)/sigma)) for x > y, stable in both tails.

    The three regions of PyMC's ``dist_math.log_diff_normal_cdf`` (erfcx in each tail), with
    float64 constants throughout: PyMC's version divides by a float32 √2, which costs 2e-3 nats
    at z ≈ 300, where the normal–Laplace convolution evaluates it.
    """
    x = (x - mu) / sigma / _SQRT2
    y = (y - mu) / sigma / _SQRT2
    # Each branch gets arguments inside its own region ("double where"): the branches not
    # taken stay finite, so reverse-mode autodiff of this graph (JAX, for numpyro and
    # blackjax) meets no 0 · inf.
    upper = pt.gt(y, 0)
    lower = pt.and_(pt.invert(upper), pt.lt(x, 0))
    middle = pt.invert(pt.or_(upper, lower))
    x1, y1 = pt.switch(upper, x, 2.0), pt.switch(upper, y, 1.0)
    x2, y2 = pt.switch(lower, x, -1.0), pt.switch(lower, y, -2.0)
    x3, y3 = pt.switch(middle, x, 1.0), pt.switch(middle, y, -1.0)
    return pt.log(pt.constant(0.5, dtype="float64")) + pt.switch(
        upper,
        -pt.square(y1) + pt.log(erfcx(y1) - pt.exp(pt.square(y1) - pt.square(x1)) * erfcx(x1)),
        pt.switch(
            lower,
            -pt.square(x2)
            + pt.log(erfcx(-x2) - pt.exp(pt.square(x2) - pt.square(y2)) * erfcx(-y2)),
            pt.log(pt.erf(x3) - pt.erf(y3)),
        ),
    )


def as_float64(value: object) -> TensorVariable:
    # PyTensor stores a Python float that float32 holds exactly as float32.
    if isinstance(value, Variable):
        return value
    return pt.constant(np.asarray(value, dtype=np.float64))


def normal_laplace_logp(
    value: TensorVariable,
    mean: TensorVariable,
    var: TensorVariable,
    lower: TensorVariable,
    upper: TensorVariable,
    scale: TensorVariable,
) -> TensorVariable:
    """Log p(y | θ) of y = s + Laplace(0, scale), s ~ N(mean, var) truncated to [lower, upper].

    Parameters
    ----------
    value
        The released y (any real number).
    mean, var
        Mean and variance of the normal for s, before truncation.
    lower, upper
        The valid region of s (finite, lower < upper).
    scale
        Laplace scale b = Δ/ε.

    Returns
    -------
    TensorVariable
        The log density, elementwise over broadcast inputs.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import integrate, stats
    >>> exact = integrate.quad(lambda s: stats.norm.pdf(s, 3.0, 2.0)
    ...                        * stats.laplace.pdf(5.0, s, 1.5), -40.0, 40.0, points=[5.0])[0]
    >>> z = stats.norm.cdf(40.0, 3.0, 2.0) - stats.norm.cdf(-40.0, 3.0, 2.0)
    >>> got = normal_laplace_logp(5.0, 3.0, 4.0, -40.0, 40.0, 1.5).eval()
    >>> bool(np.isclose(got, np.log(exact / z), rtol=1e-10))
    True
    """
    return normal_laplace(value, mean, var, lower, upper, scale)


def truncated_clt_draw(rng, mean, var, lower, upper, size):
    """Draws of s ~ N(mean, var) truncated to [lower, upper] (the collapsed nodes' latent s).

    A zero variance (θ on the edge of its support, e.g. λ = 0 or p = 1) is a point mass at the
    mean, clipped to the interval.
    """
    mean, var, lower, upper = np.broadcast_arrays(
        *(np.asarray(a, float) for a in (mean, var, lower, upper))
    )
    point = var <= 0.0
    sd = np.sqrt(np.where(point, 1.0, var))
    s = truncnorm.rvs(
        (lower - mean) / sd, (upper - mean) / sd, loc=mean, scale=sd, size=size, random_state=rng
    )
    return np.where(point, np.clip(mean, lower, upper), s)


class CollapsedNormalRV(RandomVariable):
    """y = s + noise with s ~ N(mean, var) truncated to [lower, upper].

    The law of s is written here once; a subclass names the op and its noise law, by the
    :class:`numpy.random.Generator` method that draws it with location 0 and ``scale``.
    """

    signature = "(),(),(),(),()->()"
    dtype = "floatX"
    noise: ClassVar[str]
    """The generator method drawing the noise: ``"laplace"`` or ``"normal"``."""

    @classmethod
    def rng_fn(cls, rng, mean, var, lower, upper, scale, size):  # noqa: D102
        s = truncated_clt_draw(rng, mean, var, lower, upper, size)
        return s + getattr(rng, cls.noise)(0.0, scale, size=np.shape(s))


class CollapsedLaplaceRV(CollapsedNormalRV):
    """y = s + Laplace(0, scale) with s ~ N(mean, var) truncated to [lower, upper]."""

    name = "collapsed_laplace"
    _print_name = ("CollapsedLaplace", "\\operatorname{CollapsedLaplace}")
    noise = "laplace"


class CollapsedNormal(Continuous):
    """A released scalar y = s + noise with the latent s integrated out (base class).

    Parameters
    ----------
    mean, var
        CLT mean and variance of s given θ (or the window moments of ŝ for a windowed family).
    lower, upper
        The valid region of s.
    scale
        The scale of the release's noise.

    Notes
    -----
    A subclass sets ``rv_op`` (a :class:`CollapsedNormalRV`) and writes ``logp`` with its noise
    law's convolution, checked by :meth:`checked`; it takes ``support_point`` from here
    (PyMC registers only what a class itself defines).
    """

    @classmethod
    def dist(cls, mean, var, lower, upper, scale, **kwargs):  # noqa: D102
        return super().dist([mean, var, lower, upper, scale], **kwargs)

    @staticmethod
    def support_point(rv, size, mean, var, lower, upper, scale):  # noqa: D102
        point = pt.clip(mean, lower, upper)
        if size is not None and getattr(size.type, "__class__", None).__name__ != "NoneTypeT":
            point = pt.full(size, point)
        return point

    @staticmethod
    def checked(logp, var, lower, upper, scale) -> TensorVariable:
        """``logp`` where the parameters are valid (PyMC's ``check_parameters``)."""
        return check_parameters(
            logp, var >= 0, lower < upper, scale > 0, msg="var >= 0, lower < upper, scale > 0"
        )


class CollapsedLaplace(CollapsedNormal):
    """A released scalar statistic y with the latent s integrated out (normal–Laplace).

    Parameters
    ----------
    mean, var, lower, upper
        As for :class:`CollapsedNormal`.
    scale
        Laplace scale b = Δ/ε of the release.

    Notes
    -----
    The log density is :func:`normal_laplace_logp`: the exact marginal of y under the CLT model
    for s, so NUTS on θ samples the same posterior as the paper's Gibbs sampler over (θ, s, σ²),
    with s and σ² integrated out. Random draws (posterior predictive) draw s from its truncated
    normal and add Laplace noise.
    """

    rv_op = CollapsedLaplaceRV()
    support_point = CollapsedNormal.support_point

    def logp(value, mean, var, lower, upper, scale):  # noqa: D102
        logp = normal_laplace_logp(value, mean, var, lower, upper, scale)
        return CollapsedNormal.checked(logp, var, lower, upper, scale)
