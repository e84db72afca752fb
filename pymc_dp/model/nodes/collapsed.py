"""Observed nodes with s integrated out: the CLT normal–Laplace convolution, or the exact sum.

:class:`~pymc_dp.NoisySuffStat` adds one of these for a released scalar statistic
(``collapsed_node``, the normal–Laplace likelihood of :mod:`pymc_dp.likelihoods.collapsed`)
or, with the exact likelihood, for released counts (``exact_node``, the sums of
:mod:`pymc_dp.likelihoods.exact`). Either way the model holds θ and y only; a scalar θ with a
fixed prior is marked for :class:`~pymc_dp.GridStep`, and NUTS samples any other θ.
"""

from __future__ import annotations

import json

import numpy as np
import numpy.typing as npt
import pymc as pm
import pytensor.tensor as pt

from pymc_dp._compat import ancestors
from pymc_dp.curator.record import Release
from pymc_dp.families import Categorical, ExponentialFamily, TruncatedFamily
from pymc_dp.families.record_laws import continuous_window
from pymc_dp.kernels.exact_counts import NoiseLaw
from pymc_dp.kernels.lattice_windows import lattice_for
from pymc_dp.likelihoods.choice import windowed_counts
from pymc_dp.likelihoods.collapsed import CollapsedLaplace
from pymc_dp.likelihoods.collapsed_pair import CollapsedLaplacePair
from pymc_dp.likelihoods.exact import ExactReleasedCount, ExactReleasedCounts
from pymc_dp.likelihoods.exact_windows import ExactReleasedWindowSum
from pymc_dp.likelihoods.lattice_windows import LatticeReleasedWindowSum
from pymc_dp.model.nodes.info import (
    GRID_TAG,
    INDEPENDENCE_TAG,
    TAG,
    THETA_TAG,
    NoisySuffStatInfo,
    add_release_data,
    record_of_release,
)


def collapsed_node(
    model: pm.Model,
    name: str,
    *,
    family: ExponentialFamily,
    theta: pt.TensorVariable,
    release: Release | None,
    n: int,
    epsilon: float,
    sensitivity: float,
    value: npt.NDArray[np.float64],
    bounds: tuple[float, float] | None,
) -> pt.TensorVariable:
    """Add y | θ with s and σ² integrated out (normal–Laplace convolution); return y."""
    mean, var, lower, upper = family.released_clt(theta, n, bounds)
    with model:
        y = CollapsedLaplace(
            name,
            mean=mean,
            var=var,
            lower=lower,
            upper=upper,
            scale=sensitivity / epsilon,
            observed=np.reshape(value, ()),
        )
    register_collapsed(
        model,
        name,
        y,
        theta,
        release=release,
        family=family,
        n=n,
        epsilon=epsilon,
        sensitivity=sensitivity,
        value=value,
        bounds=bounds,
    )
    if grid_ready(model, theta):
        setattr(theta.tag, GRID_TAG, True)
    return y


def collapsed_pair_node(
    model: pm.Model,
    name: str,
    *,
    family: TruncatedFamily,
    theta: pt.TensorVariable,
    release: Release | None,
    n: int,
    epsilon: float,
    sensitivity: float,
    value: npt.NDArray[np.float64],
    bounds: tuple[float, float],
    stat_dim: str | None,
) -> pt.TensorVariable:
    """Add y | θ for a released pair (windowed (Σz, Σz²)) with ŝ and σ² integrated out.

    y | θ is the bivariate normal–Laplace convolution of the window moments of ŝ
    (:func:`~pymc_dp.likelihoods.collapsed_pair.CollapsedLaplacePair`). θ's free variables,
    when they form a small block whose prior has fixed parameters (the Normal–Inverse-Gamma
    pair, or independent priors on μ and σ), are marked for :class:`~pymc_dp.IndependenceStep`
    as one block; any other θ is left to NUTS.
    """
    k = family.stat_size
    mean, cov = family.joint_clt(theta, n, bounds)
    scale = sensitivity / epsilon
    with model:
        y = CollapsedLaplacePair(
            name,
            mean=mean[:k],
            cov=cov[:k, :k],
            scale=np.full(k, scale),
            observed=np.asarray(value, dtype=np.float64),
            dims=stat_dim,
        )
    register_collapsed(
        model,
        name,
        y,
        theta,
        release=release,
        family=family,
        n=n,
        epsilon=epsilon,
        sensitivity=sensitivity,
        value=value,
        bounds=bounds,
    )
    block = fixed_prior_block(model, theta)
    if block:
        names = tuple(rv.name for rv in block)
        for rv in block:
            setattr(rv.tag, INDEPENDENCE_TAG, names)
    return y


