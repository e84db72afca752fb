"""Register a Numba implementation of an operation: a plain-Python closure, compiled.

The compiled scalar kernels (:mod:`~pymc_dp.likelihoods.normal_laplace`,
:mod:`~pymc_dp.likelihoods.pair_window`, :mod:`~pymc_dp.likelihoods.counted_window`) each give
PyTensor's Numba backend (nutpie, PyTensor 3's default) an implementation compiled from their
Python mirror (:func:`~pymc_dp.kernels.numba_mirror.compile_mirror`), with a cache key that
changes with the mirror's source. This is that registration once. It lives here, not in
:mod:`pymc_dp.kernels`, because it imports PyTensor (kernels are pure NumPy).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pymc_dp.kernels.numba_mirror import NUMBA_OPTIONS

__all__ = ["register_numba_scalar"]


def register_numba_scalar(op_class: type, build: Callable[[Any], tuple[Callable, str]]) -> bool:
    """Give ``op_class`` a cache-keyed Numba implementation; False where PyTensor cannot take one.

    ``build(op)`` returns a plain Python function of the operation's inputs (scalars for a
    scalar operation, arrays for an ``Op`` on arrays such as
    :class:`~pymc_dp.likelihoods.multinomial_window.TableLogLikelihood`), calling already
    compiled helpers, and its cache key; it is compiled here with
    :data:`~pymc_dp.kernels.numba_mirror.NUMBA_OPTIONS` (IEEE, as the C).
    """
    try:
        from pytensor.link.numba.dispatch import basic as numba_basic
        from pytensor.link.numba.dispatch.basic import register_funcify_and_cache_key
    except ImportError:  # no Numba, or a PyTensor without cache-keyed Numba dispatch
        return False

    @register_funcify_and_cache_key(op_class)
    def _funcify(op: Any, node: Any, **kwargs: Any) -> tuple[Callable, str]:
        function, key = build(op)
        return numba_basic.numba_njit(**NUMBA_OPTIONS)(function), key

    return True
