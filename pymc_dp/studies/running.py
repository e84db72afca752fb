"""The plumbing the studies share: tasks over processes, a progress bar, their files.

:func:`map_tasks` runs a study's grid points over processes, :class:`ProgressBar` shows them
advancing, :func:`write_csv` and :func:`jsonable` write what they measured, and
:func:`environment` records where.
"""

from __future__ import annotations

import concurrent.futures
import csv
import multiprocessing
import os
import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["ProgressBar", "environment", "jsonable", "map_tasks", "write_csv"]


def map_tasks(fn: Callable, tasks: list, jobs: int, advance: Callable[[], None]) -> list:
    """Run ``fn`` over ``tasks`` in ``jobs`` processes (in order of completion)."""
    if jobs <= 1:
        out = []
        for t in tasks:
            out.append(fn(t))
            advance()
        return out
    # "spawn": PyTensor's compile cache and BLAS threads are not fork-safe.
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context) as pool:
        futures = [pool.submit(fn, t) for t in tasks]
        out = []
        for f in concurrent.futures.as_completed(futures):
            out.append(f.result())
            advance()
        return out


class ProgressBar:
    """A rich progress bar over tasks, or nothing; used as ``with ... as advance``."""

    def __init__(self, enabled: bool, total: int):
        self.enabled, self.total = enabled, total

    def __enter__(self) -> Callable[[], None]:
        if not self.enabled:
            return lambda: None
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
        )
        self._bar.start()
        task = self._bar.add_task("grid points", total=self.total)
        return lambda: self._bar.advance(task)

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self._bar.stop()


def write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    """Write ``rows`` (dicts with the same keys) as a CSV file with a header; return the path."""
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def jsonable(obj: Any) -> Any:
    """``obj`` with NumPy values as Python ones and non-finite floats as ``None``, for JSON."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    return obj


def environment() -> dict[str, Any]:
    """The versions and machine a study ran on, for its report."""
    import arviz
    import pymc
    import pytensor

    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pymc": pymc.__version__,
        "pytensor": pytensor.__version__,
        "arviz": arviz.__version__,
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
    }
