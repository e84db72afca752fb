"""``pymc-dp release --family regression`` then ``pymc-dp fit`` on the regression release.

The release and the error paths run in-process through :func:`pymc_dp.cli.main`; one end-to-end
fit runs ``python -m pymc_dp`` as a subprocess, as a user would (marked slow: it samples).
"""

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from pymc_dp.cli import main
from pymc_dp.cli.regression import default_nig_prior
from pymc_dp.curator.budget import PrivacyBudget
from pymc_dp.curator.release_file import ReleaseFile, read_release
from pymc_dp.regression import RegressionRelease

ROOT = Path(__file__).resolve().parents[1]
N = 400
THETA = (1.0, 0.5, -0.3)  # intercept, age (in decades), dose


@pytest.fixture(scope="module")
def csv_path(tmp_path_factory):
    rng = np.random.default_rng(8)
    age = np.round(rng.uniform(2, 8, size=N), 2)
    dose = np.round(rng.uniform(0, 4, size=N), 2)
    spend = np.clip(THETA[0] + THETA[1] * age + THETA[2] * dose + rng.normal(0, 0.3, N), -2, 6)
    rows = ["id,age,dose,spend,site"] + [
        f"{i},{a},{d},{s:.3f},s{i % 3}"
        for i, (a, d, s) in enumerate(zip(age, dose, spend, strict=True))
    ]
    path = tmp_path_factory.mktemp("regression") / "records.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


REGRESSION = [
    "--family", "regression", "--x", "age,dose", "--y", "spend",
    "--x-bounds", "0", "10", "0", "4", "--y-bounds", "-2", "6",
]  # fmt: skip


def _release(csv_path, out, *args):
    return main(["release", str(csv_path), "--output", str(out), *args])


def test_release_writes_a_regression_with_its_column_names(csv_path, tmp_path, capsys):
    out = tmp_path / "reg.json"
    assert _release(csv_path, out, *REGRESSION, "--epsilon", "2", "--seed", "1") == 0
    rf = read_release(out, allow_columns=True)
    assert isinstance(rf, ReleaseFile) and rf.epsilon == 2.0
    (entry,) = rf.releases
    assert entry.is_regression and entry.column == "spend" and entry.covariates == ("age", "dose")
    rel = entry.release
    assert isinstance(rel, RegressionRelease)
    assert (rel.n, rel.d, rel.epsilon, rel.mechanism) == (N, 2, 2.0, "laplace-float")
    assert rel.x_bounds == ((0.0, 10.0), (0.0, 4.0)) and rel.y_bounds == (-2.0, 6.0)
    printed = capsys.readouterr().out
    assert "regression release of 'spend' on age, dose, n = 400, epsilon = 2" in printed


def test_release_without_seed_uses_the_vetted_noise(csv_path, tmp_path):
    out = tmp_path / "vetted.json"
    assert _release(csv_path, out, *REGRESSION, "--epsilon", "1") == 0
    rel = read_release(out, allow_columns=True)["spend"].release
    assert rel.mechanism == "discrete-laplace" and rel.quantum is not None


