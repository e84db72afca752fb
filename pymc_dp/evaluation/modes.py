"""Separated modes of a scalar posterior, found in its draws.

A noise-aware posterior can be multimodal for reasons of the model rather than of the sampler:
a window sum that two laws explain equally well (:mod:`pymc_dp.model.window_premise`), a
release whose noise swamps a boundary. A mean ± sd then describes neither mode, so the command
line reports each mode with its mass (:func:`separated_modes`) and warns.

The draws are binned on a regular grid (on the log scale for positive draws, where a far mode of
a rate or a count's mean lives); modes are the runs of non-empty bins separated by at least
:data:`GAP_BINS` empty ones. Isolated draws of a long tail form runs of tiny mass, which
``min_mass`` leaves out.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

__all__ = ["BINS", "GAP_BINS", "Mode", "describe_modes", "separated_modes"]

BINS = 200
"""Bins across the range of the draws."""
GAP_BINS = 5
"""Empty bins in a row (2.5% of the range) that separate two modes."""


class Mode(NamedTuple):
    """One mode of a scalar posterior: its share of the draws, median and 94% interval."""

    mass: float
    median: float
    low: float
    high: float


def separated_modes(
    draws: npt.ArrayLike, *, min_mass: float = 0.01, bins: int = BINS, gap: int = GAP_BINS
) -> list[Mode]:
    """The separated modes of a scalar posterior holding at least ``min_mass`` of the draws.

    Parameters
    ----------
    draws
        Posterior draws of one scalar (any shape; non-finite draws are ignored).
    min_mass
        Smallest share of the draws reported as a mode.
    bins
        Bins across the range of the draws (log range for positive draws).
    gap
        Empty bins in a row that separate two modes.

    Returns
    -------
    list of Mode
        By decreasing mass; one entry for a unimodal posterior.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = np.concatenate([rng.normal(2.7, 0.02, 8600), rng.normal(38.5, 0.3, 1400)])
    >>> [(round(m.mass, 2), round(m.median, 1)) for m in separated_modes(x)]
    [(0.86, 2.7), (0.14, 38.5)]
    >>> len(separated_modes(rng.gamma(2.0, 1.0, 10_000)))
    1
    """
    x = np.asarray(draws, dtype=np.float64).ravel()
    x = x[np.isfinite(x)]
    if x.size == 0:
        return []
    scale = np.log(x) if np.all(x > 0) else x
    lo, hi = float(scale.min()), float(scale.max())
    if hi <= lo:
        return [Mode(1.0, float(x[0]), float(x[0]), float(x[0]))]
    counts, edges = np.histogram(scale, bins=bins, range=(lo, hi))
    occupied = counts > 0
    # Runs of occupied bins, merged across gaps shorter than `gap` empty bins.
    runs: list[list[int]] = []
    empty = 0
    for i, full in enumerate(occupied):
        if not full:
            empty += 1
            continue
        if runs and empty < gap:
            runs[-1][1] = i
        else:
            runs.append([i, i])
        empty = 0
    modes = []
    for first, last in runs:
        inside = (scale >= edges[first]) & (scale <= edges[last + 1])
        mass = inside.mean()
        if mass >= min_mass:
            q = np.quantile(x[inside], [0.5, 0.03, 0.97])
            modes.append(Mode(float(mass), float(q[0]), float(q[1]), float(q[2])))
    return sorted(modes, key=lambda m: -m.mass)


def describe_modes(name: str, modes: list[Mode]) -> str:
    """One line naming each mode of ``name`` with its mass, median and 94% interval.

    Examples
    --------
    >>> describe_modes("lam", [Mode(0.86, 2.68, 2.63, 2.74), Mode(0.14, 38.5, 37.9, 39.1)])
    'lam has 2 separated modes: 86% near 2.68 [2.63, 2.74], 14% near 38.5 [37.9, 39.1]'
    """
    parts = [f"{m.mass:.0%} near {m.median:.4g} [{m.low:.4g}, {m.high:.4g}]" for m in modes]
    return f"{name} has {len(modes)} separated modes: " + ", ".join(parts)
