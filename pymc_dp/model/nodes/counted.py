"""The observed node of a window sum released with the window's count.

A windowed release of a one-number statistic may carry, beside ŝ = Σ 1[a ≤ x ≤ b] t(x), the
noisy number of records inside the window (``Release.window_count``). Per record the pair is
t̃(x) = (t(x)·1[a ≤ x ≤ b], 1[a ≤ x ≤ b]), whose CLT is
:meth:`~pymc_dp.families.TruncatedFamily.counted_clt`; each component has its own Laplace noise
(Δ/ε_sum and 1/ε_count). So y | θ is the bivariate normal–Laplace convolution the windowed
Normal's (Σz, Σz²) uses (:func:`~pymc_dp.likelihoods.collapsed_pair.CollapsedLaplacePair`, with
its JAX and Numba support), and θ is drawn as for the scalar collapsed node: a scalar θ with a
fixed prior by :class:`~pymc_dp.GridStep`, any other θ by NUTS.

A grouped release whose groups carry their counts (``ReleaseSet.window_count``) gets the same
pair in every group (:func:`grouped_counted_y`): y of shape ``(G, 2)``, the CLT moments of one
record vectorised over the groups' θ_g (:func:`grouped_counted_clt`), each group's window sum
latent and its count integrated given it, as for the grouped windowed Normal's pair.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pymc as pm
import pytensor.tensor as pt
from pytensor.graph.replace import vectorize_graph

from pymc_dp.curator.release_set import ReleaseSet
from pymc_dp.families import ExponentialFamily, Poisson
from pymc_dp.likelihoods.collapsed_pair import (
    CollapsedLaplacePair,
    LaplacePairGivenFirst,
    conditional_second,
    first_statistic,
)
from pymc_dp.likelihoods.counted_window import counted_poisson_model
from pymc_dp.model.nodes.collapsed import mark_theta
from pymc_dp.model.nodes.info import NodeRelease, register_node

__all__ = ["COUNTED_STATS", "counted_node", "grouped_counted_clt", "grouped_counted_y"]

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


def grouped_counted_clt(
    family: ExponentialFamily, theta: Any, sizes: npt.ArrayLike, bounds: tuple[float, float]
) -> tuple[pt.TensorVariable, pt.TensorVariable]:
    """CLT mean ``(G, 2)`` and covariance ``(G, 2, 2)`` of each group's (window sum, count).

    :meth:`~pymc_dp.families.TruncatedFamily.counted_clt` of one record, vectorised over θ_g
    (shape ``(G,)``) and scaled by n_g: one graph whatever the number of groups.
    """
    core = family.prior_example().type()
    theta = pt.as_tensor_variable(theta)
    if theta.type.ndim != core.type.ndim + 1:
        raise ValueError(
            f"θ must have the groups first and then θ's shape {core.type.shape} "
            f"(got static shape {theta.type.shape})"
        )
    mean1, cov1 = family.counted_clt(core, 1, bounds)
    mean, cov = vectorize_graph([mean1, cov1], replace={core: theta})
    n = np.asarray(sizes, dtype=np.float64).reshape(-1)
    return n[:, None] * mean, n[:, None, None] * cov


def grouped_counted_y(
    model: pm.Model,
    name: str,
    *,
    family: ExponentialFamily,
    theta: pt.TensorVariable,
    release: ReleaseSet,
    dims: str,
) -> pt.TensorVariable:
    """Add y_g = (window sum, window count) | θ_g for every group (inside ``model``); return y.

    ``theta`` holds θ_g, shape ``(G,)``; y has dimensions ``(dims, {name}_stat)``. As the
    grouped windowed Normal's pair (:mod:`pymc_dp.model.nodes.grouped_vector`), each group's
    window sum ŝ₁ is a model variable (``{name}_s1``, in standard units of its posterior given
    y₁: :func:`~pymc_dp.likelihoods.collapsed_pair.first_statistic`) and its count is
    integrated given it in closed form
    (:func:`~pymc_dp.likelihoods.collapsed_pair.LaplacePairGivenFirst`): one elementwise term
    per group, where integrating ŝ₁ too (:func:`counted_node`'s quadrature) costs about 6 ms a
    call whatever G. Integrating ŝ₁ out of the model gives each group's
    :func:`~pymc_dp.likelihoods.collapsed_pair.pair_logp` of :func:`grouped_counted_clt`.

    A Poisson window's two log densities and their gradient are one compiled operation per
    group (:mod:`~pymc_dp.likelihoods.counted_window`); other families take the graph.
    """
    rel = release.first
    size = len(release)
    observed = np.stack(
        [np.asarray(release.value, dtype=np.float64).reshape(size), release.window_count], axis=1
    )
    dim = f"{name}_stat"
    if dim not in model.coords:
        model.add_coord(dim, list(COUNTED_STATS))
    if isinstance(family, Poisson):
        v, w = family.window_edges(rel.bounds)
        with model:
            return counted_poisson_model(
                name,
                eta=family.natural_parameters(pt.as_tensor_variable(theta)),
                n=release.n,
                value=observed,
                noise_scales=(float(rel.scale), float(rel.count_scale)),
                spec=(v + 1.0, w),
                dims=(dims, dim),
            )
    mean, cov = grouped_counted_clt(family, theta, release.n, rel.bounds)
    m1, m2, v11, v12, v22 = mean[:, 0], mean[:, 1], cov[:, 0, 0], cov[:, 0, 1], cov[:, 1, 1]
    with model:
        first = first_statistic(f"{name}_s1", observed[:, 0], m1, v11, rel.scale, dims=dims)
        centre, var = conditional_second(first, m1, m2, v11, v12, v22)
        scale = np.array([float(rel.scale), float(rel.count_scale)])
        return LaplacePairGivenFirst(
            name, first, centre, var, scale, observed=observed, dims=(dims, dim)
        )