def test_release_from_parquet_gives_the_same_release(csv_path, tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    parquet = tmp_path / "records.parquet"
    pd.read_csv(csv_path).to_parquet(parquet)
    args = [*REGRESSION, "--epsilon", "1", "--seed", "3"]
    assert _release(csv_path, tmp_path / "a.json", *args) == 0
    assert _release(parquet, tmp_path / "b.json", *args) == 0
    a = read_release(tmp_path / "a.json", allow_columns=True)
    b = read_release(tmp_path / "b.json", allow_columns=True)
    assert a.to_json() == b.to_json()


def test_release_charges_the_ledger(csv_path, tmp_path):
    ledger = tmp_path / "ledger.json"
    args = [*REGRESSION, "--epsilon", "1", "--seed", "3", "--budget", str(ledger)]
    assert _release(csv_path, tmp_path / "a.json", *args, "--budget-total", "1.5") == 0
    assert PrivacyBudget.load(ledger).spent == 1.0
    assert _release(csv_path, tmp_path / "b.json", *args) == 2
    assert not (tmp_path / "b.json").exists() and PrivacyBudget.load(ledger).spent == 1.0


@pytest.mark.parametrize(
    "change, message",
    [
        ({"--x-bounds": ["0", "5", "0", "4"]},
         "record(s) outside --x-bounds [[0.0, 5.0], [0.0, 4.0]], the first at data row "),
        ({"--y-bounds": ["2", "6"]}, "--y spend has"),
        ({"--x-bounds": ["0", "10"]},
         "--x-bounds takes LO HI for each of the 2 --x column(s) (age, dose): 4 numbers (got 2)"),
        ({"--x-bounds": ["0", "10", "4", "0"]},
         "--x-bounds of 'dose' must be finite with LO < HI (got 4 0)"),
        ({"--x": ["age,site"]}, "column 'site' must hold plain numbers"),
        ({"--x": ["age,weight"]}, "no column 'weight'; the columns are 'id', 'age'"),
        ({"--x": ["age,spend"]}, "--x and --y must name distinct columns"),
        ({"--epsilon": ["0"]}, "--epsilon must be a finite number > 0 (got 0.0)"),
    ],
)  # fmt: skip
def test_release_refusals_name_the_flag(csv_path, tmp_path, capsys, change, message):
    args = [*REGRESSION, "--epsilon", "1", "--seed", "1"]
    for flag, values in change.items():
        i = args.index(flag)
        width = {"--x-bounds": 4, "--y-bounds": 2}.get(flag, 1)
        args[i + 1 : i + 1 + width] = values
    out = tmp_path / "bad.json"
    assert _release(csv_path, out, *args) == 2
    err = capsys.readouterr().err
    assert message in err and not out.exists()
    assert "6.5" not in err  # no record's value


def test_release_with_the_gaussian_mechanism_takes_rho_and_charges_it(csv_path, tmp_path, capsys):
    ledger = tmp_path / "ledger.json"
    out = tmp_path / "gauss.json"
    args = [
        *REGRESSION,
        "--mechanism",
        "discrete-gaussian",
        "--rho",
        "0.5",
        "--budget",
        str(ledger),
    ]
    assert _release(csv_path, out, *args, "--budget-total", "0.8") == 0
    rel = read_release(out, allow_columns=True)["spend"].release
    assert rel.mechanism == "discrete-gaussian" and rel.rho == 0.5 and rel.quantum is not None
    budget = PrivacyBudget.load(ledger)
    assert budget.unit == "rho" and budget.spent == 0.5
    assert "rho = 0.5" in capsys.readouterr().out
    assert _release(csv_path, tmp_path / "again.json", *args) == 2  # 0.5 + 0.5 > 0.8
    assert not (tmp_path / "again.json").exists() and PrivacyBudget.load(ledger).spent == 0.5


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--column", "age"], "--column do(es) not apply to it"),
        (["--bounds", "0", "1"], "--bounds do(es) not apply to it"),
        (["--mechanism", "discrete-gaussian"], "discrete-gaussian takes --rho, not --epsilon"),
        (["--rho", "0.5"], "--rho is only for --mechanism discrete-gaussian"),
    ],
)
def test_release_regression_refuses_other_flags(csv_path, tmp_path, capsys, extra, message):
    with pytest.raises(SystemExit):
        _release(csv_path, tmp_path / "x.json", *REGRESSION, "--epsilon", "1", *extra)
    assert message in capsys.readouterr().err


def test_regression_flags_need_the_regression_family(csv_path, tmp_path, capsys):
    with pytest.raises(SystemExit):
        _release(csv_path, tmp_path / "x.json", "--column", "age", "--family", "poisson",
                 "--bounds", "0", "10", "--epsilon", "1", "--y", "spend")  # fmt: skip
    assert "--y apply only with --family regression" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        _release(csv_path, tmp_path / "x.json", "--family", "regression", "--x", "age",
                 "--epsilon", "1")  # fmt: skip
    assert "--family regression needs --y, --x-bounds, --y-bounds" in capsys.readouterr().err


