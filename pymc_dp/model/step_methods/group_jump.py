"""Jumps of each group's effect between the modes of its conditional, beside NUTS.

A partially pooled model of a windowed release (:func:`~pymc_dp.model.hierarchical.
build_grouped_model` on Poisson records in a window) gives each group's θ_g a far mode, where
so few records fall in the window that the window sum is small again. With the window counts
released that mode holds no mass, but NUTS cannot leave it once a chain wanders in during
warm-up: at 50 groups, ε = 0.1 and a fifth of the budget on the counts, one chain of two held
7 groups there, 37 nats below the other, with R-hat 1.85. The groups are independent given
(μ, τ), so :class:`GroupJumpStep` moves each group's effect by its own Metropolis–Hastings
step (:func:`~pymc_dp.kernels.group_jump.jump`) after NUTS in every iteration; each round of
jumps adds one evaluation of the model's per-group log density to NUTS's dozens of gradients.
A grouped Normal window's (μ_g, log σ_g) jump together: a group whose noisy sums are near 0 has
modes inside the window and outside it, and there the step makes several rounds an iteration
when the groups are few (:func:`jump_rounds`). :func:`grouped_steps` gives the pair for
``pm.sample(step=...)``; ``pymc-dp fit`` uses it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.pytensorf import compile as pm_compile
from pymc.step_methods.compound import Competence

from pymc_dp._compat import graph_inputs
from pymc_dp.kernels.group_jump import JumpProposal, jump
from pymc_dp.model.model_access import PointReader, direct_dependents
from pymc_dp.model.step_methods.base import DPGibbsStep

__all__ = [
    "GROUP_JUMP_TAG",
    "JUMP_ROUNDS_MAX",
    "GroupEffects",
    "GroupJumpStep",
    "grouped_steps",
    "jump_rounds",
]

GROUP_JUMP_TAG = "pymc_dp_group_effects"
"""The ``rv.tag`` attribute where :func:`~pymc_dp.model.hierarchical.build_grouped_model`
leaves a :class:`GroupEffects` on the free variable of the group effects."""


@dataclasses.dataclass(frozen=True)
class GroupEffects:
    """How free vectors z map to the group effects η_g ~ N(μ, τ²), and where they point.

    η_g = μ + τ^(1−w_g) (z_g − w_g μ) (:func:`~pymc_dp.model.hierarchical.partially_centred`),
    component by component for a vector effect: the tagged variable holds the first component,
    ``variables`` name the free variables of the others (the location-scale link's
    (μ_g, log σ_g): ``z`` and ``z_sigma``), and ``mu``, ``tau`` name one population parameter
    per component. Names, not graph objects, so that it pickles with the model.
    """

    mu: str | tuple[str, ...]
    """Name of μ (one per component)."""
    tau: str | tuple[str, ...]
    """Name of τ (one per component)."""
    weight: np.ndarray
    """The centring weights w_g, shape ``(G,)`` (``(G, J)`` for J components)."""
    proposal: JumpProposal
    """Each group's own estimate of η_g and its standard error, from its release."""
    variables: tuple[str, ...] = ()
    """Names of the free variables of the components after the first (none: a scalar)."""


