"""``pymc-dp release`` (curator) then ``pymc-dp fit`` (analyst), as a user runs them.

The releases run the installed console script as subprocesses; ``fit`` and the error paths call
:func:`pymc_dp.cli.main` in-process (the same code, without paying for a new interpreter that
imports PyMC; test_atomic_outputs runs ``fit`` in a subprocess of its own).
"""

import json
import subprocess
import sys
from pathlib import Path

import arviz as az
import numpy as np
import pymc as pm
import pytest

import pymc_dp as pmdp
from pymc_dp.cli import main
from pymc_dp.curator.release_file import read_release
from pymc_dp.model.noisy_suffstat import releases_from_attrs
from pymc_dp.model.ready_made import PRIORS

TRIALS, TRUE_P, N = 5, 0.3, 2000


def _command() -> list[str]:
    script = Path(sys.executable).with_name("pymc-dp")
    assert script.exists(), "pymc-dp is not installed next to this interpreter (pip install -e .)"
    return [str(script)]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*_command(), *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """A CSV (and, with pyarrow, the same table as Parquet) of Binomial(5, 0.3) records."""
    path = tmp_path_factory.mktemp("data")
    lines = ["id,successes,label"] + [f"{i},{s},r{i}" for i, s in enumerate(_successes())]
    (path / "records.csv").write_text("\n".join(lines) + "\n")
    return path


def _successes():
    return np.random.default_rng(2024).binomial(TRIALS, TRUE_P, size=N)


