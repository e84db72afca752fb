"""The curator's data files: one column of records (or its group keys, or its labels) read in.

Every reader checks what it reads and raises :class:`InputFileError` (a ``ValueError``) with a
message that names the file and says what to fix, so that ``pymc-dp`` can print one line.
Records are read and checked here; nothing in this module prints or stores them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "DATA_FORMATS",
    "CsvColumn",
    "InputFileError",
    "read_column",
    "read_keys",
    "read_labels",
]

DATA_FORMATS = ("csv", "parquet")
"""Formats :func:`read_column` reads."""

_MAX_LISTED = 5
CSV_BATCH = 1 << 18
"""Records per batch of a streamed CSV column: its text fields (Python strings) and the parse
of them cost about 300 bytes a record, so 2**18 keep a batch near 80 MB."""
_MISSING = ("", "na", "nan", "null", "none", "n/a")


class InputFileError(ValueError):
    """A data, release or output file that cannot be used; the message names it and the fix."""


def _data_format(path: Path, file_format: str | None) -> str:
    if file_format is not None:
        if file_format not in DATA_FORMATS:
            raise ValueError(f"file_format must be one of {DATA_FORMATS} (got {file_format!r})")
        return file_format
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in (".parquet", ".pq"):
        return "parquet"
    if ".csv" in suffixes or ".txt" in suffixes:
        return "csv"  # also .csv.gz and other compressed CSV that pandas reads
    raise InputFileError(
        f"{path}: cannot tell the format from the name; use a .csv or .parquet file or give "
        "the format (--format csv|parquet)"
    )


def _read_table_column(path: Path, column: str, file_format: str) -> tuple[Any, Any]:
    """The column's values and the file line (CSV) or row (Parquet) of each, 1-based."""
    if file_format == "parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise InputFileError(
                f"{path}: reading Parquet needs pyarrow; install it with "
                "pip install 'pymc-dp[parquet]' (or pip install pyarrow), or use a CSV file"
            ) from None
        try:
            names = pq.read_schema(path).names
        except Exception as err:  # pyarrow raises several types for a damaged file
            raise InputFileError(f"{path}: not a readable Parquet file ({err})") from None
        _check_column(path, column, names)
        series = pq.read_table(path, columns=[column]).column(column).to_pandas()
        return series, np.arange(1, len(series) + 1)
    return _read_csv_column(path, column)


_COMPRESSED = {".gz": "gzip", ".bz2": "bz2", ".xz": "lzma"}


def _open_text(path: Path) -> Any:
    """The file as text, through the decompressor its last suffix names."""
    module = _COMPRESSED.get(path.suffix.lower())
    if module is None:
        return open(path, encoding="utf-8-sig", newline="")
    import importlib

    return importlib.import_module(module).open(path, "rt", encoding="utf-8-sig", newline="")


def _read_csv_column(path: Path, column: str) -> tuple[Any, Any]:
    """Read one column of a comma-separated file exactly, or stop at the first odd line.

    Every line after the header must hold one record with as many fields as the header: n is
    published exactly, so a blank line, or a line whose field count differs (a thousands
    separator such as ``1,000``, or another delimiter), is never skipped, padded or cut.
    """
    import pandas as pd

    values: list[str] = []
    lines: list[Any] = []
    for chunk, chunk_lines in _csv_chunks(path, column):
        values.extend(chunk)
        lines.append(chunk_lines)
    lines_array = np.concatenate(lines) if lines else np.zeros(0, dtype=np.int64)
    return pd.Series(values, dtype=object), lines_array


