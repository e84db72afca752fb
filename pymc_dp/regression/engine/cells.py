"""The regression sampler when every covariate is binary, for many releases at once.

:func:`sample_cell_regression` targets the posterior of the cell model of x
(:mod:`~pymc_dp.regression.kernels.cell_model`: the dummy columns of one factor, or two binary
covariates) with the exact law of the statistic. Each iteration is the mixed model's
(:func:`~pymc_dp.regression.engine.mixed.mixed_sweep`): exact draws of (θ, σ²) | s and
π | s ~ Dirichlet(1 + counts), a move of s alone, after tuning a multiple-try move, random-walk
moves of (φ, s) with s re-proposed (the cell counts one at a time, rounded); Laplace noise
enters through its own density.
"""

from __future__ import annotations

import warnings
from typing import Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from pymc_dp._validation import check_int, check_rng
from pymc_dp.curator.regression.statistics import check_released_batch
from pymc_dp.regression.engine.batch_inputs import by_chain, noise_spread, tiled_priors
from pymc_dp.regression.engine.mixed import INITIAL_SD, release_nig_start, run_sweeps
from pymc_dp.regression.kernels.adaptation import RandomWalkAdaptation
from pymc_dp.regression.kernels.cell_model import (
    CUBE_FLOOR,
    CellLayout,
    CellParameters,
    cell_layout,
    draw_cell_probs,
    draw_cell_statistic,
    release_cell_probs,
)
from pymc_dp.regression.kernels.conjugate import NIG, check_nig
from pymc_dp.regression.kernels.mixed_move import (
    MixedState,
    MixedTarget,
    mixed_state,
    n_cell_parameters,
    noise_terms,
    pack_cells,
    unpack_cells,
)

__all__ = ["CELLS_MIX_D", "CellTrace", "cell_start", "sample_cell_regression", "whole_counts"]

CELLS_MIX_D = 10
"""Most covariates (the dummy columns of a factor of 11 levels) at which the sampler is checked
(a warning above; ``"auto"`` takes the normal model of x there). Own-prior ranks of θ and σ² at
d = 10 are uniform by KS (``benchmarks/regression_cell_levels.py``: 40 releases at n = 60,
Laplace scale 8, and 36 at n = 1000, scale 113, i.e. ε = 1; smallest p of 24, 0.044), and
under ``pm.sample`` (2 chains × (1000 + 1000), n = 1000, ε = 1, one release each) the smallest
bulk ESS of (θ, σ²) per second is 2.3×, 3.5×, 1.4× and 2.5× the normal model's at d = 6, 7, 8
and 10 (ESS 494, 365, 281, 123, R-hat 1.006–1.022, against 127, 62, 120, 28, R-hat
1.017–1.081). It slows as d grows: at d = 5, 4 chains × (500 + 1000) in the batched engine,
ESS 379–902 over four releases; at d = 10 200 (R-hat 1.022) with the moves of y
(:data:`~pymc_dp.regression.kernels.mixed_symmetry.CELL_SYMMETRY_MIN_D`), 10 without."""


def whole_counts(probs: npt.ArrayLike, n: float) -> npt.NDArray[np.float64]:
    """Share out n whole records by ``probs`` ``(..., C)``.

    ⌊n π_c⌋ each, then the records left over one each to the cells with the largest remainders.

    Examples
    --------
    >>> whole_counts([0.5, 0.3, 0.2], 7).tolist()
    [4.0, 2.0, 1.0]
    """
    probs = np.asarray(probs, dtype=np.float64)
    whole = np.floor(n * probs)
    ranks = np.argsort(np.argsort(whole - n * probs, axis=-1), axis=-1)
    return whole + (ranks < (n - np.sum(whole, axis=-1))[..., None])


def cell_start(
    rng: np.random.Generator, target: MixedTarget
) -> tuple[CellParameters, npt.NDArray[np.float64]]:
    """A chain's first φ, near the release, and its first s, a draw of the law of s there.

    π from the release's readings of the counts
    (:func:`~pymc_dp.regression.kernels.cell_model.release_cell_probs`, every count at least
    :data:`~pymc_dp.regression.kernels.cell_model.START_SHARE` of n); (θ, σ²) from
    :func:`~pymc_dp.regression.engine.mixed.release_nig_start` with those counts rounded to
    whole records; for the cube the likeliest of that, its θ with σ² at the prior's mode, and
    the prior's centre (:func:`_likelier_start`).
    """
    layout, n = target.cells, target.n
    z = target.released
    # The cube's moves shape their proposal of s with the release's π floored at half a record
    # (release_cell_probs): a chain started from counts floored at 2 % of n was, on 20 190
    # records with two indicators never 1 together, a state that proposal never left.
    probs = release_cell_probs(z, n, layout, floor=CUBE_FLOOR if layout.hidden else None)
    coordinates = whole_counts(probs, n) @ np.linalg.inv(layout.to_counts).T
    k = coordinates[..., 1 : 1 + len(layout.positions)]
    statistic = np.array(z, dtype=np.float64)
    statistic[..., layout.covariate_positions] = np.where(
        layout.reads >= 0, k[..., np.maximum(layout.reads, 0)], 0.0
    )
    theta, sigma2 = release_nig_start(rng, target.prior, statistic, n)
    par = CellParameters(theta, sigma2, probs)
    if layout.hidden:
        return _likelier_start(rng, par, target)
    return par, draw_cell_statistic(rng, par, n, layout, start=True)


