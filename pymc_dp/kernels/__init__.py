"""Pure NumPy kernels, one per conditional draw of the DP Gibbs sampler.

Each kernel takes a :class:`numpy.random.Generator` first and everything else by keyword, imports
nothing from PyMC, keeps no state and accepts leading batch dimensions, so one call can advance
many chains or many calibration trials at once.
"""

from pymc_dp.kernels.conjugate import (
    draw_beta,
    draw_dirichlet,
    draw_gamma,
    draw_normal,
    draw_normal_inverse_gamma,
)
from pymc_dp.kernels.constraints import (
    Constraint,
    LinearConstraint,
    PSDConstraint,
    QuadraticConstraint,
    window_constraints,
)
from pymc_dp.kernels.grid import GridDensity, draw_from_grid, grid_density
from pymc_dp.kernels.group_jump import JumpProposal, jump
from pymc_dp.kernels.noise_variance import draw_noise_variance, noise_variance_logpdf
from pymc_dp.kernels.norm_product import norm_product
from pymc_dp.kernels.suffstat import draw_suffstat
from pymc_dp.kernels.truncated_normal import TruncatedDraw, draw_truncated_normal

__all__ = [
    "Constraint",
    "GridDensity",
    "JumpProposal",
    "LinearConstraint",
    "PSDConstraint",
    "QuadraticConstraint",
    "TruncatedDraw",
    "draw_beta",
    "draw_dirichlet",
    "draw_from_grid",
    "draw_gamma",
    "draw_noise_variance",
    "draw_normal",
    "draw_normal_inverse_gamma",
    "draw_suffstat",
    "draw_truncated_normal",
    "grid_density",
    "jump",
    "noise_variance_logpdf",
    "norm_product",
    "window_constraints",
]
