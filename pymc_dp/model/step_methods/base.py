"""Common machinery of the DP Gibbs step methods (PyMC adapters over the kernels).

:class:`DPGibbsStep` holds what every step shares: the constructor ``pm.sample`` calls, the
ownership rule (a step samples exactly the variables whose ``rv.tag`` carries its node's link,
drawn by the op it expects) and the per-chain generator. :func:`require_block` and
:func:`require_sole_use` are the checks that a Gibbs block is whole and used by nothing else.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Iterable
from typing import Any, ClassVar

import pymc as pm
from pymc.step_methods.compound import BlockedStep, Competence, StepMethodState
from pymc.util import get_random_generator, get_value_vars_from_user_vars

from pymc_dp.model.model_access import direct_dependents
from pymc_dp.model.nodes.info import TAG

__all__ = ["DPGibbsStep", "external_nuts_sampler", "require_block", "require_sole_use"]


class DPGibbsStep(BlockedStep):
    """A Gibbs update of the variables of :class:`~pymc_dp.NoisySuffStat` nodes.

    Subclasses draw one conditional with a kernel from :mod:`pymc_dp.kernels`. Each is IDEAL
    for exactly the variables it recognises (:meth:`owns`) and INCOMPATIBLE for every other,
    so ``pm.sample()`` picks them without taking variables from PyMC's own samplers.

    Parameters
    ----------
    vars
        Variables to sample; by default every free variable of the model the step owns.
    model
        The model; defaults to the context model.
    rng
        Seed or generator (``pm.sample`` passes one per chain).
    initial_point, compile_kwargs, blocked
        Accepted for compatibility with ``pm.sample``; ``compile_kwargs`` reach every function
        the step compiles.

    Raises
    ------
    ValueError
        If ``vars`` holds a variable the step does not own (the message says what it samples).

    Notes
    -----
    A subclass names the ``rv.tag`` attribute its node leaves (:attr:`link_tag`) and, where
    that tag alone does not single its variables out, the op that draws them
    (:attr:`op_type`); :meth:`accepts` judges the link itself. A subclass whose variables
    need more (a name among the link's) overrides :meth:`owns`.
    """

    default_blocked: ClassVar[bool] = True
    stats_dtypes_shapes: ClassVar[dict] = {}
    _state_class = StepMethodState

    link_tag: ClassVar[str] = TAG
    """The ``rv.tag`` attribute where a node leaves what this step needs (its link)."""
    op_type: ClassVar[type | None] = None
    """The op of the variables this step samples, ``None`` for any op."""
    role: ClassVar[str] = ""
    """What the step samples, for error messages."""

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

    @classmethod
    def links(cls, rv: Any) -> Any:
        """What the node left on ``rv.tag`` under :attr:`link_tag` (``None`` if nothing)."""
        return getattr(getattr(rv, "tag", None), cls.link_tag, None)

    @staticmethod
    def accepts(links: Any) -> bool:
        """Whether a variable with these links is this step's (given its op is)."""
        return links is not None

    @classmethod
    def owns(cls, rv: Any) -> bool:
        """Whether this step method samples ``rv``."""
        op = getattr(getattr(rv, "owner", None), "op", None)
        if cls.op_type is not None and not isinstance(op, cls.op_type):
            return False
        return cls.accepts(cls.links(rv))

    def _setup(self, model: pm.Model, rvs: list, compile_kwargs: dict) -> None:
        """Compile what :meth:`step` needs for ``rvs``."""
        raise NotImplementedError

    nuts_can_replace: ClassVar[bool] = False
    """Whether NUTS samples this step's variables correctly too (θ steps: GridStep,
    IndependenceStep), so that ``pm.sample(nuts_sampler="nutpie")`` and the other external
    samplers, which run NUTS on every variable, may take them."""

    @classmethod
    def competence(cls, var: Any, has_grad: bool) -> Competence:
        """IDEAL for the variables of a NoisySuffStat node this step owns, else INCOMPATIBLE.

        Under ``pm.sample(nuts_sampler=...)`` with an external sampler, a step NUTS can replace
        steps aside; any other raises a ``ValueError`` naming the variable and the way out
        (PyMC's own message does not say which variable needs which step).
        """
        if not cls.owns(var):
            return Competence.INCOMPATIBLE
        sampler = external_nuts_sampler()
        if sampler is None:
            return Competence.IDEAL
        if cls.nuts_can_replace:
            return Competence.INCOMPATIBLE
        raise ValueError(
            f"pm.sample(nuts_sampler={sampler!r}) runs NUTS on every variable, and "
            f"{getattr(var, 'name', var)!r} needs pymc_dp's {cls.__name__} (a Gibbs draw NUTS "
            "cannot replace): sample this model with nuts_sampler='pymc', or use "
            "likelihood='exact' where the family has it"
        )


def external_nuts_sampler() -> str | None:
    """The ``nuts_sampler`` of the ``pm.sample`` call assigning steps now, unless PyMC's own.

    ``pm.sample`` assigns step methods (:meth:`DPGibbsStep.competence`) without telling them
    which sampler will run; its argument is read from its frame on the call stack.
    """
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "sample" and frame.f_globals.get("__name__") == _PM_SAMPLE:
            # None (PyMC 6's default): PyMC's own NUTS wherever another step is assigned.
            sampler = frame.f_locals.get("nuts_sampler")
            return None if sampler in (None, "pymc") else str(sampler)
        frame = frame.f_back
    return None


_PM_SAMPLE = "pymc.sampling.mcmc"


def require_block(block: Iterable[str], given: Collection[str], message: str) -> None:
    """Raise ``ValueError(message)`` unless ``given`` holds every variable of ``block``.

    A Gibbs block is drawn jointly, so a step handed part of it cannot draw any of it.
    """
    if not set(block) <= set(given):
        raise ValueError(message)


def require_sole_use(model: pm.Model, rv: Any, allowed: Collection[str], why: str) -> None:
    """Raise unless nothing outside ``allowed`` (names) uses ``rv`` directly.

    A conjugate draw of ``rv`` is its full conditional only if its density has no other term.
    The message is ``"{rv.name!r} is also used by [...], " + why``.
    """
    extra = sorted(set(direct_dependents(model, rv)) - set(allowed))
    if extra:
        raise ValueError(f"{rv.name!r} is also used by {extra}, {why}")