class GroupJumpStep(DPGibbsStep):
    """Metropolis–Hastings jumps of every group's effect, given μ, τ and all else.

    Never assigned by ``pm.sample()`` on its own: NUTS samples the same variable, and this step
    only adds moves NUTS cannot make. Use :func:`grouped_steps`.

    Parameters
    ----------
    vars
        The free variable of the group effects (``z`` of a model from
        :func:`~pymc_dp.model.hierarchical.build_grouped_model` with a windowed family); a
        vector effect's other components (``z_sigma``) are moved with it.
    rounds
        Jumps of every group per iteration, each from the last; ``None``: :func:`jump_rounds`
        of the number of groups for a vector effect (the Normal window's (μ_g, log σ_g)), one
        for a scalar effect.
    model, rng, initial_point, compile_kwargs, blocked
        As for :class:`~pymc_dp.model.step_methods.base.DPGibbsStep`.

    Raises
    ------
    ValueError
        If a term of the model's log density that reads the effects is not one value per group
        (the groups would not be independent given the rest), or ``rounds`` is below 1.

    Notes
    -----
    Each sweep records ``group_jumps``, the number of jumps made (over all rounds).
    """

    name = "dp_group_jump"
    role: ClassVar[str] = "it holds no group effects (build_grouped_model of a windowed release)"
    link_tag: ClassVar[str] = GROUP_JUMP_TAG
    stats_dtypes_shapes: ClassVar[dict] = {"group_jumps": (np.int64, [])}

    def __init__(self, vars: Any = None, *, rounds: int | None = None, **kwargs: Any) -> None:
        if rounds is not None and (isinstance(rounds, bool) or int(rounds) != rounds
                                   or rounds < 1):  # fmt: skip
            raise ValueError(f"rounds must be a whole number >= 1, or None (got {rounds!r})")
        self._rounds = None if rounds is None else int(rounds)
        super().__init__(vars, **kwargs)

    @classmethod
    def competence(cls, var: Any, has_grad: bool) -> Competence:
        """INCOMPATIBLE: NUTS owns these variables; this step is added beside it."""
        return Competence.INCOMPATIBLE

    def _setup(self, model: pm.Model, rvs: list, compile_kwargs: dict) -> None:
        if len(rvs) != 1:
            raise ValueError(
                f"GroupJumpStep samples one vector of group effects (got {len(rvs)} variables)"
            )
        effects: GroupEffects = self.links(rvs[0])
        self._effects = effects
        self._vector = len(effects.variables) > 0
        rvs = [rvs[0], *(model[name] for name in effects.variables)]
        values = [model.rvs_to_values[rv] for rv in rvs]
        self._names = [v.name for v in values]
        own = {id(v) for v in (*rvs, *values)}
        dependents = {
            n: model[n]
            for rv in rvs
            for n in direct_dependents(model, rv)
            if id(model[n]) not in own
        }
        terms = model.logp(vars=[*rvs, *dependents.values()], sum=False)
        size = effects.weight.shape[0]
        names = ", ".join(repr(rv.name) for rv in rvs)
        for term in terms:
            if term.type.ndim != 1 or term.type.shape[0] not in (None, size):
                raise ValueError(
                    f"GroupJumpStep needs one log-density term per group for {names}; a "
                    f"term of shape {term.type.shape} reads it, so the groups are not "
                    "independent given the rest: sample this model with NUTS alone"
                )
        total = pt.add(*terms)
        inputs = set(graph_inputs([total]))
        others = [v for v in model.value_vars if id(v) not in own and v in inputs]
        self._others = [v.name for v in others]
        self._logp = pm_compile(
            [*values, *others], total, on_unused_input="ignore", **compile_kwargs
        )
        mus, taus = (effects.mu, effects.tau) if self._vector else ((effects.mu,), (effects.tau,))
        self._population = PointReader(model, [model[n] for n in (*mus, *taus)], **compile_kwargs)
        # One round for a scalar effect: the windowed Poisson's jumps rescue chains from a far
        # mode, and 2 rounds at 50 groups cost ESS there (jump_rounds).
        default = jump_rounds(size) if self._vector else 1
        self.rounds = self._rounds if self._rounds is not None else default

    def step(self, point: dict) -> tuple[dict, list[dict]]:
        """Propose a new effect for every group; keep each by its own acceptance ratio."""
        effects = self._effects
        population = [np.float64(v) for v in self._population(point)]
        half = len(population) // 2
        # Scalars for one component (as before), one value per component otherwise.
        mu, tau = (
            (np.array(population[:half]), np.array(population[half:]))
            if self._vector
            else (float(population[0]), float(population[1]))
        )
        w = effects.weight
        zs = [np.asarray(point[name], dtype=np.float64) for name in self._names]
        z = np.stack(zs, axis=-1) if self._vector else zs[0]
        others = [point[name] for name in self._others]

        def to_z(eta: np.ndarray) -> np.ndarray:
            return w * mu + tau ** (w - 1.0) * (eta - mu)

        def logp(z: np.ndarray) -> np.ndarray:
            return self._logp(*(np.moveaxis(z, -1, 0) if self._vector else [z]), *others)

        proposed: list[np.ndarray] = []

        def log_target(eta: np.ndarray) -> np.ndarray:
            # z ↦ η is affine given (μ, τ): its Jacobian is the same for both points.
            proposed.append(logp(to_z(eta)))
            return proposed[-1]

        eta = mu + tau ** (1.0 - w) * (z - w * mu)
        current, jumps = logp(z), 0
        for _ in range(self.rounds):
            new_eta, moved = jump(
                self.rng, current=eta, log_target=log_target, proposal=effects.proposal,
                mu=mu, tau=tau, current_log_target=current,
            )  # fmt: skip
            # Groups that stay keep their z bit for bit (no round trip through η); `jump`
            # returns their η unchanged.
            keep = moved[:, None] if self._vector else moved
            z, eta = np.where(keep, to_z(new_eta), z), new_eta
            # The next round starts from the log density of what this one kept.
            current, jumps = np.where(moved, proposed[-1], current), jumps + int(moved.sum())
        point = dict(point)
        for j, name in enumerate(self._names):
            value = z[:, j] if self._vector else z
            point[name] = value.astype(point[name].dtype)
        return point, [{"group_jumps": jumps}]


