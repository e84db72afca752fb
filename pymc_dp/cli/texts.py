"""Help texts of ``pymc-dp``, and what it says about each family, importable without PyMC.

``pymc-dp --help`` and argument errors must answer in well under a second, so nothing here (or in
the rest of :mod:`pymc_dp.cli`) imports NumPy, PyMC or PyTensor. The families, their options,
their table in ``pymc-dp release --help`` and their priors in ``pymc-dp fit --help`` are read from
the families' declarations (:mod:`pymc_dp.families.declaration`, light by design) each time they
are asked for, so a family registered after import is listed too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from pymc_dp.families.declaration import FamilyDeclaration, FamilyOption
from pymc_dp.families.registry import declared_families, family_declaration

__all__ = [
    "FIT_DESCRIPTION",
    "FIT_PRIORS",
    "RELEASE_DESCRIPTION",
    "REPRODUCE_DESCRIPTION",
    "REPRODUCE_EPILOG",
    "command_families",
    "describe_prior",
    "family_names",
    "family_options",
    "fit_epilog",
    "plain_text",
    "release_epilog",
    "windowed_families",
]

REPRODUCE_EPILOG = """\
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


RELEASE_DESCRIPTION = """\
Curator: release the sufficient statistic of a column of a CSV file or of Parquet files (or of
several columns, or of a regression of one column on others) under epsilon-differential privacy,
as a JSON release for pymc-dp fit (or pymc_dp.curator.read_release).
The statistic is computed exactly in integers (the same records give the same statistic in any
order or partitioning); Parquet files, directories and globs are streamed in batches, or summed on
a Dask cluster with --scheduler. OpenDP's discrete Laplace noise with scale sensitivity/epsilon is
added to it (a float statistic rounded first to a public power-of-two quantum, the rounding added
to the sensitivity; epsilon less the window's share with --private-bounds), and only the noisy
value is written, with n, epsilon, the sensitivity, the bounds, the family, the mechanism, the
quantum, the records' grid step and the library version. The exact statistic is never printed or
written, and error messages name file lines and rules, never a record's value."""

_RELEASE_EPILOG_HEAD = """\
families (records; sensitivity, or "window" for a family released over a window):
"""

