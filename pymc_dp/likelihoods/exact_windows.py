"""The exact likelihood of a windowed count release as a PyTensor node (no CLT), for NUTS.

One record's windowed statistic has the law q(θ) on {0, …, b} (:func:`window_log_q`, written
in PyTensor from PyMC's own log-probability of the record, so θ's gradient is autodiff); the
released window sum is its n-fold convolution plus noise. The convolution and its gradient in
log q are NumPy (:mod:`pymc_dp.kernels.exact_windows`, by FFT), wrapped as an ``Op``. That
is the law :class:`WindowCounts`; :func:`ExactReleasedWindowSum` is the observed node
:class:`~pymc_dp.NoisySuffStat` adds for windowed Poisson and Geometric releases with
``likelihood="exact"``, and :func:`draw_window_sums` draws window sums of any records.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.tensor.variable import TensorVariable

from pymc_dp.families.truncated import TruncatedFamily, logaddexp
from pymc_dp.kernels.exact_counts import NoiseLaw
from pymc_dp.kernels.exact_windows import window_sum_log_likelihood
from pymc_dp.likelihoods.exact import ExactLikelihoodOp, StatisticLaw, released_statistic

__all__ = [
    "ExactReleasedWindowSum",
    "WindowCounts",
    "WindowSumLogLikelihood",
    "draw_window_sums",
    "window_log_q",
]


def window_log_q(
    family: TruncatedFamily, theta: Any, bounds: tuple[float, float]
) -> TensorVariable:
    """Log q(k | θ), k = 0, …, b: one record's windowed statistic x · 1[a ≤ x ≤ b], as PyTensor.

    Inside the window q(k) is the record's probability of k; q(0) also holds the mass outside
    the window (the family's log CDF and survival function, which clamp a mass below e^-100
    there so that gradients stay finite: a change of at most e^-100 in q(0)).
    """
    lo, hi = (int(v) for v in family.latent_window(bounds))
    theta = pt.as_tensor_variable(theta)
    eta = family.natural_parameters(theta)
    log_l, _, log_u = family.window_log_masses(eta, bounds)
    present = [m for m in (log_l, log_u) if not (m.owner is None and np.isneginf(m.data))]
    first = logaddexp(*present) if len(present) == 2 else (present[0] if present else None)
    start = max(lo, 1)
    k = np.arange(start, hi + 1, dtype=np.float64)
    inside = pm.logp(family.pymc_distribution.dist(theta), k) if k.size else pt.zeros(0)
    if lo == 0:
        zero = pm.logp(family.pymc_distribution.dist(theta), np.float64(0.0))
        first = zero if first is None else logaddexp(first, zero)
    if first is None:  # the window holds every record and not 0: q(0) = 0
        first = pt.constant(-np.inf, dtype="float64")
    gap = pt.constant(np.full(start - 1, -np.inf), dtype="float64")
    return pt.concatenate([pt.reshape(first, (1,)), gap, inside])


class WindowSumLogLikelihood(ExactLikelihoodOp):
    """log p(y | q) = log Σ_s q^{∗n}(s) k(y - s) for a log law ``log_q`` and a value ``y``.

    With ``gradient=True`` the output is instead ∂ log p / ∂ log q (a vector like ``log_q``).
    """

    ndims = (1, 0)
    signatures = ("(k),()->()", "(k),()->(k)")
    wrt = 0

    def perform(self, node, inputs, outputs) -> None:  # noqa: D102
        log_q, value = inputs
        log_lik, grad = window_sum_log_likelihood(
            log_q, self.n, value, self.noise, gradient=self.gradient
        )
        outputs[0][0] = np.asarray(grad if self.gradient else log_lik, dtype=np.float64)


def draw_window_sums(
    rng: np.random.Generator,
    family: TruncatedFamily,
    theta: Any,
    sizes: int | np.ndarray,
    window: tuple[float, float],
    size: Any,
) -> np.ndarray:
    """Window sums Σ z · 1[a ≤ z ≤ b] of ``sizes`` records drawn at θ (``window`` latent).

    ``sizes`` is the number of records of one release (θ of any batch shape), or one per group
    (θ's last axis holds the groups).
    """
    lo, hi = window
    shape = tuple(size) if size is not None else np.shape(theta)
    theta = np.broadcast_to(np.asarray(theta, dtype=np.float64), shape)
    if np.ndim(sizes) == 0:
        z = family.record_distribution(theta[..., None]).rvs(size=(*shape, sizes), random_state=rng)
        return np.where((z >= lo) & (z <= hi), z, 0.0).sum(axis=-1)
    s = np.zeros(shape)
    for g, n_g in enumerate(sizes):
        z = family.record_distribution(theta[..., g, None]).rvs(
            size=(*shape[:-1], n_g), random_state=rng
        )
        s[..., g] = np.where((z >= lo) & (z <= hi), z, 0.0).sum(axis=-1)
    return s


class WindowCounts(StatisticLaw):
    """s = the window sum of ``sizes`` count records, by the n-fold convolution of q(θ).

    Parameters
    ----------
    sizes
        Records of the release, or of each group.
    family
        :class:`~pymc_dp.families.Poisson` or :class:`~pymc_dp.families.Geometric`.
    bounds
        The release's window (a, b).
    """

    def __init__(
        self, sizes: int | Sequence[int], family: TruncatedFamily, bounds: tuple[float, float]
    ):
        super().__init__(sizes)
        self.family = family
        self.bounds = bounds

    def log_likelihood(self, value, theta, size, noise):  # noqa: D102
        log_q = window_log_q(self.family, theta, self.bounds)
        return WindowSumLogLikelihood(size, noise)(log_q, value)

    def draw(self, rng, theta, size):  # noqa: D102
        window = self.family.latent_window(self.bounds)
        return draw_window_sums(rng, self.family, theta, self.sizes, window, size)


def ExactReleasedWindowSum(
    name: str,
    theta: Any,
    *,
    family: TruncatedFamily,
    n: int,
    bounds: tuple[float, float],
    noise: NoiseLaw,
    **kwargs: Any,
) -> TensorVariable:
    """A released window sum of count records with the window sum summed out exactly.

    Parameters
    ----------
    family, n, bounds
        As for :class:`WindowCounts` (one release of n records).
    name, theta, noise, **kwargs
        As for :func:`~pymc_dp.likelihoods.exact.released_statistic`; θ is the record's
        parameter (Poisson λ, Geometric p).
    """
    law = WindowCounts(n, family, bounds)
    return released_statistic(name, theta, law=law, noise=noise, **kwargs)
