"""The exact law of the regression statistic when every covariate is binary.

The model of the covariates: each record's x is one of C corners of the unit cube with
probabilities π (the cells), and ``y = x̃ᵀθ + e`` as in
:mod:`~pymc_dp.regression.kernels.normal_model`. Two layouts of cells (:func:`cell_layout`):

* ``"categories"``: the dummy coding of one factor of K = d + 1 levels, corners 0 (the reference
  level) and the unit vectors e₁, …, e_d (the columns are never 1 together);
* ``"pair"``: two binary covariates (d = 2) with all four corners;
* ``"cube"``: three binary covariates (d = 3) with all eight corners.

In the first two the covariates' part of the statistic, ``A = X̃ᵀX̃``, is a one-to-one linear
function of the cell counts (n is public): ``Σ x_j`` for every j, and for the pair ``Σ x₁x₂``,
are the integer coordinates k; every other entry of A is a copy of one of them
(``Σ x_j² = Σ x_j``) or 0 (``Σ x_i x_j`` for two levels of a factor). So the statistic's
density, with respect to counting measure on k times Lebesgue measure on the responses' part, is
``Multinomial(counts; n, π) · p(b, R | A, θ, σ²)`` with the second factor
:func:`~pymc_dp.regression.kernels.normal_model.response_logpdf`, restricted to the counts
whose A is positive definite (for the categories every level present, for the pair three
corners or more).

Prior: π ~ Dirichlet(1, …, 1) tilted by the probability of that event, which is also the count
law's normaliser: the two cancel in the joint density, so :func:`cell_statistic_logpdf` leaves
both out (it is the joint's x-part up to a constant), and ``π | s ~ Dirichlet(1 + counts)``
exactly (:func:`draw_cell_probs`).

**Three binary covariates** (``"cube"``). A reads ``Σ x_j`` and ``Σ x_i x_j`` but not the triple
count ``t = Σ x₁x₂x₃``: given the six released counts k the eight cell counts are
``N(t) = N₀ + t·δ`` (δ = ±1 per cell, the corners' Möbius signs) for every whole t that keeps
them ≥ 0, an interval [t₋, t₊] (the *fiber*, :func:`cell_fiber`). The responses' part depends on
the counts only through A, the same at every t, so the statistic's density is
``Σ_t Multinomial(N(t); n, π) · p(b, R | A, θ, σ²)`` — a sum of at most ``n/4 + 1`` terms (the
fiber is at most ``min Σ x_i x_j`` long), evaluated whole: exact, at a cost linear in n. With
π's Dirichlet(1, …, 1) prior, ``∫ Multinomial(N; n, π) dDirichlet(π) = n!·7!/(n + 7)!`` is the
same for every N, so given s the triple count is uniform on the fiber and π | s is an exact
draw of t, then ``π ~ Dirichlet(1 + N(t))`` (:func:`draw_cell_probs`); and integrated over π
the statistic's density is ``|fiber| · p(b, R | A, θ, σ²)`` up to a constant
(:func:`cell_marginal_logpdf`), which the cube's sampler moves (θ, σ², s) under, π drawn given s
after each sweep (moved with π, the three-way contrast of π, which the release does not read,
was as wide as its prior and the moves of (φ, s) were accepted at a third of the pair model's
rate, θ's bulk ESS 100–300 of 2000 draws against 1300). A is positive definite
when the occupied corners span the cube affinely (four occupied corners in one face do not;
:meth:`CellLayout.regular`), which is a property of A, so of k, whatever t.

Unlike the normal model of x (which treats ``Σ x_j²`` as a second moment free of ``Σ x_j``)
and the mixed model (one binary covariate beside normal ones,
:mod:`~pymc_dp.regression.kernels.mixed_model`), this model knows every entry of A.
"""

from __future__ import annotations

import functools
import itertools
from typing import Literal, NamedTuple

import numpy as np
import numpy.typing as npt
from scipy.special import gammaln