_RELEASE_EPILOG_TAIL = """\
Records outside a window [A, B] are left out of the sums; the sensitivity accounts for a record
that may move in or out of it (Appendix C of Bernstein & Sheldon 2018). Choose the window without
looking at the data, or let --private-bounds choose it with part of the budget.

records are read exactly (n is public and is the number of lines after the header):
  a blank line, a line with more or fewer fields than the header (e.g. 1,000 under a one-column
  header), a missing value or a value that is not a plain number stops the release, naming the
  data row (the header not counted) and the file line. A record outside the family's range
  (e.g. 7 successes of 5 trials) stops it too, unless --clamp is given: then such records are
  clamped to the range, the release says "clamped": true, and the sensitivity is unchanged.

noise and seeds:
  Without --seed (a real release) the noise is vetted: OpenDP's discrete Laplace (or, with
  --mechanism discrete-gaussian --rho RHO, discrete Gaussian under rho-zCDP) on the exact integer
  statistic, drawn from operating-system randomness; it cannot be seeded. --seed makes the run a
  study: the noise is then the floating-point Laplace sampler ("laplace-float", recorded in the
  file), reproducible and open to floating-point attacks (Mironov 2012) -- for tests and examples
  only: anyone who knows the seed can subtract the noise. --seed with a vetted --mechanism is
  refused. The private window (--private-bounds) is chosen among 1025 public candidates (log-spaced
  when the range spans decades) by OpenDP's report-noisy-min on exact counts.

privacy budget:
  --budget LEDGER charges the release to a JSON ledger of one data set before any noise is drawn
  and refuses it if the total would be exceeded; create the ledger on first use with
  --budget-total TOTAL (epsilon, or rho for discrete-gaussian). The release records what was
  spent and what remains. A retry, or --overwrite, is charged again.

grouped release (--by COLUMN --groups A,B,C --public-sizes):
  One release per group, in one file, at the cost of one (parallel composition: each record is
  in one group). The group keys are public: listed by --groups, never read from the data; a
  record with a missing key or another key stops the release. Each group's size is published
  exactly, so --public-sizes must declare the sizes public (or give them, N1,N2,..., to have
  them checked): a record moving from one group to another would change two sizes, which no
  noise covers. All groups share the family, window, epsilon and mechanism; --private-bounds and
  --dry-run are not available with --by. Parquet data are streamed (or summed on --scheduler) in
  one pass over the records and their keys.

several columns in one call (--column a,b --family f1,f2 --epsilon-split E1,E2):
  Each column is released with its own family and its part of --epsilon; the parts must be
  given (never split silently) and sum to --epsilon (sequential composition). --bounds is given
  once per windowed column, in the order of --column; the other family options are shared by the
  columns of their family. Every column is read and checked before any noise is drawn for any,
  and a --budget ledger is charged once, --epsilon, for the whole call. One file holds every
  column's release with its name; pymc-dp fit fits each (or --column NAME). Not with --by,
  --private-bounds or the Gaussian mechanism.

category labels (--categories red,green,blue):
  The public list of a categorical column's labels, in the order of their codes, never read from
  the data. Records are matched as text (surrounding spaces removed); a missing value or a label
  not in the list stops the release, naming data rows, never the value. The labels are written
  beside the release and become the coordinates of the fit's posterior, summary and plots.
  --categories K keeps codes 0..K-1.

regression (--family regression --x COL1,COL2 --y COL --x-bounds LO HI LO HI --y-bounds LO HI):
  Releases the sufficient statistics of the linear regression of y on x (every entry of
  [X, y]^T [X, y] but n) with noise at the exact L1 sensitivity over the public box (Bernstein &
  Sheldon 2019; pymc_dp.release_regression). The box is public: a record outside it stops the
  release unless --clamp. Takes --epsilon (discrete-laplace, or laplace-float with --seed), or
  --mechanism discrete-gaussian --rho RHO (exact L2 sensitivity; at d <= 3 it is wider than Laplace
  for one release, see docs/regression.md), --budget, --clamp and --format; the file names the
  response and the covariates for pymc-dp fit. --binary COL declares --x columns that are 0 or 1
  (every record checked, their box must hold 0 and 1); with one such column and at most two
  covariates, pymc-dp fit models it as Bernoulli and the others as normal within its two groups.
  --factor COL1,COL2 declares --x columns that are the dummy columns of one factor, one per level
  but the reference (all 0): every record must hold 0 or 1 in each with at most one 1. When every
  covariate is one (at most three), or two covariates are both --binary, pymc-dp fit models the
  probabilities of their combinations (the cell model) and plots the response per level.

planning a release (--dry-run):
  From public values only -- --n, --epsilon (or --rho), the family and its window -- print the
  sensitivity, the noise scale and standard deviation (sqrt(2)*sensitivity/epsilon for Laplace;
  the discrete Laplace's on the statistic's quantum for the default), and each component's
  plausible range (n*(B-A) over a window [A, B], n*T for binomial, n for counts) with the ratio
  noise sd / range. No DATA is read, no noise is drawn and no budget is spent. With several
  --column, each at its part of --epsilon-split; with --by, each group at its size from
  --public-sizes N1,N2,... (which stand for --n).

examples:
  pymc-dp release --dry-run --n 1000 --family poisson --bounds 0 40 --epsilon 0.5
  pymc-dp release visits.csv --column visits --family poisson --bounds 0 40 \\
      --epsilon 0.5 --output visits_release.json
  pymc-dp release survey.parquet --column answer --family categorical --categories 4 \\
      --epsilon 1 --output answer_release.json
  pymc-dp release waits.csv --column minutes --family exponential \\
      --private-bounds 0 600 --bounds-share 0.1 --epsilon 1 --output waits_release.json
  pymc-dp release sites.csv --column success --family bernoulli --epsilon 1 \\
      --by site --groups a,b,c --public-sizes --output sites_release.json
  pymc-dp release survey.csv --column age,visits,colour --family normal,poisson,categorical \\
      --bounds 0 100 --bounds 0 40 --categories red,green,blue --epsilon 1 \\
      --epsilon-split 0.4,0.3,0.3 --output survey_release.json
  pymc-dp release survey.csv --family regression --x age,dose --y spend \\
      --x-bounds 0 100 0 10 --y-bounds 0 500 --epsilon 1 --output spend_release.json
"""

FIT_DESCRIPTION = """\
Analyst: fit the conjugate model of a release's family with its noise-aware posterior
(pm.sample with a NoisySuffStat node: exact draws of a scalar θ, NUTS within the partially
collapsed Gibbs sampler for a vector statistic) and write, to OUTPUT_DIR, the posterior as an
ArviZ file
with the release in its attrs and constant_data, the ArviZ summary (printed and as CSV), a plot of
the posterior against the naive one that treats the noisy value as exact, and a trace plot."""

