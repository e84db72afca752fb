"""Releases from data frames, lazy scans, DuckDB and a Dask cluster: the same exact statistic.

Every family and the regression release are computed from the same records through NumPy,
pandas, Polars (eager and a lazy Parquet scan), DuckDB and a Dask ``LocalCluster`` with 2
workers and several partitions (in shuffled order too): the integer totals, and so the
statistic and the release with the same noise seed, agree bit for bit.
"""

import numpy as np
import pymc as pm
import pytest

import pymc_dp as pmdp
from pymc_dp.curator.exact_sums import FamilyPlan
from pymc_dp.curator.frames import exact_totals, parquet_source
from pymc_dp.families import get_family

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pl = pytest.importorskip("polars")
duckdb = pytest.importorskip("duckdb")
dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

N = 3001  # not a multiple of any partition size
RNG = np.random.default_rng(20261123)

# (name, PyMC class, records, release options): windows cut some records out.
FAMILIES = [
    ("bernoulli", pm.Bernoulli, RNG.integers(0, 2, N), {}),
    ("binomial", pm.Binomial, RNG.integers(0, 6, N), {"trials": 5}),
    ("categorical", pm.Categorical, RNG.integers(0, 4, N), {"categories": 4}),
    ("exponential", pm.Exponential, RNG.exponential(0.5, N), {"bounds": (0.1, 1.5)}),
    ("gamma", pm.Gamma, RNG.gamma(2.0, 0.5, N), {"alpha": 2.0, "bounds": (0.0, 3.0)}),
    ("poisson", pm.Poisson, RNG.poisson(4.0, N), {"bounds": (1, 9)}),
    ("geometric", pm.Geometric, RNG.geometric(0.3, N), {"bounds": (1, 12)}),
    ("normal", pm.Normal, RNG.normal(0.3, 1.2, N), {"bounds": (-2.5, 3.1)}),
    ("normal_sigma", pm.Normal, RNG.normal(0.3, 1.2, N), {"bounds": (-2.5, 3.1), "sigma": 1.2}),
    ("lognormal", pm.LogNormal, RNG.lognormal(0.0, 0.8, N), {"bounds": (0.2, 6.0)}),
]
IDS = [case[0] for case in FAMILIES]


@pytest.fixture(scope="module")
def client():
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as dask_client,
    ):
        yield dask_client


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """One pandas frame and one Parquet file (row groups of 500) holding every family's column."""
    frame = pd.DataFrame({name: x for name, _, x, _ in FAMILIES})
    path = tmp_path_factory.mktemp("frames") / "records.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=500)
    return frame, path


def _engines(frame, path, client):
    """Each engine's view of the same records, with the client to pass (if any)."""
    shuffled = frame.sample(frac=1.0, random_state=1)
    con = duckdb.connect()
    return {
        "pandas": (frame, None),
        "polars": (pl.from_pandas(frame), None),
        "polars_scan": (pl.scan_parquet(path), None),
        "parquet_source": (parquet_source(path), None),
        "duckdb": (con.sql(f"select * from read_parquet('{path}')"), None),
        "dask": (dd.from_pandas(frame, npartitions=4), client),
        "dask_shuffled": (dd.from_pandas(shuffled, npartitions=7, sort=False), client),
    }


@pytest.mark.parametrize(("name", "dist", "x", "options"), FAMILIES, ids=IDS)
def test_every_engine_gives_the_same_statistic_bit_for_bit(name, dist, x, options, tables, client):
    frame, path = tables
    reference = pmdp.release(x, dist, epsilon=1.0, rng=7, **options)
    params = {k: v for k, v in options.items() if k != "bounds"}
    fam = get_family(dist, **params)
    plan = FamilyPlan.for_release(fam, options.get("bounds"))
    totals = exact_totals(frame, plan, [name])
    for engine, (data, dask_client) in _engines(frame, path, client).items():
        rel = pmdp.release(
            data, dist, epsilon=1.0, column=name, client=dask_client, rng=7, **options
        )
        assert rel == reference, engine
        assert exact_totals(data, plan, [name], client=dask_client) == totals, engine
    assert reference.n == N and (reference.record_quantum is None) == (not fam.needs_bounds)