def register_collapsed(
    model: pm.Model,
    name: str,
    y: pt.TensorVariable,
    theta: pt.TensorVariable,
    *,
    release: Release | None,
    family: ExponentialFamily,
    n: int,
    epsilon: float,
    sensitivity: float,
    value: npt.NDArray[np.float64],
    bounds: tuple[float, float] | None,
    noise: NoiseLaw | None = None,
) -> None:
    """Record the release in the model and tag the collapsed node y with its info and θ.

    ``noise`` is the law of a Gaussian-mechanism release (its σ), ``None`` for Laplace noise.
    """
    record = record_of_release(
        release,
        family,
        n=n,
        epsilon=epsilon,
        sensitivity=sensitivity,
        value=value,
        bounds=bounds,
    )
    with model:
        add_release_data(model, name, record)
    info = NoisySuffStatInfo(
        name=name,
        suffstat=f"{name}_s",
        noise_variance=f"{name}_sigma2",
        theta=(),
        family=family,
        n=n,
        epsilon=epsilon,
        sensitivity=sensitivity,
        bounds=bounds,
        collapsed=True,
        release_json=json.dumps(record),
        noise=noise,
    )
    setattr(y.tag, TAG, info)
    setattr(y.tag, THETA_TAG, theta)


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


def exact_node(
    model: pm.Model,
    name: str,
    *,
    family: ExponentialFamily,
    theta: pt.TensorVariable,
    release: Release | None,
    n: int,
    epsilon: float,
    sensitivity: float,
    value: npt.NDArray[np.float64],
    noise: NoiseLaw,
    stat_dim: str | None,
    bounds: tuple[float, float] | None = None,
) -> pt.TensorVariable:
    """Add y | θ with s summed out exactly (released counts, no CLT); return y."""
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
                observed=np.asarray(value, dtype=np.float64).reshape(()),
            )
        elif windowed_counts(family):
            y = ExactReleasedWindowSum(
                name,
                theta,
                family=family,
                n=n,
                bounds=bounds,
                noise=noise,
                observed=np.asarray(value, dtype=np.float64).reshape(()),
            )
        elif isinstance(family, Categorical):
            y = ExactReleasedCounts(
                name,
                theta,
                n=n,
                categories=family.categories,
                noise=noise,
                observed=np.asarray(value, dtype=np.float64),
                dims=stat_dim,
            )
        else:
            y = ExactReleasedCount(
                name,
                theta,
                total=n * family.trials,
                noise=noise,
                observed=np.asarray(value, dtype=np.float64).reshape(()),
            )
        record = record_of_release(
            release,
            family,
            n=n,
            epsilon=epsilon,
            sensitivity=sensitivity,
            value=value,
            bounds=bounds,
        )
        add_release_data(model, name, record)
    info = NoisySuffStatInfo(
        name=name,
        suffstat=f"{name}_s",
        noise_variance=f"{name}_sigma2",
        theta=(),
        family=family,
        n=n,
        epsilon=epsilon,
        sensitivity=sensitivity,
        bounds=bounds,
        collapsed=True,
        release_json=json.dumps(record),
        likelihood="exact",
        noise=noise,
    )
    setattr(y.tag, TAG, info)
    setattr(y.tag, THETA_TAG, theta)
    if grid_ready(model, theta):
        setattr(theta.tag, GRID_TAG, True)
    elif grid_ready(model, theta, ndim=1):
        # A Dirichlet θ: its exact conditional is fixed, so a fitted independence proposal
        # gives near-independent draws without gradients.
        setattr(theta.tag, INDEPENDENCE_TAG, True)
    return y
