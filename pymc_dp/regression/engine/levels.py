"""The regression sampler for a factor beside normal covariates, for many releases at once.

:func:`sample_level_regression` targets the posterior of the level model of x
(:mod:`~pymc_dp.regression.kernels.level_model`: the factor's level with probabilities π, the
other covariates normal with a mean per level and one covariance) with the exact law of the
statistic. It runs the mixed model's sweep (:func:`~pymc_dp.regression.engine.mixed.mixed_sweep`:
exact Gibbs draws of φ given s, moves of s alone and of (φ, s) with s re-proposed, and the moves
along the model's symmetries), with the level counts as the statistic's integer coordinates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from pymc_dp._validation import check_int, check_rng
from pymc_dp.curator.regression.statistics import check_released_batch
from pymc_dp.regression.engine.batch_inputs import by_chain, noise_spread, tiled_priors
from pymc_dp.regression.engine.cells import whole_counts
from pymc_dp.regression.engine.mixed import INITIAL_SD, release_nig_start, run_sweeps
from pymc_dp.regression.kernels.adaptation import RandomWalkAdaptation
from pymc_dp.regression.kernels.cell_model import START_SHARE
from pymc_dp.regression.kernels.conjugate import NIG, check_nig
from pymc_dp.regression.kernels.data_model import NIW, check_niw
from pymc_dp.regression.kernels.level_model import (
    LevelParameters,
    cells_from_coordinates,
    columns_first,
    coordinates_from_cells,
    draw_level_statistic,
    level_layout,
    pair_layout,
)
from pymc_dp.regression.kernels.mixed_move import (
    MixedState,
    MixedTarget,
    mixed_state,
    n_level_parameters,
    noise_terms,
    pack_levels,
    unpack_levels,
)

__all__ = ["LevelTrace", "level_start", "sample_level_regression"]


def level_start(rng: np.random.Generator, target: MixedTarget) -> LevelParameters:
    """A chain's first φ, near the release; the chain's first s is a draw of its law there.

    π from the release's readings of the cell counts (each coordinate the mean of its readings;
    every count floored at :data:`~pymc_dp.regression.kernels.cell_model.START_SHARE` of n and
    at 1); (θ, σ²) from :func:`~pymc_dp.regression.engine.mixed.release_nig_start` with those counts
    made whole records; the mean rows at the prior's centre and Σ at the scale of its median.
    """
    layout, n = target.levels, target.n
    z = target.released
    k = np.stack([np.mean(z[..., reads], axis=-1) for reads in layout.readers], axis=-1)
    counts = np.maximum(cells_from_coordinates(k, n, layout), max(START_SHARE * n, 1.0))
    probs = counts / np.sum(counts, axis=-1, keepdims=True)
    whole = coordinates_from_cells(whole_counts(probs, n), layout)
    statistic = np.array(z, dtype=np.float64)
    for j, reads in enumerate(layout.readers):
        statistic[..., reads] = whole[..., j, None]
    statistic[..., layout.zeros] = 0.0
    theta, sigma2 = release_nig_start(rng, target.prior, statistic, n)
    niw, d2, rows = target.x_prior, layout.d - layout.columns, layout.means
    batch = probs.shape[:-1]
    if not d2:
        return LevelParameters(theta, sigma2, probs, np.zeros((*batch, rows, 0)),
                               np.zeros((*batch, 0, 0)))  # fmt: skip
    loc = np.broadcast_to(niw.loc[..., None, :], (*batch, rows, d2)).copy()
    dof = np.asarray(niw.dof, dtype=np.float64)
    cov = niw.scale / np.maximum(dof - d2 + 1.0, 0.5)[..., None, None]
    return LevelParameters(theta, sigma2, probs, loc, np.broadcast_to(cov, (*batch, d2, d2)))


class LevelTrace(NamedTuple):
    """Draws after tuning, leading axes ``(chain, draw, batch)``, covariates in the user's order."""

    theta: npt.NDArray[np.float64]
    sigma2: npt.NDArray[np.float64]
    probs: npt.NDArray[np.float64]
    """π, ``(..., C)``: the reference level (every column of the factor 0) first, then the
    levels of the factor's columns in the order given; for a pair the corners (0, 0), (1, 0),
    (0, 1), (1, 1) of the two columns in the order given."""
    group_loc: npt.NDArray[np.float64]
    """``(..., r, d₂)``: the other covariates' means at each level (r = K), or at the pair's
    corners (0, 0), (1, 0), (0, 1) (r = 3; at (1, 1) the mean is m₁₀ + m₀₁ − m₀₀)."""
    x_cov: npt.NDArray[np.float64]
    """``(..., d₂, d₂)``: their covariance within a level."""
    suffstat: npt.NDArray[np.float64]
    acceptance: npt.NDArray[np.float64]
    """Share of the random-walk moves accepted after tuning, ``(chain, batch)``."""
    kind: str = "factor"
    """``"factor"`` or ``"pair"``."""

    @property
    def x_model(self) -> str:
        """Which model of x drew this trace: ``"levels"`` (a factor) or ``"pair"``."""
        return "pair" if self.kind == "pair" else "levels"


