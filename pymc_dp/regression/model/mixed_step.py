"""``pm.sample``'s step for a regression node with a binary covariate (a thin adapter).

:class:`RegressionMixedStep` owns θ, σ², and the node's π (``{name}_x_prob``), the other
covariates' group means and covariance (``{name}_x_loc``, ``{name}_x_cov``) and the latent
statistic s. Each step is one iteration of
:func:`~pymc_dp.regression.engine.mixed.mixed_sweep`, the sweep of
:func:`~pymc_dp.regression.sample_mixed_regression`: the conjugate draws of φ given s, a move of
s alone, after tuning a multiple-try move from a t fitted to the tuning states, and random-walk
moves of (φ, s) that adapt while ``pm.sample`` tunes. These moves hold Laplace noise's own
density, so the node has no Laplace mixing variances.
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
from pymc_dp.regression.engine.mixed import (
    INITIAL_SD,
    finish_tuning,
    mixed_sweep,
    start_parameters,
)
from pymc_dp.regression.kernels.adaptation import RandomWalkAdaptation
from pymc_dp.regression.kernels.conjugate import NIG
from pymc_dp.regression.kernels.data_model import NIW
from pymc_dp.regression.kernels.mixed_model import (
    binary_first,
    covariate_order,
    draw_mixed_statistic,
)
from pymc_dp.regression.kernels.mixed_move import (
    MixedTarget,
    n_mixed_parameters,
    noise_terms,
    unpack_mixed,
)
from pymc_dp.regression.model.distributions import MixedModelSuffStatRV
from pymc_dp.regression.model.noisy_regression import TAG, nig_prior_parameters
from pymc_dp.regression.model.steps import require_nig_sole_use

__all__ = ["STEP_MOVES_MIN_D", "RegressionMixedStep", "SweepStep", "step_moves"]

STEP_MOVES_MIN_D = 4
"""From this many covariates a step makes 4 random-walk moves of (φ, s) after tuning, below it 1
(:func:`step_moves`)."""


def step_moves(d: int) -> int:
    """Random-walk moves per ``pm.sample`` step after tuning, by default, for d covariates.

    Measured under ``pm.sample`` (2 chains × (1000 + 1000), n = 1000, ε = 1, the releases of
    ``benchmarks/regression_ess.py``, data seeds 1–3): 4 moves against 1, smallest bulk ESS of
    (θ, σ²) per second, was 1.11×, 2.5× and 1.11× for the mixed model at d = 5 (largest R-hat
    1.017–1.032 against 1.024–1.046), 0.92×, 1.9× and 1.05× at d = 4, 1.35× for the cell model
    of a factor at d = 4, level at d = 6 and 8 (1.22×, 0.82×, 1.01×; 1.00×), and 1.43× and
    1.58× at d = 10 (R-hat 1.013 and 1.022 against 1.022 and 1.026). At d = 2 and 3, where an
    iteration is cheaper and one move mixes, 4 gave 0.67–1.06× (mixed model, the pair and a
    factor of 4 levels), so 1 stays the default there. docs/regression.md, "Four random-walk
    moves a step from d = 4".
    """
    return 4 if d >= STEP_MOVES_MIN_D else 1


@dataclass_state
class MixedStepState(StepMethodState):
    """Sampling state: the generator, and the random walk's adaptation and tuning flag."""

    adaptation: Any = field(default=None)
    tune: bool = field(default=True)


