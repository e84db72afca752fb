"""The default regression sampler for many releases at once (studies, calibration trials).

:func:`sample_regression` runs, per iteration and for every release and chain of a batch:

1. exact Gibbs draws of (θ, σ²) | s (NIG) and (μ_x, Σ_x) | s (NIW), valid under the exact model
   because s is sufficient for both;
2. :func:`collapsed_sweep`: two moves of s alone (proposals from its exact law and from the CLT
   normal times the noise); for one node, the multiple-try moment move of (θ, σ², μ_x, Σ_x, s)
   jointly (:func:`~pymc_dp.regression.kernels.moment_move.moment_move`, which makes the moves of s
   in the same batched pass); then ``moves`` collapsed random-walk moves
   (:func:`~pymc_dp.regression.kernels.collapsed.collapsed_move`), tuned during ``tune``
   (:class:`~pymc_dp.regression.kernels.adaptation.RandomWalkAdaptation`); from d = 2 on, the
   moves along the model's symmetries (:mod:`~pymc_dp.regression.kernels.scale_move`);
3. for Laplace noise, the mixing variances w | s, z (:func:`pymc_dp.kernels.draw_noise_variance`).

Given w, the moves of step 2 target φ, s | z, w, and their proposal uses w; but w is drawn from
the current s, so consecutive iterations are tied through w however well the moves mix given
it. For Laplace noise and one node, half the sweeps (:data:`MARGINAL_SHARE`) after the first
tuning window therefore make the moment move with w integrated out instead (target φ, s | z;
candidates from a normal in η fitted to the tuning states, which does not depend on w). Under
``pm.sample`` at n = 500, ε = 1, d = 2 (chain seeds 1–6) the smallest ESS of θ and σ² went from
1302–1647 of 4000 draws to 1687–2302 with 32 candidates, and to 2214–2608 with 64, which now
pay for themselves (``RegressionCollapsedStep``'s default). With three sweeps in four marginal
the mean was higher but one seed fell to 913, and with all of them to 675: the fitted normal
can miss part of a posterior, and the move given w, whose proposal follows w, keeps such chains
moving.

Every step leaves the same distribution invariant, the posterior of the normal model of x with the
exact law of s (:mod:`pymc_dp.regression.kernels.normal_model`); no CLT approximation is made. The
PyMC step method (:class:`~pymc_dp.regression.model.collapsed_step.RegressionCollapsedStep`) runs
the same sweep for one release.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy import stats

from pymc_dp._validation import check_int, check_rng
from pymc_dp.curator.regression.statistics import (
    check_released_batch,
    pack_statistic,
    unpack_statistic,
)
from pymc_dp.kernels import draw_noise_variance
from pymc_dp.regression.engine.batch_inputs import by_chain, chain_rows, noise_spread
from pymc_dp.regression.kernels.adaptation import RandomWalkAdaptation
from pymc_dp.regression.kernels.collapsed import (
    CollapsedTarget,
    MoveState,
    collapsed_move,
    collapsed_target,
    evaluate,
    n_parameters,
    pack_parameters,
    redraw_statistic,
    refresh_statistic,
    statistic_correction,
    unpack_parameters,
)
from pymc_dp.regression.kernels.conjugate import NIG, check_nig, draw_nig, nig_update
from pymc_dp.regression.kernels.data_model import NIW, check_niw, draw_niw, niw_update
from pymc_dp.regression.kernels.moment_move import (
    MomentPrior,
    fitted_proposal,
    moment_move,
    moment_prior,
    moment_proposal,
)
from pymc_dp.regression.kernels.normal_model import record_mean
from pymc_dp.regression.kernels.psd import project_psd
from pymc_dp.regression.kernels.scale_move import SCALE_STEPS, scale_moves
from pymc_dp.regression.kernels.shape_law import (
    XShape,
    check_shape_moments,
    hold,
    informative,
    raw_moments,
    shape_move,
    shape_term,
    standardised,
)
from pymc_dp.regression.kernels.x_models import ShapePrior

__all__ = [
    "CollapsedTrace",
    "SweepStats",
    "collapsed_sweep",
    "default_moves",
    "initial_step_sd",
    "sample_regression",
    "shape_gibbs",
    "start_statistic",
]


class CollapsedTrace(NamedTuple):
    """Draws after tuning, leading axes ``(chain, draw, batch)`` as in ArviZ."""

    theta: npt.NDArray[np.float64]
    """``(chain, draw, batch, p)``, intercept first."""
    sigma2: npt.NDArray[np.float64]
    """``(chain, draw, batch)``."""
    x_loc: npt.NDArray[np.float64]
    """μ_x, ``(chain, draw, batch, d)``."""
    x_cov: npt.NDArray[np.float64]
    """Σ_x, ``(chain, draw, batch, d, d)``."""
    suffstat: npt.NDArray[np.float64]
    """Latent statistic s, ``(chain, draw, batch, m)``."""
    noise_variance: npt.NDArray[np.float64] | None
    """Laplace mixing variances ``(chain, draw, batch, m)``; ``None`` for Gaussian noise."""
    acceptance: npt.NDArray[np.float64]
    """Acceptance rate of the random-walk moves after tuning, ``(chain, batch)``; NaN where
    there were none (the default beside the moment move)."""
    x_skew: npt.NDArray[np.float64] | None = None
    """γ of the shape family, ``(chain, draw, batch)``, with released moments; else ``None``."""
    x_kurt: npt.NDArray[np.float64] | None = None
    """κ of the shape family, ``(chain, draw, batch)``, with released moments; else ``None``."""

    @property
    def x_model(self) -> str:
        """``"shape"`` (released moments used) or ``"normal"``."""
        return "normal" if self.x_skew is None else "shape"


def initial_step_sd(prior: NIG, x_prior: NIW) -> npt.NDArray[np.float64]:
    """Random-walk standard deviations before adaptation: a tenth of the prior's spread.

    θ's from the NIG prior's mean σ² (its median where the mean does not exist, a ≤ 1),
    μ_x's from the NIW prior's mean Σ_x / κ (its median where
    the mean does not exist, ν ≤ d + 1, as in the default prior), and 0.1 for
    log σ² and the log-Cholesky entries of Σ_x. ``x_prior`` has the node axis J last in its
    batch shape. Returns shape ``(..., k)``, in the order of
    :func:`~pymc_dp.regression.kernels.collapsed.pack_parameters`.

    Examples
    --------
    >>> nig = NIG(np.zeros(2), np.eye(2), np.array(3.0), np.array(2.0))
    >>> niw = NIW(np.zeros((1, 1)), np.ones(1), np.full(1, 4.0), 2.0 * np.eye(1)[None])
    >>> initial_step_sd(nig, niw).tolist()
    [0.1, 0.1, 0.1, 0.1, 0.1]
    """
    a = np.asarray(prior.shape, dtype=np.float64)
    # σ² ~ scale / Gamma(a): its mean where it exists (a > 1), else its median.
    mean_sigma2 = np.where(
        a > 1, prior.scale / np.maximum(a - 1, 1e-300), prior.scale / stats.gamma.median(a)
    )
    theta_var = np.asarray(mean_sigma2)[..., None] * np.diagonal(
        np.linalg.inv(prior.precision), 0, -2, -1
    )
    d = x_prior.loc.shape[-1]
    dof = np.asarray(x_prior.dof, dtype=np.float64)
    # Σ_jj ~ Ψ_jj / χ²_{ν−d+1}: its mean Ψ_jj / (ν − d − 1) where it exists, else its median.
    median = stats.chi2.median(np.maximum(dof - d + 1, 1e-12))
    denom = np.where(dof > d + 1, dof - d - 1, median)
    loc_var = np.diagonal(x_prior.scale, 0, -2, -1) / (denom * x_prior.kappa)[..., None]
    chol_sd = np.full((*loc_var.shape[:-1], d * (d + 1) // 2), 0.1)
    node = np.concatenate([0.1 * np.sqrt(loc_var), chol_sd], axis=-1)
    node = node.reshape(*node.shape[:-2], -1)
    batch = np.broadcast_shapes(theta_var.shape[:-1], node.shape[:-1])
    return np.concatenate(
        [
            np.broadcast_to(0.1 * np.sqrt(theta_var), (*batch, theta_var.shape[-1])),
            np.full((*batch, 1), 0.1),
            np.broadcast_to(node, (*batch, node.shape[-1])),
        ],
        axis=-1,
    )


def start_statistic(
    rng: np.random.Generator, u: npt.ArrayLike, target: CollapsedTarget, *, tries: int = 8
) -> MoveState:
    """A chain state at ``u`` with a valid s: a draw of the moves' own proposal for s.

    Starting at a proposal draw, rather than at the CLT mean, keeps the first ratios of the
    moves in their usual range. Members with no valid draw in ``tries`` keep the CLT mean
    made valid (:func:`~pymc_dp.regression.kernels.psd.project_psd`).
    """
    u = np.asarray(u, dtype=np.float64)
    ev = evaluate(u, target)
    n = target.n  # (J,), against the statistics' (..., J)
    fallback = pack_statistic(project_psd(unpack_statistic(ev.clt_mean, n), floor=1e-6 * n))
    state = MoveState(u, fallback, ev.surrogate, np.full(u.shape[:-1], -np.inf))
    for _ in range(tries):
        state, _ = refresh_statistic(rng, state, target=target)
        if np.all(np.isfinite(state.correction)):
            break
    return state._replace(correction=statistic_correction(state.suffstat, ev, target))


MARGINAL_SHARE = 0.5
"""Probability that a sweep makes the moment move with w integrated out (module docstring)."""
MARGINAL_W = 4.0
"""Noise variance w̃ of the s-proposal of the moves with w integrated out, in units of b²:
twice the Laplace noise's variance, so that the proposal's tails are not lighter than the
noise's where it matters (batched engine, ten releases at n = 500, ε = 1, d = 2, 32
candidates, every sweep marginal: mean ESS 1173 with 4, 1219 with 2, but smallest 806 against
590)."""


SYMMETRY_MIN_D = 2
"""Smallest d whose sweeps make the moves along the symmetries by default. At d = 2 without
them the chains did not mix on weak releases: over 200 releases per cell (n = 100 and 1000,
ε = 0.1 and 1; covariates normal, clipped exponential, binary, or a binary indicator beside a
normal one) the largest R-hat of (θ, σ²) was above 1.05 in 10–100 % of the releases (the
median release's up to 1.51) and θ under-covered at n = 1000, ε = 0.1 (down to 0.755); with
them in 0–13.5 % (at most 0.5 % in 14 of the 16 cells), every coverage at or above the
band's lower edge, at 1.0–1.8× the CPU time of the batched engine and 1.2–1.8× the time of
``pm.sample`` on the README's release (2.5× before the moves ran on natural coordinates;
docs/regression.md, "The symmetry moves from d = 2").
At d = 1 the moment move mixes alone (above 1.05 in 0–4 % of the releases of the same study;
the moves cost 2.8× the CPU time for the same ESS on ``benchmarks/regression_x_prior_trap.py``)."""


class SweepStats(NamedTuple):
    """What one :func:`collapsed_sweep` did, per batch member."""

    moved: npt.NDArray[np.float64]
    """Fraction of the random-walk moves accepted; NaN if there were none."""
    moment: npt.NDArray[np.bool_]
    """Whether the moment move was accepted."""


def default_moves(d: int, nodes: int, *, tune: bool) -> int:
    """Random-walk moves per iteration by default.

    One node has the multiple-try moment move, whose candidates (from the normal proposal in η
    and the t in u with the tuned posterior covariance) carry the mixing: one random-walk move
    while tuning, whose states the adaptation learns the t's centre and covariance from, and
    none after (at n = 500, ε = 1, d = 2 it added no effective draws for a sixth of the cost).
    Several nodes have no moment move: then one move per coordinate of the unconstrained
    vector, θ (d + 1), log σ², and per node μ_x (d) and the log-Cholesky factor of Σ_x
    (d(d+1)/2), since an adaptive random walk moves each direction about once per that many
    steps.

    Examples
    --------
    >>> default_moves(2, 1, tune=True), default_moves(2, 1, tune=False)
    (1, 0)
    >>> default_moves(2, 2, tune=False)
    14
    """
    if nodes == 1:
        return int(tune)
    return d + 2 + nodes * (d + d * (d + 1) // 2)


def collapsed_sweep(
    rng: np.random.Generator,
    u: npt.ArrayLike,
    suffstat: npt.ArrayLike,
    *,
    target: CollapsedTarget,
    adaptation: RandomWalkAdaptation,
    fit: MomentPrior | None,
    moves: int,
    tries: int,
    tune: bool,
    laplace_scale: npt.ArrayLike | None = None,
    scale_steps: tuple[float, ...] | None = None,
) -> tuple[MoveState, SweepStats]:
    """The collapsed moves of one iteration at (φ, s) = (``u``, ``suffstat``) under ``target``.

    s alone (its exact law, then the CLT proposal, as proposals); for a single node the
    multiple-try moment move (:func:`~pymc_dp.regression.kernels.moment_move.moment_move`, anchored
    at the adaptation's centre, which makes the two moves of s in the same batched pass); then
    ``moves`` random-walk moves of (φ, s); then, under the normal model of x, per entry of
    ``scale_steps`` the moves along the model's symmetries (a linear map and a translation of
    the covariates, a shift and a rescaling of y, a rescaling of the residuals:
    :func:`~pymc_dp.regression.kernels.scale_move.scale_moves`, with w integrated out when
    ``laplace_scale`` is given; ``()`` switches them off, ``None`` is :data:`SCALE_STEPS` from
    d = :data:`SYMMETRY_MIN_D` on and ``()`` below). While ``tune``, the walk adapts. The engine
    and the PyMC step both run it.

    With ``laplace_scale`` (Laplace noise, one node), once a tuning window has closed, a share
    :data:`MARGINAL_SHARE` of the sweeps (chosen at random, the same for the whole batch) are
    instead the moment move
    with the mixing variances w integrated out, candidates from
    :func:`~pymc_dp.regression.kernels.moment_move.fitted_proposal`, and no random-walk moves. Such
    a sweep leaves w stale: the caller must redraw w | s, z before w is next used. While tuning,
    the adaptation then also tracks η, which that proposal is fitted to.

    The returned state's φ and s are the chain's; its surrogate and correction are stale where
    the symmetry moves moved (the engine and the PyMC step start the next sweep from φ and s
    alone).
    """
    u = np.asarray(u, dtype=np.float64)
    s = np.asarray(suffstat, dtype=np.float64)
    marginal = (
        laplace_scale is not None
        and fit is not None
        and adaptation.moment_cov is not None
        and rng.uniform() < MARGINAL_SHARE
    )
    if marginal:
        b = np.asarray(laplace_scale, dtype=np.float64)
        proposal = fitted_proposal(
            adaptation.moment_mean, adaptation.moment_cov, adaptation.center, adaptation.cov
        )
        tilde = target._replace(noise_variance=np.broadcast_to(MARGINAL_W * b**2, s.shape))
        state, moment = moment_move(rng, u, s, proposal=proposal, target=tilde, tries=tries,
                                    laplace_scale=b)  # fmt: skip
        moves = 0
    elif fit is None:
        ev = evaluate(u, target)
        state = MoveState(u, s, ev.surrogate, statistic_correction(s, ev, target))
        state, _ = redraw_statistic(rng, state, target=target, evaluation=ev)
        state, _ = refresh_statistic(rng, state, target=target, evaluation=ev)
        moment = np.zeros(u.shape[:-1], dtype=bool)
    else:
        proposal = moment_proposal(adaptation.center, target, fit, adaptation.cov)
        state, moment = moment_move(rng, u, s, proposal=proposal, target=target, tries=tries)
    factor = adaptation.factor()
    moved = np.zeros(u.shape[:-1])
    for _ in range(moves):
        before = state.params
        state, passed = collapsed_move(rng, state, step=factor, target=target)
        if tune:
            adaptation.record_move(passed)
        moved += np.any(state.params != before, axis=-1)
    if scale_steps is None:
        scale_steps = SCALE_STEPS if target.x_prior.loc.shape[-1] >= SYMMETRY_MIN_D else ()
    if target.x_shape is None and scale_steps:
        # Along the ridges where s and φ hold each other (docs/regression.md, "Moves along the
        # symmetries"). With b, w integrated out: the caller redraws w anyway.
        state, _ = scale_moves(rng, state, target=target, steps=scale_steps,
                               laplace_scale=laplace_scale, refresh=False)  # fmt: skip
    if tune:
        eta = None
        if laplace_scale is not None and fit is not None:
            par = unpack_parameters(state.params, target.x_prior.loc.shape[-1])
            eta = record_mean(par.theta, par.sigma2, par.x_loc[..., 0, :],
                              par.x_cov[..., 0, :, :])  # fmt: skip
        adaptation.update(state.params, eta)
    return state, SweepStats(moved / moves if moves else np.full_like(moved, np.nan), moment)


STANDARD_SHARE = 0.5
"""Share of iterations whose moves of (μ_x, Σ_x) hold (γ, κ) rather than E x³, E x⁴, where
the released sums are informative (elsewhere all of them: holding the raw moments there cut
the intercept's ESS, n = 100, ε = 0.1, x uniform, 20 releases × 2000 draws: median 270 holding
(γ, κ) always, 68 half the time, 7 never; the normal model's 613)."""


def shape_gibbs(
    rng: np.random.Generator,
    shape: XShape,
    suffstat: npt.ArrayLike,
    n: npt.ArrayLike,
    proposed: tuple[np.ndarray, np.ndarray],
    current: tuple[np.ndarray, np.ndarray],
) -> tuple[np.ndarray, np.ndarray, XShape]:
    """(μ_x, Σ_x) and (γ, κ) given s under the shape family (d = 1, nodes on axis −1 of γ).

    First the shape is made to hold, for this iteration, (γ, κ) or the raw moments E x³, E x⁴
    (:func:`~pymc_dp.regression.kernels.shape_law.hold`; the collapsed sweep that follows
    holds the same): (γ, κ) always where the released sums are lost in their noise
    (:func:`~pymc_dp.regression.kernels.shape_law.informative`), else with probability
    :data:`STANDARD_SHARE`. ``proposed`` is a draw of the NIW posterior given s, the exact
    conditional under the normal model of x: as an independence proposal, holding what the
    shape holds, it is accepted with the ratio of
    :func:`~pymc_dp.regression.kernels.shape_law.shape_term` (the shape family's law of (x̄, S)
    over the normal one, the released moments' likelihood and, holding the raw moments, their
    prior given (μ, σ²)). Then :func:`~pymc_dp.regression.kernels.shape_law.shape_move`.
    Returns μ_x ``(..., J, 1)``,
    Σ_x ``(..., J, 1, 1)`` and the new shape.
    """
    (loc, cov), (loc0, cov0) = proposed, current
    share = np.where(informative(shape), STANDARD_SHARE, 1.0)
    standard = rng.uniform(size=share.shape) < share
    shape = hold(shape, standard, loc0[..., 0], cov0[..., 0, 0])
    s = np.asarray(suffstat, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    b_mat = unpack_statistic(s, n)
    xbar = b_mat[..., 0, 1] / n
    scatter = b_mat[..., 1, 1] - n * xbar**2
    new = shape_term(xbar, scatter, loc[..., 0], cov[..., 0, 0], n, shape)
    old = shape_term(xbar, scatter, loc0[..., 0], cov0[..., 0, 0], n, shape)
    with np.errstate(invalid="ignore"):
        ok = np.log(rng.uniform(size=new.shape)) < new - old
    ok &= np.isfinite(new)
    loc = np.where(ok[..., None], loc, loc0)
    cov = np.where(ok[..., None, None], cov, cov0)
    shape, _ = shape_move(rng, shape, mean=xbar, scatter=scatter, loc=loc[..., 0],
                          var=cov[..., 0, 0], n=n)  # fmt: skip
    return loc, cov, shape


def sample_regression(
    rng: int | np.random.Generator,
    *,
    released: npt.ArrayLike,
    n: int,
    prior: NIG | tuple,
    x_prior: NIW | tuple,
    scale: npt.ArrayLike | None = None,
    noise_sd: npt.ArrayLike | None = None,
    draws: int,
    tune: int = 500,
    chains: int = 2,
    moves: int | None = None,
    moment_moves: bool = True,
    tries: int = 16,
    moments: npt.ArrayLike | None = None,
    moment_powers: npt.ArrayLike | None = None,
    moment_scale: npt.ArrayLike | None = None,
    shape_prior: ShapePrior | None = None,
    scale_steps: tuple[float, ...] | None = None,
) -> CollapsedTrace:
    """Sample the posterior of a batch of regression releases with the default sampler.

    Parameters
    ----------
    rng
        Seed or generator.
    released
        Released z, shape ``(batch, m)``, all with the same n and d.
    n
        Number of records of every release.
    prior
        NIG prior of (θ, σ²), broadcastable to the batch.
    x_prior
        NIW prior of the covariates' normal model, broadcastable to the batch.
    scale, noise_sd
        Exactly one: the Laplace scale Δ/ε, or the standard deviation of Gaussian noise;
        scalar or ``(batch,)``.
    draws, tune
        Iterations kept, and tuning iterations discarded (the random walk adapts during them).
    chains
        Chains per release, each from its own prior draw.
    moves
        Random-walk moves per iteration; by default :func:`default_moves` (beside the moment
        move: one while tuning, none after), or one per unconstrained parameter without
        ``moment_moves``. Iterations whose moment move integrates the Laplace mixing variances
        out (:func:`collapsed_sweep`) make none.
    moment_moves
        Whether each iteration makes the multiple-try moment move (for Laplace noise, half
        the iterations after the first tuning window with the mixing variances integrated out).
    tries
        Its candidates per iteration. Fewer than the PyMC step's 64: in a batch of many
        releases each candidate costs arithmetic in proportion (50 releases at n = 500,
        ε = 1, d = 2: 32 took 2.2× the time of 16 for 1.2× the ESS).
    moments, moment_powers, moment_scale
        Released noisy sums of x³ and x⁴ ``(batch, K)``, their exponents ``(K, 1)`` and Laplace
        scale (scalar or ``(batch,)``), d = 1 (a release's ``fourth_moments``). With them x
        follows the shape family (skewness γ, kurtosis κ, prior ``shape_prior``) and the sums
        are observed with their noise (:mod:`~pymc_dp.regression.kernels.shape_law`); the
        trace then has ``x_skew`` and ``x_kurt``. Without them: the normal model of x.
    shape_prior
        Prior of (γ, κ); default :class:`~pymc_dp.regression.kernels.x_models.ShapePrior`.
    scale_steps
        Steps of the moves along the model's symmetries, as in :func:`collapsed_sweep`:
        ``None`` (default) makes them from d = :data:`SYMMETRY_MIN_D` on, ``()`` switches them
        off (to measure what they do, e.g. ``benchmarks/regression_x_models.py``).

    Returns
    -------
    CollapsedTrace

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_dp.regression import release_regression
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(-1, 1, size=(300, 1)); y = 0.5 * x[:, 0] + 0.2 * rng.normal(size=300)
    >>> rel = release_regression(x, np.clip(y, -2, 2), x_bounds=[(-1, 1)], y_bounds=(-2, 2),
    ...                          epsilon=1.0, rng=1)
    >>> prior = NIG(np.zeros(2), np.eye(2), np.array(3.0), np.array(0.1))
    >>> x_prior = NIW(np.zeros(1), np.array(1.0), np.array(4.0), np.array([[0.5]]))
    >>> tr = sample_regression(2, released=rel.value[None], n=rel.n, scale=rel.scale,
    ...                        prior=prior, x_prior=x_prior, draws=100, tune=100)
    >>> tr.theta.shape, tr.x_cov.shape
    ((2, 100, 1, 2), (2, 100, 1, 1, 1))
    """
    rng = check_rng(rng)
    z, d = check_released_batch(released)
    p = d + 1
    n = check_int(n, "n", minimum=d + 2)
    draws = check_int(draws, "draws", minimum=1)
    tune = check_int(tune, "tune", minimum=0)
    chains = check_int(chains, "chains", minimum=1)
    if moves is not None:
        moves = check_int(moves, "moves", minimum=0)
    elif not moment_moves:
        moves = n_parameters(d)
    if scale_steps is not None:
        scale_steps = tuple(float(t) for t in scale_steps)
        if not all(np.isfinite(t) and t > 0 for t in scale_steps):
            raise ValueError(
                f"scale_steps must be finite and > 0, or () for none (got {scale_steps})"
            )
    releases, m = z.shape
    laplace, spread = noise_spread(scale, noise_sd, releases)
    prior = check_nig(prior)
    x_prior = check_niw(x_prior)
    if prior.mean.shape[-1] != p:
        raise ValueError(f"prior.mean must have {p} entries for d={d} (got {prior.mean.shape})")
    if x_prior.loc.shape[-1] != d:
        raise ValueError(f"x_prior.loc must have {d} entries (got {x_prior.loc.shape})")

    rows = chains * releases  # chain-major, so that the output reshapes to (chain, ...)
    shape = None
    if moments is not None:
        if d != 1:
            raise ValueError(
                f"released moments enter the default for d = 1 only (got d={d}); omit moments= "
                "for the normal model of x"
            )
        if not laplace:
            raise ValueError("released moments need Laplace noise (scale=), not noise_sd=")
        values, degrees, m_scale = check_shape_moments(
            moments, moment_powers, moment_scale, releases
        )
        shape_prior = ShapePrior() if shape_prior is None else shape_prior
        skew, kurt = shape_prior.draw(rng, (rows, 1))
        # The raw moments at the chain's first (μ_x, Σ_x), drawn below from their prior.
        shape = XShape(skew, kurt, np.tile(values, (chains, 1))[:, None], degrees,
                       np.tile(m_scale, chains)[:, None], shape_prior)  # fmt: skip

    def tile(a: npt.ArrayLike, core: int) -> np.ndarray:
        return chain_rows(a, chains, releases=releases, core=core)

    prior = NIG(tile(prior.mean, 1), tile(prior.precision, 2), tile(prior.shape, 0),
                tile(prior.scale, 0))  # fmt: skip
    # One node per release: the node axis J = 1 sits before the core axes.
    x_prior = NIW(tile(x_prior.loc, 1)[:, None], tile(x_prior.kappa, 0)[:, None],
                  tile(x_prior.dof, 0)[:, None], tile(x_prior.scale, 2)[:, None])  # fmt: skip
    zt = np.tile(z, (chains, 1))[:, None]
    spread = np.tile(spread, chains)
    noise_var = np.broadcast_to(2.0 * spread[:, None, None] ** 2 if laplace else
                                spread[:, None, None] ** 2, zt.shape).copy()  # fmt: skip
    sizes = np.array([float(n)])

    theta, sigma2 = draw_nig(rng, prior)
    x_loc, x_cov = draw_niw(rng, x_prior)
    if shape is not None:
        third, fourth = raw_moments(x_loc[..., 0], x_cov[..., 0, 0], shape.third, shape.fourth)
        shape = shape._replace(third=third, fourth=fourth)
    target = collapsed_target(zt, noise_var, sizes, prior, x_prior)._replace(x_shape=shape)
    state = start_statistic(rng, pack_parameters(theta, sigma2, x_loc, x_cov), target)

    def mixing_variances(s: np.ndarray) -> np.ndarray:
        """Draw the mixing variances given s (after every sweep: some leave w stale)."""
        return draw_noise_variance(rng, residual=zt - s, scale=spread[:, None, None])

    if laplace:
        noise_var = mixing_variances(state.suffstat)
    adapt = RandomWalkAdaptation(state.params, initial_sd=initial_step_sd(prior, x_prior))

    keep = {
        "theta": np.empty((draws, rows, p)),
        "sigma2": np.empty((draws, rows)),
        "x_loc": np.empty((draws, rows, d)),
        "x_cov": np.empty((draws, rows, d, d)),
        "suffstat": np.empty((draws, rows, m)),
    }
    if laplace:
        keep["noise_variance"] = np.empty((draws, rows, m))
    if shape is not None:
        keep["x_skew"], keep["x_kurt"] = np.empty((draws, rows)), np.empty((draws, rows))
    accepted = np.zeros(rows)
    fit = moment_prior(rng, prior, NIW(*(a[:, 0] for a in x_prior))) if moment_moves else None
    b = spread[:, None, None] if laplace and moment_moves else None
    for it in range(tune + draws):
        # The conjugate draws given s (exact Gibbs steps of the same model), the collapsed
        # moves (some with w integrated out), then the mixing variances given the new s.
        s = state.suffstat
        if laplace:
            target = target._replace(noise_variance=noise_var)
        theta, sigma2 = draw_nig(rng, nig_update(prior, statistic=s[:, 0], n=n))
        x_loc, x_cov = draw_niw(rng, niw_update(x_prior, statistic=s, n=sizes))
        if shape is not None:
            now = unpack_parameters(state.params, d)
            x_loc, x_cov, shape = shape_gibbs(rng, shape, s, sizes, (x_loc, x_cov),
                                              (now.x_loc, now.x_cov))  # fmt: skip
            target = target._replace(x_shape=shape)
        state, sweep = collapsed_sweep(
            rng, pack_parameters(theta, sigma2, x_loc, x_cov), s, target=target,
            adaptation=adapt, fit=fit, tune=it < tune, tries=tries, laplace_scale=b,
            moves=default_moves(d, 1, tune=it < tune) if moves is None else moves,
            scale_steps=scale_steps,
        )  # fmt: skip
        if laplace:
            noise_var = mixing_variances(state.suffstat)
        if it >= tune:
            accepted += sweep.moved
            i = it - tune
            par = unpack_parameters(state.params, d)
            keep["theta"][i], keep["sigma2"][i] = par.theta, par.sigma2
            keep["x_loc"][i], keep["x_cov"][i] = par.x_loc[:, 0], par.x_cov[:, 0]
            keep["suffstat"][i] = state.suffstat[:, 0]
            if laplace:
                keep["noise_variance"][i] = noise_var[:, 0]
            if shape is not None:  # (γ, κ) of the held raw moments at the new (μ_x, Σ_x)
                g, k = standardised(shape, par.x_loc[..., 0], par.x_cov[..., 0, 0])
                keep["x_skew"][i], keep["x_kurt"][i] = g[:, 0], k[:, 0]

    out_arrays = {key: by_chain(a, chains, releases) for key, a in keep.items()}
    return CollapsedTrace(
        theta=out_arrays["theta"],
        sigma2=out_arrays["sigma2"],
        x_loc=out_arrays["x_loc"],
        x_cov=out_arrays["x_cov"],
        suffstat=out_arrays["suffstat"],
        noise_variance=out_arrays.get("noise_variance"),
        acceptance=(accepted / draws).reshape(chains, releases),
        x_skew=out_arrays.get("x_skew"),
        x_kurt=out_arrays.get("x_kurt"),
    )
