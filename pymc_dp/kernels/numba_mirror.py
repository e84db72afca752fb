"""Compile a module's plain-Python mirror of a C scalar kernel with Numba.

The C operations of :mod:`pymc_dp.likelihoods.normal_laplace` and
:mod:`pymc_dp.families.poisson_window` keep a Python mirror of their algorithm, which the
Numba backend (nutpie, PyTensor 3's default) compiles. Each helper is compiled from its own
code, with globals in which the other helpers are the compiled ones, so the mirror itself stays
plain Python (and testable without Numba).
"""

from __future__ import annotations

import hashlib
import inspect
import types
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["compile_mirror", "mirror_key"]


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


def mirror_key(namespace: dict[str, Any], helpers: Iterable[str]) -> str:
    """The SHA-256 of the helpers' source: Numba's on-disk cache key for a compiled mirror.

    Keyed by the source, an edit of the algorithm is never served a stale build.
    """
    source = "".join(inspect.getsource(namespace[name]) for name in helpers)
    return hashlib.sha256(source.encode()).hexdigest()
