"""The exact law of the regression statistic with a factor beside normal covariates.

The model of the covariates (the location model of Olkin & Tate, 1961): a factor of K levels,
dummy-coded by ``f = K − 1`` columns (level 0, the reference, all 0; level j ≥ 1 a 1 in column
j alone), with level probabilities π, and the other ``d₂ = d − f`` covariates
``x₂ | level g ~ N(m_g, Σ)``, a mean per level and one covariance; ``y = x̃ᵀθ + e`` as in
:mod:`~pymc_dp.regression.kernels.normal_model`. Records are independent given
``φ = (θ, σ², π, m₀, …, m_f, Σ)``. One binary covariate (``K = 2``) is the mixed model of
:mod:`~pymc_dp.regression.kernels.mixed_model`; no normal covariate (``d₂ = 0``) is the cell
model's ``"categories"`` layout (:mod:`~pymc_dp.regression.kernels.cell_model`). Internally the
factor's columns come first (:func:`columns_first` reorders a released vector).

The statistic's factor part is fixed by the level counts ``n_g``: ``Σ x_j = Σ x_j² = n_j`` (one
integer, read twice by the release) and ``Σ x_i x_j = 0`` for two columns of the factor. Given
the counts the statistic is a one-to-one function of

* the level sums ``S_g = Σ_{level g} x₂``, independent, ``S_g ~ N(n_g m_g, n_g Σ)``;
* the pooled within-level scatter ``W = Σ_g Σ_{i ∈ g} (x₂ᵢ − x̄_g)(x₂ᵢ − x̄_g)ᵀ ~
  Wishart(n − K, Σ)``, independent of the sums (Anderson 2003, Thm 3.3.2, per level, summed);
* ``b = X̃ᵀy`` and ``R`` given ``A = X̃ᵀX̃``
  (:func:`~pymc_dp.regression.kernels.normal_model.response_logpdf`);

with ``Σ x_j x₂ = S_j`` (j ≥ 1), ``Σ x₂ = Σ_g S_g`` and ``Σ x₂x₂ᵀ = W + Σ_g S_g S_gᵀ / n_g``. The
model is conditioned on every level being non-empty (else a level's mean is not defined by the
statistic): the counts are Multinomial(n, π) restricted to that event.

Prior: π ~ Dirichlet(1, …, 1) tilted by the probability of that event, which is also the count
law's normaliser, so the two cancel in the joint density (as in the cell model):
:func:`level_statistic_logpdf` leaves both out, and ``π | s ~ Dirichlet(1 + counts)`` exactly.
``(m_g, Σ)``: ``Σ ~ InverseWishart(ν, Ψ)`` and ``m_g | Σ ~ N(c, Σ/κ)`` independently
(:func:`draw_level_x` draws them given s).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy.special import gammaln, multigammaln

from pymc_dp.curator.regression.statistics import (
    d_from_released,
    pack_statistic,
    released_pairs,
    unpack_statistic,
)
from pymc_dp.regression.kernels.conjugate import NIG, draw_nig
from pymc_dp.regression.kernels.data_model import NIW, draw_niw
from pymc_dp.regression.kernels.normal_model import (
    record_moments,
    response_logpdf,
    split_statistic,
    statistic_from_gram,
)
from pymc_dp.regression.kernels.psd import batched_cholesky

__all__ = [
    "MAX_DRAWS",
    "LevelLayout",
    "LevelParameters",
    "LevelParts",
    "columns_first",
    "draw_level_prior",
    "draw_level_statistic",
    "draw_level_x",
    "level_layout",
    "level_parts",
    "level_record_moments",
    "level_statistic_logpdf",
    "location_logpdf",
]

_LOG_2PI = float(np.log(2.0 * np.pi))

MAX_DRAWS = 100
"""Rounds of :func:`draw_level_statistic`'s rejection of counts that leave a level empty."""


