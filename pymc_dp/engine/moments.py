"""The CLT moments of a release's statistic for a batch of θ, compiled once per setting.

The batched engine, the collapsed and pair samplers and :func:`~pymc_dp.sample_latent` all take
(mean, cov) of s (or of the stacked (ŝ, s) of a window) from here.
"""

from __future__ import annotations

import functools
from typing import Any

import pytensor
import pytensor.tensor as pt
from pytensor.graph.replace import vectorize_graph

from pymc_dp.families import ExponentialFamily

__all__ = ["batched_moments"]


@functools.cache
def batched_moments(family: ExponentialFamily, n: int, bounds: tuple[float, float] | None) -> Any:
    """Compile, once per setting, θ of shape (batch, ...) → CLT (mean, cov), batched.

    The moments are those of s, or of the stacked (ŝ, s) for a windowed family.
    """
    core = family.prior_example().type()
    if bounds is None:
        mu, sigma = family.moments(core)
        mean, cov = n * mu, n * sigma
    else:
        mean, cov = family.joint_clt(core, n, bounds)
    batched = pt.tensor(dtype="float64", shape=(None, *core.type.shape))
    mean, cov = vectorize_graph([mean, cov], replace={core: batched})
    m = batched.shape[0]
    fn = pytensor.function([batched], [mean.reshape((m, -1)), cov.reshape((m, mean.size // m, -1))])
    return fn