def _csv_chunks(
    path: Path, column: str, size: int | None = None
) -> Iterator[tuple[list[str], npt.NDArray[np.int64]]]:
    """The column's fields and their file lines, ``size`` records at a time (all: ``None``).

    The checks of :func:`_read_csv_column` (the header, blank lines, field counts), made as
    the file is read: memory holds one chunk, whatever the file's length.
    """
    import csv

    values: list[str] = []
    lines: list[int] = []
    end = 0
    try:
        with _open_text(path) as handle:
            reader = csv.reader(handle, strict=True)
            header = next(reader, None)
            if header is None:
                raise InputFileError(f"{path}: the file is empty; it needs a header row")
            if not any(field.strip() for field in header):
                raise InputFileError(
                    f"{path}: line 1 is blank; the first line must be the header row"
                )
            _check_column(path, column, header)
            if header.count(column) > 1:
                raise InputFileError(
                    f"{path}: the header names column {column!r} {header.count(column)} times; "
                    "give the columns distinct names"
                )
            index, width = header.index(column), len(header)
            end = reader.line_num
            for row in reader:
                # A quoted field may span lines: the record starts after the previous one.
                line, end = end + 1, reader.line_num
                if not any(field.strip() for field in row):
                    raise InputFileError(
                        f"{path}: line {line} is blank; the release was stopped. n is public, "
                        "so every line after the header must hold one record: remove the line "
                        "if it is not a record, or fill in the record"
                    )
                if len(row) != width:
                    raise InputFileError(
                        f"{path}: line {line} has {len(row)} field(s) but the header has "
                        f"{width}; the release was stopped. Fields are separated by commas: "
                        "write numbers without a thousands separator (1000, not 1,000), quote "
                        "text that holds a comma, and separate fields by commas, not ';' or tabs"
                    )
                values.append(row[index])
                lines.append(line)
                if size is not None and len(values) >= size:
                    yield values, np.asarray(lines, dtype=np.int64)
                    values, lines = [], []
    except csv.Error as err:
        raise InputFileError(f"{path}: not a readable CSV file at line {end + 1} ({err})") from None
    except UnicodeDecodeError:
        raise InputFileError(
            f"{path}: not a UTF-8 text file; expected CSV with a header row"
        ) from None
    except (OSError, EOFError) as err:
        if isinstance(err, FileNotFoundError):
            raise
        raise InputFileError(f"{path}: not a readable CSV file ({err})") from None
    if values or size is None:
        yield values, np.asarray(lines, dtype=np.int64)


class CsvColumn:
    r"""One numeric column of a CSV file, streamed: a data source for :func:`pymc_dp.release`.

    The file is read (and checked as :func:`read_column` checks it) one batch of records at a
    time each time the release passes over it, so memory stays bounded for any number of
    records; the release's exact sums make the result the same, bit for bit, as a release of
    :func:`read_column`'s array.

    Parameters
    ----------
    path
        A CSV file with a header row (``.csv.gz``, ``.csv.bz2``, ``.csv.xz`` too).
    column
        The column holding the records.
    file_format
        ``"csv"``, or ``None`` to tell it from the name (as :func:`read_column`).

    Examples
    --------
    >>> import pathlib, tempfile, pymc as pm, pymc_dp
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "data.csv"
    >>> _ = path.write_text("id,ok\n1,1\n2,0\n3,1\n")
    >>> pymc_dp.release(CsvColumn(path, "ok"), pm.Bernoulli, column="ok", epsilon=1.0, rng=0).n
    3
    """

    def __init__(self, path: str | Path, column: str, *, file_format: str | None = None) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"{self.path}: no such file")
        if _data_format(self.path, file_format) != "csv":
            raise InputFileError(f"{self.path}: not CSV; read Parquet with parquet_source")
        self.column = column
        next(_csv_chunks(self.path, column, 1), None)  # the header and the column, checked now

    @property
    def columns(self) -> list[str]:
        """The one column this source reads."""
        return [self.column]

    def batches(self, columns: Sequence[str | None], size: int = CSV_BATCH) -> Iterator[Any]:
        """The records as float64 arrays of ``size`` records, in file order."""
        import pandas as pd

        if list(columns) not in ([self.column], [None]):
            raise ValueError(
                f"{self.path}: this source reads column {self.column!r} only (got {list(columns)})"
            )
        offset = 0
        chunks = _csv_chunks(self.path, self.column, size)
        for values, lines in chunks:
            numbers, missing, bad = _parse_numbers(pd.Series(values, dtype=object))
            if missing.any() or bad.any() or not np.isfinite(numbers).all():
                # Count every problem in the column, as read_column's message does.
                parts = [(np.zeros(offset), np.zeros(offset, bool), np.zeros(offset, bool))]
                all_lines = [np.zeros(offset, dtype=np.int64), lines]
                parts.append((numbers, missing, bad))
                for more, more_lines in chunks:
                    parts.append(_parse_numbers(pd.Series(more, dtype=object)))
                    all_lines.append(more_lines)
                _check_values(
                    self.path,
                    self.column,
                    *(np.concatenate(p) for p in zip(*parts, strict=True)),
                    np.concatenate(all_lines),
                )
            offset += len(values)
            yield numbers
        if offset == 0:
            raise InputFileError(f"{self.path}: column {self.column!r} has no records")


