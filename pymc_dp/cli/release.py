"""``pymc-dp release``: the curator's command (its ``--dry-run`` is :mod:`pymc_dp.cli.dry_run`).

The arguments are parsed and the family options checked by :mod:`pymc_dp.cli` before this module
(and PyMC with it) is imported.
"""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import Any

from pymc_dp.cli.dry_run import public_sizes
from pymc_dp.cli.inputs import check_output, count_share, is_parquet, open_budget
from pymc_dp.cli.messages import InputError, fail, one_line, release_message
from pymc_dp.cli.plans import ColumnPlan

__all__ = ["release_command"]


def release_command(args: argparse.Namespace, plans: list[ColumnPlan]) -> int:
    """Run ``pymc-dp release`` with the checked column ``plans``; return the exit status.

    A ``--budget`` ledger is locked from its reading to the end of the release (its charge is
    saved before any noise is drawn).
    """
    with contextlib.ExitStack() as ledger:
        return _release_command(args, plans, ledger)


def _release_command(
    args: argparse.Namespace, plans: list[ColumnPlan], ledger: contextlib.ExitStack[Any]
) -> int:
    output = Path(args.output)
    settings = plans[0].settings
    try:
        check_output(output, args.overwrite)
        if len(plans) > 1 or plans[0].labels is not None:
            from pymc_dp.cli.columns import release_columns

            if args.count_share is not None:
                raise InputError("--count-share applies to a single --column release")

            return release_columns(args, plans, output, ledger)
        from pymc_dp._validation import check_positive
        from pymc_dp.curator.data_files import CsvColumn
        from pymc_dp.curator.release_file import write_release
        from pymc_dp.curator.single import release

        gaussian = args.mechanism == "discrete-gaussian"
        if gaussian:
            if args.rho is None or args.epsilon is not None:
                raise InputError("--mechanism discrete-gaussian takes --rho, not --epsilon")
            check_positive(args.rho, "--rho")
        else:
            if args.epsilon is None or args.rho is not None:
                raise InputError(
                    "--epsilon is required (--rho only with --mechanism discrete-gaussian)"
                )
            check_positive(args.epsilon, "--epsilon")
        # The --family name; with its settings it names one family (normal with --sigma: the
        # Normal family with known σ), as pymc_dp.release resolves it.
        family = plans[0].family
        parquet = is_parquet(args)
        if not parquet and args.scheduler is not None:
            raise InputError("--scheduler reads Parquet data; convert the CSV file first")
        budget = open_budget(args, "rho" if gaussian else "epsilon", ledger)
        options = dict(
            epsilon=args.epsilon,
            rho=args.rho,
            mechanism=args.mechanism,
            clamp=args.clamp,
            rng=args.seed,
            budget=budget,
            label=f"{Path(args.data).name}:{args.column}",
            **settings,
        )
        if args.by is not None:
            options["count_share"] = count_share(args)
            rel = _release_grouped(args, family, options, parquet)
        elif parquet:
            options["count_share"] = count_share(args)
            rel = _release_parquet(
                args,
                lambda data, client: release(
                    data, family, column=args.column, client=client, **options
                ),
            )
        else:  # CSV, streamed: read (and checked) one batch at a time, memory bounded
            source = CsvColumn(args.data, args.column, file_format=args.format)
            options["count_share"] = count_share(args)
            rel = release(source, family, column=args.column, **options)
        # The charge is in the ledger already (saved when made): a failed write still counts.
        write_release(rel, output, overwrite=args.overwrite)
    except (InputError, OSError, OverflowError, TypeError, ValueError) as err:
        text = release_message(one_line(err), args.column)
        if args.family == "categorical" and "must hold plain numbers" in text:
            # The labels found in the data are not public, so they are not printed.
            text += (
                "; a column of text labels takes its public labels in a fixed order: "
                "--categories LABEL1,LABEL2,... (e.g. --categories red,green,blue), listing "
                "every value the column may hold"
            )
        return fail("release", text)
    if args.by is not None:
        _print_grouped(output, args, rel)
        return 0
    params = ", ".join(f"{k}={v:g}" for k, v in rel.family_params.items())
    family = f"{rel.family}({params})" if params else rel.family  # poisson, not poisson()
    spent = f" + {rel.bounds_epsilon:g} for the private window" if rel.bounds_epsilon else ""
    counted = (
        f" for the window sum + {rel.count_epsilon:g} for the window count (count = "
        f"{rel.window_count:g}, scale = {rel.count_scale:g}; --count-share 0 for the sum alone)"
        if rel.window_count is not None
        else ""
    )
    print(
        f"wrote {output}: {family} release of column {args.column!r}, "
        f"n = {rel.n}, epsilon = {rel.epsilon:g}{counted}{spent}, "
        f"sensitivity = {rel.sensitivity:g}, {rel.mechanism} scale = {rel.scale:g}"
        + (f", quantum = {rel.quantum:g}" if rel.quantum is not None else "")
        + f", bounds = [{rel.bounds[0]:g}, {rel.bounds[1]:g}]"
        + (", records clamped to the family's range" if rel.clamped else "")
        + (
            f"; budget: {rel.budget['spent']:g} of {rel.budget['total']:g} spent"
            if rel.budget is not None
            else ""
        )
    )
    return 0


