"""The exact law of the regression statistic with a binary covariate beside normal ones.

The model of the covariates (the conditional-Gaussian, or location, model): a binary covariate
``x_b ~ Bernoulli(π)``, and the other ``d₂ = d − 1`` covariates ``x₂ | x_b = g ~ N(m_g, Σ)``, a
mean per group and one covariance; ``y = x̃ᵀθ + e`` as in
:mod:`~pymc_dp.regression.kernels.normal_model`. Records are independent given
``φ = (θ, σ², π, m₀, m₁, Σ)``, conditioned on both groups being non-empty (``1 ≤ k ≤ n − 1`` for
``k = Σ x_b``), without which the statistic does not determine the parts below. Internally the
binary covariate is the first (:func:`binary_first` reorders a released vector).

A binary column has ``x_b² = x_b``, so the statistic's ``Σ x_b`` and ``Σ x_b²`` are one integer
``k``, read twice by the release. Given k, the statistic is a one-to-one function of

* the group sums ``S_g = Σ_{x_b = g} x₂``, independent, ``S_g ~ N(n_g m_g, n_g Σ)`` with
  ``n₁ = k``, ``n₀ = n − k``;
* the pooled within-group scatter ``W = Σ_g Σ_{i ∈ g} (x₂ᵢ − x̄_g)(x₂ᵢ − x̄_g)ᵀ ~ Wishart(n − 2, Σ)``,
  independent of the sums (Anderson 2003, Thm 3.3.2, per group, and the sum of independent
  Wisharts with one Σ);
* ``b = X̃ᵀy`` and ``R`` given ``A = X̃ᵀX̃``, whose law does not depend on the model of x
  (:func:`~pymc_dp.regression.kernels.normal_model.response_logpdf`);

and ``k ~ Binomial(n, π)`` restricted to ``[1, n − 1]``. The released entries map to these by
``Σ x_b x₂ = S₁``, ``Σ x₂ = S₀ + S₁``, ``Σ x₂x₂ᵀ = W + S₀S₀ᵀ/n₀ + S₁S₁ᵀ/n₁`` (unit triangular
given k), so :func:`mixed_statistic_logpdf` is the density of s with respect to counting measure
on k times Lebesgue measure on the other released entries (``Σ x_b²`` is k, not a coordinate).

Priors. π is uniform conditioned on both groups being non-empty, density proportional to
``Z(π) = 1 − πⁿ − (1 − π)ⁿ``; then ``π | k ~ Beta(1 + k, 1 + n − k)`` exactly. ``(m₀, m₁, Σ)``:
``Σ ~ InverseWishart(ν, Ψ)`` and ``m_g | Σ ~ N(c, Σ/κ)`` independently, the box prior of the
normal columns (:func:`~pymc_dp.regression.model.default_prior.default_mixed_x_prior`), with
the conjugate update of :func:`draw_mixed_x`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy import stats
from scipy.special import gammaln

from pymc_dp.curator.regression.statistics import (
    d_from_released,
    pack_statistic,
    released_pairs,
    unpack_statistic,
)
from pymc_dp.regression.kernels.data_model import NIW, draw_niw
from pymc_dp.regression.kernels.level_model import location_logpdf
from pymc_dp.regression.kernels.normal_model import (
    record_moments,
    response_logpdf,
    split_statistic,
    statistic_from_gram,
)

__all__ = [
    "MixedParameters",
    "binary_first",
    "covariate_order",
    "draw_mixed_statistic",
    "draw_mixed_x",
    "group_parts",
    "log_prob_prior",
    "mixed_record_moments",
    "mixed_statistic_logpdf",
    "tied_positions",
]


class MixedParameters(NamedTuple):
    """φ of the mixed model, batch first."""

    theta: npt.NDArray[np.float64]
    """Coefficients ``(..., p)``, intercept first, then the binary covariate's."""
    sigma2: npt.NDArray[np.float64]
    """Noise variance ``(...)``."""
    prob: npt.NDArray[np.float64]
    """π = P(x_b = 1), ``(...)``."""
    group_loc: npt.NDArray[np.float64]
    """``(m₀, m₁)``, the normal covariates' mean in each group, ``(..., 2, d₂)``."""
    x_cov: npt.NDArray[np.float64]
    """Σ, their covariance within a group, ``(..., d₂, d₂)``."""


