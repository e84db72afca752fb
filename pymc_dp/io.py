"""Files of the two roles: a data column in (curator), a release in and a posterior out (analyst).

Every reader checks what it reads and raises :class:`InputFileError` (a ``ValueError``) with a
message that names the file and says what to fix, so that ``pymc-dp`` can print one line.
Records are read and checked here; nothing in this module prints or stores them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
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
    "read_release",
    "save_fit_figures",
    "save_posterior",
    "write_release",
]

DATA_FORMATS = ("csv", "parquet")
"""Formats :func:`read_column` reads."""

_MAX_LISTED = 5
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


def _read_table_column(path: Path, column: str, file_format: str) -> Any:
    """The column as a pandas Series; errors name the file and the available columns."""
    import pandas as pd

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
        return pq.read_table(path, columns=[column]).column(column).to_pandas()
    try:
        names = list(pd.read_csv(path, nrows=0).columns)
    except pd.errors.EmptyDataError:
        raise InputFileError(f"{path}: the file is empty; it needs a header row") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as err:
        raise InputFileError(f"{path}: not a readable CSV file ({err})") from None
    _check_column(path, column, names)
    # Read as text so that the checks below see exactly what the file holds.
    return pd.read_csv(path, usecols=[column], dtype=str, keep_default_na=False)[column]


def _check_column(path: Path, column: str, names: list[str]) -> None:
    if column not in names:
        raise InputFileError(
            f"{path}: no column {column!r}; the columns are {', '.join(map(repr, names))}"
        )


def _rows(mask: npt.NDArray[np.bool_]) -> str:
    """First rows (1-based, as in a spreadsheet without the header) where ``mask`` holds."""
    rows = np.flatnonzero(mask)[:_MAX_LISTED] + 1
    more = ", ..." if mask.sum() > _MAX_LISTED else ""
    return ", ".join(map(str, rows)) + more


def read_column(
    path: str | Path, column: str, *, file_format: str | None = None
) -> npt.NDArray[np.float64]:
    r"""Read one numeric column of a CSV or Parquet file, refusing missing and non-numeric values.

    Parameters
    ----------
    path
        A ``.csv`` (with a header row; compressed ``.csv.gz`` too) or ``.parquet`` file.
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
        (the message lists the columns), or the column is empty or holds missing or
        non-numeric values (the message gives the first rows).

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
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    file_format = _data_format(path, file_format)
    series = _read_table_column(path, column, file_format)
    if len(series) == 0:
        raise InputFileError(f"{path}: column {column!r} has no records")
    numbers, missing, bad = _parse_numbers(series)
    if missing.any():
        raise InputFileError(
            f"{path}: column {column!r} has {int(missing.sum())} missing value(s) (rows "
            f"{_rows(missing)}); drop or fill them before the release, and count n accordingly"
        )
    if bad.any():
        first = series.iloc[int(np.flatnonzero(bad)[0])]
        raise InputFileError(
            f"{path}: column {column!r} must hold numbers; found {str(first)!r} (rows {_rows(bad)})"
        )
    if not np.all(np.isfinite(numbers)):
        raise InputFileError(
            f"{path}: column {column!r} holds infinite values (rows "
            f"{_rows(~np.isfinite(numbers))}); every record must be a finite number"
        )
    return numbers


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
    numbers = pd.to_numeric(text.where(~missing, "nan"), errors="coerce").to_numpy(np.float64)
    bad = np.isnan(numbers) & ~missing
    return numbers, missing, bad


def write_release(release: Release, path: str | Path) -> Path:
    """Write a release as indented JSON (:meth:`~pymc_dp.Release.to_json`); return the path."""
    if not isinstance(release, Release):
        raise TypeError(f"release must be a pymc_dp.Release (got {type(release).__name__})")
    path = Path(path)
    path.write_text(release.to_json(indent=2) + "\n", encoding="utf-8")
    return path


def read_release(path: str | Path) -> Release:
    """Read and check a release written by :func:`write_release` or ``pymc-dp release``.

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
    try:
        return Release.from_dict(data)
    except (TypeError, ValueError) as err:
        raise InputFileError(f"{path}: not a valid pymc_dp release: {err}") from None


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

    ``posterior.png`` has one panel per scalar parameter (``p[k]`` for each category): the DP
    posterior's draws (histogram and KDE) against the naive posterior that takes the noisy value
    as exact. ``trace.png`` is the trace plot of θ. The caller chooses the Matplotlib backend.

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
    from pymc_dp.models import naive_marginals, prior_spec
    from pymc_dp.plots import plot_trace

    out_dir = Path(out_dir)
    posterior = posterior_dataset(idata)
    naive = naive_marginals(release, prior)
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
        draws = posterior[name].values
        if index:
            draws = draws[..., int(index.rstrip("]"))]
        draws = draws.ravel()
        # One range for both curves: the naive posterior may sit away from the DP one.
        lo = min(np.quantile(draws, 0.001), float(dist.ppf(0.001)))
        hi = max(np.quantile(draws, 0.999), float(dist.ppf(0.999)))
        grid = np.linspace(lo, hi, 400)
        ax.hist(draws, bins="auto", density=True, color="#0072B2", alpha=0.2, linewidth=0)
        ax.plot(grid, stats.gaussian_kde(draws)(grid), color="#0072B2", lw=2, label="DP Gibbs")
        ax.plot(grid, dist.pdf(grid), color="#D55E00", ls="--", lw=2, label="naive")
        ax.set_xlabel(label)
        ax.set_ylim(bottom=0)
    for ax in axes.ravel()[len(naive) :]:
        ax.set_axis_off()
    axes[0, 0].set_ylabel("posterior density")
    axes[0, 0].legend(frameon=False)
    fig.suptitle(f"Private {title}\nDP Gibbs posterior vs naive (noisy value as exact)")
    posterior_png = out_dir / "posterior.png"
    fig.savefig(posterior_png, dpi=110)
    plt.close(fig)
    variables = list(prior_spec(release.get_family()).variables)
    fig = plot_trace(idata, variables, title=f"DP Gibbs trace, {title}")
    trace_png = out_dir / "trace.png"
    fig.savefig(trace_png, dpi=100)
    plt.close(fig)
    return posterior_png, trace_png