def test_default_prior_is_on_the_scale_of_the_box():
    mu, cov, alpha, beta = default_nig_prior([(0.0, 10.0), (0.0, 4.0)], (-2.0, 6.0))
    # σ² ~ InverseGamma(1, (w_y / 6)²) (issue 36); θ's covariance is on the scale s0 = w_y / 8.
    assert mu.tolist() == [2.0, 0.0, 0.0] and alpha == 1.0 and beta == pytest.approx((8 / 6) ** 2)
    beta = 1.0  # s0² = (8 / 8)²
    sd = np.sqrt(np.diag(cov) * beta)  # at σ = s0
    assert sd[1:] == pytest.approx([2 * 8 / 10, 2 * 8 / 4])  # a slope across the range twice
    # The line at the box's centre (5, 2) has sd w_y = 8, whatever the slopes.
    centre = np.array([1.0, 5.0, 2.0])
    assert np.sqrt(centre @ cov @ centre * beta) == pytest.approx(8.0)
    np.linalg.cholesky(cov)


def test_fit_refuses_a_prior_for_a_regression(csv_path, tmp_path, capsys):
    out = tmp_path / "reg.json"
    assert _release(csv_path, out, *REGRESSION, "--epsilon", "2", "--seed", "1") == 0
    code = main(["fit", str(out), "--prior", "alpha=2", "--output-dir", str(tmp_path / "f")])
    assert code == 2
    assert "--prior does not apply to a regression release" in capsys.readouterr().err
    code = main(["fit", str(out), "--likelihood", "clt", "--output-dir", str(tmp_path / "f")])
    assert code == 2 and "--likelihood does not apply" in capsys.readouterr().err
    assert not (tmp_path / "f" / "posterior.nc").exists()


def _fit_steps(out, tmp_path, monkeypatch):
    """The ``step`` list ``pymc-dp fit`` passes to ``pm.sample`` (a stub that stops the fit)."""
    import pymc as pm

    seen = {}

    def stub(*args, step=None, **kwargs):
        seen["step"] = step
        raise RuntimeError("stub: no sampling")

    monkeypatch.setattr(pm, "sample", stub)
    with pytest.raises(RuntimeError, match="stub"):
        main(["fit", str(out), "--output-dir", str(tmp_path / "f"), "--no-progress"])
    return seen["step"]


def test_fit_gives_the_regression_step_the_cli_candidates(csv_path, tmp_path, monkeypatch):
    """``pymc-dp fit`` samples with ``RegressionCollapsedStep(tries=CLI_TRIES)`` (256: issue
    36's ``fair`` release mixed with it and not with the library's 64); ``pm.sample`` is
    replaced by a stub that records its ``step`` and stops the fit."""
    from pymc_dp.cli.regression import CLI_TRIES
    from pymc_dp.regression import RegressionCollapsedStep

    out = tmp_path / "reg.json"
    assert _release(csv_path, out, *REGRESSION, "--epsilon", "2", "--seed", "1") == 0
    (step,) = _fit_steps(out, tmp_path, monkeypatch)
    assert isinstance(step, RegressionCollapsedStep)
    assert CLI_TRIES == 256 and step.tries == CLI_TRIES


