"""Messages of ``pymc-dp`` in the user's terms: flags, data rows, plain numbers, clear notes."""

import numpy as np
import pandas as pd
import pytest

from pymc_dp.cli import main
from pymc_dp.cli.messages import one_line, release_message
from pymc_dp.cli.sampling import format_summary, mixing_note


def _error(capsys, argv) -> str:
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def _release(tmp_path, body, *family):
    data = tmp_path / "visits.csv"
    data.write_text(body)
    return [
        "release", str(data), "--column", "visits", *family, "--epsilon", "1", "--seed", "0",
        "-o", str(tmp_path / "o.json"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    "text",
    ["found np.float64(-1.0)", "found numpy.int64(3)", "found array(-1.)", "found array([1., 2.])"],
)
def test_no_numpy_reprs(text):
    line = one_line(ValueError(text))
    assert "np." not in line and "numpy" not in line and "array" not in line and "(" not in line


def test_release_message_names_flags_and_data_rows():
    text = "x must lie in [0, 5]: 2 record(s) (the first at index 0) lie outside"
    assert release_message(text, "visits") == (
        "--column visits must lie in [0, 5]: 2 record(s) (the first at data row 1) lie outside"
    )
    assert release_message("sigma must be > 0 (got -1.0)", "v") == "--sigma must be > 0 (got -1.0)"
    assert release_message("bounds_share must be < 1", "v") == "--bounds-share must be < 1"
    assert release_message("mu | sigma2 and the epsilon budget", "v") == (
        "mu | sigma2 and the epsilon budget"  # only arguments in the subject position
    )


def test_cli_names_the_column_and_the_data_row(tmp_path, capsys):
    argv = _release(tmp_path, "visits\n3\n-1\n5\n", "--family", "poisson", "--bounds", "0", "40")
    line = _error(capsys, argv)
    assert "--column visits must lie in the poisson domain" in line
    assert "(the first at data row 2)" in line and "index" not in line
    assert "pass --clamp" in line and "clamp=True" not in line


def test_cli_names_family_flags(tmp_path, capsys):
    body = "visits\n3\n4\n"
    argv = _release(tmp_path, body, "--family", "gamma", "--shape", "-1", "--bounds", "0", "9")
    assert "--shape must be a finite number > 0 (got -1.0)" in _error(capsys, argv)
    argv = _release(tmp_path, body, "--family", "lognormal", "--bounds", "-1", "4")
    assert _error(capsys, argv).startswith("pymc-dp release: error: --bounds (-1.0, 4.0) must")


def test_missing_values_are_named_by_data_row_and_file_line(tmp_path, capsys):
    line = _error(capsys, _release(tmp_path, "id,visits\n0,1\n1,\n2,2\n", "--family", "bernoulli"))
    assert "1 missing value(s), at data row 2 (file line 3)" in line


def test_fit_prior_errors_show_plain_numbers(tmp_path, capsys):
    data = tmp_path / "v.csv"
    data.write_text("visits\n3\n4\n5\n")
    release = tmp_path / "r.json"
    argv = ["release", str(data), "--column", "visits", "--family", "poisson", "--bounds", "0",
            "40", "--epsilon", "1", "--seed", "0", "-o", str(release)]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    line = _error(capsys, ["fit", str(release), "--prior", "alpha=-1", "--output-dir", "f"])
    assert "array(" not in line and "np." not in line and "-1" in line


def _posterior(chains: int, draws: int, rho: float):
    """AR(1) draws of lam: ESS falls as rho grows."""
    import xarray as xr

    rng = np.random.default_rng(0)
    x = np.zeros((chains, draws))
    for t in range(1, draws):
        x[:, t] = rho * x[:, t - 1] + rng.normal(size=chains)
    return {"posterior": xr.Dataset({"lam": (("chain", "draw"), x)})}


def test_low_ess_note_reads_as_one_fact():
    note = mixing_note(_posterior(4, 200, 0.95), ["lam"], 4)
    assert "bulk ESS of lam is" in note
    assert "over 4 chains, below the 400 (100 per chain) that ArviZ recommends" in note
    assert "(< 100 per chain)" not in note
    good = mixing_note(_posterior(4, 1000, 0.0), ["lam"], 4).splitlines()
    assert len(good) == 1 and good[0].startswith("diagnostics: R-hat <= 1.0")
    assert "0 divergent transitions of 4000" in good[0]


def test_divergences_are_printed():
    """Issue 36: divergences were shown only in the progress bar."""
    import xarray as xr

    fit = _posterior(4, 1000, 0.0)
    diverging = np.zeros((4, 1000), dtype=bool)
    diverging[1, :50] = True
    fit["sample_stats"] = xr.Dataset({"diverging": (("chain", "draw"), diverging)})
    note = mixing_note(fit, ["lam"], 4)
    assert "50 divergent transitions of 4000" in note
    assert "warning: 50 divergent transitions (1.2% of the draws)" in note


def test_separated_modes_are_warned_with_their_masses():
    """Issue 36: a far mode of 14% set the mean, and nothing warned."""
    import xarray as xr

    rng = np.random.default_rng(1)
    lam = np.concatenate([rng.normal(2.68, 0.02, 3440), rng.normal(38.5, 0.3, 560)])
    fit = {
        "posterior": xr.Dataset({"lam": (("chain", "draw"), rng.permutation(lam).reshape(4, -1))})
    }
    note = mixing_note(fit, ["lam"], 4)
    assert "warning: lam has 2 separated modes: 86% near 2.68" in note
    assert "14% near 38." in note
    one = mixing_note(_posterior(4, 1000, 0.0), ["lam"], 4)
    assert "separated modes" not in one


def test_separated_modes_of_a_regression_coefficient_are_warned():
    """Issue 36: the regression fit's note covers each coefficient, not only a family's θ."""
    import xarray as xr

    rng = np.random.default_rng(2)
    theta = rng.normal(0.0, 0.1, (4000, 3))
    theta[:600, 1] += 5.0  # 15% far from the rest, on the second coefficient only
    fit = {
        "posterior": xr.Dataset(
            {
                "theta": (("chain", "draw", "coef"), rng.permutation(theta).reshape(4, 1000, 3)),
                "sigma2": (("chain", "draw"), rng.gamma(50.0, 0.02, (4, 1000))),
            }
        )
    }
    note = mixing_note(fit, ["theta", "sigma2"], 4)
    assert "warning: theta[1] has 2 separated modes: 85% near" in note
    assert "theta[0]" not in note and "theta[2]" not in note and "sigma2 has" not in note


def test_summary_formats_each_value_not_each_column():
    table = pd.DataFrame(
        {"mean": [0.312, 152000.0], "sd": [0.05, 3.1e-6], "ess_bulk": [3612.4, 980.0],
         "r_hat": [1.0, 1.004]},
        index=["lam", "y_s"],
    )  # fmt: skip
    text = format_summary(table)
    assert "0.312" in text and "152000" in text and "3612" in text and "1.00" in text
    assert "3.100e-06" in text  # only the tiny value is in scientific notation
    assert "e+" not in text


def test_summary_of_arviz_prints_under_either_arviz_version():
    """ArviZ 1's summary is a DataFrame subclass of pre-formatted strings; ArviZ 0's is floats."""
    import arviz as az

    posterior = _posterior(2, 200, 0.0)["posterior"]
    posterior["big"] = posterior["lam"] * 1e5 + 3e5
    text = format_summary(az.summary(posterior))
    assert "e+" not in text and "big" in text and "lam" in text


def test_messages_of_issue_36(tmp_path, capsys):
    """The family without parameters, the labels hint, the defaults the fit would use."""
    argv = _release(tmp_path, "visits\n1\n3\n2\n", "--family", "poisson", "--bounds", "0", "30")
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "wrote" in out and "poisson release of column" in out and "poisson()" not in out
    line = _error(capsys, ["fit", str(tmp_path / "o.json"), "--prior", "alpa=2",
                           "--output-dir", str(tmp_path / "f")])  # fmt: skip
    # Gamma(2, 2/m) with the window's centre m = 15, not the window-free Gamma(1, 1).
    assert "its prior is lam ~ Gamma(alpha=2, beta=0.1333)" in line
    argv = _release(tmp_path, "visits\napple\npear\n", "--family", "categorical",
                    "--categories", "5", "--overwrite")  # fmt: skip
    line = _error(capsys, argv)
    assert "--categories LABEL1,LABEL2,..." in line
    assert "apple" not in line and "pear" not in line  # the data's labels are not public