def _check_column(path: Path, column: str, names: list[str]) -> None:
    if column not in names:
        hint = ""
        if len(names) == 1 and any(sep in names[0] for sep in (";", "\t", "|")):
            hint = (
                "; the header has no comma, but ';', a tab or '|': pymc-dp reads "
                "comma-separated files, so convert the file to commas"
            )
        raise InputFileError(
            f"{path}: no column {column!r}; the columns are {', '.join(map(repr, names))}{hint}"
        )


def _where(lines: npt.NDArray[np.int64] | None, mask: npt.NDArray[np.bool_]) -> str:
    """Where ``mask`` holds: the first data rows (1-based, header not counted) and file lines.

    ``lines`` are the CSV file lines of the records (``None`` for Parquet): a quoted field can
    span lines, so a record's line is not always its data row plus one.
    """
    rows = np.flatnonzero(mask)[:_MAX_LISTED] + 1
    more = ", ..." if mask.sum() > _MAX_LISTED else ""
    plural = "s" if mask.sum() > 1 else ""
    text = f"data row{plural} " + ", ".join(map(str, rows)) + more
    if lines is not None:
        listed = ", ".join(map(str, lines[mask][:_MAX_LISTED]))
        text += f" (file line{plural} {listed}{more})"
    return text


_STOPPED = (
    "the release was stopped. n is public, so no record is dropped, filled or counted around "
    "by pymc-dp: fix the records in the file (with a rule that does not depend on the data) "
    "and run the release again"
)


def read_column(
    path: str | Path, column: str, *, file_format: str | None = None
) -> npt.NDArray[np.float64]:
    r"""Read one numeric column of a CSV or Parquet file exactly, refusing anything doubtful.

    A CSV file is read with the :mod:`csv` module: comma-separated, a header row, then one
    record per line. A blank or whitespace-only line, a line with another number of fields
    than the header, a missing value (empty, ``NA``, ``NaN``, ``null``, ``none``, ``n/a``) or
    a value that is not a plain decimal number stops the reading with an :class:`InputFileError`
    that names the data row (1-based, the header not counted) and, for CSV, the file line (the
    header being line 1). No record is ever skipped,
    so n is exactly the number of lines after the header. Messages never quote a record.

    Parameters
    ----------
    path
        A ``.csv`` (with a header row; compressed ``.csv.gz``, ``.csv.bz2``, ``.csv.xz`` too)
        or ``.parquet`` file.
    column
        Name of the column holding one value per record.
    file_format
        ``"csv"`` or ``"parquet"``; by default from the file name.

    Returns
    -------
    numpy.ndarray
        The records as floats (``true``/``false`` read as 1/0), in file order.

    Raises
    ------
    FileNotFoundError
        If there is no such file.
    InputFileError
        If the format is unknown or pyarrow is missing for Parquet, the column does not exist
        (the message lists the columns), a line is blank or has the wrong number of fields,
        or the column is empty or holds missing, non-numeric or infinite values (the message
        gives the first data rows).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "data.csv"
    >>> _ = path.write_text("id,visits\n1,3\n2,0\n")
    >>> read_column(path, "visits")
    array([3., 0.])
    >>> read_column(path, "visit")
    Traceback (most recent call last):
    ...
    pymc_dp.curator.data_files.InputFileError: ...data.csv: no column 'visit'; the columns are ...
    >>> _ = path.write_text("visits\n1,000\n2,000\n")
    >>> read_column(path, "visits")
    Traceback (most recent call last):
    ...
    pymc_dp.curator.data_files.InputFileError: ...data.csv: line 2 has 2 field(s) but the header ...
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    file_format = _data_format(path, file_format)
    series, lines = _read_table_column(path, column, file_format)
    lines = lines if file_format == "csv" else None  # Parquet has no lines: rows are enough
    if len(series) == 0:
        raise InputFileError(f"{path}: column {column!r} has no records")
    numbers, missing, bad = _parse_numbers(series)
    _check_values(path, column, numbers, missing, bad, lines)
    return numbers


def _check_values(
    path: Path,
    column: str,
    numbers: npt.NDArray[np.float64],
    missing: npt.NDArray[np.bool_],
    bad: npt.NDArray[np.bool_],
    lines: npt.NDArray[np.int64] | None,
) -> None:
    """Refuse missing, non-numeric, then infinite values, naming their first rows."""
    if missing.any():
        raise InputFileError(
            f"{path}: column {column!r} has {int(missing.sum())} missing value(s), "
            f"at {_where(lines, missing)}; {_STOPPED}"
        )
    if bad.any():
        raise InputFileError(
            f"{path}: column {column!r} must hold plain numbers such as 12 or -0.5e3, without "
            f"thousands separators or units; not so at {_where(lines, bad)}; {_STOPPED}"
        )
    infinite = ~np.isfinite(numbers)
    if infinite.any():
        raise InputFileError(
            f"{path}: column {column!r} holds infinite values or numbers too large for a "
            f"float, at {_where(lines, infinite)}; every record must be a finite number; "
            f"{_STOPPED}"
        )


def read_keys(path: str | Path, column: str, *, file_format: str | None = None) -> npt.NDArray:
    r"""Read a column of group keys (as text, surrounding spaces removed), in file order.

    Lines are checked as :func:`read_column` checks them; missing keys are left for
    :func:`pymc_dp.release_grouped` to refuse, which never quotes a record.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "data.csv"
    >>> _ = path.write_text("site,visits\nA,3\nB ,0\n")
    >>> read_keys(path, "site").tolist()
    ['A', 'B']
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    series, _ = _read_table_column(path, column, _data_format(path, file_format))

    def text(v: Any) -> str | None:
        return None if v is None or (isinstance(v, float) and v != v) else str(v).strip()

    return np.array([text(v) for v in series], dtype=object)