def test_exact_sums_do_not_depend_on_the_order_of_the_records():
    x = RNG.normal(0.0, 1.0, 10_000)
    plan = FamilyPlan.for_release(get_family(pm.Normal), (-3.0, 3.0))
    forward = exact_totals(pd.Series(x, name="x"), plan, ["x"])
    backward = exact_totals(pd.Series(x[::-1].copy(), name="x"), plan, ["x"])
    assert forward == backward
    s = plan.statistic(forward[1])
    inside = x[(x >= -3) & (x <= 3)]
    # Each record moves by at most q/2 = 2**-30 on the grid: the sums by at most n·3q.
    np.testing.assert_allclose(s, [inside.sum(), (inside**2).sum()], rtol=0, atol=1e-4)


def test_regression_is_the_same_from_every_engine(tmp_path, client):
    rng = np.random.default_rng(11)
    x = rng.uniform(-1, 1, size=(N, 2))
    y = np.clip(x @ [0.5, -0.2] + 0.1 * rng.standard_normal(N), -2, 2)
    frame = pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "y": y})
    path = tmp_path / "regression.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=700)
    options = dict(x_bounds=[(-1, 1)] * 2, y_bounds=(-2, 2), epsilon=1.0, moments_share=0.2)
    reference = pmdp.release_regression(x, y, rng=3, **options)
    for engine, (data, dask_client) in _engines(frame, path, client).items():
        rel = pmdp.release_regression(
            data, columns=["a", "b", "y"], client=dask_client, rng=3, **options
        )
        assert np.array_equal(rel.value, reference.value), engine
        assert np.array_equal(rel.fourth_moments.value, reference.fourth_moments.value), engine
        assert rel.record_quantum == reference.record_quantum and rel.n == N
    again = pmdp.RegressionRelease.from_json(reference.to_json())
    assert again.record_quantum == reference.record_quantum


def test_a_bad_record_is_named_by_its_position_in_the_whole_column(client):
    x = RNG.exponential(0.5, 1000)
    x[[250, 900]] = -1.0
    frame = pd.DataFrame({"w": x})
    expected = "2 record(s) (the first at index 250) lie outside"
    for data, dask_client in (
        (frame, None),
        (pl.from_pandas(frame).lazy(), None),
        (dd.from_pandas(frame, npartitions=5), client),
    ):
        with pytest.raises(ValueError, match=r"exponential domain") as info:
            pmdp.release(
                data,
                pm.Exponential,
                epsilon=1.0,
                column="w",
                bounds=(0, 2),
                rng=0,
                client=dask_client,
            )
        assert expected in str(info.value) and "-1" not in str(info.value)
    assert pmdp.release(
        frame, pm.Exponential, epsilon=1.0, column="w", bounds=(0, 2), clamp=True, rng=0
    ).clamped


def test_missing_values_and_wrong_columns_stop_the_release():
    frame = pl.DataFrame({"k": [1, 0, None, 1, None]})
    with pytest.raises(
        ValueError, match=r"column 'k' has 2 record\(s\) \(the first at index 2\) missing"
    ):
        pmdp.release(frame.lazy(), pm.Bernoulli, epsilon=1.0, column="k", rng=0)
    with pytest.raises(ValueError, match="no column 'kk'; the columns are 'k'"):
        pmdp.release(frame, pm.Bernoulli, epsilon=1.0, column="kk", rng=0)
    with pytest.raises(ValueError, match="pass column="):
        pmdp.release(frame, pm.Bernoulli, epsilon=1.0, rng=0)
    with pytest.raises(TypeError, match="must hold numbers or booleans"):
        pmdp.release(pl.DataFrame({"k": ["a", "b"]}), pm.Bernoulli, epsilon=1.0, column="k", rng=0)
    with pytest.raises(TypeError, match="column applies to data frames"):
        pmdp.release(np.array([0, 1]), pm.Bernoulli, epsilon=1.0, column="k", rng=0)
    with pytest.raises(TypeError, match="needs the records in memory"):
        pmdp.release(
            pl.DataFrame({"x": [1.0, 2.0]}).lazy(), pm.Exponential, epsilon=1.0, column="x",
            bounds="private", bounds_range=(0, 10), bounds_candidates="gaps", rng=0,
        )  # fmt: skip