def _release_and_fit(data, options, tmp_path):
    """``python -m pymc_dp`` release (ε = 20, seed 2) then fit (2 chains × 300 draws, seed 4)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    run = [sys.executable, "-m", "pymc_dp"]
    out = tmp_path / "reg.json"
    proc = subprocess.run(
        [*run, "release", str(data), *options, "--epsilon", "20", "--seed", "2",
         "--output", str(out)],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    fit_dir = tmp_path / "fit"
    proc = subprocess.run(
        [*run, "fit", str(out), "--draws", "300", "--tune", "300", "--chains", "2",
         "--seed", "4", "--no-progress", "--output-dir", str(fit_dir)],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return fit_dir, proc


@pytest.mark.slow
def test_fit_end_to_end_prints_the_coefficients_and_writes_the_plots(csv_path, tmp_path):
    """``python -m pymc_dp`` release then fit (ε = 20 on n = 400; 2 chains × 300 draws)."""
    import arviz as az

    fit_dir, proc = _release_and_fit(csv_path, REGRESSION, tmp_path)
    for name in ("theta[intercept]", "theta[age]", "theta[dose]", "sigma2", "ess_bulk", "r_hat"):
        assert name in proc.stdout
    assert "hdi_3%" in proc.stdout or "hdi94_lb" in proc.stdout  # ArviZ 0.x or 1.x
    assert sorted(p.name for p in fit_dir.iterdir()) == [
        "posterior.nc", "predictive.png", "summary.csv", "trace.png",
    ]  # fmt: skip
    idata = az.from_netcdf(fit_dir / "posterior.nc")
    assert idata.posterior["theta"].coords["z_coef"].values.tolist() == ["intercept", "age", "dose"]
    assert json.loads(idata.attrs["pymc_dp_release_z"])["covariates"] == ["age", "dose"]
    assert idata.attrs["pymc_dp_x_model_z"] == "normal"
    assert idata.attrs["pymc_dp_method_z"] == "collapsed"
    theta = idata.posterior["theta"].mean(("chain", "draw")).values
    sd = idata.posterior["theta"].std(("chain", "draw")).values
    # The posterior covers the truth (4 sd: the release is noisy and the chains short).
    assert np.all(np.abs(theta - np.array(THETA)) < 4 * sd + 0.05), (theta, sd)


def test_fit_column_needs_a_file_of_named_columns(tmp_path, capsys):
    import pymc as pm

    import pymc_dp as pmdp
    from pymc_dp.curator.release_file import write_release

    path = write_release(
        pmdp.release([0, 1, 1], pm.Bernoulli, epsilon=1.0, rng=0), tmp_path / "r.json"
    )
    assert main(["fit", str(path), "--column", "smoker", "--output-dir", str(tmp_path)]) == 2
    assert "--column applies to a file of named columns (" in capsys.readouterr().err


def test_a_bare_regression_release_reads_as_one_unnamed_entry(tmp_path):
    from pymc_dp.regression import release_regression

    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, size=(50, 1))
    rel = release_regression(x, x[:, 0], x_bounds=[(0, 1)], y_bounds=(0, 1), epsilon=1.0, rng=1)
    path = tmp_path / "bare.json"
    path.write_text(rel.to_json())
    rf = read_release(path, allow_columns=True)
    assert rf.columns == ("y",) and rf["y"].covariates is None and rf.epsilon == 1.0


@pytest.fixture(scope="module")
def binary_csv(tmp_path_factory):
    """age (decades), treated (0/1) and spend = 1 + 0.5 age − 0.4 treated + N(0, 0.3²)."""
    rng = np.random.default_rng(9)
    age = np.round(rng.uniform(2, 8, size=N), 2)
    treated = (rng.uniform(size=N) < 0.4).astype(int)
    spend = np.clip(1.0 + 0.5 * age - 0.4 * treated + rng.normal(0, 0.3, N), -2, 6)
    rows = ["age,treated,spend"] + [
        f"{a},{t},{s:.3f}" for a, t, s in zip(age, treated, spend, strict=True)
    ]
    path = tmp_path_factory.mktemp("binary") / "treated.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


BINARY = [
    "--family", "regression", "--x", "age,treated", "--y", "spend",
    "--x-bounds", "0", "10", "0", "1", "--y-bounds", "-2", "6", "--binary", "treated",
]  # fmt: skip


def test_release_records_the_binary_covariate_and_fit_takes_the_mixed_model(
    binary_csv, tmp_path, capsys, monkeypatch
):
    """``--binary treated`` is checked, recorded, printed; ``pymc-dp fit`` then samples the
    mixed model of x with ``RegressionMixedStep`` (``pm.sample`` stubbed as above)."""
    from pymc_dp.regression import RegressionMixedStep

    out = tmp_path / "reg.json"
    assert _release(binary_csv, out, *BINARY, "--epsilon", "2", "--seed", "1") == 0
    assert "binary: treated" in capsys.readouterr().out
    rel = read_release(out, allow_columns=True)["spend"].release
    assert rel.binary == (1,)
    (step,) = _fit_steps(out, tmp_path, monkeypatch)
    assert isinstance(step, RegressionMixedStep)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"--binary": "age"}, "with a value other than 0 and 1 in the covariate(s) declared "
         "binary (--binary age); the release was stopped"),
        ({"--binary": "spend"}, "--binary names covariates among --x (age, treated); spend is not"),
        ({"--x-bounds": ["0", "10", "0.5", "1"]},
         "--binary treated: its --x-bounds [0.5, 1] must hold 0 and 1"),
    ],
)  # fmt: skip
def test_release_binary_refusals_name_the_flag(binary_csv, tmp_path, capsys, change, message):
    args = [*BINARY, "--epsilon", "1", "--seed", "1"]
    for flag, values in change.items():
        i = args.index(flag)
        if flag == "--x-bounds":
            args[i + 1 : i + 5] = values
        else:
            args[i + 1] = values
    out = tmp_path / "bad.json"
    assert _release(binary_csv, out, *args) == 2
    err = capsys.readouterr().err
    assert message in err and not out.exists(), err


def test_binary_needs_the_regression_family(csv_path, tmp_path, capsys):
    with pytest.raises(SystemExit):
        _release(csv_path, tmp_path / "a.json", "--column", "age", "--family", "normal",
                 "--binary", "age", "--epsilon", "1")  # fmt: skip
    assert "--binary apply only with --family regression" in capsys.readouterr().err


@pytest.fixture(scope="module")
def pair_csv(tmp_path_factory):
    """age (decades), treated and insured (0/1, 1 together in some records), and spend."""
    rng = np.random.default_rng(11)
    treated = (rng.uniform(size=N) < 0.4).astype(int)
    insured = (rng.uniform(size=N) < 0.3 + 0.3 * treated).astype(int)
    age = np.round(np.clip(rng.normal(5 + treated - insured, 1.2), 0, 10), 2)
    spend = np.clip(1.0 + 0.5 * age - 0.4 * treated + 0.3 * insured + rng.normal(0, 0.3, N),
                    -2, 6)  # fmt: skip
    rows = ["age,treated,insured,spend"] + [
        f"{a},{t},{i},{s:.3f}" for a, t, i, s in zip(age, treated, insured, spend, strict=True)
    ]
    path = tmp_path_factory.mktemp("pair") / "insured.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


PAIR = [
    "--family", "regression", "--x", "age,treated,insured", "--y", "spend",
    "--x-bounds", "0", "10", "0", "1", "0", "1", "--y-bounds", "-2", "6",
    "--binary", "treated,insured",
]  # fmt: skip


def test_two_declared_binaries_beside_age_take_the_pair_model(pair_csv, tmp_path, monkeypatch):
    """``--binary treated,insured`` beside age: ``pymc-dp fit`` samples the pair model of x with
    ``RegressionLevelStep`` (``pm.sample`` stubbed as above)."""
    from pymc_dp.regression import RegressionLevelStep

    out = tmp_path / "reg.json"
    assert _release(pair_csv, out, *PAIR, "--epsilon", "2", "--seed", "1") == 0
    assert read_release(out, allow_columns=True)["spend"].release.binary == (1, 2)
    (step,) = _fit_steps(out, tmp_path, monkeypatch)
    assert isinstance(step, RegressionLevelStep)


@pytest.mark.slow
def test_fit_of_a_binary_release_end_to_end(binary_csv, tmp_path):
    """``python -m pymc_dp`` release ``--binary`` then fit (ε = 20, 2 chains × 300 draws): the
    mixed model's variables in the posterior file, the plots written, the truth covered."""
    import arviz as az

    fit_dir, proc = _release_and_fit(binary_csv, BINARY, tmp_path)
    assert "RegressionMixedStep" in proc.stdout + proc.stderr
    assert sorted(p.name for p in fit_dir.iterdir()) == [
        "posterior.nc", "predictive.png", "summary.csv", "trace.png",
    ]  # fmt: skip
    idata = az.from_netcdf(fit_dir / "posterior.nc")
    assert idata.attrs["pymc_dp_x_model_z"] == "mixed"
    post = idata.posterior
    prob = float(post["z_x_prob"].mean())
    assert abs(prob - 0.4) < 0.1, prob
    theta = post["theta"].mean(("chain", "draw")).values
    sd = post["theta"].std(("chain", "draw")).values
    assert np.all(np.abs(theta - np.array([1.0, 0.5, -0.4])) < 4 * sd + 0.05), (theta, sd)


