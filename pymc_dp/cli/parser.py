"""The argument parser of ``pymc-dp``, built without importing PyMC, NumPy or PyTensor.

The ``--family`` choices, the family options and the table of families come from the families'
declarations (:mod:`pymc_dp.cli.texts`), read when the parser is built, so a family registered
before that is offered like a built-in one. Help texts pass through
:func:`~pymc_dp.cli.texts.plain_text`, so reStructuredText markup never reaches the terminal.
"""

from __future__ import annotations

import argparse
import re
from typing import Any, NoReturn

# The checks of the release's arguments live beside the parser; importable from here too.
from pymc_dp.cli.plans import check_release_args, family_settings
from pymc_dp.cli.texts import (
    FIT_DESCRIPTION,
    RELEASE_DESCRIPTION,
    REPRODUCE_DESCRIPTION,
    REPRODUCE_EPILOG,
    family_names,
    family_options,
    fit_epilog,
    plain_text,
    release_epilog,
    windowed_families,
)

__all__ = ["build_parser", "check_release_args", "family_settings"]


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer (got {text!r})") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer (got {value})")
    return value


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number (got {text!r})") from None


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a seed >= 0 (got {text!r})") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a seed >= 0 (got {value})")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse with numbers for values and a one-line error.

    argparse takes ``-1e-3``, ``-inf`` or ``-0.5,1.5`` for options (only ``-1`` and ``-.5`` look
    like numbers to it) and then dumps the whole usage; here any word starting with ``-`` and a
    digit, ``-.`` and a digit, ``-inf`` or ``-nan`` is a value (no option of pymc-dp starts so),
    and an error is one line naming the argument, with a pointer to ``--help``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # argparse reads this (undocumented) attribute to tell negative numbers from options.
        self._negative_number_matcher = re.compile(r"^-(?:\d|\.\d|inf(?:inity)?$|nan$)", re.I)

    def error(self, message: str) -> NoReturn:
        """Print ``PROG: error: MESSAGE`` and a pointer to ``--help``; exit with status 2."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


_OPTION_TYPES = {"count": _positive_int, "number": _number, "categories": str}
"""The argument type of each kind of family option (FamilyOption.kind)."""


def build_parser() -> argparse.ArgumentParser:
    """The ``pymc-dp`` parser with its ``release``, ``fit`` and ``reproduce`` subcommands."""
    parser = _Parser(
        prog="pymc-dp",
        description="Noise-aware Bayesian inference from differentially private releases.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_release_parser(sub)
    _add_fit_parser(sub)
    _add_reproduce_parser(sub)
    return parser


def _add_release_parser(sub: Any) -> None:
    rel = sub.add_parser(
        "release",
        help="curator: release a column's sufficient statistic with Laplace noise (JSON)",
        description=plain_text(RELEASE_DESCRIPTION),
        epilog=plain_text(release_epilog()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rel.set_defaults(subparser=rel)  # for its own error messages, "pymc-dp release: error: ..."
    rel.add_argument(
        "data",
        metavar="DATA",
        nargs="?",
        help="CSV file with a header row, or Parquet: a file, a directory of files or a quoted "
        "glob such as 'data/*.parquet' (streamed, never read whole); not with --dry-run",
    )
    rel.add_argument(
        "--column",
        metavar="COLUMN[,COLUMN...]",
        help="name of the column holding the records (required without --dry-run); several, "
        "comma-separated, release each with its share of --epsilon-split in one file",
    )
    rel.add_argument(
        "--family",
        required=True,
        metavar="FAMILY[,FAMILY...]",
        help="distribution of one record: " + ", ".join(family_names()) + "; one per "
        "--column, comma-separated; or regression (with --x and --y); or marginals (with "
        "--marginals and --levels)",
    )
    rel.add_argument(
        "--epsilon",
        type=_number,
        help="privacy budget epsilon > 0 of the whole release (private bounds included); "
        "required except with --mechanism discrete-gaussian",
    )
    rel.add_argument(
        "--epsilon-split",
        metavar="E1,E2,...",
        help="with several --column: each column's epsilon, in their order, summing to "
        "--epsilon (never split silently; sequential composition, charged once)",
    )
    rel.add_argument(
        "--mechanism",
        choices=["discrete-laplace", "discrete-gaussian", "laplace-float"],
        help="noise mechanism (default: discrete-laplace; laplace-float with --seed)",
    )
    rel.add_argument(
        "--rho",
        type=_number,
        help="with --mechanism discrete-gaussian: zCDP budget rho > 0 of the whole release",
    )
    rel.add_argument(
        "--budget",
        metavar="LEDGER",
        help="JSON privacy ledger of the data set: the release is charged to it first",
    )
    rel.add_argument(
        "--budget-total",
        type=_number,
        metavar="TOTAL",
        help="with --budget: create LEDGER with this total (epsilon, or rho for the Gaussian)",
    )
    rel.add_argument(
        "--output", "-o", help="JSON file to write the release to (required without --dry-run)"
    )
    rel.add_argument(
        "--overwrite",
        action="store_true",
        help="replace OUTPUT if it exists (each new release of the same data spends epsilon "
        "again, so this is off by default)",
    )
    grp = rel.add_argument_group(
        "grouped release (one release per group, epsilon spent once: parallel composition)"
    )
    grp.add_argument(
        "--by",
        metavar="COLUMN",
        help="column holding each record's group key; writes one file with every group's "
        "release (needs --groups and --public-sizes; a CSV file, or Parquet files streamed "
        "or summed on --scheduler)",
    )
    grp.add_argument(
        "--groups",
        metavar="A,B,...",
        help="with --by: the public group keys, comma-separated, never read from the data; a "
        "record with another key stops the release",
    )
    grp.add_argument(
        "--public-sizes",
        nargs="?",
        const="public",
        metavar="N1,N2,...",
        help="with --by: declare that the group sizes are public (each is published exactly); "
        "optionally give them, in the order of --groups, to have them checked",
    )
    dry = rel.add_argument_group("planning a release (reads no data, spends no budget)")
    dry.add_argument(
        "--dry-run",
        action="store_true",
        help="print the noise's standard deviation against the statistic's plausible range, "
        "from public values only (--n, --epsilon, the family and its window); no DATA is read "
        "and no noise is drawn",
    )
    dry.add_argument(
        "--n",
        type=_positive_int,
        metavar="N",
        help="with --dry-run: the (public) number of records",
    )
    fam = rel.add_argument_group("family options (shared by the columns of that family)")
    for flag, (option, takes, _) in family_options().items():
        try:
            fam.add_argument(
                f"--{flag}",
                type=_OPTION_TYPES[option.kind],
                metavar=option.metavar,
                help=f"{', '.join(takes)}: {option.help}",
            )
        except argparse.ArgumentError:
            raise ValueError(
                f"the option --{flag} of the {', '.join(takes)} family is an option of pymc-dp "
                "release already: declare the family with another flag"
            ) from None
    win = rel.add_argument_group(f"window (for {', '.join(windowed_families())})")
    how = win.add_mutually_exclusive_group()
    how.add_argument(
        "--bounds",
        nargs=2,
        type=_number,
        action="append",
        metavar=("A", "B"),
        help="public window [A, B], chosen without looking at the data; with several "
        "--column, once per windowed column, in their order",
    )
    how.add_argument(
        "--private-bounds",
        nargs=2,
        type=_number,
        metavar=("LO", "HI"),
        help="choose the window from the data with PrivateQuantile, searching the public range "
        "[LO, HI] (records are clamped to it)",
    )
    win.add_argument(
        "--bounds-share",
        type=_number,
        help="with --private-bounds: share of epsilon spent on the window (default: 0.1)",
    )
    win.add_argument(
        "--count-share",
        type=_number,
        help="share of epsilon spent on the number of records inside the window, released "
        "with the window sum of a one-statistic windowed family (Poisson, Exponential, ...) so "
        "that the fit can tell a window holding most records from one holding few (default: "
        "0.1; 0 releases the sum alone)",
    )
    win.add_argument(
        "--bounds-quantiles",
        nargs=2,
        type=_number,
        metavar=("QLO", "QHI"),
        help="with --private-bounds: quantiles of the data the window estimates "
        "(default: 0.025 0.975)",
    )
    reg = rel.add_argument_group(
        "regression (--family regression: the sufficient statistics of y on x, 2019 paper)"
    )
    reg.add_argument("--x", metavar="COL1,COL2,...", help="the covariate columns, comma-separated")
    reg.add_argument("--y", metavar="COLUMN", help="the response column")
    reg.add_argument(
        "--x-bounds",
        nargs="+",
        type=_number,
        metavar="LO HI",
        help="public box of the covariates: LO HI for each --x column, in order",
    )
    reg.add_argument(
        "--y-bounds",
        nargs=2,
        type=_number,
        metavar=("LO", "HI"),
        help="public range of the response",
    )
    reg.add_argument(
        "--binary",
        metavar="COL1,...",
        help="--x columns that are 0 or 1 (a treated/untreated indicator): every record is "
        "checked, the box of each must hold 0 and 1, and the release records them so that "
        "pymc-dp fit models one such covariate as Bernoulli (with at most two covariates), or "
        "two covariates both declared binary by their four combinations",
    )
    reg.add_argument(
        "--factor",
        metavar="COL1,...",
        help="--x columns that are the dummy columns of one categorical factor, one per level "
        "but the reference level (all 0), in the order of the levels: every record is checked "
        "to hold 0 or 1 in each with at most one 1, the box of each must hold 0 and 1, and the "
        "release records them (the noise is unchanged); when every covariate is one (at most "
        "three), pymc-dp fit models the levels' probabilities",
    )
    mar = rel.add_argument_group(
        "marginal tables (--family marginals: noisy count tables of categorical columns)"
    )
    mar.add_argument(
        "--marginals",
        metavar="A:B,B:C,...",
        help="the tables to release over the --column names, comma-separated, columns of one "
        "table joined by ':' (a one-way table is a single name)",
    )
    mar.add_argument(
        "--levels",
        nargs="+",
        metavar="COLUMN=L1,L2,...",
        help="the public labels of each --column (never read from the data; a record with "
        "another label stops the release)",
    )
    rel.add_argument(
        "--clamp",
        action="store_true",
        help="clamp records outside the family's range to it instead of stopping (recorded in "
        'the release as "clamped": true)',
    )
    rel.add_argument(
        "--format",
        choices=["csv", "parquet"],
        help="format of DATA (default: from its name: .csv, .csv.gz, .parquet); Parquet needs "
        "pyarrow",
    )
    rel.add_argument(
        "--seed",
        type=_seed,
        help="seed of the noise: makes the run a study with floating-point Laplace noise "
        "(laplace-float), for tests and examples only; without it the release is a real one, "
        "with OpenDP's vetted noise from operating-system randomness",
    )
    rel.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="Parquet only: run the exact sums on the running Dask scheduler at ADDRESS (e.g. "
        "tcp://10.0.0.5:8786), where the workers read the files; only integer totals come "
        "back, and the noise is added here. Needs pymc-dp[dask]",
    )


def _add_fit_parser(sub: Any) -> None:
    fit = sub.add_parser(
        "fit",
        help="analyst: fit a release's model, noise-aware (ArviZ file, summary, plots)",
        description=plain_text(FIT_DESCRIPTION),
        epilog=plain_text(fit_epilog()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fit.add_argument("release", metavar="RELEASE", help="JSON release written by pymc-dp release")
    fit.add_argument(
        "--prior",
        nargs="+",
        action="extend",
        default=[],
        metavar="NAME=VALUE",
        help="prior hyperparameters after RELEASE, e.g. --prior alpha=3 beta=5 (names and "
        "defaults below)",
    )
    fit.add_argument(
        "--column",
        metavar="COLUMN",
        help="with a file of several columns: fit this column only (default: each, in "
        "OUTPUT_DIR/COLUMN)",
    )
    fit.add_argument(
        "--output-dir",
        default="fit_output",
        help="directory for the outputs (default: %(default)s)",
    )
    fit.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the outputs of an earlier fit in OUTPUT_DIR (off by default)",
    )
    fit.add_argument(
        "--format",
        choices=["netcdf", "zarr"],
        default="netcdf",
        help="posterior file format: netcdf writes posterior.nc, zarr writes posterior.zarr "
        "(needs zarr) (default: %(default)s)",
    )
    fit.add_argument(
        "--draws", type=_positive_int, default=5000, help="draws per chain (default: %(default)s)"
    )
    fit.add_argument(
        "--tune",
        type=_positive_int,
        default=1000,
        help="burn-in iterations per chain, discarded (default: %(default)s)",
    )
    fit.add_argument(
        "--chains", type=_positive_int, default=4, help="number of chains (default: %(default)s)"
    )
    fit.add_argument(
        "--cores",
        type=_positive_int,
        default=1,
        help="chains run in parallel (default: %(default)s; iterations are cheap, so one "
        "process is usually fastest)",
    )
    fit.add_argument(
        "--likelihood",
        choices=("auto", "clt", "exact"),
        default="auto",
        help="exact: no CLT (counts: a sum over every value of s; window sums of continuous "
        "records: a lattice likelihood within 0.01 of exact, or the records as latent "
        "variables for (sum x, sum x^2)); clt: the CLT normal for s; auto (default): exact for "
        "counts whenever it is affordable, for continuous records where the CLT is untrusted",
    )
    fit.add_argument(
        "--seed", type=_seed, help="seed of the sampler, for a reproducible posterior file"
    )
    fit.add_argument(
        "--synthetic",
        type=_positive_int,
        metavar="M",
        help="with a marginal release: write M synthetic data sets (synthetic_1.csv, ...), "
        "each drawn from a different posterior draw",
    )
    fit.add_argument(
        "--no-progress", action="store_true", help="do not show PyMC's sampling progress bar"
    )


def _add_reproduce_parser(sub: Any) -> None:
    rep = sub.add_parser(
        "reproduce",
        help="regenerate the paper's Figures 1a-c and 2 with their numbers",
        description=plain_text(REPRODUCE_DESCRIPTION),
        epilog=plain_text(REPRODUCE_EPILOG),
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
        "--likelihood",
        choices=("auto", "clt"),
        default="auto",
        help="clt: the paper's sampler everywhere; auto (default): the exact likelihood "
        "(counts, window sums) where the CLT is outside its measured safe region (small n)",
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