def test_private_bounds_from_an_eager_frame_match_the_array():
    x = RNG.exponential(0.5, 2000)
    options = dict(epsilon=2.0, bounds="private", bounds_range=(0.0, 20.0), rng=4)
    assert pmdp.release(pd.DataFrame({"x": x}), pm.Exponential, column="x", **options) == (
        pmdp.release(x, pm.Exponential, **options)
    )


@pytest.mark.parametrize(
    ("name", "search", "kind"),
    [("normal", (-10.0, 10.0), "linear"), ("lognormal", (0.01, 100.0), "log"),
     ("poisson", (0, 50), "log")],
)  # fmt: skip
def test_private_window_counts_are_the_same_from_every_engine(tables, client, name, search, kind):
    """The private window's candidate counts run on every engine (lazy and Dask included), so a
    seeded study's window and release agree bit for bit with the array's."""
    from pymc_dp.curator.private_window import count_below

    frame, path = tables
    _, dist, x, options = next(case for case in FAMILIES if case[0] == name)
    fam = get_family(dist, **{k: v for k, v in options.items() if k != "bounds"})
    expected = count_below(
        None, fam, kind, search, records=fam.validate_data(x), column=None, client=None,
        clamp=False, name="x",
    )  # fmt: skip
    options = {k: v for k, v in options.items() if k != "bounds"}
    settings = dict(
        epsilon=2.0, bounds="private", bounds_range=search, bounds_candidates=kind, **options
    )
    reference = pmdp.release(x, dist, rng=5, **settings)
    assert reference.bounds_mechanism == f"{kind}-float"
    for engine, (data, engine_client) in _engines(frame, path, client).items():
        n, _, below = count_below(
            data, fam, kind, search, records=None, column=name, client=engine_client,
            clamp=False, name=name,
        )  # fmt: skip
        assert n == expected[0] and np.array_equal(below, expected[2]), engine
        got = pmdp.release(data, dist, column=name, client=engine_client, rng=5, **settings)
        assert got == reference, engine
    # A real release chooses with OpenDP from the same counts, on the cluster too.
    data, engine_client = _engines(frame, path, client)["dask"]
    vetted = pmdp.release(data, dist, column=name, client=engine_client, **settings)
    assert vetted.bounds_mechanism == f"{kind}-opendp" and vetted.n == N
    assert set(vetted.bounds) <= set(expected[1]) | {float(np.floor(b)) for b in expected[1]} | {
        float(np.ceil(b)) for b in expected[1]
    }


def test_the_release_records_its_public_record_quantum_and_round_trips():
    rel = pmdp.release(
        RNG.exponential(0.5, 100), pm.Exponential, epsilon=1.0, bounds=(0, 1.5), rng=0
    )
    assert rel.record_quantum == 2.0**-41 and rel.quantum is None  # a study: no statistic quantum
    assert pmdp.Release.from_json(rel.to_json()) == rel
    counts = pmdp.release([0, 1], pm.Bernoulli, epsilon=1.0, rng=0)
    assert counts.to_dict()["record_quantum"] is None
    with pytest.raises(ValueError, match="power of two"):
        pmdp.Release.from_dict({**rel.to_dict(), "record_quantum": 0.3})
    # Format 1 files (before the vetted mechanisms) wrote the record grid step as "quantum".
    old = {k: v for k, v in rel.to_dict().items() if k in FORMAT_1_FIELDS}
    old.update(format_version=1, mechanism="laplace", quantum=rel.record_quantum)
    back = pmdp.Release.from_dict(old)
    assert back.record_quantum == rel.record_quantum and back.quantum is None


FORMAT_1_FIELDS = (
    "value",
    "n",
    "epsilon",
    "sensitivity",
    "bounds",
    "family",
    "family_params",
    "bounds_epsilon",
    "clamped",
)


