"""The exact law of the regression statistic with a factor or a pair of binaries beside normal ones.

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

**Two binary covariates beside normal ones** (:func:`pair_layout`, ``kind="pair"``): the pair
(b₁, b₂) takes the four corners of the unit square with probabilities π (the cells), and the
normal covariates ``x₂ | b ~ N(Mᵀ d(b), Σ)`` with the additive design row
``d = (1 − b₁ − b₂, b₁, b₂)``: M's rows are the means at the corners (0, 0), (1, 0) and (0, 1),
and the mean at (1, 1) is ``m₁₀ + m₀₁ − m₀₀``. The release reads ``Σ b₁``, ``Σ b₂`` and
``Σ b₁b₂`` (the four cells' counts, the integer coordinates) but not the normal covariates' sum
in each corner, only ``T = Dᵀx₂`` (``Σ x₂`` less ``Σ b₁x₂`` and ``Σ b₂x₂``, and those two) and
``Σ x₂x₂ᵀ``: a mean per corner is not identified, the additive one is. Given the counts,
T ~ MatrixNormal(G M, G, Σ) with ``G = DᵀD`` and ``W = Σ x₂x₂ᵀ − TᵀG⁻¹T ~ Wishart(n − 3, Σ)``
independent of T (:func:`design_location_logpdf`; with the factor's one-hot rows G is diagonal
and this is the location model above). The model is conditioned on three corners or more being
present (G positive definite), with π's prior tilted likewise, as the cell model's pair; M's rows
are iid N(c, Σ/κ) a priori.
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
    "cells_from_coordinates",
    "columns_first",
    "coordinates_from_cells",
    "design_gram",
    "design_location_logpdf",
    "draw_level_prior",
    "draw_level_statistic",
    "draw_level_x",
    "level_layout",
    "level_parts",
    "level_record_moments",
    "level_statistic_logpdf",
    "location_logpdf",
    "pair_layout",
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
    """Where the binary columns' part sits in the released layout (binary columns first)."""

    d: int
    """Number of covariates."""
    levels: int
    """C, the cells: the factor's K levels, or the pair's 4 corners."""
    counts: npt.NDArray[np.intp]
    """Released positions of the integer coordinates: ``Σ x_j`` for every binary column, and
    for the pair ``Σ x₁x₂``."""
    squares: npt.NDArray[np.intp]
    """Released positions of ``Σ x_j²``, which equal ``Σ x_j``."""
    zeros: npt.NDArray[np.intp]
    """Released positions of ``Σ x_i x_j`` for two columns of the factor: 0."""
    rest: npt.NDArray[np.intp]
    """Released positions of every other entry (continuous given the counts)."""
    kind: str = "factor"
    """``"factor"`` (the dummy columns of one factor) or ``"pair"`` (two binary covariates with
    all four corners, additive means)."""

    @property
    def columns(self) -> int:
        """f, the binary columns (the first f covariates)."""
        return 2 if self.kind == "pair" else self.levels - 1

    @property
    def means(self) -> int:
        """The rows r = f + 1 of the normal covariates' mean parameters (one per free cell)."""
        return self.columns + 1

    @property
    def readers(self) -> tuple[npt.NDArray[np.intp], ...]:
        """For each integer coordinate: the released positions that read it."""
        pairs = [np.array([c, q]) for c, q in zip(self.counts, self.squares)]
        return tuple(pairs + [np.array([c]) for c in self.counts[len(self.squares) :]])

    @property
    def corners(self) -> npt.NDArray[np.float64]:
        """The binary columns' values in each cell, ``(C, f)``, the reference cell (all 0) first."""
        return _cell_tables(self.kind, self.levels)[0]

    @property
    def design(self) -> npt.NDArray[np.float64]:
        """Each cell's row of the design of the normal covariates' mean, ``(C, r)``.

        The mean at cell c is ``design[c] @ M``, M ``(r, d₂)`` the means of the first r cells
        (:attr:`LevelParameters.group_loc`): ``(1 − Σ_j x_j, x₁, …, x_f)``, one-hot for the
        factor's levels, ``(−1, 1, 1)`` at the pair's corner (1, 1) (means additive in x₁, x₂).
        """
        return _cell_tables(self.kind, self.levels)[1]


