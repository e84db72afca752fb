"""The release side under concurrency and failure: the ledger file, refusals, signals, full disks.

Each test names the item of issue 37 it shows. Releases run through the real command line
(:func:`pymc_dp.cli.main` in-process, or ``python -m pymc_dp`` in subprocesses where several
processes or a real signal are the point).
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pymc as pm
import pytest

import pymc_dp as pmdp
from pymc_dp.cli import main
from pymc_dp.curator.budget import PrivacyBudget, open_ledger
from pymc_dp.curator.data_files import InputFileError
from pymc_dp.curator.release_file import read_release

ROOT = Path(__file__).resolve().parents[1]


def _bernoulli_csv(path: Path, n: int = 200) -> Path:
    path.write_text("b\n" + "\n".join(str(i % 2) for i in range(n)) + "\n")
    return path


def _ledger(path: Path) -> dict:
    return json.loads(path.read_text())


def _spent(path: Path) -> float:
    return sum(cost for _, cost in _ledger(path)["ledger"])


def _leftovers(directory: Path) -> list[str]:
    """Temporary files a writer could leave behind (the lock file is meant to stay)."""
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


# --- item 1: concurrent releases never overspend one ledger -----------------------------------


def test_concurrent_releases_never_exceed_the_ledger_total(tmp_path):
    """Six real CLI processes, each asking 0.3 of a total of 1, start together: at most three
    succeed, the ledger records exactly the successful ones, and the total is never exceeded.
    (Before the lock, every process read the ledger at start and wrote it at the end: all six
    succeeded and the file recorded one charge.)"""
    data = _bernoulli_csv(tmp_path / "b.csv")
    ledger = tmp_path / "L.json"
    PrivacyBudget(epsilon=1.0).save(ledger)
    command = [sys.executable, "-m", "pymc_dp", "release", str(data), "--column", "b",
               "--family", "bernoulli", "--epsilon", "0.3", "--budget", str(ledger)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [*command, "-o", str(tmp_path / f"r{i}.json")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(6)
    ]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    ok = [i for i, (code, _) in enumerate(results) if code == 0]
    refused = [err for code, err in results if code != 0]
    assert len(ok) == 3, results
    assert all(code == 2 and "would spend" in err for code, err in results if code != 0), refused
    assert len(_ledger(ledger)["ledger"]) == 3
    assert _spent(ledger) == pytest.approx(0.9) and _spent(ledger) <= 1.0
    written = sorted(int(p.stem[1:]) for p in tmp_path.glob("r*.json"))
    assert written == ok
    receipts = sorted(json.loads((tmp_path / f"r{i}.json").read_text())["budget"]["spent"]
                      for i in ok)  # fmt: skip
    assert receipts == pytest.approx([0.3, 0.6, 0.9])  # each saw the others' charges
    assert _leftovers(tmp_path) == []


def test_the_ledger_lock_serialises_writers_in_one_process(tmp_path):
    """open_ledger holds the lock for the whole block; a second opener waits for it."""
    import threading

    ledger = tmp_path / "L.json"
    order = []
    with open_ledger(ledger, unit="epsilon", total=1.0) as budget:
        budget.spend(epsilon=0.25, label="first")

        def second():
            with open_ledger(ledger, unit="epsilon") as other:
                order.append(("second", other.spent))
                other.spend(epsilon=0.25, label="second")

        thread = threading.Thread(target=second)
        thread.start()
        thread.join(0.5)
        assert thread.is_alive()  # blocked on the lock
        order.append(("first", budget.spent))
    thread.join(10)
    assert order == [("first", 0.25), ("second", 0.25)]
    assert _spent(ledger) == pytest.approx(0.5)


# --- item 2: a charge survives a failure after it; public refusals come before noise ----------


def test_a_failure_after_the_charge_leaves_the_charge_in_the_ledger(tmp_path, monkeypatch, capsys):
    import pymc_dp.curator.single as single

    data = _bernoulli_csv(tmp_path / "b.csv")
    ledger = tmp_path / "L.json"

    def broken(*args, **kwargs):
        raise ValueError("the noise sampler failed")

    monkeypatch.setattr(single, "release_from_totals", broken)
    args = ["release", str(data), "--column", "b", "--family", "bernoulli", "--epsilon", "0.4",
            "--budget", str(ledger), "-o", str(tmp_path / "r.json")]  # fmt: skip
    assert main([*args, "--budget-total", "1"]) == 2
    assert "the noise sampler failed" in capsys.readouterr().err
    assert _spent(ledger) == pytest.approx(0.4)  # charged, though nothing was released
    assert main(args) == 2  # a retry is charged again
    assert main(args) == 2
    capsys.readouterr()
    assert _spent(ledger) == pytest.approx(1.2 - 0.4)  # the third was refused: 0.4 + 0.4 only
    assert not (tmp_path / "r.json").exists()


def test_a_privately_chosen_window_refused_after_its_charge_is_not_printed(
    tmp_path, monkeypatch, capsys
):
    import pymc_dp.curator.single as single

    data = tmp_path / "v.csv"
    data.write_text("v\n" + "\n".join(f"{v:.3f}" for v in np.linspace(1, 9, 300)) + "\n")
    ledger = tmp_path / "L.json"
    secret = (4.321987654, 4.321987654)
    monkeypatch.setattr(single, "choose_window", lambda **kwargs: secret)
    code = main(["release", str(data), "--column", "v", "--family", "normal", "--private-bounds",
                 "0", "10", "--epsilon", "0.5", "--budget", str(ledger), "--budget-total", "1",
                 "-o", str(tmp_path / "r.json")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "privately chosen window" in err and "budget is spent" in err
    assert "4.32" not in err
    assert _spent(ledger) == pytest.approx(0.5)


def test_a_search_range_narrower_than_its_quantum_is_refused_before_any_charge(tmp_path, capsys):
    """The issue's case: --private-bounds 1e15 1.00000000001e15 drew the window, then refused."""
    data = tmp_path / "v.csv"
    data.write_text("v\n" + "\n".join(str(1e15 + i) for i in range(100)) + "\n")
    ledger = tmp_path / "L.json"
    code = main(["release", str(data), "--column", "v", "--family", "normal", "--private-bounds",
                 "1e15", "1.00000000001e15", "--epsilon", "0.5", "--budget", str(ledger),
                 "--budget-total", "1", "-o", str(tmp_path / "r.json")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "--private-bounds" in err and "narrower than the fixed-point" in err
    assert not ledger.exists()  # nothing charged: the refusal came from public values


# --- item 3: no unseeded float noise ----------------------------------------------------------


def test_unseeded_float_noise_is_refused(tmp_path, capsys):
    with pytest.raises(ValueError, match=r"laplace-float.*needs rng=.*drop mechanism"):
        pmdp.release([0, 1, 1], pm.Bernoulli, epsilon=1.0, mechanism="laplace-float")
    rel = pmdp.release([0, 1, 1], pm.Bernoulli, epsilon=1.0, mechanism="laplace-float", rng=3)
    assert rel.mechanism == "laplace-float"
    data = _bernoulli_csv(tmp_path / "b.csv")
    with pytest.raises(SystemExit) as exc:
        main(["release", str(data), "--column", "b", "--family", "bernoulli", "--epsilon", "1",
              "--mechanism", "laplace-float", "-o", str(tmp_path / "r.json")])  # fmt: skip
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--mechanism laplace-float needs --seed" in err and len(err.strip().splitlines()) == 1


# --- item 4: strict parsing of release files and ledgers --------------------------------------


@pytest.fixture
def release_json(tmp_path):
    rel = pmdp.release([0, 1, 1, 0], pm.Bernoulli, epsilon=1.0, budget=PrivacyBudget(epsilon=2.0))
    return rel.to_json(indent=2)


@pytest.mark.parametrize(
    ("tamper", "match"),
    [
        (lambda t: t.replace('"n": 4,', '"n": 4, "n": 5,'), "key 'n' appears twice"),
        (lambda t: t.replace('"n": 4', '"n": ' + "9" * 5000), "integer of 5000 digits"),
        (
            lambda t: t[:-2] + ', "pad": ' + "[" * 100_000 + "]" * 100_000 + "}",
            "nested deeper than",
        ),
        (lambda t: t[:-2] + ', "pad": ' + "[" * 40 + "]" * 40 + "}", "nested deeper than"),
        (lambda t: t.replace('"total": 2.0', '"total": -1'), "budget total must be a finite"),
        (lambda t: t.replace('"total": 2.0', '"total": Infinity'), "budget total must be a fin"),
        (lambda t: t.replace('"spent": 1.0', '"spent": -0.5'), "budget spent must be a finite"),
        (lambda t: t.replace('"unit": "epsilon"', '"unit": "delta"'), "budget unit must be"),
    ],
)
def test_tampered_release_files_are_refused_in_one_line(release_json, tmp_path, capsys, tamper,
                                                        match):  # fmt: skip
    path = tmp_path / "r.json"
    path.write_text(tamper(release_json))
    assert path.read_text() != release_json
    with pytest.raises(InputFileError, match=match):
        read_release(path)
    code = main(["fit", str(path), "--output-dir", str(tmp_path / "fit"), "--draws", "10",
                 "--tune", "10", "--chains", "1", "--no-progress"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "fit").exists() or not any((tmp_path / "fit").iterdir())


def test_a_tampered_ledger_is_refused_by_the_cli(tmp_path, capsys):
    data = _bernoulli_csv(tmp_path / "b.csv")
    ledger = tmp_path / "L.json"
    ledger.write_text('{"unit": "epsilon", "total": 1.0, "total": 100.0, "ledger": []}')
    code = main(["release", str(data), "--column", "b", "--family", "bernoulli", "--epsilon",
                 "0.5", "--budget", str(ledger), "-o", str(tmp_path / "r.json")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "key 'total' appears twice" in err and str(ledger) in err


# --- item 5: CSV streamed, the same release bit for bit ---------------------------------------


def test_streamed_csv_gives_the_array_release_bit_for_bit(tmp_path, monkeypatch):
    import pymc_dp.curator.frames as frames
    from pymc_dp.curator.data_files import CsvColumn, read_column

    rng = np.random.default_rng(5)
    x = rng.normal(3.0, 2.0, size=1000)
    path = tmp_path / "x.csv"
    path.write_text("id,x\n" + "".join(f"{i},{v!r}\n" for i, v in enumerate(x.tolist())))
    monkeypatch.setattr(frames, "BATCH", 97)  # many batches, a ragged last one
    kw = dict(bounds=(-2.0, 8.0), epsilon=1.0)
    whole = pmdp.release(read_column(path, "x"), pm.Normal, rng=11, **kw)
    streamed = pmdp.release(CsvColumn(path, "x"), pm.Normal, column="x", rng=11, **kw)
    assert streamed == whole
    assert streamed.value.tobytes() == whole.value.tobytes()
    # Private bounds too (the seeded study's Smith gaps read the column whole, batch by batch).
    kw = dict(bounds="private", bounds_range=(-50.0, 50.0), epsilon=1.0, rng=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NoisyBoundsWarning: the window's share is small
        a = pmdp.release(read_column(path, "x"), pm.Normal, **kw)
        b = pmdp.release(CsvColumn(path, "x"), pm.Normal, column="x", **kw)
    assert a == b and a.value.tobytes() == b.value.tobytes()


def test_streamed_csv_reports_problems_as_the_whole_file_reader_does(tmp_path, monkeypatch):
    import pymc_dp.curator.frames as frames
    from pymc_dp.curator.data_files import CsvColumn, read_column

    rows = [str(i % 5) for i in range(300)]
    for i in (40, 150, 260):
        rows[i] = "NA"
    path = tmp_path / "x.csv"
    path.write_text("x\n" + "\n".join(rows) + "\n")
    monkeypatch.setattr(frames, "BATCH", 64)
    with pytest.raises(InputFileError) as whole:
        read_column(path, "x")
    with pytest.raises(InputFileError) as streamed:
        pmdp.release(CsvColumn(path, "x"), pm.Poisson, column="x", bounds=(0, 9), epsilon=1.0)
    assert str(streamed.value) == str(whole.value)
    assert "3 missing value(s), at data rows 41, 151, 261" in str(whole.value)
    path.write_text("x\n" + "\n".join([*rows[:100], "", *rows[100:]]) + "\n")
    with pytest.raises(InputFileError, match="line 102 is blank"):
        pmdp.release(CsvColumn(path, "x"), pm.Poisson, column="x", bounds=(0, 9), epsilon=1.0)


# --- item 6: arguments, signals and full disks ------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--bounds", "-inf", "1"], "--bounds must be finite"),
        (["--bounds", "1", "-1e-3"], "--bounds"),
        (["--bounds", "0", "1", "--seed", "-1"], "argument --seed: expected a seed >= 0 (got -1)"),
        (
            ["--bounds", "0", "1", "--budget", "L.json", "--budget-total", "0"],
            "--budget-total must be a finite number > 0 (got 0)",
        ),
        (
            ["--bounds", "0", "1", "--budget", "L.json", "--budget-total", "-1e-3"],
            "--budget-total must be a finite number > 0",
        ),
    ],
)
def test_negative_numbers_are_values_and_errors_are_one_line(
    tmp_path, monkeypatch, capsys, extra, match
):
    data = tmp_path / "v.csv"
    data.write_text("v\n0.5\n-0.25\n")
    monkeypatch.chdir(tmp_path)
    try:
        code = main(["release", str(data), "--column", "v", "--family", "normal", "--epsilon",
                     "1", "-o", str(tmp_path / "r.json"), *extra])  # fmt: skip
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2 and match in err and len(err.strip().splitlines()) == 1, err
    assert "usage:" not in err and not (tmp_path / "L.json").exists()


def test_e_notation_bounds_release(tmp_path, capsys):
    data = tmp_path / "v.csv"
    data.write_text("v\n0.5\n-0.0005\n0.25\n")
    out = tmp_path / "r.json"
    assert main(["release", str(data), "--column", "v", "--family", "normal", "--epsilon", "1",
                 "--bounds", "-1e-3", "1", "-o", str(out)]) == 0  # fmt: skip
    assert read_release(out).bounds == (-1e-3, 1.0)
    capsys.readouterr()


def test_a_negative_epsilon_split_is_refused_by_name(tmp_path, capsys):
    data = tmp_path / "two.csv"
    data.write_text("a,b\n0,1\n1,1\n")
    code = main(["release", str(data), "--column", "a,b", "--family", "bernoulli,bernoulli",
                 "--epsilon", "1", "--epsilon-split", "-0.5,1.5", "-o",
                 str(tmp_path / "r.json")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "--epsilon-split" in err and "-0.5" in err
    assert len(err.strip().splitlines()) == 1


_INTERRUPTED_CHILD = textwrap.dedent(
    """
    import os, signal, sys
    import pymc_dp.curator.single as single
    from pymc_dp.cli import main

    # A shell that starts a job in the background (CI's, say) hands it SIGINT ignored; a
    # terminal's Ctrl-C reaches a process with Python's default handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    where = sys.argv[1]
    target = getattr(single, where)

    def interrupted(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C, delivered here
        return target(*args, **kwargs)

    setattr(single, where, interrupted)
    sys.exit(main(sys.argv[2:]))
    """
)


@pytest.mark.parametrize(("where", "charged"), [("checked_family", 0.0),
                                                ("release_from_totals", 0.5)])  # fmt: skip
def test_sigint_during_release_exits_130_without_a_traceback(tmp_path, where, charged):
    data = _bernoulli_csv(tmp_path / "b.csv")
    ledger = tmp_path / "L.json"
    PrivacyBudget(epsilon=1.0).save(ledger)
    proc = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_CHILD, where, "release", str(data), "--column", "b",
         "--family", "bernoulli", "--epsilon", "0.5", "--budget", str(ledger),
         "-o", str(tmp_path / "r.json")],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 130, proc.stderr
    assert "Traceback" not in proc.stderr and "interrupted" in proc.stderr
    assert not (tmp_path / "r.json").exists()
    assert _spent(ledger) == pytest.approx(charged)  # a charge made before the interrupt stays
    assert _leftovers(tmp_path) == []


def _full_disk(monkeypatch):
    def no_space(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_space)


def test_a_full_disk_names_the_output_and_leaves_no_temporary_file(tmp_path, monkeypatch, capsys):
    data = _bernoulli_csv(tmp_path / "b.csv")
    out = tmp_path / "r.json"
    _full_disk(monkeypatch)
    code = main(["release", str(data), "--column", "b", "--family", "bernoulli", "--epsilon",
                 "0.5", "-o", str(out)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and f"{out}: no space left on device" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.csv"]


def test_a_full_disk_refuses_the_charge_before_any_noise(tmp_path, monkeypatch, capsys):
    import pymc_dp.curator.noise as noise

    data = _bernoulli_csv(tmp_path / "b.csv")
    ledger = tmp_path / "L.json"
    PrivacyBudget(epsilon=1.0).save(ledger)
    before = ledger.read_text()
    _full_disk(monkeypatch)

    def drawn(*args, **kwargs):
        raise AssertionError("noise drawn although the charge was not saved")

    monkeypatch.setattr(noise, "discrete_laplace_mechanism", drawn)
    code = main(["release", str(data), "--column", "b", "--family", "bernoulli", "--epsilon",
                 "0.5", "--budget", str(ledger), "-o", str(tmp_path / "r.json")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and f"{ledger}: no space left on device" in err
    assert ledger.read_text() == before
    assert _leftovers(tmp_path) == [] and not (tmp_path / "r.json").exists()
