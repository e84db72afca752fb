"""PyMC step methods for the DP Gibbs sampler, registered with ``pm.sample`` on import."""

from pymc_dp._compat import register_step_methods
from pymc_dp.model.step_methods.conjugate import ConjugateStep
from pymc_dp.model.step_methods.grid import GridStep
from pymc_dp.model.step_methods.group_jump import GroupJumpStep, grouped_steps, jump_rounds
from pymc_dp.model.step_methods.independence import IndependenceStep
from pymc_dp.model.step_methods.noise_variance import NoiseVarianceStep
from pymc_dp.model.step_methods.norm_product import NormProductStep
from pymc_dp.model.step_methods.records import RecordStep

__all__ = [
    "ConjugateStep",
    "GridStep",
    "GroupJumpStep",
    "IndependenceStep",
    "NoiseVarianceStep",
    "NormProductStep",
    "RecordStep",
    "grouped_steps",
    "jump_rounds",
]

register_step_methods(
    [ConjugateStep, GridStep, IndependenceStep, NormProductStep, NoiseVarianceStep, RecordStep]
)
