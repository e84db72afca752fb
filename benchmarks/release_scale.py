"""The curator at scale: records per second and peak memory of a release from Parquet.

Generates its own Parquet data (exponential records, row groups of 10⁶) for each size, then
runs every method in a fresh subprocess, so that each peak memory (``ru_maxrss``) is its own:

* ``numpy``: read the column whole with pyarrow and ``np.sum`` it (today's path, in memory);
* ``polars_sum``: Polars' own ``scan_parquet(...).select(pl.col("x").sum())`` (streaming);
* ``release_stream``: ``pmdp.release(parquet_source(path), ...)``: pyarrow dataset batches
  through the exact fixed-point kernel on one machine;
* ``release_polars``: ``pmdp.release(pl.scan_parquet(path), ...)``: Polars' streaming batches;
* ``dask_read``: Dask reading the column on the same cluster, ``map_partitions(len).sum()``;
* ``dask_sum``: Dask's own ``ddf["x"].sum().compute()`` on the same cluster and frame;
* ``release_dask``: ``pmdp.release(dd.read_parquet(path), ..., client=)`` on a local Dask
  cluster (2 workers, one thread each), only integer totals coming back;
* ``release_csv``: ``pmdp.release(CsvColumn(path), ...)``: the same records written as a CSV
  file, read and checked in batches of 2**20 records (memory bounded for any n);
* ``cli_csv``: ``pymc-dp release data.csv --column x --family exponential --bounds 0 5
  --epsilon 1 --seed 0 -o ...`` (the command line's path, run in the child's process);
* ``csv_whole``: the CSV path before streaming, ``read_column`` and a release of the array
  (its memory grows with n: not in the default methods).

The three Dask methods read the same frame (``split_row_groups=True``: one partition per row
group) on the same kind of cluster, warmed up by one tiny Parquet read, so that ``dask_sum`` is
the baseline a Dask user would judge ``release_dask`` by and ``dask_read`` the part of it that
is Dask reading Parquet into pandas.

Times exclude interpreter start-up and imports; "CPU s" is the subprocess's user and system
time over the same span (every thread, Dask's workers included: on a shared machine it varies
less than the wall clock); "peak MB" is the subprocess's peak resident memory and "extra MB" that
peak less the resident memory after the imports. With ``--repeat r`` each method runs r times,
each in a fresh process, and the fastest run is kept. The last part times the analyst's fit of
a Poisson release of n = 10² and of n = 10⁸ records.

Usage::

    python benchmarks/release_scale.py --sizes 1e6 1e7 1e8 --repeat 3 --dir /tmp/release_scale
    python benchmarks/release_scale.py --sizes 1e7 --methods release_csv cli_csv --no-fit
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROW_GROUP = 1_000_000
METHODS = [
    "numpy",
    "polars_sum",
    "release_stream",
    "release_polars",
    "dask_read",
    "dask_sum",
    "release_dask",
    "release_csv",
    "cli_csv",
]
CSV = ("release_csv", "cli_csv", "csv_whole")
DASK = ("dask_read", "dask_sum", "release_dask")
BOUNDS = (0.0, 5.0)

_CHILD = r"""
import json, os, resource, sys, tempfile, time
method, path = sys.argv[1], sys.argv[2]
import numpy as np
if method == "numpy":
    import pyarrow.dataset as ds
elif method == "polars_sum":
    import polars as pl
elif method in ("dask_read", "dask_sum"):
    import dask.dataframe as dd
    from distributed import Client, LocalCluster
elif method in ("release_csv", "cli_csv", "csv_whole"):
    # What the command line imports for a CSV release, and nothing else (no Polars, no Dask).
    import pymc as pm
    import pymc_dp as pmdp
    tiny = os.path.join(tempfile.mkdtemp(), "tiny.csv")
    with open(tiny, "w") as handle:
        handle.write("x\n0.5\n1.5\n")
    from pymc_dp.curator.data_files import CsvColumn
    pmdp.release(CsvColumn(tiny, "x"), pm.Exponential, column="x", epsilon=1.0,
                 bounds=(0.0, 5.0), rng=0)