from pymc_dp.curator.regression.statistics import released_pairs
from pymc_dp.regression.kernels.conjugate import NIG, draw_nig
from pymc_dp.regression.kernels.normal_model import (
    record_mean,
    response_logpdf,
    split_statistic,
    statistic_from_gram,
)

__all__ = [
    "CELL_KINDS",
    "CellLayout",
    "CellParameters",
    "cell_counts",
    "cell_fiber",
    "cell_layout",
    "cell_marginal_logpdf",
    "cell_record_moments",
    "cell_statistic_logpdf",
    "draw_cell_prior",
    "draw_cell_probs",
    "draw_cell_statistic",
    "release_cell_probs",
]

CELL_KINDS = ("categories", "pair", "cube")
"""The layouts of :func:`cell_layout`."""

MAX_START_DRAWS = 100
"""Rounds of :func:`draw_cell_statistic`'s rejection of counts whose A is singular."""


class CellParameters(NamedTuple):
    """φ of the cell model, batch first."""

    theta: npt.NDArray[np.float64]
    """Coefficients ``(..., d + 1)``, intercept first."""
    sigma2: npt.NDArray[np.float64]
    """Noise variance ``(...)``."""
    probs: npt.NDArray[np.float64]
    """π, the cells' probabilities ``(..., C)``, in :attr:`CellLayout.corners`' order."""


