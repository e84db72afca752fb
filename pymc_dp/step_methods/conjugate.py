"""Exact conjugate draw of θ | s (Algorithm 1, line 3)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pymc as pm

from pymc_dp.step_methods._base import DPGibbsStep, node_info
from pymc_dp.step_methods._model_access import PointReader, ValueWriter, direct_dependents

__all__ = ["ConjugateStep"]


class ConjugateStep(DPGibbsStep):
    """Gibbs step drawing θ from its conjugate posterior given the latent statistics s.

    For θ ~ Beta(α, β) feeding Binomial nodes, θ | s ~ Beta(α + Σ s, β + Σ n·trials - Σ s); for
    θ ~ Dirichlet(α) feeding a Categorical node, θ | s ~ Dirichlet(α + s). The prior's
    hyperparameters are read from the current point, so they may themselves be random and
    sampled by any other step method. θ may feed several nodes.

    Parameters
    ----------
    vars
        θ variables to sample; by default every conjugate θ of a NoisySuffStat node.
    model
        The model; defaults to the context model.
    rng
        Seed or generator (``pm.sample`` passes one per chain).
    initial_point, compile_kwargs, blocked
        Accepted for compatibility with ``pm.sample``.

    References
    ----------
    Bernstein & Sheldon (2018), Algorithm 1 line 3; Diaconis & Ylvisaker (1979).
    """

    name = "dp_conjugate"
    role: ClassVar[str] = "it is not the conjugate parameter of a NoisySuffStat node"

    @staticmethod
    def owns(rv: Any) -> bool:  # noqa: D102
        links = node_info(rv)
        return isinstance(links, tuple) and len(links) > 0

    def _setup(self, model: pm.Model, rvs: list, compile_kwargs: dict) -> None:
        outputs, self._plan = [], []
        for rv in rvs:
            links = node_info(rv)
            allowed = {info.suffstat for info in links}
            extra = sorted(set(direct_dependents(model, rv)) - allowed)
            if extra:
                raise ValueError(
                    f"{rv.name!r} is also used by {extra}, so θ | s is not the conjugate "
                    f"update; sample {rv.name!r} with another step method, e.g. "
                    f"pm.sample(step=[pm.NUTS([{rv.name}])])"
                )
            prior = rv.owner.op.dist_params(rv.owner)
            n_prior = len(prior)
            outputs.extend(prior)
            outputs.extend(model[info.suffstat] for info in links)
            self._plan.append((n_prior, links, ValueWriter(model, rv, **compile_kwargs)))
        self._read = PointReader(model, outputs, **compile_kwargs)

    def step(self, point: dict) -> tuple[dict, list[dict]]:
        """Draw every θ from its conjugate posterior given the current s."""
        values = self._read(point)
        point = dict(point)
        pos = 0
        for n_prior, links, writer in self._plan:
            params = tuple(np.asarray(v, dtype=np.float64) for v in values[pos : pos + n_prior])
            pos += n_prior
            for info in links:
                params = info.family.conjugate_update(params, values[pos], info.n)
                pos += 1
            theta = links[0].family.draw_conjugate(self.rng, params)
            point[writer.name] = writer(theta, point)
        return point, [{}]
