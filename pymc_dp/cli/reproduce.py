"""``pymc-dp reproduce``: the experiments of Bernstein & Sheldon (2018), §4 and Appendix E.

It regenerates Figure 1a (calibration KS against n), 1b (calibration ECDFs), 1c (MMD to the
non-private posterior) and 2 (Gibbs traces), as PNG files with every plotted number in CSV and a
JSON report (:mod:`pymc_dp.studies.reproduce`). ``--quick`` runs a small grid for CI that still
checks every qualitative claim.
"""

from __future__ import annotations

import argparse
import dataclasses

__all__ = ["reproduce_command"]


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