class CellLayout(NamedTuple):
    """Where the cell counts sit in the released layout."""

    kind: str
    corners: npt.NDArray[np.float64]
    """``(C, d)``, the reference corner 0 first."""
    positions: npt.NDArray[np.intp]
    """Released positions of the integer coordinates k, ``(C − 1 − hidden,)``."""
    to_counts: npt.NDArray[np.float64]
    """``(C, C)``: counts = to_counts @ (n, k), or @ (n, k, t) with a hidden coordinate t."""
    reads: npt.NDArray[np.intp]
    """For each covariate-part position (:attr:`covariate_positions`): the index into k of
    the coordinate it equals, or −1 where it is 0."""
    covariate_positions: npt.NDArray[np.intp]
    """Released positions of A's entries (all but the responses')."""
    response_positions: npt.NDArray[np.intp]
    """Released positions of ``X̃ᵀy`` and ``yᵀy``."""
    records: npt.NDArray[np.float64]
    """``(C, d + 1)``: the record ``x̃ = (1, x)`` of each corner."""
    hidden: int = 0
    """Integer coordinates of the counts that the release does not read: 1 for the cube's
    triple count ``Σ x₁x₂x₃`` (the last column of :attr:`to_counts`), else 0."""

    @property
    def d(self) -> int:
        """Number of covariates."""
        return int(self.corners.shape[1])

    @property
    def readers(self) -> tuple[npt.NDArray[np.intp], ...]:
        """For each integer coordinate k_j: the released positions of A that equal it."""
        return tuple(self.covariate_positions[self.reads == j] for j in range(len(self.positions)))

    def gram(self, counts: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """``A = Σ_c n_c x̃_c x̃_cᵀ`` ``(..., d + 1, d + 1)`` of counts ``(..., C)``."""
        return np.einsum("...c,ci,cj->...ij", counts, self.records, self.records)

    def regular(self, counts: npt.ArrayLike) -> npt.NDArray[np.bool_]:
        """Whether the counts' A is positive definite.

        Any d + 1 corners of the categories and the pair have linearly independent records
        (checked by :func:`cell_layout`), so there A has full rank exactly when d + 1 cells are
        occupied. The cube's corners are not (a face's four are coplanar): A has the rank of
        the occupied corners' records, that is of ``Σ_c 1[N_c > 0] x̃_c x̃_cᵀ``, a matrix of
        small whole numbers whose determinant is a whole number, so ≥ 1 exactly when A is
        positive definite.
        """
        occupied = np.asarray(counts) > 0
        if not self.hidden:
            return np.count_nonzero(occupied, axis=-1) >= self.d + 1
        spread = np.einsum("...c,ci,cj->...ij", occupied.astype(np.float64), self.records,
                           self.records)  # fmt: skip
        return np.linalg.det(spread) > 0.5


@functools.cache
def cell_layout(d: int, kind: Literal["categories", "pair", "cube"]) -> CellLayout:
    """The cells and the map between their counts and the released statistic.

    Parameters
    ----------
    d
        Number of covariates.
    kind
        ``"categories"`` (dummy coding of a factor with d + 1 levels, any d ≥ 1), ``"pair"``
        (two binary covariates, d = 2) or ``"cube"`` (three binary covariates, d = 3).

    Examples
    --------
    >>> layout = cell_layout(2, "pair")
    >>> layout.corners.tolist()
    [[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    >>> layout.positions.tolist(), layout.reads.tolist()  # Σx₁, Σx₂, Σx₁x₂; Σx₁² reads Σx₁
    ([0, 1, 3], [0, 1, 0, 2, 1])
    >>> cell_layout(2, "categories").reads.tolist()  # Σx₁x₂ is 0
    [0, 1, 0, -1, 1]
    >>> cube = cell_layout(3, "cube")  # Σx₁, Σx₂, Σx₃, Σx₁x₂, Σx₁x₃, Σx₂x₃; Σx₁x₂x₃ hidden
    >>> cube.positions.tolist(), cube.hidden, cube.to_counts[:, -1].tolist()
    ([0, 1, 2, 4, 5, 7], 1, [-1.0, 1.0, 1.0, -1.0, 1.0, -1.0, -1.0, 1.0])
    """
    if kind not in CELL_KINDS:
        raise ValueError(f"kind must be one of {CELL_KINDS} (got {kind!r})")
    if kind == "pair" and d != 2:
        raise ValueError(f"kind='pair' is two binary covariates: d must be 2 (got {d})")
    if kind == "cube" and d != 3:
        raise ValueError(f"kind='cube' is three binary covariates: d must be 3 (got {d})")
    if d < 1:
        raise ValueError(f"d must be at least 1 (got {d})")
    if kind == "categories":
        corners = np.vstack([np.zeros(d), np.eye(d)])
        pairs = [(0, j) for j in range(1, d + 1)]
    else:  # every corner, x_j = bit j of the cell's index
        corners = np.array([[(c >> j) & 1 for j in range(d)] for c in range(2**d)], float)
        pairs = [(0, j) for j in range(1, d + 1)] + [(i, j) for i in range(1, d + 1)
                                                     for j in range(i + 1, d + 1)]  # fmt: skip
    rows, cols = released_pairs(d)
    layout = list(zip(rows.tolist(), cols.tolist()))
    positions = np.array([layout.index(pr) for pr in pairs])
    record = np.hstack([np.ones((len(corners), 1)), corners])  # w̃ = (1, x) per corner
    covariate = np.flatnonzero(cols <= d)
    # F[e, c]: entry e of A contributed by one record in cell c.
    entries = record[:, rows[covariate]] * record[:, cols[covariate]]
    square = np.vstack([np.ones(len(corners)), entries[:, np.searchsorted(covariate, positions)].T])
    hidden = len(corners) - 1 - len(positions)
    if hidden:  # the cube's triple count, which A does not read
        square = np.vstack([square, np.prod(corners, axis=1)])
    to_counts = np.round(np.linalg.inv(square), 12)
    coef = np.round(entries.T @ to_counts, 12)  # each entry over (n, k, t)
    reads = np.full(len(covariate), -1)
    for e, row in enumerate(coef):
        hits = np.flatnonzero(row)
        if hits.size:
            reads[e] = hits[0] - 1
            if hits.size != 1 or hits[0] == 0 or row[hits[0]] != 1.0 or reads[e] >= len(pairs):
                raise AssertionError("every entry of A must copy one released count or be 0")
    for cells in itertools.combinations(range(len(corners)), d + 1):  # CellLayout.regular
        if not hidden and np.linalg.matrix_rank(record[list(cells)]) != d + 1:
            raise AssertionError("any d + 1 corners must have linearly independent records")
    return CellLayout(kind, corners, positions, to_counts, reads, covariate,
                      np.flatnonzero(cols == d + 1), record, hidden)  # fmt: skip


def cell_counts(
    s: npt.ArrayLike, n: npt.ArrayLike, layout: CellLayout
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """The cell counts a statistic implies, and whether it is one of the model's.

    Returns
    -------
    counts : numpy.ndarray
        ``(..., C)`` from the integer coordinates k.
    consistent : numpy.ndarray
        ``(...)``: k whole, every count ≥ 0, and every entry of A equal to what the counts
        give (the copies and the zeros of the module docstring).

    Raises
    ------
    ValueError
        For the cube, whose counts s does not fix (:func:`cell_fiber`).

    Examples
    --------
    >>> from pymc_dp.curator.regression.statistics import regression_statistic
    >>> x = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0], [1.0, 0.0]])
    >>> counts, ok = cell_counts(regression_statistic(x, np.ones(4)), 4,
    ...                          cell_layout(2, "categories"))
    >>> counts.tolist(), bool(ok)
    ([1.0, 2.0, 1.0], True)
    """
    if layout.hidden:
        raise ValueError(
            f"the {layout.kind!r} layout's counts are not fixed by the statistic: use cell_fiber"
        )
    counts, valid, consistent = cell_fiber(s, n, layout)
    return counts[..., 0, :], consistent & valid[..., 0]


def cell_fiber(
    s: npt.ArrayLike, n: npt.ArrayLike, layout: CellLayout
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Every set of cell counts a statistic allows: one, or the cube's fiber of triple counts.

    Returns
    -------
    counts : numpy.ndarray
        ``(..., T, C)``: the counts at each hidden coordinate t of the fiber, from its least
        whole value up (T = 1 without one; T the longest fiber of the batch with one).
    valid : numpy.ndarray
        ``(..., T)``: which of them are counts (every count ≥ 0).
    consistent : numpy.ndarray
        ``(...)``: k whole and every entry of A equal to what the counts give.

    Examples
    --------
    >>> from pymc_dp.curator.regression.statistics import regression_statistic
    >>> x = np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 1.0], [0.0, 1.0, 1.0], [0.0, 0.0, 0.0]])
    >>> counts, valid, ok = cell_fiber(regression_statistic(x, np.ones(4)), 4,
    ...                                cell_layout(3, "cube"))
    >>> counts[valid].tolist(), bool(ok)  # these records (t = 0), or the other four corners
    ([[1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0], [0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0]], True)
    """
    fiber = _fiber_ends(s, n, layout)
    length = int(max(np.max(fiber.most - fiber.least, initial=-1.0) + 1.0, 1.0))
    t = fiber.least[..., None] + np.arange(length)
    counts = fiber.base[..., None, :] + t[..., None] * fiber.step
    return counts, t <= fiber.most[..., None], fiber.consistent


class _Fiber(NamedTuple):
    """The fiber in closed form: ``N(t) = base + t·step`` for the whole t in [least, most]."""

    base: np.ndarray
    """``(..., C)``."""
    step: np.ndarray
    """``(C,)``: ±1 per cell for the cube, zeros without a hidden coordinate."""
    least: np.ndarray
    """``(...)``."""
    most: np.ndarray
    """``(...)``: below ``least`` where no t gives counts ≥ 0."""
    consistent: np.ndarray
    """``(...)``, as :func:`cell_fiber`'s."""

    @property
    def size(self) -> np.ndarray:
        """``|fiber|``, ``(...)``."""
        return np.maximum(self.most - self.least + 1.0, 0.0)


