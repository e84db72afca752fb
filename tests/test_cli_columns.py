"""``pymc-dp release`` of several columns (explicit ε split) and of labelled categories, and fit.

The commands run in-process through :func:`pymc_dp.cli.main`, as the other CLI tests' error
paths do.
"""

import importlib
import json

import numpy as np
import pytest

from pymc_dp.cli import main
from pymc_dp.curator.budget import PrivacyBudget
from pymc_dp.curator.data_files import InputFileError
from pymc_dp.curator.release_file import ColumnRelease, ReleaseFile, read_release

COLOURS = ["red", "green", "blue"]
N = 300


@pytest.fixture(scope="module")
def csv_path(tmp_path_factory):
    rng = np.random.default_rng(11)
    colour = rng.choice(COLOURS, size=N, p=[0.5, 0.3, 0.2])
    visits = rng.poisson(3.0, size=N)
    smoker = rng.binomial(1, 0.3, size=N)
    age = np.round(rng.uniform(20, 80, size=N), 1)
    rows = ["colour,visits,smoker,age"] + [
        f"{c},{v},{s},{a}" for c, v, s, a in zip(colour, visits, smoker, age, strict=True)
    ]
    path = tmp_path_factory.mktemp("columns") / "records.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def _release(csv_path, out, *args):
    return main(["release", str(csv_path), "--seed", "4", "--output", str(out), *args])


SEVERAL = [
    "--column", "visits,smoker,age", "--family", "poisson,bernoulli,normal",
    "--bounds", "0", "20", "--bounds", "0", "100", "--epsilon", "1",
]  # fmt: skip


def test_several_columns_one_file_with_the_explicit_split(csv_path, tmp_path, capsys):
    out = tmp_path / "cols.json"
    assert _release(csv_path, out, *SEVERAL, "--epsilon-split", "0.5,0.2,0.3") == 0
    rf = read_release(out, allow_columns=True)
    assert isinstance(rf, ReleaseFile)
    assert rf.columns == ("visits", "smoker", "age") and rf.epsilon == 1.0
    assert [e.release.family for e in rf.releases] == ["poisson", "bernoulli", "normal"]
    assert [e.release.epsilon for e in rf.releases] == [0.5, 0.2, 0.3]
    assert rf["visits"].release.bounds == (0.0, 20.0) and rf["age"].release.bounds == (0, 100)
    assert all(e.release.n == N for e in rf.releases)
    printed = capsys.readouterr().out
    assert "3 release(s)" in printed and "visits 0.5, smoker 0.2, age 0.3" in printed
    with pytest.raises(InputFileError, match="allow_columns=True"):
        read_release(out)


@pytest.mark.parametrize(
    "extra, message",
    [
        ([], "3 columns share --epsilon: give each its part with --epsilon-split"),
        (["--epsilon-split", "0.5,0.5"], "--epsilon-split has 2 part(s) for 3 columns"),
        (["--epsilon-split", "0.5,0.2,0.4"], "--epsilon-split sums to 1.1, not --epsilon 1"),
        (["--epsilon-split", "0.5,0,0.5"], "--epsilon-split parts must each be > 0"),
        (["--epsilon-split", "0.5,a,0.5"], "--epsilon-split takes numbers"),
    ],
)
def test_the_split_must_be_explicit_and_whole(csv_path, tmp_path, capsys, extra, message):
    out = tmp_path / "bad.json"
    assert _release(csv_path, out, *SEVERAL, *extra) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--column", "visits,age", "--family", "poisson,normal", "--bounds", "0", "20",
          "--epsilon", "1", "--epsilon-split", "0.5,0.5"],
         "--bounds is given 1 time(s) for 2 windowed column(s)"),
        (["--column", "visits,age,smoker", "--family", "poisson,normal", "--bounds", "0", "20",
          "--epsilon", "1", "--epsilon-split", "0.5,0.5"],
         "--family gives 2 families for 3 column(s)"),
        (["--column", "visits,visits", "--family", "poisson", "--bounds", "0", "20",
          "--epsilon", "1", "--epsilon-split", "0.5,0.5"],
         "--column lists a column more than once"),
        (["--column", "visits", "--family", "poisson", "--bounds", "0", "20", "--epsilon", "1",
          "--epsilon-split", "1"], "--epsilon-split applies only to several --column"),
        (["--column", "visits,smoker", "--family", "poisson,bernoulli", "--private-bounds", "0",
          "50", "--epsilon", "1", "--epsilon-split", "0.5,0.5"],
         "several --column do not combine with --by or --private-bounds"),
        (["--column", "visits,smoker", "--family", "poison,bernoulli", "--epsilon", "1",
          "--epsilon-split", "0.5,0.5"], "--family 'poison' is not one of"),
    ],
)  # fmt: skip
def test_several_columns_refused_by_name(csv_path, tmp_path, capsys, argv, message):
    assert _release(csv_path, tmp_path / "bad.json", *argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "third, message",
    [
        ("colour", "column 'colour' must hold plain numbers"),  # read from the file
        ("age", "--column age must hold whole numbers"),  # checked by the release itself
    ],
)
def test_a_bad_column_stops_every_release_before_any_noise(
    csv_path, tmp_path, capsys, monkeypatch, third, message
):
    """The third column's records are wrong: no noise is drawn for the first two."""
    drawn = []
    release_module = importlib.import_module(
        "pymc_dp.curator.single"
    )  # the module, not the function
    original = release_module.release_from_totals
    monkeypatch.setattr(
        release_module,
        "release_from_totals",
        lambda *a, **k: drawn.append(1) or original(*a, **k),
    )
    out = tmp_path / "none.json"
    argv = [
        "--column", f"visits,smoker,{third}", "--family", "poisson,bernoulli,bernoulli",
        "--bounds", "0", "20", "--epsilon", "1", "--epsilon-split", "0.4,0.3,0.3",
        "--budget", str(tmp_path / "ledger.json"), "--budget-total", "5",
    ]  # fmt: skip
    assert _release(csv_path, out, *argv) == 2
    assert message in capsys.readouterr().err
    assert drawn == [] and not out.exists() and not (tmp_path / "ledger.json").exists()


