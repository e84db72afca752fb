"""``pm.sample``'s step for the default regression model (a thin adapter over the kernels).

:class:`RegressionCollapsedStep` owns θ, σ² and, for every :class:`~pymc_dp.NoisyRegressionStat`
node they feed, the covariates' (μ_x, Σ_x) and the latent statistic s. Each step does what
:func:`~pymc_dp.regression.sample_regression` does for one iteration: exact conjugate draws of
(θ, σ²) and (μ_x, Σ_x) given s; a move of s alone; for a single node, a move that proposes φ
through the moments of one record (:mod:`~pymc_dp.regression.kernels.moment_move`); and collapsed
random-walk moves of (φ, s) jointly (:mod:`~pymc_dp.regression.kernels.collapsed`), whose walk
adapts while ``pm.sample`` tunes and is fixed afterwards. The Laplace mixing variances keep their
own step (:class:`~pymc_dp.regression.RegressionNoiseVarianceStep`); Gaussian noise has none. For a
single node with Laplace noise, half the steps after the first tuning window make the moment
move with the mixing variances integrated out (:mod:`~pymc_dp.regression.engine.collapsed`), which
leaves them stale until their step redraws them given the new s, before this step reads them
again.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, ClassVar

import numpy as np
import pymc as pm
from pymc.step_methods.compound import StepMethodState
from pymc.step_methods.state import dataclass_state

from pymc_dp._compat import register_step_methods
from pymc_dp.model.model_access import PointReader, ValueWriter
from pymc_dp.model.step_methods.base import DPGibbsStep, require_block
from pymc_dp.regression.engine.collapsed import (
    collapsed_sweep,
    default_moves,
    initial_step_sd,
    shape_gibbs,
)
from pymc_dp.regression.kernels.adaptation import RandomWalkAdaptation
from pymc_dp.regression.kernels.collapsed import (
    CollapsedTarget,
    collapsed_target,
    pack_parameters,
    unpack_parameters,
)
from pymc_dp.regression.kernels.conjugate import NIG, draw_nig, nig_update
from pymc_dp.regression.kernels.data_model import NIW, draw_niw, niw_update
from pymc_dp.regression.kernels.moment_move import moment_prior
from pymc_dp.regression.kernels.shape_law import XShape, raw_moments, standardised
from pymc_dp.regression.model.distributions import NormalModelSuffStatRV
from pymc_dp.regression.model.noisy_regression import TAG, nig_prior_parameters
from pymc_dp.regression.model.steps import require_nig_sole_use

__all__ = ["RegressionCollapsedStep"]

_OWN_STEPS = ("mixed", "levels", "pair")
"""Models of x whose nodes have their own steps (RegressionMixedStep, RegressionLevelStep)."""


@dataclass_state
class CollapsedStepState(StepMethodState):
    """Sampling state: the generator, and the random walk's adaptation and tuning flag."""

    adaptation: Any = field(default_factory=dict)
    tune: bool = field(default=True)