def _release_grouped(
    args: argparse.Namespace, family: Any, options: dict[str, Any], parquet: bool
) -> Any:
    """One release per group of --by (a CSV file, or Parquet streamed), ε spent once."""
    from pymc_dp.curator.data_files import read_column, read_keys
    from pymc_dp.curator.grouped import release_grouped

    groups = [g.strip() for g in args.groups.split(",")]
    sizes: Any = "public"
    if args.public_sizes != "public":
        sizes = public_sizes(args.public_sizes)
    options = dict(options)
    options["label"] = f"{Path(args.data).name}:{args.column} by {args.by}"
    settings = dict(groups=groups, sizes=sizes, by_name=args.by, **options)
    if parquet:
        # One pass over the files (or on the cluster): each group's exact totals.
        return _release_parquet(
            args,
            lambda data, client: release_grouped(
                data, family, column=args.column, by=args.by, client=client, **settings
            ),
        )
    records = read_column(args.data, args.column, file_format=args.format)
    keys = read_keys(args.data, args.by, file_format=args.format)
    return release_grouped(records, family, by=keys, **settings)


def _print_grouped(output: Path, args: argparse.Namespace, rs: Any) -> None:
    rel = rs.first
    params = ", ".join(f"{k}={v:g}" for k, v in rel.family_params.items())
    family = f"{rel.family}({params})" if params else rel.family
    counted = (
        f" ({rel.epsilon:g} for each window sum + {rel.count_epsilon:g} for each window count, "
        f"count scale = {rel.count_scale:g}; --count-share 0 for the sums alone)"
        if rel.window_count is not None
        else ""
    )
    print(
        f"wrote {output}: {family} releases of column {args.column!r} for "
        f"{len(rs)} groups of {args.by!r}, epsilon = {rs.total_epsilon:g} for the whole set "
        f"(parallel composition){counted}, sensitivity = {rel.sensitivity:g}, {rel.mechanism} "
        f"scale = {rel.scale:g} per group"
        + (
            f"; budget: {rs.budget['spent']:g} of {rs.budget['total']:g} spent"
            if rs.budget is not None
            else ""
        )
    )
    for key, n_g in zip(rs.groups, rs.n, strict=True):
        print(f"  {key}: n = {n_g}")


def _release_parquet(args: argparse.Namespace, run: Any) -> Any:
    """``run(data, client)`` on Parquet, streamed here or on a Dask cluster (--scheduler)."""
    from pymc_dp.curator.frames import parquet_source

    source = parquet_source(args.data)  # checks that the files exist and are Parquet
    columns = [args.column] + ([args.by] if args.by is not None else [])
    for column in columns:
        if column not in source.columns:
            raise InputError(
                f"{args.data}: no column {column!r}; the columns are "
                f"{', '.join(map(repr, source.columns))}"
            )
    try:
        if args.scheduler is None:
            return run(source, None)
        try:
            import dask.dataframe as dd
            from distributed import Client
        except ImportError:
            raise InputError(
                "--scheduler needs Dask; install it with pip install 'pymc-dp[dask]'"
            ) from None
        files = source.dataset.files
        with Client(args.scheduler, timeout="30s") as client:
            # A partition per row group: the workers share the files, memory stays bounded.
            frame = dd.read_parquet(files, columns=columns, split_row_groups=True)
            return run(frame, client)
    except ValueError as err:
        raise InputError(f"{args.data}: {err}") from None