_FIT_EPILOG_TAIL = """\
For lognormal the model is on log x. The same model in Python: pymc_dp.model.ready_made.build_model.
A windowed family with one parameter also gets the public premise that its window holds most
records: 5 pseudo-records inside the window, a factor q(theta)^5 on the prior (q the window's
mass), which down-weights the far mode a window sum alone allows. After the summary the fit prints
R-hat, ESS and divergences, and warns, with their masses, of separated modes.

A grouped release (pymc-dp release --by) is fitted partially pooled, non-centred: logit p_g =
mu + tau z_g (bernoulli, binomial) or log lam_g = mu + tau z_g (poisson), z_g ~ Normal(0, 1),
mu ~ Normal(mu_mean, mu_sd), tau ~ HalfNormal(tau_sd); defaults mu_mean = 0, mu_sd = 1.5 (log m
and 1 for poisson), tau_sd = 1. It prints a per-group table; posterior.png shows each group's
interval against its naive estimate, trace.png the traces of mu and tau. The same model in
Python: pymc_dp.model.hierarchical.build_grouped_model.

A regression release (pymc-dp release --family regression) is fitted with the default model of
pymc_dp.regression.NoisyRegressionStat (the covariates normal, with a prior from their box; the
exact law of the statistic), under a Normal-Inverse-Gamma prior from the public box alone:
sigma2 ~ InverseGamma(1, (w_y/6)^2) and, given sigma2, the line's value at the box's centre
~ Normal(m_y, sigma2 (w_y/s0)^2) and each slope ~ Normal(0, sigma2 (2 w_y/(w_j s0))^2), with
s0 = w_y/8, m_y and w_y the response's centre and width, w_j each covariate's width (--prior
does not apply). It prints the coefficients (intercept and the covariates by name) and writes
predictive.png in place of posterior.png: against the first covariate over its box (the others
at their posterior mean), the posterior mean line, its 90% band and the 90% predictive band.

A file of several columns (pymc-dp release --column a,b) is fitted column by column, each into
OUTPUT_DIR/COLUMN, or only --column NAME into OUTPUT_DIR. Categorical labels (--categories
red,green,blue at release) are the coordinates of p, its summary rows (p[red]) and plots.

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
  pymc-dp fit survey_release.json --column colour --output-dir colour_fit
  pymc-dp fit spend_release.json --output-dir spend_fit
"""


def command_families() -> dict[str, tuple[FamilyDeclaration, ...]]:
    """``--family`` name → its declarations, in the order the help lists them.

    A name stands for one family, or for a family and its variants (``normal``, and
    ``normal_known_sigma`` with ``--sigma``): the family first, then the variants.
    """
    found: dict[str, list[FamilyDeclaration]] = {}
    for declaration in declared_families():
        found.setdefault(declaration.command, []).append(declaration)
    return {
        name: tuple(sorted(group, key=lambda d: bool(d.command_line.condition)))
        for name, group in found.items()
    }


def family_names() -> list[str]:
    """The ``--family`` names, in order (``bernoulli``, ``binomial``, ...)."""
    return list(command_families())


def windowed_families() -> list[str]:
    """The ``--family`` names released over a window (which take ``--bounds``)."""
    return [name for name, group in command_families().items() if group[0].windowed]


def family_options() -> dict[str, tuple[FamilyOption, list[str], list[str]]]:
    """Each family option's flag → (option, the families that take it, those that need it).

    A family name needs an option that every family it stands for takes (``--trials`` for
    ``binomial``), and merely takes one that only a variant takes (``--sigma`` for ``normal``).
    """
    options: dict[str, tuple[FamilyOption, list[str], list[str]]] = {}
    for name, group in command_families().items():
        taken: dict[str, FamilyOption] = {}
        for declaration in group:
            for option in declaration.options:
                taken.setdefault(option.flag, option)
        for flag, option in taken.items():
            _, takes, needs = options.setdefault(flag, (option, [], []))
            takes.append(name)
            if all(flag in (o.flag for o in d.options) for d in group):
                needs.append(name)
    return options


