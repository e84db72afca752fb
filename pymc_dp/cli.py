"""The ``pymc-dp`` command line.

``pymc-dp reproduce`` regenerates the experiments of Bernstein & Sheldon (2018), §4 and
Appendix E: Figure 1a (calibration KS against n), 1b (calibration ECDFs), 1c (MMD to the
non-private posterior) and 2 (Gibbs traces), as PNG files with every plotted number in CSV and a
JSON report. ``--quick`` runs a small grid for CI that still checks every qualitative claim.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence

__all__ = ["main"]

_REPRODUCE_EPILOG = """\
The full grid is the paper's: models Binomial, Multinomial and Exponential; n in
{10, 30, 100, 300, 1000, 3000}; epsilon in {0.01, 0.1}; 1000 trials per point; 2000 burn-in and
5000 Gibbs iterations per trial. All trials of a point run at once in the batched engine.

Files written to OUTPUT_DIR:
  figure1a_calibration_ks.png/.csv  KS statistic of calibration quantiles vs n
  figure1b_ecdf.png/.csv            ECDFs of calibration quantiles at the ECDF point
  figure1c_mmd.png/.csv             MMD^2 to the non-private posterior vs n
  figure2_traces.png/.csv           first Gibbs iterations of several chains
  report.json                       settings, every score, timings and the checks

Checks (in report.json and printed): Gibbs and non-private within the KS band of a calibrated
method at every point; naive outside it at small n*epsilon; OPS over-dispersed; Gibbs MMD^2 at
most naive's. With --check the exit status is 1 if any check fails.
"""


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer (got {text!r})") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer (got {value})")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pymc-dp",
        description="Noise-aware Bayesian inference from differentially private releases.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    rep = sub.add_parser(
        "reproduce",
        help="regenerate the paper's Figures 1a-c and 2 with their numbers",
        description=__doc__.split("\n\n")[1],
        epilog=_REPRODUCE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rep.add_argument(
        "--output-dir",
        default="reproduce_output",
        help="directory for figures, CSV and JSON (default: %(default)s)",
    )
    rep.add_argument(
        "--quick",
        action="store_true",
        help="small grid for CI: n in {10, 100, 1000}, 200 trials, 500 + 2000 iterations",
    )
    rep.add_argument(
        "--trials",
        type=_positive_int,
        help="calibration trials per grid point (default: 1000, or 200 with --quick)",
    )
    rep.add_argument(
        "--jobs",
        type=_positive_int,
        help="worker processes for grid points (default: the number of CPUs)",
    )
    rep.add_argument(
        "--seed", type=int, default=2018, help="seed of the whole study (default: %(default)s)"
    )
    rep.add_argument("--no-progress", action="store_true", help="do not show a progress bar")
    rep.add_argument(
        "--check", action="store_true", help="exit with status 1 if any qualitative check fails"
    )
    return parser


def _reproduce(args: argparse.Namespace) -> int:
    from pymc_dp.studies.reproduce import PAPER, QUICK, reproduce

    grid = QUICK if args.quick else PAPER
    if args.trials is not None:
        grid = dataclasses.replace(
            grid, settings=dataclasses.replace(grid.settings, trials=args.trials)
        )
    report = reproduce(
        args.output_dir, grid, seed=args.seed, jobs=args.jobs, progress=not args.no_progress
    )
    print(f"wrote {len(report.files)} files to {report.output_dir} in {report.wall_seconds:.0f} s")
    for check in report.checks:
        print(f"  [{'pass' if check.passed else 'FAIL'}] {check.name}: {check.claim}")
    return 0 if report.passed or not args.check else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``pymc-dp`` command line.

    Parameters
    ----------
    argv
        Arguments without the program name (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        Exit status.
    """
    args = _parser().parse_args(argv)
    return {"reproduce": _reproduce}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
