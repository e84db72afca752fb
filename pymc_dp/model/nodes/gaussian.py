"""The observed node of a Gaussian-mechanism release under the CLT: s integrated out, no σ².

A release made with the Gaussian mechanism has y | s ~ N(s, τ² I), so under the CLT for s the
released y | θ is normal itself and the Laplace nodes' mixing variances have no counterpart:

* a one-number statistic (Bernoulli, Binomial, every windowed family with one statistic):
  :class:`~pymc_dp.likelihoods.collapsed_gaussian.CollapsedGaussian`, the normal product with
  s's valid region, exactly as :class:`~pymc_dp.likelihoods.CollapsedLaplace` treats it;
* Categorical counts: y | θ ~ N(nμ, nΣ + τ² I) (nΣ is singular, rows summing to 0; τ² I makes
  the sum positive definite, as diag σ² does in the Laplace partially collapsed node);
* a window's (Σz, Σz²): y | θ ~ N(m, V + τ² I), the bivariate normal of ŝ's window moments.

θ is then sampled as for the Laplace collapsed nodes: a scalar θ with a fixed prior by
:class:`~pymc_dp.GridStep`, a Dirichlet θ by :class:`~pymc_dp.IndependenceStep`, anything else
(the pair's (μ, σ²) included) by NUTS with the gradients of these closed forms;
:func:`~pymc_dp.sample_latent` adds exact draws of s | θ, y afterwards. The pair is not handed
to IndependenceStep as the Laplace pair is: its fitted proposal missed the main mode of a
bimodal Gaussian-pair posterior (n = 3000, window (−5, 7), N(1, 4) records: all four chains in
the 6% minor mode at μ ≈ 10.7).
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pymc_dp.families import Categorical, TruncatedFamily
from pymc_dp.kernels.exact_counts import NoiseLaw
from pymc_dp.likelihoods.released_normal import ReleasedNormal
from pymc_dp.mechanisms import DISCRETE_GAUSSIAN
from pymc_dp.model.nodes.collapsed import collapsed_node, collapsed_pair_node, mark_theta
from pymc_dp.model.nodes.info import NodeRelease, register_node

__all__ = ["gaussian_collapsed_node"]


def gaussian_collapsed_node(
    model: pm.Model,
    name: str,
    spec: NodeRelease,
    *,
    theta: pt.TensorVariable,
    stat_dim: str | None,
) -> pt.TensorVariable:
    """Add y | θ of a Gaussian-mechanism release with s integrated out (CLT); return y.

    The noise's σ is the release's :attr:`~pymc_dp.Release.scale` (OpenDP's discrete Gaussian
    scale times the statistic's quantum), modelled by the continuous normal of that σ. A scalar
    statistic and a window's pair get the node of their law of s with this noise
    (:func:`~pymc_dp.model.nodes.collapsed.collapsed_node`,
    :func:`~pymc_dp.model.nodes.collapsed.collapsed_pair_node`); Categorical counts the
    normal here.
    """
    family, n = spec.family, spec.n
    noise = NoiseLaw(DISCRETE_GAUSSIAN, float(spec.release.scale))
    if family.stat_shape == () or getattr(family, "stat_size", 0) == 1:
        return collapsed_node(model, name, spec, theta=theta, noise=noise)
    if isinstance(family, TruncatedFamily) and family.stat_size == 2:
        return collapsed_pair_node(model, name, spec, theta=theta, stat_dim=stat_dim, noise=noise)
    if not isinstance(family, Categorical):  # pragma: no cover - every family is one of these
        raise TypeError(f"no Gaussian-mechanism node for {family!r}")
    mu, sigma = family.moments(theta)
    cov = n * sigma + noise.scale * noise.scale * np.eye(family.categories)
    observed = np.asarray(spec.value, dtype=np.float64)
    with model:
        y = ReleasedNormal(name, n * mu, cov, observed=observed, dims=stat_dim)
    register_node(model, name, spec, y, theta_graph=theta, collapsed=True, noise=noise)
    # A Dirichlet θ: its conditional given y is fixed, as for the exact node.
    mark_theta(model, theta)
    return y
