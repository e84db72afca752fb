"""Small graph helpers the family declarations share."""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.basic import Constant
from pytensor.scalar import Reciprocal
from pytensor.tensor.elemwise import Elemwise
from pytensor.tensor.exceptions import NotScalarConstantError
from pytensor.tensor.variable import TensorVariable

__all__ = ["constant_value", "reciprocal_of"]


def constant_value(var: TensorVariable) -> float | None:
    """The value of a scalar constant graph input, or ``None`` if it is not a constant."""
    if isinstance(var, Constant):
        data = np.asarray(var.data)
        return float(data) if data.ndim == 0 else None
    try:
        return float(pt.get_underlying_scalar_constant_value(var))
    except NotScalarConstantError:
        return None


def reciprocal_of(var: TensorVariable) -> TensorVariable:
    """1 / ``var``, unwrapping PyMC's ``scale = 1 / rate``.

    A rate variable is then found as itself, and can be recognised as a conjugate prior.
    """
    node = var.owner
    if (
        node is not None
        and isinstance(node.op, Elemwise)
        and isinstance(node.op.scalar_op, Reciprocal)
    ):
        return node.inputs[0]
    return pt.reciprocal(var)