class RegressionCollapsedStep(DPGibbsStep):
    """Collapsed Metropolis–Hastings and conjugate moves of a default regression model.

    Parameters
    ----------
    vars
        θ, σ² and every node's ``{name}_x_loc``, ``{name}_x_cov`` and ``{name}_s`` (all of
        them; they are one block); by default those of every default NoisyRegressionStat.
    moves
        Collapsed random-walk moves per step; by default, beside the moment move of a single
        node, one while tuning and none after; one per unconstrained parameter with several
        nodes (:func:`~pymc_dp.regression.engine.collapsed.default_moves`). Steps that make
        the moment move with the mixing variances integrated out make none.
    tries
        Candidates of the multiple-try moment move (single nodes). One chain's step costs
        about one NumPy call per operation whatever the number of candidates, so more of
        them are nearly free here: at n = 500, ε = 1, d = 2 (``benchmarks/regression_ess.py``,
        chain seeds 1–3, run side by side) 64 gave 1.38× the ESS of 32 in the same time, and
        128 1.04× the ESS of 64 in 1.2× the time. (Before half the sweeps integrated the mixing
        variances out, 64 gave no more ESS per second than 32.)
    model, rng, initial_point, compile_kwargs, blocked
        As for :class:`~pymc_dp.model.step_methods.base.DPGibbsStep`.

    Notes
    -----
    Sampler stats: ``accept`` (fraction of this step's random-walk moves accepted; NaN in
    a step that made none, the default after tuning beside the moment move) and
    ``moment_accept`` (whether the moment move was accepted; always ``False`` with several
    nodes, which have none). Each step is one iteration of
    :func:`~pymc_dp.regression.engine.collapsed.collapsed_sweep` after the conjugate draws.

    Raises
    ------
    ValueError
        If only part of the block is given, or θ or σ² is used elsewhere in the model.

    References
    ----------
    van Dyk & Park (2008), "Partially collapsed Gibbs samplers", *JASA* 103, 790–796;
    Christen & Fox (2005), "Markov chain Monte Carlo using an approximation", *JCGS* 14,
    795–810.
    """

    name = "dp_regression_collapsed"
    role: ClassVar[str] = "it is not a variable of a default (collapsed) NoisyRegressionStat node"
    stats_dtypes_shapes: ClassVar[dict] = {
        "accept": (np.float64, []),
        "moment_accept": (bool, []),
    }
    _state_class = CollapsedStepState
    link_tag: ClassVar[str] = TAG

    def __init__(
        self, vars: Any = None, *, moves: int | None = None, tries: int = 64, **kwargs: Any
    ):
        self.moves = None if moves is None else int(moves)
        self.tries = int(tries)
        if (self.moves is not None and self.moves < 0) or self.tries < 1:
            raise ValueError(f"moves must be >= 0 and tries >= 1 (got {moves}, {tries})")
        self.adaptation: dict[int, RandomWalkAdaptation] = {}
        self.tune = True
        super().__init__(vars, **kwargs)

    @classmethod
    def owns(cls, rv: Any) -> bool:  # noqa: D102
        info = cls.links(rv)
        if isinstance(info, tuple):  # θ or σ²
            return len(info) > 0 and all(
                i.method == "collapsed" and i.x_model not in _OWN_STEPS and i.cells is None
                for i in info
            )
        if (info is None or info.method != "collapsed" or info.x_model in _OWN_STEPS
                or info.cells is not None):  # fmt: skip
            return False  # the mixed, level and cell models have their own steps
        op = getattr(getattr(rv, "owner", None), "op", None)
        return isinstance(op, NormalModelSuffStatRV) or rv.name in (
            info.x_loc, info.x_cov, info.x_skew, info.x_excess
        )  # fmt: skip

    def reset_tuning(self) -> None:
        """Each chain adapts its own walk (sequential ``pm.sample`` calls this per chain)."""
        self.adaptation = {}
        self.tune = True

    def stop_tuning(self) -> None:
        """Freeze the random walk (pm.sample calls this when tuning ends)."""
        self.tune = False

    def _setup(self, model: pm.Model, rvs: list, compile_kwargs: dict) -> None:
        given = {rv.name for rv in rvs}
        blocks: dict[tuple[str, str], tuple] = {}
        for rv in rvs:
            info = self.links(rv)
            first = info[0] if isinstance(info, tuple) else info
            blocks.setdefault((first.theta, first.sigma2), self.links(model[first.theta]))
        outputs: list = []
        self._plan = []
        for (theta_name, sigma2_name), links in blocks.items():
            names = {theta_name, sigma2_name}
            shaped = [info.x_skew is not None for info in links]
            if any(shaped) and len(links) > 1:
                raise ValueError(
                    f"nodes {[i.name for i in links]} share theta, and some observe released "
                    "moments of x (x_model='shape'): the shape model is for a single node; give "
                    "the nodes x_model='normal'"
                )
            for info in links:
                names |= {info.suffstat, info.x_loc, info.x_cov}
                if info.x_skew is not None:
                    names |= {info.x_skew, info.x_excess}
            require_block(
                names,
                given,
                f"RegressionCollapsedStep moves {sorted(names)} together; give it all of "
                f"them (got {sorted(given & names)})",
            )
            theta, sigma2 = model[theta_name], model[sigma2_name]
            require_nig_sole_use(
                model,
                theta,
                sigma2,
                links,
                "so the regression step cannot draw it; use it only in NoisyRegressionStat "
                "nodes (Deterministics are fine)",
            )
            start = len(outputs)
            outputs.extend(nig_prior_parameters(model, theta, sigma2))
            for info in links:
                outputs.append(model[info.name])
                if info.noise_sd is None:
                    outputs.append(model[info.noise_variance])
                outputs.extend(model[v] for v in (info.x_loc, info.x_cov, info.suffstat))
                if info.x_skew is not None:
                    outputs.extend(model[v] for v in (info.x_skew, info.x_excess))
            order = [theta_name, sigma2_name]
            for info in links:
                order += [info.x_loc, info.x_cov, info.suffstat]
                if info.x_skew is not None:
                    order += [info.x_skew, info.x_excess]
            writers = {v: ValueWriter(model, model[v], **compile_kwargs) for v in order}
            x_prior = NIW(*(np.stack([np.asarray(getattr(i.x_prior, f)) for i in links])
                            for f in NIW._fields))  # fmt: skip
            self._plan.append((start, links, x_prior, writers))
        self._read = PointReader(model, outputs, **compile_kwargs)
        self._fits: dict[int, Any] = {}
        self._targets: dict[int, tuple] = {}

    def _target(
        self, k: int, released: np.ndarray, n: np.ndarray, prior: NIG, x_prior: NIW
    ) -> CollapsedTarget:
        """Block k's target, rebuilt only when its released values or priors change.

        Its constants cost more than the rest of a step's set-up.
        """
        key = (released, *prior)
        cached = self._targets.get(k)
        if cached is not None and all(np.array_equal(a, b) for a, b in zip(cached[0], key)):
            return cached[1]
        target = collapsed_target(released, np.ones_like(released), n, prior, x_prior)
        self._targets[k] = (key, target)
        return target

    def step(self, point: dict) -> tuple[dict, list[dict]]:
        """One iteration of the collapsed sampler for every (θ, σ²) block."""
        values = [np.asarray(v, dtype=np.float64) for v in self._read(point)]
        point = dict(point)
        accepted = 0.0
        moment = False
        from_prior = self._starts_chain()  # a chain's start: the parameters from their prior
        for k, (start, links, x_prior, writers) in enumerate(self._plan):
            prior = NIG(*values[start : start + 4])
            pos = start + 4
            z, noise, loc, cov, s = [], [], [], [], []
            for info in links:
                z.append(values[pos])
                pos += 1
                if info.noise_sd is None:
                    noise.append(values[pos])
                    pos += 1
                else:
                    noise.append(np.full_like(z[-1], info.noise_sd**2))
                loc.append(values[pos])
                cov.append(values[pos + 1])
                s.append(values[pos + 2])
                pos += 3
                if info.x_skew is not None:  # a single node (checked in _setup)
                    skew, excess = float(values[pos]), float(values[pos + 1])
                    pos += 2
            n = np.array([float(info.n) for info in links])
            s = np.stack(s)
            post, x_post = prior, x_prior
            if not from_prior:
                for j in range(len(links)):
                    post = nig_update(post, statistic=s[j], n=n[j])
            if not from_prior or links[0].x_skew is not None:
                # Under the shape model a chain's (μ_x, Σ_x) start from their NIW posterior
                # given s, not their prior: (μ_x, Σ_x) move only by that posterior's draws,
                # accepted with the shape factor's ratio, and a prior draw can put the start's
                # s 40 sds from its law, where the factor is e²⁰⁰ above any draw's; the chain
                # then never moves (docs/regression.md, the seed-1 stall).
                x_post = niw_update(x_prior, statistic=s, n=n)
            theta, sigma2 = draw_nig(self.rng, post)
            loc_now, cov_now = np.stack(loc), np.stack(cov)
            loc, cov = draw_niw(self.rng, x_post)
            shape = None
            info = links[0]
            if info.x_skew is not None:
                sums, degrees, m_scale, shape_prior = info.x_shape_moments
                if from_prior:
                    skew, kurt = shape_prior.draw(self.rng, ())
                    excess = kurt - 1.0 - skew**2
                    loc_now, cov_now = loc, cov
                # The state holds the raw moments E x³, E x⁴ while (μ_x, Σ_x) move.
                third, fourth = raw_moments(loc_now[..., 0], cov_now[..., 0, 0], skew,
                                            1.0 + skew**2 + excess)  # fmt: skip
                shape = XShape(third[None], fourth[None], np.array([[sums]]), np.array(degrees),
                               np.array([[m_scale]]), shape_prior)  # fmt: skip
                if not from_prior:
                    # The NIW draw proposes (μ_x, Σ_x); the shape's factor accepts it.
                    new_loc, new_cov, shape = shape_gibbs(
                        self.rng, shape, s[None], n, (loc[None], cov[None]),
                        (loc_now[None], cov_now[None]),
                    )  # fmt: skip
                    loc, cov = new_loc[0], new_cov[0]
            u = pack_parameters(theta, sigma2, loc, cov)[None]
            batch_prior = NIG(*(np.asarray(a)[None] for a in prior))
            batch_x = NIW(*(np.asarray(a)[None] for a in x_prior))
            target = self._target(k, np.stack(z)[None], n, batch_prior, batch_x)
            target = target._replace(noise_variance=np.stack(noise)[None], x_shape=shape)
            adaptation = self.adaptation.get(k)
            if adaptation is None:
                adaptation = self.adaptation[k] = RandomWalkAdaptation(
                    u, initial_sd=initial_step_sd(batch_prior, batch_x)
                )
            fit = None
            if len(links) == 1:
                fit = self._fits.get(k)
                if fit is None:
                    # A fixed generator: the fit is part of the proposal, not of the chain.
                    fit = self._fits[k] = moment_prior(
                        np.random.default_rng(0), batch_prior, NIW(*(a[:, 0] for a in batch_x))
                    )
            moves = self.moves
            if moves is None:
                moves = default_moves(loc.shape[-1], len(links), tune=self.tune)
            # Laplace noise: some sweeps integrate w out; RegressionNoiseVarianceStep redraws
            # w given the new s before this step next reads it.
            b = links[0].laplace_scale if len(links) == 1 else None
            state, sweep = collapsed_sweep(
                self.rng, u, s[None], target=target, adaptation=adaptation, fit=fit,
                moves=moves, tries=self.tries, tune=self.tune, laplace_scale=b,
            )  # fmt: skip
            accepted += float(sweep.moved[0])
            moment = moment or bool(sweep.moment[0])
            par = unpack_parameters(state.params[0], loc.shape[-1], len(links))
            new = {links[0].theta: par.theta, links[0].sigma2: par.sigma2}
            for j, info in enumerate(links):
                new[info.x_loc] = par.x_loc[j]
                new[info.x_cov] = 0.5 * (par.x_cov[j] + par.x_cov[j].T)
                new[info.suffstat] = state.suffstat[0, j]
                if shape is not None:
                    g, k = standardised(shape, par.x_loc[j, 0], par.x_cov[j, 0, 0])
                    new[info.x_skew] = float(g[0, 0])
                    new[info.x_excess] = float(k[0, 0] - 1.0 - g[0, 0] ** 2)
            for name, value in new.items():
                writer = writers[name]
                point[writer.name] = writer(value, point)
        stats = {"accept": accepted / len(self._plan), "moment_accept": moment}
        return point, [stats]


register_step_methods([RegressionCollapsedStep])