class SweepStep(DPGibbsStep):
    """What the steps running :func:`~pymc_dp.regression.engine.mixed.mixed_sweep` share.

    A subclass names the nodes it takes (:meth:`_takes`) and their model of x's variables
    (:meth:`_x_variables`); in :meth:`step` it reads the node (:meth:`_read_target`), runs
    :meth:`_sweep` and writes the new values (:meth:`_write`). This class holds the random
    walk's adaptation and tuning, and finds and checks the block.
    """

    stats_dtypes_shapes: ClassVar[dict] = {"accept": (np.float64, [])}
    _state_class = MixedStepState
    link_tag: ClassVar[str] = TAG
    suffstat_op: ClassVar[type]
    """The latent statistic's ``RandomVariable`` class."""

    @staticmethod
    def _takes(info: Any) -> bool:
        """Whether this step samples the node of ``info``."""
        raise NotImplementedError

    @staticmethod
    def _x_variables(info: Any) -> tuple[str, ...]:
        """Names of the node's model of x's variables (the block beside θ, σ² and s)."""
        raise NotImplementedError

    @classmethod
    def owns(cls, rv: Any) -> bool:  # noqa: D102
        info = cls.links(rv)
        if isinstance(info, tuple):  # θ or σ²: theirs when they feed one such node
            return len(info) == 1 and cls._takes(info[0])
        if info is None or not cls._takes(info):
            return False
        op = getattr(getattr(rv, "owner", None), "op", None)
        return isinstance(op, cls.suffstat_op) or rv.name in cls._x_variables(info)

    def __init__(
        self,
        vars: Any = None,
        *,
        tries: int = 64,
        tune_moves: int = 6,
        moves: int | None = None,
        **kwargs: Any,
    ):
        self.tries, self.tune_moves = int(tries), int(tune_moves)
        self.moves = None if moves is None else int(moves)
        if self.tries < 1 or self.tune_moves < 0 or (self.moves is not None and self.moves < 0):
            raise ValueError(
                f"tries must be >= 1 and tune_moves, moves >= 0 (got {tries}, {tune_moves}, "
                f"{moves})"
            )
        self.adaptation: RandomWalkAdaptation | None = None
        self.tune = True
        self._t_chol: np.ndarray | None = None
        super().__init__(vars, **kwargs)

    def reset_tuning(self) -> None:
        """Each chain adapts its own walk (sequential ``pm.sample`` calls this per chain)."""
        self.adaptation = None
        self._t_chol = None
        self.tune = True

    def stop_tuning(self) -> None:
        """Freeze the random walk and fit the multiple-try move (when tuning ends)."""
        self.tune = False

    def _setup(self, model: pm.Model, rvs: list, compile_kwargs: dict) -> None:
        """Check the block and θ's sole use; compile the node's reader and writers."""
        info = self.links(rvs[0])
        info = info[0] if isinstance(info, tuple) else info
        names = [info.theta, info.sigma2, info.suffstat, *self._x_variables(info)]
        require_block(
            set(names),
            {rv.name for rv in rvs},
            f"{type(self).__name__} moves {sorted(names)} together; give it all of them (got "
            f"{sorted(rv.name for rv in rvs)})",
        )
        theta, sigma2 = model[info.theta], model[info.sigma2]
        require_nig_sole_use(
            model, theta, sigma2, (info,),
            "so the regression step cannot draw it; use it only in the NoisyRegressionStat "
            "node (Deterministics are fine)",
        )  # fmt: skip
        outputs = [*nig_prior_parameters(model, theta, sigma2), model[info.name],
                   model[info.suffstat]]  # fmt: skip
        self._info = info
        self._read = PointReader(model, outputs, **compile_kwargs)
        self._writers = {v: ValueWriter(model, model[v], **compile_kwargs) for v in names}

    def _read_target(
        self,
        point: dict,
        order: np.ndarray,
        x_prior: NIW | None,
        cells: Any = None,
        levels: Any = None,
    ) -> tuple[MixedTarget, np.ndarray]:
        """The target and s at ``point``, a batch of one in the kernels' layout.

        ``order`` permutes θ's coordinates; the released vectors go through
        :meth:`_to_layout`. Laplace noise enters by its density (its scale from the node).
        """
        info = self._info
        values = [np.asarray(v, dtype=np.float64) for v in self._read(point)]
        mean, precision, shape, scale = values[:4]
        prior = NIG(mean[order][None], precision[order][:, order][None], shape[None], scale[None])
        z = self._to_layout(values[4])[None]
        laplace = info.noise_sd is None
        noise, b = noise_terms([info.laplace_scale if laplace else info.noise_sd], laplace, z.shape)
        target = MixedTarget(z, noise, float(info.n), prior, x_prior, cells, b, levels)
        return target, self._to_layout(values[5])[None]

    def _to_layout(self, s: np.ndarray, inverse: bool = False) -> np.ndarray:
        """The node's released layout to the kernels' (the identity unless overridden)."""
        return s

    def _sweep(self, s: np.ndarray, target: MixedTarget, n_params: int) -> tuple:
        """One :func:`~pymc_dp.regression.engine.mixed.mixed_sweep` at s: (state, stats)."""
        if self.adaptation is None:
            self.adaptation = RandomWalkAdaptation(np.zeros((1, n_params)),
                                                   initial_sd=INITIAL_SD)  # fmt: skip
        if not self.tune and self._t_chol is None:
            self._t_chol = finish_tuning(self.adaptation)
            if self._t_chol is None:  # too few tuning steps: no multiple-try move
                self._t_chol = np.zeros(0)
        t_chol = self._t_chol if self._t_chol is not None and self._t_chol.size else None
        state, accepted = mixed_sweep(
            self.rng, s, target, self.adaptation, tune=self.tune, t_chol=t_chol,
            tune_moves=self.tune_moves, tries=self.tries,
            moves=step_moves(target.prior.mean.shape[-1] - 1) if self.moves is None else self.moves,
        )  # fmt: skip
        return state, [{"accept": float(accepted[0])}]

    def _write(self, point: dict, new: dict) -> dict:
        """``point`` with the named variables set to their new values."""
        point = dict(point)
        for name, value in new.items():
            writer = self._writers[name]
            point[writer.name] = writer(value, point)
        return point