@pytest.mark.parametrize(("name", "dist", "x", "options"), FAMILIES, ids=IDS)
def test_vetted_noise_gets_the_same_rounded_total_from_every_engine(
    name, dist, x, options, tables, client, monkeypatch
):
    """The integer total that OpenDP's noise is added to is the same from every input."""
    import pymc_dp.curator.noise as release_noise

    seen = []
    monkeypatch.setattr(
        release_noise,
        "discrete_laplace_mechanism",
        lambda total, **kwargs: seen.append((np.array(total).tolist(), kwargs)) or total,
    )
    frame, path = tables
    reference = pmdp.release(x, dist, epsilon=1.0, **options)
    for engine, (data, dask_client) in _engines(frame, path, client).items():
        rel = pmdp.release(data, dist, epsilon=1.0, column=name, client=dask_client, **options)
        assert rel == reference, engine
    assert all(call == seen[0] for call in seen) and len(seen) > 1
    assert reference.mechanism == "discrete-laplace" and reference.quantum is not None


def test_cli_streams_parquet_files_directories_and_globs_and_uses_a_scheduler(tmp_path, client):
    from pymc_dp.cli import main
    from pymc_dp.curator.release_file import read_release

    x = RNG.poisson(3.0, N)
    folder = tmp_path / "parts"
    folder.mkdir()
    for i, part in enumerate(np.array_split(x, 3)):
        pq.write_table(pa.table({"visits": part}), folder / f"part{i}.parquet")
    pq.write_table(pa.table({"visits": x}), tmp_path / "all.parquet")
    common = ["--column", "visits", "--family", "poisson", "--bounds", "0", "8", "--epsilon", "1"]
    releases = []
    for i, data in enumerate(
        [tmp_path / "all.parquet", folder, str(folder / "*.parquet"), folder, folder]
    ):
        out = tmp_path / f"r{i}.json"
        extra = ["--scheduler", client.scheduler.address] if i == 4 else []
        assert main(["release", str(data), *common, "--seed", "1", "-o", str(out), *extra]) == 0
        releases.append(read_release(out))
    assert all(rel == releases[0] for rel in releases)
    # The command line releases the window count by default (issue 36): counted from Parquet
    # as from the array.
    assert releases[0] == pmdp.release(
        x, pm.Poisson, epsilon=1.0, bounds=(0, 8), count_share="auto", rng=1
    )

    # Grouped releases stream the records and keys together, here or on the cluster.
    site = np.array(["a", "b"], dtype=object)[RNG.integers(0, 2, N)]
    pq.write_table(pa.table({"visits": x, "site": site}), tmp_path / "sites.parquet")
    grouped = []
    for i, extra in enumerate([[], ["--scheduler", client.scheduler.address]]):
        out = tmp_path / f"g{i}.json"
        by = ["--by", "site", "--groups", "a,b", "--public-sizes"]
        args = ["release", str(tmp_path / "sites.parquet"), *common, "--seed", "2", *by]
        assert main([*args, "-o", str(out), *extra]) == 0
        grouped.append(read_release(out, allow_grouped=True))
    # The command line releases each group's window count by default.
    expected = pmdp.release_grouped(
        x, pm.Poisson, by=site, groups=["a", "b"], sizes="public", epsilon=1.0, bounds=(0, 8),
        count_share="auto", rng=2,
    )  # fmt: skip
    for rs in grouped:
        assert rs.groups == expected.groups
        assert all(rs[key] == expected[key] for key in expected.groups)


