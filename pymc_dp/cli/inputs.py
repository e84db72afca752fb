"""Checks of ``pymc-dp release``'s inputs that every release command shares, before any noise.

:func:`check_output` refuses an output path that would fail, :func:`is_parquet` tells the data's
format, :func:`open_budget` opens (or creates) the ``--budget`` ledger.
"""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import Any

from pymc_dp.cli.messages import InputError

__all__ = ["check_output", "count_share", "is_parquet", "open_budget"]


def count_share(args: argparse.Namespace) -> float | str | None:
    """``count_share`` of a single release: ``"auto"`` unless ``--count-share`` says (0: none).

    ``"auto"`` is :data:`pymc_dp.curator.single.DEFAULT_COUNT_SHARE` for a windowed family with
    one statistic and Laplace noise, no count otherwise.
    """
    share = args.count_share
    if share is None:
        return "auto"
    if share == 0:
        return None
    if not 0 < share < 1:
        raise InputError(f"--count-share must lie in [0, 1) (got {share:g})")
    return share


def check_output(output: Path, overwrite: bool) -> None:
    """Refuse an output path that would fail, before any noise is drawn (no budget wasted)."""
    if output.exists() and not overwrite:
        raise InputError(
            f"{output} exists; pass --overwrite to replace it (a new release of the same "
            "data spends epsilon again)"
        )
    if output.is_dir():
        raise InputError(f"{output} is a directory; --output takes a file name")
    if not output.parent.is_dir():
        raise InputError(f"{output.parent} is not a directory; create it first")


def is_parquet(args: argparse.Namespace) -> bool:
    """Whether DATA is Parquet: by --format, or a directory, a glob or a .parquet name."""
    import glob

    if args.format is not None:
        return args.format == "parquet"
    path = Path(args.data)
    return path.is_dir() or glob.has_magic(args.data) or path.suffix.lower() in (".parquet", ".pq")


def open_budget(args: argparse.Namespace, unit: str, stack: contextlib.ExitStack[Any]) -> Any:
    """The ledger named by --budget (created with --budget-total), or None.

    The ledger stays locked until ``stack`` closes (:func:`pymc_dp.curator.budget.open_ledger`):
    a concurrent release against it waits, and each charge is in the file before any noise.
    """
    from pymc_dp.curator.budget import open_ledger

    if args.budget is None:
        if args.budget_total is not None:
            raise InputError("--budget-total needs --budget LEDGER")
        return None
    try:
        return stack.enter_context(open_ledger(args.budget, unit=unit, total=args.budget_total))
    except ValueError as err:
        raise InputError(str(err)) from None
