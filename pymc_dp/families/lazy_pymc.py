"""PyMC for the families, imported on first use: the curator's side never pays for it.

A family's statistics, bounds and sensitivity are NumPy; only the model's side builds PyMC
distributions. Importing PyMC (with ArviZ) takes about 4 s, which every ``pymc-dp release``
paid before any data were read. :data:`pm` stands for the ``pymc`` module and imports it on
the first attribute read; :class:`PyMCName` is a class attribute that names a PyMC distribution
(``pymc_distribution = PyMCName("Binomial")``) and gives the class itself when read. Leave it
unannotated in a dataclass's body (the base class declares the ``ClassVar``): ``dataclasses``
reads every annotated attribute when the class is created, which would import PyMC then.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["PyMCName", "pm"]


class _LazyPyMC:
    """``pymc``, imported when one of its names is first read."""

    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module("pymc"), name)

    def __repr__(self) -> str:
        return "<pymc, imported on first use>"


pm: Any = _LazyPyMC()


class PyMCName:
    """A class attribute holding the PyMC object ``pm.<name>``, read lazily.

    Parameters
    ----------
    name : str
        Its dotted path in the ``pymc`` namespace, e.g. ``"Binomial"`` or
        ``"distributions.transforms.log"``.
    """

    def __init__(self, name: str):
        self.name = name

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        value: Any = pm
        for part in self.name.split("."):
            value = getattr(value, part)
        return value

    def __repr__(self) -> str:
        return f"pm.{self.name}"
