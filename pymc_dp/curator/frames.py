"""Data frames in, exact integer totals out: one input layer for every engine (via Narwhals).

:func:`pymc_dp.release` and :func:`pymc_dp.release_regression` take, besides NumPy arrays, a
pandas, Polars (eager or lazy) or Dask Series or DataFrame, a DuckDB relation, or any frame that
`Narwhals <https://narwhals-dev.github.io/narwhals/>`_ reads, with ``column=`` (``columns=``
for regression) naming the records. The records reach the per-batch kernel of
:mod:`pymc_dp.curator.exact_sums` as Arrow batches:

* eager frames are cut into batches in memory;
* a Polars ``LazyFrame`` (e.g. ``pl.scan_parquet``) streams through ``collect_batches``;
* a DuckDB relation streams through its Arrow record-batch reader;
* Parquet files, directories and globs stream through ``pyarrow.dataset`` (:func:`parquet_source`);
* a Dask frame is reduced on its cluster: each partition is checked and summed on a worker, and
  only the integer totals (and, for a bad record, the rule and its position) come back.

No lazy input is ever collected whole, and only exact integer totals reach the caller, who
adds the noise once. Engines are optional imports: only the one a caller uses is loaded.
"""

from __future__ import annotations

import glob
import os
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from pymc_dp.curator.data_files import CSV_BATCH, CsvColumn
from pymc_dp.curator.exact_sums import BATCH, BatchTotals, combine_totals

__all__ = ["ParquetSource", "exact_totals", "in_memory_column", "is_frame", "parquet_source"]