else:
    import pymc as pm
    import pymc_dp as pmdp
    from pymc_dp.curator.frames import parquet_source
    import polars as pl
    import dask.dataframe as dd
    from distributed import Client, LocalCluster
    import pyarrow.dataset, narwhals.stable.v2, pandas as pd
    # Warm-up: the first release imports what it needs lazily; that is not per-record cost.
    pmdp.release(pd.DataFrame({"x": [0.5]}), pm.Exponential, column="x", epsilon=1.0,
                 bounds=(0.0, 5.0), rng=0)
    pmdp.release(pl.DataFrame({"x": [0.5]}).lazy(), pm.Exponential, column="x", epsilon=1.0,
                 bounds=(0.0, 5.0), rng=0)
rss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
base = rss()
client = None
read = lambda p: dd.read_parquet(p, columns=["x"], split_row_groups=True)
if method in ("dask_read", "dask_sum", "release_dask"):
    import pyarrow as pa, pyarrow.parquet as pq
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                           dashboard_address=None, memory_limit=0)
    client = Client(cluster)
    # Warm-up: one tiny Parquet read on the cluster (Dask's Parquet engine loads lazily).
    tiny = os.path.join(tempfile.mkdtemp(), "tiny.parquet")
    pq.write_table(pa.table({"x": [0.5, 1.5]}), tiny)
    if method == "release_dask":
        pmdp.release(read(tiny), pm.Exponential, column="x", epsilon=1.0, bounds=(0.0, 5.0),
                     rng=0, client=client)
    else:
        read(tiny)["x"].sum().compute()
    base = rss()
cpu_start = cpu()
start = time.perf_counter()
kw = dict(epsilon=1.0, bounds=(0.0, 5.0), rng=0)
if method == "numpy":
    x = ds.dataset(path).to_table(columns=["x"]).column("x").to_numpy()
    out = float(np.sum(x))
elif method == "polars_sum":
    out = pl.scan_parquet(path).select(pl.col("x").sum()).collect().item()
elif method == "release_stream":
    out = pmdp.release(parquet_source(path), pm.Exponential, column="x", **kw).n
elif method == "release_polars":
    out = pmdp.release(pl.scan_parquet(path), pm.Exponential, column="x", **kw).n
elif method == "dask_read":
    out = int(read(path)["x"].map_partitions(len).sum().compute())
elif method == "dask_sum":
    out = float(read(path)["x"].sum().compute())
elif method == "release_dask":
    out = pmdp.release(read(path), pm.Exponential, column="x", client=client, **kw).n
elif method == "release_csv":
    from pymc_dp.curator.data_files import CsvColumn
    out = pmdp.release(CsvColumn(path, "x"), pm.Exponential, column="x", **kw).n
elif method == "cli_csv":
    from pymc_dp.cli import main
    target = os.path.join(tempfile.mkdtemp(), "release.json")
    out = main(["release", path, "--column", "x", "--family", "exponential", "--bounds", "0",
                "5", "--epsilon", "1", "--seed", "0", "-o", target])
    assert out == 0
elif method == "csv_whole":
    from pymc_dp.curator.data_files import read_column
    out = pmdp.release(read_column(path, "x"), pm.Exponential, **kw).n
seconds = time.perf_counter() - start
cpu_seconds = cpu() - cpu_start
print(json.dumps({"seconds": seconds, "cpu": cpu_seconds, "peak_mb": rss(),
                  "extra_mb": rss() - base, "load": os.getloadavg()[0]}))
"""


def generate(path: Path, n: int, seed: int = 0) -> None:
    """Write n exponential records to ``path`` (a directory of one file) in row groups."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    schema = pa.schema([("x", pa.float64())])
    with pq.ParquetWriter(path / "part-0.parquet", schema, compression="snappy") as writer:
        for start in range(0, n, ROW_GROUP):
            size = min(ROW_GROUP, n - start)
            writer.write_table(pa.table({"x": rng.exponential(0.5, size)}, schema=schema))


def generate_csv(path: Path, n: int, seed: int = 0) -> None:
    """Write the records of :func:`generate` (same seed, same values) as a CSV file."""
    import numpy as np

    rng = np.random.default_rng(seed)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("x\n")
        for start in range(0, n, ROW_GROUP):
            size = min(ROW_GROUP, n - start)
            handle.write("\n".join(map(repr, rng.exponential(0.5, size).tolist())) + "\n")


