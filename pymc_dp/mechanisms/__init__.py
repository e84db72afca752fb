"""Privacy mechanisms: where release noise is drawn."""

from pymc_dp.mechanisms.laplace import MECHANISM_NAME, laplace_mechanism

__all__ = ["MECHANISM_NAME", "laplace_mechanism"]
