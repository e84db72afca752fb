"""The shape family's factor on the default model's law of s, as a PyTensor Op.

With released degree 3–4 sums of x (d = 1) the default node models x by the shape family
(:mod:`~pymc_dp.regression.kernels.shape_law`): the law of the covariate's mean and scatter is the
normal model's (:class:`~pymc_dp.regression.model.distributions.NormalModelSuffStat`) times
``shape_log_ratio``, and the released sums are observed with their Laplace noise
(``moment_term``). :func:`shape_potential` is their sum, added to the model as a
``pm.Potential`` so that the model's log density is the posterior the step
(:class:`~pymc_dp.regression.RegressionCollapsedStep`) samples. It evaluates the NumPy kernel
(one implementation) and has no gradient: no gradient sampler runs these variables, and a
symbolic gradient of this expression made ``pm.sample``'s step assignment take about 10 s longer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytensor.tensor as pt
from pytensor.gradient import grad_undefined
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

from pymc_dp._compat import pullback_op
from pymc_dp.regression.kernels.shape_law import XShape, shape_term
from pymc_dp.regression.kernels.x_models import ShapePrior

__all__ = ["ShapePotentialOp", "shape_potential"]


@pullback_op
class ShapePotentialOp(Op):
    """``shape_term`` at (s, μ_x, Σ_x, γ, κ) for one node's released moments (no gradient)."""

    __props__ = ("n", "moments", "degrees", "moment_scale")

    def __init__(self, n: int, moments: tuple, degrees: tuple, moment_scale: float):
        self.n = int(n)
        self.moments = tuple(float(v) for v in moments)
        self.degrees = tuple(int(k) for k in degrees)
        self.moment_scale = float(moment_scale)

    def make_node(self, *inputs: Any) -> Apply:  # noqa: D102
        inputs = [pt.as_tensor_variable(np.asarray(a, dtype=np.float64) if
                                        isinstance(a, (float, int, np.ndarray)) else a)
                  for a in inputs]  # fmt: skip
        return Apply(self, inputs, [pt.dscalar()])

    def perform(self, node: Apply, inputs: list, outputs: list) -> None:  # noqa: D102
        s, loc, cov, skew, kurt = (np.asarray(a, dtype=np.float64) for a in inputs)
        n = float(self.n)
        xbar = s[0] / n
        # γ's prior density is the PyMC variable's own (a truncated Cauchy), not the Potential's.
        shape = XShape(np.zeros(()), np.zeros(()), np.asarray(self.moments),
                       np.asarray(self.degrees), np.asarray(self.moment_scale),
                       ShapePrior(skew_scale=None))  # fmt: skip
        out = shape_term(xbar, s[1] - n * xbar**2, loc[0], cov[0, 0], n, shape, skew, kurt)
        outputs[0][0] = np.asarray(out, dtype=np.float64)

    def pullback(self, inputs: list, outputs: list, output_grads: list) -> list:  # noqa: D102
        return [grad_undefined(self, i, x, "the shape potential has no gradient")
                for i, x in enumerate(inputs)]  # fmt: skip


def shape_potential(
    s: pt.TensorVariable,
    x_loc: pt.TensorVariable,
    x_cov: pt.TensorVariable,
    skew: pt.TensorVariable,
    kurt: pt.TensorVariable,
    *,
    n: int,
    moments: npt.ArrayLike,
    degrees: npt.ArrayLike,
    moment_scale: float,
) -> pt.TensorVariable:
    """Log p_shape(x̄, S) − log p_normal(x̄, S) + log p(released moments), d = 1.

    Parameters
    ----------
    s
        The latent statistic ``(Σx, Σx², Σy, Σxy, Σy²)``.
    x_loc, x_cov
        μ_x ``(1,)`` and Σ_x ``(1, 1)``.
    skew, kurt
        γ and κ of the shape family.
    n
        Number of records.
    moments, degrees, moment_scale
        The released noisy sums of x^k, their degrees k ∈ {3, 4} and their Laplace scale.
    """
    op = ShapePotentialOp(n, tuple(np.ravel(moments)), tuple(np.ravel(degrees)), moment_scale)
    return op(s, x_loc, x_cov, skew, kurt)
