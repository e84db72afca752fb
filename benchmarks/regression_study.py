"""Figures 3 and 4 of Bernstein & Sheldon (2019): private linear regression studies.

Writes PNG figures, CSV tables and ``report.json`` (with named checks of the paper's claims)
into ``--output-dir``. See ``docs/regression.md`` for the settings and the results.

Usage::

    python benchmarks/regression_study.py --output-dir docs/figures/regression      # ~15 min
    python benchmarks/regression_study.py --quick --output-dir /tmp/regression-quick  # seconds
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from pymc_dp.studies.regression_report import FULL, QUICK, run_regression_study


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--quick", action="store_true", help="tiny grid (smoke test)")
    parser.add_argument("--seed", type=int, default=2019)
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument(
        "--no-mcmc-ind", action="store_true", help="skip MCMC-Ind (NUTS over the records)"
    )
    parser.add_argument("--draws", type=int, default=None, help="Gibbs draws per chain")
    args = parser.parse_args(argv)
    grid = QUICK if args.quick else FULL
    settings = grid.settings
    if args.no_mcmc_ind:
        settings = dataclasses.replace(settings, mcmc_trials=0)
    if args.draws is not None:
        settings = dataclasses.replace(settings, draws=args.draws)
    report = run_regression_study(
        args.output_dir,
        dataclasses.replace(grid, settings=settings),
        seed=args.seed,
        jobs=args.jobs,
        progress=not args.no_progress,
    )
    for check in report.checks:
        print(f"{'PASS' if check.passed else 'FAIL'}  {check.name}: {check.claim}")
    print(f"wall time {report.wall_seconds:.0f} s; files in {report.output_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