def _likelier_start(
    rng: np.random.Generator, par: CellParameters, target: MixedTarget
) -> tuple[CellParameters, npt.NDArray[np.float64]]:
    """The cube's (θ, σ²): the likeliest of the release's fit, its θ, and the prior's centre.

    Per batch member, the highest log target with an s drawn at each, σ² at the prior's mode
    for the last two. Read as a statistic, a weak release's responses are mostly noise
    (n = 100, ε = 0.1: Laplace scale 300 on Σy² ≈ 40): the fit to them (θ₀ ≈ −11 where the
    prior's sd is 0.45) started chains 78 nats below the posterior's bulk, where some stayed for
    all 3000 iterations (R-hat above 1.05 in 13 of 200 releases); the centre is likelier there.
    At n = 1000, ε = 1 (Laplace scale 30) the fit's θ is near the data's, but the noise on Σy²,
    Σy and Σxy can leave the fit's residual sum of squares near 0 (σ² ≈ 0.006 where the prior's
    mode is 0.09; log target about −380 against the centre's −60). The centre was then the
    likelier and a trap: its s is hundreds from the readings, and chains started there accepted
    0.1 % of their moves (R-hat above 1.05 in 19 of 200 releases, up to 2.4). The fit's θ with
    the prior's σ² is likelier than both there.
    """
    prior = target.prior
    mode = np.broadcast_to(prior.scale / (prior.shape + 1.0), par.sigma2.shape).copy()
    candidates = (
        par,
        par._replace(sigma2=mode),
        par._replace(theta=np.broadcast_to(prior.mean, par.theta.shape).copy(), sigma2=mode),
    )
    log_target, draws = [], []
    for candidate in candidates:
        s = draw_cell_statistic(rng, candidate, target.n, target.cells, start=True)
        draws.append(s)
        log_target.append(
            mixed_state(pack_cells(candidate._replace(probs=None)), s, target).log_target
        )
    best = np.argmax(np.stack(log_target), axis=0)
    start = par._replace(
        theta=_per_member(best, [c.theta for c in candidates]),
        sigma2=_per_member(best, [c.sigma2 for c in candidates]),
    )
    return start, _per_member(best, draws)


def _per_member(best: npt.NDArray[np.intp], arrays: list[npt.NDArray]) -> npt.NDArray:
    """Member by member, ``arrays[best]`` (``best`` over the batch, the arrays batch first)."""
    stacked = np.stack(arrays)
    index = best.reshape(1, *best.shape, *(1,) * (stacked.ndim - 1 - best.ndim))
    return np.take_along_axis(stacked, index, axis=0)[0]


class CellTrace(NamedTuple):
    """Draws after tuning, leading axes ``(chain, draw, batch)``."""

    theta: npt.NDArray[np.float64]
    sigma2: npt.NDArray[np.float64]
    probs: npt.NDArray[np.float64]
    """π, ``(..., C)`` in the order of :func:`~pymc_dp.regression.kernels.cell_model.cell_layout`'s
    corners."""
    suffstat: npt.NDArray[np.float64]
    acceptance: npt.NDArray[np.float64]
    """Share of the random-walk moves accepted after tuning, ``(chain, batch)``."""
    layout: CellLayout

    @property
    def x_model(self) -> str:
        """Which model of x drew this trace."""
        return "cells"


