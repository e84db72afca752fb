"""pymc_dp: noise-aware Bayesian inference from differentially private releases, in PyMC.

Curators release noisy sufficient statistics with :func:`release`; analysts add a
:class:`NoisySuffStat` node to an ordinary PyMC model and call ``pm.sample()``, which assigns the
DP Gibbs step methods of Bernstein & Sheldon (2018) to the node's variables.

The package is laid out by role, each layer importing only those below it (``docs/layout.md``):
:mod:`~pymc_dp.kernels` (pure NumPy conditional draws), :mod:`~pymc_dp.families` (one declaration
per exponential family), :mod:`~pymc_dp.mechanisms` (noise), :mod:`~pymc_dp.curator` (everything
the curator runs; no inference), :mod:`~pymc_dp.likelihoods` (p(y | θ): a law of s with a
mechanism's noise), :mod:`~pymc_dp.engine` (batched NumPy samplers),
:mod:`~pymc_dp.model` (the PyMC adapters: nodes, distributions, step methods, priors, ready-made
models), :mod:`~pymc_dp.evaluation`, :mod:`~pymc_dp.studies` and :mod:`~pymc_dp.cli`;
:mod:`~pymc_dp.regression` repeats the split inside. Names here load on first use, so
``import pymc_dp`` (and the command line's parser) imports no PyMC.
"""

from __future__ import annotations

import importlib
from typing import Any

import lazy_loader as _lazy

from pymc_dp import _legacy

__version__ = "0.1.0"

# The names, and the module each loads from, are in __init__.pyi (also read by type checkers).
_lazy_getattr, __dir__, __all__ = _lazy.attach_stub(__name__, __file__)
_legacy.install()


def __getattr__(name: str) -> Any:
    try:
        return _lazy_getattr(name)
    except AttributeError:
        if name not in _legacy.MOVED:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    # An old flat module (pymc_dp.models, pymc_dp.priors, ...), through its moved path.
    return importlib.import_module(f"{__name__}.{name}")