@functools.cache
def _cell_tables(kind: str, levels: int) -> tuple[np.ndarray, ...]:
    """Corners ``(C, f)``, design ``(C, r)``, coordinates ``(J, C)``, cells from (n, k)."""
    if kind == "pair":
        corners = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
        coordinates = np.vstack([corners.T, corners[:, 0] * corners[:, 1]])
    else:
        corners = np.eye(levels)[:, 1:]
        coordinates = corners.T
    design = np.column_stack([1.0 - corners.sum(axis=1), corners])
    # (n, k) = [1; coordinates] @ cells; the inverse has whole entries for both kinds.
    from_coordinates = np.rint(np.linalg.inv(np.vstack([np.ones(levels), coordinates])))
    for table in (corners, design, coordinates, from_coordinates):
        table.flags.writeable = False
    return corners, design, coordinates, from_coordinates


def cells_from_coordinates(
    k: npt.ArrayLike, n: npt.ArrayLike, layout: LevelLayout
) -> npt.NDArray[np.float64]:
    """The cell counts ``(..., C)`` from the integer coordinates k ``(..., J)`` and n.

    Examples
    --------
    >>> cells_from_coordinates([30.0, 20.0, 5.0], 100, pair_layout(3)).tolist()
    [55.0, 25.0, 15.0, 5.0]
    """
    k = np.asarray(k, dtype=np.float64)
    n = np.broadcast_to(np.asarray(n, dtype=np.float64), k.shape[:-1])
    inverse = _cell_tables(layout.kind, layout.levels)[3]
    return np.concatenate([n[..., None], k], axis=-1) @ inverse.T


def coordinates_from_cells(cells: npt.ArrayLike, layout: LevelLayout) -> npt.NDArray[np.float64]:
    """The integer coordinates ``(..., J)`` of cell counts ``(..., C)``."""
    return np.asarray(cells, dtype=np.float64) @ _cell_tables(layout.kind, layout.levels)[2].T


def _defined(cells: np.ndarray, layout: LevelLayout) -> np.ndarray:
    """Counts whose means are defined by the statistic: every level kept, or 3 corners of 4."""
    if layout.kind == "pair":
        return np.sum(cells >= 1.0, axis=-1) >= 3
    return np.all(cells >= 1.0, axis=-1)


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
    pairs = _pairs(d)
    counts = [pairs.index((0, j)) for j in range(1, f + 1)]
    squares = [pairs.index((j, j)) for j in range(1, f + 1)]
    zeros = [pairs.index((i, j)) for i in range(1, f + 1) for j in range(i + 1, f + 1)]
    return _layout(d, levels, counts, squares, zeros, "factor")


@functools.cache
def pair_layout(d: int) -> LevelLayout:
    """The positions of two binary covariates' part (the first two of d) beside normal ones.

    The integer coordinates are ``Σ x₁``, ``Σ x₂`` and ``Σ x₁x₂`` (the four corners' counts).

    Examples
    --------
    >>> layout = pair_layout(3)
    >>> layout.counts.tolist(), layout.squares.tolist(), layout.levels, layout.means
    ([0, 1, 4], [3, 6], 4, 3)
    """
    if d < 3:
        raise ValueError(f"d must be at least 3, two binary covariates and a normal one (got {d})")
    pairs = _pairs(d)
    counts = [pairs.index((0, 1)), pairs.index((0, 2)), pairs.index((1, 2))]
    squares = [pairs.index((1, 1)), pairs.index((2, 2))]
    return _layout(d, 4, counts, squares, [], "pair")


def _pairs(d: int) -> list[tuple[int, int]]:
    rows, cols = released_pairs(d)
    return list(zip(rows.tolist(), cols.tolist()))


def _layout(d, levels, counts, squares, zeros, kind) -> LevelLayout:
    fixed = set(counts) | set(squares) | set(zeros)
    rest = [e for e in range(len(_pairs(d))) if e not in fixed]
    as_array = functools.partial(np.array, dtype=np.intp)
    return LevelLayout(d, levels, *map(as_array, (counts, squares, zeros, rest)), kind)


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
    """The cells' counts ``(..., C)``: for the factor ``(n₀, …, n_f)``, n₀ = n − Σ_{j≥1} n_j."""
    sums: npt.NDArray[np.float64]
    """T = Dᵀx₂ ``(..., r, d₂)``, D the records' design rows (:attr:`LevelLayout.design`): the
    level sums ``(S₀, …, S_f)`` for the factor."""
    scatter: npt.NDArray[np.float64]
    """W = Σ x₂x₂ᵀ − Tᵀ G⁻¹ T, ``(..., d₂, d₂)``: the scatter about the fitted means."""
    consistent: npt.NDArray[np.bool_]
    """``(...)``: the counts whole, their means defined (every level present; three corners of
    the pair), each read alike, the zeros 0."""
    gram: npt.NDArray[np.float64] | None = None
    """For the pair, G = DᵀD ``(..., 3, 3)`` (for the factor it is ``diag(counts)``)."""