class RegressionMixedStep(SweepStep):
    """Collapsed moves of a regression node whose covariate ``binary`` is 0 or 1.

    Parameters
    ----------
    vars
        θ, σ² and the node's ``{name}_x_prob``, ``{name}_x_loc``, ``{name}_x_cov`` (with
        d ≥ 2) and ``{name}_s`` (all of them; they are one block); by default those of every
        NoisyRegressionStat with ``x_model="mixed"``.
    tries
        Candidates of the multiple-try move after tuning. One chain's step costs about one
        NumPy call per operation whatever their number, so more are nearly free here (the
        batched engine takes 16): on one release at n = 1000, ε = 1, d = 2, 64 gave 36.5 ESS
        per second of ``pm.sample`` and 128 38.7.
    tune_moves, moves
        Random-walk moves per step while tuning and after. ``tune_moves`` 6: with PyMC's 1000
        tuning steps, 6 reached the posterior where the batched engine's 300 needed 12.
        ``moves``: by default 1 below d = 4 and 4 from d = 4 (:func:`step_moves`; at d = 2,
        ``benchmarks/regression_ess.py --x-design mixed``, n = 1000, three releases, pooled
        ESS per second: 1 move 31.0 at ε = 1 and 28.9 at ε = 0.1, 2 moves 28.0 and 27.1).
    model, rng, initial_point, compile_kwargs, blocked
        As for :class:`~pymc_dp.model.step_methods.base.DPGibbsStep`.

    Notes
    -----
    Sampler stat ``accept``: the share of this step's random-walk moves accepted. The model
    and its moves: :mod:`~pymc_dp.regression.kernels.mixed_model`,
    :mod:`~pymc_dp.regression.kernels.mixed_move`.

    Raises
    ------
    ValueError
        If only part of the block is given, or θ or σ² is used elsewhere in the model.
    """

    name = "dp_regression_mixed"
    role: ClassVar[str] = (
        "it is not a variable of a NoisyRegressionStat node with a binary covariate "
        "(x_model='mixed')"
    )

    suffstat_op = MixedModelSuffStatRV

    @staticmethod
    def _takes(info: Any) -> bool:
        return info.x_model == "mixed"

    @staticmethod
    def _x_variables(info: Any) -> tuple[str, ...]:
        return (info.x_prob, info.x_loc, info.x_cov) if info.d > 1 else (info.x_prob,)

    def _setup(self, model: pm.Model, rvs: list, compile_kwargs: dict) -> None:
        super()._setup(model, rvs, compile_kwargs)
        info = self._info
        self._order = covariate_order(info.d, info.binary)[: info.d + 1]
        loc, kappa, dof, scale = (np.asarray(a, dtype=np.float64) for a in info.x_prior)
        self._x_prior = NIW(loc[None], kappa[None], dof[None], scale[None])

    def _to_layout(self, s: np.ndarray, inverse: bool = False) -> np.ndarray:
        return binary_first(s, self._info.binary, inverse=inverse)

    def step(self, point: dict) -> tuple[dict, list[dict]]:
        """One iteration of the mixed model's sweep."""
        info, order = self._info, self._order
        target, s = self._read_target(point, order, self._x_prior)
        if self._starts_chain():
            # A chain's start near the release (start_parameters): from the prior, chains
            # under a vague prior strand far from z.
            s = draw_mixed_statistic(self.rng, start_parameters(self.rng, target), info.n)
        state, stats = self._sweep(s, target, n_mixed_parameters(info.d))
        par, _ = unpack_mixed(state.params[0], info.d)
        new = {
            info.theta: par.theta[np.argsort(order)],
            info.sigma2: par.sigma2,
            info.x_prob: par.prob,
            info.suffstat: self._to_layout(state.suffstat[0], inverse=True),
        }
        if info.d > 1:
            new[info.x_loc] = par.group_loc
            new[info.x_cov] = 0.5 * (par.x_cov + par.x_cov.T)
        return self._write(point, new), stats


register_step_methods([RegressionMixedStep])
