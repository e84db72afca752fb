"""Independent draws from a one-dimensional density by an adaptive grid and its inverse CDF.

A scalar θ whose likelihood is available in closed form (the collapsed likelihood of a released
scalar statistic) needs no Markov chain: its posterior is one-dimensional, so it can be tabulated
over its whole support and drawn from exactly. The grid is found in three stages, each a fixed
number of vectorised density evaluations per batch member:

1. **Bracket.** Start around a centre and double the interval on each side whose end still
   carries density within :data:`LOG_SPAN` nats of the largest value seen.
2. **Zoom.** Shrink the interval to the cells that carry density within :data:`LOG_SPAN` of the
   maximum (a single interval, so every mode inside it is kept), while it shrinks by half or more.
3. **Refine.** Add nodes at equal-mass quantiles of the current approximation, twice, so that
   nodes concentrate where the mass is, narrow modes included.

Between nodes the log density is linear (the density piecewise exponential), which is integrated
and inverted in closed form: a draw picks a cell by its mass and a point inside it exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

__all__ = ["LOG_SPAN", "GridDensity", "draw_from_grid", "grid_density"]

LOG_SPAN = 45.0
"""Nodes whose log density is this far below the maximum carry no mass that matters (e^-45 ≈
3e-20 relative): the bracket ends there and the zoom discards them."""

_MAX_DOUBLINGS = 40
_MAX_ZOOMS = 12
_PEAKS = 6
_PEAK_NODES = 33


class GridDensity(NamedTuple):
    """A one-dimensional density tabulated on sorted nodes, for each batch member."""

    nodes: npt.NDArray[np.float64]
    """Sorted nodes, shape ``(..., G)``."""
    log_density: npt.NDArray[np.float64]
    """Unnormalised log density at the nodes, shape ``(..., G)``."""
    log_cell_mass: npt.NDArray[np.float64]
    """Log mass of each cell between consecutive nodes, normalised, shape ``(..., G - 1)``."""

    def cdf(self, x: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """The CDF at ``x`` (broadcastable to the batch shape), exact for the interpolant."""
        x = np.broadcast_to(np.asarray(x, dtype=np.float64), self.nodes.shape[:-1])[..., None]
        nodes, f = self.nodes, self.log_density
        left, right = nodes[..., :-1], nodes[..., 1:]
        with np.errstate(invalid="ignore"):
            d = np.diff(f, axis=-1)
        d = np.where(np.isfinite(f[..., :-1]) & np.isfinite(f[..., 1:]), d, 0.0)
        frac = np.clip((x - left) / np.maximum(right - left, 1e-300), 0.0, 1.0)
        # Share of a cell's mass below x: (e^{d·frac} - 1)/(e^d - 1).
        with np.errstate(divide="ignore"):
            log_share = _log_expm1_ratio(d * frac) + np.log(frac) - _log_expm1_ratio(d)
        share = np.where(frac > 0, np.exp(log_share), 0.0)
        return np.clip(np.sum(np.exp(self.log_cell_mass) * share, axis=-1), 0.0, 1.0)


def _log_expm1_ratio(d: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """log((e^d - 1)/d), stable for every d (→ 0 as d → 0)."""
    d = np.asarray(d, dtype=np.float64)
    small = np.abs(d) < 1e-8
    safe = np.where(small, 1.0, d)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        pos = safe + np.log(-np.expm1(-safe)) - np.log(safe)  # d > 0: e^d(1 - e^-d)/d
        neg = np.log(-np.expm1(safe)) - np.log(-safe)  # d < 0: (1 - e^d)/(-d)
    return np.where(small, 0.5 * d, np.where(d > 0, pos, neg))


def _cell_masses(nodes: npt.NDArray, f: npt.NDArray) -> npt.NDArray:
    """Normalised log masses of the cells of a piecewise-exponential density."""
    width = np.diff(nodes, axis=-1)
    f0, f1 = f[..., :-1], f[..., 1:]
    with np.errstate(invalid="ignore"):
        d = np.where(np.isfinite(f0) & np.isfinite(f1), f1 - f0, 0.0)
        log_mass = np.where(
            np.isfinite(f0) & np.isfinite(f1),
            f0 + np.log(np.maximum(width, 1e-300)) + _log_expm1_ratio(d),
            -np.inf,
        )
    log_mass = np.where(width > 0, log_mass, -np.inf)
    top = np.max(log_mass, axis=-1, keepdims=True)
    total = top + np.log(np.sum(np.exp(log_mass - top), axis=-1, keepdims=True))
    return log_mass - total


def _evaluate(
    log_density: Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]],
    nodes: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    f = np.asarray(log_density(nodes), dtype=np.float64)
    if f.shape != nodes.shape:
        raise ValueError(f"log_density must return shape {nodes.shape} (got {f.shape})")
    return np.where(np.isnan(f), -np.inf, f)


def grid_density(
    log_density: Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]],
    *,
    center: npt.ArrayLike,
    width: float = 10.0,
    size: int = 257,
    refine: int = 512,
) -> GridDensity:
    """Tabulate a one-dimensional density over its whole support, for a batch at once.

    Parameters
    ----------
    log_density
        Vectorised unnormalised log density on the real line (use an unconstrained
        parametrisation): takes nodes of shape ``(..., G)``, returns values of the same shape;
        ``-inf`` where the density is zero. NaN is treated as ``-inf``.
    center
        Where to start looking, shape ``(...)`` (e.g. the current value, or a prior draw).
    width
        Initial half-width of the bracket.
    size
        Nodes per bracketing and zooming pass.
    refine
        Nodes added in each of the two equal-mass refinement passes.

    Returns
    -------
    GridDensity
        Nodes, log density and cell masses, with ``size + 2·refine`` nodes per batch member.

    Raises
    ------
    ValueError
        If the density is zero (or NaN) at every node, or its mass does not end within
        2^40 widths of the centre (an improper density).

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import stats
    >>> grid = grid_density(lambda z: stats.norm.logpdf(z, 3.0, 0.01), center=np.zeros(1))
    >>> draws = draw_from_grid(np.random.default_rng(0), grid, size=4000)
    >>> round(float(draws.mean()), 3), round(float(draws.std()), 4)
    (3.0, 0.01)
    """
    center = np.asarray(center, dtype=np.float64)
    batch = center.shape
    lo = center - width
    hi = center + width
    t = np.linspace(0.0, 1.0, size)

    def uniform(lo_, hi_):
        return lo_[..., None] + (hi_ - lo_)[..., None] * t

    # 1. Bracket: extend each side whose end is still within LOG_SPAN of the maximum.
    for _ in range(_MAX_DOUBLINGS):
        nodes = uniform(lo, hi)
        f = _evaluate(log_density, nodes)
        top = np.max(f, axis=-1)
        span = hi - lo
        grow_lo = f[..., 0] > top - LOG_SPAN
        grow_hi = f[..., -1] > top - LOG_SPAN
        if not (np.any(grow_lo) or np.any(grow_hi)):
            break
        lo = np.where(grow_lo, lo - span, lo)
        hi = np.where(grow_hi, hi + span, hi)
    else:
        raise ValueError(
            "the density's mass does not end within 2^40 bracket widths of the start: the "
            "posterior is improper or far wider than its parametrisation allows; give θ a "
            "proper prior"
        )
    if not np.all(np.isfinite(top)):
        raise ValueError(
            "the log density is -inf or NaN at every grid node: the model has no support near "
            "the start, or its density cannot be evaluated"
        )

    # 2. Resolve peaks: zoom into each of the highest local maxima of the coarse grid, so
    # that a mode narrower than the coarse spacing is measured rather than missed.
    nodes, f = _resolve_peaks(log_density, nodes, f)

    # 3. Refine: nodes at equal-mass quantiles of the current interpolant, twice.
    u = (np.arange(refine) + 0.5) / refine
    for _ in range(2):
        grid = GridDensity(nodes, f, _cell_masses(nodes, f))
        extra = _inverse_cdf(grid, np.broadcast_to(u, (*batch, refine)))
        nodes = np.concatenate([nodes, extra], axis=-1)
        f = np.concatenate([f, _evaluate(log_density, extra)], axis=-1)
        order = np.argsort(nodes, axis=-1)
        nodes = np.take_along_axis(nodes, order, -1)
        f = np.take_along_axis(f, order, -1)
    return GridDensity(nodes, f, _cell_masses(nodes, f))


def _resolve_peaks(
    log_density: Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]],
    nodes: npt.NDArray[np.float64],
    f: npt.NDArray[np.float64],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Add nodes around the :data:`_PEAKS` highest local maxima of a grid, zooming in on each.

    Each zoom replaces a peak's interval by the two cells around its highest node, on
    :data:`_PEAK_NODES` nodes (16 times finer), until the peak spans several nodes (its log
    density within 3 of its maximum at six or more of them). All evaluated nodes are kept.
    """
    batch, size = nodes.shape[:-1], nodes.shape[-1]
    left = np.concatenate([np.full((*batch, 1), -np.inf), f[..., :-1]], axis=-1)
    right = np.concatenate([f[..., 1:], np.full((*batch, 1), -np.inf)], axis=-1)
    score = np.where((f >= left) & (f >= right) & np.isfinite(f), f, -np.inf)
    peaks = np.argsort(-score, axis=-1)[..., :_PEAKS]
    lo_idx, hi_idx = np.maximum(peaks - 1, 0), np.minimum(peaks + 1, size - 1)
    lo = np.take_along_axis(nodes, lo_idx, -1)
    hi = np.take_along_axis(nodes, hi_idx, -1)
    t = np.linspace(0.0, 1.0, _PEAK_NODES)
    all_nodes, all_f = [nodes], [f]
    done = ~np.isfinite(np.take_along_axis(score, peaks, -1))
    for _ in range(_MAX_ZOOMS):
        sub = lo[..., None] + (hi - lo)[..., None] * t  # (*batch, peaks, nodes)
        flat = sub.reshape(*batch, -1)
        sub_f = _evaluate(log_density, flat).reshape(sub.shape)
        keep = ~done
        all_nodes.append(np.where(keep[..., None], sub, np.nan).reshape(*batch, -1))
        all_f.append(sub_f.reshape(*batch, -1))
        top = np.max(sub_f, axis=-1, keepdims=True)
        done |= np.sum(sub_f > top - 3.0, axis=-1) >= 6
        if np.all(done):
            break
        j = np.argmax(sub_f, axis=-1)
        new_lo = np.take_along_axis(sub, np.maximum(j - 1, 0)[..., None], -1)[..., 0]
        new_hi = np.take_along_axis(sub, np.minimum(j + 1, _PEAK_NODES - 1)[..., None], -1)[..., 0]
        lo, hi = np.where(done, lo, new_lo), np.where(done, hi, new_hi)
    nodes = np.concatenate(all_nodes, axis=-1)
    f = np.concatenate(all_f, axis=-1)
    # Nodes of finished peaks were marked NaN: move them (and their values) to the end.
    f = np.where(np.isnan(nodes), -np.inf, f)
    order = np.argsort(np.where(np.isnan(nodes), np.inf, nodes), axis=-1)
    nodes = np.take_along_axis(nodes, order, -1)
    f = np.take_along_axis(f, order, -1)
    # Rows keep a common width: pad shorter rows by repeating their last node (zero-width cells).
    last = np.take_along_axis(nodes, (np.sum(~np.isnan(nodes), axis=-1) - 1)[..., None], -1)
    return np.where(np.isnan(nodes), last, nodes), f


