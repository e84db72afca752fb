"""A released statistic with Gaussian noise and the latent s integrated out: the normal product.

A Gaussian-mechanism release adds N(0, τ²) noise to each component of s (OpenDP's discrete
Gaussian on the statistic's quanta, modelled here by the continuous normal of the same σ; see
:func:`lattice_error_bound` for the error). Under the CLT, s | θ ~ N(m, v), so no mixing
variance is needed: for a scalar statistic on its valid region [L, U],

    p(y | θ) = N(y; m, v + τ²) · [Φ((U - μ₃)/σ₃) - Φ((L - μ₃)/σ₃)]
                               / [Φ((U - m)/√v) - Φ((L - m)/√v)],

with μ₃ = (τ² m + v y)/(v + τ²) and σ₃² = v τ²/(v + τ²), the moments of s | θ, y before
truncation (the normal product of the method note, §2 step 3). Both CDF differences are taken in
log space (:func:`~pymc_dp.likelihoods.collapsed.log_diff_normal_cdf`), so the density and its
gradient stay finite far in the tails and NUTS or a grid draw samples θ | y directly.
A vector statistic (Categorical counts, a window's (Σz, Σz²)) is simply y | θ ~ N(m, V + τ²I)
(:class:`~pymc_dp.likelihoods.ReleasedNormal`), with the truncation left out exactly as the
Laplace nodes leave it out.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pytensor.tensor.variable import TensorVariable

from pymc_dp.likelihoods.collapsed import (
    CollapsedNormal,
    CollapsedNormalRV,
    as_float64,
    log_diff_normal_cdf,
)

__all__ = [
    "CollapsedGaussian",
    "CollapsedGaussianRV",
    "lattice_error_bound",
    "normal_normal_logp",
]


def lattice_error_bound(var: float, scale: float) -> float:
    """Bound on the error of the continuous model for integer s and discrete Gaussian noise.

    For counts (quantum 1) the release adds OpenDP's discrete Gaussian, P(d) = φ_τ(d)/Z(τ) on
    the integers, to an integer s; the node models s by the CLT normal N(m, v) and the noise by
    the density φ_τ. At integer d the density is the pmf times the constant Z(τ), which does not
    depend on θ, so the noise law itself is modelled exactly. What remains is the lattice: by
    Poisson summation, Σ_s N(s; m, v) φ_τ(y - s) = N(y; m, v + τ²) (1 + ε(σ₃)) with
    σ₃² = v τ²/(v + τ²) and abs(ε(σ)) ≤ e(σ) = 2 Σ_{j≥1} exp(-2π² j² σ²), and the lattice normal's
    own mass is 1 + ε(√v). So the log-likelihood of the continuous model is within

        -log(1 - e(σ₃)) - log(1 - e(√v))

    of that of the normal-on-the-integers model with the discrete Gaussian, up to a constant in
    θ: 0.014 at σ₃ = ½, 1.0e-4 at σ₃² = ½ (v = τ² = 1), 5.4e-9 at σ₃ = 1, below 1e-15 from
    σ₃ = 1.5. σ₃² ≥ τ²/2 whenever v ≥ τ², so τ ≥ √2 (ρ ≤ Δ₂²/4) keeps it below 1e-8. Float
    statistics are released on a quantum at most τ/1024, where it is zero in double precision.
    The CLT itself (the binomial law of s against the normal) is the rule of
    :func:`pymc_dp.likelihoods.choice.clt_trust`, as for Laplace noise.

    Parameters
    ----------
    var
        Variance v of s (in quanta²).
    scale
        The discrete Gaussian's σ = τ (in quanta).

    Returns
    -------
    float
        The bound, in nats (``inf`` where it is vacuous).

    Examples
    --------
    >>> f"{lattice_error_bound(1e6, 1.0):.1e}"
    '5.4e-09'
    """
    post = var * scale**2 / (var + scale**2)
    total = 0.0
    for sigma2 in (post, var):
        j = np.arange(1, 50)
        e = 2.0 * float(np.sum(np.exp(-2.0 * np.pi**2 * j**2 * sigma2)))
        total += -np.log1p(-e) if e < 1 else np.inf
    return float(total)


_FLOOR = 1e-6
"""s's sd is floored at this fraction of τ (as in the Laplace node): it then never divides by
zero at the edge of θ's support (p = 0 or 1), at a relative change of 1e-12 in the variance."""
_LOG_2PI = float(np.log(2 * np.pi))


def normal_normal_logp(
    value: TensorVariable,
    mean: TensorVariable,
    var: TensorVariable,
    lower: TensorVariable,
    upper: TensorVariable,
    scale: TensorVariable,
) -> TensorVariable:
    """Log p(y | θ) of y = s + N(0, scale²), s ~ N(mean, var) truncated to [lower, upper].

    Parameters
    ----------
    value
        The released y.
    mean, var
        Mean and variance of the normal for s, before truncation.
    lower, upper
        The valid region of s (lower < upper; infinite ends allowed).
    scale
        The Gaussian noise's standard deviation τ.

    Returns
    -------
    TensorVariable
        The log density, elementwise over broadcast inputs.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import integrate, stats
    >>> exact = integrate.quad(lambda s: stats.norm.pdf(s, 3.0, 2.0)
    ...                        * stats.norm.pdf(5.0, s, 1.5), 0.0, 40.0)[0]
    >>> z = stats.norm.cdf(40.0, 3.0, 2.0) - stats.norm.cdf(0.0, 3.0, 2.0)
    >>> got = normal_normal_logp(5.0, 3.0, 4.0, 0.0, 40.0, 1.5).eval()
    >>> bool(np.isclose(got, np.log(exact / z), rtol=1e-10))
    True
    """
    value, mean, var, lower, upper, scale = (
        as_float64(v) for v in (value, mean, var, lower, upper, scale)
    )
    noise = pt.sqr(scale)
    var = var + pt.sqr(_FLOOR * scale)
    total = var + noise
    post_mean = (noise * mean + var * value) / total
    post_sd = pt.sqrt(var * noise / total)
    marginal = -0.5 * (_LOG_2PI + pt.log(total) + pt.sqr(value - mean) / total)
    inside = log_diff_normal_cdf(post_mean, post_sd, upper, lower)
    log_z = log_diff_normal_cdf(mean, pt.sqrt(var), upper, lower)
    return marginal + inside - log_z


class CollapsedGaussianRV(CollapsedNormalRV):
    """y = s + N(0, scale²) with s ~ N(mean, var) truncated to [lower, upper]."""

    name = "collapsed_gaussian"
    _print_name = ("CollapsedGaussian", "\\operatorname{CollapsedGaussian}")
    noise = "normal"


class CollapsedGaussian(CollapsedNormal):
    """A released scalar statistic y with Gaussian noise, the latent s integrated out.

    Parameters
    ----------
    mean, var, lower, upper
        As for :class:`~pymc_dp.likelihoods.collapsed.CollapsedNormal`.
    scale
        Standard deviation τ of the release's Gaussian noise.

    Notes
    -----
    The log density is :func:`normal_normal_logp`, the exact marginal of y under the CLT model
    for s; :func:`~pymc_dp.kernels.collapsed.draw_collapsed_suffstat` draws s | θ, y.
    """

    rv_op = CollapsedGaussianRV()
    support_point = CollapsedNormal.support_point

    def logp(value, mean, var, lower, upper, scale):  # noqa: D102
        logp = normal_normal_logp(value, mean, var, lower, upper, scale)
        return CollapsedNormal.checked(logp, var, lower, upper, scale)
