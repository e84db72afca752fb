"""The batched engine: the DP Gibbs sampler for many releases at once, in NumPy.

:func:`sample_gibbs` runs Algorithm 1 of Bernstein & Sheldon (2018) (or its collapsed and exact
variants) over a batch of releases with the same kernels and likelihoods as ``pm.sample``, without
PyMC's per-model cost; the calibration studies use it. The conditional draws it shares with the
PyMC step methods (:mod:`~pymc_dp.engine.collapsed`, :mod:`~pymc_dp.engine.pair`,
:mod:`~pymc_dp.engine.records`) live here too; each takes its releases as one
:class:`~pymc_dp.engine.batch.ReleaseBatch`.
"""

from pymc_dp.engine.batch import ReleaseBatch
from pymc_dp.engine.collapsed import sample_collapsed
from pymc_dp.engine.gibbs import GibbsTrace, sample_gibbs
from pymc_dp.engine.pair import sample_collapsed_pair
from pymc_dp.engine.records import sample_records

__all__ = [
    "GibbsTrace",
    "ReleaseBatch",
    "sample_collapsed",
    "sample_collapsed_pair",
    "sample_gibbs",
    "sample_records",
]