def _fitted(sums: np.ndarray, counts: np.ndarray, gram: np.ndarray | None) -> np.ndarray:
    """TᵀG⁻¹T ``(..., d₂, d₂)``: Σ_g S_g S_gᵀ / n_g for the factor (``gram`` None), else with G.

    Where G is not positive definite (a statistic off the model) the result is not used.
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        if gram is None:
            outer = sums[..., :, :, None] * sums[..., :, None, :] / counts[..., :, None, None]
            return np.sum(outer, axis=-3)
        chol, definite = batched_cholesky(gram)
        chol = np.where(definite[..., None, None], chol, np.eye(gram.shape[-1]))
        half = np.linalg.solve(chol, sums)
    return np.swapaxes(half, -1, -2) @ half


def design_gram(cells: npt.ArrayLike, layout: LevelLayout) -> npt.NDArray[np.float64]:
    """G = DᵀD = Σ_c n_c d_c d_cᵀ ``(..., r, r)`` from the cell counts ``(..., C)``."""
    design = layout.design
    return np.einsum("...c,ci,cj->...ij", np.asarray(cells, dtype=np.float64), design, design)


def level_parts(s: npt.ArrayLike, n: npt.ArrayLike, layout: LevelLayout) -> LevelParts:
    """Split released-layout statistics (binary columns first) into counts, sums and W.

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
    f, d = layout.columns, layout.d
    ones = s[..., layout.counts]
    counts = cells_from_coordinates(ones, n, layout)
    normal = slice(f + 1, d + 1)
    level_sums = b[..., 1 : f + 1, normal]
    sums = np.concatenate([(b[..., 0, normal] - np.sum(level_sums, axis=-2))[..., None, :],
                           level_sums], axis=-2)  # fmt: skip
    defined = np.all(counts >= 0.0, axis=-1) & _defined(counts, layout)
    gram = None
    if layout.kind == "pair":  # members off the model get a regular G (never used): no rounding
        gram = design_gram(np.where(defined[..., None], counts, 1.0), layout)  # test of G
    scatter = b[..., normal, normal] - _fitted(sums, counts, gram)
    consistent = (
        np.all(ones == np.round(ones), axis=-1)
        & defined
        & np.all(s[..., layout.squares] == ones[..., :f], axis=-1)
        & np.all(s[..., layout.zeros] == 0.0, axis=-1)
    )
    return LevelParts(counts, sums, scatter, consistent, gram)


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
    wishart, definite_w = _wishart_logpdf(scatter, dof, chol, logdet_cov)
    return out + wishart, definite & definite_w


def _wishart_logpdf(scatter, dof, chol, logdet_cov):
    """``log Wishart(W; dof, Σ)`` given Σ's Cholesky factor and log det, and W definite."""
    d2 = scatter.shape[-1]
    diag = np.arange(d2)
    scatter_chol, definite_w = batched_cholesky(scatter)
    logdet_w = 2.0 * np.sum(np.log(scatter_chol[..., diag, diag]), axis=-1)
    inner = np.linalg.solve(chol, scatter)
    trace = np.trace(np.linalg.solve(np.swapaxes(chol, -1, -2), inner), 0, -2, -1)
    out = (
        0.5 * (dof - d2 - 1) * logdet_w
        - 0.5 * trace
        - 0.5 * dof * d2 * np.log(2.0)
        - 0.5 * dof * logdet_cov
        - multigammaln(0.5 * dof, d2)
    )
    return out, definite_w