def _fiber_ends(s: npt.ArrayLike, n: npt.ArrayLike, layout: CellLayout) -> _Fiber:
    """:func:`cell_fiber` without the enumeration, whose length grows with n (up to n/4 + 1)."""
    s = np.asarray(s, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    k = s[..., layout.positions]
    full = np.concatenate([np.broadcast_to(n, k.shape[:-1])[..., None], k], axis=-1)
    expected = np.where(layout.reads >= 0, k[..., np.maximum(layout.reads, 0)], 0.0)
    consistent = np.all(k == np.round(k), axis=-1) & np.all(
        s[..., layout.covariate_positions] == expected, axis=-1
    )
    if not layout.hidden:
        base = np.round(full @ layout.to_counts.T, 9)
        least = np.zeros(base.shape[:-1])
        most = np.where(np.all(base >= 0, axis=-1), 0.0, -1.0)
        return _Fiber(base, np.zeros(base.shape[-1]), least, most, consistent)
    # N(t) = base + t·step, step = ±1 per cell: t ≥ −base where +1, t ≤ base where −1.
    base = np.round(full @ layout.to_counts[:, :-1].T, 9)
    step = layout.to_counts[:, -1]
    least = np.max(np.where(step > 0, -base, -np.inf), axis=-1)
    most = np.min(np.where(step < 0, base, np.inf), axis=-1)
    finite = np.isfinite(least) & np.isfinite(most)
    least, most = np.where(finite, least, 0.0), np.where(finite, most, -1.0)
    return _Fiber(base, step, least, most, consistent)


def _count_law(
    counts: np.ndarray, valid: np.ndarray, n: np.ndarray, probs: np.ndarray
) -> np.ndarray:
    """``log Σ_t Multinomial(N(t); n, π)`` over the fiber's valid counts, ``(...)``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        log_probs = np.log(probs)[..., None, :]
        terms = np.where(counts > 0, counts * log_probs, 0.0)
        each = -np.sum(gammaln(np.maximum(counts, 0.0) + 1.0), axis=-1) + np.sum(terms, axis=-1)
        each = np.where(valid, each, -np.inf)
        top = np.max(each, axis=-1)
        safe = np.where(np.isfinite(top), top, 0.0)
        total = safe + np.log(np.sum(np.exp(each - safe[..., None]), axis=-1))
    return gammaln(n + 1.0) + np.where(np.isfinite(top), total, -np.inf)


def cell_marginal_logpdf(
    s: npt.ArrayLike, par: CellParameters, n: npt.ArrayLike, layout: CellLayout
) -> npt.NDArray[np.float64]:
    """Log density of the statistic with π integrated out, up to a constant.

    ``log |fiber| + log p(b, R | A, θ, σ²)`` under π's Dirichlet(1, …, 1) prior (``par.probs``
    unused).

    ``∫ Multinomial(N; n, π) dDirichlet(π; 1, …, 1) = n!·(C − 1)!/(n + C − 1)!`` for every N,
    so the count part is that constant times the number of count tables the statistic allows
    (one without a hidden coordinate). −∞ where s is not one of the model's or A is singular.

    Examples
    --------
    >>> layout = cell_layout(3, "cube")
    >>> par = CellParameters(np.zeros(4), np.array(1.0), np.full(8, 0.125))
    >>> s = draw_cell_statistic(np.random.default_rng(0), par, 40, layout)
    >>> bool(np.isfinite(cell_marginal_logpdf(s, par._replace(probs=None), 40, layout)))
    True
    """
    return _statistic_logpdf(s, par, n, layout, marginal=True)


def cell_statistic_logpdf(
    s: npt.ArrayLike, par: CellParameters, n: npt.ArrayLike, layout: CellLayout
) -> npt.NDArray[np.float64]:
    """Log density of the statistic under the cell model, the tilt left out (module docstring).

    Parameters
    ----------
    s
        Statistics in the released layout, ``(..., m)``.
    par
        φ, batch broadcastable against s's.
    n
        Number of records, at least ``d + 2``.
    layout
        :func:`cell_layout`.

    Returns
    -------
    numpy.ndarray
        ``(...)``: ``log Multinomial(counts; n, π) + log p(b, R | A, θ, σ²)`` (for the cube the
        multinomial summed over the fiber, :func:`cell_fiber`); −∞ where s is not one of the
        model's or A is singular.

    Examples
    --------
    >>> layout = cell_layout(2, "pair")
    >>> par = CellParameters(np.array([0.0, 1.0, 0.5]), np.array(0.5),
    ...                      np.array([0.4, 0.2, 0.3, 0.1]))
    >>> s = draw_cell_statistic(np.random.default_rng(0), par, 50, layout)
    >>> bool(np.isfinite(cell_statistic_logpdf(s, par, 50, layout)))
    True
    >>> s[2] += 1.0  # Σ x₁² no longer equals Σ x₁
    >>> float(cell_statistic_logpdf(s, par, 50, layout))
    -inf
    """
    return _statistic_logpdf(s, par, n, layout, marginal=False)


def _statistic_logpdf(
    s: npt.ArrayLike, par: CellParameters, n: npt.ArrayLike, layout: CellLayout, marginal: bool
) -> npt.NDArray[np.float64]:
    s = np.asarray(s, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    fiber = _fiber_ends(s, n, layout)
    ok = fiber.consistent & (fiber.size > 0)
    # Every member of the fiber has the same A, hence the same regularity.
    first = fiber.base + fiber.least[..., None] * fiber.step
    # NumPy's solve refuses a whole batch with one singular member, so those members are
    # evaluated at the counts (1, …, 1) and dropped.
    ok = ok & layout.regular(np.where(ok[..., None], first, 1.0))
    ones = layout.gram(np.ones(first.shape[-1]))
    rows, cols = released_pairs(layout.d)
    cov = layout.covariate_positions
    s = s.copy()
    s[..., cov] = np.where(ok[..., None], s[..., cov], ones[rows[cov], cols[cov]])
    with np.errstate(divide="ignore", invalid="ignore"):
        if marginal:  # from the fiber's ends: its enumeration grows with n
            out = np.log(fiber.size)
        else:
            counts, valid, _ = cell_fiber(s, n, layout)
            out = _count_law(counts, valid & ok[..., None], n, np.asarray(par.probs, np.float64))
        out = out + response_logpdf(split_statistic(s, n), theta=par.theta, sigma2=par.sigma2, n=n)
    return np.where(ok & np.isfinite(out), out, -np.inf)


def draw_cell_statistic(
    rng: np.random.Generator,
    par: CellParameters,
    n: int,
    layout: CellLayout,
    *,
    size: tuple[int, ...] = (),
    start: bool = False,
) -> npt.NDArray[np.float64]:
    """Exact draws of the statistic, without drawing records.

    The counts are multinomial given A positive definite (:meth:`CellLayout.regular`), then the
    responses' part comes from
    :func:`~pymc_dp.regression.kernels.normal_model.statistic_from_gram`. Counts whose A is
    singular are drawn again, at most :data:`MAX_START_DRAWS` times.

    ``start=True`` is for a chain's first state, which need not be a draw of this law: where
    the counts were singular every time, one record goes to every cell and the other n − C
    are multinomial, so every cell is occupied and A is regular. (A factor of 11 levels
    released from 40–60 records, with each level's count floored at a record or two by the
    chain's start (:func:`~pymc_dp.regression.engine.cells.cell_start`), left a level empty in
    every one of the 100 draws.)

    Raises
    ------
    ValueError
        If some batch member's counts were singular every time (π puts almost all its mass on
        too few cells for n records), unless ``start``.

    Examples
    --------
    >>> layout = cell_layout(3, "categories")
    >>> par = CellParameters(np.zeros(4), np.array(1.0), np.full(4, 0.25))
    >>> s = draw_cell_statistic(np.random.default_rng(1), par, 40, layout, size=(3,))
    >>> s.shape, bool(np.all(cell_counts(s, 40, layout)[1]))
    ((3, 14), True)
    """
    theta = np.asarray(par.theta, dtype=np.float64)
    probs = np.asarray(par.probs, dtype=np.float64)
    batch = tuple(size) + np.broadcast_shapes(
        theta.shape[:-1], np.shape(par.sigma2), probs.shape[:-1]
    )
    probs = np.broadcast_to(probs, (*batch, probs.shape[-1]))
    counts = rng.multinomial(n, probs).astype(np.float64)
    for _ in range(MAX_START_DRAWS):
        bad = ~layout.regular(counts)
        if not bad.any():
            break
        counts[bad] = rng.multinomial(n, probs[bad])
    else:
        bad = ~layout.regular(counts)
        if bad.any() and not start:
            raise ValueError(
                f"the cell probabilities leave fewer cells than the model needs occupied in "
                f"{MAX_START_DRAWS} draws of {n} records: give every cell a probability of order "
                f"1/n or more"
            )
        cells = probs.shape[-1]
        counts[bad] = 1.0 + rng.multinomial(n - cells, probs[bad])
    return statistic_from_gram(rng, layout.gram(counts), theta=theta,
                               sigma2=par.sigma2, n=np.full(batch, float(n)))  # fmt: skip


def draw_cell_prior(
    rng: np.random.Generator, prior: NIG, layout: CellLayout, size: int, n: int
) -> tuple[CellParameters, npt.NDArray[np.float64]]:
    """``size`` draws of (φ, s) from the model's joint prior: what a calibration study needs.

    (θ, σ²) ~ ``prior``; π ~ Dirichlet(1, …, 1) tilted by the chance that n records make A
    positive definite (module docstring): (π, counts) are drawn together until the counts are
    regular, which is exact rejection sampling from the tilted joint law of (π, counts). The
    responses' part of s then comes from those counts'
    :func:`~pymc_dp.regression.kernels.normal_model.statistic_from_gram`.

    Examples
    --------
    >>> from pymc_dp.regression.kernels.conjugate import NIG
    >>> layout = cell_layout(2, "categories")
    >>> prior = NIG(np.zeros(3), np.eye(3), np.array(3.0), np.array(1.0))
    >>> par, s = draw_cell_prior(np.random.default_rng(0), prior, layout, 5, 30)
    >>> par.probs.shape, s.shape, bool(np.all(cell_counts(s, 30, layout)[1]))
    ((5, 3), (5, 9), True)

    Raises
    ------
    ValueError
        If n < d + 1: no counts of n records are regular, and the rejection would not end.
    """
    if n < layout.d + 1:
        raise ValueError(
            f"n must be at least d + 1 = {layout.d + 1} for the design to be regular (got {n})"
        )
    theta, sigma2 = draw_nig(rng, prior, size=(size,))
    cells = len(layout.corners)
    probs, counts = np.empty((size, cells)), np.empty((size, cells))
    bad = np.ones(size, dtype=bool)
    while bad.any():
        probs[bad] = rng.dirichlet(np.ones(cells), size=int(bad.sum()))
        counts[bad] = rng.multinomial(n, probs[bad])
        bad = ~layout.regular(counts)
    s = statistic_from_gram(rng, layout.gram(counts), theta=theta, sigma2=sigma2,
                            n=np.full(size, float(n)))  # fmt: skip
    return CellParameters(theta, sigma2, probs), s


def cell_record_moments(
    par: CellParameters, layout: CellLayout
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Mean ``(..., m)`` and covariance ``(..., m, m)`` of one record's statistic t.

    A mixture over the cells of records with x fixed at the corner: within a cell only
    y ~ N(x̃ᵀθ, σ²) varies, so of t's entries only ``y x̃`` and ``y²`` do, with covariance
    ``σ² v vᵀ`` for ``v = (x̃, 2 E y)`` and ``2σ⁴`` more for ``y²``
    (:func:`~pymc_dp.regression.kernels.normal_model.record_moments` with x's covariance 0,
    without its ``(..., C, m, m)`` temporaries: over 3 000 chains of the cube they took 0.2 s a
    call).

    Examples
    --------
    >>> par = CellParameters(np.zeros(2), np.array(1.0), np.array([0.7, 0.3]))
    >>> mean, cov = cell_record_moments(par, cell_layout(1, "categories"))
    >>> round(float(mean[0]), 6), round(float(cov[0, 0]), 6)  # π₁ and π₁(1 − π₁)
    (0.3, 0.21)
    """
    theta = np.asarray(par.theta, dtype=np.float64)
    probs = np.asarray(par.probs, dtype=np.float64)
    sigma2 = np.asarray(par.sigma2, dtype=np.float64)
    cells, d = layout.corners.shape
    means = record_mean(theta[..., None, :], sigma2[..., None], layout.corners,
                        np.zeros((cells, d, d)))  # fmt: skip
    weighted = probs[..., None] * means
    mean = np.sum(weighted, axis=-2)
    cov = np.swapaxes(weighted, -1, -2) @ means - mean[..., :, None] * mean[..., None, :]
    fitted = theta @ layout.records.T  # E y in each cell, (..., C)
    records = np.broadcast_to(layout.records, (*fitted.shape, d + 1))
    v = np.concatenate([records, 2.0 * fitted[..., None]], axis=-1)
    within = sigma2[..., None, None] * (np.swapaxes(probs[..., None] * v, -1, -2) @ v)
    within[..., -1, -1] += 2.0 * sigma2**2
    y = layout.response_positions  # y·x̃ then y², the last d + 2 positions
    cov[..., y[0] :, y[0] :] += within
    return mean, cov