def _floats(par: MixedParameters) -> MixedParameters:
    return MixedParameters(*(np.asarray(a, dtype=np.float64) for a in par))


@functools.cache
def tied_positions(d: int) -> tuple[int, int]:
    """Positions of ``Σ x_b`` and ``Σ x_b²`` in the released layout (binary covariate first).

    Examples
    --------
    >>> tied_positions(2)
    (0, 2)
    """
    rows, cols = released_pairs(d)
    pairs = list(zip(rows.tolist(), cols.tolist()))
    return pairs.index((0, 1)), pairs.index((1, 1))


def binary_first(s: npt.ArrayLike, binary: int, *, inverse: bool = False) -> np.ndarray:
    """Reorder the covariates of released-layout statistics so that ``binary`` comes first.

    With ``inverse`` the reordering is undone. The released layout's entries are products of
    pairs of record entries, so reordering covariates permutes them (no arithmetic).

    Examples
    --------
    >>> from pymc_dp.curator.regression.statistics import regression_statistic
    >>> x = np.array([[0.5, 1.0], [-1.0, 0.0], [2.0, 1.0]]); y = np.array([1.0, 2.0, 3.0])
    >>> s = binary_first(regression_statistic(x, y), 1)
    >>> bool(np.allclose(s, regression_statistic(x[:, ::-1], y)))
    True
    >>> bool(np.allclose(binary_first(s, 1, inverse=True), regression_statistic(x, y)))
    True
    """
    s = np.asarray(s, dtype=np.float64)
    order = covariate_order(d_from_released(s.shape[-1]), int(binary))
    if inverse:
        order = np.argsort(order)
    b = unpack_statistic(s, 0.0)
    return pack_statistic(b[..., order[:, None], order[None, :]])


@functools.cache
def covariate_order(d: int, binary: int) -> np.ndarray:
    """Record indices (intercept, covariates, response) with covariate ``binary`` first.

    Examples
    --------
    >>> covariate_order(3, 1).tolist()
    [0, 2, 1, 3, 4]
    """
    if not 0 <= binary < d:
        raise ValueError(f"binary must be a covariate index in [0, {d - 1}] (got {binary})")
    covariates = [binary + 1] + [j + 1 for j in range(d) if j != binary]
    return np.array([0, *covariates, d + 1])


class GroupParts(NamedTuple):
    """The statistic's covariate parts under the mixed model (module docstring)."""

    count: npt.NDArray[np.float64]
    """k = Σ x_b, ``(...)``."""
    tie: npt.NDArray[np.float64]
    """Σ x_b², ``(...)``: equal to k for a statistic of the model."""
    sums: npt.NDArray[np.float64]
    """``(S₀, S₁)``, ``(..., 2, d₂)``."""
    scatter: npt.NDArray[np.float64]
    """W, ``(..., d₂, d₂)``."""


