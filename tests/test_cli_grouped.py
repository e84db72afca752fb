"""``pymc-dp release --by`` then ``pymc-dp fit`` on the grouped file (partial pooling)."""

import json

import numpy as np
import pytest

from pymc_dp.cli import main
from pymc_dp.curator.release_file import read_release
from pymc_dp.curator.release_set import ReleaseSet

SITES = ["north", "south", "east"]
P_SITE = {"north": 0.15, "south": 0.5, "east": 0.8}


@pytest.fixture(scope="module")
def csv_path(tmp_path_factory):
    rng = np.random.default_rng(99)
    sizes = {"north": 150, "south": 220, "east": 90}
    rows = ["id,site,success"]
    i = 0
    for site in SITES:
        for value in rng.binomial(1, P_SITE[site], size=sizes[site]):
            rows.append(f"{i},{site},{value}")
            i += 1
    path = tmp_path_factory.mktemp("grouped") / "records.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def _release(csv_path, out, *extra):
    return main(
        [
            "release", str(csv_path), "--column", "success", "--family", "bernoulli",
            "--epsilon", "1", "--by", "site", "--groups", ",".join(SITES), "--seed", "5",
            "--output", str(out), *extra,
        ]
    )  # fmt: skip


def test_release_by_writes_one_grouped_file(csv_path, tmp_path, capsys):
    out = tmp_path / "grouped.json"
    assert _release(csv_path, out, "--public-sizes") == 0
    rs = read_release(out, allow_grouped=True)
    assert isinstance(rs, ReleaseSet)
    assert rs.groups == tuple(SITES) and rs.n.tolist() == [150, 220, 90] and rs.by == "site"
    assert json.loads(out.read_text())["total_epsilon"] == 1.0
    printed = capsys.readouterr().out
    assert "3 groups" in printed and "epsilon = 1 for the whole set" in printed


def test_release_by_checks_declared_sizes(csv_path, tmp_path, capsys):
    assert _release(csv_path, tmp_path / "a.json", "--public-sizes", "150,220,90") == 0
    assert _release(csv_path, tmp_path / "b.json", "--public-sizes", "150,221,90") == 2
    assert "declared public size of group 'south'" in capsys.readouterr().err
    assert not (tmp_path / "b.json").exists()


def test_release_by_refuses_unknown_keys_and_missing_flags(csv_path, tmp_path, capsys):
    code = main(
        [
            "release", str(csv_path), "--column", "success", "--family", "bernoulli",
            "--epsilon", "1", "--by", "site", "--groups", "north,south", "--public-sizes",
            "--seed", "5", "--output", str(tmp_path / "c.json"),
        ]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "not among groups" in err and "east" not in err
    assert "data row 371)" in err  # after 150 north and 220 south records
    with pytest.raises(SystemExit):
        _release(csv_path, tmp_path / "d.json")  # no --public-sizes
    assert "--public-sizes" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(
            [
                "release", str(csv_path), "--column", "success", "--family", "bernoulli",
                "--epsilon", "1", "--groups", "a,b", "--output", str(tmp_path / "e.json"),
            ]
        )  # fmt: skip
    assert "apply only with --by" in capsys.readouterr().err


@pytest.mark.slow
def test_fit_on_a_grouped_file_is_partially_pooled(csv_path, tmp_path, capsys):
    """ε = 1 on 90–220 records per site: each site's 94 % interval covers its true p."""
    rel = tmp_path / "grouped.json"
    assert _release(csv_path, rel, "--public-sizes") == 0
    out = tmp_path / "fit"
    code = main(
        [
            "fit", str(rel), "--draws", "500", "--tune", "500", "--chains", "2", "--seed", "3",
            "--no-progress", "--output-dir", str(out),
        ]
    )  # fmt: skip
    printed = capsys.readouterr().out
    assert code == 0
    assert {p.name for p in out.iterdir()} == {
        "posterior.nc", "summary.csv", "posterior.png", "trace.png",
    }  # fmt: skip
    assert "Partially pooled" in printed and "per group" in printed
    for site in SITES:
        assert site in printed
    import arviz as az

    idata = az.from_netcdf(out / "posterior.nc")
    p = idata.posterior["p"]
    assert list(p["group"].values) == SITES
    lo, hi = p.quantile(0.03, ("chain", "draw")).values, p.quantile(0.97, ("chain", "draw")).values
    truth = np.array([P_SITE[s] for s in SITES])
    assert np.all((lo < truth) & (truth < hi)), (lo, hi)
    assert json.loads(idata.attrs["pymc_dp_release_y"])["groups"] == SITES


def test_release_by_charges_the_ledger_once(csv_path, tmp_path):
    ledger = tmp_path / "ledger.json"
    out = tmp_path / "g.json"
    code = _release(csv_path, out, "--public-sizes", "--budget", str(ledger), "--budget-total", "2")
    assert code == 0
    saved = json.loads(ledger.read_text())
    assert [cost for _, cost in saved["ledger"]] == [1.0]
    assert read_release(out, allow_grouped=True).budget["spent"] == 1.0