class ParquetSource:
    """Parquet files (a file, a directory or a glob) to stream, opened with ``pyarrow.dataset``.

    Built by :func:`parquet_source`; pass it to :func:`pymc_dp.release` like a data frame.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        try:
            import pyarrow.dataset as ds
            import pyarrow.parquet  # noqa: F401  (the dataset's Parquet format needs it)
        except ImportError:
            raise ValueError(
                f"{path}: reading Parquet needs pyarrow; install it with "
                "pip install 'pymc-dp[parquet]' (or pip install pyarrow)"
            ) from None
        text = os.fspath(path)
        if glob.has_magic(text):
            files = sorted(glob.glob(text, recursive=True))
            if not files:
                raise FileNotFoundError(f"{text}: no file matches this pattern")
            source: Any = files
        elif os.path.exists(text):
            source = text
        else:
            raise FileNotFoundError(f"{text}: no such file or directory")
        try:
            self.dataset = ds.dataset(source, format="parquet")
        except Exception as err:  # pyarrow raises several types for damaged files
            raise ValueError(f"{text}: not readable Parquet ({err})") from None
        self.path = text

    @property
    def columns(self) -> list[str]:
        """The column names of the files."""
        return list(self.dataset.schema.names)

    def batches(self, columns: Sequence[str]) -> Iterator[Any]:
        """Arrow record batches of ``columns``, in file order.

        Polars' streaming reader when Polars is installed (measured 2× faster here), else
        pyarrow's dataset scanner.
        """
        import pyarrow as pa

        try:
            import polars as pl
        except ImportError:
            pl = None
        if pl is not None:
            scan = pl.scan_parquet(list(self.dataset.files)).select(list(columns))
            for chunk in scan.collect_batches(chunk_size=BATCH):
                yield from chunk.to_arrow().to_batches()
            return

        # The system allocator: mimalloc's first large allocations in a process cost about
        # 1 s per 10⁷ records (measured), which a one-shot release pays in full.
        yield from self.dataset.to_batches(
            columns=list(columns), batch_size=BATCH, memory_pool=pa.system_memory_pool()
        )


def parquet_source(path: str | os.PathLike) -> ParquetSource:
    """Parquet data to stream into a release: a file, a directory of files, or a glob.

    Examples
    --------
    >>> import pathlib, tempfile, pyarrow as pa, pyarrow.parquet as pq, pymc as pm, pymc_dp
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> for i in range(3):
    ...     pq.write_table(pa.table({"ok": [0, 1, 1, i % 2]}), folder / f"part{i}.parquet")
    >>> rel = pymc_dp.release(parquet_source(folder / "*.parquet"), pm.Bernoulli,
    ...                       column="ok", epsilon=1.0, rng=0)
    >>> rel.n
    12
    """
    return ParquetSource(path)


def is_frame(data: Any) -> bool:
    """Whether ``data`` is a data frame, series, relation or Parquet source (not an array)."""
    if isinstance(data, ParquetSource | CsvColumn) or _is_dask(data):
        return True
    if isinstance(data, np.ndarray | list | tuple | range) or np.isscalar(data):
        return False
    import narwhals.stable.v2 as nw

    try:
        nw.from_native(data, allow_series=True)
    except TypeError:
        return False
    return True


def _is_dask(data: Any) -> bool:
    module = type(data).__module__
    return module.startswith("dask.") or module.startswith("dask_expr")


def exact_totals(
    data: Any,
    kernel: Any,
    columns: Sequence[str],
    *,
    client: Any = None,
) -> tuple[int, tuple[int, ...]]:
    """Run ``kernel.batch_totals`` over every batch of ``columns`` and add the totals exactly.

    Parameters
    ----------
    data
        A data frame, series, DuckDB relation, Dask collection or :class:`ParquetSource`.
    kernel
        A plan with ``batch_totals(values)`` (:class:`~pymc_dp.curator.exact_sums.FamilyPlan`),
        picklable.
    columns
        The columns holding the records; one column gives one-dimensional batches, several
        give ``(rows, columns)`` float batches.
    client
        A ``dask.distributed.Client`` to run a Dask reduction on (default: Dask's current
        scheduler). Only for Dask input.

    Returns
    -------
    n, totals
        Number of records and exact integer totals.

    Raises
    ------
    TypeError, ValueError
        For an unknown input, a missing column, or a bad record (as the kernel words it).
    """
    columns = list(columns)
    if _is_dask(data):
        return combine_totals(_dask_results(data, kernel, columns, client))
    if client is not None:
        raise TypeError(
            f"client applies to Dask input only (got {type(data).__name__}); convert the data "
            "with dask.dataframe.from_pandas or read it with dask.dataframe.read_parquet"
        )
    return combine_totals(_threaded(kernel, _arrow_batches(data, columns), columns))


def _threaded(kernel: Any, batches: Iterator[Any], columns: list[str]) -> Iterator[BatchTotals]:
    """Batch totals in record order, computed on a few threads (NumPy releases the GIL).

    At most two batches per thread are in flight, so memory stays bounded for any n.
    """
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    workers = max(1, min(4, os.cpu_count() or 1))
    if workers == 1:
        for batch in batches:
            yield kernel.batch_totals(_to_numpy(batch, columns))
        return
    pending: deque = deque()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for batch in batches:
            pending.append(pool.submit(lambda b: kernel.batch_totals(_to_numpy(b, columns)), batch))
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def in_memory_column(data: Any, column: str | None) -> npt.NDArray:
    """The records of an eager frame or series as one NumPy array (nulls as NaN).

    For what needs all records at once (Smith's private quantile over gaps sorts them).

    Raises
    ------
    TypeError
        For lazy or distributed input, which is never collected whole.
    """
    import narwhals.stable.v2 as nw

    if isinstance(data, CsvColumn):  # read whole, one batch at a time (checked as it goes)
        return np.concatenate(list(data.batches([column])))
    if not isinstance(data, ParquetSource) and not _is_dask(data):
        frame = nw.from_native(data, allow_series=True)
        if isinstance(frame, nw.Series | nw.DataFrame):
            columns = [column]
            batches = list(_arrow_batches(data, columns))
            if not batches:
                return np.zeros(0)
            return np.concatenate([_to_numpy(b, columns) for b in batches])
    raise TypeError(
        "bounds_candidates='gaps' (Smith's private quantile) needs the records in memory to "
        "sort them; lazy and distributed input is never collected whole: pass "
        "bounds_candidates='linear' or 'log' (counted on any engine), or public bounds=(a, b)"
    )


def _check_columns(names: Sequence[str], columns: Sequence[str], where: str) -> None:
    if None in columns:
        raise ValueError(
            f"{where} has the columns {', '.join(map(repr, names))}: pass column= naming the "
            "one that holds the records"
        )
    for column in columns:
        if column not in names:
            raise ValueError(
                f"{where} has no column {column!r}; the columns are "
                f"{', '.join(map(repr, names))}: pass column= (columns= for regression) with "
                "one of them"
            )


def _arrow_batches(data: Any, columns: list[str]) -> Iterator[Any]:
    """Arrow record batches (or arrays) of ``columns`` from a local engine, streamed."""
    if isinstance(data, ParquetSource):
        _check_columns(data.columns, columns, data.path)
        yield from data.batches(columns)
        return
    if isinstance(data, CsvColumn):
        yield from data.batches(columns, min(BATCH, CSV_BATCH))
        return
    import narwhals.stable.v2 as nw

    frame = nw.from_native(data, allow_series=True)
    if isinstance(frame, nw.Series):
        if len(columns) != 1 or columns[0] not in (frame.name, None):
            raise ValueError(
                f"a Series holds one column, {frame.name!r}; drop column= or pass the frame"
            )
        array = frame.to_arrow()
        for start in range(0, len(array), BATCH):
            yield array.slice(start, BATCH)
        return
    _check_columns(frame.columns, columns, f"the {frame.implementation} frame")
    selected = frame.select(*columns)
    if isinstance(selected, nw.DataFrame):
        yield from selected.to_arrow().to_batches(max_chunksize=BATCH)
        return
    native = selected.to_native()
    if selected.implementation is nw.Implementation.POLARS:
        for chunk in native.collect_batches(chunk_size=BATCH):
            yield from chunk.to_arrow().to_batches()
    elif selected.implementation is nw.Implementation.DUCKDB:
        yield from native.to_arrow_reader(BATCH)
    else:
        raise TypeError(
            f"lazy {selected.implementation} frames are not streamed yet; pass a Polars, "
            "DuckDB or Dask frame, or Parquet files (pymc_dp.curator.frames.parquet_source)"
        )


def _to_numpy(batch: Any, columns: list[str]) -> npt.NDArray:
    """One batch as NumPy: 1-D in the column's own type, or 2-D floats; nulls become NaN."""
    if isinstance(batch, np.ndarray):  # a CSV column's batch: float64 already
        return batch
    import pyarrow as pa

    arrays = [batch] if isinstance(batch, pa.Array | pa.ChunkedArray) else batch.columns
    out = []
    for array in arrays:
        if array.null_count and (
            pa.types.is_integer(array.type) or pa.types.is_boolean(array.type)
        ):
            array = array.cast(pa.float64())
        if pa.types.is_floating(array.type) and array.null_count:
            array = array.fill_null(float("nan"))
        out.append(array.to_numpy(zero_copy_only=False))
    if len(out) == 1:
        return out[0]
    if any(o.dtype.kind not in "biuf" for o in out):
        return np.column_stack(out).astype(object)
    return np.column_stack([o.astype(np.float64) for o in out])


def _pandas_numpy(column: Any) -> npt.NDArray:
    """A pandas column as NumPy without a copy where possible; nulls become NaN.

    Arrow-backed columns (``dtype_backend="pyarrow"``) take the streamed batches' conversion
    (:func:`_to_numpy`): a view of the Arrow buffer when there is no null.
    """
    if isinstance(column.dtype, np.dtype):
        return column.to_numpy()
    if getattr(column.dtype, "pyarrow_dtype", None) is not None:
        return _to_numpy(column.array.__arrow_array__(), [column.name])
    if column.dtype.kind in "biuf":  # nullable extension types: Int64, boolean, Float64
        if column.hasnans:
            return column.to_numpy(dtype=np.float64, na_value=np.nan)
        return column.to_numpy(dtype=column.dtype.numpy_dtype)
    return column.to_numpy(dtype=object)


def _partition_results(part: Any, kernel: Any, columns: list[str]) -> list[BatchTotals]:
    """On a Dask worker: check and sum one pandas partition, batch by batch."""
    if hasattr(part, "to_frame") and not hasattr(part, "columns"):
        part = part.to_frame()
    arrays = [_pandas_numpy(part[c]) for c in columns]
    if len(arrays) == 1:
        values = arrays[0]
    elif any(a.dtype.kind not in "biuf" for a in arrays):
        values = np.column_stack(arrays).astype(object)
    else:
        values = np.column_stack([a.astype(np.float64) for a in arrays])
    results = [
        kernel.batch_totals(values[start : start + BATCH])
        for start in range(0, values.shape[0], BATCH)
    ]
    return results or [BatchTotals(0, ())]


def _dask_results(data: Any, kernel: Any, columns: list[str], client: Any) -> Iterator[BatchTotals]:
    import dask

    if hasattr(data, "to_frame") and not hasattr(data, "columns"):
        if len(columns) != 1 or columns[0] not in (data.name, None):
            raise ValueError(
                f"a Series holds one column, {data.name!r}; drop column= or pass the frame"
            )
        data = data.to_frame()
    _check_columns(list(data.columns), columns, "the Dask frame")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        parts = data[columns].to_delayed()
    tasks = [dask.delayed(_partition_results)(part, kernel, columns) for part in parts]
    if client is not None:
        per_partition = client.gather(client.compute(tasks))
    else:
        per_partition = dask.compute(*tasks)
    for results in per_partition:
        yield from results
