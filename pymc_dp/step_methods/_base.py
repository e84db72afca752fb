"""Common machinery of the DP Gibbs step methods (PyMC adapters over the kernels)."""

from __future__ import annotations

from typing import Any, ClassVar

import pymc as pm
from pymc.step_methods.compound import BlockedStep, Competence, StepMethodState
from pymc.util import get_random_generator, get_value_vars_from_user_vars

from pymc_dp.noisy_suffstat import TAG

__all__ = ["DPGibbsStep"]


class DPGibbsStep(BlockedStep):
    """A Gibbs update of the variables of :class:`~pymc_dp.NoisySuffStat` nodes.

    Subclasses draw one conditional with a kernel from :mod:`pymc_dp.kernels`. Each is IDEAL
    for exactly the variables it recognises (:meth:`owns`) and INCOMPATIBLE for every other,
    so ``pm.sample()`` picks them without taking variables from PyMC's own samplers.
    """

    default_blocked: ClassVar[bool] = True
    stats_dtypes_shapes: ClassVar[dict] = {}
    _state_class = StepMethodState

    def __init__(
        self,
        vars: Any = None,
        *,
        model: pm.Model | None = None,
        rng: Any = None,
        initial_point: dict | None = None,
        compile_kwargs: dict | None = None,
        blocked: bool = True,
    ) -> None:
        model = pm.modelcontext(model)
        if vars is None:
            vars = [model.rvs_to_values[rv] for rv in model.free_RVs if self.owns(rv)]
        vars = get_value_vars_from_user_vars(vars, model)
        for var in vars:
            rv = model.values_to_rvs[var]
            if not self.owns(rv):
                raise ValueError(
                    f"{type(self).__name__} cannot sample {rv.name!r}: {self.role}. Let "
                    "pm.sample() assign step methods, or pass this variable to another sampler."
                )
        self.vars = vars
        self.var_names = tuple(var.name for var in vars)
        self.rng = get_random_generator(rng)
        self._setup(model, [model.values_to_rvs[v] for v in vars], compile_kwargs or {})

    role: ClassVar[str] = ""
    """What the step samples, for error messages."""

    @staticmethod
    def owns(rv: Any) -> bool:
        """Whether this step method samples ``rv``."""
        raise NotImplementedError

    def _setup(self, model: pm.Model, rvs: list, compile_kwargs: dict) -> None:
        """Compile what :meth:`step` needs for ``rvs``."""
        raise NotImplementedError

    @classmethod
    def competence(cls, var: Any, has_grad: bool) -> Competence:
        """IDEAL for the variables of a NoisySuffStat node this step owns, else INCOMPATIBLE."""
        return Competence.IDEAL if cls.owns(var) else Competence.INCOMPATIBLE


def node_info(rv: Any) -> Any:
    """The :class:`~pymc_dp.noisy_suffstat.NoisySuffStatInfo` stored on ``rv``, if any."""
    return getattr(getattr(rv, "tag", None), TAG, None)
