"""benchmarks/regression_binary_real.py runs end to end on the real data (short chains)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("sklearn")


def test_the_diabetes_benchmark_prints_both_models(capsys):
    path = Path(__file__).parents[1] / "benchmarks" / "regression_binary_real.py"
    spec = importlib.util.spec_from_file_location("regression_binary_real", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--releases", "2", "--draws", "20", "--tune", "30"]) == 0
    out = capsys.readouterr().out
    assert "n = 442" in out
    assert "normal model (default)" in out and "mixed model (binary=1)" in out
