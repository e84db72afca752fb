"""Outputs appear whole or not at all (issue 18, item 2).

A real SIGINT is sent to a ``pymc-dp fit`` subprocess while it samples, and four ``pymc-dp
release`` processes race for one output file. The subprocesses run this checkout's package
(``python -m pymc_dp`` with ``PYTHONPATH``), not whichever copy is installed.
"""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pymc as pm
import pytest

import pymc_dp as pmdp
from pymc_dp.cli import main
from pymc_dp.curator.atomic import InterruptGuard, StagedOutputs
from pymc_dp.curator.release_file import read_release, write_release

ROOT = Path(pmdp.__file__).resolve().parents[1]
OUTPUTS = ("posterior.nc", "summary.csv", "posterior.png", "trace.png")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _popen(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "pymc_dp", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )


@pytest.fixture(scope="module")
def release_file(tmp_path_factory):
    x = np.random.default_rng(3).binomial(5, 0.3, size=500)
    rel = pmdp.release(x, pm.Binomial, epsilon=1.0, trials=5, rng=4)
    return write_release(rel, tmp_path_factory.mktemp("rel") / "release.json")


def _leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir()) if out.exists() else []


# ---- a real Ctrl-C -------------------------------------------------------------------------


def test_sigint_during_sampling_exits_130_and_writes_nothing(release_file, tmp_path):
    out = tmp_path / "fit"
    proc = _popen(
        "fit", str(release_file), "--draws", "5000000", "--tune", "10", "--chains", "1",
        "--no-progress", "--seed", "1", "--output-dir", str(out),
    )  # fmt: skip
    lines: list[str] = []
    started = threading.Event()

    def read_stderr():
        for line in proc.stderr:
            lines.append(line)
            if "sampling" in line.lower():  # PyMC's "Sequential sampling (1 chains in 1 job)"
                started.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        # Import and compile take seconds quiet but over a minute at load 10 (a helper's run
        # failed at 60 s); the wait ends as soon as sampling starts, so a long cap costs nothing.
        assert started.wait(300), "".join(lines)
        time.sleep(1.0)  # well into the draws
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(10)
    assert proc.returncode == 130, "".join(lines)
    assert "interrupted; no output written" in "".join(lines)
    assert "wrote" not in proc.stdout.read()
    assert _leftovers(out) == []  # no outputs, no staging directory


def test_truncated_trace_from_pm_sample_is_not_a_fit(release_file, tmp_path, monkeypatch, capsys):
    """pm.sample swallows KeyboardInterrupt and returns fewer draws: detected, nothing kept."""
    real_sample = pm.sample

    def truncated(*args, draws, **kwargs):
        return real_sample(*args, draws=draws // 2, **kwargs)

    monkeypatch.setattr(pm, "sample", truncated)
    out = tmp_path / "fit"
    argv = ["fit", str(release_file), "--draws", "20", "--tune", "10", "--chains", "1"]
    assert main([*argv, "--no-progress", "--output-dir", str(out)]) == 130
    assert "interrupted" in capsys.readouterr().err
    assert _leftovers(out) == []


def test_interrupt_while_saving_keeps_the_earlier_fit(release_file, tmp_path, monkeypatch):
    """A second Ctrl-C while the posterior is written leaves the earlier posterior intact."""
    out = tmp_path / "fit"
    out.mkdir()
    for name in OUTPUTS:
        (out / name).write_text(f"earlier {name}")

    def interrupted_write(self, path, *args, **kwargs):
        Path(path).write_bytes(b"\x89HDF partial")
        raise KeyboardInterrupt

    import xarray

    monkeypatch.setattr(xarray.Dataset, "to_netcdf", interrupted_write, raising=False)
    monkeypatch.setattr(xarray.DataTree, "to_netcdf", interrupted_write, raising=False)
    import arviz as az

    if hasattr(az, "InferenceData"):
        monkeypatch.setattr(az.InferenceData, "to_netcdf", interrupted_write, raising=False)
    argv = ["fit", str(release_file), "--draws", "20", "--tune", "10", "--chains", "1"]
    assert main([*argv, "--no-progress", "--overwrite", "--output-dir", str(out)]) == 130
    assert _leftovers(out) == sorted(OUTPUTS)
    for name in OUTPUTS:
        assert (out / name).read_text() == f"earlier {name}"


def test_fit_never_replaces_outputs_without_overwrite(release_file, tmp_path, capsys):
    out = tmp_path / "fit"
    out.mkdir()
    (out / "summary.csv").write_text("earlier")
    assert main(["fit", str(release_file), "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--overwrite" in err and "summary.csv" in err
    assert _leftovers(out) == ["summary.csv"] and (out / "summary.csv").read_text() == "earlier"


def test_fit_with_overwrite_replaces_every_output(release_file, tmp_path, capsys):
    out = tmp_path / "fit"
    out.mkdir()
    (out / "posterior.nc").write_text("earlier")
    argv = ["fit", str(release_file), "--draws", "20", "--tune", "10", "--chains", "1"]
    assert main([*argv, "--no-progress", "--overwrite", "--output-dir", str(out)]) == 0
    assert _leftovers(out) == sorted(OUTPUTS)
    assert (out / "posterior.nc").read_bytes()[:4] == b"\x89HDF"
    assert "wrote posterior.nc, summary.csv, posterior.png, trace.png" in capsys.readouterr().out


# ---- racing releases -----------------------------------------------------------------------


def test_four_concurrent_releases_to_one_output_exactly_one_wins(tmp_path):
    data = tmp_path / "data.csv"
    data.write_text("x\n" + "\n".join(str(v) for v in [0, 1, 1, 0, 1] * 20) + "\n")
    out = tmp_path / "release.json"
    argv = ["release", str(data), "--column", "x", "--family", "bernoulli", "--epsilon", "1"]
    procs = [_popen(*argv, "--seed", str(seed), "--output", str(out)) for seed in range(4)]
    results = [(p.wait(timeout=120), p.stdout.read(), p.stderr.read()) for p in procs]
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 2, 2, 2], results
    for code, stdout, stderr in results:
        if code == 2:
            assert "exists; pass --overwrite" in stderr and "wrote" not in stdout
        else:
            assert stdout.startswith(f"wrote {out}")
    assert read_release(out).n == 100
    assert _leftovers(tmp_path) == ["data.csv", "release.json"]  # no temporary left


# ---- the building blocks -------------------------------------------------------------------


def test_staged_directory_outputs_replace_older_ones(tmp_path):
    (tmp_path / "posterior.zarr").mkdir()
    (tmp_path / "posterior.zarr" / "old").write_text("old")
    with StagedOutputs(tmp_path, ["posterior.zarr"]) as staged:
        staged.path("posterior.zarr").mkdir()
        (staged.path("posterior.zarr") / "new").write_text("new")
        staged.commit()
    assert _leftovers(tmp_path) == ["posterior.zarr"]
    assert _leftovers(tmp_path / "posterior.zarr") == ["new"]


def test_commit_needs_every_output_and_names_are_checked(tmp_path):
    with StagedOutputs(tmp_path, ["a", "b"]) as staged:
        staged.path("a").write_text("a")
        with pytest.raises(FileNotFoundError, match="'b'"):
            staged.commit()
        with pytest.raises(ValueError, match="name must be one of"):
            staged.path("c")
    assert _leftovers(tmp_path) == []


def test_interrupt_guard_records_sigint_and_restores_the_handler():
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt), InterruptGuard() as guard:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)  # the handler raises at once
    assert guard.interrupted
    assert signal.getsignal(signal.SIGINT) is before
