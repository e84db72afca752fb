"""The Numba mirrors' compile options and cache keys (pymc_dp.kernels.numba_mirror)."""

from __future__ import annotations

import importlib
import math
import sys

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
