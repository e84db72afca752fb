"""The law of one covariate's sums under the shape family, and the released moments' likelihood.

The default sampler's exact law of the statistic (:mod:`~pymc_dp.regression.kernels.normal_model`)
takes x normal: the covariate mean ``x̄ ~ N(μ, σ²/n)`` and scatter ``S = Σ(x − x̄)² ~ σ²χ²(n − 1)``,
independent. Only this part depends on the model of x: given ``X̃ᵀX̃``, ``X̃ᵀy`` and the residual
sum of squares have their normal-regression law whatever x is. When the release carries noisy
degree 3–4 sums of x (d = 1), the default replaces the normal model of x by the shape family of
:mod:`~pymc_dp.regression.kernels.x_models` (skewness γ, kurtosis κ) and

* gives (x̄, S) the law with their exact first two moments under (μ, σ², γ, κ):
  ``S ~ cσ² χ²(f)`` (a Gamma) with ``E S = (n − 1)σ²`` and
  ``Var S = σ⁴ (n − 1)((n − 1)κ − n + 3)/n`` (so ``c = ((n − 1)κ − n + 3)/(2n)``,
  ``f = (n − 1)/c``), and ``x̄ | S`` normal with ``Cov(x̄, S) = (n − 1)γσ³/n`` and
  ``Var x̄ = σ²/n``. At γ = 0, κ = 3 this is the normal law exactly (c = 1, no covariance);
  the conditional variance is positive whenever ``κ > γ² + (n − 3)/(n − 1)``, which the prior's
  ``κ ≥ 1 + γ²`` ensures;
* observes the released sums of x³ and x⁴ as what they are, sum + Laplace noise, each sum normal
  about ``n E[x^k]`` under (μ, σ², γ, κ) with the sampling variance of the normal model of the
  same mean and variance (:func:`~pymc_dp.regression.kernels.x_models.moment_log_likelihood`).

:func:`shape_log_ratio` is the log of the first law over the normal one (a factor on the normal
model's exact law of s), :func:`moment_term` the second. Both are cheap and closed-form.

**Parametrisation.** The released sums pin the raw moments E x³ and E x⁴ far better than
they pin (μ, σ²): with (γ, κ) held fixed, a move of σ² would have to move E x⁴ = … + κσ⁴
against that likelihood, and the sampler would crawl along the ridge (under ``pm.sample`` at
n = 500, ε = 1 one chain in three stuck, R-hat 1.48). So while (μ_x, Σ_x) move, the state holds
the raw moments (``XShape.third``, ``XShape.fourth``) fixed, and (γ, κ) follow from them and
(μ, σ²); the prior of (γ, κ − 1 − γ²) gains σ⁻⁷ on the raw moments (the Jacobian of
the triangular map at fixed (μ, σ²)). But where the sums say nothing (their noise far above
the sums, as at n ≤ 1000, ε ≤ 1 for a box [−2, 2]), fixed raw moments confine μ_x to a sliver
and the intercept mixes as slowly (:func:`hold`). So the sampler picks, at random each
iteration, which of the two the state holds: each is an exact move of the posterior.
(γ, κ) themselves move given (μ, σ²) by random-walk Metropolis (:func:`shape_move`). Pure
NumPy; d = 1.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy.special import gammaln

from pymc_dp.regression.kernels.x_models import ShapePrior, moment_log_likelihood

__all__ = [
    "XShape",
    "check_shape_moments",
    "hold",
    "informative",
    "moment_term",
    "raw_moments",
    "shape_log_ratio",
    "shape_move",
    "shape_term",
    "standardised",
]

_LOG_2PI = float(np.log(2.0 * np.pi))


class XShape(NamedTuple):
    """The shape family's state and the released moments it observes (batch first)."""

    third: npt.NDArray[np.float64]
    """E x³ under the model, ``(..., J)`` (held while (μ_x, Σ_x) move; module docstring)."""
    fourth: npt.NDArray[np.float64]
    """E x⁴, ``(..., J)``."""
    moments: npt.NDArray[np.float64]
    """Released noisy sums of x^k, ``(..., J, K)``."""
    degrees: npt.NDArray[np.int64]
    """Their degrees k, ``(K,)`` (3 or 4)."""
    moment_scale: npt.NDArray[np.float64]
    """Their Laplace scale, ``(..., J)``."""
    prior: ShapePrior = ShapePrior()
    """Prior of (γ, κ − 1 − γ²)."""
    standard: bool | npt.NDArray[np.bool_] = False
    """Whether ``third`` and ``fourth`` hold (γ, κ) instead of the raw moments (per batch
    member, ``(..., J)``, or for all): what a move of (μ_x, Σ_x) holds fixed (:func:`hold`)."""


