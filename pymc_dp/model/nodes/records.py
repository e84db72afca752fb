"""The record-level node: a windowed release of (Σz, Σz²) with its n records as latent variables.

With ``likelihood="exact"``, :class:`~pymc_dp.NoisySuffStat` models a Normal or LogNormal
release of (Σz, Σz²) (μ and σ² unknown) with no CLT: the model gets the records themselves,
``{name}_records`` (n draws of the record's own distribution), and y | records is the Laplace
density at the window sum ŝ(records), exactly. :class:`~pymc_dp.RecordStep` samples
(μ, σ², records) together by the interweaving sampler of :mod:`pymc_dp.engine.records`. It
needs (μ, σ²) to carry the Normal–Inverse-Gamma prior (the model's default) and to be used by
this node alone.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pymc_dp.families import ExponentialFamily, TruncatedFamily
from pymc_dp.kernels.exact_counts import NoiseLaw
from pymc_dp.model.nodes.info import NodeRelease, register_node

__all__ = ["RECORDS_TAG", "RecordsInfo", "needs_records", "records_node", "records_ready"]

RECORDS_TAG = "noisy_suffstat_records"
"""Attribute on ``rv.tag`` of the records and of θ = (μ, σ²) of a record-level node, holding
its :class:`RecordsInfo`; :class:`~pymc_dp.RecordStep` samples them."""


@dataclasses.dataclass(frozen=True)
class RecordsInfo:
    """What :class:`~pymc_dp.RecordStep` needs: names, the window and the release's noise."""

    name: str
    records: str
    theta: tuple[str, ...]
    family: TruncatedFamily
    n: int
    window: tuple[float, float]
    """The window on the latent scale (log x for LogNormal)."""
    scale: float
    released: tuple[float, ...]


def needs_records(family: ExponentialFamily) -> bool:
    """Whether the exact likelihood of ``family`` is the record-level node ((Σz, Σz²))."""
    return isinstance(family, TruncatedFamily) and family.stat_size == 2


def records_ready(model: pm.Model, family: TruncatedFamily, dist: pt.TensorVariable) -> str:
    """Why the record-level node cannot be built for ``dist`` ("" if it can)."""
    block = family.conjugate_prior_rvs(model, dist)
    if not block:
        return (
            "the record-level sampler needs (μ, σ²) with the Normal–Inverse-Gamma prior: "
            "sigma2 = pm.InverseGamma(...), mu = pm.Normal(..., sigma=pm.math.sqrt(sigma2 / "
            "kappa)), and the record's sigma = pm.math.sqrt(sigma2)"
        )
    # Imported here: the step methods import the node modules.
    from pymc_dp.model.model_access import direct_dependents

    names = {rv.name for rv in block}
    for rv in block:
        extra = sorted(set(direct_dependents(model, rv)) - names)
        if extra:
            return f"{rv.name!r} is also used by {extra}; the record-level sampler needs it alone"
    return ""


def records_node(
    model: pm.Model,
    name: str,
    spec: NodeRelease,
    *,
    dist: pt.TensorVariable,
    noise: NoiseLaw,
    stat_dim: str | None,
) -> pt.TensorVariable:
    """Add ``{name}_records`` and y | records (Laplace at the window sum); return y."""
    family, n = spec.family, spec.n
    why = records_ready(model, family, dist)
    if why:
        raise ValueError(f"likelihood='exact' for {family!r}: {why}")
    block = family.conjugate_prior_rvs(model, dist)
    mu, sigma = dist.owner.op.dist_params(dist.owner)
    window = family.latent_window(spec.bounds)
    records_name = f"{name}_records"
    dim = f"{name}_record"
    if dim not in model.coords:
        model.add_coord(dim, np.arange(n))
    with model:
        records = family.pymc_distribution(records_name, mu=mu, sigma=sigma, dims=dim)
        z = pt.log(records) if family.pymc_distribution is pm.LogNormal else records
        inside = (z >= window[0]) & (z <= window[1])
        s_hat = pt.stack([pt.sum(pt.switch(inside, z, 0.0)), pt.sum(pt.switch(inside, z * z, 0.0))])
        y = pm.Laplace(name, mu=s_hat, b=noise.scale, observed=spec.value, dims=stat_dim)
    register_node(model, name, spec, y, suffstat=records_name, likelihood="exact", noise=noise)
    links = RecordsInfo(
        name=name,
        records=records_name,
        theta=tuple(rv.name for rv in block),
        family=family,
        n=n,
        window=window,
        scale=float(noise.scale),
        released=tuple(float(v) for v in np.reshape(spec.value, -1)),
    )
    for rv in (records, *block):
        setattr(rv.tag, RECORDS_TAG, links)
    return y
