"""Privacy mechanisms: where release noise is drawn (and OPS, the paper's sampling baseline)."""

from pymc_dp.mechanisms.laplace import MECHANISM_NAME, laplace_mechanism, noise_scale
from pymc_dp.mechanisms.one_posterior import (
    one_posterior_sample,
    one_posterior_sample_from_statistic,
)
from pymc_dp.mechanisms.private_quantile import private_bounds, private_quantile
from pymc_dp.mechanisms.vetted import (
    DISCRETE_GAUSSIAN,
    DISCRETE_LAPLACE,
    LAPLACE_FLOAT,
    MECHANISMS,
    discrete_gaussian_mechanism,
    discrete_laplace_mechanism,
)

__all__ = [
    "DISCRETE_GAUSSIAN",
    "DISCRETE_LAPLACE",
    "LAPLACE_FLOAT",
    "MECHANISMS",
    "MECHANISM_NAME",
    "discrete_gaussian_mechanism",
    "discrete_laplace_mechanism",
    "laplace_mechanism",
    "noise_scale",
    "one_posterior_sample",
    "one_posterior_sample_from_statistic",
    "private_bounds",
    "private_quantile",
]
