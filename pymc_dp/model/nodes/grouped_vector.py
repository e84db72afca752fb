"""The observed node of a grouped release of a vector statistic: K counts, or a window's pair.

:func:`~pymc_dp.model.nodes.grouped.grouped_node` hands these releases here. θ_g is row g of a
``(G, …)`` tensor, y has shape ``(G, k)`` (dimensions: the groups, then ``{name}_category`` or
``{name}_stat``), and each group's likelihood is the one a single release of that family gets,
evaluated for every group at once:

=====================  =========================  ==================================================
release                likelihood                 per group, as for one release
=====================  =========================  ==================================================
Categorical counts     exact                      the multinomial sum of
                                                  :func:`~pymc_dp.likelihoods.exact.multinomial_exact_logp`
Categorical counts     CLT (counts latent)        y_g ~ Laplace(s_g, Δ/ε), s_g the CLT normal's
                                                  counts, non-centred (below)
Categorical, Gaussian  CLT                        y_g ~ N(n_g p_g, n_g (diag p_g − p_g p_gᵀ) + τ² I)
Normal, LogNormal      CLT (pair, ŝ₁ latent)      ŝ₁_g a model variable (``{name}_s1``, in
                                                  standard units of its posterior given y₁) and
                                                  ŝ₂_g integrated given it, in closed form
                                                  (:func:`~pymc_dp.likelihoods.collapsed_pair.pair_given_first_logp`);
                                                  N(m_g, V_g + τ² I) for a Gaussian mechanism
=====================  =========================  ==================================================

Categorical counts with Laplace noise under the CLT have no closed form once s is integrated
(a multivariate normal against a product of Laplace kernels), so their counts stay latent, as in
the model a user writes by hand: s_g = (s_g1, …, s_gK) with s_gK = n_g − Σ_{j<K} s_gj, each
s_gj given the earlier ones the joint CLT normal's conditional, N((n_g − S_g,j−1) q_gj,
n_g p_gj (1 − P_gj)/(1 − P_g,j−1)) with P_gj = p_g1 + … + p_gj and q_gj = p_gj/(1 − P_g,j−1),
non-centred (``{name}_s_std``, one standard normal per group and count), and y_g ~ Laplace(s_g,
Δ/ε) (:func:`_laplace_counts`). NUTS samples the counts with θ, so every NUTS backend runs it;
``"auto"`` takes it where the CLT is trusted in every group, and the exact sum (one operation
for every group) otherwise, where affordable.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.tensor.variable import TensorVariable

from pymc_dp.curator.release_set import ReleaseSet
from pymc_dp.families import Categorical, ExponentialFamily
from pymc_dp.kernels.exact_counts import NoiseLaw
from pymc_dp.likelihoods.choice import noise_law
from pymc_dp.likelihoods.clt import grouped_joint_clt, grouped_joint_clt_entries
from pymc_dp.likelihoods.collapsed_pair import (
    LaplacePairGivenFirst,
    conditional_second,
    first_statistic,
)
from pymc_dp.likelihoods.grouped import GroupedExactCounts
from pymc_dp.likelihoods.released_normal import ReleasedNormal
from pymc_dp.mechanisms import DISCRETE_GAUSSIAN

__all__ = ["group_theta", "vector_grouped_y"]


def group_theta(family: ExponentialFamily, dist: TensorVariable, size: int) -> TensorVariable:
    """θ of every group, shape ``(G, d)``: row g is θ_g (p_g, or (μ_g, σ²_g)).

    A θ with no group dimension is shared by every group.

    Raises
    ------
    ValueError
        If θ's leading dimension is not the number of groups.
    """
    if isinstance(family, Categorical):
        theta = pt.as_tensor_variable(family.theta_of(dist))
    else:
        # The pair families' θ stacks (μ, σ²) first; broadcast μ and σ against each other so
        # that a per-group μ may share one σ, and put the group dimension first.
        params = dist.owner.op.dist_params(dist.owner)
        theta = family.theta_of(family.pymc_distribution.dist(*pt.broadcast_arrays(*params)))
        theta = pt.moveaxis(theta, 0, -1)
    if theta.type.ndim > 2 or (theta.type.ndim == 2 and theta.type.shape[0] not in (None, size)):
        raise ValueError(
            f"θ of a grouped {family.name} release must have one row per group ({size}) or "
            f"none (shared by every group), got static shape {theta.type.shape}; give the "
            "per-group parameters the group dimension first"
        )
    return pt.broadcast_to(theta, (size, theta.shape[-1]))


def vector_grouped_y(
    name: str,
    *,
    family: ExponentialFamily,
    theta: TensorVariable,
    release: ReleaseSet,
    choice: str,
    dims: tuple[str, str],
) -> tuple[TensorVariable, NoiseLaw | None]:
    """Add the observed y of shape ``(G, k)`` (inside a model context); return it and its noise.

    ``theta`` is :func:`group_theta`'s ``(G, d)``; ``choice`` is ``"exact"`` or ``"clt"``;
    ``dims`` names the groups and the statistic's components. The noise law is ``None`` for the
    Laplace pair, as for one release.
    """
    rel = release.first
    sizes = release.n
    value = np.asarray(release.value, dtype=np.float64).reshape(len(release), -1)
    k = value.shape[1]
    if choice == "exact":  # Categorical counts: continuous records have no grouped exact node
        noise = noise_law(rel.mechanism, rel.scale, rel.quantum)
        y = GroupedExactCounts(
            name,
            theta,
            n=sizes,
            categories=family.categories,
            noise=noise,
            observed=value,
            dims=dims,
        )
        return y, noise
    if rel.mechanism != DISCRETE_GAUSSIAN:
        if isinstance(family, Categorical):
            return _laplace_counts(name, theta, release, value, dims), None
        return _laplace_pair(name, family, theta, release, value, dims), None
    mean, cov = _group_clt(family, theta, sizes, rel.bounds)
    scale = float(rel.scale)
    y = ReleasedNormal(name, mean, cov + scale * scale * np.eye(k), observed=value, dims=dims)
    return y, NoiseLaw(DISCRETE_GAUSSIAN, scale)


def _laplace_pair(
    name: str,
    family: ExponentialFamily,
    theta: TensorVariable,
    release: ReleaseSet,
    value: np.ndarray,
    dims: tuple[str, str],
) -> TensorVariable:
    """The Laplace-noised pair: ŝ₁ of each group a model variable, ŝ₂ integrated given it.

    One closed-form term per group, where integrating ŝ₁ too (CollapsedLaplacePair, one
    release) takes a quadrature; the CLT entries enter one by one (elementwise graphs).
    """
    rel = release.first
    (m1, m2), covs = grouped_joint_clt_entries(family, theta, release.n, rel.bounds)
    first = first_statistic(f"{name}_s1", value[:, 0], m1, covs[0, 0], rel.scale, dims=dims[0])
    centre, var = conditional_second(first, m1, m2, covs[0, 0], covs[0, 1], covs[1, 1])
    scale = np.full(value.shape[1], rel.scale)
    return LaplacePairGivenFirst(name, first, centre, var, scale, observed=value, dims=dims)


def _laplace_counts(
    name: str,
    theta: TensorVariable,
    release: ReleaseSet,
    value: np.ndarray,
    dims: tuple[str, str],
) -> TensorVariable:
    """Laplace-noised Categorical counts: each group's counts latent, from the CLT normal.

    The module docstring gives the chain of conditionals; the first K − 1 counts are
    non-centred on ``{name}_s_std`` (dimensions: the groups, then ``{name}_s_count``).
    """
    n = np.asarray(release.n, dtype=np.float64)
    k = value.shape[1]
    model = pm.modelcontext(None)
    count_dim = f"{name}_s_count"
    if count_dim not in model.coords:
        model.add_coord(count_dim, list(model.coords[dims[1]])[: k - 1])
    std = pm.Normal(f"{name}_s_std", 0.0, 1.0, dims=(dims[0], count_dim))
    counts, left, before = [], pt.as_tensor_variable(n), 0.0  # n_g − S_g,j−1 and P_g,j−1
    for j in range(k - 1):
        p_j = theta[:, j]
        rest = 1.0 - before
        var = n * p_j * (rest - p_j) / rest
        s_j = left * p_j / rest + pt.sqrt(var) * std[:, j]
        counts.append(s_j)
        left, before = left - s_j, before + p_j
    s = pt.stack([*counts, left], axis=-1)
    scale = float(release.first.scale)
    return pm.Laplace(name, mu=s, b=scale, observed=value, dims=dims)


def _group_clt(
    family: ExponentialFamily, theta: TensorVariable, sizes: Any, bounds: Any
) -> tuple[TensorVariable, TensorVariable]:
    """CLT mean ``(G, k)`` and covariance ``(G, k, k)`` of each group's released statistic."""
    if isinstance(family, Categorical):
        mu, sigma = family.moments(theta)  # batched over the leading group dimension
        n = np.asarray(sizes, dtype=np.float64)
        return n[:, None] * mu, n[:, None, None] * sigma
    return grouped_joint_clt(family, theta, sizes, bounds)
