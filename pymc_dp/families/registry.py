"""The families the package knows: declared once, found by name, by PyMC class or by dist.

Three ways in, all ending in :func:`register_family`:

* the built-in declarations (:mod:`pymc_dp.families.builtin`), registered first;
* a class with a ``declaration`` attribute: defining a subclass of
  :class:`~pymc_dp.families.ExponentialFamily` registers it, so a family declared in one file
  is known everywhere once that file is imported;
* the entry-point group :data:`ENTRY_POINT_GROUP` of installed packages, loaded on the first
  look-up: each entry point names a :class:`~pymc_dp.families.declaration.FamilyDeclaration`
  (whose ``implementation`` is an import path, so ``pymc-dp --help`` stays light), or a module or
  class whose import registers its families.

Like the declarations, this module imports nothing heavy: the command line's parser reads it.
A family's class is imported from its declaration's path on first use (:func:`family_class`).
"""

from __future__ import annotations

import dataclasses
import importlib
import warnings
from typing import Any

from pymc_dp.families.builtin import BUILTIN_FAMILIES
from pymc_dp.families.declaration import FamilyDeclaration

__all__ = [
    "ENTRY_POINT_GROUP",
    "declared_families",
    "family_class",
    "family_declaration",
    "family_from_dist",
    "get_family",
    "register_family",
    "unregister_family",
]

ENTRY_POINT_GROUP = "pymc_dp.families"
"""Entry-point group through which installed packages add families, e.g. in pyproject.toml::

    [project.entry-points."pymc_dp.families"]
    negbinomial = "my_package.declarations:NEGBINOMIAL"
"""

_DECLARED: dict[str, FamilyDeclaration] = {}
_CLASSES: dict[str, type] = {}
_CHECKED: set[str] = set()
_LOADED: set[str] = set()  # "builtin", "plugins": what has been registered already


def _ensure_builtins() -> None:
    if "builtin" not in _LOADED:
        _LOADED.add("builtin")
        for declaration in BUILTIN_FAMILIES:
            _DECLARED[declaration.name] = declaration


def _ensure_plugins() -> None:
    """Register the families of installed packages (:data:`ENTRY_POINT_GROUP`), once."""
    _ensure_builtins()
    if "plugins" in _LOADED:
        return
    _LOADED.add("plugins")  # first: loading one may define a class, which registers itself
    from importlib.metadata import entry_points

    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            found = point.load()
            # A declaration is registered here; a module or a class registered its families
            # when it was imported (and a class's own declaration is registered already).
            if isinstance(found, FamilyDeclaration) and _DECLARED.get(found.name) is not found:
                register_family(found)
        except Exception as err:  # a broken plugin must not take the command line down with it
            warnings.warn(
                f"the family plugin {point.name!r} ({point.value}) could not be loaded: {err}",
                RuntimeWarning,
                stacklevel=3,
            )


def _path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def register_family(
    declaration: FamilyDeclaration, implementation: type | None = None
) -> FamilyDeclaration:
    """Make a family known to the whole package: releases, models and the command line.

    Defining a subclass of :class:`~pymc_dp.families.ExponentialFamily` with a
    ``declaration`` class attribute calls this; call it yourself for a declaration whose
    ``implementation`` is an import path. Registering the same declaration again, or a class
    of the same module and name again (a reloaded module), replaces it.

    Parameters
    ----------
    declaration
        The family's declaration.
    implementation
        The class implementing it, if already defined.

    Returns
    -------
    FamilyDeclaration
        ``declaration``, as in ``NEGBINOMIAL = register_family(FamilyDeclaration(...))``.

    Raises
    ------
    TypeError
        If ``declaration`` is not a FamilyDeclaration, or names no implementation.
    ValueError
        If another family has the same name.
    """
    if not isinstance(declaration, FamilyDeclaration):
        raise TypeError(
            f"declaration must be a pymc_dp.families.FamilyDeclaration (got "
            f"{type(declaration).__name__})"
        )
    _ensure_builtins()
    name = declaration.name
    path = _path(implementation) if implementation is not None else declaration.implementation
    if path is None:
        raise TypeError(
            f"the {name} family names no class: give implementation='module:Class', or set the "
            "declaration as the class's `declaration` attribute"
        )
    if declaration.implementation is not None and declaration.implementation != path:
        raise TypeError(
            f"the {name} family's declaration names {declaration.implementation}, not {path}"
        )
    known = _DECLARED.get(name)
    if known is not None and known != declaration:
        known_path = _path(_CLASSES[name]) if name in _CLASSES else known.implementation
        if known_path != path:
            raise ValueError(
                f"a family named {name!r} is already registered ({known_path}); give "
                f"{path} another name"
            )
    _DECLARED[name] = declaration
    _CHECKED.discard(name)
    if implementation is not None:
        _CLASSES[name] = implementation
    return declaration


def unregister_family(name: str) -> FamilyDeclaration:
    """Forget a registered family (for tests and interactive sessions); return its declaration.

    Raises
    ------
    ValueError
        If no family has that name, or it is a built-in family.
    """
    declaration = family_declaration(name)
    if declaration in BUILTIN_FAMILIES:
        raise ValueError(f"the {name} family is built in; it cannot be unregistered")
    del _DECLARED[name]
    _CLASSES.pop(name, None)
    _CHECKED.discard(name)
    return declaration


def declared_families() -> tuple[FamilyDeclaration, ...]:
    """Every registered family's declaration: the built-in ones first, then in registration order.

    Examples
    --------
    >>> [d.name for d in declared_families()][:3]
    ['bernoulli', 'binomial', 'categorical']
    """
    _ensure_plugins()
    return tuple(_DECLARED.values())


