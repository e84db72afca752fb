"""The Numba mirrors' compile options and cache keys (pymc_dp.kernels.numba_mirror)."""

from __future__ import annotations

import importlib
import math
import sys

import numpy as np
import pytest

from pymc_dp.kernels import numba_mirror

pytest.importorskip("numba")

_SOURCE = """
SCALE = {scale}


def _ratio(x, y):
    return SCALE * x / y
"""


def _load(tmp_path, monkeypatch, scale: float):
    (tmp_path / "pmdp_mirror_probe.py").write_text(_SOURCE.format(scale=scale))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("pmdp_mirror_probe", None)
    importlib.invalidate_caches()
    return importlib.import_module("pmdp_mirror_probe")


def test_key_changes_with_a_module_constant_the_function_reads(tmp_path, monkeypatch):
    # The function's own source is the same in both; only the constant it reads differs.
    first = numba_mirror.mirror_key(vars(_load(tmp_path, monkeypatch, 1.0)), ["_ratio"])
    again = numba_mirror.mirror_key(vars(_load(tmp_path, monkeypatch, 1.0)), ["_ratio"])
    other = numba_mirror.mirror_key(vars(_load(tmp_path, monkeypatch, 2.0)), ["_ratio"])
    assert first == again
    assert other != first
    # The value the compiled code would read, whatever the source says (an imported constant).
    namespace = dict(vars(_load(tmp_path, monkeypatch, 1.0)), SCALE=3.0)
    assert numba_mirror.mirror_key(namespace, ["_ratio"]) not in (first, other)


def test_key_changes_with_the_compile_options(tmp_path, monkeypatch):
    namespace = vars(_load(tmp_path, monkeypatch, 1.0))
    key = numba_mirror.mirror_key(namespace, ["_ratio"])
    monkeypatch.setitem(numba_mirror.NUMBA_OPTIONS, "error_model", "python")
    assert numba_mirror.mirror_key(namespace, ["_ratio"]) != key


def test_compiled_mirror_divides_as_ieee_not_python(tmp_path, monkeypatch):
    # Numba's default error model raises ZeroDivisionError; the C kernels give inf and nan.
    core = numba_mirror.compile_mirror(
        vars(_load(tmp_path, monkeypatch, 1.0)), ["_ratio"], "_ratio"
    )
    assert core(1.0, 2.0) == 0.5
    assert core(1.0, 0.0) == math.inf
    assert core(-1.0, 0.0) == -math.inf
    assert math.isnan(core(0.0, 0.0))


_SQRT_SOURCE = """
import math


def _root(x):
    return math.sqrt(x)
"""


def test_compiled_sqrt_is_the_library_sqrt(tmp_path, monkeypatch):
    # The mirrors' math.sqrt compiles to the processor's instruction, with the same numbers:
    # bit for bit, signed zeros, infinities and NaN included.
    (tmp_path / "pmdp_sqrt_probe.py").write_text(_SQRT_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("pmdp_sqrt_probe", None)
    importlib.invalidate_caches()
    module = importlib.import_module("pmdp_sqrt_probe")
    root = numba_mirror.compile_mirror(vars(module), ["_root"], "_root")
    assert module.math is math  # the module itself keeps the standard library's
    values = [0.0, -0.0, 5e-324, 1e-310, 2.0, 1e308, math.inf, 0.1 * 3, 7.0 / 3.0]
    for x in values:
        got, want = root(x), math.sqrt(x)
        assert got == want and math.copysign(1.0, got) == math.copysign(1.0, want), x
    for x in (-1.0, -math.inf, math.nan):
        assert math.isnan(root(x))
    rng = np.random.default_rng(0)
    for x in rng.lognormal(0.0, 30.0, 2000):
        assert root(float(x)) == math.sqrt(float(x))


def test_key_changes_with_the_inlined_helpers(tmp_path, monkeypatch):
    namespace = vars(_load(tmp_path, monkeypatch, 1.0))
    key = numba_mirror.mirror_key(namespace, ["_ratio"])
    assert numba_mirror.mirror_key(namespace, ["_ratio"], ["_ratio"]) != key
    core = numba_mirror.compile_mirror(namespace, ["_ratio"], "_ratio", ["_ratio"])
    assert core(1.0, 2.0) == 0.5
