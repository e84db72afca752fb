"""Draw of the latent statistic s | θ, σ², y (Algorithm 1, lines 4-5)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pymc as pm

from pymc_dp.kernels import draw_suffstat, window_constraints
from pymc_dp.model.distributions import SuffStatRV, WindowSuffStatRV
from pymc_dp.model.distributions.suffstat import SimplexSuffStatRV
from pymc_dp.model.model_access import PointReader, ValueWriter
from pymc_dp.model.step_methods.base import DPGibbsStep

__all__ = ["NormProductStep"]


class NormProductStep(DPGibbsStep):
    """Gibbs step drawing s from NormProduct(nμ(θ), nΣ(θ), y, diag σ²) on its valid region.

    The CLT mean and covariance come from the model graph at the current θ; the product with the
    noise model is :func:`~pymc_dp.kernels.norm_product`, and the restriction to the valid
    region is :func:`~pymc_dp.kernels.draw_truncated_normal` (bounded work, no rejection loop).

    Parameters
    ----------
    vars
        Latent statistics to sample; by default every ``{name}_s`` of a NoisySuffStat node.
    proposals
        Independent normal proposals tried before falling back to Gibbs sweeps.
    sweeps
        Whitened-coordinate Gibbs sweeps in the fallback.
    model, rng, initial_point, compile_kwargs, blocked
        As for :class:`~pymc_dp.model.step_methods.base.DPGibbsStep`.

    Notes
    -----
    Sampler stat ``n_fallback`` counts the statistics that moved by the fallback in a step;
    frequent fallbacks mean the CLT normal puts little mass on the valid region (tiny n).

    References
    ----------
    Bernstein & Sheldon (2018), Algorithm 1 lines 4-5 and subroutine NormProduct.
    """

    name = "dp_norm_product"
    role: ClassVar[str] = "it is not the latent statistic of a NoisySuffStat node"
    stats_dtypes_shapes: ClassVar[dict] = {"n_fallback": (np.int64, [])}
    op_type: ClassVar[type] = SuffStatRV

    def __init__(self, vars: Any = None, *, proposals: int = 16, sweeps: int = 4, **kwargs: Any):
        self.proposals = int(proposals)
        self.sweeps = int(sweeps)
        if self.proposals < 1 or self.sweeps < 1:
            raise ValueError(f"proposals and sweeps must be >= 1 (got {proposals}, {sweeps})")
        super().__init__(vars, **kwargs)

    def _setup(self, model: pm.Model, rvs: list, compile_kwargs: dict) -> None:
        outputs, self._plan = [], []
        for rv in rvs:
            info = self.links(rv)
            params = rv.owner.op.dist_params(rv.owner)
            if isinstance(rv.owner.op, WindowSuffStatRV):
                kind = "window"
            elif isinstance(rv.owner.op, SimplexSuffStatRV):
                kind = "simplex"
            else:
                kind = "interval"
            outputs.extend([*params, rv, model[info.noise_variance], model[info.name]])
            self._plan.append((len(params), kind, ValueWriter(model, rv, **compile_kwargs)))
        self._read = PointReader(model, outputs, **compile_kwargs)

    def step(self, point: dict) -> tuple[dict, list[dict]]:
        """Draw every s from its full conditional."""
        values = self._read(point)
        point = dict(point)
        pos, n_fallback = 0, 0
        for n_params, kind, writer in self._plan:
            params = values[pos : pos + n_params]
            current, sigma2, y = values[pos + n_params : pos + n_params + 3]
            pos += n_params + 3
            constraints, total = [], None
            if kind == "window":
                mean, cov, lower, upper, out_lower, out_upper, n, quadratic = params
                constraints = window_constraints(
                    size=out_lower.shape[-1],
                    out_lower=out_lower,
                    out_upper=out_upper,
                    total=n,
                    quadratic=bool(quadratic),
                )
            elif kind == "simplex":
                mean, cov, total = params
                lower, upper = 0.0, total
            else:
                mean, var, lower, upper = params
                mean, cov, total = np.reshape(mean, (1,)), np.reshape(var, (1, 1)), None
            draw = draw_suffstat(
                self.rng,
                clt_mean=mean,
                clt_cov=cov,
                released=np.reshape(y, -1),
                noise_variance=np.reshape(sigma2, -1),
                lower=lower,
                upper=upper,
                current=np.reshape(current, mean.shape),
                total=total,
                constraints=constraints,
                proposals=self.proposals,
                sweeps=self.sweeps,
            )
            n_fallback += draw.n_fallback
            point[writer.name] = writer(np.reshape(draw.value, np.shape(current)), point)
        return point, [{"n_fallback": n_fallback}]