@pytest.fixture(scope="module")
def released(data_dir):
    """``pymc-dp release`` on the CSV at ε = 5 (noise scale 1 on a sum of ~3000)."""
    out = data_dir / "release.json"
    proc = _run(
        "release", str(data_dir / "records.csv"), "--column", "successes", "--family",
        "binomial", "--trials", str(TRIALS), "--epsilon", "5", "--seed", "7", "--output", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return out, proc


def test_release_writes_only_the_noisy_statistic(released, data_dir):
    out, proc = released
    data = json.loads(out.read_text())
    assert set(data) == {
        "format_version", "value", "n", "epsilon", "sensitivity", "bounds", "family",
        "family_params", "mechanism", "bounds_epsilon", "bounds_mechanism", "clamped",
        "quantum", "record_quantum", "library", "rho", "delta", "noise_scale", "budget",
    }  # fmt: skip
    rel = read_release(out)
    s = _successes().sum()
    assert (rel.n, rel.epsilon, rel.sensitivity, rel.family) == (N, 5.0, 5.0, "binomial")
    assert rel.family_params == {"trials": TRIALS}
    assert rel.value != s  # noise was added (continuous Laplace: never exactly 0)
    assert abs(rel.value - s) < 20  # scale Δ/ε = 1: |noise| > 20 has probability e^-20
    assert str(s) not in proc.stdout  # the summary line does not give the exact sum
    assert f"wrote {out}" in proc.stdout and "n = 2000" in proc.stdout


def test_same_seed_same_release_from_parquet(released, data_dir):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    table = pd.read_csv(data_dir / "records.csv")
    table.to_parquet(data_dir / "records.parquet")
    out = data_dir / "release_parquet.json"
    proc = _run(
        "release", str(data_dir / "records.parquet"), "--column", "successes", "--family",
        "binomial", "--trials", str(TRIALS), "--epsilon", "5", "--seed", "7", "-o", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert read_release(out) == read_release(released[0])


def test_fit_writes_posterior_summary_and_plots(released, data_dir, tmp_path, capsys):
    """300 draws × 2 chains; the DP posterior mean of p at ε = 5 is within 0.5 posterior sd
    of the non-private conjugate posterior's (noise moves s by ~1 of ~3000: 0.02 sd)."""
    out_dir = tmp_path / "fit"
    code = main([
        "fit", str(released[0]), "--prior", "alpha=3", "beta=5", "--draws", "300", "--tune",
        "100", "--chains", "2", "--seed", "1", "--no-progress", "--output-dir", str(out_dir),
    ])  # fmt: skip
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr
    for name in ("posterior.nc", "summary.csv", "posterior.png", "trace.png"):
        assert (out_dir / name).stat().st_size > 0, name
    idata = az.from_netcdf(out_dir / "posterior.nc")
    posterior = idata["posterior"]
    assert {"p", "y_s", "y_sigma2"} <= set(posterior.data_vars)
    assert releases_from_attrs(idata.attrs) == {"y": read_release(released[0])}
    assert json.loads(idata.attrs["pymc_dp_prior"]) == {
        "distribution": "Beta",
        "alpha": 3.0,
        "beta": 5.0,
    }
    constant = idata["constant_data"]
    assert int(constant["y_n"].values) == N and float(constant["y_epsilon"].values) == 5.0
    np.testing.assert_array_equal(constant["y_bounds"].values, [0.0, TRIALS])

    exact = pmdp.nonprivate_posterior(_successes(), pm.Binomial, prior=(3, 5), trials=TRIALS)
    p = posterior["p"].values
    assert p.shape == (2, 300)
    assert abs(p.mean() - exact.mean()) < 0.5 * exact.std()
    assert "p " in stdout and "r_hat" in stdout  # the printed ArviZ summary
    assert "p" in (out_dir / "summary.csv").read_text().splitlines()[1].split(",")[0]


def test_help_explains_every_option_with_examples():
    rel = _run("release", "--help").stdout
    for option in (
        "--column", "--family", "--epsilon", "--output", "--overwrite", "--trials",
        "--categories", "--shape", "--sigma", "--bounds", "--private-bounds", "--bounds-share",
        "--bounds-quantiles", "--format", "--seed", "--mechanism", "--rho", "--budget",
        "--budget-total",
    ):  # fmt: skip
        assert option in rel, option
    assert "examples:" in rel and "operating-system randomness" in rel
    assert "a study" in rel and "laplace-float" in rel
    fit = _run("fit", "--help").stdout
    for option in (
        "--prior", "--output-dir", "--format", "--draws", "--tune", "--chains", "--cores",
        "--seed", "--no-progress",
    ):  # fmt: skip
        assert option in fit, option
    assert "examples:" in fit
    # The table of priors in the help is the one build_model uses.
    for spec in PRIORS.values():
        assert spec.describe_rule() in " ".join(fit.split()), spec.describe_rule()


# ---- error paths: exit status 2, one line on stderr, no traceback -------------------------


def _error(capsys, argv) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


def _release_args(data, out, *extra, column="successes", family=("binomial", "--trials", "5")):
    return [
        "release", str(data), "--column", column, "--family", *family, "--epsilon", "1",
        "--seed", "0", "-o", str(out), *extra,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("a,b\n1,2\n", "no column 'successes'; the columns are 'a', 'b'"),
        ("successes\n1\nmany\n2\n", "must hold plain numbers"),
        ("successes\n", "has no records"),
        (
            "id,successes\n0,1\n1,\n2,2\n3,NaN\n",
            "2 missing value(s), at data rows 2, 4 (file lines 3, 5)",
        ),
        ("successes\n1\n7\n", "--column successes must lie in [0, 5]"),
        ("", "the file is empty"),
    ],
    ids=["unknown-column", "non-numeric", "empty-column", "missing", "outside-domain", "empty"],
)
def test_release_rejects_bad_data(tmp_path, capsys, body, expected):
    data = tmp_path / "bad.csv"
    data.write_text(body)
    line = _error(capsys, _release_args(data, tmp_path / "out.json"))
    assert line.startswith("pymc-dp release: error:") and expected in line
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize(
    ("argv_extra", "expected"),
    [
        (["--epsilon", "0"], "--epsilon must be a finite number > 0 (got 0.0)"),
        (["--epsilon", "nan"], "--epsilon must be a finite number > 0"),
        (["--bounds", "0", "5"], "--bounds and --private-bounds apply only to"),
    ],
    ids=["zero-epsilon", "nan-epsilon", "bounds-for-bounded"],
)
def test_release_rejects_bad_options(data_dir, tmp_path, capsys, argv_extra, expected):
    line = _error(capsys, _release_args(data_dir / "records.csv", tmp_path / "o.json", *argv_extra))
    assert expected in line


def test_release_needs_family_options_and_a_window(data_dir, tmp_path, capsys):
    data, out = data_dir / "records.csv", tmp_path / "o.json"
    assert "needs --trials" in _error(capsys, _release_args(data, out, family=("binomial",)))
    line = _error(capsys, _release_args(data, out, family=("poisson",)))
    assert "--bounds A B" in line and "--private-bounds" in line
    line = _error(capsys, _release_args(data, out, family=("poisson", "--trials", "3")))
    assert "--trials applies to binomial" in line


def test_release_window_options_and_output_path_are_checked(data_dir, tmp_path, capsys):
    data, out = data_dir / "records.csv", tmp_path / "o.json"
    poisson = ("poisson", "--bounds", "0", "5", "--bounds-share", "0.2")
    line = _error(capsys, _release_args(data, out, family=poisson))
    assert "--bounds-share apply only with --private-bounds" in line
    line = _error(capsys, _release_args(data, tmp_path / "no_such_dir" / "o.json"))
    assert "is not a directory; create it first" in line
    line = _error(capsys, _release_args(data, tmp_path, "--overwrite"))
    assert "is a directory; --output takes a file name" in line
    assert not out.exists()


def test_fit_output_dir_that_is_a_file_fails_cleanly(released, tmp_path, capsys):
    target = tmp_path / "a_file"
    target.write_text("")
    line = _error(capsys, ["fit", str(released[0]), "--output-dir", str(target)])
    assert "a_file" in line


def test_release_refuses_missing_file_and_overwriting(data_dir, tmp_path, capsys):
    line = _error(capsys, _release_args(tmp_path / "nope.csv", tmp_path / "o.json"))
    assert "nope.csv: no such file" in line
    existing = tmp_path / "existing.json"
    existing.write_text("{}")
    line = _error(capsys, _release_args(data_dir / "records.csv", existing))
    assert "exists; pass --overwrite" in line and existing.read_text() == "{}"
    assert main(_release_args(data_dir / "records.csv", existing, "--overwrite")) == 0
    assert read_release(existing).n == N


def test_parquet_without_pyarrow_says_what_to_install(tmp_path, capsys, monkeypatch):
    data = tmp_path / "x.parquet"
    data.write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # makes `import pyarrow...` fail
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    line = _error(capsys, _release_args(data, tmp_path / "o.json"))
    assert "needs pyarrow" in line and "pymc-dp[parquet]" in line


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{not json", "not valid JSON (Expecting property name"),
        ("[1, 2]", "expected a JSON object"),
        ('{"value": 1.0, "n": 10}', "not a valid pymc_dp release: a release needs the fields"),
        (
            '{"value": 1.0, "n": 10, "epsilon": -1, "sensitivity": 1, "bounds": [0, 1], '
            '"family": "bernoulli"}',
            "epsilon must be a finite number > 0 (got -1)",
        ),
        (
            '{"value": 1.0, "n": 10, "epsilon": 1, "sensitivity": 1, "bounds": [0, 1], '
            '"family": "zipf"}',
            "family 'zipf' is not supported",
        ),
    ],
    ids=["malformed", "not-object", "missing-fields", "bad-epsilon", "unknown-family"],
)
def test_fit_rejects_bad_release_files(tmp_path, capsys, text, expected):
    path = tmp_path / "release.json"
    path.write_text(text)
    line = _error(capsys, ["fit", str(path), "--output-dir", str(tmp_path / "fit")])
    assert line.startswith("pymc-dp fit: error:") and expected in line
    assert not (tmp_path / "fit").exists()


@pytest.mark.parametrize(
    ("prior", "expected"),
    [
        (["gamma=2"], "unknown --prior parameter 'gamma' for the binomial family; its prior is "),
        (["alpha3"], "--prior takes NAME=VALUE items"),
        (["alpha=x"], "--prior alpha must be a number"),
        (["alpha=-1"], "--prior values must be finite and > 0"),
        (["alpha=1,2"], "--prior alpha must have 1 value(s)"),
    ],
)
def test_fit_rejects_bad_priors(released, tmp_path, capsys, prior, expected):
    line = _error(capsys, ["fit", str(released[0]), "--prior", *prior])
    assert expected in line


def test_fit_missing_release_file(tmp_path, capsys):
    assert "nope.json: no such file" in _error(capsys, ["fit", str(tmp_path / "nope.json")])


def test_errors_from_the_console_script_have_no_traceback(tmp_path):
    proc = _run("fit", str(tmp_path / "missing.json"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    # The last line is ours (PyTensor may warn on import, e.g. about BLAS, before it).
    last = proc.stderr.strip().splitlines()[-1]
    assert last == f"pymc-dp fit: error: {tmp_path / 'missing.json'}: no such file"


def test_fit_checks_the_output_format_before_sampling(released, tmp_path, capsys, monkeypatch):
    """Without zarr, --format zarr fails at once, not after sampling."""
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "zarr" else real_find_spec(name, *a),
    )
    line = _error(
        capsys, ["fit", str(released[0]), "--format", "zarr", "--output-dir", str(tmp_path)]
    )
    assert "writing .zarr files needs zarr; install it with pip install zarr" in line
