"""The likelihood of a window sum of continuous records (no CLT), as a PyTensor node.

:class:`LatticeWindowLogLikelihood` wraps :mod:`pymc_dp.kernels.lattice_windows`: log p_h(y | θ)
for a scalar θ (the rate of Exponential or Gamma records, the mean of Normal or LogNormal
records with known σ), within a stated bound of the exact log-likelihood. It is elementwise in
θ, so :class:`~pymc_dp.GridStep`'s vectorised grid evaluates a whole batch of θ per call; its
gradient (for NUTS, when θ is a deterministic or hierarchical expression) is
Σ_j ∂ log p_h/∂ log q_j · ∂ log q_j/∂θ, the first factor from the kernel's correlation and the
second by central differences of the record's lattice law (no FFT). :func:`LatticeReleasedWindowSum`
is the observed node that :class:`~pymc_dp.NoisySuffStat` adds with ``likelihood="exact"``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.gradient import grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.graph.replace import _vectorize_node
from pytensor.tensor.extra_ops import broadcast_shape
from pytensor.tensor.variable import TensorVariable

from pymc_dp.families.gamma import Gamma
from pymc_dp.families.record_laws import record_law, theta_step
from pymc_dp.families.truncated import TruncatedFamily
from pymc_dp.kernels.exact_counts import NoiseLaw
from pymc_dp.kernels.lattice_windows import (
    Lattice,
    lattice_log_likelihood,
    lattice_record_log_law,
)
from pymc_dp.likelihoods.exact import draw_noise

__all__ = ["LatticeReleasedWindowSum", "LatticeWindowLogLikelihood"]


class LatticeWindowLogLikelihood(Op):
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

    def make_node(self, value: Any, theta: Any) -> Apply:  # noqa: D102
        value, theta = (pt.as_tensor_variable(x).astype("float64") for x in (value, theta))
        ndim = max(value.type.ndim, theta.type.ndim)
        out = pt.TensorType("float64", shape=(None,) * ndim)()
        return Apply(self, [value, theta], [out])

    def infer_shape(self, *args: Any) -> list:  # noqa: D102
        value, theta = args[-1]
        return [broadcast_shape(value, theta, arrays_are_shapes=True)]

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
        d_theta = cotangents[0] * op(value, theta)
        extra = d_theta.type.ndim - theta.type.ndim
        if extra > 0:  # θ was broadcast against a batch of values
            d_theta = pt.sum(d_theta, axis=tuple(range(extra)))
        return [grad_not_implemented(self, 0, value), d_theta]

    def L_op(self, inputs, outputs, output_grads):  # noqa: D102
        # PyTensor 2 calls L_op; PyTensor 3 calls pullback.
        return self.pullback(inputs, outputs, output_grads)


@_vectorize_node.register(LatticeWindowLogLikelihood)
def _vectorize_lattice(op: LatticeWindowLogLikelihood, node: Apply, *batched_inputs: Any) -> Any:
    # Elementwise: a batch is the same Op on the batched arrays.
    return op.make_node(*batched_inputs).outputs


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
    name
        Variable name.
    theta
        The record's scalar parameter (rate λ, or mean μ with σ known).
    family
        Exponential, Gamma, or Normal / LogNormal with known σ.
    n
        Number of records.
    bounds
        The release's window (data scale).
    lattice
        The lattice of the likelihood (its step sets the error bound).
    scale
        Laplace scale β = Δ/ε of the release.
    **kwargs
        Passed to :class:`pymc.CustomDist` (``observed``).
    """
    window = family.latent_window(bounds)
    op = LatticeWindowLogLikelihood(family, n, window, lattice, scale)
    lo, hi = window

    def random(theta, rng=None, size=None):
        shape = tuple(size) if size is not None else np.shape(theta)
        theta = np.broadcast_to(np.asarray(theta, dtype=np.float64), shape)
        z = family.record_distribution(theta[..., None]).rvs(size=(*shape, n), random_state=rng)
        s = np.where((z >= lo) & (z <= hi), z, 0.0).sum(axis=-1)
        return s + draw_noise(rng, NoiseLaw("laplace", scale), s.shape)

    return pm.CustomDist(
        name,
        theta,
        logp=lambda value, theta: op(value, theta),
        random=random,
        signature="()->()",
        dtype="float64",
        **kwargs,
    )