def group_parts(s: npt.ArrayLike, n: npt.ArrayLike) -> GroupParts:
    """Split released-layout statistics (binary covariate first) into k, the group sums and W.

    Examples
    --------
    >>> from pymc_dp.curator.regression.statistics import regression_statistic
    >>> x = np.array([[1.0, 0.5], [0.0, -1.0], [1.0, 1.5], [0.0, 1.0]])
    >>> parts = group_parts(regression_statistic(x, np.zeros(4)), 4)
    >>> float(parts.count), parts.sums.tolist(), parts.scatter.tolist()
    (2.0, [[0.0], [2.0]], [[2.5]])
    """
    b = unpack_statistic(s, n)
    n = np.asarray(n, dtype=np.float64)
    p = b.shape[-1] - 1
    count = b[..., 0, 1]
    ones = b[..., 1, 2:p]
    sums = np.stack([b[..., 0, 2:p] - ones, ones], axis=-2)
    sizes = np.stack([n - count, count], axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        outer = sums[..., :, :, None] * sums[..., :, None, :] / sizes[..., :, None, None]
    scatter = b[..., 2:p, 2:p] - np.sum(outer, axis=-3)
    return GroupParts(count, b[..., 1, 1], sums, scatter)


def log_prob_prior(prob: npt.ArrayLike, n: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Log density of π's prior, uniform given both groups non-empty: ∝ 1 − πⁿ − (1 − π)ⁿ.

    Normalised: ∫ Z(π) dπ = 1 − 2/(n + 1).

    Examples
    --------
    >>> from scipy.integrate import quad
    >>> round(quad(lambda q: np.exp(log_prob_prior(q, 5)), 0, 1)[0], 10)
    1.0
    """
    prob = np.asarray(prob, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = -np.expm1(np.logaddexp(n * np.log(prob), n * np.log1p(-prob)))
        return np.log(z) - np.log1p(-2.0 / (n + 1.0))


def _log_binomial(count: np.ndarray, prob: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Log Binomial(k; n, π) restricted to [1, n − 1] (normalised there)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        log_z = np.log(-np.expm1(np.logaddexp(n * np.log(prob), n * np.log1p(-prob))))
        return (
            gammaln(n + 1.0)
            - gammaln(count + 1.0)
            - gammaln(n - count + 1.0)
            + count * np.log(prob)
            + (n - count) * np.log1p(-prob)
            - log_z
        )


def mixed_statistic_logpdf(
    s: npt.ArrayLike, par: MixedParameters, n: npt.ArrayLike
) -> npt.NDArray[np.float64]:
    """Exact log density of the statistic (binary covariate first) under the mixed model.

    Parameters
    ----------
    s
        Statistics in the released layout, ``(..., m)``, with the binary covariate first.
    par
        φ, batch broadcastable against s's.
    n
        Number of records, at least ``d + 2``.

    Returns
    -------
    numpy.ndarray
        ``(...)``: the density of the module docstring; −∞ where ``Σ x_b² ≠ Σ x_b``, k is not
        a whole number in ``[1, n − 1]``, W or Σ is not positive definite or the responses' part
        is invalid.

    Examples
    --------
    >>> par = MixedParameters(np.array([0.0, 1.0, 0.5]), np.array(0.5), np.array(0.3),
    ...                       np.array([[0.0], [1.0]]), np.array([[1.0]]))
    >>> s = draw_mixed_statistic(np.random.default_rng(0), par, 50)
    >>> bool(np.isfinite(mixed_statistic_logpdf(s, par, 50)))
    True
    >>> s[2] += 0.5  # Σ x_b² no longer equals Σ x_b
    >>> float(mixed_statistic_logpdf(s, par, 50))
    -inf
    """
    s = np.asarray(s, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    theta, sigma2, prob, loc, cov = _floats(par)
    d2 = loc.shape[-1]
    parts = group_parts(s, n)
    k = parts.count
    ok = (parts.tie == k) & (k == np.round(k)) & (k >= 1) & (k <= n - 1)
    kk = np.where(ok, k, 1.0)
    out = _log_binomial(kk, prob, n)
    if d2:
        sizes = np.stack([n - kk, kk], axis=-1)
        location, definite = location_logpdf(parts.sums, sizes, parts.scatter, loc, cov)
        out, ok = out + location, ok & definite
    out = out + response_logpdf(split_statistic(s, n), theta=theta, sigma2=sigma2, n=n)
    return np.where(ok & np.isfinite(out), out, -np.inf)


def draw_mixed_statistic(
    rng: np.random.Generator,
    par: MixedParameters,
    n: npt.ArrayLike,
    *,
    size: tuple[int, ...] = (),
) -> npt.NDArray[np.float64]:
    """Exact draws of the statistic (binary covariate first), without drawing records.

    k from the restricted binomial (by inversion), the group sums, W (Bartlett), then
    :func:`~pymc_dp.regression.kernels.normal_model.statistic_from_gram`; the cost does not
    depend on n.

    Examples
    --------
    >>> par = MixedParameters(np.array([0.0, 1.0, 0.5]), np.array(0.5), np.array(0.3),
    ...                       np.array([[0.0], [1.0]]), np.array([[1.0]]))
    >>> s = draw_mixed_statistic(np.random.default_rng(0), par, 50, size=(4,))
    >>> s.shape, bool(np.all(s[:, 0] == s[:, 2]))
    ((4, 9), True)
    """
    theta, sigma2, prob, loc, cov = _floats(par)
    d2 = loc.shape[-1]
    p = d2 + 2
    batch = tuple(size) + np.broadcast_shapes(
        theta.shape[:-1], sigma2.shape, prob.shape, loc.shape[:-2], cov.shape[:-2],
        np.shape(n),
    )  # fmt: skip
    n = np.broadcast_to(np.asarray(n, dtype=np.float64), batch)
    prob = np.broadcast_to(prob, batch)
    low, high = stats.binom.cdf(0, n, prob), stats.binom.cdf(n - 1, n, prob)
    count = stats.binom.ppf(low + (high - low) * rng.uniform(size=batch), n, prob)
    count = np.clip(np.nan_to_num(count, nan=1.0), 1.0, n - 1.0)
    sizes = np.stack([n - count, count], axis=-1)
    gram = np.empty((*batch, p, p))
    gram[..., 0, 0] = n
    gram[..., 0, 1] = gram[..., 1, 0] = gram[..., 1, 1] = count
    if d2:
        chol = np.broadcast_to(np.linalg.cholesky(cov), (*batch, d2, d2))
        noise = (chol[..., None, :, :] @ rng.standard_normal((*batch, 2, d2, 1)))[..., 0]
        sums = sizes[..., None] * loc + np.sqrt(sizes)[..., None] * noise
        tri = np.tril(rng.standard_normal((*batch, d2, d2)), -1)
        dof = n[..., None] - 2.0 - np.arange(d2)
        tri = tri + np.sqrt(rng.chisquare(dof, size=(*batch, d2)))[..., None] * np.eye(d2)
        factor = chol @ tri
        scatter = factor @ np.swapaxes(factor, -1, -2)
        outer = sums[..., :, :, None] * sums[..., :, None, :] / sizes[..., :, None, None]
        gram[..., 0, 2:] = gram[..., 2:, 0] = sums[..., 0, :] + sums[..., 1, :]
        gram[..., 1, 2:] = gram[..., 2:, 1] = sums[..., 1, :]
        gram[..., 2:, 2:] = scatter + np.sum(outer, axis=-3)
    return statistic_from_gram(rng, gram, theta=theta, sigma2=sigma2, n=n)


def mixed_record_moments(
    par: MixedParameters,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Mean ``(..., m)`` and covariance ``(..., m, m)`` of one record's statistic t.

    A mixture of two normal records, x_b fixed at g with weight π_g: each group's moments by
    :func:`~pymc_dp.regression.kernels.normal_model.record_moments` (Isserlis, with x_b a
    constant), then ``E t = Σ π_g μ_g`` and ``Cov t = Σ π_g (Σ_g + μ_g μ_gᵀ) − E t E tᵀ``. The
    covariance is singular along ``Σ x_b − Σ x_b²``, which is 0 for every record.

    Examples
    --------
    >>> par = MixedParameters(np.array([0.0, 1.0, 0.5]), np.array(0.5), np.array(0.3),
    ...                       np.array([[0.0], [1.0]]), np.array([[1.0]]))
    >>> mean, cov = mixed_record_moments(par)
    >>> round(float(mean[0]), 6), round(float(cov[0, 0]), 6)  # π and π(1 − π)
    (0.3, 0.21)
    """
    theta = np.asarray(par.theta, dtype=np.float64)
    prob = np.asarray(par.prob, dtype=np.float64)
    loc = np.asarray(par.group_loc, dtype=np.float64)
    cov = np.asarray(par.x_cov, dtype=np.float64)
    d2 = loc.shape[-1]
    batch = loc.shape[:-2]
    x_loc = np.concatenate([np.broadcast_to([[0.0], [1.0]], (*batch, 2, 1)), loc], axis=-1)
    x_cov = np.zeros((*np.broadcast_shapes(batch, cov.shape[:-2]), 2, d2 + 1, d2 + 1))
    x_cov[..., 1:, 1:] = cov[..., None, :, :]
    means, covs = record_moments(
        theta[..., None, :], np.asarray(par.sigma2)[..., None], x_loc, x_cov
    )
    weights = np.stack([1.0 - prob, prob], axis=-1)
    mean = np.sum(weights[..., None] * means, axis=-2)
    second = covs + means[..., :, None] * means[..., None, :]
    cov_t = np.sum(weights[..., None, None] * second, axis=-3)
    return mean, cov_t - mean[..., :, None] * mean[..., None, :]


def draw_mixed_x(
    rng: np.random.Generator, x_prior: NIW, s: npt.ArrayLike, n: npt.ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact draw of (π, (m₀, m₁), Σ) given a statistic of the model (binary covariate first).

    π ~ Beta(1 + k, 1 + n − k); Σ ~ InverseWishart(ν + n, Ψ + W + Σ_g κn_g/(κ + n_g)
    (x̄_g − c)(x̄_g − c)ᵀ); m_g | Σ ~ N((κc + S_g)/(κ + n_g), Σ/(κ + n_g)): the two groups' NIW
    updates with one Σ (each group's mean takes one of Σ's n degrees of freedom, W the other
    n − 2).

    Returns
    -------
    prob : numpy.ndarray
        ``(...)``.
    group_loc : numpy.ndarray
        ``(..., 2, d₂)``.
    x_cov : numpy.ndarray
        ``(..., d₂, d₂)``.
    """
    n = np.asarray(n, dtype=np.float64)
    parts = group_parts(s, n)
    k = parts.count
    prob = rng.beta(1.0 + k, 1.0 + n - k)
    d2 = parts.sums.shape[-1]
    batch = k.shape
    if not d2:
        return prob, np.zeros((*batch, 2, 0)), np.zeros((*batch, 0, 0))
    sizes = np.stack([n - k, k], axis=-1)
    kappa = np.asarray(x_prior.kappa, dtype=np.float64)[..., None]
    centre = np.asarray(x_prior.loc, dtype=np.float64)[..., None, :]
    means = parts.sums / sizes[..., None]
    diff = means - centre
    shrink = (kappa * sizes / (kappa + sizes))[..., None, None]
    scale = x_prior.scale + parts.scatter + np.sum(shrink * diff[..., :, None] * diff[..., None, :],
                                                   axis=-3)  # fmt: skip
    post_loc = (kappa[..., None] * centre + parts.sums) / (kappa + sizes)[..., None]
    loc0, cov = draw_niw(
        rng, NIW(post_loc[..., 0, :], (kappa + sizes)[..., 0], x_prior.dof + n,
                 0.5 * (scale + np.swapaxes(scale, -1, -2))),
    )  # fmt: skip
    root = np.linalg.cholesky(cov)
    loc1 = (
        post_loc[..., 1, :]
        + (root @ rng.standard_normal((*batch, d2, 1)))[..., 0]
        / np.sqrt((kappa + sizes)[..., 1])[..., None]
    )
    return prob, np.stack([loc0, loc1], axis=-2), cov
