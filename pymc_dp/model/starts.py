"""Free variables whose chains start where the release says, without PyMC initial values.

A grouped model starts its population mean and spread at what the releases estimate
(:func:`~pymc_dp.model.hierarchical.window_start`), a marginal-table model its terms at the
table's mode: chains started at the prior's centre can settle in a far mode that NUTS does not
leave. PyMC's ``initval`` would say so, but PyMC's model transforms refuse a model with initial
values (``pm.do``, ``pm.observe``, ``copy.copy(model)``, ``freeze_dims_and_data``, hence
nutpie's JAX backend). Here the start is the variable's *support point* instead, the point PyMC
and nutpie start from (jittered) when no initial value is set: the variable is
``pm.CustomDist`` around the same distribution, with the same density, transform and name in
the model's description, whose support point is the start.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.distributions.transforms import _default_transform

__all__ = ["started"]


def started(
    dist: type[pm.Distribution],
    name: str,
    params: Mapping[str, Any],
    start: Any | None,
    **kwargs: Any,
) -> Any:
    """``dist(name, **params, **kwargs)`` whose chains start at ``start``.

    Parameters
    ----------
    dist
        A PyMC distribution class (``pm.Normal``, ``pm.HalfNormal``, ``pm.MvNormal``, ...).
    name
        The variable's name.
    params
        The distribution's parameters, by keyword.
    start
        Where chains start (broadcast to the variable's shape), or None: the plain ``dist``
        (PyMC's own support point).
    **kwargs
        The model variable's arguments (``dims``, ...).

    Returns
    -------
    TensorVariable
        The free variable: its density, default transform and support dimensions are
        ``dist``'s, and ``pm.Model.str_repr`` names it ``dist``.
    """
    if start is None:
        return dist(name, **params, **kwargs)
    keys = list(params)
    base = dist.dist(**params)
    value = pt.as_tensor_variable(np.asarray(start, dtype=float))

    def make(*args: Any) -> Any:
        # CustomDist passes the parameters positionally, the size last.
        return dist.dist(**dict(zip(keys, args[:-1], strict=True)), size=args[-1])

    def support_point(rv: Any, size: Any, *args: Any) -> Any:
        return pt.broadcast_to(value, rv.shape).astype(rv.dtype)

    return pm.CustomDist(
        name,
        *params.values(),
        dist=make,
        support_point=support_point,
        default_transform=_default_transform(base.owner.op, base),
        ndim_supp=base.owner.op.ndim_supp,
        class_name=dist.__name__,
        **kwargs,
    )