def run(method: str, path: Path) -> dict:
    """One run of ``method`` in a fresh process: seconds, CPU seconds, memory, load average."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, method, str(path)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{method} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def analyst_cost(draws: int = 2000) -> dict:
    """Seconds of ``pm.sample`` for Poisson releases of n = 10² to 10⁸ (synthetic statistics).

    The default likelihood is exact at n = 10² and the CLT beyond; the CLT rows show that one
    likelihood costs the same at every n.
    """
    import pymc as pm

    import pymc_dp as pmdp
    from pymc_dp.model.ready_made import build_model

    out = {}
    for n, likelihood in ((10**2, "auto"), (10**2, "clt"), (10**4, "clt"), (10**8, "clt")):
        rel = pmdp.Release(
            value=4.0 * n * 0.98, n=n, epsilon=1.0, sensitivity=10.0, bounds=(0.0, 10.0),
            family="poisson",
        )  # fmt: skip
        model = build_model(rel, {"alpha": 1.0, "beta": 1.0}, likelihood=likelihood)
        times = []
        with model:
            pm.sample(draws=50, tune=50, chains=1, progressbar=False, random_seed=0)  # compile
            for repeat in range(3):  # the least of three: the machine is shared
                start = time.perf_counter()
                pm.sample(
                    draws=draws, tune=500, chains=1, progressbar=False, random_seed=repeat,
                    compute_convergence_checks=False,
                )  # fmt: skip
                times.append(time.perf_counter() - start)
        out[(n, likelihood)] = min(times)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", type=float, default=[1e6, 1e7])
    parser.add_argument("--dir", default="/tmp/release_scale")
    parser.add_argument("--methods", nargs="+", default=METHODS, choices=[*METHODS, "csv_whole"])
    parser.add_argument(
        "--repeat", type=int, default=1, help="fresh-process runs per method; the fastest is kept"
    )
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    parser.add_argument("--no-fit", action="store_true", help="skip the analyst's fit timing")
    args = parser.parse_args()
    root = Path(args.dir)
    rows = []
    try:
        for size in args.sizes:
            n = int(size)
            path = root / f"n{n}"
            if not path.exists():
                start = time.perf_counter()
                generate(path, n)
                print(f"generated {n:.0e} records in {time.perf_counter() - start:.1f} s")
            csv_path = root / f"n{n}.csv"
            if any(m in CSV for m in args.methods) and not csv_path.exists():
                generate_csv(csv_path, n)
            runs: dict[str, list[dict]] = {m: [] for m in args.methods}
            for _ in range(args.repeat):  # interleaved, so that a busy spell hits every method
                for method in args.methods:
                    runs[method].append(run(method, csv_path if method in CSV else path))
            results = {m: min(r, key=lambda x: x["seconds"]) for m, r in runs.items()}
            polars = results.get("polars_sum", {}).get("seconds")
            dask = results.get("dask_sum", {}).get("seconds")
            for method, result in results.items():
                ratio = result["seconds"] / polars if polars else float("nan")
                to_dask = result["seconds"] / dask if dask and method in DASK else float("nan")
                rows.append((n, method, result, ratio, to_dask))
                print(
                    f"n={n:.0e} {method:15s} {result['seconds']:8.2f} s  CPU {result['cpu']:6.2f} s"
                    f"  {n / result['seconds'] / 1e6:8.1f} M rec/s  peak {result['peak_mb']:7.0f} "
                    f"MB  extra {result['extra_mb']:7.0f} MB  x Polars {ratio:5.2f}  x Dask sum "
                    f"{to_dask:5.2f}  load {result['load']:.1f}",
                    flush=True,
                )
            if not args.keep:
                shutil.rmtree(path, ignore_errors=True)
                csv_path.unlink(missing_ok=True)
    finally:
        if not args.keep and root.exists():
            shutil.rmtree(root)
    print(
        "\n| n | method | seconds | CPU s | M records/s | peak MB | extra MB | time / Polars sum "
        "| time / Dask sum | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n, method, r, ratio, to_dask in rows:
        dask_cell = f"{to_dask:.2f}" if to_dask == to_dask else ""
        print(
            f"| {n:.0e} | {method} | {r['seconds']:.2f} | {r['cpu']:.2f} | "
            f"{n / r['seconds'] / 1e6:.1f} | {r['peak_mb']:.0f} | {r['extra_mb']:.0f} | "
            f"{ratio:.2f} | {dask_cell} | {r['load']:.1f} |"
        )
    if not args.no_fit:
        fit = analyst_cost()
        print(
            "\nanalyst's fit (pm.sample, 2000 draws + 500 tune, 1 chain, least of 3) of a Poisson "
            "release: "
            + ", ".join(f"n = {n:.0e} ({lik}): {s:.2f} s" for (n, lik), s in fit.items())
        )


if __name__ == "__main__":
    main()
