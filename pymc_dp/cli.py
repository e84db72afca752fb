"""The ``pymc-dp`` command line.

``pymc-dp reproduce`` regenerates the experiments of Bernstein & Sheldon (2018), §4 and
Appendix E: Figure 1a (calibration KS against n), 1b (calibration ECDFs), 1c (MMD to the
non-private posterior) and 2 (Gibbs traces), as PNG files with every plotted number in CSV and a
JSON report. ``--quick`` runs a small grid for CI that still checks every qualitative claim.

``pymc-dp release`` is the curator's side: it reads one column of a CSV or Parquet file and
writes the noisy sufficient statistic as a JSON release (:mod:`pymc_dp.cli_release`); several
columns with an explicit split of ε, or a categorical column with public labels, go to one file
of named columns (:mod:`pymc_dp.cli_columns`), and ``--family regression`` releases a linear
regression's statistics (:mod:`pymc_dp.cli_regression`). With ``--dry-run`` it reads nothing and
prints the noise a release would add (:mod:`pymc_dp.cli_dry_run`). ``pymc-dp fit`` is the
analyst's: it reads a release and fits its model with the noise-aware posterior, writing an
ArviZ posterior file, a summary table and plots (:mod:`pymc_dp.cli_fit`).
Bad input ends with exit status 2 and a one-line message; an interrupted fit (Ctrl-C) ends with
status 130 and writes nothing.

The console script is :func:`pymc_dp_cli.main`, which parses the arguments without importing
PyMC (so that ``--help`` is fast) and then imports the command's module; :func:`main` here is
the same function.
"""

from __future__ import annotations

import argparse
import dataclasses

from pymc_dp_cli import main

__all__ = ["main", "reproduce_command"]


def reproduce_command(args: argparse.Namespace) -> int:
    """Run ``pymc-dp reproduce``; return the exit status (1 for a failed check with --check)."""
    from pymc_dp.studies.reproduce import PAPER, QUICK, reproduce

    grid = QUICK if args.quick else PAPER
    settings = dataclasses.replace(grid.settings, likelihood=args.likelihood)
    if args.trials is not None:
        settings = dataclasses.replace(settings, trials=args.trials)
    grid = dataclasses.replace(grid, settings=settings)
    report = reproduce(
        args.output_dir, grid, seed=args.seed, jobs=args.jobs, progress=not args.no_progress
    )
    print(f"wrote {len(report.files)} files to {report.output_dir} in {report.wall_seconds:.0f} s")
    for check in report.checks:
        print(f"  [{'pass' if check.passed else 'FAIL'}] {check.name}: {check.claim}")
    return 0 if report.passed or not args.check else 1