def raw_moments(
    loc: npt.ArrayLike, var: npt.ArrayLike, skew: npt.ArrayLike, kurt: npt.ArrayLike
) -> tuple[np.ndarray, np.ndarray]:
    """E x³ and E x⁴ of x = μ + σu, u of skewness γ and kurtosis κ.

    Examples
    --------
    >>> [float(m) for m in raw_moments(0.0, 1.0, 0.0, 3.0)]  # the standard normal
    [0.0, 3.0]
    """
    loc, var = np.asarray(loc, dtype=np.float64), np.asarray(var, dtype=np.float64)
    sd = np.sqrt(var)
    m3 = loc**3 + 3.0 * loc * var + np.asarray(skew) * sd**3
    m4 = (
        loc**4
        + 6.0 * loc**2 * var
        + 4.0 * loc * np.asarray(skew) * sd**3
        + np.asarray(kurt) * var**2
    )
    return m3, m4


def standardised(
    shape: XShape, loc: npt.ArrayLike, var: npt.ArrayLike
) -> tuple[np.ndarray, np.ndarray]:
    """(γ, κ) of the shape's raw moments at (μ, σ²), the inverse of :func:`raw_moments`.

    A shape that holds (γ, κ) (``shape.standard``) returns them.
    """
    held = np.asarray(shape.standard)
    if np.all(held):
        return np.asarray(shape.third), np.asarray(shape.fourth)
    loc, var = np.asarray(loc, dtype=np.float64), np.asarray(var, dtype=np.float64)
    sd = np.sqrt(var)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        skew = (shape.third - loc**3 - 3.0 * loc * var) / sd**3
        kurt = (shape.fourth - loc**4 - 6.0 * loc**2 * var - 4.0 * loc * skew * sd**3) / var**2
    if np.any(held):
        skew, kurt = np.where(held, shape.third, skew), np.where(held, shape.fourth, kurt)
    return skew, kurt


def hold(
    shape: XShape, standard: bool | npt.NDArray[np.bool_], loc: npt.ArrayLike, var: npt.ArrayLike
) -> XShape:
    """The same shape at (μ, σ²), holding (γ, κ) (``standard``) or the raw moments E x³, E x⁴.

    What the state holds is what a move of (μ_x, Σ_x) keeps fixed. Both are exact moves of the
    same posterior (holding the raw moments, the prior of the shape carries the Jacobian
    σ⁻⁷; :func:`shape_term`), and each mixes where the other sticks: where the released sums
    pin E x³ and E x⁴, a move of σ² at fixed (γ, κ) fights their likelihood; where they say
    nothing (the sums' noise far above the sums), the fixed raw moments confine μ_x to where
    (γ, κ) stay inside their prior (γ moves by ∂γ/∂μ = −3(μ² + σ²)/σ³ per unit of μ, ≈ −10 for
    x uniform on [−½, ½]), and μ_x, hence x̄ and the intercept, crawl (at n = 100, ε = 0.1:
    median ESS 5 of μ_x and 7 of θ₀ in 2000 draws, against 623 and 613 without the shape).
    """
    g, k = standardised(shape, loc, var)
    m3, m4 = raw_moments(loc, var, g, k)
    return shape._replace(third=np.where(standard, g, m3), fourth=np.where(standard, k, m4),
                          standard=standard)  # fmt: skip


def informative(shape: XShape) -> npt.NDArray[np.bool_]:
    """Whether the released sum of x⁴ stands out of its noise: ``|Σx⁴| > 4 b`` (``(..., J)``).

    A property of the release, not of the chain, so a sampler may pick its moves by it. Where
    it does not, the sums' likelihood is flat over the prior of (γ, κ): the noise's Laplace
    scale b is far above any n E x⁴ the box and the release's spread of x allow (n ≤ 1000,
    ε ≤ 1, box [−2, 2], x of sd ≤ 1/2: n E x⁴ ≤ 20 against b ≥ 160).
    """
    degrees = np.asarray(shape.degrees)
    if not np.any(degrees == 4):
        return np.zeros(np.shape(shape.moment_scale), dtype=bool)
    fourth = np.asarray(shape.moments)[..., int(np.argmax(degrees == 4))]
    return np.abs(fourth) > 4.0 * np.asarray(shape.moment_scale)


