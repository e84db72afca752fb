"""The node builders behind :class:`~pymc_dp.NoisySuffStat`, one per kind of observed node.

:mod:`~pymc_dp.model.nodes.collapsed` (s integrated out: CLT or exact sum),
:mod:`~pymc_dp.model.nodes.gaussian` (Gaussian-mechanism releases),
:mod:`~pymc_dp.model.nodes.records` (record-level latent records),
:mod:`~pymc_dp.model.nodes.grouped` and :mod:`~pymc_dp.model.nodes.grouped_vector` (one release
per group); :mod:`~pymc_dp.model.nodes.info` is what a node records about itself for the step
methods and for ArviZ.
"""