@pytest.fixture(scope="module")
def factor_csv(tmp_path_factory):
    """age (decades), region as dummy columns north, south (west the reference), and spend;
    ``broken.csv`` beside it has two ones in data row 4 and 0.5 in data row 9."""
    rng = np.random.default_rng(10)
    age = np.round(rng.uniform(2, 8, size=N), 2)
    region = rng.integers(0, 3, size=N)
    north, south = (region == 1).astype(int), (region == 2).astype(int)
    spend = np.clip(1.0 + 0.5 * age + 0.3 * north - 0.4 * south + rng.normal(0, 0.3, N), -2, 6)
    rows = ["age,north,south,spend"] + [
        f"{a},{n},{s},{v:.3f}" for a, n, s, v in zip(age, north, south, spend, strict=True)
    ]
    folder = tmp_path_factory.mktemp("factor")
    (folder / "regions.csv").write_text("\n".join(rows) + "\n")
    rows[4] = f"{age[3]},1,1,{spend[3]:.3f}"
    rows[9] = f"{age[8]},0.5,0,{spend[8]:.3f}"
    (folder / "broken.csv").write_text("\n".join(rows) + "\n")
    return folder / "regions.csv"


FACTOR = [
    "--family", "regression", "--x", "age,north,south", "--y", "spend",
    "--x-bounds", "0", "10", "0", "1", "0", "1", "--y-bounds", "-2", "6",
    "--factor", "north,south",
]  # fmt: skip