def test_several_columns_from_parquet_give_the_same_file(csv_path, tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    parquet = tmp_path / "records.parquet"
    pd.read_csv(csv_path).to_parquet(parquet)
    argv = [*SEVERAL[:-2], "--categories", "red,green,blue", "--epsilon", "1"]
    argv[1], argv[3] = "visits,smoker,age,colour", "poisson,bernoulli,normal,categorical"
    argv += ["--epsilon-split", "0.25,0.25,0.25,0.25"]
    assert _release(csv_path, tmp_path / "a.json", *argv) == 0
    assert _release(parquet, tmp_path / "b.json", *argv) == 0
    a = read_release(tmp_path / "a.json", allow_columns=True)
    b = read_release(tmp_path / "b.json", allow_columns=True)
    assert a == b and a["colour"].labels == tuple(COLOURS)


def test_the_ledger_is_charged_once_for_the_whole_call(csv_path, tmp_path):
    ledger = tmp_path / "ledger.json"
    argv = [*SEVERAL, "--epsilon-split", "0.5,0.2,0.3", "--budget", str(ledger)]
    assert _release(csv_path, tmp_path / "a.json", *argv, "--budget-total", "1.5") == 0
    budget = PrivacyBudget.load(ledger)
    assert budget.ledger == (("records.csv:visits,smoker,age", 1.0),)
    rf = read_release(tmp_path / "a.json", allow_columns=True)
    assert rf.budget["spent"] == 1.0 and rf.budget["releases"] == 1
    assert _release(csv_path, tmp_path / "b.json", *argv) == 2  # 1 + 1 > 1.5
    assert PrivacyBudget.load(ledger).spent == 1.0 and not (tmp_path / "b.json").exists()


def test_labelled_categories_are_released_with_their_public_list(csv_path, tmp_path, capsys):
    out = tmp_path / "colour.json"
    argv = ["--column", "colour", "--family", "categorical", "--categories", "red,green,blue"]
    assert _release(csv_path, out, *argv, "--epsilon", "2") == 0
    rf = read_release(out, allow_columns=True)
    (entry,) = rf.releases
    assert entry.labels == ("red", "green", "blue") and entry.release.family == "categorical"
    assert entry.release.family_params == {"categories": 3}
    assert "categories red,green,blue" in capsys.readouterr().out


@pytest.mark.parametrize(
    "categories, message",
    [
        ("red,green", "value(s) not among the public categories red, green, at data row"),
        ("red,green,red", "--categories lists red more than once"),
        ("red", "--categories needs K >= 2 or at least two labels"),
        ("1", "--categories must be at least 2"),
    ],
)
def test_labels_refused_by_name_never_quoting_a_record(csv_path, tmp_path, capsys, categories,
                                                       message):  # fmt: skip
    argv = ["--column", "colour", "--family", "categorical", "--categories", categories]
    assert _release(csv_path, tmp_path / "c.json", *argv, "--epsilon", "1") == 2
    err = capsys.readouterr().err
    assert message in err
    if categories == "red,green":
        assert "blue" not in err  # the records' own values are never quoted


def test_codes_without_labels_still_write_a_plain_release(csv_path, tmp_path):
    out = tmp_path / "smoker.json"
    assert _release(csv_path, out, "--column", "smoker", "--family", "bernoulli", "--epsilon",
                    "1") == 0  # fmt: skip
    assert "kind" not in json.loads(out.read_text())
    assert read_release(out).family == "bernoulli"


def test_release_file_records_are_checked():
    import pymc as pm

    import pymc_dp as pmdp

    cat = pmdp.release([0, 1, 2, 2], pm.Categorical, categories=3, epsilon=1.0, rng=0)
    with pytest.raises(ValueError, match="labels must name the release's 3 categories"):
        ColumnRelease("c", cat, labels=("a", "b"))
    with pytest.raises(ValueError, match="labels must be distinct"):
        ColumnRelease("c", cat, labels=("a", "b", "a"))
    ber = pmdp.release([0, 1, 1], pm.Bernoulli, epsilon=0.5, rng=0)
    with pytest.raises(ValueError, match="labels apply only to a Categorical release"):
        ColumnRelease("b", ber, labels=("no", "yes"))
    with pytest.raises(ValueError, match="epsilon must be the sum of the releases' epsilon"):
        ReleaseFile((ColumnRelease("c", cat), ColumnRelease("b", ber)), epsilon=1.0)
    rf = ReleaseFile((ColumnRelease("c", cat, labels=("a", "b", "z")),), epsilon=1.0)
    assert ReleaseFile.from_json(rf.to_json()) == rf
    with pytest.raises(ValueError, match="no release of column 'd'"):
        rf["d"]


def test_dry_run_of_several_columns_and_of_groups(capsys):
    argv = ["release", "--dry-run", "--n", "400", "--column", "visits,age", "--family",
            "poisson,normal", "--bounds", "0", "20", "--bounds", "0", "100", "--epsilon", "1",
            "--epsilon-split", "0.25,0.75"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert (
        "dry run: visits poisson release of n = 400 records, window [0, 20], epsilon = 0.25" in out
    )
    assert "dry run: age normal release" in out and "epsilon = 0.75" in out
    assert "in all: epsilon = 1 for the 2 columns" in out
    argv = ["release", "--dry-run", "--family", "bernoulli", "--epsilon", "1", "--by", "site",
            "--groups", "a,b", "--public-sizes", "100,10", "--seed", "1"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "bernoulli releases of 2 groups of 'site'" in out and "parallel composition" in out
    assert "a (n = 100): noise scale 1, noise sd 1.414" in out
    assert "noise sd / range = 0.141" in out  # group b: sqrt(2) over its 10 records


def test_dry_run_by_needs_the_sizes(capsys):
    base = ["release", "--dry-run", "--family", "bernoulli", "--epsilon", "1", "--by", "site",
            "--groups", "a,b"]  # fmt: skip
    with pytest.raises(SystemExit):
        main([*base, "--public-sizes"])
    assert "--dry-run --by needs the group sizes" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*base, "--public-sizes", "3,4", "--n", "7"])
    assert "takes the group sizes from --public-sizes, not --n" in capsys.readouterr().err
    assert main([*base, "--public-sizes", "3"]) == 2
    assert "--public-sizes gives 1 size(s) for the 2 --groups" in capsys.readouterr().err


@pytest.mark.slow
def test_fit_puts_the_labels_in_the_posterior_and_fits_each_column(csv_path, tmp_path, capsys):
    import arviz as az

    out = tmp_path / "both.json"
    argv = ["--column", "colour,smoker", "--family", "categorical,bernoulli", "--categories",
            "red,green,blue", "--epsilon", "2", "--epsilon-split", "1,1"]  # fmt: skip
    assert _release(csv_path, out, *argv) == 0
    fit_dir = tmp_path / "fit"
    fit = ["fit", str(out), "--draws", "200", "--tune", "100", "--chains", "1", "--seed", "2",
           "--no-progress", "--output-dir", str(fit_dir)]  # fmt: skip
    assert main(fit) == 0
    printed = capsys.readouterr().out
    assert "p[red]" in printed and "p[blue]" in printed
    idata = az.from_netcdf(fit_dir / "colour" / "posterior.nc")
    assert idata.posterior["p"].coords["y_category"].values.tolist() == COLOURS
    assert "p[green]" in (fit_dir / "colour" / "summary.csv").read_text()
    assert (fit_dir / "smoker" / "posterior.nc").exists()
    again = [*fit[:-1], str(fit_dir / "smoker"), "--column", "smoker"]
    assert main(again) == 2  # an earlier fit's outputs, no --overwrite
    assert "already holds" in capsys.readouterr().err
    assert main([*fit, "--column", "age"]) == 2
    assert "no release of column 'age'" in capsys.readouterr().err


def test_read_labels_names_rows_and_keeps_declared_labels(tmp_path):
    from pymc_dp.curator.data_files import read_labels

    path = tmp_path / "labels.csv"
    path.write_text("answer\nyes\nnone\n yes\nNA\n")
    assert read_labels(path, "answer", ["yes", "none", "NA"]).tolist() == [0, 1, 0, 2]
    with pytest.raises(
        InputFileError, match=r"1 missing value\(s\), at data row 4 \(file line 5\)"
    ):
        read_labels(path, "answer", ["yes", "none"])