def sample_cell_regression(
    rng: int | np.random.Generator,
    *,
    released: npt.ArrayLike,
    n: int,
    prior: NIG | tuple,
    kind: Literal["categories", "pair", "cube"] = "categories",
    scale: npt.ArrayLike | None = None,
    noise_sd: npt.ArrayLike | None = None,
    draws: int,
    tune: int = 500,
    chains: int = 2,
    symmetry_steps: tuple[float, ...] | None = None,
) -> CellTrace:
    """Sample the posterior of a batch of releases whose covariates are all binary.

    Parameters
    ----------
    rng
        Seed or generator.
    released
        Released z, ``(batch, m)``, all with the same n and d.
    n
        Number of records of every release.
    prior
        NIG prior of (θ, σ²).
    kind
        ``"categories"``: the d covariates are the dummy columns of one factor with d + 1 levels
        (never two of them 1 in a record); ``"pair"``: two binary covariates (d = 2), any of the
        four combinations; ``"cube"``: three (d = 3), any of the eight. π ~ Dirichlet(1, …, 1)
        over the cells. Above :data:`CELLS_MIX_D` covariates a ``UserWarning`` says that the
        sampler is not checked there.
    scale, noise_sd
        Exactly one: the Laplace scale Δ/ε, or the sd of Gaussian noise; scalar or ``(batch,)``.
    draws, tune, chains
        Iterations kept, tuning iterations, chains per release.
    symmetry_steps
        Steps of the moves of y along the model's symmetries each iteration
        (:func:`~pymc_dp.regression.engine.mixed.mixed_sweep`); ``None``: the default, ``()``:
        none.

    Returns
    -------
    CellTrace

    Examples
    --------
    >>> from pymc_dp.regression import release_regression
    >>> rng = np.random.default_rng(0)
    >>> level = rng.choice(3, size=400, p=[0.5, 0.3, 0.2])
    >>> x = np.column_stack([level == 1, level == 2]).astype(float)
    >>> y = np.clip(0.5 * x[:, 0] - 0.3 * x[:, 1] + 0.2 * rng.normal(size=400), -2, 2)
    >>> rel = release_regression(x, y, x_bounds=[(0.0, 1.0)] * 2, y_bounds=(-2, 2),
    ...                          epsilon=1.0, rng=1)
    >>> prior = NIG(np.zeros(3), np.eye(3), np.array(3.0), np.array(0.1))
    >>> tr = sample_cell_regression(2, released=rel.value[None], n=rel.n, scale=rel.scale,
    ...                             prior=prior, draws=50, tune=50)
    >>> tr.theta.shape, tr.probs.shape
    ((2, 50, 1, 3), (2, 50, 1, 3))
    """
    rng = check_rng(rng)
    z, d = check_released_batch(released)
    p = d + 1
    n = check_int(n, "n", minimum=d + 3)
    draws = check_int(draws, "draws", minimum=1)
    tune = check_int(tune, "tune", minimum=0)
    chains = check_int(chains, "chains", minimum=1)
    layout = cell_layout(d, kind)
    if d > CELLS_MIX_D:
        warnings.warn(
            f"the cell model's sampler is checked up to d = {CELLS_MIX_D} covariates (d = {d}) "
            f"and slows as d grows (at d = 10 a bulk ESS of 200 in 4 x 1000 draws, R-hat "
            f"1.02): read R-hat and ESS, or run longer chains",
            UserWarning,
            stacklevel=2,
        )
    releases, m = z.shape
    laplace, spread = noise_spread(scale, noise_sd, releases)
    prior = check_nig(prior)
    if prior.mean.shape[-1] != p:
        raise ValueError(f"prior.mean must have {p} entries for d={d} (got {prior.mean.shape})")

    rows = chains * releases  # chain-major, so that the output reshapes to (chain, ...)
    nig, _ = tiled_priors(prior, None, np.arange(p), chains, releases)
    zt = np.tile(z, (chains, 1))
    spread = np.tile(spread, chains)
    noise_var, b = noise_terms(spread, laplace, zt.shape)
    target = MixedTarget(zt, noise_var, float(n), nig, None, layout, laplace_scale=b)

    par, s = cell_start(rng, target)
    if layout.hidden:  # the cube's moves integrate π out
        par = par._replace(probs=None)
    state = mixed_state(pack_cells(par), s, target)
    adapt = RandomWalkAdaptation(
        state.params, initial_sd=np.full(n_cell_parameters(layout), INITIAL_SD)
    )
    keep = {
        "theta": np.empty((draws, rows, p)),
        "sigma2": np.empty((draws, rows)),
        "probs": np.empty((draws, rows, len(layout.corners))),
        "suffstat": np.empty((draws, rows, m)),
    }

    def record(i: int, state: MixedState) -> None:
        par, _ = unpack_cells(state.params, layout)
        if layout.hidden:
            par = par._replace(probs=draw_cell_probs(rng, state.suffstat, n, layout))
        keep["theta"][i], keep["sigma2"][i], keep["probs"][i] = par
        keep["suffstat"][i] = state.suffstat

    accepted = run_sweeps(rng, state, target, adapt, tune=tune, draws=draws, record=record,
                          symmetry_steps=symmetry_steps)  # fmt: skip
    return CellTrace(
        *(
            by_chain(keep[key], chains, releases)
            for key in ("theta", "sigma2", "probs", "suffstat")
        ),
        acceptance=accepted.reshape(chains, releases),
        layout=layout,
    )