START_SHARE = 0.02
"""Smallest share of the records :func:`release_cell_probs` gives a cell by default."""
CUBE_FLOOR = 0.5
"""Fewest records :func:`release_cell_probs` gives a cell of the cube, whose moves shape their
proposal of s with that π (and start a chain there)."""


def release_cell_probs(
    released: npt.ArrayLike, n: float, layout: CellLayout, floor: float | None = None
) -> npt.NDArray[np.float64]:
    """π from the release's readings of the counts, ``(..., C)``: a chain's first π.

    Each count coordinate is the mean of the released entries that read it; the cube's hidden
    triple count is the one x₂ and x₃ independent given x₁ would give; every count is floored
    at ``floor`` records (default: :data:`START_SHARE` of n and at least 1, a chain's start).
    The cube's moves, which integrate π out, shape their proposal of s with it, floored at half
    a record: the proposal's law of the responses given the counts has the variance of π's
    counts, and a cell the release puts near 0 (two indicators never 1 together) floored at
    2 % of n gave that cell's responses a spread the exact law does not have (on 20 190 records
    the move of s was never accepted).

    Examples
    --------
    >>> layout = cell_layout(2, "pair")  # Σx₁ = 30, Σx₂ = 20, Σx₁x₂ = 10 of 100, noiseless
    >>> z = np.zeros(9)
    >>> z[[0, 2]], z[[1, 4]], z[3] = 30.0, 20.0, 10.0
    >>> release_cell_probs(z, 100, layout).tolist()
    [0.6, 0.2, 0.1, 0.1]
    """
    z = np.asarray(released, dtype=np.float64)
    k = np.stack([np.mean(z[..., reads], axis=-1) for reads in layout.readers], axis=-1)
    full = [np.full((*k.shape[:-1], 1), float(n)), k]
    if layout.hidden:
        full.append((k[..., 3] * k[..., 4] / np.maximum(k[..., 0], 1.0))[..., None])
    least = max(START_SHARE * n, 1.0) if floor is None else floor
    counts = np.maximum(np.concatenate(full, axis=-1) @ layout.to_counts.T, least)
    return counts / np.sum(counts, axis=-1, keepdims=True)


def draw_cell_probs(
    rng: np.random.Generator, s: npt.ArrayLike, n: npt.ArrayLike, layout: CellLayout
) -> npt.NDArray[np.float64]:
    """Exact draw of π given a statistic of the model: Dirichlet(1 + counts), ``(..., C)``.

    For the cube the counts are those of a triple count drawn uniformly from the fiber, its
    law given s under π's Dirichlet(1, …, 1) prior (module docstring).
    """
    fiber = _fiber_ends(s, n, layout)
    t = fiber.least
    if layout.hidden:  # t uniform on the whole values of [least, most] (s is the model's)
        t = t + np.floor(rng.uniform(size=t.shape) * np.maximum(fiber.size, 1.0))
    counts = fiber.base + t[..., None] * fiber.step
    gamma = rng.standard_gamma(1.0 + np.maximum(counts, 0.0))
    return gamma / np.sum(gamma, axis=-1, keepdims=True)
