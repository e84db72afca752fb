"""A prior draw of θ kept inside its support, as a PyMC initial value.

Chains of Algorithm 1 start from a draw of θ's prior. Under a vague prior (``pm.Beta(0.01,
0.01)``, ``pm.Dirichlet(np.full(3, 0.01))``) that draw often rounds to exactly 0 or 1, where
PyMC's logit, log and simplex transforms are infinite and the CLT variance of s is 0. The
initial value here is a fresh draw of the same prior moved inside the support by at most the
float resolution at the edge (:mod:`pymc_dp.kernels.conjugate`); where that is not possible
(hyperparameters that are themselves random, a transform we do not know) it stays ``"prior"``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytensor
import pytensor.tensor as pt
from pymc.distributions import transforms
from pymc.logprob.transforms import SimplexTransform

from pymc_dp._compat import ancestors

__all__ = ["interior_prior_initval"]

_TINY = pt.constant(np.finfo(np.float64).tiny, dtype="float64")
_BELOW_ONE = pt.constant(np.nextafter(1.0, 0.0), dtype="float64")
_HUGE = pt.constant(np.finfo(np.float64).max, dtype="float64")


def _inside(draw: pt.TensorVariable, transform: Any) -> pt.TensorVariable | None:
    """``draw`` moved inside the support the transform maps from, or None if unknown."""
    if transform is transforms.logodds:
        return pt.clip(draw, _TINY, _BELOW_ONE)
    if transform is transforms.log:
        return pt.clip(draw, _TINY, _HUGE)
    if isinstance(transform, SimplexTransform):
        floored = pt.maximum(draw, _TINY)
        return floored / pt.sum(floored, axis=-1, keepdims=True)
    return None


def interior_prior_initval(model: Any, rv: pt.TensorVariable) -> Any:
    """An initial value for ``rv``: a prior draw inside its support, or ``"prior"``.

    Parameters
    ----------
    model
        The model that holds ``rv``.
    rv
        A free random variable of ``model`` (a conjugate θ).

    Returns
    -------
    pytensor.tensor.TensorVariable or str
        A graph drawing from ``rv``'s prior with a fresh random generator, clipped into the
        support, for :meth:`pymc.Model.set_initval`; ``"prior"`` when the prior's parameters
        depend on other random variables or the support is not one of (0, 1), (0, ∞) and the
        simplex.
    """
    transform = model.rvs_to_transforms.get(rv)
    op, node = rv.owner.op, rv.owner
    params = op.dist_params(node)
    if set(ancestors(params)) & set(model.basic_RVs):
        return "prior"
    rng = pytensor.shared(np.random.default_rng(), borrow=True)
    draw = op.make_node(rng, op.size_param(node), *params).outputs[1]
    inside = _inside(draw, transform)
    return "prior" if inside is None else inside
