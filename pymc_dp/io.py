"""Files of the two roles: a data column in (curator), a release in and a posterior out (analyst).

Every reader checks what it reads and raises :class:`InputFileError` (a ``ValueError``) with a
message that names the file and says what to fix, so that ``pymc-dp`` can print one line.
Records are read and checked here; nothing in this module prints or stores them.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from pymc_dp.release import Release

__all__ = [
    "DATA_FORMATS",
    "InputFileError",
    "check_posterior_path",
    "read_column",
    "read_labels",
    "read_release",
    "save_fit_figures",
    "save_posterior",
    "write_release",
]

DATA_FORMATS = ("csv", "parquet")
"""Formats :func:`read_column` reads."""

_MAX_LISTED = 5
_MAX_TRACE_ROWS = 12
"""Labelled categories up to this many get a trace row each."""
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
    import csv

    import pandas as pd

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
    return pd.Series(values, dtype=object), np.asarray(lines, dtype=np.int64)


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
    pymc_dp.io.InputFileError: ...data.csv: no column 'visit'; the columns are 'id', 'visits'
    >>> _ = path.write_text("visits\n1,000\n2,000\n")
    >>> read_column(path, "visits")
    Traceback (most recent call last):
    ...
    pymc_dp.io.InputFileError: ...data.csv: line 2 has 2 field(s) but the header has 1; ...
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
    return numbers


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
    pymc_dp.io.InputFileError: ...data.csv: column 'colour' has 1 value(s) not among the public ...
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


def write_release(release: Any, path: str | Path, *, overwrite: bool = True) -> Path:
    """Write a release as indented JSON (:meth:`~pymc_dp.Release.to_json`); return the path.

    The file is written whole to a temporary file beside ``path`` and then moved into place,
    so an interrupted write never leaves a truncated release or loses an earlier one.

    Parameters
    ----------
    release
        The release to write: a :class:`~pymc_dp.Release`, a :class:`~pymc_dp.ReleaseSet`
        (every group in one file) or a :class:`~pymc_dp.release_file.ReleaseFile` (several
        columns, with their names).
    path
        The JSON file.
    overwrite
        Whether an existing ``path`` may be replaced. With ``False`` the existence check and
        the write are one atomic step (a hard link), so of several writers racing for one
        path exactly one succeeds.

    Raises
    ------
    InputFileError
        If ``path`` exists and ``overwrite`` is ``False``.
    """
    from pymc_dp.release_file import ReleaseFile
    from pymc_dp.release_set import ReleaseSet

    if not isinstance(release, Release | ReleaseSet | ReleaseFile):
        raise TypeError(
            "release must be a pymc_dp.Release, ReleaseSet or ReleaseFile (got "
            f"{type(release).__name__})"
        )
    path = Path(path)
    text = release.to_json(indent=2) + "\n"
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp makes the file private (0600); a release is meant to be shared.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        if overwrite:
            os.replace(temporary, path)
        else:
            try:
                try:
                    os.link(temporary, path)  # fails if path exists: check and write at once
                except FileExistsError:
                    raise
                except OSError:  # a file system without hard links: create exclusively
                    with open(path, "x", encoding="utf-8") as handle:
                        handle.write(text)
            except FileExistsError:
                raise InputFileError(
                    f"{path} exists; pass --overwrite (overwrite=True) to replace it (a new "
                    "release of the same data spends epsilon again)"
                ) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
    return path


def read_release(
    path: str | Path, *, allow_grouped: bool = False, allow_columns: bool = False
) -> Any:
    """Read and check a release written by :func:`write_release` or ``pymc-dp release``.

    With ``allow_grouped=True`` a grouped release file gives a :class:`~pymc_dp.ReleaseSet`;
    with ``allow_columns=True`` a file of several columns (or of a regression, or of labelled
    categories) gives a :class:`~pymc_dp.release_file.ReleaseFile`, and so does a bare
    regression release (its covariates unnamed); otherwise only a single
    :class:`~pymc_dp.Release` is accepted.

    Raises
    ------
    FileNotFoundError
        If there is no such file.
    InputFileError
        If the file is not JSON, or not a valid release (the message says which field).

    Examples
    --------
    >>> import pathlib, tempfile, pymc as pm, pymc_dp as pmdp
    >>> rel = pmdp.release([0, 1, 1], pm.Bernoulli, epsilon=1.0, rng=0)
    >>> path = write_release(rel, pathlib.Path(tempfile.mkdtemp()) / "release.json")
    >>> read_release(path) == rel
    True
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise InputFileError(f"{path}: not a text file; expected a release in JSON") from None
    except json.JSONDecodeError as err:
        raise InputFileError(
            f"{path}: not valid JSON ({err.msg} at line {err.lineno}, column {err.colno}); "
            "expected a release written by pymc-dp release"
        ) from None
    if not isinstance(data, dict):
        raise InputFileError(
            f"{path}: expected a JSON object with the release's fields (got {type(data).__name__})"
        )
    from pymc_dp.release_file import ColumnRelease, ReleaseFile, is_release_file
    from pymc_dp.release_set import ReleaseSet, is_grouped_record

    regression = data.get("kind") == "regression"
    if is_release_file(data) or regression:
        if not allow_columns:
            what = "regression release" if regression else "release file of named columns"
            raise InputFileError(
                f"{path}: a {what}; read it with pymc_dp.io.read_release(path, allow_columns=True)"
            )
        try:
            if regression:
                from pymc_dp.regression.release_record import RegressionRelease

                rel = RegressionRelease.from_dict(data)
                return ReleaseFile((ColumnRelease("y", rel),), epsilon=rel.total_epsilon)
            return ReleaseFile.from_dict(data)
        except (TypeError, ValueError) as err:
            kind = "regression release" if regression else "release file"
            raise InputFileError(f"{path}: not a valid pymc_dp {kind}: {err}") from None
    grouped = is_grouped_record(data)
    if grouped and not allow_grouped:
        raise InputFileError(
            f"{path}: a grouped release (one release per group); read it with "
            "pymc_dp.io.read_release(path, allow_grouped=True)"
        )
    try:
        return ReleaseSet.from_dict(data) if grouped else Release.from_dict(data)
    except (TypeError, ValueError) as err:
        kind = "grouped release" if grouped else "release"
        raise InputFileError(f"{path}: not a valid pymc_dp {kind}: {err}") from None