def test_release_records_the_factor_with_the_same_noise(factor_csv, tmp_path, capsys):
    """``--factor north,south`` is checked, recorded in order and printed; Δ, the scale and
    (seeded) the noisy values are those of the release without it."""
    out, plain = tmp_path / "reg.json", tmp_path / "plain.json"
    assert _release(factor_csv, out, *FACTOR, "--epsilon", "2", "--seed", "1") == 0
    assert "factor: north, south" in capsys.readouterr().out
    assert _release(factor_csv, plain, *FACTOR[:-2], "--epsilon", "2", "--seed", "1") == 0
    rel = read_release(out, allow_columns=True)["spend"].release
    without = read_release(plain, allow_columns=True)["spend"].release
    assert rel.factor == (1, 2) and without.factor == () and rel.binary == ()
    assert (rel.sensitivity, rel.scale) == (without.sensitivity, without.scale)
    assert np.array_equal(rel.value, without.value)
    args = [*FACTOR[:-1], "south,north", "--epsilon", "2", "--seed", "1"]
    assert _release(factor_csv, tmp_path / "order.json", *args) == 0
    reordered = read_release(tmp_path / "order.json", allow_columns=True)["spend"].release
    assert reordered.factor == (2, 1)  # the order names the levels


@pytest.mark.parametrize(
    "change, message",
    [
        ({"--factor": "age,north"}, "with a value other than 0 and 1, or more than one 1, in the "
         "dummy columns declared factor (--factor age,north); the release was stopped. Code the "
         "factor as dummy columns of one level each, reference level all 0 (clamping does not), "
         "or do not pass --factor"),
        ({"--factor": "north,spend"},
         "--factor names covariates among --x (age, north, south); spend is not"),
        ({"--x-bounds": ["0", "10", "0.5", "1", "0", "1"]},
         "--factor north: its --x-bounds [0.5, 1] must hold 0 and 1"),
        ({"--binary": "south"}, "--binary and --factor both name south: declare a factor's dummy "
         "columns in --factor only"),
    ],
)  # fmt: skip
def test_release_factor_refusals_name_the_flag(factor_csv, tmp_path, capsys, change, message):
    args = [*FACTOR, "--epsilon", "1", "--seed", "1"]
    for flag, values in change.items():
        if flag not in args:
            args += [flag, values]
        elif flag == "--x-bounds":
            i = args.index(flag)
            args[i + 1 : i + 7] = values
        else:
            args[args.index(flag) + 1] = values
    out = tmp_path / "bad.json"
    assert _release(factor_csv, out, *args) == 2
    err = capsys.readouterr().err
    assert message in err and not out.exists(), err


