"""Smoke tests of the demo (``pymc_dp.demo``) and of the Gibbs-vs-NUTS benchmark script."""

import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pymc_dp.demo import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "gibbs_vs_nuts.py"


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("demo")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["--quick", "--output-dir", str(out), "--n", "300"]) == 0
    return out, printed.getvalue()


@pytest.fixture(scope="module")
def demo_output(demo_run: tuple[Path, str]) -> Path:
    return demo_run[0]


@pytest.mark.parametrize("name", ["summary.txt", "posterior.nc", "comparison.png", "trace.png"])
def test_demo_writes_non_empty_files(demo_output: Path, name: str) -> None:
    path = demo_output / name
    assert path.is_file()
    assert path.stat().st_size > 0


@pytest.mark.parametrize("name", ["comparison.png", "trace.png"])
def test_demo_figures_are_png(demo_output: Path, name: str) -> None:
    assert (demo_output / name).read_bytes()[: len(PNG_MAGIC)] == PNG_MAGIC


def test_demo_summary_compares_the_three_posteriors(demo_output: Path) -> None:
    text = (demo_output / "summary.txt").read_text(encoding="utf-8")
    for word in ["noise-aware", "naive", "non-private", "true p", "ess_bulk"]:
        assert word in text


def test_demo_prints_the_summary(demo_run: tuple[Path, str]) -> None:
    out, printed = demo_run
    assert "n = 300" in printed
    assert (out / "summary.txt").read_text(encoding="utf-8") in printed


def test_demo_rejects_non_positive_epsilon(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--epsilon", "0", "--output-dir", str(tmp_path)])
    assert exc.value.code == 2
    assert not any(tmp_path.iterdir())


@pytest.mark.slow  # 1-3 minutes: the benchmark samples both models in quick mode
def test_benchmark_quick_runs_and_prints_ratios() -> None:
    result = subprocess.run(
        [sys.executable, str(BENCHMARK), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    ratio_rows = re.findall(r"Gibbs/NUTS\s+ratio\s+([\d.]+)", result.stdout)
    assert len(ratio_rows) == 2  # one per default ε
    assert all(float(r) > 0 for r in ratio_rows)
