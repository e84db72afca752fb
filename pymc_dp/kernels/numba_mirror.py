"""Compile a module's plain-Python mirror of a C scalar kernel with Numba.

The C operations of :mod:`pymc_dp.likelihoods.normal_laplace` and
:mod:`pymc_dp.families.poisson_window` keep a Python mirror of their algorithm, which the
Numba backend (nutpie, PyTensor 3's default) compiles. Each helper is compiled from its own
code, with globals in which the other helpers are the compiled ones, so the mirror itself stays
plain Python (and testable without Numba).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import math
import types
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

__all__ = ["NUMBA_OPTIONS", "compile_mirror", "mirror_key"]

NUMBA_OPTIONS: dict[str, Any] = {"fastmath": False, "error_model": "numpy"}
"""Numba's options for every kernel of the package: IEEE arithmetic, as the C. No fast-math; and
a division by zero gives ±inf or nan as in C, where Numba's default error model raises (and
tests every divisor: about 6 % of the windowed Normal pair's kernel, 433 against 409 ns a group,
best of 12 alternating runs)."""


def _sqrt(x: float) -> float:
    # x ** 0.5 for x > 0 (and +inf) is LLVM's sqrt instruction, exact as sqrt; math.sqrt is a
    # call into the C library (about 5 ns). Zero, negatives and NaN keep math.sqrt's result.
    if x > 0.0:
        return x**0.5
    return math.sqrt(x)


@functools.cache
def _math_module() -> types.ModuleType:
    """:mod:`math` for the compiled mirrors: the same functions, with :func:`_sqrt` as sqrt."""
    import numba

    module = types.ModuleType("pymc_dp_math")
    module.__dict__.update({k: v for k, v in vars(math).items() if not k.startswith("_")})
    module.sqrt = numba.njit(_sqrt, **NUMBA_OPTIONS)
    return module


def compile_mirror(
    namespace: dict[str, Any], helpers: Iterable[str], core: str, inline: Iterable[str] = ()
) -> Callable:
    """Return ``namespace[core]`` compiled by Numba, every name in ``helpers`` compiled too.

    ``namespace`` is the module's ``globals()``; ``helpers`` must include ``core``. A mirror's
    ``math.sqrt`` compiles to the processor's square root (:func:`_sqrt`: the same numbers).
    The helpers in ``inline`` are inlined into their callers by Numba (``inline="always"``):
    LLVM leaves a function that returns a tuple, or is large, a call of its own, with the tuple
    stored to memory and read back (the windowed Normal pair's kernel: 101 against 93 µs for
    500 groups with its window moments, convolution and densities inlined).
    """
    import numba

    env = dict(namespace)
    if env.get("math") is math:
        env["math"] = _math_module()
    inline = set(inline)
    for name in helpers:
        code = namespace[name].__code__
        options = {**NUMBA_OPTIONS, **({"inline": "always"} if name in inline else {})}
        env[name] = numba.njit(types.FunctionType(code, env, name), **options)
    return env[core]


def mirror_key(
    namespace: dict[str, Any], helpers: Iterable[str], inline: Iterable[str] = ()
) -> str:
    """Numba's on-disk cache key for a compiled mirror: a SHA-256 of all that it compiles from.

    The helpers' source, the value of every constant they read from ``namespace`` (a module
    constant, or one imported from another module), :func:`_sqrt`'s source, the inlined
    helpers and :data:`NUMBA_OPTIONS`: an edit of the algorithm, of a constant or of the options
    is never served a stale build.
    """
    parts = []
    for name in helpers:
        function = namespace[name]
        parts.append(inspect.getsource(function))
        parts.extend(
            _constant(key, namespace[key])
            for key in sorted(_globals_read(function.__code__))
            if key in namespace
        )
    parts.append(inspect.getsource(_sqrt))
    parts.append(repr(sorted(inline)))
    parts.append(repr(NUMBA_OPTIONS))
    return hashlib.sha256("".join(parts).encode()).hexdigest()


def _globals_read(code: types.CodeType) -> set[str]:
    """The global names a code object and the code nested in it may read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _globals_read(const)
    return names


def _constant(name: str, value: Any) -> str:
    """``name=value`` for a constant (a number, string, tuple or array); '' for anything else."""
    if isinstance(value, np.ndarray):
        return f"{name}={value.dtype}{value.shape}{value.tobytes().hex()};"
    if isinstance(value, (bool, int, float, complex, str, bytes, tuple, frozenset)):
        return f"{name}={value!r};"
    return ""
