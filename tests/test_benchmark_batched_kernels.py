"""benchmarks/batched_kernels.py runs end to end, checking both kernels against their baselines."""

from __future__ import annotations

import runpy
from pathlib import Path


def test_the_batched_kernels_benchmark_checks_and_prints_both_rows(capsys):
    path = Path(__file__).parents[1] / "benchmarks" / "batched_kernels.py"
    main = runpy.run_path(str(path))["main"]
    assert main(["--size", "40", "--failing", "6", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "factoring 40 members" in out and "record moments over 40 chains" in out
