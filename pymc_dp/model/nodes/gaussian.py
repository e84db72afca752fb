"""The observed node of a Gaussian-mechanism release under the CLT: s integrated out, no σ².

A release made with the Gaussian mechanism has y | s ~ N(s, τ² I), so under the CLT for s the
released y | θ is normal itself and the Laplace nodes' mixing variances have no counterpart:

* a one-number statistic (Bernoulli, Binomial, every windowed family with one statistic):
  :class:`~pymc_dp.likelihoods.collapsed_gaussian.CollapsedGaussian`, the normal product with
  s's valid region, exactly as :class:`~pymc_dp.model.distributions.CollapsedLaplace` treats it;
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
import numpy.typing as npt
import pymc as pm
import pytensor.tensor as pt

from pymc_dp.curator.record import Release
from pymc_dp.families import Categorical, ExponentialFamily, TruncatedFamily
from pymc_dp.kernels.exact_counts import NoiseLaw
from pymc_dp.likelihoods.collapsed_gaussian import CollapsedGaussian
from pymc_dp.likelihoods.released_normal import ReleasedNormal
from pymc_dp.mechanisms import DISCRETE_GAUSSIAN
from pymc_dp.model.nodes.collapsed import grid_ready, register_collapsed
from pymc_dp.model.nodes.info import GRID_TAG, INDEPENDENCE_TAG

__all__ = ["gaussian_collapsed_node"]


def gaussian_collapsed_node(
    model: pm.Model,
    name: str,
    *,
    family: ExponentialFamily,
    theta: pt.TensorVariable,
    release: Release,
    n: int,
    value: npt.NDArray[np.float64],
    bounds: tuple[float, float] | None,
    stat_dim: str | None,
) -> pt.TensorVariable:
    """Add y | θ of a Gaussian-mechanism release with s integrated out (CLT); return y.

    The noise's σ is the release's :attr:`~pymc_dp.Release.scale` (OpenDP's discrete Gaussian
    scale times the statistic's quantum), modelled by the continuous normal of that σ.
    """
    scale = float(release.scale)
    noise_var = scale * scale
    observed = np.asarray(value, dtype=np.float64)
    with model:
        if family.stat_shape == () or getattr(family, "stat_size", 0) == 1:
            mean, var, lower, upper = family.released_clt(theta, n, bounds)
            y = CollapsedGaussian(
                name,
                mean=mean,
                var=var,
                lower=lower,
                upper=upper,
                scale=scale,
                observed=observed.reshape(()),
            )
        elif isinstance(family, Categorical):
            mu, sigma = family.moments(theta)
            eye = np.eye(family.categories)
            y = ReleasedNormal(
                name, n * mu, n * sigma + noise_var * eye, observed=observed, dims=stat_dim
            )
        elif isinstance(family, TruncatedFamily) and family.stat_size == 2:
            mean, cov = family.joint_clt(theta, n, bounds)
            y = ReleasedNormal(
                name,
                mean[:2],
                cov[:2, :2] + noise_var * np.eye(2),
                observed=observed,
                dims=stat_dim,
            )
        else:  # pragma: no cover - every family is one of the above
            raise TypeError(f"no Gaussian-mechanism node for {family!r}")
    register_collapsed(
        model,
        name,
        y,
        theta,
        release=release,
        family=family,
        n=n,
        epsilon=release.epsilon,
        sensitivity=release.sensitivity,
        value=value,
        bounds=bounds,
        noise=NoiseLaw(DISCRETE_GAUSSIAN, scale),
    )
    if y.type.ndim == 0:
        if grid_ready(model, theta):
            setattr(theta.tag, GRID_TAG, True)
    elif isinstance(family, Categorical):
        if grid_ready(model, theta, ndim=1):
            # A Dirichlet θ: its conditional given y is fixed, as for the exact node.
            setattr(theta.tag, INDEPENDENCE_TAG, True)
    return y
