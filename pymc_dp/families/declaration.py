"""What the package says about a family by its name, readable without NumPy, PyMC or PyTensor.

A family is one :class:`FamilyDeclaration`: its name, the class that implements its mathematics
(t(x), η(θ), A(η), the conjugate update; :mod:`pymc_dp.families.base`), its default prior and
how a release window sets it, what the command line says about it and which options it takes,
how a dry run names its statistic, and the partially pooled model it joins. Every module that
used to keep a table keyed by family name reads these attributes instead.

Nothing here imports more than the standard library: ``pymc-dp --help`` lists the families, their
options and their priors from declarations alone, without loading PyTensor. The implementing class
is named by import path (``"pymc_dp.families.counts:Poisson"``) and imported only when a release
is made or fitted; a family declared beside its class leaves the path out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Literal

__all__ = [
    "DEFAULT_SHAPE",
    "NIG_KAPPA",
    "CommandLine",
    "FamilyDeclaration",
    "FamilyOption",
    "PriorSpec",
    "WindowRule",
]

DEFAULT_SHAPE = 2.0
"""Shape of every window-scaled Gamma, Beta and Inverse-Gamma default: the smallest whole
shape whose implied record mean is finite (its variance is not), so the prior is centred on the
window without ruling out a scale an order of magnitude away."""

NIG_KAPPA = 1.0 / 8.0
"""κ of the window-scaled Normal–Inverse-Gamma default: with α = 2 and β = (w/4)², κ = β / (α
(w/2)²) makes μ's marginal a Student-t with 4 degrees of freedom and scale w/2, centred on the
window and as wide as it."""

WindowRule = Callable[[float, float, Mapping[str, Any]], Mapping[str, float]]
"""``rule(m, w, settings) -> hyperparameters``: a windowed family's default prior from the
centre m and width w of its release window on the latent scale and the family's settings."""


@dataclasses.dataclass(frozen=True)
class PriorSpec:
    """The conjugate prior of one family, with named hyperparameters and their defaults.

    Attributes
    ----------
    distribution : str
        Name of the prior, e.g. ``"Beta"``.
    parameters : tuple of str
        Hyperparameter names, in the order of the family's conjugate update.
    defaults : Mapping
        Default value of every hyperparameter when no window is known (a family without a
        release); a windowed release's defaults come from
        :func:`~pymc_dp.model.priors.default_prior_hyperparameters`.
    variables : tuple of str
        Names of the model variables that carry θ, e.g. ``("p",)``.
    rule : str
        How a release's window sets the defaults (empty: they do not depend on it).
    note : str
        Shown after the prior in ``pymc-dp fit --help``; text after a line break goes on lines
        of its own below the prior.
    """

    distribution: str
    parameters: tuple[str, ...]
    defaults: Mapping[str, float]
    variables: tuple[str, ...]
    rule: str = ""
    note: str = ""

    def describe(self) -> str:
        """One line: the prior with its defaults, e.g. ``p ~ Beta(alpha=1, beta=1)``."""
        args = ", ".join(f"{k}={self.defaults[k]:g}" for k in self.parameters)
        return f"{', '.join(self.variables)} ~ {self.distribution}({args})"

    def describe_rule(self) -> str:
        """One line: the defaults a release gets, from its window's centre m and width w.

        Examples
        --------
        >>> gamma = PriorSpec("Gamma", ("alpha", "beta"), {"alpha": 1, "beta": 1}, ("lam",),
        ...                   "alpha=2, beta=2/m")
        >>> gamma.describe_rule(), gamma.describe()
        ('lam ~ Gamma(alpha=2, beta=2/m)', 'lam ~ Gamma(alpha=1, beta=1)')
        """
        if not self.rule:
            return self.describe()
        return f"{', '.join(self.variables)} ~ {self.distribution}({self.rule})"


@dataclasses.dataclass(frozen=True)
class FamilyOption:
    """A ``pymc-dp release`` option that sets one of a family's settings.

    Families that share an option (``--sigma`` for Normal and LogNormal) declare the same one;
    its help is printed once, after the names of the families that take it.

    Attributes
    ----------
    flag : str
        The option without its dashes, e.g. ``"trials"`` for ``--trials``.
    setting : str
        The family's keyword argument it sets (``--shape`` sets ``alpha``).
    help : str
        What it is, for ``--help``, e.g. ``"trials per record"``.
    kind : {"count", "number", "categories"}
        A whole number ≥ 1, any number, or the number K of categories or their public labels.
    metavar : str or None
        Placeholder in the usage line (default: the flag in capitals).
    """

    flag: str
    setting: str
    help: str
    kind: Literal["count", "number", "categories"] = "number"
    metavar: str | None = None