@pytest.mark.parametrize(
    ("name", "keys"),
    [("poisson", "text"), ("normal", "integer"), ("categorical", "text")],
)
def test_grouped_releases_are_the_same_from_every_engine(tmp_path, client, name, keys):
    """Issue 16: group-by releases run on the engine, one pass, per-group exact totals."""
    _, dist, x, options = next(case for case in FAMILIES if case[0] == name)
    codes = RNG.integers(0, 3, N)
    groups = ["north", "south", "west"] if keys == "text" else [10, 20, 30]
    by = np.array(groups, dtype=object)[codes]
    frame = pd.DataFrame({"x": x, "site": by if keys == "text" else by.astype(np.int64)})
    path = tmp_path / "grouped.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=700)
    settings = dict(epsilon=1.0, groups=groups, sizes="public", **options)
    reference = pmdp.release_grouped(x, dist, by=by, rng=3, **settings)
    for engine, (data, engine_client) in _engines(frame, path, client).items():
        got = pmdp.release_grouped(
            data, dist, column="x", by="site", client=engine_client, rng=3, **settings
        )
        assert got.groups == reference.groups, engine
        for key in groups:
            assert got[key] == reference[key], (engine, key)
    # The array path is the ungrouped release of each group's records.
    for g, key in enumerate(groups):
        part = pmdp.release(x[codes == g], dist, epsilon=1.0, rng=0, **options)
        assert reference[key].n == part.n and reference[key].sensitivity == part.sensitivity


def test_grouped_frames_name_bad_keys_and_records_by_position(client):
    frame = pd.DataFrame({"x": [1, 2, 3, 4, 5, 6], "site": ["a", "b", "a", None, "c", "b"]})
    base = dict(epsilon=1.0, groups=["a", "b"], sizes="public", bounds=(0, 9), rng=0)
    for data, engine_client in (
        (frame, None),
        (pl.from_pandas(frame).lazy(), None),
        (dd.from_pandas(frame, npartitions=3), client),
    ):
        with pytest.raises(ValueError, match=r"1 record\(s\) \(the first at index 3\) with a miss"):
            pmdp.release_grouped(
                data, pm.Poisson, column="x", by="site", client=engine_client, **base
            )
    frame.loc[3, "site"] = "c"
    with pytest.raises(ValueError, match=r"2 record\(s\) \(the first at index 3\) whose key"):
        pmdp.release_grouped(frame, pm.Poisson, column="x", by="site", **base)
    frame["site"] = ["a", "b", "a", "b", "a", "b"]
    frame.loc[4, "x"] = -1
    with pytest.raises(ValueError, match=r"poisson domain.*the first at index 4") as err:
        pmdp.release_grouped(frame, pm.Poisson, column="x", by="site", **base)
    assert "-1" not in str(err.value)
    with pytest.raises(TypeError, match="by= names its column"):
        pmdp.release_grouped(frame, pm.Poisson, column="x", by=frame["site"].to_numpy(), **base)
    with pytest.raises(ValueError, match="pass column="):
        pmdp.release_grouped(frame, pm.Poisson, by="site", **base)


@pytest.mark.parametrize("backend", ["numpy_nullable", "pyarrow"])
def test_arrow_backed_dask_partitions_give_the_same_totals_and_errors(tmp_path, client, backend):
    """Partitions read with ``dtype_backend="pyarrow"`` (or pandas' nullable types) take their
    own conversion: the same totals as the array, and a bad or missing record in a later
    partition is named by its position in the whole column."""
    x = RNG.poisson(4.0, N)
    path = tmp_path / "counts.parquet"
    pq.write_table(pa.table({"k": x, "w": x.astype(float)}), path, row_group_size=500)
    frame = dd.read_parquet(path, split_row_groups=True, dtype_backend=backend)
    assert frame.npartitions > 4 and frame["k"].dtype != np.int64
    options = dict(epsilon=1.0, bounds=(1, 9), rng=5)
    reference = pmdp.release(x, pm.Poisson, **options)
    for column in ("k", "w"):
        rel = pmdp.release(frame, pm.Poisson, column=column, client=client, **options)
        assert rel == reference, column
    for bad, message in ((-3, r"poisson domain"), (None, r"missing")):
        column = pa.array([*x[:2345].tolist(), bad, *x[2346:].tolist()], type=pa.int64())
        pq.write_table(pa.table({"k": column}), path, row_group_size=500)
        frame = dd.read_parquet(path, split_row_groups=True, dtype_backend=backend)
        with pytest.raises(ValueError, match=message) as info:
            pmdp.release(frame, pm.Poisson, column="k", client=client, **options)
        assert "1 record(s) (the first at index 2345)" in str(info.value)
        assert "-3" not in str(info.value)