def check_shape_moments(
    moments: npt.ArrayLike, powers: npt.ArrayLike, scale: npt.ArrayLike, releases: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Released degree 3–4 sums of one covariate: values ``(releases, K)``, degrees, scales.

    Rows of ``powers`` of another degree (a format-2 file's degree 1–2 sums) are dropped.
    """
    powers = np.asarray(powers, dtype=np.int64)
    if powers.ndim != 2 or powers.shape[1] != 1:
        raise ValueError(
            f"moment_powers must be (K, 1): released moments enter the default for d = 1 only "
            f"(got shape {powers.shape})"
        )
    values = np.asarray(moments, dtype=np.float64).reshape(releases, -1)
    if values.shape[1] != powers.shape[0]:
        raise ValueError(f"moments have {values.shape[1]} entries, moment_powers {len(powers)}")
    keep = np.isin(powers[:, 0], (3, 4))
    if not np.any(keep):
        raise ValueError("moment_powers has no sum of degree 3 or 4")
    scale = np.broadcast_to(np.asarray(scale, dtype=np.float64), (releases,))
    if not np.all(np.isfinite(values)) or not np.all(np.isfinite(scale)) or np.any(scale <= 0):
        raise ValueError("moments must be finite and moment_scale finite and > 0")
    return values[:, keep], powers[keep, 0], scale


def shape_log_ratio(
    mean: npt.ArrayLike,
    scatter: npt.ArrayLike,
    loc: npt.ArrayLike,
    var: npt.ArrayLike,
    skew: npt.ArrayLike,
    kurt: npt.ArrayLike,
    n: npt.ArrayLike,
) -> npt.NDArray[np.float64]:
    """Log p_shape(x̄, S) − log p_normal(x̄, S) of one covariate (module docstring), batched.

    Examples
    --------
    The normal shape (γ = 0, κ = 3) changes nothing:

    >>> float(shape_log_ratio(0.1, 20.0, 0.0, 0.25, 0.0, 3.0, 100))
    0.0
    """
    xbar, s = np.asarray(mean, dtype=np.float64), np.asarray(scatter, dtype=np.float64)
    mu, v = np.asarray(loc, dtype=np.float64), np.asarray(var, dtype=np.float64)
    g, k = np.asarray(skew, dtype=np.float64), np.asarray(kurt, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        c = ((n - 1.0) * k - n + 3.0) / (2.0 * n)
        f = (n - 1.0) / c
        var_s = 2.0 * c * (n - 1.0) * v**2
        cov = (n - 1.0) * g * v**1.5 / n
        beta = cov / var_s
        cond = v / n - beta * cov
        centre = mu + beta * (s - (n - 1.0) * v)

        def gamma_logpdf(half: np.ndarray, theta: np.ndarray) -> np.ndarray:
            return -gammaln(half) - half * np.log(theta) + (half - 1.0) * np.log(s) - s / theta

        shape = gamma_logpdf(0.5 * f, 2.0 * c * v) - 0.5 * (
            _LOG_2PI + np.log(cond) + (xbar - centre) ** 2 / cond
        )
        normal = gamma_logpdf(0.5 * (n - 1.0), 2.0 * v) - 0.5 * (
            _LOG_2PI + np.log(v / n) + n * (xbar - mu) ** 2 / v
        )
        out = shape - normal
    return np.where((cond > 0) & (c > 0) & (s > 0), out, -np.inf)


def _normal_power_moments(loc: np.ndarray, var: np.ndarray, k: int) -> list[np.ndarray]:
    """E x^j, j = 0..k, of N(loc, var): m_j = μ m_{j−1} + (j − 1) σ² m_{j−2}."""
    out = [np.ones_like(loc), loc]
    for j in range(2, k + 1):
        out.append(loc * out[-1] + (j - 1) * var * out[-2])
    return out


def moment_term(
    loc: npt.ArrayLike,
    var: npt.ArrayLike,
    skew: npt.ArrayLike,
    kurt: npt.ArrayLike,
    n: npt.ArrayLike,
    shape: XShape,
) -> npt.NDArray[np.float64]:
    """Log likelihood of the released degree 3–4 sums of x under (μ, σ², γ, κ), batched.

    Each sum is ``n E[x^k]`` plus a normal sampling error of variance ``n Var(x^k)`` under the
    normal model of the same mean and variance (the shape family fixes moments up to the
    fourth only), plus its Laplace noise: the normal–Laplace convolution of
    :func:`~pymc_dp.regression.kernels.x_models.moment_log_likelihood`.
    """
    loc, var = np.asarray(loc, dtype=np.float64), np.asarray(var, dtype=np.float64)
    skew, kurt = np.asarray(skew, dtype=np.float64), np.asarray(kurt, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    m3, m4 = raw_moments(loc, var, skew, kurt)
    pw = _normal_power_moments(loc, var, 8)
    out = 0.0
    for i, deg in enumerate(shape.degrees.tolist()):
        mean = n * (m3 if deg == 3 else m4)
        sampling = n * (pw[2 * deg] - pw[deg] ** 2)
        out = out + moment_log_likelihood(
            shape.moments[..., i : i + 1], mean[..., None], sampling[..., None],
            shape.moment_scale[..., None],
        )  # fmt: skip
    return np.asarray(out)


def shape_term(
    mean: npt.ArrayLike,
    scatter: npt.ArrayLike,
    loc: npt.ArrayLike,
    var: npt.ArrayLike,
    n: npt.ArrayLike,
    shape: XShape,
    skew: npt.ArrayLike | None = None,
    kurt: npt.ArrayLike | None = None,
) -> npt.NDArray[np.float64]:
    """:func:`shape_log_ratio` + :func:`moment_term`, at the given (γ, κ) or the shape's.

    Without ``skew`` and ``kurt`` (a move of (μ, σ²) holding what the shape holds): (γ, κ)
    from :func:`standardised`; holding the raw moments, plus their prior given (μ, σ²), σ⁻⁷
    inside the prior's box and 0 outside (module docstring), holding (γ, κ) nothing more
    (their prior is constant in such a move). With them (a move of (γ, κ) given (μ, σ²)): the
    caller applies the prior's support of (γ, κ − 1 − γ²). Either way the result carries the
    non-uniform part of γ's prior
    (:meth:`~pymc_dp.regression.kernels.x_models.ShapePrior.log_skew`).
    """
    var = np.asarray(var, dtype=np.float64)
    if skew is None:
        g, k = standardised(shape, loc, var)
        excess = k - 1.0 - g**2
        inside = (np.abs(g) < shape.prior.skew) & (excess > 0) & (excess < shape.prior.excess)
        with np.errstate(invalid="ignore", divide="ignore"):
            jacobian = np.where(shape.standard, 0.0, -3.5 * np.log(var))
            prior = np.where(inside, jacobian, -np.inf)
        g, k = np.where(inside, g, 0.0), np.where(inside, k, 3.0)
    else:
        g, k, prior = skew, kurt, 0.0
    prior = prior + shape.prior.log_skew(g)
    ratio = shape_log_ratio(mean, scatter, loc, var, g, k, n)
    return prior + ratio + moment_term(loc, var, g, k, n, shape)


def shape_move(
    rng: np.random.Generator,
    shape: XShape,
    *,
    mean: npt.ArrayLike,
    scatter: npt.ArrayLike,
    loc: npt.ArrayLike,
    var: npt.ArrayLike,
    n: npt.ArrayLike,
    moves: int = 6,
    step: tuple[float, float] = (1.0, 2.0),
) -> tuple[XShape, npt.NDArray[np.float64]]:
    """Random-walk Metropolis moves of (γ, κ − 1 − γ²) given the covariate's sums and (μ, σ²).

    The release seldom says much about the shape, so its posterior is close to its
    prior: the steps are a quarter and a third of the prior's widths, and the moves (closed-form,
    cheap beside the collapsed sweep) several per iteration. (Alternating them with steps in
    the raw moments scaled to the release's own precision raised the ESS of κ where the sums pin
    it, n = 500, ε = 1, but left one of three chain seeds stuck, ESS 12: not kept. Alternating
    them with moves that also shift μ_x along the shape law's tie of x̄ to S, so that x̄ keeps
    its place in its conditional law given S, did not raise the intercept's ESS at n = 100,
    ε = 0.1: not kept either.)

    The target is the prior of :class:`~pymc_dp.regression.kernels.x_models.ShapePrior`
    (its support here, γ's density in :func:`shape_term`) times :func:`shape_term` (the law
    of (x̄, S) over the normal one, and the released moments).
    Returns the new shape (holding what ``shape`` holds, at (μ, σ²)) and the fraction of moves
    accepted per batch member.
    """
    prior = shape.prior
    g, k = standardised(shape, loc, var)
    current = shape_term(mean, scatter, loc, var, n, shape, g, k)
    accepted = np.zeros(np.shape(g))
    for _ in range(moves):
        excess = k - 1.0 - g**2
        g_new = g + step[0] * rng.standard_normal(np.shape(g))
        e_new = excess + step[1] * rng.standard_normal(np.shape(g))
        inside = (np.abs(g_new) < prior.skew) & (e_new > 0) & (e_new < prior.excess)
        g_new = np.where(inside, g_new, g)
        k_new = np.where(inside, 1.0 + g_new**2 + e_new, k)
        new = np.where(inside, shape_term(mean, scatter, loc, var, n, shape, g_new, k_new), -np.inf)
        with np.errstate(invalid="ignore"):
            ok = np.log(rng.uniform(size=np.shape(g))) < new - current
        g, k = np.where(ok, g_new, g), np.where(ok, k_new, k)
        current = np.where(ok, new, current)
        accepted += ok
    third, fourth = raw_moments(loc, var, g, k)
    held = shape.standard
    shape = shape._replace(third=np.where(held, g, third), fourth=np.where(held, k, fourth))
    return shape, accepted / moves