def design_location_logpdf(
    sums: npt.NDArray[np.float64],
    gram: npt.NDArray[np.float64],
    scatter: npt.NDArray[np.float64],
    loc: npt.NDArray[np.float64],
    cov: npt.NDArray[np.float64],
    n: npt.NDArray[np.float64],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Log density of T = Dᵀx₂ and W given the design's G = DᵀD, and where it is defined.

    x₂ = D M + E with E's rows N(0, Σ) (a multivariate regression on the design rows), so
    T ~ MatrixNormal(G M, G, Σ) and W = x₂ᵀx₂ − Tᵀ G⁻¹ T ~ Wishart(n − r, Σ), independent of T
    (Anderson 2003, Thm 8.2.2). ``sums`` T ``(..., r, d₂)``, ``gram`` G ``(..., r, r)``
    (positive definite), ``loc`` M ``(..., r, d₂)``. With G = diag(sizes) this is
    :func:`location_logpdf`.
    """
    r, d2 = loc.shape[-2:]
    chol_g, definite_g = batched_cholesky(gram)
    chol_g = np.where(definite_g[..., None, None], chol_g, np.eye(r))
    chol, definite = batched_cholesky(cov)
    diag_r, diag = np.arange(r), np.arange(d2)
    logdet_g = 2.0 * np.sum(np.log(chol_g[..., diag_r, diag_r]), axis=-1)
    logdet_cov = 2.0 * np.sum(np.log(chol[..., diag, diag]), axis=-1)
    half = np.linalg.solve(chol_g, sums - gram @ loc)  # G^(−1/2) (T − G M), rows ~ N(0, Σ)
    white = np.linalg.solve(chol[..., None, :, :], half[..., None])[..., 0]
    out = (
        -0.5 * r * d2 * _LOG_2PI
        - 0.5 * d2 * logdet_g
        - 0.5 * r * logdet_cov
        - 0.5 * np.sum(white**2, axis=(-2, -1))
    )
    wishart, definite_w = _wishart_logpdf(scatter, n - r, chol, logdet_cov)
    return out + wishart, definite & definite_g & definite_w


def _floats(par: LevelParameters) -> LevelParameters:
    return LevelParameters(*(np.asarray(a, dtype=np.float64) for a in par))


def level_statistic_logpdf(
    s: npt.ArrayLike, par: LevelParameters, n: npt.ArrayLike, layout: LevelLayout
) -> npt.NDArray[np.float64]:
    """Log density of the statistic (binary columns first) under the level model, tilt left out.

    Parameters
    ----------
    s
        Statistics in the released layout, ``(..., m)``, the binary columns first.
    par
        φ, batch broadcastable against s's.
    n
        Number of records, at least ``r + d₂ + 1``.
    layout
        :func:`level_layout` or :func:`pair_layout`.

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
    if loc.shape[-1] and layout.kind == "pair":
        gram = np.where(ok[..., None, None], parts.gram, design_gram(counts, layout))
        location, definite = design_location_logpdf(parts.sums, gram, parts.scatter, loc, cov, n)
        out, ok = out + location, ok & definite
    elif loc.shape[-1]:
        location, definite = location_logpdf(parts.sums, counts, parts.scatter, loc, cov)
        out, ok = out + location, ok & definite
    return np.where(ok, out + _response_logpdf(s, theta, sigma2, n, ok), -np.inf)


def _response_logpdf(s, theta, sigma2, n, ok) -> np.ndarray:
    """The responses' part at the members ``ok`` (whose A is regular), −∞ elsewhere.

    Members off the model can have a singular A, and one in a batch sends the batched solve to
    a loop over every member.
    """
    batch = ok.shape
    out = np.full(batch, -np.inf)
    if np.any(ok):
        pick = lambda a, tail=(): np.broadcast_to(a, batch + tail)[ok]  # noqa: E731
        n_ok = pick(n)
        parts = split_statistic(pick(s, s.shape[-1:]), n_ok)
        out[ok] = response_logpdf(parts, theta=pick(theta, theta.shape[-1:]),
                                  sigma2=pick(sigma2), n=n_ok)  # fmt: skip
    return np.where(np.isfinite(out), out, -np.inf)


def _gram(
    counts: np.ndarray, sums: np.ndarray, scatter: np.ndarray, n: np.ndarray, layout: LevelLayout
) -> np.ndarray:
    """``A = X̃ᵀX̃`` ``(..., d + 1, d + 1)`` from the counts, sums T and W (binary columns first)."""
    f, d2 = layout.columns, sums.shape[-1]
    p = 1 + f + d2
    gram = np.zeros((*counts.shape[:-1], p, p))
    gram[..., 0, 0] = n
    corners = layout.corners
    binary = slice(1, f + 1)
    gram[..., 0, binary] = gram[..., binary, 0] = counts @ corners
    gram[..., binary, binary] = np.einsum("...c,ci,cj->...ij", counts, corners, corners)
    if d2:
        normal = slice(f + 1, p)
        total = np.sum(sums, axis=-2)
        gram[..., 0, normal] = total
        gram[..., normal, 0] = total
        gram[..., binary, normal] = sums[..., 1:, :]
        gram[..., normal, binary] = np.swapaxes(sums[..., 1:, :], -1, -2)
        pair = design_gram(counts, layout) if layout.kind == "pair" else None
        gram[..., normal, normal] = scatter + _fitted(sums, counts, pair)
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
    """Exact draws of the statistic (binary columns first), without drawing records.

    The counts are multinomial given every level non-empty (for a pair, three corners or more;
    drawn again where not, at most :data:`MAX_DRAWS` times), the level sums (T) normal, W by
    Bartlett's decomposition, then
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
    levels = layout.levels
    batch = tuple(size) + np.broadcast_shapes(
        theta.shape[:-1], sigma2.shape, probs.shape[:-1], loc.shape[:-2], cov.shape[:-2]
    )
    probs = np.broadcast_to(probs, (*batch, levels))
    counts = rng.multinomial(n, probs).astype(np.float64)
    for _ in range(MAX_DRAWS):
        empty = ~_defined(counts, layout)
        if not empty.any():
            break
        counts[empty] = rng.multinomial(n, probs[empty])
    else:
        empty = ~_defined(counts, layout)
        if empty.any() and not start:
            raise ValueError(
                f"the level probabilities left a level empty in {MAX_DRAWS} draws of {n} "
                f"records: give every level a probability of order 1/n or more"
            )
        counts[empty] = 1.0 + rng.multinomial(n - levels, probs[empty])
    return _statistic(rng, LevelParameters(theta, sigma2, probs, loc, cov), counts, n, layout)


def _statistic(
    rng: np.random.Generator, par: LevelParameters, counts: np.ndarray, n: int,
    layout: LevelLayout,
) -> npt.NDArray[np.float64]:  # fmt: skip
    """The statistic given the cell counts ``(..., C)``: sums T, W, then the responses."""
    theta, sigma2, _, loc, cov = _floats(par)
    batch, r, d2 = counts.shape[:-1], layout.means, loc.shape[-1]
    sums = np.zeros((*batch, r, d2))
    scatter = np.zeros((*batch, d2, d2))
    if d2:
        chol = np.broadcast_to(np.linalg.cholesky(cov), (*batch, d2, d2))
        noise = (chol[..., None, :, :] @ rng.standard_normal((*batch, r, d2, 1)))[..., 0]
        if layout.kind == "pair":  # T ~ MatrixNormal(G M, G, Σ)
            gram = design_gram(counts, layout)
            sums = gram @ loc + np.linalg.cholesky(gram) @ noise
        else:
            sums = counts[..., None] * loc + np.sqrt(counts)[..., None] * noise
        tri = np.tril(rng.standard_normal((*batch, d2, d2)), -1)
        dof = float(n) - r - np.arange(d2)
        tri = tri + np.sqrt(rng.chisquare(dof, size=(*batch, d2)))[..., None] * np.eye(d2)
        factor = chol @ tri
        scatter = factor @ np.swapaxes(factor, -1, -2)
    nn = np.full(batch, float(n))
    gram = _gram(counts, sums, scatter, nn, layout)
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
    levels, r = layout.levels, layout.means
    d2 = layout.d - layout.columns
    if n < max(levels, r + d2 + 1):
        raise ValueError(f"n must be at least {max(levels, r + d2 + 1)} (got {n})")
    theta, sigma2 = draw_nig(rng, prior, size=(size,))
    probs, counts = np.empty((size, levels)), np.zeros((size, levels))
    empty = np.ones(size, dtype=bool)
    while empty.any():
        probs[empty] = rng.dirichlet(np.ones(levels), size=int(empty.sum()))
        counts[empty] = rng.multinomial(n, probs[empty])
        empty = ~_defined(counts, layout)
    loc, cov = np.zeros((size, r, d2)), np.zeros((size, d2, d2))
    if d2:
        _, cov = draw_niw(rng, x_prior, size=(size,))
        white = rng.standard_normal((size, r, d2, 1))
        spread = np.linalg.cholesky(cov)[:, None] @ white / np.sqrt(x_prior.kappa)
        loc = np.asarray(x_prior.loc) + spread[..., 0]
    par = LevelParameters(theta, sigma2, probs, loc, cov)
    return par, _statistic(rng, par, counts, n, layout)


def level_record_moments(
    par: LevelParameters, layout: LevelLayout | None = None
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Mean ``(..., m)`` and covariance ``(..., m, m)`` of one record's statistic t.

    A mixture over the cells of normal records with the binary columns fixed at the cell's
    corner (:func:`~pymc_dp.regression.kernels.normal_model.record_moments`), weights π. The
    covariance is singular along the ties and the zeros, which no record moves. ``layout``
    (default: the factor's) says which cells.

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
    if layout is None:
        layout = LevelLayout(levels - 1 + d2, levels, *([np.zeros(0, np.intp)] * 4))
    batch = loc.shape[:-2]
    f = layout.columns
    corners = np.broadcast_to(layout.corners, (*batch, levels, f))
    if layout.kind == "pair":
        loc = layout.design @ loc  # each corner's mean
    x_loc = np.concatenate([corners, loc], axis=-1)
    d = f + d2
    x_cov = np.zeros((*np.broadcast_shapes(batch, cov.shape[:-2]), levels, d, d))
    x_cov[..., f:, f:] = cov[..., None, :, :]
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
    if layout.kind == "pair":
        counts = np.maximum(parts.counts, 0.0)
    else:
        counts = np.maximum(parts.counts, 1.0)
    gamma = rng.standard_gamma(1.0 + counts)
    probs = gamma / np.sum(gamma, axis=-1, keepdims=True)
    d2 = parts.sums.shape[-1]
    batch = counts.shape[:-1]
    if not d2:
        return probs, np.zeros((*batch, layout.means, 0)), np.zeros((*batch, 0, 0))
    if layout.kind == "pair":
        return (probs, *_draw_design_x(rng, x_prior, parts, n))
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


def _draw_design_x(
    rng: np.random.Generator, x_prior: NIW, parts: LevelParts, n: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(M, Σ) | T, W, G: the matrix-normal–inverse-Wishart update of M's rows iid N(c, Σ/κ).

    Λ = κI + G, M̂ = Λ⁻¹(κ1cᵀ + T), Σ ~ InverseWishart(ν + n, Ψ + W + TᵀG⁻¹T + κ r ccᵀ −
    M̂ᵀΛM̂), M | Σ ~ MatrixNormal(M̂, Λ⁻¹, Σ). With G diagonal these are the levels' updates.
    """
    sums, gram, scatter = parts.sums, parts.gram, parts.scatter
    r = sums.shape[-2]
    kappa = np.asarray(x_prior.kappa, dtype=np.float64)[..., None, None]
    centre = np.asarray(x_prior.loc, dtype=np.float64)[..., None, :]
    precision = kappa * np.eye(r) + gram
    chol_p = np.linalg.cholesky(precision)
    post = np.linalg.solve(precision, kappa * centre + sums)
    chol_g = np.linalg.cholesky(gram)
    half = np.linalg.solve(chol_g, sums)
    fitted = np.swapaxes(half, -1, -2) @ half
    spread = np.swapaxes(chol_p, -1, -2) @ post  # M̂ᵀΛM̂ = (LᵀM̂)ᵀ(LᵀM̂)
    scale = (
        x_prior.scale + scatter + fitted
        + r * kappa * np.swapaxes(centre, -1, -2) @ centre
        - np.swapaxes(spread, -1, -2) @ spread
    )  # fmt: skip
    scale = 0.5 * (scale + np.swapaxes(scale, -1, -2))
    _, cov = draw_niw(rng, NIW(np.zeros(scale.shape[:-1]), np.ones(scale.shape[:-2]),
                               x_prior.dof + n, scale))  # fmt: skip
    white = rng.standard_normal(sums.shape)
    noise = np.linalg.solve(np.swapaxes(chol_p, -1, -2), white)  # rows' covariance Λ⁻¹
    loc = post + noise @ np.swapaxes(np.linalg.cholesky(cov), -1, -2)
    return loc, cov
