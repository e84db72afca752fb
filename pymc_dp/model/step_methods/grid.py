"""Exact draws of a scalar θ from its full conditional, by an adaptive grid (collapsed nodes).

With the latent statistic integrated out (:class:`~pymc_dp.likelihoods.CollapsedLaplace`), a
scalar θ's full conditional is a one-dimensional density known up to a constant. It is tabulated
over its whole support (:func:`~pymc_dp.kernels.grid_density`, which keeps every mode) and drawn
from by its inverse CDF, so successive draws are independent whenever nothing else in the model
moves. The grid is then computed once per chain and draws are served from a buffer.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.pytensorf import compile as pm_compile
from pytensor.graph.replace import vectorize_graph

from pymc_dp.kernels import draw_from_grid, grid_density
from pymc_dp.model.model_access import QUICK_MODE, conditional_logp
from pymc_dp.model.nodes.info import GRID_TAG
from pymc_dp.model.step_methods.base import DPGibbsStep

__all__ = ["GridStep"]

_BUFFER = 1024


class _Conditional:
    """One variable's full conditional, vectorised over grid nodes, with a draw buffer."""

    def __init__(self, model: pm.Model, rv: Any, compile_kwargs: dict):
        value, total, others = conditional_logp(model, rv)
        self.name = value.name
        nodes = pt.vector(f"{self.name}_nodes", dtype=value.dtype)
        batched = vectorize_graph(total, replace={value: nodes})
        self.input_names = [v.name for v in others]
        # Quickly compiled: the graph (log-differences of normal CDFs, window moments by
        # autodiff) takes seconds to optimise and is evaluated a few dozen times per chain.
        kwargs = {"mode": QUICK_MODE, **compile_kwargs}
        self._fn = pm_compile([nodes, *others], batched, on_unused_input="ignore", **kwargs)
        self._key: tuple | None = None
        self._grid = None
        self._buffer: list[float] = []

    def draw(self, rng: np.random.Generator, point: dict) -> np.ndarray:
        others = [np.asarray(point[name]) for name in self.input_names]
        key = tuple(o.tobytes() for o in others)
        if key != self._key:

            def log_density(z):
                return self._fn(np.asarray(z, dtype=np.float64).reshape(-1), *others).reshape(
                    np.shape(z)
                )

            self._grid = grid_density(log_density, center=np.asarray(point[self.name], dtype=float))
            self._key = key
            self._buffer = []
        if not self._buffer:
            # With nothing else in the conditional, the grid never changes: draw in blocks.
            size = _BUFFER if not others else 1
            self._buffer = draw_from_grid(rng, self._grid, size=size).tolist()
        return np.asarray(self._buffer.pop(), dtype=np.asarray(point[self.name]).dtype)


class GridStep(DPGibbsStep):
    """Gibbs step drawing a scalar θ exactly from its full conditional on an adaptive grid.

    Assigned by ``pm.sample()`` to a scalar continuous θ that feeds a collapsed
    :class:`~pymc_dp.NoisySuffStat` node (the default for scalar statistics) and whose prior has
    fixed parameters. When θ is the only free variable the draws are independent, so the
    effective sample size equals the number of draws.

    Parameters
    ----------
    vars
        Scalar variables to sample; by default every θ marked for this step.
    model, rng, initial_point, compile_kwargs, blocked
        As for :class:`~pymc_dp.model.step_methods.base.DPGibbsStep`.

    Notes
    -----
    The density is evaluated on the variable's unconstrained (transformed) scale, Jacobian
    included, over a bracket that grows until the density has fallen by e^-45 at both ends; see
    :func:`~pymc_dp.kernels.grid_density`. The grid is rebuilt whenever another variable in θ's
    conditional changes, so the step is also a valid Gibbs update inside a larger model.
    """

    nuts_can_replace = True  # NUTS samples θ too (pm.sample(nuts_sampler="nutpie"), ...)

    name = "dp_grid"
    role: ClassVar[str] = "it is not a scalar θ of a collapsed NoisySuffStat node"
    link_tag: ClassVar[str] = GRID_TAG
    accepts = staticmethod(bool)

    def _setup(self, model: pm.Model, rvs: list, compile_kwargs: dict) -> None:
        for rv in rvs:
            if rv.type.ndim != 0:
                raise ValueError(f"GridStep samples scalar variables; {rv.name!r} is not scalar")
        self._conditionals = [_Conditional(model, rv, compile_kwargs) for rv in rvs]

    def step(self, point: dict) -> tuple[dict, list[dict]]:
        """Draw every variable from its full conditional, one after the other."""
        point = dict(point)
        for conditional in self._conditionals:
            point[conditional.name] = conditional.draw(self.rng, point)
        return point, [{}]