def family_declaration(name: str) -> FamilyDeclaration:
    """The declaration of the family named ``name`` (as a :class:`~pymc_dp.Release` stores it).

    Raises
    ------
    ValueError
        If no family has that name.

    Examples
    --------
    >>> family_declaration("poisson").prior.describe_rule()
    'lam ~ Gamma(alpha=2, beta=2/m)'
    """
    _ensure_plugins()
    if name not in _DECLARED:
        raise ValueError(f"no family is named {name!r}; the families are {', '.join(_DECLARED)}")
    return _DECLARED[name]


def family_class(family: FamilyDeclaration | str) -> type:
    """The class implementing a family, imported from its declaration's path on first use.

    The class is checked against its declaration once: one option per setting (its dataclass
    fields), and ``windowed`` equal to its ``needs_bounds``.

    Raises
    ------
    TypeError
        If the class and the declaration disagree.

    Examples
    --------
    >>> family_class("poisson")
    <class 'pymc_dp.families.counts.Poisson'>
    """
    declaration = family if isinstance(family, FamilyDeclaration) else family_declaration(family)
    name = declaration.name
    if name not in _CLASSES:
        module, _, qualname = str(declaration.implementation).partition(":")
        # Importing the module defines the class, which registers itself (ExponentialFamily).
        cls = importlib.import_module(module)
        for part in qualname.split("."):
            cls = getattr(cls, part)
        _CLASSES[name] = cls
    cls = _CLASSES[name]
    if name not in _CHECKED:
        if not dataclasses.is_dataclass(cls):
            raise TypeError(
                f"the {name} family's class {cls.__qualname__} must be a frozen dataclass whose "
                "fields are the family's settings"
            )
        settings = sorted(_settings(cls))
        if settings != sorted(declaration.settings):
            raise TypeError(
                f"the {name} family declares options for {sorted(declaration.settings)} but "
                f"{cls.__qualname__} takes {settings}: declare one option per setting"
            )
        if bool(getattr(cls, "needs_bounds", False)) != declaration.windowed:
            raise TypeError(
                f"the {name} family's declaration says windowed={declaration.windowed}, but "
                f"{cls.__qualname__}.needs_bounds is {getattr(cls, 'needs_bounds', False)}"
            )
        _CHECKED.add(name)
    return cls


def _settings(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.init]


def get_family(family: Any, **params: Any) -> Any:
    """Build the family for a PyMC distribution class (``pm.Binomial``) or a family name.

    A name is a family's own (``"normal_known_sigma"``) or its command-line name, which may
    stand for several families told apart by their settings (``"normal"`` with ``sigma=``).

    Parameters
    ----------
    family
        A PyMC distribution class such as ``pm.Bernoulli``, or a name such as ``"bernoulli"``.
    **params
        The family's settings, e.g. ``trials=5`` or ``categories=3``.

    Returns
    -------
    ExponentialFamily

    Raises
    ------
    ValueError
        If the family is not supported.
    TypeError
        If ``params`` holds a setting the family does not take.

    Examples
    --------
    >>> import pymc as pm
    >>> get_family(pm.Binomial, trials=5)
    Binomial(trials=5)
    >>> get_family("normal", sigma=2.0)
    NormalKnownSigma(sigma=2.0)
    """
    declarations = declared_families()
    if isinstance(family, str):
        named = [d for d in declarations if d.name == family]
        aliases = [d for d in declarations if d.command == family and d.name != family]
        classes = [family_class(d) for d in named + aliases]
        # An exact name answers for itself: its errors do not list the other families.
        reported = [family_class(d) for d in named] or classes
    else:
        classes = [family_class(d) for d in declarations]
        classes = reported = [c for c in classes if family is c.pymc_distribution]
    for cls in classes:
        if set(params) == set(_settings(cls)):
            return cls(**params)
    if len(reported) == 1:
        (cls,) = reported
        settings = _settings(cls)
        extra, missing = sorted(set(params) - set(settings)), sorted(set(settings) - set(params))
        needs = ", ".join(f"{name}=..." for name in settings) or "no settings"
        problem = f"unexpected {extra}" if extra else f"missing {missing}"
        raise TypeError(f"the {cls.name} family takes {needs}; {problem}")
    if reported:
        options = " or ".join(
            ", ".join(f"{name}=..." for name in _settings(cls)) or "no settings" for cls in reported
        )
        got = ", ".join(sorted(params)) or "none"
        raise TypeError(f"the {reported[0].name} family takes {options} (got {got})")
    names = ", ".join(f"pm.{family_class(d).pymc_distribution.__name__}" for d in declarations)
    raise ValueError(f"family {family!r} is not supported; supported families: {names}")


def family_from_dist(dist: Any) -> Any:
    """The family of a ``pm.<Dist>.dist(...)`` variable, with settings read from it.

    Families are asked in registration order; the first that recognises ``dist`` answers.

    Raises
    ------
    TypeError
        If ``dist`` is not a distribution of a supported family.

    Examples
    --------
    >>> import pymc as pm
    >>> family_from_dist(pm.Binomial.dist(n=5, p=0.3))
    Binomial(trials=5)
    """
    classes = [family_class(d) for d in declared_families()]
    if getattr(dist, "owner", None) is not None:
        for cls in classes:
            family = cls.from_dist(dist)
            if family is not None:
                return family
    names = ", ".join(f"pm.{c.pymc_distribution.__name__}.dist(...)" for c in classes)
    raise TypeError(f"dist must be one of {names} (got {dist!r})")