def check_posterior_path(path: str | Path) -> Path:
    """Check that :func:`save_posterior` can write ``path``, before any sampling is spent.

    Raises
    ------
    InputFileError
        If the name ends neither in ``.nc`` nor ``.zarr``, or the writer's package is missing.
    """
    path = Path(path)
    if path.suffix == ".zarr":
        needed = [("zarr", "zarr")]
    elif path.suffix == ".nc":
        # Grouped (NetCDF4) files, written by ArviZ through h5netcdf and h5py.
        needed = [("h5netcdf", "h5netcdf h5py"), ("h5py", "h5py")]
    else:
        raise InputFileError(f"{path}: the posterior file must end in .nc (NetCDF) or .zarr")
    for module, package in needed:
        if not _importable(module):
            raise InputFileError(
                f"{path}: writing {path.suffix} files needs {module}; install it with "
                f"pip install {package}"
            )
    return path


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def save_posterior(idata: Any, path: str | Path) -> Path:
    """Write a sampling result to NetCDF (``.nc``) or Zarr (``.zarr``); return the path.

    Works with ArviZ 0.x ``InferenceData`` and ArviZ 1.x ``DataTree``, which both have
    ``to_netcdf`` and ``to_zarr``. Zarr needs the ``zarr`` package, NetCDF h5netcdf with h5py
    (or netCDF4).

    Raises
    ------
    InputFileError
        As :func:`check_posterior_path`.
    """
    path = check_posterior_path(path)
    if path.suffix == ".zarr":
        idata.to_zarr(str(path))
    else:
        idata.to_netcdf(str(path))
    return path


