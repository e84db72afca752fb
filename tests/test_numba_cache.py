"""The default models' Numba builds are cached on disk (nutpie and PyTensor 3 compile with Numba).

Numba writes a compiled function to PyTensor's cache only when every operation in it has a cache
key and its code holds no "dynamic global" (a pointer Numba cannot key). Two things in the
default grouped Normal window model had one each, so its functions were compiled again on every
fit (about 17 s a fit at 50 groups where the hand-written model's load in 12 s): PyTensor's
``erfcx`` (SciPy's Cython function) and the released sums' columns (strided arrays, which Numba
keeps as pointers). Both are checked here, and the erfcx that replaces PyTensor's against SciPy.
The Categorical's latent counts had the second (each count's released column, about 9 s of
Numba build a fit at 50 groups where the hand-written model's loads in 0.1 s).
"""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
import scipy.special

import pymc_dp as pmdp
from pymc_dp.families.erfcx import erfcx
from pymc_dp.kernels.erfcx import ERFCX_SERIES_FROM, erfcx_scalar

pytest.importorskip("numba")
numba_basic = pytest.importorskip("pytensor.link.numba.dispatch.basic")
if not hasattr(numba_basic, "numba_funcify_and_cache_key"):
    pytest.skip("this PyTensor has no cache-keyed Numba dispatch", allow_module_level=True)


FRESH = pytensor.config.change_flags(numba__cache=False)
"""Compile afresh, whatever an earlier run left in the cache."""


def test_erfcx_kernel_matches_scipy():
    x = np.linspace(-5.0, 40.0, 90_001)
    got = np.array([erfcx_scalar(v) for v in x])
    np.testing.assert_allclose(got, scipy.special.erfcx(x), rtol=3e-15, atol=0)
    # Below -5 SciPy's own value carries the rounding of x² (up to 1.4e-13 at x = -26.5), which
    # the kernel removes; the two agree to that.
    x = np.linspace(-26.5, -5.0, 20_001)
    got = np.array([erfcx_scalar(v) for v in x])
    np.testing.assert_allclose(got, scipy.special.erfcx(x), rtol=1e-13, atol=0)
    # The exact values at the series' start and far out: 1/(x√π) (1 − 1/(2x²) + …).
    for v in (ERFCX_SERIES_FROM, 1e4, 1e300):
        assert erfcx_scalar(v) == pytest.approx(scipy.special.erfcx(v), rel=1e-15)
    assert erfcx_scalar(np.inf) == 0.0
    assert erfcx_scalar(-np.inf) == np.inf
    assert erfcx_scalar(-30.0) == np.inf
    assert np.isnan(erfcx_scalar(np.nan))


def test_erfcx_is_the_same_on_c_and_numba_and_its_derivative_is_right():
    v = pt.dvector("v")
    out = [erfcx(v), pytensor.grad(erfcx(v).sum(), v)]
    x = np.concatenate([np.linspace(-20.0, 30.0, 1001), [1e6]])
    value = scipy.special.erfcx(x)
    slope = 2.0 * x * value - 2.0 / np.sqrt(np.pi)
    for mode in ("FAST_RUN", "NUMBA"):
        got, grad = pytensor.function([v], out, mode=mode)(x)
        np.testing.assert_allclose(got, value, rtol=1e-13)
        np.testing.assert_allclose(grad, slope, rtol=1e-11, atol=1e-13)


def _uncacheable(fn: pytensor.compile.function.types.Function) -> list[str]:
    """Why Numba would not write ``fn``'s compiled graph to the cache ([] when it would).

    ``fn`` must be compiled and called with the cache off (:data:`FRESH`): a build loaded from
    the cache, keyed by the graph but not by its constants' layout, would hide a dynamic global.
    """
    _, key = numba_basic.numba_funcify_and_cache_key(fn.maker.fgraph)
    reasons = [] if key is not None else ["an operation without a cache key"]
    jitted = fn.vm.jit_fn
    if any(c.library.has_dynamic_globals for c in jitted.overloads.values()):
        reasons.append("a dynamic global")
    return reasons


def test_erfcx_graph_is_cacheable():
    # PyTensor 2's own erfcx is not (SciPy's Cython pointer); PyTensor 3's is.
    v = pt.dvector("v")
    with FRESH:
        ours = pytensor.function([v], erfcx(v) + 1.0, mode="NUMBA")
        ours(np.zeros(2))
    assert _uncacheable(ours) == []


def _grouped_release(family: str) -> pmdp.ReleaseSet:
    """50 groups (at 4 the strided columns happened to be inlined): a Normal window's sums, a
    Poisson window's sums with their counts, or three categories' counts under Laplace noise
    (the releases whose nodes take columns; the counts' stay latent)."""
    rng = np.random.default_rng(5)
    keys = [f"g{g}" for g in range(50)]
    sizes = rng.integers(50, 200, size=50)
    by = np.repeat(keys, sizes)
    if family == "normal":
        x, dist, extra = rng.normal(1.0, 2.0, size=by.size), pm.Normal, {"bounds": (-12.0, 14.0)}
    elif family == "categorical":
        x, dist, extra = rng.choice(3, size=by.size, p=[0.5, 0.3, 0.2]), pm.Categorical, {}
        extra["categories"] = 3
    else:
        x, dist, extra = rng.poisson(5.0, size=by.size), pm.Poisson, {"bounds": (0, 40)}
        extra["count_share"] = 0.2
    return pmdp.release_grouped(
        x, dist, by=by, groups=keys, sizes="public", epsilon=1.0, rng=6, **extra
    )


@pytest.mark.parametrize("family", ["normal", "poisson", "categorical"])
def test_default_grouped_models_compile_to_cacheable_functions(family):
    from pymc_dp.model.hierarchical import build_grouped_model

    with warnings.catch_warnings(), FRESH:
        warnings.simplefilter("ignore")
        model = build_grouped_model(_grouped_release(family))
        inputs = model.value_vars
        logp = model.compile_fn(
            [model.logp(), model.dlogp()], inputs=inputs, point_fn=False, mode="NUMBA"
        )
        # The values nutpie's expand function computes.
        deterministics = model.compile_fn(
            model.replace_rvs_by_values(model.deterministics),
            inputs=inputs,
            point_fn=False,
            mode="NUMBA",
            on_unused_input="ignore",
        )
        point = model.initial_point()
        values = [point[v.name] for v in inputs]
        logp(*values)
        deterministics(*values)
    assert _uncacheable(logp) == []
    assert _uncacheable(deterministics) == []
