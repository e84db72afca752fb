"""Common machinery of the DP Gibbs step methods (PyMC adapters over the kernels)."""

from __future__ import annotations

from typing import Any, ClassVar

import pymc as pm
from pymc.step_methods.compound import BlockedStep, Competence, StepMethodState
from pymc.util import get_random_generator, get_value_vars_from_user_vars

from pymc_dp.model.nodes.info import TAG

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

    _new_chain: bool = False

    def set_rng(self, rng: Any) -> None:
        """Take a chain's generator; PyMC 5 calls this once per chain, before its first step."""
        self.rng = get_random_generator(rng, copy=False)
        self._new_chain = True

    def setup_chain(self, rng: Any, tune: int, draws: int) -> None:
        """PyMC 6's per-chain set-up: as :meth:`set_rng`."""
        self.set_rng(rng)

    def _starts_chain(self) -> bool:
        """True at the first step of each chain ``pm.sample`` runs, then False.

        Steps that draw parameters from a conjugate posterior draw them from the prior instead at
        that step: each chain then starts from its own prior draw (Algorithm 1), so R-hat can see
        slow mixing, without the ``initval="prior"`` that PyMC's model transforms
        (``pm.do``, ``pm.observe``, ``compute_log_likelihood``) refuse.
        """
        new, self._new_chain = self._new_chain, False
        return new

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
    """The :class:`~pymc_dp.model.noisy_suffstat.NoisySuffStatInfo` stored on ``rv``, if any."""
    return getattr(getattr(rv, "tag", None), TAG, None)
