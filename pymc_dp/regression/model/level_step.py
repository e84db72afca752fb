"""``pm.sample``'s step for a regression node with a factor or a pair beside normal x (an adapter).

:class:`RegressionLevelStep` owns θ, σ², the node's level probabilities π (``{name}_x_probs``),
the other covariates' level means and covariance (``{name}_x_loc``, ``{name}_x_cov``) and the
latent statistic s. Each step is one iteration of
:func:`~pymc_dp.regression.engine.mixed.mixed_sweep` with the level model's target, the sweep of
:func:`~pymc_dp.regression.sample_level_regression`; Laplace noise enters it by its density, so
the node has no mixing variances.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pymc as pm

from pymc_dp._compat import register_step_methods
from pymc_dp.regression.engine.levels import level_start
from pymc_dp.regression.kernels.data_model import NIW
from pymc_dp.regression.kernels.level_model import (
    columns_first,
    draw_level_statistic,
    level_layout,
    pair_layout,
)
from pymc_dp.regression.kernels.mixed_move import n_level_parameters, unpack_levels
from pymc_dp.regression.model.level_suffstat import LevelModelSuffStatRV
from pymc_dp.regression.model.mixed_step import SweepStep

__all__ = ["RegressionLevelStep"]


class RegressionLevelStep(SweepStep):
    """Collapsed moves of a regression node whose covariates include one factor's dummy columns.

    Parameters
    ----------
    vars
        θ, σ² and the node's ``{name}_x_probs``, ``{name}_x_loc``, ``{name}_x_cov`` and
        ``{name}_s`` (all of them; they are one block); by default those of every
        NoisyRegressionStat with ``x_model="levels"`` or ``"pair"`` (two binary covariates
        beside others: the same sweep on the pair's layout).
    tries, tune_moves, moves
        As for :class:`~pymc_dp.regression.RegressionMixedStep`.
    model, rng, initial_point, compile_kwargs, blocked
        As for :class:`~pymc_dp.model.step_methods.base.DPGibbsStep`.

    Notes
    -----
    Sampler stat ``accept``: the share of this step's random-walk moves accepted. The model:
    :mod:`~pymc_dp.regression.kernels.level_model`; its moves:
    :mod:`~pymc_dp.regression.kernels.mixed_move`.

    Raises
    ------
    ValueError
        If only part of the block is given, or θ or σ² is used elsewhere in the model.
    """

    name = "dp_regression_levels"
    role: ClassVar[str] = (
        "it is not a variable of a NoisyRegressionStat node with a factor or a pair of binary "
        "covariates beside other covariates (x_model='levels' or 'pair')"
    )

    suffstat_op = LevelModelSuffStatRV

    @staticmethod
    def _takes(info: Any) -> bool:
        return info.x_model in ("levels", "pair")

    @staticmethod
    def _x_variables(info: Any) -> tuple[str, ...]:
        return (info.x_probs, info.x_loc, info.x_cov)

    def _setup(self, model: pm.Model, rvs: list, compile_kwargs: dict) -> None:
        super()._setup(model, rvs, compile_kwargs)
        info = self._info
        factor = info.factor
        others = [j + 1 for j in range(info.d) if j not in factor]
        self._order = np.array([0, *(j + 1 for j in factor), *others])
        if info.x_model == "pair":
            self._layout = pair_layout(info.d)
        else:
            self._layout = level_layout(info.d, len(factor) + 1)
        loc, kappa, dof, scale = (np.asarray(a, dtype=np.float64) for a in info.x_prior)
        self._x_prior = NIW(loc[None], kappa[None], dof[None], scale[None])

    def _to_layout(self, s: np.ndarray, inverse: bool = False) -> np.ndarray:
        return columns_first(s, self._info.factor, inverse=inverse)

    def step(self, point: dict) -> tuple[dict, list[dict]]:
        """One iteration of the level model's sweep."""
        info, order, layout = self._info, self._order, self._layout
        target, s = self._read_target(point, order, self._x_prior, levels=layout)
        if self._starts_chain():
            # A chain's start near the release (level_start): from the prior, chains under a
            # vague prior strand far from z.
            par = level_start(self.rng, target)
            s = draw_level_statistic(self.rng, par, info.n, layout, start=True)
        state, stats = self._sweep(s, target, n_level_parameters(layout))
        par, _ = unpack_levels(state.params[0], layout)
        new = {
            info.theta: par.theta[np.argsort(order)],
            info.sigma2: par.sigma2,
            info.x_probs: par.probs,
            info.x_loc: par.group_loc,
            info.x_cov: 0.5 * (par.x_cov + par.x_cov.T),
            info.suffstat: self._to_layout(state.suffstat[0], inverse=True),
        }
        return self._write(point, new), stats


register_step_methods([RegressionLevelStep])