JUMP_ROUNDS_MAX = 5
"""Jump rounds per iteration for the fewest groups (:func:`jump_rounds`)."""


def jump_rounds(groups: int) -> int:
    """Default rounds of jumps per iteration for ``groups`` groups: 100 // G, from 1 to 5.

    A round costs about 0.2 ms at up to 50 groups (mostly fixed Python and call costs) and
    0.5 ms at 500, where one NUTS iteration costs 3 ms at 50 groups and more with more groups,
    so more rounds are cheap only where the groups are few. That is also where they are needed:
    a grouped Normal window whose groups' noisy sums are near 0 (records inside the window near
    0, or outside it, explain them alike) has groups with several modes, and on Grunfeld's 11
    firms at ε = 1 (``docs/scale.md``) 5 rounds raised μ's bulk ESS under ``pm.sample()`` from
    49–90 to 92–175 of 2 × 1000 (4 seeds; the largest R-hat from 1.03–1.06 to 1.005–1.022). On
    the benchmark's 50 groups (unimodal), 2 rounds left ESS/s as it was (0.74–1.17×, geometric
    mean 1.01× over 3 seeds and 2 ε) and 5 cost 16 %. :class:`GroupJumpStep` uses it for vector
    effects only: on the windowed Poisson's 50 groups (sums alone) 2 rounds gave 0.86–1.22× in
    three runs and 0.30× in a fourth (ε = 0.1, bulk ESS 158 against 1108).

    Examples
    --------
    >>> [jump_rounds(g) for g in (11, 30, 50, 500)]
    [5, 3, 2, 1]
    """
    return max(1, min(JUMP_ROUNDS_MAX, 100 // max(int(groups), 1)))


def grouped_steps(model: pm.Model | None = None, *, nuts: Any = None) -> list | None:
    """``pm.sample``'s steps for a grouped model with far modes: NUTS, then group jumps.

    Parameters
    ----------
    model
        A model from :func:`~pymc_dp.model.hierarchical.build_grouped_model`; defaults to the
        context model.
    nuts
        A NUTS step on every continuous variable (e.g. from ``pm.init_nuts``); default
        ``pm.NUTS()``.

    Returns
    -------
    list or None
        ``[nuts, GroupJumpStep(...)]`` if the model's group effects carry a proposal (windowed
        families), else ``None`` (``pm.sample``'s own choice is then the right one).

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp as pmdp
    >>> from pymc_dp.model.hierarchical import build_grouped_model
    >>> rng = np.random.default_rng(0)
    >>> by = np.repeat(["a", "b"], 200)
    >>> rs = pmdp.release_grouped(rng.poisson(4.0, 400), pm.Poisson, by=by, groups=["a", "b"],
    ...     sizes="public", bounds=(0, 30), epsilon=0.5, count_share=0.2, rng=1)
    >>> model = build_grouped_model(rs)
    >>> [type(s).__name__ for s in pmdp.grouped_steps(model)]  # then pm.sample(step=...)
    ['NUTS', 'GroupJumpStep']
    """
    model = pm.modelcontext(model)
    effects = [model.rvs_to_values[rv] for rv in model.free_RVs if GroupJumpStep.owns(rv)]
    if not effects:
        return None
    with model:
        return [nuts if nuts is not None else pm.NUTS(), GroupJumpStep(effects)]