@dataclasses.dataclass(frozen=True)
class CommandLine:
    """How ``pymc-dp release`` lists a family and when it means it.

    Attributes
    ----------
    records : str
        The records, for the table of families in ``pymc-dp release --help``; empty for a
        variant of another family (e.g. Normal with known σ), which is not listed on its own.
    release : str
        What is released, for the same table: the sensitivity, or ``"window"``.
    name : str or None
        The ``--family`` name (default: the family's name). Variants share their family's.
    condition : str
        For a variant: when its ``--family`` name means it, e.g. ``"with sigma"`` (shown in
        ``pymc-dp fit --help`` beside its prior).
    """

    records: str = ""
    release: str = ""
    name: str | None = None
    condition: str = ""


@dataclasses.dataclass(frozen=True)
class FamilyDeclaration:
    """Everything the package keys on a family's name, in one place.

    Register a declaration with :func:`~pymc_dp.families.registry.register_family`, or set it
    as the ``declaration`` class attribute of an
    :class:`~pymc_dp.families.ExponentialFamily` subclass, which registers it on definition.

    Attributes
    ----------
    name : str
        Short lower-case name stored in a :class:`~pymc_dp.Release`.
    prior : PriorSpec
        θ's conjugate prior, its defaults and the rule a window sets them by.
    windowed : bool
        Whether records are released over a window (the class's ``needs_bounds``; checked
        when the class is registered).
    implementation : str or None
        ``"module:Class"`` of the :class:`~pymc_dp.families.ExponentialFamily` subclass,
        imported on first use; ``None`` for a declaration set on the class itself.
    command_line : CommandLine
        What ``pymc-dp release --help`` says about the family.
    options : tuple of FamilyOption
        One option per setting of the family (its dataclass fields; checked on registration).
    window_prior : WindowRule or None
        A windowed family's default hyperparameters from its window (:data:`WindowRule`);
        ``None`` keeps :attr:`PriorSpec.defaults`.
    statistic_labels : tuple of str
        Names of the released statistic's components, as a dry run prints them; one label
        holding ``{k}`` is numbered for each component (``"count {k}"``).
    grouped_link : str or None
        The partially pooled model of a grouped release (``"logit"``, ``"log"``, ``"softmax"``
        or ``"location-scale"``; :mod:`pymc_dp.model.hierarchical`), or ``None``: none.
    """

    name: str
    prior: PriorSpec
    windowed: bool = False
    implementation: str | None = None
    command_line: CommandLine = CommandLine()
    options: tuple[FamilyOption, ...] = ()
    window_prior: WindowRule | None = None
    statistic_labels: tuple[str, ...] = ("statistic",)
    grouped_link: str | None = None

    def __post_init__(self) -> None:
        if not self.name or self.name != self.name.lower() or not self.name.isidentifier():
            raise ValueError(
                f"a family's name must be a lower-case identifier such as 'poisson' (got "
                f"{self.name!r})"
            )
        if self.windowed and self.window_prior is None:
            raise ValueError(
                f"the {self.name} family is windowed: declare the window_prior rule that sets "
                "its default prior from the release window"
            )

    @property
    def command(self) -> str:
        """The ``--family`` name on the command line."""
        return self.command_line.name or self.name

    @property
    def settings(self) -> tuple[str, ...]:
        """The family's settings, as its options set them (``("trials",)``)."""
        return tuple(option.setting for option in self.options)

    def component_labels(self, size: int) -> tuple[str, ...]:
        """Labels of the ``size`` components of the released statistic (a dry run's rows).

        Examples
        --------
        >>> from pymc_dp.families.builtin import CATEGORICAL, NORMAL
        >>> CATEGORICAL.component_labels(3), NORMAL.component_labels(2)
        (('count 0', 'count 1', 'count 2'), ('sum x', 'sum x^2'))
        """
        labels = self.statistic_labels
        if len(labels) == 1 and "{k}" in labels[0]:
            return tuple(labels[0].format(k=k) for k in range(size))
        if len(labels) < size:  # undeclared components: numbered, so that none goes unprinted
            return tuple(f"statistic {k}" for k in range(size))
        return labels[:size]
