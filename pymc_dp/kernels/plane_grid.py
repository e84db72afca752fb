"""A proposal for a two-dimensional θ: a density tabulated on a grid, piecewise constant.

Metropolis–Hastings with an independent proposal accepts almost everything when the proposal is
close to the target. A multivariate t matched to the target's mean and covariance is close for
elliptical targets, but the posteriors of a windowed (μ, σ²) or of three category probabilities
can be curved, skewed or have two modes when the noise dominates. In two dimensions the target
itself can be tabulated: :func:`fit_plane_grid` evaluates the log density at the centres of a
grid of cells in coordinates whitened by the t's location and scale, zooms into the cells that
hold the mass, and :func:`draw_plane_grid` / :func:`plane_grid_logpdf` give draws and the
density of the resulting piecewise-constant proposal. Mixed with the t (for the tails beyond
the grid) it is a valid independence proposal whatever the target, and a good one when the grid
resolves the target.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

__all__ = ["PlaneGrid", "draw_plane_grid", "fit_plane_grid", "plane_grid_logpdf"]

_CELLS = 32
"""Coarse cells per axis."""
_DEPTH = 7
"""Most times a coarse cell is halved along both axes (down to 1/128 of its width)."""
_SMOOTH = 0.3
"""A cell whose four halves' log densities are all within this many nats of its own is not
split further: the piecewise-constant proposal is then within about that of the target."""
_BUDGET = 3000
"""Most log-density evaluations spent on refinement."""
_REFINE = 12.0
"""Only leaves within this many nats of the heaviest are halved: lighter ones, even all of them
together, hold too little of the mass for their coarseness to lower the acceptance."""
_REACH = 12.0
"""Half-width of the first grid, in whitened units (the t's scale)."""
_SIGNIFICANT = 30.0
"""Cells within this many nats of the highest hold the mass that the next round zooms into."""
_ROUNDS = 8


class PlaneGrid(NamedTuple):
    """A piecewise-constant density over the leaves of quadtrees on a grid, in whitened space.

    Points are z = loc + chol @ u. The coarse grid has ``cells × cells`` cells of widths
    ``width`` from ``lo``; a leaf at depth d of coarse cell (i, j) is the sub-cell (a, b) of its
    2^d × 2^d subdivision, identified by an integer code (:func:`_code`).
    """

    loc: npt.NDArray[np.float64]
    chol: npt.NDArray[np.float64]
    lo: npt.NDArray[np.float64]
    width: npt.NDArray[np.float64]
    cells: int
    codes: npt.NDArray[np.int64]
    """The leaves' codes, sorted."""
    leaf_lo: npt.NDArray[np.float64]
    """Lower corner of each leaf in u, ``(leaves, 2)``, in the order of ``codes``."""
    leaf_width: npt.NDArray[np.float64]
    """Widths of each leaf in u, ``(leaves, 2)``."""
    log_mass: npt.NDArray[np.float64]
    """log probability of each leaf, normalised."""
    log_jacobian: float
    """log abs(det chol)."""


def _code(i, j, depth, a, b, cells):
    """Integer code of the sub-cell (a, b) at ``depth`` of coarse cell (i, j)."""
    side = 1 << _DEPTH
    return (((i * cells + j) * (_DEPTH + 1) + depth) * side + a) * side + b


def _centres(lo: npt.NDArray, width: npt.NDArray, cells: int) -> npt.NDArray:
    axes = [lo[i] + width[i] * (np.arange(cells) + 0.5) for i in range(2)]
    u1, u2 = np.meshgrid(*axes, indexing="ij")
    return np.stack([u1.ravel(), u2.ravel()], -1)


def _coarse_box(log_density, loc, chol, cells):
    """The coarse grid (lo, width, values): widened until the mass is inside, zoomed if tiny."""
    lo = np.full(2, -_REACH)
    width = np.full(2, 2 * _REACH / cells)
    for round_ in range(_ROUNDS):
        u = _centres(lo, width, cells)
        values = np.asarray(log_density(loc + u @ chol.T), dtype=np.float64)
        values = np.where(np.isfinite(values), values, -np.inf).reshape(cells, cells)
        top = np.max(values)
        if not np.isfinite(top):
            raise ValueError("the log density is -inf at every grid point: no mass to propose")
        keep = values > top - _SIGNIFICANT
        rows, cols = np.nonzero(keep.any(1))[0], np.nonzero(keep.any(0))[0]
        first = np.array([rows[0], cols[0]]) - 1
        last = np.array([rows[-1], cols[-1]]) + 2
        if round_ == _ROUNDS - 1:
            break
        touches = (first < 0) | (last > cells)
        if touches.any():
            # Mass reaches the grid's edge: the next grid is twice as wide along those axes.
            centre = lo + 0.5 * cells * width
            width = np.where(touches, 2 * width, width)
            lo = centre - 0.5 * cells * width
            continue
        span = last - first
        if np.all(span >= cells // 4):
            break
        # Zoom: the next grid covers the significant cells with one cell of margin.
        lo = lo + first * width
        width = span * width / cells
    return lo, width, values


def fit_plane_grid(
    log_density: Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]],
    *,
    loc: npt.ArrayLike,
    scale: npt.ArrayLike,
    cells: int = _CELLS,
    budget: int = _BUDGET,
) -> PlaneGrid:
    """Tabulate a log density of z ∈ R² on a grid adapted to where its mass lies.

    Parameters
    ----------
    log_density
        Vectorised log density (up to a constant): rows of z ``(m, 2)`` → ``(m,)``, ``-inf``
        where the density is 0.
    loc, scale
        A location ``(2,)`` and scale matrix ``(2, 2)`` of the target (e.g. a fitted t's), which
        set the whitened coordinates u = chol⁻¹ (z - loc).
    cells
        Coarse cells per axis.
    budget
        Most log-density evaluations spent on refining cells.

    Returns
    -------
    PlaneGrid

    Notes
    -----
    The first coarse grid covers abs(u) ≤ 12. Each further round (at most seven) doubles its width
    along an axis where cells within 30 nats of the highest reach the edge, or else covers those
    cells, with one cell of margin, when they span less than a quarter of the grid along some
    axis. Then, breadth first and heaviest first, every cell that may hold mass (within 30 nats
    of the heaviest, or next to such a coarse cell: a ridge thinner than a cell can pass it
    without touching its centre) is halved along both axes unless its halves' log densities are
    all within 0.3 nats of its own, down to 1/128 of a coarse cell or until the budget is spent.
    A ridge much thinner than a coarse cell that passes between every centre evaluated in a cell
    is not seen there: the proposal then under-weights it (an independence sampler stays exact,
    but enters such a region rarely). On a ridge a tenth of a coarse cell wide it finds all but
    about 1% of the mass (``tests/test_collapsed_pair.py``).

    Examples
    --------
    >>> from scipy import stats
    >>> target = stats.multivariate_normal([1.0, -1.0], [[1.0, 0.9], [0.9, 1.0]])
    >>> grid = fit_plane_grid(target.logpdf, loc=np.zeros(2), scale=np.eye(2) * 4.0)
    >>> z = draw_plane_grid(np.random.default_rng(0), grid, 20000)
    >>> np.round(z.mean(0), 1), np.round(np.corrcoef(z.T)[0, 1], 1)
    (array([ 1., -1.]), np.float64(0.9))
    """
    loc = np.asarray(loc, dtype=np.float64)
    chol = np.linalg.cholesky(np.asarray(scale, dtype=np.float64))
    lo, width, values = _coarse_box(log_density, loc, chol, cells)
    i, j = (a.ravel() for a in np.meshgrid(np.arange(cells), np.arange(cells), indexing="ij"))
    # Leaves: coarse index (i, j), depth, sub-index (a, b), value at the centre, smooth flag.
    depth = np.zeros(i.size, dtype=np.int64)
    a = np.zeros(i.size, dtype=np.int64)
    b = np.zeros(i.size, dtype=np.int64)
    value = values.ravel()
    smooth = np.zeros(i.size, dtype=bool)
    keep = values > np.max(values) - _SIGNIFICANT
    padded = np.pad(keep, 1)
    near = np.zeros_like(keep)
    for di in (0, 1, 2):
        for dj in (0, 1, 2):
            near |= padded[di : di + cells, dj : dj + cells]
    near = near.ravel()
    log_cell = np.log(width).sum()
    offsets = np.array([[0, 0], [0, 1], [1, 0], [1, 1]])
    spent = 0
    while spent < budget:
        mass = value + log_cell - 2 * np.log(2.0) * depth
        top = np.max(mass)
        wanted = (~smooth) & (depth < _DEPTH) & ((mass > top - _REFINE) | (near & (depth == 0)))
        order = np.flatnonzero(wanted)
        if order.size == 0:
            break
        order = order[np.argsort(-mass[order])][: max((budget - spent) // 4, 1)]
        # Children of each chosen leaf: depth + 1, sub-index 2(a, b) + offset.
        ci = np.repeat(i[order], 4)
        cj = np.repeat(j[order], 4)
        cd = np.repeat(depth[order] + 1, 4)
        ca = 2 * np.repeat(a[order], 4) + np.tile(offsets[:, 0], order.size)
        cb = 2 * np.repeat(b[order], 4) + np.tile(offsets[:, 1], order.size)
        frac = (np.stack([ca, cb], -1) + 0.5) / (1 << cd)[:, None]
        u = lo + width * (np.stack([ci, cj], -1) + frac)
        cv = np.asarray(log_density(loc + u @ chol.T), dtype=np.float64)
        cv = np.where(np.isfinite(cv), cv, -np.inf)
        spent += cv.size
        parent = np.repeat(value[order], 4)
        with np.errstate(invalid="ignore"):
            close = np.abs(cv - parent) < _SMOOTH
        flat = np.all(close.reshape(-1, 4), axis=1)
        # The chosen leaves are replaced by their children.
        rest = np.ones(i.size, dtype=bool)
        rest[order] = False
        i, j = np.concatenate([i[rest], ci]), np.concatenate([j[rest], cj])
        depth = np.concatenate([depth[rest], cd])
        a, b = np.concatenate([a[rest], ca]), np.concatenate([b[rest], cb])
        value = np.concatenate([value[rest], cv])
        smooth = np.concatenate([smooth[rest], np.repeat(flat, 4)])
        near = np.concatenate([near[rest], np.zeros(cv.size, dtype=bool)])
    codes = _code(i, j, depth, a, b, cells)
    order = np.argsort(codes)
    i, j, depth, a, b, value = (x[order] for x in (i, j, depth, a, b, value))
    size = 1.0 / (1 << depth)
    leaf_width = width * size[:, None]
    leaf_lo = lo + width * np.stack([i, j], -1) + leaf_width * np.stack([a, b], -1)
    log_mass = value + np.log(leaf_width).sum(1)
    top = np.max(log_mass)
    log_mass = log_mass - top - np.log(np.sum(np.exp(log_mass - top)))
    return PlaneGrid(
        loc,
        chol,
        lo,
        width,
        cells,
        codes[order],
        leaf_lo,
        leaf_width,
        log_mass,
        float(np.log(abs(np.linalg.det(chol)))),
    )


def draw_plane_grid(
    rng: np.random.Generator, grid: PlaneGrid, size: int
) -> npt.NDArray[np.float64]:
    """Draw ``size`` points from the grid's piecewise-constant density; shape ``(size, 2)``."""
    prob = np.exp(grid.log_mass)
    leaf = rng.choice(prob.size, size=size, p=prob / prob.sum())
    u = grid.leaf_lo[leaf] + grid.leaf_width[leaf] * rng.uniform(size=(size, 2))
    return grid.loc + u @ grid.chol.T


def plane_grid_logpdf(grid: PlaneGrid, z: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Log density of the grid's proposal at the rows of ``z`` (-inf outside the grid)."""
    z = np.atleast_2d(np.asarray(z, dtype=np.float64))
    cells = grid.cells
    u = np.linalg.solve(grid.chol, (z - grid.loc).T).T
    position = (u - grid.lo) / grid.width
    cell = np.floor(position).astype(np.int64)
    inside = np.all((cell >= 0) & (cell < cells), axis=1)
    cell = np.clip(cell, 0, cells - 1)
    frac = np.clip(position - cell, 0.0, np.nextafter(1.0, 0.0))
    leaf = np.full(len(z), -1)
    for depth in range(_DEPTH + 1):
        sub = np.floor(frac * (1 << depth)).astype(np.int64)
        code = _code(cell[:, 0], cell[:, 1], depth, sub[:, 0], sub[:, 1], cells)
        at = np.minimum(np.searchsorted(grid.codes, code), grid.codes.size - 1)
        found = (grid.codes[at] == code) & (leaf < 0)
        leaf = np.where(found, at, leaf)
    log_area = np.log(grid.leaf_width[leaf]).sum(1)
    out = grid.log_mass[leaf] - log_area - grid.log_jacobian
    return np.where(inside & (leaf >= 0), out, -np.inf)
