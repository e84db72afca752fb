"""Near-independent draws of a small θ: Metropolis–Hastings with a fixed, fitted proposal.

With s integrated out of the model (the exact likelihood of Categorical counts, or the collapsed
likelihood of a windowed (Σz, Σz²)), θ's full conditional has a few dimensions and does not
change while nothing else in the model moves: a Dirichlet θ, or the block (μ, σ²) of a windowed
Normal. A proposal fitted once to it (in θ's unconstrained space: the mode and the curvature
there, then importance-sampled moments of a multivariate t with heavier tails than the target)
makes Metropolis–Hastings an *independence* sampler: the chain stays exact, and where the fit is
good almost every proposal is accepted, so successive draws are close to independent at the
cost of one log-density per draw and no gradients. In two dimensions a conditional that the t
fits badly (curved, skewed, a funnel or a ridge) is tabulated on an adaptive grid instead
(:mod:`pymc_dp.kernels.plane_grid`). Proposals do not depend on the chain, so while the
conditional is fixed they and their log-densities are computed in blocks.
"""

from __future__ import annotations

import itertools
from typing import Any, ClassVar

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.pytensorf import compile as pm_compile
from pytensor.graph.replace import clone_replace, vectorize_graph
from scipy import optimize, stats

from pymc_dp.kernels.plane_grid import (
    PlaneGrid,
    draw_plane_grid,
    fit_plane_grid,
    plane_grid_logpdf,
)
from pymc_dp.node_info import INDEPENDENCE_TAG
from pymc_dp.step_methods._base import DPGibbsStep
from pymc_dp.step_methods._model_access import QUICK_MODE, conditional_logp

__all__ = ["IndependenceStep"]

_BLOCK = 256
_DF = 5.0  # the proposal's degrees of freedom: tails heavier than any posterior here
# The fit: the Laplace approximation widened 3x, then up to 4 rounds of 256 importance draws
# from a t with 3 degrees of freedom, matching the conditional's mean and covariance.
_WIDEN = 3.0
_ROUNDS = 4
_PILOT = 256
_PILOT_DF = 3.0
_TAILS = 0.05  # the t's share of a two-dimensional proposal, for what lies beyond the grid
_GOOD_FIT = 0.9  # importance efficiency of the t above which no grid is tabulated


