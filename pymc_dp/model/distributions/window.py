"""The latent statistics of a truncated release: (ŝ, s) jointly, as one PyMC distribution.

For a family released over a window [a, b] (Bernstein & Sheldon 2018, §3.3) the released y is
noisy ŝ, the statistic of the records inside the window, while θ's conjugate update needs s,
the statistic of all records. Their joint CLT (:meth:`~pymc_dp.families.TruncatedFamily.joint_clt`)
is one normal over the stacked vector (ŝ, s), restricted to where sums of records can lie:

* each block in its box (e.g. 0 ≤ ŝ ≤ n·b for positive data);
* s - ŝ, the records outside the window, in its box (≥ 0 for positive data);
* for t = (x, x²): n·Σx² ≥ (Σx)² in both blocks.

The value is one vector so that :class:`~pymc_dp.NormProductStep` draws ŝ and s together.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.distributions.distribution import Continuous

from pymc_dp.kernels import draw_truncated_normal, window_constraints
from pymc_dp.model.distributions.suffstat import SuffStatRV, rv_size_is_none

__all__ = ["WindowSuffStat", "WindowSuffStatRV", "in_window_region"]


class WindowSuffStatRV(SuffStatRV):
    """Stacked (ŝ, s) ~ N(mean, cov) on the valid region of a truncated release."""

    name = "window_suffstat"
    signature = "(m),(m,m),(m),(m),(k),(k),(),()->(m)"
    _print_name = ("WindowSuffStat", "\\operatorname{WindowSuffStat}")

    @classmethod
    def rng_fn(cls, rng, mean, cov, lower, upper, out_lower, out_upper, total, quadratic, size):  # noqa: D102
        if size is not None:
            mean = np.broadcast_to(mean, (*size, mean.shape[-1]))
        size_k = out_lower.shape[-1]
        constraints = window_constraints(
            size=size_k,
            out_lower=np.broadcast_to(out_lower, (*mean.shape[:-1], size_k)),
            out_upper=np.broadcast_to(out_upper, (*mean.shape[:-1], size_k)),
            total=np.broadcast_to(total, mean.shape[:-1]),
            quadratic=bool(quadratic),
        )
        # The CLT mean is an expectation of sums that lie in the (convex) region, so it lies
        # there too: a valid start for the bounded fallback.
        start = np.clip(mean, lower, upper)
        return draw_truncated_normal(
            rng,
            mean=mean,
            cov=cov,
            lower=lower,
            upper=upper,
            current=start,
            constraints=constraints,
            proposals=64,
            sweeps=20,
        ).value


window_suffstat = WindowSuffStatRV()


class WindowSuffStat(Continuous):
    """Latent (ŝ, s) of a truncated release: their joint CLT normal on the valid region.

    Parameters
    ----------
    mean, cov
        Joint CLT mean ``(2k,)`` and covariance ``(2k, 2k)`` of (ŝ, s).
    lower, upper
        Box of the stacked vector, ``(2k,)``.
    out_lower, out_upper
        Box of s - ŝ, ``(k,)``.
    total
        Number of records n.
    quadratic
        1 if t = (x, x²) (Cauchy–Schwarz constraints apply), else 0.

    Notes
    -----
    The log density is the normal's, left unnormalised over the region (its normaliser has no
    closed form and is one whenever the CLT is sensible), with a tiny diagonal jitter so that it
    stays finite when a window holds almost no mass and s ≈ ŝ. Gibbs steps do not use it.
    """

    rv_op = window_suffstat

    @classmethod
    def dist(cls, mean, cov, lower, upper, out_lower, out_upper, total, quadratic, **kwargs):  # noqa: D102
        return super().dist(
            [mean, cov, lower, upper, out_lower, out_upper, total, quadratic], **kwargs
        )

    def support_point(rv, size, mean, cov, lower, upper, out_lower, out_upper, total, quadratic):  # noqa: D102
        point = pt.clip(mean, lower, upper)
        if not rv_size_is_none(size):
            point = pt.full((*size, mean.shape[-1]), point)
        return point

    def logp(value, mean, cov, lower, upper, out_lower, out_upper, total, quadratic):  # noqa: D102
        m = mean.shape[-1]
        diag = pt.diagonal(cov, axis1=-2, axis2=-1)
        jitter = 1e-9 * pt.mean(diag, axis=-1) + 1e-12
        logp = pm.logp(pm.MvNormal.dist(mean, cov + jitter[..., None, None] * pt.eye(m)), value)
        inside = in_window_region(value, lower, upper, out_lower, out_upper, total, quadratic)
        return pt.switch(inside, logp, -np.inf)


def in_window_region(value, lower, upper, out_lower, out_upper, total, quadratic):
    """Whether the stacked (ŝ, s) lies in the region where sums of records can lie."""
    k = out_lower.shape[-1]
    window, every = value[..., :k], value[..., k:]
    outside = every - window
    inside = pt.all((value >= lower) & (value <= upper), axis=-1)
    inside &= pt.all((outside >= out_lower) & (outside <= out_upper), axis=-1)
    cauchy_schwarz = (total * window[..., -1] >= pt.sqr(window[..., 0])) & (
        total * every[..., -1] >= pt.sqr(every[..., 0])
    )
    return inside & pt.or_(pt.eq(quadratic, 0), cauchy_schwarz)