def read_labels(
    path: str | Path, column: str, labels: Sequence[str], *, file_format: str | None = None
) -> npt.NDArray[np.int64]:
    r"""Read a column of category labels as the codes 0..K-1 of the public list ``labels``.

    Lines are checked as :func:`read_column` checks them; a label is compared as text, its
    surrounding spaces removed. A missing value or a label not in ``labels`` stops the reading,
    naming the data rows but never the value (the list is public, a record is not).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "data.csv"
    >>> _ = path.write_text("colour\nred\n blue\nred\n")
    >>> read_labels(path, "colour", ["red", "green", "blue"]).tolist()
    [0, 2, 0]
    >>> read_labels(path, "colour", ["red", "green"])
    Traceback (most recent call last):
    ...
    pymc_dp.curator.data_files.InputFileError: ...data.csv: column 'colour' has 1 value(s) not ...
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    file_format = _data_format(path, file_format)
    series, lines = _read_table_column(path, column, file_format)
    lines = lines if file_format == "csv" else None
    if len(series) == 0:
        raise InputFileError(f"{path}: column {column!r} has no records")
    text = [
        None if v is None or (isinstance(v, float) and v != v) else str(v).strip() for v in series
    ]
    index = {label: k for k, label in enumerate(labels)}
    # A declared label is never missing, even one spelled "none" or "NA".
    missing = np.array(
        [t is None or (t.lower() in _MISSING and t not in index) for t in text], dtype=bool
    )
    codes = np.array([index.get(t, -1) if t is not None else -1 for t in text], dtype=np.int64)
    if missing.any():
        raise InputFileError(
            f"{path}: column {column!r} has {int(missing.sum())} missing value(s), "
            f"at {_where(lines, missing)}; {_STOPPED}"
        )
    unknown = codes < 0
    if unknown.any():
        raise InputFileError(
            f"{path}: column {column!r} has {int(unknown.sum())} value(s) not among the public "
            f"categories {', '.join(labels)}, at {_where(lines, unknown)}; {_STOPPED}"
        )
    return codes


# A plain decimal number: no thousands separators, underscores, hexadecimal or units.
_NUMBER = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[+-]?inf(?:inity)?"


def _parse_numbers(series: Any) -> tuple[npt.NDArray[np.float64], npt.NDArray, npt.NDArray]:
    """The column as floats, with masks of missing values and of values that are not numbers."""
    import pandas as pd

    if pd.api.types.is_bool_dtype(series) or pd.api.types.is_numeric_dtype(series):
        # A numeric column (Parquet) keeps its exact values; only NaN/None count as missing.
        numbers = series.to_numpy(dtype=np.float64, na_value=np.nan)
        missing = np.isnan(numbers)
        return numbers, missing, np.zeros_like(missing)
    text = series.astype(str).str.strip().str.lower()
    missing = series.isna().to_numpy() | text.isin(_MISSING).to_numpy()
    text = text.replace({"true": "1", "false": "0"})
    plain = text.str.fullmatch(_NUMBER).to_numpy(dtype=bool)
    bad = ~plain & ~missing
    with np.errstate(over="ignore"):
        numbers = np.array(
            [float(v) if ok else np.nan for v, ok in zip(text, plain, strict=True)],
            dtype=np.float64,
        )
    return numbers, missing, bad
