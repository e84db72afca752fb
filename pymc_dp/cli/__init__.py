"""The ``pymc-dp`` command line: one light parser, then one module per subcommand.

``pymc-dp release`` is the curator's side: it reads one column of a CSV or Parquet file and
writes the noisy sufficient statistic as a JSON release (:mod:`pymc_dp.cli.release`); several
columns with an explicit split of ε, or a categorical column with public labels, go to one file
of named columns (:mod:`pymc_dp.cli.columns`), and ``--family regression`` releases a linear
regression's statistics (:mod:`pymc_dp.cli.regression`). With ``--dry-run`` it reads nothing and
prints the noise a release would add (:mod:`pymc_dp.cli.dry_run`). ``pymc-dp fit`` is the
analyst's: it reads a release and fits its model with the noise-aware posterior, writing an
ArviZ posterior file, a summary table and plots (:mod:`pymc_dp.cli.fit`). ``pymc-dp reproduce``
regenerates the experiments of Bernstein & Sheldon (2018) (:mod:`pymc_dp.cli.reproduce`).
Bad input ends with exit status 2 and a one-line message; an interrupted fit or release
(Ctrl-C) ends with status 130 and writes nothing.

This package, its parser (:mod:`~pymc_dp.cli.parser`), argument checks
(:mod:`~pymc_dp.cli.plans`), help texts and messages import neither PyMC nor NumPy (the package
``pymc_dp`` itself loads lazily), so ``--help`` and argument errors answer in well under a
second; :func:`main` imports the subcommand's module only once the arguments are checked.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pymc_dp.cli.messages import InputError, fail
from pymc_dp.cli.parser import build_parser
from pymc_dp.cli.plans import check_release_args, regression_settings, release_plan

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``pymc-dp`` command line.

    Parameters
    ----------
    argv
        Arguments without the program name (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        Exit status: 0 on success, 2 on bad input (with a one-line message on stderr), 130 when
        ``fit`` or ``release`` was interrupted (nothing written; a charge already made stays in
        the ledger).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "release":
        check_release_args(args.subparser, args)
        try:
            return _release(args)
        except KeyboardInterrupt:
            # A charge made before the interrupt is in the ledger already; no output appears.
            print("pymc-dp release: interrupted; no release written", file=sys.stderr)
            return 130
    if args.command == "fit":
        from pymc_dp.cli.fit import fit_command

        return fit_command(args)
    from pymc_dp.cli.reproduce import reproduce_command

    return reproduce_command(args)


def _release(args: argparse.Namespace) -> int:
    """``pymc-dp release`` once its arguments are checked."""
    if args.family.strip() == "marginals":
        from pymc_dp.cli import marginals as marginals_cli

        try:
            settings = marginals_cli.marginals_settings(args)
        except InputError as err:
            return fail("release", str(err))
        return marginals_cli.release_command(args, settings)
    try:  # family options and the window are public: checked before anything is imported
        if args.family.strip() == "regression":
            regression = regression_settings(args)
        else:
            plans = release_plan(args)
    except InputError as err:
        return fail("release", str(err))
    if args.family.strip() == "regression":
        from pymc_dp.cli import regression as regression_cli

        return regression_cli.release_command(args, regression)
    if args.dry_run:
        from pymc_dp.cli.dry_run import dry_run

        return dry_run(args, plans)
    from pymc_dp.cli.release import release_command

    return release_command(args, plans)


if __name__ == "__main__":
    sys.exit(main())
