"""``pymc-dp release --family marginals`` and ``pymc-dp fit`` on a marginal release."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pymc_dp.cli import main
from pymc_dp.curator.budget import PrivacyBudget
from pymc_dp.curator.marginals import read_marginal_release

N = 240
LEVELS = {"sex": ["m", "f"], "dept": ["A", "B", "C"], "admit": ["yes", "no"]}
MARGINALS = [("sex", "dept"), ("dept", "admit"), ("sex",)]


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    rng = np.random.default_rng(4)
    rows = [
        {c: labels[rng.integers(len(labels))] for c, labels in LEVELS.items()} for _ in range(N)
    ]
    path = tmp_path_factory.mktemp("marginals") / "records.csv"
    lines = ["id,sex,dept,admit"] + [
        f"{i}, {r['sex']},{r['dept']},{r['admit']}" for i, r in enumerate(rows)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path, rows


ARGS = [
    "--family", "marginals", "--column", "sex,dept,admit", "--marginals", "sex:dept,dept:admit,sex",
    "--levels", "sex=m,f", "dept=A,B,C", "admit=yes,no",
]  # fmt: skip


def _release(path, out, *args):
    return main(["release", str(path), "--output", str(out), *args])


def test_release_writes_the_tables_of_the_file(records, tmp_path, capsys):
    """At ε = 10⁶ the discrete Laplace noise (scale 6e-6) is zero: the tables are the counts."""
    path, rows = records
    out = tmp_path / "rel.json"
    assert _release(path, out, *ARGS, "--epsilon", "1e6") == 0
    rel = read_marginal_release(out)
    assert rel.n == N and rel.mechanism == "discrete-laplace"
    assert rel.columns == ("sex", "dept", "admit")
    assert [tuple(m) for m in rel.marginals] == MARGINALS
    assert rel.noise_scale == pytest.approx(2 * len(MARGINALS) / 1e6)  # L1 sensitivity 2M
    expected = []
    for m in MARGINALS:
        for cell in itertools.product(*(LEVELS[c] for c in m)):
            expected.append(sum(all(r[c] == v for c, v in zip(m, cell)) for r in rows))
    np.testing.assert_array_equal(rel.y, expected)
    assert "marginal tables sex:dept, dept:admit, sex of sex, dept, admit, n = 240" in (
        capsys.readouterr().out
    )


def test_release_from_parquet_is_the_release_from_csv(records, tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    path, _ = records
    parquet = tmp_path / "records.parquet"
    pd.read_csv(path, dtype=str).to_parquet(parquet)
    assert _release(path, tmp_path / "a.json", *ARGS, "--epsilon", "1e6") == 0
    assert _release(parquet, tmp_path / "b.json", *ARGS, "--epsilon", "1e6") == 0
    a, b = (read_marginal_release(tmp_path / f) for f in ("a.json", "b.json"))
    np.testing.assert_array_equal(a.y, b.y)


def test_release_charges_the_ledger_once(records, tmp_path):
    path, _ = records
    ledger = tmp_path / "ledger.json"
    args = [*ARGS, "--epsilon", "1", "--budget", str(ledger)]
    assert _release(path, tmp_path / "a.json", *args, "--budget-total", "1.5") == 0
    assert PrivacyBudget.load(ledger).spent == 1.0
    assert _release(path, tmp_path / "b.json", *args) == 2
    assert not (tmp_path / "b.json").exists() and PrivacyBudget.load(ledger).spent == 1.0


@pytest.mark.parametrize(
    "change, message",
    [
        ({"--levels": ["sex=m,f", "dept=A,B", "admit=yes,no"]},
         "column 'dept' has"),
        ({"--levels": ["sex=m,f", "dept=A,B,C"]},
         "--levels must declare the public labels of admit"),
        ({"--levels": ["sex=m", "dept=A,B,C", "admit=yes,no"]},
         "--levels takes COLUMN=L1,L2,... for each --column, at least 2 public labels"),
        ({"--marginals": ["sex:age"]}, "--marginals takes tables like a:b,b:c"),
        ({"--column": ["sex,sex"]}, "--column must name distinct columns"),
    ],
)  # fmt: skip
def test_release_refusals_name_the_flag(records, tmp_path, capsys, change, message):
    path, _ = records
    args = [*ARGS, "--epsilon", "1"]
    for flag, values in change.items():
        i = args.index(flag)
        width = 3 if flag == "--levels" else 1
        args[i + 1 : i + 1 + width] = values
    out = tmp_path / "bad.json"
    assert _release(path, out, *args) == 2
    err = capsys.readouterr().err
    assert message in err and not out.exists()


def test_marginal_flags_need_the_marginals_family(records, tmp_path, capsys):
    path, _ = records
    with pytest.raises(SystemExit) as stop:
        _release(path, tmp_path / "x.json", "--family", "bernoulli", "--column", "sex",
                 "--epsilon", "1", "--marginals", "sex")  # fmt: skip
    assert stop.value.code == 2
    assert "--marginals apply only with --family marginals" in capsys.readouterr().err


def test_fit_writes_posterior_summary_and_synthetic_sets(records, tmp_path, capsys):
    path, _ = records
    rel_path = tmp_path / "rel.json"
    assert _release(path, rel_path, *ARGS, "--epsilon", "1") == 0
    out = tmp_path / "fit"
    args = ["fit", str(rel_path), "--output-dir", str(out), "--draws", "60", "--tune", "60",
            "--chains", "1", "--seed", "2", "--no-progress", "--synthetic", "2"]  # fmt: skip
    assert main(args) == 0
    assert {p.name for p in out.iterdir()} == {
        "posterior.nc",
        "summary.csv",
        "synthetic_1.csv",
        "synthetic_2.csv",
    }
    import pandas as pd

    summary = pd.read_csv(out / "summary.csv", index_col=0)
    assert len(summary) == read_marginal_release(rel_path).domain.n_params
    assert "theta[sex=f, dept=B]" in summary.index
    frame = pd.read_csv(out / "synthetic_1.csv", dtype=str)
    assert list(frame.columns) == ["sex", "dept", "admit"] and len(frame) == N
    assert all(set(frame[c]) <= set(LEVELS[c]) for c in LEVELS)
    assert "from the marginal release (n = 240" in capsys.readouterr().out
    # --prior does not apply; --synthetic needs a marginal release
    assert main([*args[:3], str(tmp_path / "fit2"), "--prior", "a=1"]) == 2
    assert "--prior does not apply to a marginal release" in capsys.readouterr().err
