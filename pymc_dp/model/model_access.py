"""Read values from, and write values into, a PyMC point: shared by the DP step methods.

Step methods see points keyed by value-variable names, in transformed space (``p_logodds__``).
These helpers compile, once per step method, a function that evaluates model expressions from a
point, and a function that maps a new value of a variable back into its transformed space.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytensor
import pytensor.tensor as pt
from pymc.pytensorf import compile as pm_compile

from pymc_dp._compat import ancestors, graph_inputs
from pymc_dp.likelihoods.quick_mode import QUICK_MODE

__all__ = [
    "QUICK_MODE",
    "PointReader",
    "ValueWriter",
    "conditional_logp",
    "direct_dependents",
]


class PointReader:
    """Evaluate model expressions (in terms of random variables) at a point.

    Parameters
    ----------
    model
        The PyMC model.
    outputs
        Expressions that may contain the model's random variables; each is evaluated with random
        variables replaced by their (back-transformed) values and observed ones by their data.
    """

    def __init__(self, model: Any, outputs: Sequence[pt.TensorVariable], **compile_kwargs: Any):
        replaced = model.replace_rvs_by_values(list(outputs))
        used = set(graph_inputs(replaced))
        self.input_names = [v.name for v in model.value_vars if v in used]
        inputs = [v for v in model.value_vars if v in used]
        self._fn = pm_compile(inputs, replaced, on_unused_input="ignore", **compile_kwargs)
        self._fn.trust_input = True

    def __call__(self, point: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Return the outputs' values at ``point``."""
        return self._fn(*[point[name] for name in self.input_names])


class ValueWriter:
    """Map an untransformed value of ``rv`` into the transformed space of its value variable."""

    def __init__(self, model: Any, rv: pt.TensorVariable, **compile_kwargs: Any):
        value_var = model.rvs_to_values[rv]
        self.name = value_var.name
        transform = model.rvs_to_transforms.get(rv)
        self._fn: Callable[..., np.ndarray] | None = None
        self.input_names: list[str] = []
        if transform is None:
            return
        new_value = rv.type()
        (rv_inputs,) = [model.replace_rvs_by_values(list(rv.owner.inputs))]
        forward = transform.forward(new_value, *rv_inputs)
        used = set(graph_inputs([forward]))
        inputs = [v for v in model.value_vars if v in used]
        self.input_names = [v.name for v in inputs]
        self._fn = pm_compile(
            [new_value, *inputs], forward, on_unused_input="ignore", **compile_kwargs
        )
        self._dtype = value_var.dtype

    def __call__(self, value: np.ndarray, point: dict[str, np.ndarray]) -> np.ndarray:
        """Return ``value`` in the transformed space, as the point stores it."""
        if self._fn is None:
            return np.asarray(value, dtype=pytensor.config.floatX)
        args = [point[name] for name in self.input_names]
        return np.asarray(self._fn(np.asarray(value, dtype=self._dtype), *args))


def direct_dependents(model: Any, rv: pt.TensorVariable) -> list[str]:
    """Names of model variables and potentials whose density directly involves ``rv``.

    Dependence through another random variable does not count (that variable blocks it); a
    deterministic does not count, as it adds nothing to the density.
    """
    others = [v for v in model.basic_RVs if v is not rv]
    found = []
    for other in others:
        blockers = [v for v in model.basic_RVs if v is not rv and v is not other]
        if rv in ancestors(other.owner.inputs, blockers=blockers):
            found.append(other.name)
    for potential in model.potentials:
        if rv in ancestors([potential], blockers=others):
            found.append(potential.name)
    return found


def conditional_logp(
    model: Any, rv: pt.TensorVariable | Sequence[pt.TensorVariable]
) -> tuple[Any, pt.TensorVariable, list[pt.TensorVariable]]:
    """The full conditional of ``rv`` (or of a block of variables) on their unconstrained scale.

    Returns the value variable (a list of them for a block), the log density up to a constant,
    Jacobians included, and the other value variables that density reads.
    """
    block = list(rv) if isinstance(rv, Sequence) else [rv]
    values = [model.rvs_to_values[v] for v in block]
    dependents = []
    for member in block:
        for name in direct_dependents(model, member):
            if model[name] not in block and model[name] not in dependents:
                dependents.append(model[name])
    terms = model.logp(vars=[*block, *dependents], sum=False)
    total = pt.add(*[pt.sum(term) for term in terms])
    used = set(graph_inputs([total]))
    others = [v for v in model.value_vars if v not in values and v in used]
    return (values if isinstance(rv, Sequence) else values[0]), total, others