def save_fit_figures(
    idata: Any, release: Release, prior: Mapping[str, Any] | None, out_dir: str | Path
) -> tuple[Path, Path]:
    """Write ``posterior.png`` and ``trace.png`` for a fit of :func:`pymc_dp.models.build_model`.

    ``posterior.png`` has one panel per scalar parameter (``p[k]`` for each category): the
    noise-aware posterior's draws (histogram and KDE) against the naive posterior that takes the
    noisy value as exact, and the prior's density over the same range (where it is flat next to
    the posterior, the release outweighs the prior; where the two look alike, the prior decides).
    ``trace.png`` is the trace plot of θ. The caller chooses the Matplotlib backend.

    Parameters
    ----------
    idata
        The sampling result (InferenceData or DataTree).
    release
        The release that was fitted.
    prior
        The prior hyperparameters used, by name (``None``: the defaults).
    out_dir
        Directory to write to.

    Returns
    -------
    tuple of Path
        The two files written.
    """
    import matplotlib.pyplot as plt
    from scipy import stats

    from pymc_dp._compat import posterior_dataset
    from pymc_dp.models import naive_marginals, prior_marginals, prior_spec
    from pymc_dp.plots import plot_trace

    out_dir = Path(out_dir)
    posterior = posterior_dataset(idata)
    naive = naive_marginals(release, prior)
    priors = prior_marginals(release, prior)
    title = f"{release.family} release: n = {release.n}, ε = {release.epsilon:g}"
    cols = 2 if len(naive) == 4 else min(len(naive), 3)
    rows = -(-len(naive) // cols)
    fig, axes = plt.subplots(
        # At least 6.5 in wide so that the two-line title fits over a single panel.
        rows,
        cols,
        figsize=(max(4.5 * cols, 6.5), 3.4 * rows),
        layout="constrained",
        squeeze=False,
    )
    for ax, (label, dist) in zip(axes.ravel(), naive.items(), strict=False):
        name, _, index = label.partition("[")
        shown = label
        draws = posterior[name].values
        if index:
            k = int(index.rstrip("]"))
            draws = draws[..., k]
            # The category's coordinate: its public label when the fit was given labels.
            (dim,) = (d for d in posterior[name].dims if d not in ("chain", "draw"))
            shown = f"{name}[{posterior[name][dim].values[k]}]"
        draws = draws.ravel()
        # One range for both curves: the naive posterior may sit away from the DP one.
        lo = min(np.quantile(draws, 0.001), float(dist.ppf(0.001)))
        hi = max(np.quantile(draws, 0.999), float(dist.ppf(0.999)))
        grid = np.linspace(lo, hi, 400)
        ax.hist(draws, bins="auto", density=True, color="#0072B2", alpha=0.2, linewidth=0)
        ax.plot(grid, stats.gaussian_kde(draws)(grid), color="#0072B2", lw=2, label="noise-aware")
        ax.plot(grid, dist.pdf(grid), color="#D55E00", ls="--", lw=2, label="naive")
        ax.plot(grid, priors[label].pdf(grid), color="#555555", ls=":", lw=1.5, label="prior")
        ax.set_xlabel(shown)
        ax.set_ylim(bottom=0)
    for ax in axes.ravel()[len(naive) :]:
        ax.set_axis_off()
    axes[0, 0].set_ylabel("posterior density")
    axes[0, 0].legend(frameon=False)
    fig.suptitle(f"Private {title}\nnoise-aware posterior, naive (noisy value as exact), prior")
    posterior_png = out_dir / "posterior.png"
    fig.savefig(posterior_png, dpi=110)
    plt.close(fig)
    variables = list(prior_spec(release.get_family()).variables)
    data = idata
    labelled = [v for v in variables if posterior[v].ndim == 3 and posterior[v].dtype.kind == "f"]
    if labelled and all(posterior[v].shape[-1] <= _MAX_TRACE_ROWS for v in labelled):
        # One row per labelled category: colours alone would not say which line is which.
        data = posterior[[v for v in variables if v not in labelled]]
        for v in labelled:
            dim = posterior[v].dims[-1]
            if posterior[v][dim].dtype.kind not in "OUS":  # codes 0..K-1: compact rows
                data = idata
                break
            for key in posterior[v][dim].values:
                data[f"{v}[{key}]"] = posterior[v].sel({dim: key}, drop=True)
        else:
            variables = list(data.data_vars)
    fig = plot_trace(data, variables, title=f"Noise-aware posterior trace, {title}")
    trace_png = out_dir / "trace.png"
    fig.savefig(trace_png, dpi=100)
    plt.close(fig)
    return posterior_png, trace_png