class LevelParameters(NamedTuple):
    """φ of the level model, batch first (the factor's columns first in θ)."""

    theta: npt.NDArray[np.float64]
    """Coefficients ``(..., d + 1)``, intercept first, then the factor's columns."""
    sigma2: npt.NDArray[np.float64]
    """Noise variance ``(...)``."""
    probs: npt.NDArray[np.float64]
    """π, the levels' probabilities ``(..., K)``, the reference level first."""
    group_loc: npt.NDArray[np.float64]
    """``m_g``, the normal covariates' mean at each level, ``(..., K, d₂)``."""
    x_cov: npt.NDArray[np.float64]
    """Σ, their covariance within a level, ``(..., d₂, d₂)``."""


class LevelLayout(NamedTuple):
    """Where the factor's part sits in the released layout (factor columns first)."""

    d: int
    """Number of covariates."""
    levels: int
    """K, the factor's levels (its columns are the first K − 1 covariates)."""
    counts: npt.NDArray[np.intp]
    """Released positions of ``Σ x_j``, j = 1 … K − 1: the integer coordinates."""
    squares: npt.NDArray[np.intp]
    """Released positions of ``Σ x_j²``, which equal them."""
    zeros: npt.NDArray[np.intp]
    """Released positions of ``Σ x_i x_j`` for two columns of the factor: 0."""
    rest: npt.NDArray[np.intp]
    """Released positions of every other entry (continuous given the counts)."""

    @property
    def readers(self) -> tuple[npt.NDArray[np.intp], ...]:
        """For each integer coordinate: the released positions that read it."""
        return tuple(np.array([c, q]) for c, q in zip(self.counts, self.squares))


@functools.cache
def level_layout(d: int, levels: int) -> LevelLayout:
    """The positions of the factor's part for d covariates, the first ``levels − 1`` a factor.

    Examples
    --------
    >>> layout = level_layout(3, 3)  # a factor of 3 levels (2 columns) and one normal covariate
    >>> layout.counts.tolist(), layout.squares.tolist(), layout.zeros.tolist()
    ([0, 1], [3, 6], [4])
    """
    if not 2 <= levels <= d + 1:
        raise ValueError(f"levels must be in [2, d + 1] = [2, {d + 1}] (got {levels})")
    f = levels - 1
    rows, cols = released_pairs(d)
    pairs = list(zip(rows.tolist(), cols.tolist()))
    counts = [pairs.index((0, j)) for j in range(1, f + 1)]
    squares = [pairs.index((j, j)) for j in range(1, f + 1)]
    zeros = [pairs.index((i, j)) for i in range(1, f + 1) for j in range(i + 1, f + 1)]
    fixed = set(counts) | set(squares) | set(zeros)
    rest = [e for e in range(len(pairs)) if e not in fixed]
    as_array = functools.partial(np.array, dtype=np.intp)
    return LevelLayout(d, levels, *map(as_array, (counts, squares, zeros, rest)))


@functools.cache
def _order(d: int, columns: tuple[int, ...]) -> np.ndarray:
    first = [j + 1 for j in columns]
    return np.array([0, *first, *(j + 1 for j in range(d) if j not in columns), d + 1])


def columns_first(
    s: npt.ArrayLike, columns: Sequence[int], *, inverse: bool = False
) -> npt.NDArray[np.float64]:
    """Reorder the covariates of released-layout statistics so that ``columns`` come first.

    With ``inverse`` the reordering is undone. The released layout's entries are products of
    pairs of record entries, so reordering covariates permutes them (no arithmetic).

    Examples
    --------
    >>> from pymc_dp.curator.regression.statistics import regression_statistic
    >>> x = np.array([[0.5, 1.0, 0.0], [-1.0, 0.0, 1.0], [2.0, 0.0, 0.0]])
    >>> y = np.array([1.0, 2.0, 3.0])
    >>> s = columns_first(regression_statistic(x, y), [1, 2])
    >>> bool(np.allclose(s, regression_statistic(x[:, [1, 2, 0]], y)))
    True
    >>> bool(np.allclose(columns_first(s, [1, 2], inverse=True), regression_statistic(x, y)))
    True
    """
    s = np.asarray(s, dtype=np.float64)
    d = d_from_released(s.shape[-1])
    columns = tuple(int(j) for j in columns)
    if len(set(columns)) != len(columns) or not all(0 <= j < d for j in columns):
        raise ValueError(f"columns must be distinct covariate indices in [0, {d - 1}]")
    order = _order(d, columns)
    if inverse:
        order = np.argsort(order)
    b = unpack_statistic(s, 0.0)
    return pack_statistic(b[..., order[:, None], order[None, :]])


