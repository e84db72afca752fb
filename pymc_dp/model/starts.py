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

Given a ``scale`` too (what the release says of the variable's posterior spread), the sampler
moves the variable in units of that scale (:class:`Standardised`, after its default
transform): NUTS samplers start with a unit mass matrix, and BlackJAX's adaptation also with a
unit step, so a population mean the release pins to a few hundredths otherwise sets a step
size of about 0.01 for the whole model in the first iterations of tuning, whose trajectories of
up to 1023 such steps can carry one group's effect over the barrier into its far mode, where it
stays (``docs/scale.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pymc.distributions.transforms import _default_transform
from pymc.logprob.transforms import ChainedTransform, Transform
from pytensor.compile.mode import Mode

__all__ = ["Standardised", "started"]


class Standardised(Transform):
    """u = (x − ``centre``) / ``scale``: a variable sampled in units of its expected spread.

    Parameters
    ----------
    centre, scale
        Where the variable is expected (on the scale the transform receives) and how far it
        spreads; ``scale`` > 0.

    Examples
    --------
    >>> t = Standardised(2.0, 0.5)
    >>> float(t.backward(t.forward(3.0)).eval())
    3.0
    """

    name = "standardised"

    def __init__(self, centre: float, scale: float) -> None:
        if not (np.isfinite(centre) and np.isfinite(scale) and scale > 0.0):
            raise ValueError(
                f"Standardised needs a finite centre and a finite scale > 0 (got {centre!r}, "
                f"{scale!r})"
            )
        self.centre, self.scale = float(centre), float(scale)

    def forward(self, value: Any, *inputs: Any) -> Any:
        """The sampler's coordinate (x − centre) / scale."""
        return (pt.as_tensor_variable(value) - self.centre) / self.scale

    def backward(self, value: Any, *inputs: Any) -> Any:
        """The variable, centre + scale·u."""
        return self.centre + self.scale * pt.as_tensor_variable(value)

    def log_jac_det(self, value: Any, *inputs: Any) -> Any:
        """The log of the scale, for every element (d backward / du is the scale)."""
        return pt.zeros_like(pt.as_tensor_variable(value)) + np.log(self.scale)


def started(
    dist: type[pm.Distribution],
    name: str,
    params: Mapping[str, Any],
    start: Any | None,
    scale: float | None = None,
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
    scale
        The variable's expected posterior spread on its default transform's scale (log τ for
        a HalfNormal τ), or None. Given with a ``start``, the sampler's coordinate is the
        variable's default transform at ``start``, divided by ``scale``
        (:class:`Standardised`): same density and posterior, a start at 0, and NUTS's first
        steps sized for the variable.
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

    # PyMC's private rule for a distribution's default transform (PyMC 5.28 and 6.4): the one
    # pm.CustomDist would not find for the distribution it wraps. Check it on a PyMC upgrade.
    transform = _default_transform(base.owner.op, base)
    if scale is not None:
        centre = value if transform is None else transform.forward(value, *base.owner.inputs)
        if value.ndim:
            raise ValueError(f"started: a scale needs a scalar start (got shape {np.shape(start)})")
        # The Python linker, unoptimised: a C compile here cost the first model 4 s.
        centre = pytensor.function([], centre, mode=Mode(linker="py", optimizer=None))()
        standardised = Standardised(float(centre), scale)
        transform = (
            standardised if transform is None else ChainedTransform([transform, standardised])
        )
    return pm.CustomDist(
        name,
        *params.values(),
        dist=make,
        support_point=support_point,
        default_transform=transform,
        ndim_supp=base.owner.op.ndim_supp,
        class_name=dist.__name__,
        **kwargs,
    )
