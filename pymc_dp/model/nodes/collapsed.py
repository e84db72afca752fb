"""Observed nodes with s integrated out: the CLT convolution with the noise, or the exact sum.

:class:`~pymc_dp.NoisySuffStat` adds one of these for a released scalar statistic
(``collapsed_node``: the normal–Laplace likelihood of :mod:`pymc_dp.likelihoods.collapsed`, or
the normal product of :mod:`pymc_dp.likelihoods.collapsed_gaussian` for Gaussian noise), for a
window's (Σz, Σz²) (``collapsed_pair_node``) or, with the exact likelihood, for released counts
(``exact_node``, the sums of :mod:`pymc_dp.likelihoods.exact`). Either way the model holds θ and
y only; a scalar θ with a fixed prior is marked for :class:`~pymc_dp.GridStep`, a small block
for :class:`~pymc_dp.IndependenceStep`, and NUTS samples any other θ.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pymc_dp._compat import ancestors
from pymc_dp.families import Categorical
from pymc_dp.families.record_laws import continuous_window
from pymc_dp.kernels.exact_counts import NoiseLaw
from pymc_dp.kernels.lattice_windows import lattice_for
from pymc_dp.likelihoods.choice import windowed_counts
from pymc_dp.likelihoods.collapsed import CollapsedLaplace
from pymc_dp.likelihoods.collapsed_gaussian import CollapsedGaussian
from pymc_dp.likelihoods.collapsed_pair import CollapsedLaplacePair
from pymc_dp.likelihoods.exact import ExactReleasedCount, ExactReleasedCounts
from pymc_dp.likelihoods.exact_windows import ExactReleasedWindowSum
from pymc_dp.likelihoods.lattice_windows import LatticeReleasedWindowSum
from pymc_dp.likelihoods.released_normal import ReleasedNormal
from pymc_dp.mechanisms import DISCRETE_GAUSSIAN
from pymc_dp.model.nodes.info import (
    GRID_TAG,
    INDEPENDENCE_TAG,
    NodeRelease,
    register_node,
)

__all__ = [
    "collapsed_node",
    "collapsed_pair_node",
    "collapsed_y",
    "exact_node",
    "fixed_prior_block",
    "grid_ready",
    "mark_theta",
]


def collapsed_y(
    name: str, moments: tuple, *, gaussian: bool, scale: Any, **kwargs: Any
) -> pt.TensorVariable:
    """Y of a released scalar with s integrated out, under the release's noise law.

    ``moments`` are s's CLT ``(mean, var, lower, upper)``
    (:meth:`~pymc_dp.families.ExponentialFamily.released_clt`); the noise is Laplace of scale
    ``scale`` (:class:`~pymc_dp.likelihoods.collapsed.CollapsedLaplace`) or, with ``gaussian``,
    normal of sd ``scale`` (:class:`~pymc_dp.likelihoods.collapsed_gaussian.CollapsedGaussian`).
    ``kwargs`` go to the distribution (``observed``, ``dims``).
    """
    mean, var, lower, upper = moments
    law = CollapsedGaussian if gaussian else CollapsedLaplace
    return law(name, mean=mean, var=var, lower=lower, upper=upper, scale=scale, **kwargs)


def collapsed_node(
    model: pm.Model,
    name: str,
    spec: NodeRelease,
    *,
    theta: pt.TensorVariable,
    noise: NoiseLaw | None = None,
) -> pt.TensorVariable:
    """Add y | θ of a released scalar with s (and σ²) integrated out; return y.

    The normal–Laplace convolution for Laplace noise (``noise`` ``None``, scale Δ/ε), the
    normal product for a Gaussian-mechanism release (``noise`` its law).
    """
    gaussian = noise is not None and noise.kind == DISCRETE_GAUSSIAN
    with model:
        y = collapsed_y(
            name,
            spec.family.released_clt(theta, spec.n, spec.bounds),
            gaussian=gaussian,
            scale=noise.scale if gaussian else spec.sensitivity / spec.epsilon,
            observed=np.asarray(spec.value, dtype=np.float64).reshape(()),
        )
    register_node(model, name, spec, y, theta_graph=theta, collapsed=True, noise=noise)
    mark_theta(model, theta)
    return y


def collapsed_pair_node(
    model: pm.Model,
    name: str,
    spec: NodeRelease,
    *,
    theta: pt.TensorVariable,
    stat_dim: str | None,
    noise: NoiseLaw | None = None,
) -> pt.TensorVariable:
    """Add y | θ for a released pair (windowed (Σz, Σz²)) with ŝ and σ² integrated out.

    y | θ is the bivariate normal–Laplace convolution of the window moments of ŝ
    (:func:`~pymc_dp.likelihoods.collapsed_pair.CollapsedLaplacePair`), or for a
    Gaussian-mechanism release (``noise`` its law) the bivariate normal N(m, V + τ² I).
    With Laplace noise, θ's free variables, when they form a small block whose prior has fixed
    parameters (the Normal–Inverse-Gamma pair, or independent priors on μ and σ), are marked
    for :class:`~pymc_dp.IndependenceStep` as one block; any other θ is left to NUTS (and so is
    every θ of a Gaussian pair: :mod:`pymc_dp.model.nodes.gaussian` says why).
    """
    k = spec.family.stat_size
    mean, cov = spec.family.joint_clt(theta, spec.n, spec.bounds)
    gaussian = noise is not None and noise.kind == DISCRETE_GAUSSIAN
    observed = np.asarray(spec.value, dtype=np.float64)
    with model:
        if gaussian:
            noise_cov = noise.scale * noise.scale * np.eye(k)
            y = ReleasedNormal(
                name, mean[:k], cov[:k, :k] + noise_cov, observed=observed, dims=stat_dim
            )
        else:
            y = CollapsedLaplacePair(
                name,
                mean=mean[:k],
                cov=cov[:k, :k],
                scale=np.full(k, spec.sensitivity / spec.epsilon),
                observed=observed,
                dims=stat_dim,
            )
    register_node(model, name, spec, y, theta_graph=theta, collapsed=True, noise=noise)
    block = [] if gaussian else fixed_prior_block(model, theta)
    if block:
        names = tuple(rv.name for rv in block)
        for rv in block:
            setattr(rv.tag, INDEPENDENCE_TAG, names)
    return y


_MAX_BLOCK = 6
"""Largest total size of a θ block that IndependenceStep's t proposal is fitted to."""