class LevelParts(NamedTuple):
    """The statistic's covariate parts under the level model (module docstring)."""

    counts: npt.NDArray[np.float64]
    """``(n₀, …, n_f)``, ``(..., K)``: n₀ = n − Σ_{j≥1} n_j."""
    sums: npt.NDArray[np.float64]
    """``(S₀, …, S_f)``, ``(..., K, d₂)``."""
    scatter: npt.NDArray[np.float64]
    """W, ``(..., d₂, d₂)``."""
    consistent: npt.NDArray[np.bool_]
    """``(...)``: the counts whole and at least 1, each read twice alike, the zeros 0."""


def level_parts(s: npt.ArrayLike, n: npt.ArrayLike, layout: LevelLayout) -> LevelParts:
    """Split released-layout statistics (factor first) into the counts, level sums and W.

    Examples
    --------
    >>> from pymc_dp.curator.regression.statistics import regression_statistic
    >>> x = np.array([[1, 0, 0.5], [0, 1, -1.0], [0, 0, 1.5], [0, 1, 1.0], [0, 0, 2.5]])
    >>> parts = level_parts(regression_statistic(x, np.zeros(5)), 5, level_layout(3, 3))
    >>> parts.counts.tolist(), parts.sums[..., 0].tolist(), parts.scatter.tolist()
    ([2.0, 1.0, 2.0], [4.0, 0.5, 0.0], [[2.5]])
    """
    s = np.asarray(s, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    b = unpack_statistic(s, n)
    f, d = layout.levels - 1, layout.d
    ones = s[..., layout.counts]
    counts = np.concatenate([(n - np.sum(ones, axis=-1))[..., None], ones], axis=-1)
    normal = slice(f + 1, d + 1)
    level_sums = b[..., 1 : f + 1, normal]
    sums = np.concatenate([(b[..., 0, normal] - np.sum(level_sums, axis=-2))[..., None, :],
                           level_sums], axis=-2)  # fmt: skip
    with np.errstate(invalid="ignore", divide="ignore"):
        outer = sums[..., :, :, None] * sums[..., :, None, :] / counts[..., :, None, None]
    scatter = b[..., normal, normal] - np.sum(outer, axis=-3)
    consistent = (
        np.all(ones == np.round(ones), axis=-1)
        & np.all(counts >= 1.0, axis=-1)
        & np.all(s[..., layout.squares] == ones, axis=-1)
        & np.all(s[..., layout.zeros] == 0.0, axis=-1)
    )
    return LevelParts(counts, sums, scatter, consistent)


def location_logpdf(
    sums: npt.NDArray[np.float64],
    sizes: npt.NDArray[np.float64],
    scatter: npt.NDArray[np.float64],
    loc: npt.NDArray[np.float64],
    cov: npt.NDArray[np.float64],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Log density of the level sums and W given the sizes, and where it is defined.

    ``Π_g N(x̄_g; m_g, Σ/n_g) n_g^−d₂`` (the Jacobian of x̄_g = S_g / n_g) times
    ``Wishart(W; n − K, Σ)``, with ``sums`` ``(..., K, d₂)``, ``sizes`` ``(..., K)`` (all ≥ 1),
    ``scatter`` ``(..., d₂, d₂)``, ``loc`` ``(..., K, d₂)`` and ``cov`` ``(..., d₂, d₂)``. Not
    defined where Σ or W is not positive definite (a Σ from an unconstrained u far out can
    lose definiteness to rounding; a W of a statistic off the model can have a positive
    determinant with two negative eigenvalues, and such a W made the sampler wander off the
    model, so the test is Cholesky's).
    """
    d2 = loc.shape[-1]
    dof = np.sum(sizes, axis=-1) - sizes.shape[-1]
    chol, definite = batched_cholesky(cov)
    diag = np.arange(d2)
    logdet_cov = 2.0 * np.sum(np.log(chol[..., diag, diag]), axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums / sizes[..., None]
    centred = np.linalg.solve(chol[..., None, :, :], (means - loc)[..., None])[..., 0]
    out = np.sum(
        -0.5 * d2 * (_LOG_2PI + np.log(sizes))
        - 0.5 * logdet_cov[..., None]
        - 0.5 * sizes * np.sum(centred**2, axis=-1),
        axis=-1,
    )
    scatter_chol, definite_w = batched_cholesky(scatter)
    logdet_w = 2.0 * np.sum(np.log(scatter_chol[..., diag, diag]), axis=-1)
    inner = np.linalg.solve(chol, scatter)
    trace = np.trace(np.linalg.solve(np.swapaxes(chol, -1, -2), inner), 0, -2, -1)
    out = out + (
        0.5 * (dof - d2 - 1) * logdet_w
        - 0.5 * trace
        - 0.5 * dof * d2 * np.log(2.0)
        - 0.5 * dof * logdet_cov
        - multigammaln(0.5 * dof, d2)
    )
    return out, definite & definite_w


def _floats(par: LevelParameters) -> LevelParameters:
    return LevelParameters(*(np.asarray(a, dtype=np.float64) for a in par))


def level_statistic_logpdf(
    s: npt.ArrayLike, par: LevelParameters, n: npt.ArrayLike, layout: LevelLayout
) -> npt.NDArray[np.float64]:
    """Log density of the statistic (factor first) under the level model, the tilt left out.

    Parameters
    ----------
    s
        Statistics in the released layout, ``(..., m)``, the factor's columns first.
    par
        φ, batch broadcastable against s's.
    n
        Number of records, at least ``K + d₂ + 1``.
    layout
        :func:`level_layout`.

    Returns
    -------
    numpy.ndarray
        ``(...)``: ``log Multinomial(counts; n, π)`` plus the level sums' and W's
        (:func:`location_logpdf`) and the responses' part; −∞ where s is not one of the
        model's (:attr:`LevelParts.consistent`), W or Σ is not positive definite or the
        responses' part is invalid.

    Examples
    --------
    >>> layout = level_layout(2, 3)  # a factor of 3 levels alone
    >>> par = LevelParameters(np.array([0.0, 1.0, 0.5]), np.array(0.5), np.array([0.3, 0.3, 0.4]),
    ...                       np.zeros((3, 0)), np.zeros((0, 0)))
    >>> s = draw_level_statistic(np.random.default_rng(0), par, 50, layout)
    >>> bool(np.isfinite(level_statistic_logpdf(s, par, 50, layout)))
    True
    >>> s[layout.zeros] += 1.0  # two levels at once in a record
    >>> float(level_statistic_logpdf(s, par, 50, layout))
    -inf
    """
    s = np.asarray(s, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    theta, sigma2, probs, loc, cov = _floats(par)
    parts = level_parts(s, n, layout)
    ok = parts.consistent
    # Members off the model are evaluated at equal counts (so that W keeps n − K degrees of
    # freedom) and dropped.
    counts = np.where(ok[..., None], parts.counts, n[..., None] / layout.levels)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (
            gammaln(n + 1.0)
            - np.sum(gammaln(counts + 1.0), axis=-1)
            + np.sum(counts * np.log(probs), axis=-1)
        )
    if loc.shape[-1]:
        location, definite = location_logpdf(parts.sums, counts, parts.scatter, loc, cov)
        out, ok = out + location, ok & definite
    out = out + response_logpdf(split_statistic(s, n), theta=theta, sigma2=sigma2, n=n)
    return np.where(ok & np.isfinite(out), out, -np.inf)


def _gram(counts: np.ndarray, sums: np.ndarray, scatter: np.ndarray, n: np.ndarray) -> np.ndarray:
    """``A = X̃ᵀX̃`` ``(..., d + 1, d + 1)`` from the counts, level sums and W (factor first)."""
    f, d2 = counts.shape[-1] - 1, sums.shape[-1]
    p = 1 + f + d2
    gram = np.zeros((*counts.shape[:-1], p, p))
    gram[..., 0, 0] = n
    levels = np.arange(1, f + 1)
    gram[..., 0, levels] = gram[..., levels, 0] = counts[..., 1:]
    gram[..., levels, levels] = counts[..., 1:]
    if d2:
        normal = slice(f + 1, p)
        total = np.sum(sums, axis=-2)
        gram[..., 0, normal] = total
        gram[..., normal, 0] = total
        gram[..., 1 : f + 1, normal] = sums[..., 1:, :]
        gram[..., normal, 1 : f + 1] = np.swapaxes(sums[..., 1:, :], -1, -2)
        outer = sums[..., :, :, None] * sums[..., :, None, :] / counts[..., :, None, None]
        gram[..., normal, normal] = scatter + np.sum(outer, axis=-3)
    return gram


def draw_level_statistic(
    rng: np.random.Generator,
    par: LevelParameters,
    n: int,
    layout: LevelLayout,
    *,
    size: tuple[int, ...] = (),
    start: bool = False,
) -> npt.NDArray[np.float64]:
    """Exact draws of the statistic (factor first), without drawing records.

    The counts are multinomial given every level non-empty (drawn again where one is empty, at
    most :data:`MAX_DRAWS` times), the level sums normal, W by Bartlett's decomposition, then
    :func:`~pymc_dp.regression.kernels.normal_model.statistic_from_gram`; the cost does not
    depend on n. ``start=True`` is for a chain's first state, which need not be a draw of this
    law: where a level was empty every time, one record goes to every level and the other
    n − K are multinomial.

    Raises
    ------
    ValueError
        If some batch member left a level empty in every draw, unless ``start``.

    Examples
    --------
    >>> layout = level_layout(3, 3)
    >>> par = LevelParameters(np.zeros(4), np.array(1.0), np.array([0.2, 0.3, 0.5]),
    ...                       np.array([[0.0], [1.0], [2.0]]), np.array([[1.0]]))
    >>> s = draw_level_statistic(np.random.default_rng(1), par, 40, layout, size=(3,))
    >>> s.shape, bool(np.all(level_parts(s, 40, layout).consistent))
    ((3, 14), True)
    """
    theta, sigma2, probs, loc, cov = _floats(par)
    levels = probs.shape[-1]
    batch = tuple(size) + np.broadcast_shapes(
        theta.shape[:-1], sigma2.shape, probs.shape[:-1], loc.shape[:-2], cov.shape[:-2]
    )
    probs = np.broadcast_to(probs, (*batch, levels))
    counts = rng.multinomial(n, probs).astype(np.float64)
    for _ in range(MAX_DRAWS):
        empty = np.any(counts < 1.0, axis=-1)
        if not empty.any():
            break
        counts[empty] = rng.multinomial(n, probs[empty])
    else:
        empty = np.any(counts < 1.0, axis=-1)
        if empty.any() and not start:
            raise ValueError(
                f"the level probabilities left a level empty in {MAX_DRAWS} draws of {n} "
                f"records: give every level a probability of order 1/n or more"
            )
        counts[empty] = 1.0 + rng.multinomial(n - levels, probs[empty])
    return _statistic(rng, LevelParameters(theta, sigma2, probs, loc, cov), counts, n)


def _statistic(
    rng: np.random.Generator, par: LevelParameters, counts: np.ndarray, n: int
) -> npt.NDArray[np.float64]:
    """The statistic given the level counts ``(..., K)``: level sums, W, then the responses."""
    theta, sigma2, _, loc, cov = _floats(par)
    batch, levels, d2 = counts.shape[:-1], counts.shape[-1], loc.shape[-1]
    sums = np.zeros((*batch, levels, d2))
    scatter = np.zeros((*batch, d2, d2))
    if d2:
        chol = np.broadcast_to(np.linalg.cholesky(cov), (*batch, d2, d2))
        noise = (chol[..., None, :, :] @ rng.standard_normal((*batch, levels, d2, 1)))[..., 0]
        sums = counts[..., None] * loc + np.sqrt(counts)[..., None] * noise
        tri = np.tril(rng.standard_normal((*batch, d2, d2)), -1)
        dof = float(n) - levels - np.arange(d2)
        tri = tri + np.sqrt(rng.chisquare(dof, size=(*batch, d2)))[..., None] * np.eye(d2)
        factor = chol @ tri
        scatter = factor @ np.swapaxes(factor, -1, -2)
    nn = np.full(batch, float(n))
    gram = _gram(counts, sums, scatter, nn)
    return statistic_from_gram(rng, gram, theta=theta, sigma2=sigma2, n=nn)


def draw_level_prior(
    rng: np.random.Generator,
    prior: NIG,
    x_prior: NIW | None,
    layout: LevelLayout,
    size: int,
    n: int,
) -> tuple[LevelParameters, npt.NDArray[np.float64]]:
    """``size`` draws of (φ, s) from the model's joint prior: what a calibration study needs.

    (θ, σ²) ~ ``prior`` (factor first); π ~ Dirichlet(1, …, 1) tilted by the chance that every
    level is present, by drawing (π, counts) together until it is (exact rejection sampling
    from the tilted joint law); Σ ~ InverseWishart and m_g | Σ ~ N(c, Σ/κ) from ``x_prior``
    (``None`` when every covariate is a column of the factor); then the statistic given the
    counts.

    Raises
    ------
    ValueError
        If n < K + d₂ + 1: W would have no density, and the model needs every level present.

    Examples
    --------
    >>> from pymc_dp.regression.kernels.conjugate import NIG
    >>> layout = level_layout(3, 3)
    >>> prior = NIG(np.zeros(4), np.eye(4), np.array(3.0), np.array(1.0))
    >>> x_prior = NIW(np.zeros(1), np.array(1.0), np.array(3.0), np.eye(1))
    >>> par, s = draw_level_prior(np.random.default_rng(0), prior, x_prior, layout, 5, 30)
    >>> par.probs.shape, par.group_loc.shape, s.shape
    ((5, 3), (5, 3, 1), (5, 14))
    """
    levels = layout.levels
    d2 = layout.d - levels + 1
    if n < levels + d2 + 1:
        raise ValueError(f"n must be at least K + d2 + 1 = {levels + d2 + 1} (got {n})")
    theta, sigma2 = draw_nig(rng, prior, size=(size,))
    probs, counts = np.empty((size, levels)), np.zeros((size, levels))
    empty = np.ones(size, dtype=bool)
    while empty.any():
        probs[empty] = rng.dirichlet(np.ones(levels), size=int(empty.sum()))
        counts[empty] = rng.multinomial(n, probs[empty])
        empty = np.any(counts < 1.0, axis=-1)
    loc, cov = np.zeros((size, levels, d2)), np.zeros((size, d2, d2))
    if d2:
        _, cov = draw_niw(rng, x_prior, size=(size,))
        white = rng.standard_normal((size, levels, d2, 1))
        spread = np.linalg.cholesky(cov)[:, None] @ white / np.sqrt(x_prior.kappa)
        loc = np.asarray(x_prior.loc) + spread[..., 0]
    par = LevelParameters(theta, sigma2, probs, loc, cov)
    return par, _statistic(rng, par, counts, n)


def level_record_moments(
    par: LevelParameters,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Mean ``(..., m)`` and covariance ``(..., m, m)`` of one record's statistic t.

    A mixture over the levels of normal records with the factor's columns fixed at the level's
    corner (:func:`~pymc_dp.regression.kernels.normal_model.record_moments`), weights π. The
    covariance is singular along the ties and the zeros, which no record moves.

    Examples
    --------
    >>> par = LevelParameters(np.array([0.0, 1.0, 0.5]), np.array(0.5), np.array([0.7, 0.3]),
    ...                       np.array([[0.0], [1.0]]), np.array([[1.0]]))
    >>> mean, cov = level_record_moments(par)
    >>> round(float(mean[0]), 6), round(float(cov[0, 0]), 6)  # π₁ and π₁(1 − π₁)
    (0.3, 0.21)
    """
    theta, sigma2, probs, loc, cov = _floats(par)
    levels, d2 = probs.shape[-1], loc.shape[-1]
    batch = loc.shape[:-2]
    corners = np.broadcast_to(np.eye(levels)[:, 1:], (*batch, levels, levels - 1))
    x_loc = np.concatenate([corners, loc], axis=-1)
    d = levels - 1 + d2
    x_cov = np.zeros((*np.broadcast_shapes(batch, cov.shape[:-2]), levels, d, d))
    x_cov[..., levels - 1 :, levels - 1 :] = cov[..., None, :, :]
    means, covs = record_moments(theta[..., None, :], sigma2[..., None], x_loc, x_cov)
    mean = np.sum(probs[..., None] * means, axis=-2)
    second = covs + means[..., :, None] * means[..., None, :]
    cov_t = np.sum(probs[..., None, None] * second, axis=-3)
    return mean, cov_t - mean[..., :, None] * mean[..., None, :]


def draw_level_x(
    rng: np.random.Generator, x_prior: NIW | None, s: npt.ArrayLike, n: npt.ArrayLike,
    layout: LevelLayout,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """Exact draw of (π, (m_g), Σ) given a statistic of the model (factor first).

    π ~ Dirichlet(1 + counts); Σ ~ InverseWishart(ν + n, Ψ + W + Σ_g κn_g/(κ + n_g)
    (x̄_g − c)(x̄_g − c)ᵀ); m_g | Σ ~ N((κc + S_g)/(κ + n_g), Σ/(κ + n_g)): the levels' NIW
    updates with one Σ (each level's mean takes one of Σ's n degrees of freedom, W the other
    n − K).

    Returns
    -------
    probs : numpy.ndarray
        ``(..., K)``.
    group_loc : numpy.ndarray
        ``(..., K, d₂)``.
    x_cov : numpy.ndarray
        ``(..., d₂, d₂)``.

    Examples
    --------
    >>> layout = level_layout(3, 3)
    >>> par = LevelParameters(np.zeros(4), np.array(1.0), np.array([0.2, 0.3, 0.5]),
    ...                       np.array([[0.0], [1.0], [2.0]]), np.array([[1.0]]))
    >>> s = draw_level_statistic(np.random.default_rng(1), par, 400, layout)
    >>> prior = NIW(np.zeros(1), np.array(1.0), np.array(3.0), np.eye(1))
    >>> probs, loc, cov = draw_level_x(np.random.default_rng(2), prior, s, 400, layout)
    >>> probs.shape, loc.shape, cov.shape
    ((3,), (3, 1), (1, 1))
    """
    n = np.asarray(n, dtype=np.float64)
    parts = level_parts(s, n, layout)
    counts = np.maximum(parts.counts, 1.0)
    gamma = rng.standard_gamma(1.0 + counts)
    probs = gamma / np.sum(gamma, axis=-1, keepdims=True)
    d2 = parts.sums.shape[-1]
    batch = counts.shape[:-1]
    if not d2:
        return probs, np.zeros((*batch, layout.levels, 0)), np.zeros((*batch, 0, 0))
    kappa = np.asarray(x_prior.kappa, dtype=np.float64)[..., None]
    centre = np.asarray(x_prior.loc, dtype=np.float64)[..., None, :]
    diff = parts.sums / counts[..., None] - centre
    shrink = (kappa * counts / (kappa + counts))[..., None, None]
    scale = x_prior.scale + parts.scatter + np.sum(shrink * diff[..., :, None] * diff[..., None, :],
                                                   axis=-3)  # fmt: skip
    post_loc = (kappa[..., None] * centre + parts.sums) / (kappa + counts)[..., None]
    loc0, cov = draw_niw(
        rng, NIW(post_loc[..., 0, :], (kappa + counts)[..., 0], x_prior.dof + n,
                 0.5 * (scale + np.swapaxes(scale, -1, -2))),
    )  # fmt: skip
    white = rng.standard_normal((*batch, layout.levels - 1, d2, 1))
    others = (
        post_loc[..., 1:, :]
        + (np.linalg.cholesky(cov)[..., None, :, :] @ white)[..., 0]
        / np.sqrt(kappa + counts)[..., 1:, None]
    )
    loc = np.concatenate([loc0[..., None, :], others], axis=-2)
    return probs, loc, cov
