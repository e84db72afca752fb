"""The regression sampler for a binary covariate beside normal ones, for many releases at once.

:func:`sample_mixed_regression` targets the posterior of the mixed model of x
(:mod:`~pymc_dp.regression.kernels.mixed_model`: x_b ~ Bernoulli(π), the other covariates normal
with a mean per group of x_b) with the exact law of the statistic. Per iteration, for every
release and chain of a batch:

1. exact Gibbs draws of (θ, σ²) | s (NIG) and of (π, m₀, m₁, Σ) | s
   (:func:`~pymc_dp.regression.kernels.mixed_model.draw_mixed_x`);
2. a move of s alone and :data:`JOINT_MOVES` random-walk moves of (φ, s) with s re-proposed
   (:mod:`~pymc_dp.regression.kernels.mixed_move`); the walk's covariance adapts while tuning
   (:class:`~pymc_dp.regression.kernels.adaptation.RandomWalkAdaptation`).

Laplace noise enters through its own density, not through mixing variances
(:attr:`~pymc_dp.regression.kernels.mixed_move.MixedTarget.laplace_scale`).

Unlike the normal model of x, it knows that ``Σ x_b² = Σ x_b`` is a whole number read twice by the
release, and that ``Σ x_b x_j`` is the treated group's sum: docs/regression.md, "Models of the
covariates".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from pymc_dp._validation import check_int, check_rng
from pymc_dp.curator.regression.statistics import (
    check_released_batch,
    d_from_released,
    pack_statistic,
    unpack_statistic,
)
from pymc_dp.regression.engine.batch_inputs import by_chain, noise_spread, tiled_priors
from pymc_dp.regression.kernels.adaptation import FIRST_WINDOW, RandomWalkAdaptation
from pymc_dp.regression.kernels.cell_model import CellParameters, draw_cell_probs
from pymc_dp.regression.kernels.conjugate import NIG, check_nig, draw_nig, nig_update
from pymc_dp.regression.kernels.data_model import NIW, check_niw
from pymc_dp.regression.kernels.level_model import LevelParameters, draw_level_x
from pymc_dp.regression.kernels.mixed_model import (
    MixedParameters,
    binary_first,
    covariate_order,
    draw_mixed_statistic,
    draw_mixed_x,
    tied_positions,
)
from pymc_dp.regression.kernels.mixed_move import (
    MixedState,
    MixedTarget,
    independence_move,
    joint_move,
    mixed_state,
    moved_state,
    n_mixed_parameters,
    noise_terms,
    pack_cells,
    pack_levels,
    pack_mixed,
    unpack_mixed,
)
from pymc_dp.regression.kernels.mixed_symmetry import (
    CELL_SYMMETRY_MIN_D,
    MIXED_SYMMETRY_MIN_D,
    mixed_symmetry_moves,
)
from pymc_dp.regression.kernels.moment_move import T_INFLATE
from pymc_dp.regression.kernels.psd import project_psd, schur_complement
from pymc_dp.regression.kernels.scale_move import SCALE_STEPS

__all__ = [
    "INITIAL_SD",
    "JOINT_MOVES",
    "TRIES",
    "TUNE_MOVES",
    "MixedTrace",
    "default_symmetry_steps",
    "finish_tuning",
    "mixed_sweep",
    "release_nig_start",
    "run_sweeps",
    "sample_mixed_regression",
    "start_parameters",
]

JOINT_MOVES = 2
"""Random-walk moves of (φ, s) per iteration after tuning."""
TUNE_MOVES = 12
"""Random-walk moves of (φ, s) per tuning iteration: they carry the chain to the posterior
and give the states the multiple-try move's t is fitted to. Ten releases at n = 1000, ε = 1,
d = 2 (the mixed design, 300 + 1000 iterations, 2 chains): with 6, the bulk ESS of θ's
coordinates had medians over releases 258–304 of 2000 (smallest 56–148) and R-hat exceeded
1.01 in 6 of 10; with 12, medians 391–583 (smallest 208–326) and 1 in 10, in 1.1× the time."""
TRIES = 16
"""Candidates of the multiple-try move from the t fitted to the tuning states (after tuning)."""
INITIAL_SD = 0.05
"""Proposal sd of every coordinate of u before the first tuning window closes."""
START_FLOOR = 1e-3
"""Smallest eigenvalue of the Schur complement of the statistic a chain's first (θ, σ²) are
drawn given, as a share of their mean (:func:`release_nig_start`)."""


def mixed_sweep(
    rng: np.random.Generator,
    suffstat: npt.ArrayLike,
    target: MixedTarget,
    adaptation: RandomWalkAdaptation,
    *,
    tune: bool,
    t_chol: np.ndarray | None = None,
    tune_moves: int = TUNE_MOVES,
    moves: int = JOINT_MOVES,
    tries: int = TRIES,
    symmetry_steps: tuple[float, ...] | None = None,
) -> tuple[MixedState, npt.NDArray[np.float64]]:
    """One iteration of the sampler at s = ``suffstat`` under ``target``.

    The conjugate draws of φ given s, a move of s alone, after tuning (``t_chol`` given: the
    scale of the t fitted by :func:`finish_tuning`) the multiple-try move from that t, then
    the random-walk moves of (φ, s), which adapt while ``tune`` (``tune_moves`` of them, else
    ``moves``; the multiple-try move has ``tries`` candidates), then the moves along the
    model's symmetries with steps ``symmetry_steps``
    (:func:`~pymc_dp.regression.kernels.mixed_symmetry.mixed_symmetry_moves`; default
    :func:`default_symmetry_steps`). The engine and the PyMC step both run it. Returns the
    state and the share of the random-walk moves accepted.
    """
    s = np.asarray(suffstat, dtype=np.float64)
    n = target.n
    cube = target.cells is not None and target.cells.hidden
    if cube and adaptation.moment_mean is not None:  # the counts' law of the last window
        target = target._replace(counts_law=(adaptation.moment_mean, adaptation.moment_cov))
    theta, sigma2 = draw_nig(rng, nig_update(target.prior, statistic=s, n=n))
    if target.levels is not None:
        probs, loc, cov = draw_level_x(rng, target.x_prior, s, n, target.levels)
        u = pack_levels(LevelParameters(theta, sigma2, probs, loc, cov))
    elif target.cells is None:
        prob, loc, cov = draw_mixed_x(rng, target.x_prior, s, n)
        u = pack_mixed(MixedParameters(theta, sigma2, prob, loc, cov))
    elif target.cells.hidden:  # the cube: π integrated out, drawn given s by the caller
        u = pack_cells(CellParameters(theta, sigma2, None))
    else:
        u = pack_cells(CellParameters(theta, sigma2, draw_cell_probs(rng, s, n, target.cells)))
    state, _ = moved_state(rng, u, s, target)
    if t_chol is not None and not tune:
        state, _ = independence_move(rng, state, target, adaptation.center, t_chol, tries)
    factor = adaptation.factor()
    moves = tune_moves if tune else moves
    accepted = np.zeros(s.shape[:-1])
    for _ in range(moves):
        state, ok = joint_move(rng, state, target, factor)
        if tune:
            adaptation.record_move(ok)
        accepted += ok
    if symmetry_steps is None:
        symmetry_steps = default_symmetry_steps(target)
    if symmetry_steps:
        state, _ = mixed_symmetry_moves(rng, state, target, steps=symmetry_steps)
    if tune:
        counts = state.suffstat[..., target.cells.positions] if cube else None
        adaptation.update(state.params, moments=counts)
    return state, accepted / max(moves, 1)


def default_symmetry_steps(target: MixedTarget) -> tuple[float, ...]:
    """The symmetry moves' steps of :func:`mixed_sweep` by default for ``target``.

    :data:`~pymc_dp.regression.kernels.scale_move.SCALE_STEPS` from
    :data:`~pymc_dp.regression.kernels.mixed_symmetry.MIXED_SYMMETRY_MIN_D` covariates (the
    mixed and level models) or
    :data:`~pymc_dp.regression.kernels.mixed_symmetry.CELL_SYMMETRY_MIN_D` (the cell model), none
    below.
    """
    d = d_from_released(np.shape(target.released)[-1])
    least = MIXED_SYMMETRY_MIN_D if target.cells is None else CELL_SYMMETRY_MIN_D
    return SCALE_STEPS if d >= least else ()


def finish_tuning(adaptation: RandomWalkAdaptation) -> np.ndarray | None:
    """Close the last tuning window; return the Cholesky factor of the multiple-try move's t.

    A last window shorter than the one before is pooled with it
    (:meth:`~pymc_dp.regression.kernels.adaptation.RandomWalkAdaptation.close_window`).

    ``None`` if fewer than :data:`FIRST_WINDOW` tuning states were seen.
    """
    if adaptation.iteration < FIRST_WINDOW:
        return None
    adaptation.close_window()
    return np.linalg.cholesky(T_INFLATE * adaptation.cov + 1e-12 * np.eye(adaptation.k))


def run_sweeps(
    rng: np.random.Generator,
    state: MixedState,
    target: MixedTarget,
    adaptation: RandomWalkAdaptation,
    *,
    tune: int,
    draws: int,
    record: Callable[[int, MixedState], None],
    symmetry_steps: tuple[float, ...] | None = None,
) -> npt.NDArray[np.float64]:
    """The batched engines' loop of :func:`mixed_sweep`.

    ``record(i, state)`` keeps draw i after tuning; returns the share of the random-walk moves
    accepted after tuning, per row. ``symmetry_steps`` as :func:`mixed_sweep`.
    """
    accepted = np.zeros(state.params.shape[:-1])
    t_chol = None
    for it in range(tune + draws):
        state, ok = mixed_sweep(rng, state.suffstat, target, adaptation, tune=it < tune,
                                t_chol=t_chol, symmetry_steps=symmetry_steps)  # fmt: skip
        if it == tune - 1:
            t_chol = finish_tuning(adaptation)
        if it >= tune:
            accepted += ok
            record(it - tune, state)
    return accepted / draws


def start_parameters(rng: np.random.Generator, target: MixedTarget) -> MixedParameters:
    """A chain's first φ, near the release; the chain's first s is a draw of its law there.

    π from z's two readings of k (within [0.05, 0.95]); (θ, σ²) from :func:`release_nig_start`
    with k the readings' mean rounded into [1, n − 1]; the groups' means at the prior's centre
    and Σ at the scale of its median.
    """
    d = target.prior.mean.shape[-1] - 1
    pos_k, pos_kk = tied_positions(d)
    count = 0.5 * (target.released[..., pos_k] + target.released[..., pos_kk])
    prob = np.clip(count / target.n, 0.05, 0.95)
    statistic = np.array(target.released, dtype=np.float64)
    statistic[..., [pos_k, pos_kk]] = np.clip(np.round(count), 1.0, target.n - 1.0)[..., None]
    theta, sigma2 = release_nig_start(rng, target.prior, statistic, target.n)
    niw, d2 = target.x_prior, d - 1
    loc = np.broadcast_to(niw.loc[..., None, :], (*prob.shape, 2, d2)).copy()
    dof = np.asarray(niw.dof, dtype=np.float64)
    cov = niw.scale / np.maximum(dof - d2 + 1.0, 0.5)[..., None, None]
    return MixedParameters(theta, sigma2, prob, loc, np.broadcast_to(cov, (*prob.shape, d2, d2)))


def release_nig_start(
    rng: np.random.Generator, prior: NIG, statistic: npt.NDArray, n: float
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """A chain's first (θ, σ²): a draw of their posterior given the release read as a statistic.

    ``statistic`` is z with its integer coordinates made whole; its ``B`` is made positive
    definite with the Schur complement's eigenvalues at least :data:`START_FLOOR` of their mean
    (:func:`~pymc_dp.regression.kernels.psd.project_psd`). Drawing (θ, σ²) from their prior
    instead (as Algorithm 1 does) strands chains under a vague prior: a θ far from the data
    gives an s far from z, whose Laplace mixing variances then grow until z no longer pulls s
    back (the CLI's box prior, n = 400, ε = 20, 300 tuning iterations: the cell model stuck in
    2 of 3 seeds, the mixed model's R-hat up to 1.36 in 4).
    """
    b = unpack_statistic(statistic, n)
    schur = schur_complement(b)
    floor = START_FLOOR * np.trace(schur, axis1=-2, axis2=-1) / schur.shape[-1]
    b = project_psd(b, floor=np.maximum(floor, np.finfo(np.float64).tiny))
    return draw_nig(rng, nig_update(prior, statistic=pack_statistic(b), n=n))


class MixedTrace(NamedTuple):
    """Draws after tuning, leading axes ``(chain, draw, batch)``, covariates in the user's order."""

    theta: npt.NDArray[np.float64]
    sigma2: npt.NDArray[np.float64]
    prob: npt.NDArray[np.float64]
    """π = P(x_b = 1)."""
    group_loc: npt.NDArray[np.float64]
    """``(..., 2, d − 1)``: the other covariates' means where x_b = 0 and where x_b = 1."""
    x_cov: npt.NDArray[np.float64]
    """``(..., d − 1, d − 1)``: their covariance within a group."""
    suffstat: npt.NDArray[np.float64]
    acceptance: npt.NDArray[np.float64]
    """Share of the random-walk moves accepted after tuning, ``(chain, batch)``."""

    @property
    def x_model(self) -> str:
        """Which model of x drew this trace."""
        return "mixed"


def sample_mixed_regression(
    rng: int | np.random.Generator,
    *,
    released: npt.ArrayLike,
    n: int,
    prior: NIG | tuple,
    x_prior: NIW | tuple,
    binary: int = 0,
    scale: npt.ArrayLike | None = None,
    noise_sd: npt.ArrayLike | None = None,
    draws: int,
    tune: int = 500,
    chains: int = 2,
    symmetry_steps: tuple[float, ...] | None = None,
) -> MixedTrace:
    """Sample the posterior of a batch of releases whose covariate ``binary`` is 0 or 1.

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
        NIW prior of the other covariates' group means and covariance (``d − 1`` of them, in
        the release's order without ``binary``): each group's mean is N(loc, Σ/κ).
        :func:`~pymc_dp.regression.model.default_prior.default_mixed_x_prior` builds it from
        the public box.
    binary
        Index of the binary covariate.
    scale, noise_sd
        Exactly one: the Laplace scale Δ/ε, or the sd of Gaussian noise; scalar or ``(batch,)``.
    draws, tune, chains
        Iterations kept, tuning iterations, chains per release.
    symmetry_steps
        Steps of the moves along the model's symmetries each iteration (:func:`mixed_sweep`);
        ``None``: the default for d, ``()``: none.

    Returns
    -------
    MixedTrace

    Examples
    --------
    >>> from pymc_dp.regression import release_regression
    >>> from pymc_dp.regression.model.default_prior import default_mixed_x_prior
    >>> rng = np.random.default_rng(0)
    >>> x = np.column_stack([rng.uniform(size=400) < 0.4, rng.normal(0, 0.5, 400)])
    >>> y = np.clip(0.5 * x[:, 0] - 0.3 * x[:, 1] + 0.2 * rng.normal(size=400), -2, 2)
    >>> box = [(0.0, 1.0), (-2.0, 2.0)]
    >>> rel = release_regression(np.clip(x, -2, 2), y, x_bounds=box, y_bounds=(-2, 2),
    ...                          epsilon=1.0, rng=1)
    >>> prior = NIG(np.zeros(3), np.eye(3), np.array(3.0), np.array(0.1))
    >>> tr = sample_mixed_regression(2, released=rel.value[None], n=rel.n, scale=rel.scale,
    ...                              prior=prior, x_prior=default_mixed_x_prior(box, 0),
    ...                              draws=50, tune=50)
    >>> tr.theta.shape, tr.group_loc.shape
    ((2, 50, 1, 3), (2, 50, 1, 2, 1))
    """
    rng = check_rng(rng)
    z, d = check_released_batch(released)
    p = d + 1
    n = check_int(n, "n", minimum=d + 3)
    draws = check_int(draws, "draws", minimum=1)
    tune = check_int(tune, "tune", minimum=0)
    chains = check_int(chains, "chains", minimum=1)
    binary = check_int(binary, "binary", minimum=0)
    if binary >= d:
        raise ValueError(f"binary must be a covariate index in [0, {d - 1}] (got {binary})")
    releases, m = z.shape
    laplace, spread = noise_spread(scale, noise_sd, releases)
    prior = check_nig(prior)
    if prior.mean.shape[-1] != p:
        raise ValueError(f"prior.mean must have {p} entries for d={d} (got {prior.mean.shape})")
    if d > 1:
        x_prior = check_niw(x_prior)
    if np.shape(x_prior.loc)[-1] != d - 1:
        raise ValueError(
            f"x_prior.loc must have d - 1 = {d - 1} entries, one per normal covariate "
            f"(got {np.shape(x_prior.loc)})"
        )

    # Internally the binary covariate comes first: reorder θ's prior and the releases.
    coef = covariate_order(d, binary)[:p]
    rows = chains * releases  # chain-major, so that the output reshapes to (chain, ...)
    nig, niw = tiled_priors(prior, x_prior, coef, chains, releases)
    zt = np.tile(binary_first(z, binary), (chains, 1))
    spread = np.tile(spread, chains)
    noise_var, b = noise_terms(spread, laplace, zt.shape)
    target = MixedTarget(zt, noise_var, float(n), nig, niw, laplace_scale=b)

    par = start_parameters(rng, target)
    s = draw_mixed_statistic(rng, par, n)
    state = mixed_state(pack_mixed(par), s, target)
    adapt = RandomWalkAdaptation(
        state.params, initial_sd=np.full(n_mixed_parameters(d), INITIAL_SD)
    )

    d2 = d - 1
    keep = {
        "theta": np.empty((draws, rows, p)),
        "sigma2": np.empty((draws, rows)),
        "prob": np.empty((draws, rows)),
        "group_loc": np.empty((draws, rows, 2, d2)),
        "x_cov": np.empty((draws, rows, d2, d2)),
        "suffstat": np.empty((draws, rows, m)),
    }

    def record(i: int, state: MixedState) -> None:
        par, _ = unpack_mixed(state.params, d)
        keep["theta"][i], keep["sigma2"][i], keep["prob"][i] = par.theta, par.sigma2, par.prob
        keep["group_loc"][i], keep["x_cov"][i] = par.group_loc, par.x_cov
        keep["suffstat"][i] = state.suffstat

    accepted = run_sweeps(rng, state, target, adapt, tune=tune, draws=draws, record=record,
                          symmetry_steps=symmetry_steps)  # fmt: skip

    def chain_major(a: np.ndarray) -> np.ndarray:
        return by_chain(a, chains, releases)

    back = np.argsort(coef)
    return MixedTrace(
        theta=chain_major(keep["theta"])[..., back],
        sigma2=chain_major(keep["sigma2"]),
        prob=chain_major(keep["prob"]),
        group_loc=chain_major(keep["group_loc"]),
        x_cov=chain_major(keep["x_cov"]),
        suffstat=binary_first(chain_major(keep["suffstat"]), binary, inverse=True),
        acceptance=accepted.reshape(chains, releases),
    )