class _Conditional:
    """The full conditional of one variable or a block, with its fitted proposal.

    The block's values are concatenated into one vector on their unconstrained scale.
    """

    def __init__(self, model: pm.Model, rvs: list, compile_kwargs: dict):
        values, total, others = conditional_logp(model, rvs)
        self.names = [v.name for v in values]
        self.input_names = [v.name for v in others]
        point = model.initial_point()
        self.shapes = [tuple(point[name].shape) for name in self.names]
        self.sizes = [int(np.prod(shape, dtype=int)) for shape in self.shapes]
        tag = "_".join(self.names)
        flat = pt.vector(f"{tag}_flat", dtype="float64")
        ends = np.cumsum([0, *self.sizes])
        pieces = [flat[a:b] for a, b in itertools.pairwise(ends)]
        single = clone_replace(
            total,
            replace={v: p.reshape(shape) for v, p, shape in zip(values, pieces, self.shapes)},
        )
        block = pt.matrix(f"{tag}_block", dtype="float64")
        batched = vectorize_graph(single, replace={flat: block})
        kwargs = {"mode": QUICK_MODE, **compile_kwargs}
        self._logp_grad = pm_compile(
            [flat, *others], [single, pt.grad(single, flat)], on_unused_input="ignore", **kwargs
        )
        self._block = pm_compile([block, *others], batched, on_unused_input="ignore", **kwargs)
        self._key: tuple | None = None
        self._start: np.ndarray | None = None
        self.proposal: Any = None
        self._buffer: list[tuple[np.ndarray, float]] = []
        self._current: tuple[bytes, float] | None = None

    def _fit(self, rng: np.random.Generator, others: list[np.ndarray]) -> None:
        """Fit the t proposal to the conditional: its mode, then its moments.

        The curvature at the mode can badly understate the spread: with Laplace noise far wider
        than sd(s), the log density is smooth only within about sd(s) of its peak and falls
        linearly beyond. So the Laplace approximation, widened, only starts a few rounds of
        importance sampling that match the proposal's location and scale to the conditional's
        mean and covariance. The fit uses θ's first value and fresh draws, never θ's current
        value, so the kernel is a valid Metropolis–Hastings update.
        """

        def objective(z):
            value, grad = self._logp_grad(z, *others)
            if not np.isfinite(value):
                return np.inf, np.zeros_like(z)
            return -float(value), -np.asarray(grad, dtype=np.float64)

        fit = optimize.minimize(objective, self._start, jac=True, method="BFGS")
        loc = fit.x if np.all(np.isfinite(fit.x)) else self._start
        hessian = np.empty((loc.size, loc.size))
        for i in range(loc.size):
            step = 1e-4 * max(1.0, abs(loc[i]))
            up, down = loc.copy(), loc.copy()
            up[i] += step
            down[i] -= step
            hessian[i] = (objective(up)[1] - objective(down)[1]) / (2 * step)
        curvature, basis = np.linalg.eigh(0.5 * (hessian + hessian.T))
        if not np.all(np.isfinite(curvature)) or curvature.max() <= 0:
            curvature, basis = np.ones(loc.size), np.eye(loc.size)
        curvature = np.maximum(curvature, 1e-8 * curvature.max())
        shape = (basis / curvature) @ basis.T * _WIDEN**2
        # A conditional that other variables move is refitted every iteration: the importance
        # rounds (about 1000 log densities) would then cost more than they save.
        for _ in range(_ROUNDS if not others else 0):
            self.proposal = stats.multivariate_t(loc=loc, shape=shape, df=_PILOT_DF)
            z = np.asarray(self.proposal.rvs(size=_PILOT, random_state=rng)).reshape(_PILOT, -1)
            log_w = self._log_weights(z, others)
            if not np.any(np.isfinite(log_w)):
                break
            w = np.exp(log_w - log_w.max())
            w /= w.sum()
            loc = w @ z
            centred = z - loc
            moment = (centred * w[:, None]).T @ centred
            shape = moment + 1e-12 * np.trace(moment) * np.eye(loc.size)
            if 1.0 / np.sum(w**2) > 0.5 * _PILOT:  # the proposal already fits well
                break
        self.proposal = stats.multivariate_t(loc=loc, shape=shape, df=_DF)
        if loc.size == 2 and not others and self._fit_quality(rng, others) < _GOOD_FIT:
            # In two dimensions a conditional that the t fits badly (curved, skewed or bimodal,
            # as noise-dominated releases give) is tabulated and proposed as it is.
            grid = fit_plane_grid(
                lambda z: self._target(z, others), loc=loc, scale=self.proposal.shape
            )
            self.proposal = _GridMixture(grid, self.proposal)

    def _fit_quality(self, rng: np.random.Generator, others: list[np.ndarray]) -> float:
        """Importance-sampling efficiency (ESS / draws) of the proposal for the conditional."""
        z = np.asarray(self.proposal.rvs(size=_PILOT, random_state=rng)).reshape(_PILOT, -1)
        log_w = self._log_weights(z, others)
        if not np.any(np.isfinite(log_w)):
            return 0.0
        w = np.exp(log_w - log_w.max())
        return float(np.sum(w) ** 2 / np.sum(w**2) / _PILOT)

    def _target(self, z: np.ndarray, others: list[np.ndarray]) -> np.ndarray:
        """The conditional's log density at the rows of ``z``, in blocks of at most 256."""
        out = [
            np.asarray(self._block(z[i : i + _BLOCK], *others), dtype=np.float64).reshape(-1)
            for i in range(0, len(z), _BLOCK)
        ]
        return np.concatenate(out) if out else np.empty(0)

    def _log_weights(self, z: np.ndarray, others: list[np.ndarray]) -> np.ndarray:
        """Log target - log proposal at the rows of ``z`` (-inf where the target is not finite)."""
        target = self._target(z, others)
        weight = target - np.atleast_1d(self.proposal.logpdf(z))
        return np.where(np.isfinite(weight), weight, -np.inf)

    def split(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        """The block's values, by name, from the concatenated vector."""
        parts = np.split(flat, np.cumsum(self.sizes)[:-1])
        return {n: p.reshape(s) for n, p, s in zip(self.names, parts, self.shapes)}

    def draw(self, rng: np.random.Generator, point: dict) -> tuple[np.ndarray, bool]:
        others = [np.asarray(point[name]) for name in self.input_names]
        current = np.concatenate(
            [np.asarray(point[name], dtype=np.float64).reshape(-1) for name in self.names]
        )
        key = tuple(o.tobytes() for o in others)
        if self._start is None:
            self._start = current.copy()
        if key != self._key:
            self._fit(rng, others)
            self._key, self._buffer, self._current = key, [], None
        if self._current is None or self._current[0] != current.tobytes():
            self._current = (current.tobytes(), float(self._log_weights(current[None], others)[0]))
        if not self._buffer:
            # With nothing else in the conditional, neither the target nor the proposal changes.
            size = _BLOCK if not others else 1
            z = np.asarray(self.proposal.rvs(size=size, random_state=rng)).reshape(size, -1)
            self._buffer = list(zip(z, self._log_weights(z, others)))
        proposed, weight = self._buffer.pop()
        if np.log(rng.uniform()) < weight - self._current[1]:
            self._current = (proposed.tobytes(), float(weight))
            return proposed, True
        return current, False


class _GridMixture:
    """The tabulated conditional (most of the time) or the fitted t (for the tails)."""

    def __init__(self, grid: PlaneGrid, t: Any):
        self.grid, self.t = grid, t
        self.shape = t.shape

    def rvs(self, size: int, random_state: np.random.Generator) -> np.ndarray:
        z = draw_plane_grid(random_state, self.grid, size)
        tails = random_state.uniform(size=size) < _TAILS
        if tails.any():
            z[tails] = np.asarray(self.t.rvs(size=int(tails.sum()), random_state=random_state))
        return z

    def logpdf(self, z: np.ndarray) -> np.ndarray:
        z = np.atleast_2d(z)
        return np.logaddexp(
            np.log1p(-_TAILS) + plane_grid_logpdf(self.grid, z),
            np.log(_TAILS) + np.atleast_1d(self.t.logpdf(z)),
        )


class IndependenceStep(DPGibbsStep):
    """Metropolis–Hastings with an independent, fitted proposal for a small θ.

    Assigned by ``pm.sample()`` to a vector θ (e.g. a ``pm.Dirichlet``) that feeds a
    :class:`~pymc_dp.NoisySuffStat` node with the exact likelihood and whose prior has fixed
    parameters, and to the free variables of θ = (μ, σ²) of a windowed Normal or LogNormal
    release as one block (when their prior has fixed parameters). The proposal is a multivariate
    t (5 degrees of freedom) fitted to θ's full conditional, or, for a two-dimensional θ that the
    t fits badly, the conditional tabulated on an adaptive grid mixed with that t. It is
    refitted only when another variable in that conditional changes, so the chain is exact and,
    when θ is the only free variable, close to independent draws (the acceptance rate is
    reported as the ``accepted`` sampler stat).

    Parameters
    ----------
    vars
        Variables to sample; by default every θ marked for this step. Variables marked as one
        block (a windowed Normal's μ and σ²) are drawn jointly.
    model
        The model; defaults to the context model.
    rng
        Seed or generator (``pm.sample`` passes one per chain).
    initial_point, compile_kwargs, blocked
        Accepted for compatibility with ``pm.sample``.

    Notes
    -----
    The fit starts from the chain's first value of θ each time, never from its current value,
    so the proposal depends only on the other variables and the Metropolis–Hastings ratio
    π(z')q(z) / (π(z)q(z')) keeps the conditional invariant. A conditional with several modes
    is still sampled correctly, but the proposal covers one mode best.
    """

    name = "dp_independence"
    role: ClassVar[str] = "it is not a vector θ of an exact NoisySuffStat node"
    stats_dtypes_shapes: ClassVar[dict] = {"accepted": (bool, [])}

    @staticmethod
    def owns(rv: Any) -> bool:  # noqa: D102
        return bool(getattr(getattr(rv, "tag", None), INDEPENDENCE_TAG, False))

    def _setup(self, model: pm.Model, rvs: list, compile_kwargs: dict) -> None:
        # A tag that names several variables makes them one block, drawn jointly.
        blocks: dict[Any, list] = {}
        for rv in rvs:
            tag = getattr(rv.tag, INDEPENDENCE_TAG)
            key = tag if isinstance(tag, tuple) else (rv.name,)
            blocks.setdefault(key, []).append(rv)
        self._conditionals = [
            _Conditional(model, block, compile_kwargs) for block in blocks.values()
        ]

    def step(self, point: dict) -> tuple[dict, list[dict]]:
        """Update every block from its full conditional, one after the other."""
        point = dict(point)
        accepted = True
        for conditional in self._conditionals:
            flat, moved = conditional.draw(self.rng, point)
            for name, value in conditional.split(flat).items():
                point[name] = value.astype(np.asarray(point[name]).dtype)
            accepted = accepted and moved
        return point, [{"accepted": accepted}]
