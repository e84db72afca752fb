"""Near-independent draws of a small vector θ: Metropolis–Hastings with a fixed t proposal.

With s summed out exactly (``likelihood="exact"``), a Dirichlet θ of a Categorical release has a
full conditional of a few dimensions that does not change while nothing else in the model moves.
A multivariate t proposal fitted once to it (in θ's unconstrained space: the mode and the
curvature there, then importance-sampled moments, with heavier tails than the target) makes
Metropolis–Hastings an *independence* sampler: the chain stays exact, and where the fit is
good almost every proposal is accepted, so successive draws are close to independent at the
cost of one log-density per draw and no gradients. Proposals do not depend on the chain, so
while the conditional is fixed they and their log-densities are computed in blocks.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.pytensorf import compile as pm_compile
from pytensor.graph.replace import clone_replace, vectorize_graph
from scipy import optimize, stats

from pymc_dp.node_info import INDEPENDENCE_TAG
from pymc_dp.step_methods._base import DPGibbsStep
from pymc_dp.step_methods._model_access import conditional_logp

__all__ = ["IndependenceStep"]

_BLOCK = 256
_DF = 5.0  # the proposal's degrees of freedom: tails heavier than any posterior here
# The fit: the Laplace approximation widened 3x, then up to 4 rounds of 256 importance draws
# from a t with 3 degrees of freedom, matching the conditional's mean and covariance.
_WIDEN = 3.0
_ROUNDS = 4
_PILOT = 256
_PILOT_DF = 3.0


class _Conditional:
    """One variable's full conditional on its unconstrained scale, with a fitted t proposal."""

    def __init__(self, model: pm.Model, rv: Any, compile_kwargs: dict):
        value, total, others = conditional_logp(model, rv)
        self.name = value.name
        self.input_names = [v.name for v in others]
        self.shape = tuple(model.initial_point()[self.name].shape)
        flat = pt.vector(f"{self.name}_flat", dtype="float64")
        single = clone_replace(total, replace={value: flat.reshape(self.shape)})
        block = pt.matrix(f"{self.name}_block", dtype="float64")
        batched = vectorize_graph(single, replace={flat: block})
        kwargs = {"mode": "FAST_COMPILE", **compile_kwargs}
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

    def _log_weights(self, z: np.ndarray, others: list[np.ndarray]) -> np.ndarray:
        """Log target - log proposal at the rows of ``z`` (-inf where the target is not finite)."""
        target = np.asarray(self._block(z, *others), dtype=np.float64).reshape(len(z))
        weight = target - np.atleast_1d(self.proposal.logpdf(z))
        return np.where(np.isfinite(weight), weight, -np.inf)

    def draw(self, rng: np.random.Generator, point: dict) -> tuple[np.ndarray, bool]:
        others = [np.asarray(point[name]) for name in self.input_names]
        current = np.asarray(point[self.name], dtype=np.float64).reshape(-1)
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
            return proposed.reshape(self.shape), True
        return current.reshape(self.shape), False


class IndependenceStep(DPGibbsStep):
    """Metropolis–Hastings with an independent multivariate t proposal for a small vector θ.

    Assigned by ``pm.sample()`` to a vector θ (e.g. a ``pm.Dirichlet``) that feeds a
    :class:`~pymc_dp.NoisySuffStat` node with the exact likelihood and whose prior has fixed
    parameters. The proposal is fitted at the mode of θ's full conditional (its Laplace
    approximation, with 5 degrees of freedom) and refitted only when another variable in that
    conditional changes, so the chain is exact and, when θ is the only free variable, close to
    independent draws (the acceptance rate is reported as the ``accepted`` sampler stat).

    Parameters
    ----------
    vars
        Vector variables to sample; by default every θ marked for this step.
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
        self._conditionals = [_Conditional(model, rv, compile_kwargs) for rv in rvs]

    def step(self, point: dict) -> tuple[dict, list[dict]]:
        """Update every variable from its full conditional, one after the other."""
        point = dict(point)
        accepted = True
        for conditional in self._conditionals:
            value, moved = conditional.draw(self.rng, point)
            point[conditional.name] = value.astype(np.asarray(point[conditional.name]).dtype)
            accepted = accepted and moved
        return point, [{"accepted": accepted}]
