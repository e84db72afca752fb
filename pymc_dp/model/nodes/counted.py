"""The observed node of a window sum released with the window's count.

A windowed release of a one-number statistic may carry, beside ŝ = Σ 1[a ≤ x ≤ b] t(x), the
noisy number of records inside the window (``Release.window_count``). Per record the pair is
t̃(x) = (t(x)·1[a ≤ x ≤ b], 1[a ≤ x ≤ b]), whose CLT is
:meth:`~pymc_dp.families.TruncatedFamily.counted_clt`; each component has its own Laplace noise
(Δ/ε_sum and 1/ε_count). So y | θ is the bivariate normal–Laplace convolution the windowed
Normal's (Σz, Σz²) uses (:func:`~pymc_dp.likelihoods.collapsed_pair.CollapsedLaplacePair`, with
its JAX and Numba support), and θ is drawn as for the scalar collapsed node: a scalar θ with a
fixed prior by :class:`~pymc_dp.GridStep`, any other θ by NUTS.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pymc_dp.likelihoods.collapsed_pair import CollapsedLaplacePair
from pymc_dp.model.nodes.collapsed import mark_theta
from pymc_dp.model.nodes.info import NodeRelease, register_node

__all__ = ["COUNTED_STATS", "counted_node"]

COUNTED_STATS = ("window_sum", "window_count")
"""Coordinates of the observed pair's dimension ``{name}_stat``."""


def counted_node(
    model: pm.Model, name: str, spec: NodeRelease, *, theta: pt.TensorVariable
) -> pt.TensorVariable:
    """Add y = (window sum, window count) | θ with both statistics integrated out; return y.

    ``spec.release`` must carry ``window_count`` and ``count_epsilon``. The node records its
    release as any other (the JSON holds the count) with ``counted=True``;
    :func:`~pymc_dp.sample_latent` draws no latent statistic for it.
    """
    rel = spec.release
    family, n, bounds = spec.family, spec.n, spec.bounds
    mean, cov = family.counted_clt(theta, n, bounds)
    observed = np.array([float(np.asarray(spec.value).reshape(())), rel.window_count])
    scale = np.array([spec.sensitivity / spec.epsilon, rel.count_scale])
    dim = f"{name}_stat"
    if dim not in model.coords:
        model.add_coord(dim, list(COUNTED_STATS))
    with model:
        y = CollapsedLaplacePair(name, mean=mean, cov=cov, scale=scale, observed=observed, dims=dim)
    register_node(model, name, spec, y, theta_graph=theta, collapsed=True, counted=True)
    mark_theta(model, theta)
    return y
