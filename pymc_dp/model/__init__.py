"""The PyMC adapters: the analyst's model of a release, and the steps that sample it.

:class:`~pymc_dp.NoisySuffStat` puts a release into a PyMC model (its node builders are in
:mod:`~pymc_dp.model.nodes`, its latent-variable distributions in
:mod:`~pymc_dp.model.distributions`); importing this package registers the DP Gibbs step methods
(:mod:`~pymc_dp.model.step_methods`) with ``pm.sample``. :func:`~pymc_dp.sample_latent` adds
exact draws of s and σ² to a collapsed fit; :mod:`~pymc_dp.model.priors` gives default priors
from public information, :mod:`~pymc_dp.model.ready_made` one model per family (also
``pymc_dp.models``) and :mod:`~pymc_dp.model.hierarchical` partially pooled grouped models.
"""

from pymc_dp.model import step_methods
from pymc_dp.model.backends import register_when_imported
from pymc_dp.model.latent import sample_latent
from pymc_dp.model.noisy_suffstat import NoisySuffStat
from pymc_dp.model.ready_made import build_model

# pm.sample(nuts_sampler="numpyro" or "blackjax") finds pymc_dp's Ops implemented in JAX.
register_when_imported()

__all__ = ["NoisySuffStat", "build_model", "sample_latent", "step_methods"]
