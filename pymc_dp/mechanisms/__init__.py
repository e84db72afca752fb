"""Privacy mechanisms: where release noise is drawn."""

from pymc_dp.mechanisms.laplace import MECHANISM_NAME, laplace_mechanism
from pymc_dp.mechanisms.private_quantile import private_bounds, private_quantile

__all__ = ["MECHANISM_NAME", "laplace_mechanism", "private_bounds", "private_quantile"]
