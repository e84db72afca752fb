"""The ``pymc-dp`` command line, run as a user runs it: the installed console script."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pymc_dp.cli import main


def _command() -> list[str]:
    """The installed ``pymc-dp`` script next to this interpreter (fails if not installed)."""
    script = Path(sys.executable).with_name("pymc-dp")
    assert script.exists() or shutil.which("pymc-dp"), "pymc-dp is not installed (pip install -e .)"
    return [str(script) if script.exists() else "pymc-dp"]


def test_help_explains_every_option():
    out = subprocess.run(
        [*_command(), "reproduce", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for option in (
        "--quick",
        "--output-dir",
        "--trials",
        "--likelihood",
        "--jobs",
        "--seed",
        "--check",
    ):
        assert option in out
    assert "figure1a_calibration_ks.png" in out and "report.json" in out


@pytest.mark.parametrize("bad", [["--trials", "0"], ["--jobs", "two"], ["--fast"]])
def test_bad_options_exit_2_with_a_message(bad, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["reproduce", *bad])
    assert exc.value.code == 2
    assert "error" in capsys.readouterr().err


def test_no_command_is_an_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main([])
    assert exc.value.code == 2


@pytest.mark.slow
def test_reproduce_quick_checks_the_papers_claims(tmp_path):
    """``pymc-dp reproduce --quick --check``: 21 grid points (the paper's 18, and n = 10 at
    ε = 1 for each model) × 200 trials. Exit status 0 means every claim held: Gibbs and
    non-private inside the family-wise KS band at every point, naive outside it at n·ε ≤ 10 on
    the paper's grid, OPS over-dispersed, Gibbs MMD² ≤ naive's."""
    proc = subprocess.run(
        [
            *_command(),
            "reproduce",
            "--quick",
            "--check",
            "--no-progress",
            "--jobs",
            "2",
            "--output-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert len(report["points"]) == 21
    assert [c["passed"] for c in report["checks"]] == [True] * 5
    for name in ("figure1a_calibration_ks", "figure1b_ecdf", "figure1c_mmd", "figure2_traces"):
        assert (tmp_path / f"{name}.png").exists() and (tmp_path / f"{name}.csv").exists()
    assert "[pass] gibbs_calibrated" in proc.stdout


@pytest.mark.parametrize("likelihood", ["auto", "clt"])
def test_reproduce_passes_the_likelihood_to_the_study(monkeypatch, tmp_path, likelihood):
    import importlib
    import types

    from pymc_dp.cli import main

    # The package re-exports the function under the module's name: fetch the module itself.
    study = importlib.import_module("pymc_dp.studies.reproduce")

    seen = {}

    def fake_reproduce(output_dir, grid, **kwargs):
        seen["grid"] = grid
        return types.SimpleNamespace(
            files=[], output_dir=output_dir, wall_seconds=0.0, checks=[], passed=True
        )

    monkeypatch.setattr(study, "reproduce", fake_reproduce)
    argv = ["reproduce", "--quick", "--trials", "7", "--output-dir", str(tmp_path)]
    assert main([*argv, "--likelihood", likelihood]) == 0
    assert seen["grid"].settings.likelihood == likelihood
    assert seen["grid"].settings.trials == 7
    assert seen["grid"].extra_points == ((10, 1.0),)


def test_models_is_an_attribute_of_the_package():
    import pymc_dp as pmdp

    assert pmdp.models.build_model is not None
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        pmdp.nothing
