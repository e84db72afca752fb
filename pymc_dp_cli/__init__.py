"""The ``pymc-dp`` console entry point, light enough to answer ``--help`` in well under a second.

This package imports neither PyMC nor NumPy nor :mod:`pymc_dp` (whose ``__init__`` loads the
whole inference stack): it parses the arguments, checks those that need no data, and only then
imports the module that runs the command (:mod:`pymc_dp.cli_release`, :mod:`pymc_dp.cli_fit`,
:mod:`pymc_dp.cli`). It is a separate top-level package because importing any ``pymc_dp.*``
module runs ``pymc_dp/__init__.py`` first.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from pymc_dp_cli.messages import InputError, fail
from pymc_dp_cli.parser import build_parser
from pymc_dp_cli.plans import check_release_args, regression_settings, release_plan

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
        ``fit`` was interrupted (nothing written).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "release":
        check_release_args(args.subparser, args)
        try:  # family options and the window are public: checked before anything is imported
            if args.family.strip() == "regression":
                regression = regression_settings(args)
            else:
                plans = release_plan(args)
        except InputError as err:
            return fail("release", str(err))
        if args.family.strip() == "regression":
            from pymc_dp import cli_regression

            return cli_regression.release_command(args, regression)
        if args.dry_run:
            from pymc_dp.cli_dry_run import dry_run

            return dry_run(args, plans)
        from pymc_dp.cli_release import release_command

        return release_command(args, plans)
    if args.command == "fit":
        from pymc_dp.cli_fit import fit_command

        return fit_command(args)
    from pymc_dp.cli import reproduce_command

    return reproduce_command(args)


if __name__ == "__main__":
    sys.exit(main())
