"""Exact conjugate draw of θ | s (Algorithm 1, line 3)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pymc_dp.model.model_access import PointReader, ValueWriter
from pymc_dp.model.step_methods.base import DPGibbsStep, require_block, require_sole_use

__all__ = ["ConjugateStep"]


class ConjugateStep(DPGibbsStep):
    """Gibbs step drawing θ from its conjugate posterior given the latent statistics s.

    For θ ~ Beta(α, β) feeding Binomial nodes, θ | s ~ Beta(α + Σ s, β + Σ n·trials - Σ s); for
    θ ~ Dirichlet(α) feeding a Categorical node, θ | s ~ Dirichlet(α + s); and so on for every
    family's Conjugate-Update. For a windowed node, s is the statistic of all records (not the
    released ŝ). A Normal–Inverse-Gamma (μ, σ²) is one block, drawn jointly. The prior's
    hyperparameters are read from the current point, so they may themselves be random and
    sampled by any other step method. θ may feed several nodes. The first step of each chain
    of ``pm.sample`` draws θ from its prior (unless θ has an ``initval``), so chains start
    dispersed.

    Parameters
    ----------
    vars
        θ variables to sample; by default every conjugate θ of a NoisySuffStat node.
    model, rng, initial_point, compile_kwargs, blocked
        As for :class:`~pymc_dp.model.step_methods.base.DPGibbsStep`.

    References
    ----------
    Bernstein & Sheldon (2018), Algorithm 1 line 3; Diaconis & Ylvisaker (1979).
    """

    name = "dp_conjugate"
    role: ClassVar[str] = "it is not the conjugate parameter of a NoisySuffStat node"

    @staticmethod
    def accepts(links: Any) -> bool:  # noqa: D102
        # θ's link is the tuple of the nodes it feeds.
        return isinstance(links, tuple) and len(links) > 0

    def _setup(self, model: pm.Model, rvs: list, compile_kwargs: dict) -> None:
        blocks: dict[tuple[str, ...], list[str]] = {}
        for rv in rvs:
            blocks.setdefault(self.links(rv)[0].theta, []).append(rv.name)
        outputs, self._plan = [], []
        for names, given in blocks.items():
            require_block(
                names,
                given,
                f"{list(names)} are drawn jointly from their conjugate posterior; give "
                f"ConjugateStep all of them (got {given})",
            )
            block = tuple(model[name] for name in names)
            links = self.links(block[0])
            allowed = {info.suffstat for info in links} | set(names)
            for rv in block:
                require_sole_use(
                    model,
                    rv,
                    allowed,
                    f"so θ | s is not the conjugate update; sample {rv.name!r} with another step "
                    f"method, e.g. pm.sample(step=[pm.NUTS([{rv.name}])])",
                )
            family = links[0].family
            prior = family.prior_parameters(block)
            outputs.extend(prior)
            outputs.extend(_full_statistic(model, info) for info in links)
            writers = [ValueWriter(model, rv, **compile_kwargs) for rv in block]
            # A start the user chose (an initval on θ) is kept: no prior draw at the start.
            chosen = any(model.rvs_to_initial_values.get(rv) is not None for rv in block)
            self._plan.append((len(prior), family, links, writers, chosen))
        self._read = PointReader(model, outputs, **compile_kwargs)

    def step(self, point: dict) -> tuple[dict, list[dict]]:
        """Draw every θ from its conjugate posterior given the current s."""
        values = self._read(point)
        point = dict(point)
        from_prior = self._starts_chain()  # a chain's start: θ from its prior
        pos = 0
        for n_prior, family, links, writers, chosen in self._plan:
            params = tuple(np.asarray(v, dtype=np.float64) for v in values[pos : pos + n_prior])
            pos += n_prior
            for info in links:
                if chosen or not from_prior:
                    params = info.family.conjugate_update(params, values[pos], info.n)
                pos += 1
            theta = family.draw_conjugate(self.rng, params)
            for writer, value in zip(writers, family.split_theta(theta), strict=True):
                point[writer.name] = writer(value, point)
        return point, [{}]


def _full_statistic(model: pm.Model, info: Any) -> Any:
    """s, the statistic of all records: the second half of a windowed node's (ŝ, s)."""
    s = model[info.suffstat]
    if info.bounds is None:
        return s
    k = info.family.stat_size
    return pt.reshape(s[k:], info.family.stat_shape)
