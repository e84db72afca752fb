"""Exponential-family declarations and the registry that finds them by name, class or dist.

A family is one :class:`FamilyDeclaration` (its name, prior, command-line text and options, dry-run
labels and grouped model) and the :class:`ExponentialFamily` subclass that implements its
mathematics. The built-in declarations are in :mod:`pymc_dp.families.builtin`; a new family
declared beside its class (``declaration = FamilyDeclaration(...)``) is registered when the class
is defined (:mod:`pymc_dp.families.registry`), and installed packages add theirs through the
``pymc_dp.families`` entry points.

Names here load on first use (the list is in ``__init__.pyi``), so that the command line's
parser can read the declarations without importing PyTensor.
"""

from __future__ import annotations

import lazy_loader as _lazy

__getattr__, __dir__, __all__ = _lazy.attach_stub(__name__, __file__)