def fixed_prior_block(model: pm.Model, theta: pt.TensorVariable) -> list[pt.TensorVariable]:
    """θ's free variables, if together they have a prior with fixed parameters; else ``[]``.

    That is: continuous free variables of at most :data:`_MAX_BLOCK` values in all, each with
    distribution parameters that depend on no free variable outside the block (μ | σ² of a
    Normal–Inverse-Gamma prior qualifies). Such a block's conditional given y is fixed while
    nothing else moves, so an independence proposal fitted once serves every draw.
    """
    free = set(model.free_RVs)
    block = [v for v in ancestors([theta], blockers=model.free_RVs) if v in free]
    if not block or any("float" not in v.dtype for v in block):
        return []
    if sum(_size(v) for v in block) > _MAX_BLOCK:
        return []
    members = set(block)
    for rv in block:
        params = rv.owner.op.dist_params(rv.owner)
        outside = free - members
        if any(v in outside for v in ancestors(params, blockers=model.free_RVs)):
            return []
    return block


def _size(rv: pt.TensorVariable) -> int:
    shape = rv.type.shape
    if all(d is not None for d in shape):
        return int(np.prod(shape, dtype=int))
    return int(np.prod(rv.shape.eval()))


def grid_ready(model: pm.Model, theta: pt.TensorVariable, ndim: int = 0) -> bool:
    """Whether θ is a continuous free variable of ``ndim`` dimensions with a fixed prior.

    Such a scalar θ is drawn exactly by :class:`~pymc_dp.GridStep`; any other θ (a
    deterministic, a hierarchical prior) is left to PyMC's samplers (NUTS).
    """
    if theta not in model.free_RVs or theta.type.ndim != ndim or "float" not in theta.dtype:
        return False
    free = set(model.free_RVs)
    params = theta.owner.op.dist_params(theta.owner)
    return not any(v in free for v in ancestors(params))


def mark_theta(model: pm.Model, theta: pt.TensorVariable, *, vector: bool = True) -> None:
    """Mark θ for the step that draws it best, if its prior has fixed parameters.

    A scalar θ for :class:`~pymc_dp.GridStep`; with ``vector``, a vector θ (a Dirichlet) for
    :class:`~pymc_dp.IndependenceStep`, whose fitted proposal then gives near-independent
    draws without gradients. Any other θ is left to PyMC's samplers (NUTS).
    """
    if grid_ready(model, theta):
        setattr(theta.tag, GRID_TAG, True)
    elif vector and grid_ready(model, theta, ndim=1):
        setattr(theta.tag, INDEPENDENCE_TAG, True)


def exact_node(
    model: pm.Model,
    name: str,
    spec: NodeRelease,
    *,
    theta: pt.TensorVariable,
    noise: NoiseLaw,
    stat_dim: str | None,
) -> pt.TensorVariable:
    """Add y | θ with s summed out exactly (released counts, no CLT); return y."""
    family, n, bounds = spec.family, spec.n, spec.bounds
    observed = np.asarray(spec.value, dtype=np.float64)
    with model:
        if continuous_window(family):
            # Continuous records: the lattice likelihood (its step from the stated error bound).
            y = LatticeReleasedWindowSum(
                name,
                theta,
                family=family,
                n=n,
                bounds=bounds,
                lattice=lattice_for(family.latent_window(bounds), n=n, noise_scale=noise.scale),
                scale=noise.scale,
                observed=observed.reshape(()),
            )
        elif windowed_counts(family):
            y = ExactReleasedWindowSum(
                name,
                theta,
                family=family,
                n=n,
                bounds=bounds,
                noise=noise,
                observed=observed.reshape(()),
            )
        elif isinstance(family, Categorical):
            y = ExactReleasedCounts(
                name,
                theta,
                n=n,
                categories=family.categories,
                noise=noise,
                observed=observed,
                dims=stat_dim,
            )
        else:
            y = ExactReleasedCount(
                name, theta, total=n * family.trials, noise=noise, observed=observed.reshape(())
            )
    register_node(
        model, name, spec, y, theta_graph=theta, collapsed=True, likelihood="exact", noise=noise
    )
    mark_theta(model, theta)
    return y
