"""The likelihood of a window sum of continuous records (no CLT), as a PyTensor node.

:class:`LatticeWindowLogLikelihood` wraps :mod:`pymc_dp.kernels.lattice_windows`: log p_h(y | θ)
for a scalar θ (the rate of Exponential or Gamma records, the mean of Normal or LogNormal
records with known σ), within a stated bound of the exact log-likelihood. It is elementwise in
θ, so :class:`~pymc_dp.GridStep`'s vectorised grid evaluates a whole batch of θ per call; its
gradient (for NUTS, when θ is a deterministic or hierarchical expression) is
Σ_j ∂ log p_h/∂ log q_j · ∂ log q_j/∂θ, the first factor from the kernel's correlation and the
second by central differences of the record's lattice law (no FFT). That is the law
:class:`LatticeWindow`; :func:`LatticeReleasedWindowSum` is the observed node that
:class:`~pymc_dp.NoisySuffStat` adds with ``likelihood="exact"``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pytensor.gradient import grad_not_implemented
from pytensor.graph.op import Op
from pytensor.tensor.variable import TensorVariable

from pymc_dp._compat import pullback_op
from pymc_dp.families.gamma import Gamma
from pymc_dp.families.record_laws import record_law, theta_step
from pymc_dp.families.truncated import TruncatedFamily
from pymc_dp.kernels.exact_counts import NoiseLaw
from pymc_dp.kernels.lattice_windows import (
    Lattice,
    lattice_log_likelihood,
    lattice_record_log_law,
)
from pymc_dp.likelihoods.exact import ElementwiseInTheta, StatisticLaw, released_statistic
from pymc_dp.likelihoods.exact_windows import draw_window_sums

__all__ = ["LatticeReleasedWindowSum", "LatticeWindow", "LatticeWindowLogLikelihood"]


@pullback_op
class LatticeWindowLogLikelihood(ElementwiseInTheta, Op):
    """log p_h(y | θ) of a released window sum of ``n`` continuous records, elementwise.

    Parameters
    ----------
    family
        The windowed family (scalar θ).
    n
        Number of records.
    window
        The window on the latent scale.
    lattice
        The lattice (:func:`~pymc_dp.kernels.lattice_windows.lattice_for`).
    scale
        Laplace scale β of the release.
    gradient
        Output ∂ log p_h / ∂θ instead.
    """

    __props__ = ("family", "n", "window", "lattice", "scale", "gradient")

    def __init__(
        self,
        family: TruncatedFamily,
        n: int,
        window: tuple[float, float],
        lattice: Lattice,
        scale: float,
        gradient: bool = False,
    ):
        self.family = family
        self.n = int(n)
        self.window = (float(window[0]), float(window[1]))
        self.lattice = Lattice(*lattice)
        self.scale = float(scale)
        self.gradient = bool(gradient)

    def _log_q(self, theta: np.ndarray) -> np.ndarray:
        return lattice_record_log_law(record_law(self.family, theta), self.window, self.lattice)

    def perform(self, node, inputs, outputs) -> None:  # noqa: D102
        value, theta = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in inputs))
        noise = NoiseLaw("laplace", self.scale)
        # A rate must be positive; a mean may be anything.
        ok = np.isfinite(theta) & ((theta > 0) if isinstance(self.family, Gamma) else True)
        safe = np.where(ok, theta, 1.0)
        log_q = self._log_q(safe)
        log_lik, grad_q = lattice_log_likelihood(
            log_q, self.lattice, self.n, value, noise, gradient=self.gradient
        )
        if not self.gradient:
            outputs[0][0] = np.asarray(np.where(ok, log_lik, -np.inf), dtype=np.float64)
            return
        step = theta_step(self.family, safe)
        with np.errstate(invalid="ignore"):
            d_log_q = (self._log_q(safe + step) - self._log_q(safe - step)) / (2 * step[..., None])
        usable = np.isfinite(log_q) & np.isfinite(d_log_q)
        out = np.sum(np.where(usable, grad_q * np.where(usable, d_log_q, 0.0), 0.0), axis=-1)
        outputs[0][0] = np.asarray(np.where(ok, out, 0.0), dtype=np.float64)

    def pullback(self, inputs, outputs, cotangents):  # noqa: D102
        if self.gradient:
            return [grad_not_implemented(self, i, x) for i, x in enumerate(inputs)]
        value, theta = inputs
        op = type(self)(self.family, self.n, self.window, self.lattice, self.scale, True)
        d_theta = self.sum_to_theta(cotangents[0] * op(value, theta), theta)
        return [grad_not_implemented(self, 0, value), d_theta]


class LatticeWindow(StatisticLaw):
    """s = the window sum of n continuous records, on the lattice of the likelihood.

    Parameters
    ----------
    sizes
        Records of the release.
    family
        Exponential, Gamma, or Normal / LogNormal with known σ.
    bounds
        The release's window (data scale).
    lattice
        The lattice of the likelihood (its step sets the error bound).
    """

    def __init__(
        self, sizes: int, family: TruncatedFamily, bounds: tuple[float, float], lattice: Lattice
    ):
        super().__init__(sizes)
        self.family = family
        self.window = family.latent_window(bounds)
        self.lattice = lattice

    def log_likelihood(self, value, theta, size, noise):  # noqa: D102
        op = LatticeWindowLogLikelihood(self.family, size, self.window, self.lattice, noise.scale)
        return op(value, theta)

    def draw(self, rng, theta, size):  # noqa: D102
        return draw_window_sums(rng, self.family, theta, self.sizes, self.window, size)


def LatticeReleasedWindowSum(
    name: str,
    theta: Any,
    *,
    family: TruncatedFamily,
    n: int,
    bounds: tuple[float, float],
    lattice: Lattice,
    scale: float,
    **kwargs: Any,
) -> TensorVariable:
    """A released window sum of continuous records, with the records integrated out.

    Parameters
    ----------
    family, n, bounds, lattice
        As for :class:`LatticeWindow` (one release of n records).
    scale
        Laplace scale β = Δ/ε of the release (the law the lattice likelihood models).
    name, theta, **kwargs
        As for :func:`~pymc_dp.likelihoods.exact.released_statistic`; θ is the record's scalar
        parameter (rate λ, or mean μ with σ known).
    """
    law = LatticeWindow(n, family, bounds, lattice)
    noise = NoiseLaw("laplace", scale)
    return released_statistic(name, theta, law=law, noise=noise, **kwargs)
