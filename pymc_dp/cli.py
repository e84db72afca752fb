"""The ``pymc-dp`` command line.

``pymc-dp reproduce`` regenerates the experiments of Bernstein & Sheldon (2018), §4 and
Appendix E: Figure 1a (calibration KS against n), 1b (calibration ECDFs), 1c (MMD to the
non-private posterior) and 2 (Gibbs traces), as PNG files with every plotted number in CSV and a
JSON report. ``--quick`` runs a small grid for CI that still checks every qualitative claim.

``pymc-dp release`` is the curator's side: it reads one column of a CSV or Parquet file and
writes the noisy sufficient statistic as a JSON release. ``pymc-dp fit`` is the analyst's: it
reads a release and fits the family's conjugate model with its noise-aware posterior, writing an
ArviZ posterior file, a summary table and plots. Bad input ends with exit status 2 and a
one-line message; an interrupted fit (Ctrl-C) ends with status 130 and writes nothing.
The work is done in :mod:`pymc_dp.io` and :mod:`pymc_dp.models`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

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


_RELEASE_DESCRIPTION = """\
Curator: release the sufficient statistic of one column of a CSV file or of Parquet files under
epsilon-differential privacy, as a JSON release for pymc-dp fit (or pymc_dp.Release.from_json).
The statistic is computed exactly in integers (the same records give the same statistic in any
order or partitioning); Parquet files, directories and globs are streamed in batches, or summed on
a Dask cluster with --scheduler. OpenDP's discrete Laplace noise with scale sensitivity/epsilon is
added to it (a float statistic rounded first to a public power-of-two quantum, the rounding added
to the sensitivity; epsilon less the window's share with --private-bounds), and only the noisy
value is written, with n, epsilon, the sensitivity, the bounds, the family, the mechanism, the
quantum, the records' grid step and the library version. The exact statistic is never printed or
written, and error messages name file lines and rules, never a record's value."""

_RELEASE_EPILOG = """\
families (records; sensitivity, or "window" for a family released over a window):
  bernoulli     records 0/1 (or true/false)                  sensitivity 1
  binomial      successes out of --trials T                  sensitivity T
  categorical   codes 0..K-1 with --categories K             all K counts, sensitivity 2
  exponential   x >= 0                                       window (--bounds or --private-bounds)
  gamma         x >= 0 with known --shape ALPHA              window
  poisson       counts 0, 1, 2, ...                          window
  geometric     trials to first success 1, 2, ...            window
  normal        any x: (sum x, sum x^2); sum x with --sigma  window
  lognormal     x > 0: the same on log x                     window
Records outside a window [A, B] are left out of the sums; the sensitivity accounts for a record
that may move in or out of it (Appendix C of Bernstein & Sheldon 2018). Choose the window without
looking at the data, or let --private-bounds choose it with part of the budget.

records are read exactly (n is public and is the number of lines after the header):
  a blank line, a line with more or fewer fields than the header (e.g. 1,000 under a one-column
  header), a missing value or a value that is not a plain number stops the release, naming the
  file line. A record outside the family's range (e.g. 7 successes of 5 trials) stops it too,
  unless --clamp is given: then such records are clamped to the range, the release says
  "clamped": true, and the sensitivity is unchanged.

noise and seeds:
  Without --seed (a real release) the noise is vetted: OpenDP's discrete Laplace (or, with
  --mechanism discrete-gaussian --rho RHO, discrete Gaussian under rho-zCDP) on the exact integer
  statistic, drawn from operating-system randomness; it cannot be seeded. --seed makes the run a
  study: the noise is then the floating-point Laplace sampler ("laplace-float", recorded in the
  file), reproducible and open to floating-point attacks (Mironov 2012) -- for tests and examples
  only: anyone who knows the seed can subtract the noise. --seed with a vetted --mechanism is
  refused. The private window (--private-bounds) is still drawn with floating-point sampling.

privacy budget:
  --budget LEDGER charges the release to a JSON ledger of one data set before any noise is drawn
  and refuses it if the total would be exceeded; create the ledger on first use with
  --budget-total TOTAL (epsilon, or rho for discrete-gaussian). The release records what was
  spent and what remains. A retry, or --overwrite, is charged again.

examples:
  pymc-dp release visits.csv --column visits --family poisson --bounds 0 40 \\
      --epsilon 0.5 --output visits_release.json
  pymc-dp release survey.parquet --column answer --family categorical --categories 4 \\
      --epsilon 1 --output answer_release.json
  pymc-dp release waits.csv --column minutes --family exponential \\
      --private-bounds 0 600 --bounds-share 0.1 --epsilon 1 --output waits_release.json
"""

_FIT_DESCRIPTION = """\
Analyst: fit the conjugate model of a release's family with its noise-aware posterior
(pm.sample with a NoisySuffStat node: exact draws of a scalar θ, NUTS within the partially
collapsed Gibbs sampler for a vector statistic) and write, to OUTPUT_DIR, the posterior as an
ArviZ file
with the release in its attrs and constant_data, the ArviZ summary (printed and as CSV), a plot of
the posterior against the naive one that treats the noisy value as exact, and a trace plot."""

_FIT_EPILOG = """\
models (θ's conjugate prior, with its hyperparameter names and defaults):
  bernoulli, binomial, geometric  p ~ Beta(alpha=1, beta=1)
  categorical                     p ~ Dirichlet(alpha=1)   (one value, or K values: alpha=1,2,1)
  exponential, poisson            lam ~ Gamma(alpha=1, beta=1)   (beta is the rate)
  gamma                           rate ~ Gamma(alpha=1, beta=1)
  normal, lognormal               mu, sigma2 ~ NormalInverseGamma(mean=0, kappa=1, alpha=1, beta=1)
                                  i.e. sigma2 ~ InverseGamma(alpha, beta),
                                  mu | sigma2 ~ Normal(mean, sd = sqrt(sigma2 / kappa))
  normal, lognormal with sigma    mu ~ Normal(mean=0, sd=10)
For lognormal the model is on log x. The same model in Python: pymc_dp.models.build_model.

files written to OUTPUT_DIR:
  posterior.nc (or .zarr)  posterior, sample_stats, observed_data, constant_data; attrs hold the
                           release JSON (pymc_dp_release_y) and the prior (pymc_dp_prior)
  summary.csv              az.summary of θ, the latent statistic y_s and the noise variance
  posterior.png            DP posterior of each parameter against the naive posterior
  trace.png                trace plot of θ
The files are written to a hidden staging directory in OUTPUT_DIR and moved into place together
once sampling has completed. Ctrl-C during the fit exits with status 130 and writes nothing;
the outputs of an earlier fit are replaced only with --overwrite.

Check r_hat and ess_bulk in the summary; a note is printed when R-hat exceeds 1.05 or the bulk
ESS falls below 100 per chain.

examples:
  pymc-dp fit visits_release.json --prior alpha=2 beta=0.5 --output-dir visits_fit
  pymc-dp fit answer_release.json --prior alpha=1,1,1,1 --draws 10000 --chains 2 --seed 7
"""

_FAMILY_CLASSES = {
    "bernoulli": "Bernoulli",
    "binomial": "Binomial",
    "categorical": "Categorical",
    "exponential": "Exponential",
    "gamma": "Gamma",
    "poisson": "Poisson",
    "geometric": "Geometric",
    "normal": "Normal",
    "lognormal": "LogNormal",
}
_WINDOWED = {"exponential", "gamma", "poisson", "geometric", "normal", "lognormal"}
# Which family option each family takes, and whether it must be given.
_FAMILY_OPTIONS = {
    "trials": ({"binomial"}, {"binomial"}),
    "categories": ({"categorical"}, {"categorical"}),
    "shape": ({"gamma"}, {"gamma"}),
    "sigma": ({"normal", "lognormal"}, set()),
}


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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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
        description=_RELEASE_DESCRIPTION,
        epilog=_RELEASE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rel.add_argument(
        "data",
        metavar="DATA",
        help="CSV file with a header row, or Parquet: a file, a directory of files or a quoted "
        "glob such as 'data/*.parquet' (streamed, never read whole)",
    )
    rel.add_argument("--column", required=True, help="name of the column holding the records")
    rel.add_argument(
        "--family",
        required=True,
        choices=list(_FAMILY_CLASSES),
        metavar="FAMILY",
        help="distribution of one record: " + ", ".join(_FAMILY_CLASSES),
    )
    rel.add_argument(
        "--epsilon",
        type=_number,
        help="privacy budget epsilon > 0 of the whole release (private bounds included); "
        "required except with --mechanism discrete-gaussian",
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
    rel.add_argument("--output", "-o", required=True, help="JSON file to write the release to")
    rel.add_argument(
        "--overwrite",
        action="store_true",
        help="replace OUTPUT if it exists (each new release of the same data spends epsilon "
        "again, so this is off by default)",
    )
    fam = rel.add_argument_group("family options")
    fam.add_argument("--trials", type=_positive_int, help="binomial: trials per record")
    fam.add_argument("--categories", type=_positive_int, help="categorical: number K >= 2")
    fam.add_argument("--shape", type=_number, help="gamma: the known shape alpha of every record")
    fam.add_argument(
        "--sigma",
        type=_number,
        help="normal, lognormal: known standard deviation (of log x for lognormal); then only "
        "sum x is released and the model's prior is on the mean alone",
    )
    win = rel.add_argument_group(
        "window (for exponential, gamma, poisson, geometric, normal, lognormal)"
    )
    how = win.add_mutually_exclusive_group()
    how.add_argument(
        "--bounds",
        nargs=2,
        type=_number,
        metavar=("A", "B"),
        help="public window [A, B], chosen without looking at the data",
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
        "--bounds-quantiles",
        nargs=2,
        type=_number,
        metavar=("QLO", "QHI"),
        help="with --private-bounds: quantiles of the data the window estimates "
        "(default: 0.025 0.975)",
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
        description=_FIT_DESCRIPTION,
        epilog=_FIT_EPILOG,
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
        "--seed", type=_seed, help="seed of the sampler, for a reproducible posterior file"
    )
    fit.add_argument(
        "--no-progress", action="store_true", help="do not show PyMC's sampling progress bar"
    )


def _add_reproduce_parser(sub: Any) -> None:
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


class _InputError(Exception):
    """Bad input found by the command line itself; reported in one line, exit status 2."""


def _fail(command: str, message: str) -> int:
    print(f"pymc-dp {command}: error: {message}", file=sys.stderr)
    return 2


def _family_settings(args: argparse.Namespace) -> dict[str, Any]:
    """Keyword arguments of :func:`pymc_dp.release` for the family options given."""
    settings = {}
    for option, (allowed, required) in _FAMILY_OPTIONS.items():
        value = getattr(args, option)
        if value is None:
            if args.family in required:
                raise _InputError(f"the {args.family} family needs --{option}")
            continue
        if args.family not in allowed:
            raise _InputError(
                f"--{option} applies to {', '.join(sorted(allowed))}, not {args.family}"
            )
        settings["alpha" if option == "shape" else option] = value
    if args.family in _WINDOWED:
        if args.bounds is None and args.private_bounds is None:
            raise _InputError(
                f"the {args.family} family is released over a window: give --bounds A B "
                "(chosen without looking at the data) or --private-bounds LO HI"
            )
        if args.bounds is not None:
            given = [
                f"--{opt.replace('_', '-')}"
                for opt in ("bounds_share", "bounds_quantiles")
                if getattr(args, opt) is not None
            ]
            if given:
                raise _InputError(f"{' and '.join(given)} apply only with --private-bounds")
            settings["bounds"] = tuple(args.bounds)
        else:
            settings.update(
                bounds="private",
                bounds_range=tuple(args.private_bounds),
                bounds_share=0.1 if args.bounds_share is None else args.bounds_share,
                bounds_quantiles=(0.025, 0.975)
                if args.bounds_quantiles is None
                else tuple(args.bounds_quantiles),
            )
    elif args.bounds is not None or args.private_bounds is not None:
        raise _InputError(
            f"the {args.family} family has bounded records; --bounds and --private-bounds apply "
            f"only to {', '.join(sorted(_WINDOWED))}"
        )
    return settings


def _release(args: argparse.Namespace) -> int:
    output = Path(args.output)
    try:
        settings = _family_settings(args)
        if output.exists() and not args.overwrite:
            raise _InputError(
                f"{output} exists; pass --overwrite to replace it (a new release of the same "
                "data spends epsilon again)"
            )
        # Checked before any noise is drawn, so that a bad path wastes no privacy budget.
        if output.is_dir():
            raise _InputError(f"{output} is a directory; --output takes a file name")
        if not output.parent.is_dir():
            raise _InputError(f"{output.parent} is not a directory; create it first")
        import pymc as pm

        from pymc_dp._validation import check_positive
        from pymc_dp.io import read_column, write_release
        from pymc_dp.release import release

        gaussian = args.mechanism == "discrete-gaussian"
        if gaussian:
            if args.rho is None or args.epsilon is not None:
                raise _InputError("--mechanism discrete-gaussian takes --rho, not --epsilon")
            check_positive(args.rho, "--rho")
        else:
            if args.epsilon is None or args.rho is not None:
                raise _InputError(
                    "--epsilon is required (--rho only with --mechanism discrete-gaussian)"
                )
            check_positive(args.epsilon, "--epsilon")
        family = getattr(pm, _FAMILY_CLASSES[args.family])
        parquet = _is_parquet(args)
        if not parquet and args.scheduler is not None:
            raise _InputError("--scheduler reads Parquet data; convert the CSV file first")
        budget = _open_budget(args, "rho" if gaussian else "epsilon")
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
        if parquet:
            rel = _release_parquet(args, family, options)
        else:
            records = read_column(args.data, args.column, file_format=args.format)
            rel = release(records, family, **options)
        if budget is not None:
            # Saved before the release is written: a failed write still counts as spent.
            budget.save(args.budget)
        write_release(rel, output, overwrite=args.overwrite)
    except (_InputError, OSError, OverflowError, TypeError, ValueError) as err:
        return _fail("release", _one_line(err))
    params = ", ".join(f"{k}={v:g}" for k, v in rel.family_params.items())
    spent = f" + {rel.bounds_epsilon:g} for the private window" if rel.bounds_epsilon else ""
    print(
        f"wrote {output}: {rel.family}({params}) release of column {args.column!r}, "
        f"n = {rel.n}, epsilon = {rel.epsilon:g}{spent}, sensitivity = {rel.sensitivity:g}, "
        f"{rel.mechanism} scale = {rel.scale:g}"
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


def _is_parquet(args: argparse.Namespace) -> bool:
    """Whether DATA is Parquet: by --format, or a directory, a glob or a .parquet name."""
    import glob

    if args.format is not None:
        return args.format == "parquet"
    path = Path(args.data)
    return path.is_dir() or glob.has_magic(args.data) or path.suffix.lower() in (".parquet", ".pq")


def _release_parquet(args: argparse.Namespace, family: Any, options: dict[str, Any]) -> Any:
    """Release from Parquet, streamed here or summed on a Dask cluster (--scheduler)."""
    from pymc_dp.frames import parquet_source
    from pymc_dp.release import release

    source = parquet_source(args.data)  # checks that the files exist and are Parquet
    if args.column not in source.columns:
        raise _InputError(
            f"{args.data}: no column {args.column!r}; the columns are "
            f"{', '.join(map(repr, source.columns))}"
        )
    try:
        if args.scheduler is None:
            return release(source, family, column=args.column, **options)
        try:
            import dask.dataframe as dd
            from distributed import Client
        except ImportError:
            raise _InputError(
                "--scheduler needs Dask; install it with pip install 'pymc-dp[dask]'"
            ) from None
        files = source.dataset.files
        with Client(args.scheduler, timeout="30s") as client:
            # A partition per row group: the workers share the files, memory stays bounded.
            frame = dd.read_parquet(files, columns=[args.column], split_row_groups=True)
            return release(frame, family, column=args.column, client=client, **options)
    except ValueError as err:
        raise _InputError(f"{args.data}: {err}") from None


def _open_budget(args: argparse.Namespace, unit: str) -> Any:
    """The ledger named by --budget (created with --budget-total), or None."""
    from pymc_dp.budget import PrivacyBudget

    if args.budget is None:
        if args.budget_total is not None:
            raise _InputError("--budget-total needs --budget LEDGER")
        return None
    path = Path(args.budget)
    if path.exists():
        if args.budget_total is not None:
            raise _InputError(f"{path} exists: its total is fixed; drop --budget-total")
        budget = PrivacyBudget.load(path)
    else:
        if args.budget_total is None:
            raise _InputError(f"{path} does not exist; create it with --budget-total TOTAL")
        budget = PrivacyBudget(**{unit: args.budget_total})
    if budget.unit != unit:
        raise _InputError(f"{path} accounts in {budget.unit}, but this release spends {unit}")
    return budget


def _one_line(err: BaseException) -> str:
    text = str(err) or type(err).__name__
    if isinstance(err, OSError) and err.filename is not None and err.strerror:
        text = f"{err.filename}: {err.strerror[0].lower()}{err.strerror[1:]}"
    return " ".join(text.split())


def _parse_prior(items: Sequence[str]) -> dict[str, Any]:
    """``["alpha=3", "beta=5"]`` → ``{"alpha": 3.0, "beta": 5.0}``; ``a=1,2`` → a list."""
    prior: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name or not text.strip():
            raise _InputError(
                f"--prior takes NAME=VALUE items, e.g. alpha=3 (got {item!r}); give only one "
                "RELEASE, before --prior"
            )
        if name in prior:
            raise _InputError(f"--prior sets {name} twice")
        try:
            values = [float(v) for v in text.split(",")]
        except ValueError:
            raise _InputError(
                f"--prior {name} must be a number or comma-separated numbers (got {text!r})"
            ) from None
        prior[name] = values[0] if len(values) == 1 else values
    return prior


def _fit(args: argparse.Namespace) -> int:
    try:
        return _checked_fit(args)
    except KeyboardInterrupt:  # Ctrl-C while compiling, sampling or saving
        print(
            "pymc-dp fit: interrupted; no output written (a fit is kept only when sampling "
            "completed)",
            file=sys.stderr,
        )
        return 130


def _checked_fit(args: argparse.Namespace) -> int:
    from pymc_dp.atomic import existing_outputs
    from pymc_dp.io import check_posterior_path, read_release
    from pymc_dp.models import build_model, prior_hyperparameters, prior_spec

    out = Path(args.output_dir)
    suffix = ".zarr" if args.format == "zarr" else ".nc"
    names = [f"posterior{suffix}", "summary.csv", "posterior.png", "trace.png"]
    try:  # every input is checked before sampling starts
        prior = _parse_prior(args.prior)
        rel = read_release(args.release)
        model = build_model(rel, prior)
        spec = prior_spec(rel.get_family())
        values = prior_hyperparameters(rel.get_family(), prior)
        check_posterior_path(out / names[0])
        out.mkdir(parents=True, exist_ok=True)
        existing = existing_outputs(out, names)
        if existing and not args.overwrite:
            raise _InputError(
                f"{out} already holds {', '.join(p.name for p in existing)} of an earlier fit; "
                "pass --overwrite to replace them, or choose another --output-dir"
            )
    except (_InputError, OSError, TypeError, ValueError) as err:
        return _fail("fit", _one_line(err))
    used = {k: np.asarray(v).tolist() for k, v in zip(spec.parameters, values, strict=True)}
    return _sample_and_write(args, model, rel, prior, spec, used, out, names)


def _sample_and_write(
    args: argparse.Namespace,
    model: Any,
    rel: Any,
    prior: dict[str, Any],
    spec: Any,
    used: dict[str, Any],
    out: Path,
    names: list[str],
) -> int:
    """Sample, then write every output to a staging directory and move them into place."""
    # The backend must be chosen before pyplot is used; Agg needs no display.
    import matplotlib

    matplotlib.use("Agg")
    import arviz as az
    import pymc as pm

    from pymc_dp import __version__, sample_latent
    from pymc_dp._compat import posterior_dataset
    from pymc_dp.atomic import InterruptGuard, StagedOutputs
    from pymc_dp.io import save_fit_figures, save_posterior
    from pymc_dp.noisy_suffstat import release_attrs

    with InterruptGuard() as guard, model:
        idata = pm.sample(
            draws=args.draws,
            tune=args.tune,
            chains=args.chains,
            cores=args.cores,
            random_seed=args.seed,
            progressbar=not args.no_progress,
            compute_convergence_checks=False,  # the summary below reports R-hat and ESS
        )
    # pm.sample returns the draws made so far when interrupted: such a trace is not a fit.
    sizes = posterior_dataset(idata).sizes
    if guard.interrupted or (sizes["chain"], sizes["draw"]) != (args.chains, args.draws):
        raise KeyboardInterrupt
    idata = sample_latent(idata, model, random_seed=args.seed)  # s and σ² of a collapsed node
    idata.attrs.update(release_attrs(model))
    idata.attrs["pymc_dp_prior"] = json.dumps({"distribution": spec.distribution, **used})
    idata.attrs["pymc_dp_version"] = __version__

    var_names = [*spec.variables, "y_s", "y_sigma2"]
    with StagedOutputs(out, names) as staged:
        save_posterior(idata, staged.path(names[0]))
        summary = az.summary(idata, var_names=var_names)
        summary.to_csv(staged.path("summary.csv"))
        save_fit_figures(idata, rel, prior, staged.directory)
        staged.commit()
    settings = ", ".join(f"{k}={v}" for k, v in used.items())
    print(
        f"Noise-aware posterior from the {rel.family} release (n = {rel.n}, epsilon = "
        f"{rel.epsilon:g}); prior {spec.distribution}({settings}):"
    )
    print(summary.to_string())
    note = _mixing_note(idata, spec.variables, args.chains)
    if note:
        print(note)
    print(f"wrote {', '.join(names)} to {out}")
    return 0


def _mixing_note(idata: Any, var_names: Sequence[str], chains: int) -> str:
    """Notes when chains disagree (R-hat > 1.05) or θ has < 100 effective draws per chain."""
    import arviz as az

    from pymc_dp._compat import posterior_dataset

    posterior = posterior_dataset(idata)
    ess = az.ess(posterior, var_names=list(var_names), method="bulk")
    lowest = min(float(np.min(ess[name].values)) for name in var_names)
    notes = []
    if chains > 1:
        rhat = az.rhat(posterior, var_names=list(var_names))
        worst = max(float(np.max(rhat[name].values)) for name in var_names)
        if not worst <= 1.05:
            notes.append(
                f"warning: R-hat of {', '.join(var_names)} is up to {worst:.2f} (> 1.05): the "
                "chains disagree. A chain started far from the data (a vague prior) can take "
                "long to move; raise --tune and --draws, or use a prior that excludes implausible "
                "values, and look at trace.png."
            )
    if lowest < 100 * chains:
        notes.append(
            f"note: the lowest bulk ESS of {', '.join(var_names)} is {lowest:.0f}, below 100 per "
            f"chain ({100 * chains} for {chains} chains); raise --draws for reliable estimates."
        )
    return "\n".join(notes)


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
        Exit status: 0 on success, 2 on bad input (with a one-line message on stderr), 130 when
        ``fit`` was interrupted (nothing written).
    """
    args = _parser().parse_args(argv)
    return {"release": _release, "fit": _fit, "reproduce": _reproduce}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