@pytest.mark.parametrize("clamp", [[], ["--clamp"]])
def test_release_of_a_broken_factor_stops_before_any_noise(factor_csv, tmp_path, capsys, clamp):
    """Two ones in a record, 0.5 in another: stopped (with --clamp too), no file, no charge,
    the data rows named and no value quoted."""
    ledger = tmp_path / "ledger.json"
    out = tmp_path / "bad.json"
    args = [*FACTOR, "--epsilon", "1", *clamp, "--budget", str(ledger), "--budget-total", "2"]
    assert _release(factor_csv.parent / "broken.csv", out, *args) == 2
    err = capsys.readouterr().err
    stopped = (
        "has 2 record(s) (the first at data row 4) with a value other than 0 and 1, or more "
        "than one 1, in the dummy columns declared factor (--factor north,south)"
    )
    assert stopped in err, err
    assert not out.exists() and "0.5" not in err
    assert not ledger.exists() or PrivacyBudget.load(ledger).spent == 0.0


@pytest.fixture(scope="module")
def regions_csv(factor_csv):
    """The regions of :func:`factor_csv` alone: north, south (west the reference), spend."""
    lines = factor_csv.read_text().splitlines()
    path = factor_csv.parent / "regions_only.csv"
    path.write_text("\n".join(line.split(",", 1)[1] for line in lines) + "\n")
    return path


REGIONS = [
    "--family", "regression", "--x", "north,south", "--y", "spend",
    "--x-bounds", "0", "1", "0", "1", "--y-bounds", "-2", "6", "--factor", "north,south",
]  # fmt: skip


def test_fit_of_a_factor_release_takes_the_cell_model(regions_csv, factor_csv, tmp_path,
                                                      monkeypatch):  # fmt: skip
    """Every covariate a declared factor's column: ``pymc-dp fit`` samples the cell model with
    ``RegressionCellStep``; a factor beside a continuous covariate the level model with
    ``RegressionLevelStep`` (before 2026-12-05: the normal model, with a warning)."""
    from pymc_dp.regression import RegressionCellStep, RegressionLevelStep

    out = tmp_path / "regions.json"
    assert _release(regions_csv, out, *REGIONS, "--epsilon", "2", "--seed", "1") == 0
    (step,) = _fit_steps(out, tmp_path, monkeypatch)
    assert isinstance(step, RegressionCellStep)
    out = tmp_path / "with_age.json"
    assert _release(factor_csv, out, *FACTOR, "--epsilon", "2", "--seed", "1") == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning: the declaration is used
        (step,) = _fit_steps(out, tmp_path, monkeypatch)
    assert isinstance(step, RegressionLevelStep)


@pytest.mark.slow
def test_fit_of_a_factor_release_end_to_end(regions_csv, tmp_path):
    """``python -m pymc_dp`` release ``--factor`` then fit (ε = 20): the cell model's π in the
    posterior file, the per-level plot written, the truth covered."""
    import arviz as az

    fit_dir, proc = _release_and_fit(regions_csv, REGIONS, tmp_path)
    assert "RegressionCellStep" in proc.stdout + proc.stderr
    assert (fit_dir / "predictive.png").exists()
    idata = az.from_netcdf(fit_dir / "posterior.nc")
    assert idata.attrs["pymc_dp_x_model_z"] == "factor"
    probs = idata.posterior["z_x_probs"].mean(("chain", "draw")).values
    assert np.all(np.abs(probs - 1 / 3) < 0.08), probs
    theta = idata.posterior["theta"].mean(("chain", "draw")).values
    sd = idata.posterior["theta"].std(("chain", "draw")).values
    # spend = 1 + 0.5 age + ..., age ~ U(2, 8) left out: intercept 1 + 0.5 E age = 3.5
    assert np.all(np.abs(theta - np.array([3.5, 0.3, -0.4])) < 4 * sd + 0.1), (theta, sd)


def test_factor_needs_the_regression_family(csv_path, tmp_path, capsys):
    with pytest.raises(SystemExit):
        _release(csv_path, tmp_path / "a.json", "--column", "age", "--family", "normal",
                 "--factor", "age", "--epsilon", "1")  # fmt: skip
    assert "--factor apply only with --family regression" in capsys.readouterr().err
