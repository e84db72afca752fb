"""The one place for differences between PyMC 5 and PyMC 6 (ArviZ 0.x/1.x, PyTensor 2/3)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pymc.step_methods as _pm_step_methods
from pytensor.graph.op import Op

try:  # PyTensor >= 2.32 moved graph traversal helpers out of pytensor.graph.basic.
    from pytensor.graph.traversal import ancestors, graph_inputs
except ImportError:  # pragma: no cover - older PyTensor
    from pytensor.graph.basic import ancestors, graph_inputs

__all__ = [
    "PULLBACK",
    "ancestors",
    "graph_inputs",
    "hdi_summary",
    "op_pullback",
    "posterior_dataset",
    "pullback_op",
    "register_step_methods",
    "set_posterior",
]

PULLBACK = hasattr(Op, "pullback")
"""Whether PyTensor differentiates an Op by its ``pullback`` (PyTensor 3) or by ``L_op`` (2).

PyTensor 3 deprecates ``L_op`` and ``grad`` ("will stop being called in a future version"), and
PyTensor 2 has no ``pullback``: our Ops define ``pullback`` and :func:`pullback_op` gives them
the ``L_op`` PyTensor 2 calls.
"""


def _l_op(self: Any, inputs: Any, outputs: Any, output_grads: Any) -> Any:
    return self.pullback(inputs, outputs, output_grads)


def pullback_op(cls: type) -> type:
    """Class decorator: an Op written with PyTensor 3's ``pullback`` also serves PyTensor 2.

    On PyTensor 2 the class gets an ``L_op`` that calls ``self.pullback``, so a subclass that
    overrides ``pullback`` is served too; on PyTensor 3 the class is returned unchanged.
    """
    if not PULLBACK:
        cls.L_op = _l_op  # type: ignore[attr-defined]
    return cls


def op_pullback(op: Any, inputs: Any, outputs: Any, cotangents: Any) -> Any:
    """The vector-Jacobian product of ``op`` at a node's ``inputs`` and ``outputs``."""
    method = op.pullback if PULLBACK else op.L_op
    return method(inputs, outputs, cotangents)


def register_step_methods(methods: Iterable[type]) -> None:
    """Add step methods to the list ``pm.sample`` chooses from, once (idempotent)."""
    # Both PyMC 5 and 6 keep the list here; ``pm.STEP_METHODS`` is deprecated in PyMC 6.
    registry = _pm_step_methods.STEP_METHODS
    for method in methods:
        if method not in registry:
            registry.append(method)


def posterior_dataset(idata: Any) -> Any:
    """The posterior group as an ``xarray.Dataset``, from InferenceData or a DataTree."""
    posterior = idata["posterior"] if not hasattr(idata, "posterior") else idata.posterior
    return posterior.to_dataset() if hasattr(posterior, "to_dataset") else posterior


def sample_stats_dataset(idata: Any) -> Any | None:
    """The sample_stats group as an ``xarray.Dataset`` (None if the fit has none)."""
    try:
        stats = idata.sample_stats if hasattr(idata, "sample_stats") else idata["sample_stats"]
    except (KeyError, AttributeError):
        return None
    return stats.to_dataset() if hasattr(stats, "to_dataset") else stats


def set_posterior(idata: Any, variables: dict[str, Any]) -> Any:
    """Add ``xarray.DataArray`` variables to the posterior group of InferenceData or a DataTree."""
    if hasattr(idata, "posterior") and not hasattr(idata, "children"):  # ArviZ 0.x
        for name, array in variables.items():
            idata.posterior[name] = array
        return idata
    node = idata["posterior"]
    idata["posterior"] = node.to_dataset().assign(variables)
    return idata


def hdi_summary(idata: Any, var_names: list[str], prob: float = 0.94) -> Any:
    """``az.summary`` with the highest-density interval of ``prob``, under either ArviZ.

    ArviZ 0.x names its bounds ``hdi_3%``/``hdi_97%`` (for 0.94); ArviZ 1.x defaults to an
    equal-tailed interval and names the HDI's bounds ``hdi94_lb``/``hdi94_ub``.
    """
    import arviz as az

    if hasattr(az, "plot_trace_dist"):  # ArviZ 1.x
        return az.summary(idata, var_names=var_names, ci_kind="hdi", ci_prob=prob)
    return az.summary(idata, var_names=var_names, hdi_prob=prob)
