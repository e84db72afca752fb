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
                                                  counts, standardised (below)
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
each in standard units of that conditional combined with its released count
(``{name}_s_std``, one value per group and count; :func:`_count_chain`), and y_g ~ Laplace(s_g,
Δ/ε) (:func:`_laplace_counts`). NUTS samples the counts with θ, so every NUTS backend runs it.
``"auto"`` decides each group: the exact sum where the CLT is untrusted and the sum affordable
(one operation for those groups), the CLT elsewhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.graph.basic import Constant
from pytensor.scalar.basic import Second
from pytensor.tensor.basic import Alloc, Join, MakeVector
from pytensor.tensor.elemwise import DimShuffle, Elemwise
from pytensor.tensor.variable import TensorVariable

from pymc_dp.curator.release_set import ReleaseSet
from pymc_dp.families import Categorical, ExponentialFamily
from pymc_dp.families.normal_window import NormalWindowMoments
from pymc_dp.kernels.exact_counts import NoiseLaw
from pymc_dp.likelihoods.choice import noise_law
from pymc_dp.likelihoods.clt import grouped_joint_clt, grouped_joint_clt_entries
from pymc_dp.likelihoods.collapsed_pair import (
    LaplacePairGivenFirst,
    conditional_second,
    first_statistic,
)
from pymc_dp.likelihoods.exact import MultinomialCounts, draw_noise
from pymc_dp.likelihoods.grouped import GroupedExactCounts
from pymc_dp.likelihoods.pair_window import window_pair_model
from pymc_dp.likelihoods.released_normal import ReleasedNormal, small_mvnormal_logp
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
    choices: Sequence[str],
    dims: tuple[str, str],
) -> tuple[TensorVariable, NoiseLaw | None]:
    """Add the observed y of shape ``(G, k)`` (inside a model context); return it and its noise.

    ``theta`` is :func:`group_theta`'s ``(G, d)``; ``choices`` holds ``"exact"`` or ``"clt"``
    for each group (both only for Categorical counts); ``dims`` names the groups and the
    statistic's components. The noise law is ``None`` for the Laplace pair, as for one release.
    """
    rel = release.first
    sizes = release.n
    value = np.asarray(release.value, dtype=np.float64).reshape(len(release), -1)
    k = value.shape[1]
    choice = choices[0] if len(set(choices)) == 1 else "mixed"
    if choice == "mixed":
        noise = noise_law(rel.mechanism, rel.scale, rel.quantum)
        return _mixed_counts(name, family, theta, release, value, choices, noise, dims), noise
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
    release) takes a quadrature; the CLT entries enter one by one (elementwise graphs), for
    the Normal families straight from θ's components (μ_g, σ²_g), so that the gradient has no
    stacking of θ either.
    """
    rel = release.first
    if isinstance(family, NormalWindowMoments):
        # θ = (μ, σ²), as many parts as the statistic; one compiled operation per group
        # (pair_window) gives both log densities and their gradient.
        loc, scale = family.location_scale(_theta_parts(theta, family.stat_size))
        return window_pair_model(
            name,
            loc=loc,
            scale=scale,
            n=release.n,
            value=value,
            noise_scale=rel.scale,
            spec=family.window_spec(rel.bounds),
            dims=dims,
        )
    (m1, m2), covs = grouped_joint_clt_entries(family, theta, release.n, rel.bounds)
    v11, v12, v22 = covs[0, 0], covs[0, 1], covs[1, 1]
    first = first_statistic(f"{name}_s1", value[:, 0], m1, v11, rel.scale, dims=dims[0])
    centre, var = conditional_second(first, m1, m2, v11, v12, v22)
    scale = np.full(value.shape[1], rel.scale)
    return LaplacePairGivenFirst(name, first, centre, var, scale, observed=value, dims=dims)


def _theta_parts(theta: TensorVariable, size: int) -> list[TensorVariable]:
    """θ_g's components (each broadcastable against the groups), read off the stack of them.

    :func:`group_theta` stacks θ's components (a Join, or a MakeVector of scalars) and
    broadcasts; the components themselves are what an elementwise graph wants. Any other θ is
    indexed.
    """
    inner = theta.owner.inputs[0] if theta.owner and isinstance(theta.owner.op, Alloc) else theta
    node = inner.owner
    if node is not None and isinstance(node.op, MakeVector) and len(node.inputs) == size:
        return [_unfilled(x) for x in node.inputs]
    if node is not None and isinstance(node.op, DimShuffle) and node.op.new_order == (1, 0):
        stack = node.inputs[0].owner
        if stack is not None and isinstance(stack.op, Join) and len(stack.inputs) == size + 1:
            axis, *rows = stack.inputs
            expanded = [r.owner for r in rows]
            if (
                isinstance(axis, Constant)
                and int(axis.data) == 0
                and all(
                    e is not None and isinstance(e.op, DimShuffle) and e.op.new_order == ("x", 0)
                    for e in expanded
                )
            ):
                return [_unfilled(e.inputs[0]) for e in expanded]
    return [theta[:, j] for j in range(size)]


def _unfilled(x: TensorVariable) -> TensorVariable:
    """``x`` before ``pt.broadcast_arrays`` filled it to the other component's shape.

    A σ shared by the groups then stays one number: its arithmetic (σ², σ³, σ⁴ of the window
    moments) runs once, not once per group inside the fused loop.
    """
    node = x.owner
    if node is not None and isinstance(node.op, Elemwise) and isinstance(node.op.scalar_op, Second):
        return node.inputs[1]
    return x


def _laplace_counts(
    name: str,
    theta: TensorVariable,
    release: ReleaseSet,
    value: np.ndarray,
    dims: tuple[str, str],
) -> TensorVariable:
    """Laplace-noised Categorical counts: each group's counts latent, from the CLT normal.

    The module docstring gives the chain of conditionals; the first K − 1 counts are
    standardised on ``{name}_s_std`` (dimensions: the groups, then ``{name}_s_count``).
    """
    scale = float(release.first.scale)
    s = _latent_counts(name, theta, release.n, value, scale, dims)
    return pm.Laplace(name, mu=s, b=scale, observed=value, dims=dims)


def _count_chain(
    u: Any, p: Any, n: Any, released: Any, scale: float, m: int, lib: Any = pt
) -> tuple[Any, Any]:
    """The CLT counts s_g,1..K−1 from their standardised u, and u's log density (per group).

    Count j given the earlier ones has the CLT conditional N(c_j, v_j) (module docstring). Its
    free variable is u_j with s_j = m_j + d_j·u_j, where N(m_j, d_j²) combines N(c_j, v_j) with
    y_j read as a normal of the Laplace noise's variance 2b², as
    :func:`~pymc_dp.likelihoods.collapsed_pair.first_statistic` does for ŝ₁. So u is of order
    one both where the noise is wide (s ≈ its prior: u is the non-centred standard normal) and
    where it is narrow against the counts' spread (s pinned within b of y, where the
    non-centred map ties each standard normal to θ), and its log density is the counts' CLT
    density times the Jacobian Π d_j: the law of s is the CLT's whatever the map.

    ``u``, ``p`` (the first m = K − 1 probabilities) and ``released`` (y's first m counts, or
    a sequence of those m columns) have the count last, ``n`` not; ``lib`` is
    ``pytensor.tensor`` (the model) or NumPy (draws, with ``u`` then the CLT draws' standard
    normals and the returned u their standardised values).
    """
    noise_var = 2.0 * scale * scale
    floor = (1e-6 * scale) ** 2  # as the collapsed nodes: v_j = 0 would divide by zero
    half_log_2pi, inv_noise_var = 0.5 * np.log(2.0 * np.pi), 1.0 / noise_var
    counts, logp, left, before = [], 0.0, n, 0.0  # n_g − S_g,j−1 and P_g,j−1
    for j in range(m):
        p_j = p[..., j]
        q = p_j / (1.0 - before)
        c = left * q
        v = n * p_j * (1.0 - q) + floor
        # With k = v/(v + 2b²): d² = k·2b² and m_j − c_j = k(y_j − c_j), so s_j − c_j needs
        # neither m_j nor 1/d, and log d − ½ log v = −½ log1p(v/2b²). Three divisions and one
        # log a count, where the plain form took seven and two (NUTS's gradient doubles them).
        k = v / (v + noise_var)
        d = lib.sqrt(k * noise_var)
        y_j = released[j] if isinstance(released, Sequence) else released[..., j]
        if lib is pt:
            gap = k * (y_j - c) + d * u[..., j]  # s_j − c_j
            s_j = c + gap
            logp = logp - 0.5 * gap * gap / v - half_log_2pi - 0.5 * lib.log1p(v * inv_noise_var)
            counts.append(s_j)
        else:  # a prior draw: s_j from N(c_j, v_j), reported as its u_j
            s_j = c + lib.sqrt(v) * u[..., j]
            counts.append((s_j - c - k * (y_j - c)) / d)
        left, before = left - s_j, before + p_j
    return lib.stack(counts, axis=-1), logp


def _latent_counts(
    name: str, theta: TensorVariable, n: Any, value: np.ndarray, scale: float, dims: tuple
) -> TensorVariable:
    """The CLT counts of the groups ``dims[0]`` (θ, n and y one row each): shape ``(G, K)``."""
    n = np.asarray(n, dtype=np.float64)
    k = value.shape[1]
    model = pm.modelcontext(None)
    count_dim = f"{name}_s_count"
    if count_dim not in model.coords:
        model.add_coord(count_dim, list(model.coords[dims[1]])[: k - 1])
    head = theta[:, : k - 1]
    released = np.asarray(value, dtype=np.float64)[:, : k - 1]
    # The graph takes y's columns as contiguous constants: a column sliced in the graph is a
    # strided view, which Numba addresses dynamically, so it would never cache the compiled
    # function and nutpie would pay its 9 s LLVM build in every process (tested).
    columns = [np.ascontiguousarray(released[:, j]) for j in range(k - 1)]

    def logp(u, p, n, y):
        return _count_chain(u, p, n, columns, scale, k - 1)[1]

    def random(p, n, y, rng=None, size=None):
        arrays = (np.asarray(a, dtype=np.float64) for a in (p, np.asarray(n)[..., None], y))
        p, n, y = np.broadcast_arrays(*arrays)
        shape = p.shape if size is None else (*np.atleast_1d(size), p.shape[-1])
        p, n, y = (np.broadcast_to(a, shape) for a in (p, n, y))
        return _count_chain(rng.normal(size=shape), p, n[..., 0], y, scale, k - 1, lib=np)[0]

    u = pm.CustomDist(
        f"{name}_s_std",
        head,
        n,
        released,
        logp=logp,
        random=random,
        signature="(m),(),(m)->(m)",
        dtype="float64",
        dims=(dims[0], count_dim),
    )
    s = _count_chain(u, head, n, columns, scale, k - 1)[0]
    return pt.concatenate([s, (n - pt.sum(s, axis=-1))[:, None]], axis=-1)


def _mixed_counts(
    name: str,
    family: ExponentialFamily,
    theta: TensorVariable,
    release: ReleaseSet,
    value: np.ndarray,
    choices: Sequence[str],
    noise: NoiseLaw,
    dims: tuple[str, str],
) -> TensorVariable:
    """Categorical counts, the exact sum in some groups and the CLT in the others.

    The CLT groups are modelled as when every group takes it: latent counts under Laplace noise
    (``{name}_s_std`` has the dimension ``{name}_s_group``, those groups' labels), the collapsed
    normal under Gaussian noise. One ``CustomDist`` holds both, so y stays one variable whose
    log density is each group's own.
    """
    exact = np.flatnonzero(np.asarray(choices) == "exact")
    clt = np.flatnonzero(np.asarray(choices) == "clt")
    sizes = np.asarray(release.n)
    model = pm.modelcontext(None)
    exact_law = MultinomialCounts(sizes[exact], family.categories, released=value[exact])
    gaussian = release.first.mechanism == DISCRETE_GAUSSIAN
    scale = float(release.first.scale)
    if gaussian:
        latent = pt.zeros_like(theta)  # unused: the CLT groups' counts are integrated
    else:
        group_dim = f"{name}_s_group"
        model.add_coord(group_dim, [list(model.coords[dims[0]])[g] for g in clt])
        clt_dims = (group_dim, dims[1])
        s_clt = _latent_counts(name, theta[clt], sizes[clt], value[clt], scale, clt_dims)
        latent = pt.set_subtensor(pt.zeros_like(theta)[clt], s_clt)

    def logp(value, theta, latent):
        out = pt.zeros(value.shape[:-1], dtype="float64")
        out = pt.set_subtensor(out[exact], exact_law.logp(value[exact], theta[exact], noise))
        if gaussian:
            mean, cov = _group_clt(family, theta[clt], sizes[clt], None)
            k = value.shape[-1]
            # The all-CLT node's density (ReleasedNormal): MvNormal's batched Cholesky and
            # triangular solves are Python-level loops over the groups (6 ms at 44 groups).
            part = small_mvnormal_logp(value[clt], mean, cov + scale * scale * pt.eye(k))
        else:
            part = pt.sum(-np.log(2.0 * scale) - pt.abs(value[clt] - latent[clt]) / scale, axis=-1)
        return pt.set_subtensor(out[clt], part)

    def random(theta, latent, rng=None, size=None):
        theta = np.asarray(theta, dtype=np.float64)
        s = np.array(np.broadcast_to(np.asarray(latent, dtype=np.float64), theta.shape))
        # Records are drawn as they are (multinomial counts) wherever the counts are not latent.
        drawn = exact if not gaussian else np.arange(theta.shape[-2])
        s[..., drawn, :] = rng.multinomial(sizes[drawn], theta[..., drawn, :])
        return s + draw_noise(rng, noise, s.shape)

    return pm.CustomDist(
        name,
        theta,
        latent,
        logp=logp,
        random=random,
        signature="(k),(k)->(k)",
        dtype="float64",
        observed=value,
        dims=dims,
    )


def _group_clt(
    family: ExponentialFamily, theta: TensorVariable, sizes: Any, bounds: Any
) -> tuple[TensorVariable, TensorVariable]:
    """CLT mean ``(G, k)`` and covariance ``(G, k, k)`` of each group's released statistic."""
    if isinstance(family, Categorical):
        mu, sigma = family.moments(theta)  # batched over the leading group dimension
        n = np.asarray(sizes, dtype=np.float64)
        return n[:, None] * mu, n[:, None, None] * sigma
    return grouped_joint_clt(family, theta, sizes, bounds)
