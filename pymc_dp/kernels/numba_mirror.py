"""Compile a module's plain-Python mirror of a C scalar kernel with Numba.

The C operations of :mod:`pymc_dp.likelihoods.normal_laplace` and
:mod:`pymc_dp.families.poisson_window` keep a Python mirror of their algorithm, which the
Numba backend (nutpie, PyTensor 3's default) compiles. Each helper is compiled from its own
code, with globals in which the other helpers are the compiled ones, so the mirror itself stays
plain Python (and testable without Numba).
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["compile_mirror"]


def compile_mirror(namespace: dict[str, Any], helpers: Iterable[str], core: str) -> Callable:
    """Return ``namespace[core]`` compiled by Numba, every name in ``helpers`` compiled too.

    ``namespace`` is the module's ``globals()``; ``helpers`` must include ``core``.
    """
    import numba

    env = dict(namespace)
    for name in helpers:
        code = namespace[name].__code__
        env[name] = numba.njit(types.FunctionType(code, env, name), fastmath=False)
    return env[core]
