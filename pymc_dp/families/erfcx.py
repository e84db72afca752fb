"""erfcx(x) = exp(x²) erfc(x) for PyTensor graphs, with a Numba build that Numba can cache.

PyTensor 2's own ``erfcx`` reaches SciPy's Cython function through a pointer on the Numba
backend (nutpie's). A pointer has no cache key, so every compiled function that
holds it, and every function around that, is compiled again on each fit. :data:`erfcx` is the
same operation (PyTensor's C and JAX implementations, its derivative) with a plain Numba
implementation, :func:`~pymc_dp.kernels.erfcx.erfcx_scalar`, cached on disk like the rest of
the graph.
"""

from __future__ import annotations

import hashlib
import inspect
from typing import Any

import numpy as np
from pytensor.scalar.basic import upcast, upgrade_to_float_no_complex
from pytensor.scalar.math import Erfcx
from pytensor.tensor.elemwise import Elemwise

from pymc_dp._compat import pullback_op
from pymc_dp.kernels import erfcx as _kernel
from pymc_dp.kernels.erfcx import erfcx_scalar
from pymc_dp.kernels.numba_mirror import NUMBA_OPTIONS

__all__ = ["CacheableErfcx", "erfcx", "scalar_erfcx"]


@pullback_op
class CacheableErfcx(Erfcx):
    """PyTensor's scalar ``Erfcx`` (C, JAX, derivative), with a cache-keyed Numba build."""

    def pullback(self, inputs: Any, outputs: Any, grads: Any) -> Any:
        """The derivative 2x·erfcx(x) − 2/√π, through this operation (so it stays cacheable)."""
        (x,), (gz,) = inputs, grads
        cst = np.asarray(2.0 / np.sqrt(np.pi), dtype=upcast(x.type.dtype, gz.type.dtype))
        return (gz * (-cst + (2.0 * x) * scalar_erfcx(x)),)


scalar_erfcx = CacheableErfcx(upgrade_to_float_no_complex, name="erfcx")
erfcx = Elemwise(scalar_erfcx, name="erfcx")
"""Elementwise erfcx(x) = exp(x²) erfc(x), as ``pytensor.tensor.erfcx``."""

# Keyed by the kernel module's whole source (its constants too) and the options: an edit is never
# served stale.
_NUMBA_KEY = hashlib.sha256((inspect.getsource(_kernel) + repr(NUMBA_OPTIONS)).encode()).hexdigest()


def _register_numba() -> bool:
    """Give :class:`CacheableErfcx` a cache-keyed Numba implementation; False where impossible."""
    try:
        from pytensor.link.numba.dispatch import basic as numba_basic
        from pytensor.link.numba.dispatch.basic import register_funcify_and_cache_key
    except ImportError:  # no Numba, or a PyTensor without cache-keyed Numba dispatch
        return False

    @register_funcify_and_cache_key(CacheableErfcx)
    def _erfcx_numba(op: Any, node: Any = None, **kwargs: Any) -> tuple[Any, str]:
        return numba_basic.numba_njit(**NUMBA_OPTIONS)(erfcx_scalar), f"pmdp_erfcx_{_NUMBA_KEY}"

    return True


_HAS_NUMBA = _register_numba()