class _FitPriors(Mapping[str, tuple[str, str, tuple[str, ...], str]]):
    """Family name → (variables, distribution, hyperparameters, default rule), from declarations."""

    def __getitem__(self, name: str) -> tuple[str, str, tuple[str, ...], str]:
        try:
            spec = family_declaration(name).prior
        except ValueError:
            raise KeyError(name) from None
        rule = spec.rule or ", ".join(f"{k}={spec.defaults[k]:g}" for k in spec.parameters)
        return ", ".join(spec.variables), spec.distribution, spec.parameters, rule

    def __iter__(self) -> Iterator[str]:
        return iter([d.name for d in declared_families()])

    def __len__(self) -> int:
        return len(declared_families())


FIT_PRIORS: Mapping[str, tuple[str, str, tuple[str, ...], str]] = _FitPriors()
"""Conjugate prior of each family for ``pymc-dp fit --help``, by family name: (variables,
distribution, hyperparameters, default rule), m and w the window's centre and width
(:func:`pymc_dp.model.priors.window_scale`). Read from each declaration's prior, which is
:data:`pymc_dp.model.priors.PRIORS` too."""


def describe_prior(family: str) -> str:
    """One line, as :meth:`pymc_dp.model.priors.PriorSpec.describe_rule`: ``lam ~ Gamma(...)``.

    Examples
    --------
    >>> describe_prior("poisson")
    'lam ~ Gamma(alpha=2, beta=2/m)'
    """
    return family_declaration(family).prior.describe_rule()


def _prior_table() -> str:
    rows = [d for group in command_families().values() for d in group]
    # Rows of one prior (distribution and θ) sit together, in the order the families are listed;
    # families whose defaults are alike share a line.
    by_prior: dict[tuple[str, tuple[str, ...]], list[FamilyDeclaration]] = {}
    for d in rows:
        by_prior.setdefault((d.prior.distribution, d.prior.variables), []).append(d)
    lines: dict[str, list[FamilyDeclaration]] = {}
    for group in by_prior.values():
        for d in group:
            lines.setdefault(d.prior.describe_rule(), []).append(d)
    table = []
    for prior, families in lines.items():
        first = families[0]
        label = ", ".join(d.command for d in families)
        if first.command_line.condition:
            label += f" {first.command_line.condition}"
        note, *below = first.prior.note.split("\n")
        text = f"   {note}" if note else ""
        text += "".join("\n" + " " * 34 + line for line in below)
        table.append(f"  {label:<32}{prior}{text}")
    return "\n".join(table)


def _family_table() -> str:
    lines = []
    for name, group in command_families().items():
        listed = group[0].command_line
        if listed.records:
            lines.append(f"  {name:<13} {listed.records:<44} {listed.release}".rstrip())
    return "\n".join(lines)


def release_epilog() -> str:
    """The epilog of ``pymc-dp release --help``: the families, then records, noise and examples."""
    return _RELEASE_EPILOG_HEAD + _family_table() + "\n" + _RELEASE_EPILOG_TAIL


def fit_epilog() -> str:
    """The epilog of ``pymc-dp fit --help``: each family's prior, then the outputs and examples."""
    return (
        "models (θ's conjugate prior, with its hyperparameter names and defaults; m and w are the\n"
        "centre and width of the release's window, k the Gamma shape):\n"
        + _prior_table()
        + "\n"
        + _FIT_EPILOG_TAIL
    )


def __getattr__(name: str) -> Any:
    # RELEASE_EPILOG and FIT_EPILOG, the constants these functions replace, still read: built
    # when read, so that they list the families registered by then.
    if name == "RELEASE_EPILOG":
        return release_epilog()
    if name == "FIT_EPILOG":
        return fit_epilog()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


REPRODUCE_DESCRIPTION = """\
Regenerate the experiments of Bernstein & Sheldon (2018), §4 and Appendix E: Figure 1a
(calibration KS against n), 1b (calibration ECDFs), 1c (MMD to the non-private posterior) and 2
(Gibbs traces), as PNG files with every plotted number in CSV and a JSON report. --quick runs a
small grid for CI that still checks every qualitative claim."""

_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`~?([^`<]*?)(?:\s*<[^>]*>)?`")


def plain_text(text: str) -> str:
    """Strip reStructuredText as a terminal shows it: roles and literals without their markup.

    Examples
    --------
    >>> plain_text("See :func:`~pymc_dp.release` and ``--quick``.")
    'See pymc_dp.release and --quick.'
    """
    text = _ROLE.sub(r"\1", text)
    return text.replace("``", "")
