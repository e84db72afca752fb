"""Pure NumPy kernels of regression: conditional draws and densities, batch dimensions first.

:mod:`~pymc_dp.regression.kernels.suffstat` draws the latent statistic (Gibbs-SS),
:mod:`~pymc_dp.regression.kernels.conjugate` and :mod:`~pymc_dp.regression.kernels.data_model`
the Normal–Inverse-Gamma and normal–inverse-Wishart updates,
:mod:`~pymc_dp.regression.kernels.moments` the CLT moments of the statistic,
:mod:`~pymc_dp.regression.kernels.collapsed` and :mod:`~pymc_dp.regression.kernels.moment_move`
the target and moves of the default collapsed sampler.
"""

from pymc_dp.regression.kernels.suffstat import (
    SuffStatDraw,
    draw_regression_suffstat,
    is_valid_statistic,
    psd_constraint,
)

__all__ = ["SuffStatDraw", "draw_regression_suffstat", "is_valid_statistic", "psd_constraint"]
