"""``pm.sample``'s step for a regression node whose covariates are all binary (a thin adapter).

:class:`RegressionCellStep` owns θ, σ², the node's cell probabilities π (``{name}_x_probs``)
and the latent statistic s. Each step is one iteration of
:func:`~pymc_dp.regression.engine.mixed.mixed_sweep` with the cell model's target, the sweep of
:func:`~pymc_dp.regression.sample_cell_regression`: (θ, σ²) | s and π | s ~ Dirichlet(1 + counts)
exactly (for three binary covariates π is integrated out of the moves and drawn given s after
them), a move of s alone, after tuning a multiple-try move, and random-walk moves of (φ, s)
that adapt while ``pm.sample`` tunes; Laplace noise enters them by its density, so the node has
no mixing variances.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pymc as pm

from pymc_dp._compat import register_step_methods
from pymc_dp.regression.engine.cells import cell_start
from pymc_dp.regression.kernels.cell_model import (
    cell_layout,
    draw_cell_probs,
)
from pymc_dp.regression.kernels.mixed_move import (
    n_cell_parameters,
    unpack_cells,
)
from pymc_dp.regression.model.cell_suffstat import CellModelSuffStatRV
from pymc_dp.regression.model.mixed_step import SweepStep

__all__ = ["RegressionCellStep"]


class RegressionCellStep(SweepStep):
    """Collapsed moves of a regression node whose covariates are all 0 or 1 (the cell model).

    Parameters
    ----------
    vars
        θ, σ² and the node's ``{name}_x_probs`` and ``{name}_s`` (all of them; they are one
        block); by default those of every NoisyRegressionStat with ``x_model="binary"`` or
        ``"factor"`` sampled by the cell model.
    tries, tune_moves, moves
        As for :class:`~pymc_dp.regression.RegressionMixedStep`.
    model, rng, initial_point, compile_kwargs, blocked
        As for :class:`~pymc_dp.model.step_methods.base.DPGibbsStep`.

    Notes
    -----
    Sampler stat ``accept``: the share of this step's random-walk moves accepted. The model:
    :mod:`~pymc_dp.regression.kernels.cell_model`; its moves:
    :mod:`~pymc_dp.regression.kernels.mixed_move`.

    Raises
    ------
    ValueError
        If only part of the block is given, or θ or σ² is used elsewhere in the model.
    """

    name = "dp_regression_cells"
    role: ClassVar[str] = (
        "it is not a variable of a NoisyRegressionStat node whose covariates are all binary "
        "(x_model='binary' or 'factor')"
    )

    suffstat_op = CellModelSuffStatRV

    @staticmethod
    def _takes(info: Any) -> bool:
        return info.cells is not None

    @staticmethod
    def _x_variables(info: Any) -> tuple[str, ...]:
        return (info.x_probs,)

    def _setup(self, model: pm.Model, rvs: list, compile_kwargs: dict) -> None:
        super()._setup(model, rvs, compile_kwargs)
        info = self._info
        self._layout = cell_layout(info.d, info.cells)

    def step(self, point: dict) -> tuple[dict, list[dict]]:
        """One iteration of the cell model's sweep."""
        info, layout = self._info, self._layout
        target, s = self._read_target(point, np.arange(info.d + 1), None, layout)
        if self._starts_chain():
            # A chain's start near the release (cell_start): from the prior, chains under a
            # vague prior strand far from z.
            _, s = cell_start(self.rng, target)
        state, stats = self._sweep(s, target, n_cell_parameters(layout))
        par, _ = unpack_cells(state.params[0], layout)
        if layout.hidden:  # the cube's sweep integrates π out: π | s, exactly
            par = par._replace(probs=draw_cell_probs(self.rng, state.suffstat[0], info.n, layout))
        new = {
            info.theta: par.theta,
            info.sigma2: par.sigma2,
            info.x_probs: par.probs,
            info.suffstat: state.suffstat[0],
        }
        return self._write(point, new), stats


register_step_methods([RegressionCellStep])