def _inverse_cdf(grid: GridDensity, u: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Quantiles at probabilities ``u`` of shape ``(..., m)`` (batch first), exact per cell."""
    mass = np.exp(grid.log_cell_mass)
    cum = np.cumsum(mass, axis=-1)
    cum /= cum[..., -1:]
    j = np.minimum(
        np.stack([np.searchsorted(c, v, side="right") for c, v in _rows(cum, u)]).reshape(u.shape),
        mass.shape[-1] - 1,
    )
    # Skip empty cells that searchsorted can land on at a boundary.
    below = np.take_along_axis(np.concatenate([np.zeros((*cum.shape[:-1], 1)), cum], -1), j, -1)
    cell = np.take_along_axis(mass, j, -1) / np.sum(mass, axis=-1, keepdims=True)
    v = np.clip(np.where(cell > 0, (u - below) / np.where(cell > 0, cell, 1.0), 0.5), 0.0, 1.0)
    left = np.take_along_axis(grid.nodes, j, -1)
    width = np.take_along_axis(grid.nodes, j + 1, -1) - left
    f0 = np.take_along_axis(grid.log_density, j, -1)
    d = np.take_along_axis(grid.log_density, j + 1, -1) - f0
    d = np.where(np.isfinite(d), d, 0.0)
    # Inverse of the cell's CDF (e^{d·t} - 1)/(e^d - 1) at v: t = log(1 - v + v·e^d)/d.
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_num = np.logaddexp(np.log1p(-v), np.log(v) + d)
        frac = np.where(np.abs(d) < 1e-10, v, log_num / d)
    return left + width * np.clip(frac, 0.0, 1.0)


def _rows(cum: npt.NDArray, u: npt.NDArray):
    flat_c = cum.reshape(-1, cum.shape[-1])
    flat_u = u.reshape(-1, u.shape[-1])
    return zip(flat_c, flat_u, strict=True)


def draw_from_grid(
    rng: np.random.Generator, grid: GridDensity, *, size: int
) -> npt.NDArray[np.float64]:
    """Independent draws from a tabulated density.

    Parameters
    ----------
    rng
        Source of randomness.
    grid
        The density, from :func:`grid_density`, with batch shape ``(...)``.
    size
        Draws per batch member.

    Returns
    -------
    numpy.ndarray
        Shape ``(size, ...)``.
    """
    batch = grid.nodes.shape[:-1]
    u = rng.uniform(size=(*batch, size))
    return np.moveaxis(_inverse_cdf(grid, u), -1, 0)
