"""Draw of the Laplace mixing variance σ² | y, s (Algorithm 1, line 6)."""

from __future__ import annotations

from typing import ClassVar

import pymc as pm

from pymc_dp.kernels import draw_noise_variance
from pymc_dp.model.distributions import NoiseVarianceRV
from pymc_dp.model.model_access import PointReader, ValueWriter
from pymc_dp.model.step_methods.base import DPGibbsStep

__all__ = ["NoiseVarianceStep"]


class NoiseVarianceStep(DPGibbsStep):
    """Gibbs step drawing σ²_j with 1/σ²_j ~ InverseGaussian(ε/(Δ|y_j - s_j|), ε²/Δ²).

    Parameters
    ----------
    vars
        Mixing variances to sample; by default every ``{name}_sigma2`` of a NoisySuffStat node.
    model, rng, initial_point, compile_kwargs, blocked
        As for :class:`~pymc_dp.model.step_methods.base.DPGibbsStep`.

    References
    ----------
    Bernstein & Sheldon (2018), Algorithm 1 line 6 and Appendix B; Park & Casella (2008).
    """

    name = "dp_noise_variance"
    role: ClassVar[str] = "it is not the noise variance of a NoisySuffStat node"
    op_type: ClassVar[type] = NoiseVarianceRV

    def _setup(self, model: pm.Model, rvs: list, compile_kwargs: dict) -> None:
        outputs, self._writers = [], []
        for rv in rvs:
            released, suffstat, scale = rv.owner.op.dist_params(rv.owner)
            outputs.append(released - suffstat)
            outputs.append(scale)
            self._writers.append(ValueWriter(model, rv, **compile_kwargs))
        self._read = PointReader(model, outputs, **compile_kwargs)

    def step(self, point: dict) -> tuple[dict, list[dict]]:
        """Draw every σ² from its full conditional."""
        values = self._read(point)
        point = dict(point)
        for i, writer in enumerate(self._writers):
            residual, scale = values[2 * i], values[2 * i + 1]
            sigma2 = draw_noise_variance(self.rng, residual=residual, scale=scale)
            point[writer.name] = writer(sigma2, point)
        return point, [{}]