def sample_level_regression(
    rng: int | np.random.Generator,
    *,
    released: npt.ArrayLike,
    n: int,
    prior: NIG | tuple,
    x_prior: NIW | tuple | None,
    factor: Sequence[int] = (),
    pair: Sequence[int] = (),
    scale: npt.ArrayLike | None = None,
    noise_sd: npt.ArrayLike | None = None,
    draws: int,
    tune: int = 500,
    chains: int = 2,
    symmetry_steps: tuple[float, ...] | None = None,
) -> LevelTrace:
    """Sample the posterior of releases with a factor, or a pair of binaries, beside normal x.

    Parameters
    ----------
    rng
        Seed or generator.
    released
        Released z, ``(batch, m)``, all with the same n and d.
    n
        Number of records of every release.
    prior
        NIG prior of (θ, σ²), covariates in the release's order.
    x_prior
        NIW prior of the other covariates' level means and covariance (in the release's order
        without ``factor``): each level's mean is N(loc, Σ/κ); ``None`` when every covariate
        is a column of the factor.
    factor
        Indices of the factor's dummy columns, one per level but the reference (every column
        0), never two of them 1 in a record.
    pair
        Instead of ``factor``: the indices of two binary covariates, any corner of the unit
        square possible, beside at least one other covariate (the other covariates' mean is
        additive in the two: :func:`~pymc_dp.regression.kernels.level_model.pair_layout`).
    scale, noise_sd
        Exactly one: the Laplace scale Δ/ε, or the sd of Gaussian noise; scalar or ``(batch,)``.
    draws, tune, chains
        Iterations kept, tuning iterations, chains per release.
    symmetry_steps
        Steps of the moves along the model's symmetries each iteration
        (:func:`~pymc_dp.regression.engine.mixed.mixed_sweep`); ``None``: the default for d,
        ``()``: none.

    Returns
    -------
    LevelTrace

    Examples
    --------
    >>> from pymc_dp.regression import release_regression
    >>> from pymc_dp.regression.kernels.data_model import NIW
    >>> rng = np.random.default_rng(0)
    >>> level = rng.choice(3, size=400, p=[0.5, 0.3, 0.2])
    >>> x = np.column_stack([level == 1, level == 2, rng.normal(0, 0.5, 400)]).astype(float)
    >>> y = np.clip(0.5 * x[:, 0] - 0.3 * x[:, 2] + 0.2 * rng.normal(size=400), -2, 2)
    >>> box = [(0.0, 1.0), (0.0, 1.0), (-2.0, 2.0)]
    >>> rel = release_regression(np.clip(x, -2, 2), y, x_bounds=box, y_bounds=(-2, 2),
    ...                          epsilon=1.0, rng=1)
    >>> prior = NIG(np.zeros(4), np.eye(4), np.array(3.0), np.array(0.1))
    >>> x_prior = NIW(np.zeros(1), np.array(1.0), np.array(4.0), np.eye(1))
    >>> tr = sample_level_regression(2, released=rel.value[None], n=rel.n, scale=rel.scale,
    ...                              prior=prior, x_prior=x_prior, factor=[0, 1],
    ...                              draws=50, tune=50)
    >>> tr.theta.shape, tr.probs.shape, tr.group_loc.shape
    ((2, 50, 1, 4), (2, 50, 1, 3), (2, 50, 1, 3, 1))
    """
    rng = check_rng(rng)
    z, d = check_released_batch(released)
    p = d + 1
    if bool(len(factor)) == bool(len(pair)):
        raise ValueError(
            "give exactly one of factor= (a factor's columns) and pair= (two binaries)"
        )
    name = "factor" if len(factor) else "pair"
    factor = tuple(check_int(j, name, minimum=0) for j in (factor if len(factor) else pair))
    if not factor or len(set(factor)) != len(factor) or max(factor) >= d:
        raise ValueError(
            f"{name} must list distinct covariate indices in [0, {d - 1}], at least one "
            f"(got {factor})"
        )
    if name == "pair" and (len(factor) != 2 or d < 3):
        raise ValueError(
            f"pair must list two covariate indices, with another covariate beside them "
            f"(got {factor} of d = {d}; every covariate binary: sample_cell_regression)"
        )
    layout = level_layout(d, len(factor) + 1) if name == "factor" else pair_layout(d)
    levels, means = layout.levels, layout.means
    d2 = d - len(factor)
    n = check_int(n, "n", minimum=max(levels, means + d2 + 2))
    draws = check_int(draws, "draws", minimum=1)
    tune = check_int(tune, "tune", minimum=0)
    chains = check_int(chains, "chains", minimum=1)
    releases, m = z.shape
    laplace, spread = noise_spread(scale, noise_sd, releases)
    prior = check_nig(prior)
    if prior.mean.shape[-1] != p:
        raise ValueError(f"prior.mean must have {p} entries for d={d} (got {prior.mean.shape})")
    if d2:
        x_prior = check_niw(x_prior)
        if np.shape(x_prior.loc)[-1] != d2:
            raise ValueError(
                f"x_prior.loc must have {d2} entries, one per covariate outside the {name} "
                f"(got {np.shape(x_prior.loc)})"
            )

    # Internally the factor's columns come first: reorder θ's prior and the releases.
    others = [j for j in range(d) if j not in factor]
    coef = np.array([0, *(j + 1 for j in factor), *(j + 1 for j in others)])
    rows = chains * releases  # chain-major, so that the output reshapes to (chain, ...)
    nig, niw = tiled_priors(prior, x_prior if d2 else None, coef, chains, releases)
    zt = np.tile(columns_first(z, factor), (chains, 1))
    spread = np.tile(spread, chains)
    noise_var, b = noise_terms(spread, laplace, zt.shape)
    target = MixedTarget(zt, noise_var, float(n), nig, niw, laplace_scale=b, levels=layout)

    par = level_start(rng, target)
    s = draw_level_statistic(rng, par, n, layout, start=True)
    state = mixed_state(pack_levels(par), s, target)
    adapt = RandomWalkAdaptation(
        state.params, initial_sd=np.full(n_level_parameters(layout), INITIAL_SD)
    )
    keep = {
        "theta": np.empty((draws, rows, p)),
        "sigma2": np.empty((draws, rows)),
        "probs": np.empty((draws, rows, levels)),
        "group_loc": np.empty((draws, rows, means, d2)),
        "x_cov": np.empty((draws, rows, d2, d2)),
        "suffstat": np.empty((draws, rows, m)),
    }

    def record(i: int, state: MixedState) -> None:
        par, _ = unpack_levels(state.params, layout)
        for key in ("theta", "sigma2", "probs", "group_loc", "x_cov"):
            keep[key][i] = getattr(par, key)
        keep["suffstat"][i] = state.suffstat

    accepted = run_sweeps(rng, state, target, adapt, tune=tune, draws=draws, record=record,
                          symmetry_steps=symmetry_steps)  # fmt: skip
    out = {key: by_chain(value, chains, releases) for key, value in keep.items()}
    return LevelTrace(
        theta=out["theta"][..., np.argsort(coef)],
        sigma2=out["sigma2"],
        probs=out["probs"],
        group_loc=out["group_loc"],
        x_cov=out["x_cov"],
        suffstat=columns_first(out["suffstat"], factor, inverse=True),
        acceptance=accepted.reshape(chains, releases),
        kind=layout.kind,
    )
