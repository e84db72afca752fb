"""``pymc-dp release`` of several columns in one call, or of a column with labelled categories.

The release file is a :class:`~pymc_dp.curator.release_file.ReleaseFile`: one entry per column with
its public names. ε is split explicitly (``--epsilon-split``; sequential composition) and charged to
the ledger once for the whole call. Every column is checked, by the same code that releases it,
before any noise is drawn for any column: a first pass runs each release up to the point where it
would charge its budget (:func:`pymc_dp.release` charges before it draws), with a probe ledger
that stops it there.
"""

from __future__ import annotations

import argparse
import contextlib
import math
from pathlib import Path
from typing import Any

from pymc_dp.cli.messages import InputError, fail, one_line, release_message
from pymc_dp.cli.plans import ColumnPlan

__all__ = ["release_columns"]


class _ChecksPassed(Exception):
    """Raised by the probe ledger: the release passed every check and drew nothing."""


def _probe_budget() -> Any:
    from pymc_dp.curator.budget import PrivacyBudget

    class ProbeBudget(PrivacyBudget):
        """A ledger whose charge stops the release: every check before it has passed."""

        def spend(self, **kwargs: Any) -> float:
            raise _ChecksPassed

    return ProbeBudget(epsilon=1.0)


def release_columns(
    args: argparse.Namespace,
    plans: list[ColumnPlan],
    output: Path,
    ledger: contextlib.ExitStack[Any],
) -> int:
    """Release each planned column into one file; return the exit status.

    The caller has checked ``output`` (not a directory, absent unless --overwrite); a --budget
    ledger stays locked until ``ledger`` closes.
    """
    import numpy as np

    from pymc_dp._validation import check_positive
    from pymc_dp.cli.inputs import is_parquet, open_budget
    from pymc_dp.curator.data_files import read_column, read_labels
    from pymc_dp.curator.release_file import ColumnRelease, ReleaseFile, write_release
    from pymc_dp.curator.single import release

    column = plans[0].column
    try:
        if args.mechanism == "discrete-gaussian" or args.rho is not None:
            raise InputError(
                "--categories with labels takes --epsilon; the Gaussian mechanism (--rho) is not "
                "available for a file of named columns"
            )
        if args.epsilon is None:
            raise InputError("--epsilon is required")
        check_positive(args.epsilon, "--epsilon")
        if args.scheduler is not None:
            raise InputError("--scheduler releases one column per call; drop it or the others")
        source = None
        if is_parquet(args):
            from pymc_dp.curator.frames import parquet_source

            source = parquet_source(args.data)
            for plan in plans:
                if plan.column not in source.columns:
                    raise InputError(
                        f"{args.data}: no column {plan.column!r}; the columns are "
                        f"{', '.join(map(repr, source.columns))}"
                    )
        budget = open_budget(args, "epsilon", ledger)
        fmt = "parquet" if source is not None else args.format

        def run(plan: ColumnPlan, ledger: Any, rng: Any) -> Any:
            nonlocal column
            column = plan.column
            family = plan.family  # the --family name, resolved with its settings by release
            options = dict(
                epsilon=plan.epsilon, mechanism=args.mechanism, clamp=args.clamp, rng=rng,
                budget=ledger, label=f"{Path(args.data).name}:{plan.column}", **plan.settings,
            )  # fmt: skip
            if plan.labels is not None:
                codes = read_labels(args.data, plan.column, plan.labels, file_format=fmt)
                return release(codes, family, **options)
            if source is not None:
                return release(source, family, column=plan.column, **options)
            return release(read_column(args.data, plan.column, file_format=fmt), family, **options)

        for plan in plans:  # every check of every column, before any noise is drawn
            try:
                run(plan, _probe_budget(), None if args.seed is None else args.seed)
            except _ChecksPassed:
                continue
            raise RuntimeError(f"the release of {plan.column!r} did not charge its budget")
        total = math.fsum(plan.epsilon for plan in plans)
        if budget is not None:  # sequential composition: the whole call, charged once
            names = ",".join(plan.column for plan in plans)
            budget.spend(epsilon=total, label=f"{Path(args.data).name}:{names}")
        rng = None if args.seed is None else np.random.default_rng(args.seed)
        entries = [
            ColumnRelease(plan.column, run(plan, None, rng), labels=plan.labels) for plan in plans
        ]
        rf = ReleaseFile(
            tuple(entries), epsilon=total, budget=None if budget is None else budget.receipt()
        )
        # The charge is in the ledger already (saved when made): a failed write still counts.
        write_release(rf, output, overwrite=args.overwrite)
    except (InputError, OSError, OverflowError, TypeError, ValueError) as err:
        return fail("release", release_message(one_line(err), column or "COLUMN"))
    parts = ", ".join(f"{e.column} {e.release.total_epsilon:g}" for e in rf.releases)
    print(
        f"wrote {output}: {len(rf)} release(s) of {Path(args.data).name}, epsilon = "
        f"{rf.epsilon:g} in all (sequential composition: {parts})"
        + (
            f"; budget: {rf.budget['spent']:g} of {rf.budget['total']:g} spent"
            if rf.budget is not None
            else ""
        )
    )
    for entry in rf.releases:
        rel = entry.release
        params = ", ".join(f"{k}={v:g}" for k, v in rel.family_params.items())
        labels = f", categories {','.join(entry.labels)}" if entry.labels else ""
        window = ""
        if rel.get_family().needs_bounds:
            window = f", bounds = [{rel.bounds[0]:g}, {rel.bounds[1]:g}]"
        print(
            f"  {entry.column}: {rel.family}({params}){labels}, n = {rel.n}, epsilon = "
            f"{rel.epsilon:g}, sensitivity = {rel.sensitivity:g}, {rel.mechanism} scale = "
            f"{rel.scale:g}{window}"
        )
    return 0
