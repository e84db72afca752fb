"""``pymc-dp fit``: the analyst's command (model, sampling, summary, plots, notes on mixing).

Imported by :mod:`pymc_dp_cli` only once the arguments have been parsed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pymc_dp_cli.messages import InputError, fail, fit_message, one_line

__all__ = ["fit_command", "format_summary", "mixing_note"]


def _parse_prior(items: Sequence[str]) -> dict[str, Any]:
    """``["alpha=3", "beta=5"]`` → ``{"alpha": 3.0, "beta": 5.0}``; ``a=1,2`` → a list."""
    prior: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name or not text.strip():
            raise InputError(
                f"--prior takes NAME=VALUE items, e.g. alpha=3 (got {item!r}); give only one "
                "RELEASE, before --prior"
            )
        if name in prior:
            raise InputError(f"--prior sets {name} twice")
        try:
            values = [float(v) for v in text.split(",")]
        except ValueError:
            raise InputError(
                f"--prior {name} must be a number or comma-separated numbers (got {text!r})"
            ) from None
        prior[name] = values[0] if len(values) == 1 else values
    return prior


def fit_command(args: argparse.Namespace) -> int:
    """Run ``pymc-dp fit``; return the exit status (130 when interrupted, nothing written)."""
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
    from pymc_dp.io import read_release
    from pymc_dp.release_file import ReleaseFile
    from pymc_dp.release_set import ReleaseSet

    out = Path(args.output_dir)
    suffix = ".zarr" if args.format == "zarr" else ".nc"
    names = [f"posterior{suffix}", "summary.csv", "posterior.png", "trace.png"]
    try:  # every input is checked before sampling starts
        prior = _parse_prior(args.prior)
        rel = read_release(args.release, allow_grouped=True, allow_columns=True)
        if isinstance(rel, ReleaseFile):
            entries = _chosen_columns(rel, args.column)
        elif args.column is not None:
            raise InputError(
                f"--column applies to a file of named columns (several columns, labelled "
                f"categories or a regression); {args.release} is not one"
            )
        if isinstance(rel, ReleaseSet):  # one release per group: the partially pooled model
            return _grouped_fit(args, rel, prior, out, names)
    except (InputError, OSError, TypeError, ValueError) as err:
        return fail("fit", fit_message(one_line(err)))
    if isinstance(rel, ReleaseFile):
        return _fit_columns(args, entries, prior, out, suffix)
    return _fit_one(args, rel, prior, out, names)


def _chosen_columns(rf: Any, column: str | None) -> list[Any]:
    """The entries to fit: --column's, or all of them."""
    return list(rf.releases) if column is None else [rf[column]]


def _fit_columns(
    args: argparse.Namespace, entries: list[Any], prior: dict[str, Any], out: Path, suffix: str
) -> int:
    """Fit each entry of a file of named columns: in OUTPUT_DIR, or OUTPUT_DIR/COLUMN if several."""
    from pymc_dp.cli_regression import FIT_FILES, fit_regression

    several = len(entries) > 1
    plans, taken = [], set()
    for i, entry in enumerate(entries):
        files = ["summary.csv", "posterior.png", "trace.png"]
        names = [f"posterior{suffix}", *(FIT_FILES if entry.is_regression else files)]
        directory = _directory_name(entry.column)
        if directory in taken:  # "a b" and "a_b" would share a directory
            directory = f"{directory}_{i + 1}"
        taken.add(directory)
        plans.append((entry, out / directory if several else out, names))
    try:
        if several and prior:
            raise InputError("--prior applies to one column; choose it with --column")
        for _, where, names in plans:  # every output directory, before any sampling
            _claim_output_dir(where, names, args.overwrite)
    except (InputError, OSError) as err:
        return fail("fit", fit_message(one_line(err)))
    for entry, where, names in plans:
        if several:
            print(f"column {entry.column!r} (in {where}):")
        if entry.is_regression:
            status = fit_regression(args, entry, where, names)
        else:
            status = _fit_one(args, entry.release, prior, where, names, labels=entry.labels)
        if status != 0:
            return status
    return 0


def _directory_name(column: str) -> str:
    """A column's name as a directory name: characters other than letters, digits, . - _ as _."""
    import re

    name = re.sub(r"[^\w.-]", "_", column)
    return "_" + name if name in ("", ".", "..") else name


def _fit_one(
    args: argparse.Namespace,
    rel: Any,
    prior: dict[str, Any],
    out: Path,
    names: list[str],
    labels: Sequence[str] | None = None,
) -> int:
    from pymc_dp.models import build_model, prior_hyperparameters, prior_spec

    try:
        model = build_model(rel, prior, likelihood=args.likelihood, labels=labels)
        spec = prior_spec(rel.get_family())
        values = prior_hyperparameters(rel, prior)
        _claim_output_dir(out, names, args.overwrite)
    except (InputError, OSError, TypeError, ValueError) as err:
        return fail("fit", fit_message(one_line(err)))
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

    from pymc_dp import __version__, sample_latent
    from pymc_dp._compat import posterior_dataset
    from pymc_dp.atomic import StagedOutputs
    from pymc_dp.io import save_fit_figures, save_posterior
    from pymc_dp.noisy_suffstat import release_attrs
    from pymc_dp.priors import prior_summary

    idata = _run_sampler(args, model)
    idata = sample_latent(idata, model, random_seed=args.seed)  # s and σ² of a collapsed node
    idata.attrs.update(release_attrs(model))
    idata.attrs["pymc_dp_prior"] = json.dumps({"distribution": spec.distribution, **used})
    idata.attrs["pymc_dp_version"] = __version__

    # σ² exists only for Laplace noise (integer noise laws have no scale mixture).
    latent = [v for v in ("y_s", "y_sigma2") if v in posterior_dataset(idata)]
    var_names = [*spec.variables, *latent]
    with StagedOutputs(out, names) as staged:
        save_posterior(idata, staged.path(names[0]))
        summary = az.summary(idata, var_names=var_names)
        summary.to_csv(staged.path("summary.csv"))
        save_fit_figures(idata, rel, prior, staged.directory)
        staged.commit()
    print(
        f"Noise-aware posterior from the {rel.family} release (n = {rel.n}, epsilon = "
        f"{rel.epsilon:g}, {idata.attrs['pymc_dp_likelihood_y']} likelihood); prior "
        f"{prior_summary(rel, prior)['text']}:"
    )
    print(format_summary(summary))
    note = mixing_note(idata, spec.variables, args.chains)
    if note:
        print(note)
    print(f"wrote {', '.join(names)} to {out}")
    return 0


def _run_sampler(args: argparse.Namespace, model: Any) -> Any:
    """``pm.sample`` with the command's settings; ``KeyboardInterrupt`` unless it completed."""
    import pymc as pm

    from pymc_dp._compat import posterior_dataset
    from pymc_dp.atomic import InterruptGuard

    with InterruptGuard() as guard, model:
        try:
            idata = pm.sample(
                draws=args.draws,
                tune=args.tune,
                chains=args.chains,
                cores=args.cores,
                random_seed=args.seed,
                progressbar=not args.no_progress,
                compute_convergence_checks=False,  # the summary below reports R-hat and ESS
            )
        except Exception:
            # Interrupted before the first draw, PyMC fails to build a trace of nothing
            # (ValueError); interrupted inside compiled code, the KeyboardInterrupt surfaces
            # wrapped (Numba's SystemError). Either way the guard saw the Ctrl-C.
            if guard.interrupted:
                raise KeyboardInterrupt from None
            raise
    # pm.sample returns the draws made so far when interrupted: such a trace is not a fit.
    sizes = posterior_dataset(idata).sizes
    if guard.interrupted or (sizes["chain"], sizes["draw"]) != (args.chains, args.draws):
        raise KeyboardInterrupt
    return idata


def _grouped_fit(
    args: argparse.Namespace, rel: Any, prior: dict[str, Any], out: Path, names: list[str]
) -> int:
    """Fit the partially pooled model of a grouped release; write the same outputs as a fit."""
    from pymc_dp.hierarchical import build_grouped_model, grouped_prior_hyperparameters

    try:
        used = grouped_prior_hyperparameters(rel, prior)
        model = build_grouped_model(rel, prior, likelihood=args.likelihood)
        _claim_output_dir(out, names, args.overwrite)
    except (InputError, OSError, TypeError, ValueError) as err:
        return fail("fit", fit_message(one_line(err)))
    import matplotlib

    matplotlib.use("Agg")
    import arviz as az

    from pymc_dp import __version__
    from pymc_dp.atomic import StagedOutputs
    from pymc_dp.hierarchical import (
        group_summary,
        group_variables,
        link_description,
        population_variables,
        save_grouped_figures,
    )
    from pymc_dp.io import save_posterior
    from pymc_dp.noisy_suffstat import release_attrs

    idata = _run_sampler(args, model)
    idata.attrs.update(release_attrs(model))
    idata.attrs["pymc_dp_prior"] = json.dumps({"model": "partially pooled", **used})
    idata.attrs["pymc_dp_version"] = __version__
    population, per_group = list(population_variables(rel)), list(group_variables(rel))
    with StagedOutputs(out, names) as staged:
        save_posterior(idata, staged.path(names[0]))
        summary = az.summary(idata, var_names=population + per_group)
        summary.to_csv(staged.path("summary.csv"))
        save_grouped_figures(idata, rel, staged.directory)
        staged.commit()
    print(
        f"Partially pooled noise-aware posterior from the grouped {rel.family} release "
        f"({len(rel)} groups, n = {int(rel.n.sum())}, epsilon = {rel.epsilon:g} for the whole "
        f"set, {idata.attrs['pymc_dp_likelihood_y']} likelihood); "
        f"{link_description(rel, used)}:"
    )
    print(format_summary(summary.loc[[i for i in summary.index if i.split("[")[0] in population]]))
    print(f"per group ({', '.join(per_group)}; naive = released value taken as exact):")
    print(format_summary(group_summary(idata, rel)))
    note = mixing_note(idata, population + per_group, args.chains)
    if note:
        print(note)
    print(f"wrote {', '.join(names)} to {out}")
    return 0


def _claim_output_dir(out: Path, names: list[str], overwrite: bool) -> None:
    """Create ``out``; refuse, unless ``overwrite``, if it holds an earlier fit's outputs."""
    from pymc_dp.atomic import existing_outputs
    from pymc_dp.io import check_posterior_path

    check_posterior_path(out / names[0])
    out.mkdir(parents=True, exist_ok=True)
    existing = existing_outputs(out, names)
    if existing and not overwrite:
        raise InputError(
            f"{out} already holds {', '.join(p.name for p in existing)} of an earlier fit; "
            "pass --overwrite to replace them, or choose another --output-dir"
        )


def mixing_note(idata: Any, var_names: Sequence[str], chains: int) -> str:
    """Notes when chains disagree (R-hat > 1.05) or θ has < 100 effective draws per chain.

    Parameters
    ----------
    idata
        The fit's posterior (InferenceData or DataTree).
    var_names
        θ's variables.
    chains
        Number of chains.

    Returns
    -------
    str
        One line per problem, or ``""``.
    """
    import arviz as az

    from pymc_dp._compat import posterior_dataset

    posterior = posterior_dataset(idata)
    ess = az.ess(posterior, var_names=list(var_names), method="bulk")
    lowest, name = min((float(np.min(ess[v].values)), v) for v in var_names)
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
        over = f"over {chains} chains" if chains > 1 else "from 1 chain"
        notes.append(
            f"note: the bulk ESS of {name} is {lowest:.0f} {over}, below the {100 * chains} "
            f"(100 per chain) that ArviZ recommends; raise --draws for reliable estimates."
        )
    return "\n".join(notes)


def _number(value: float) -> str:
    """Four significant digits, positional unless the value is tiny or huge."""
    if not isinstance(value, (int, float, np.number)) or not np.isfinite(value):
        return str(value)
    if value != 0 and not 1e-4 <= abs(value) < 1e9:
        return f"{value:.3e}"
    return np.format_float_positional(value, precision=4, unique=False, fractional=False, trim="-")


def format_summary(summary: Any) -> str:
    """The ArviZ summary as text, each value formatted alone (no column turns scientific).

    pandas prints a whole column in scientific notation when one value is large; here each value
    keeps four significant digits, effective sample sizes are whole numbers and R-hat has two
    decimals.

    Examples
    --------
    >>> import pandas as pd
    >>> table = pd.DataFrame(
    ...     {"mean": [0.31, 152.4], "ess_bulk": [3612.4, 2e7], "r_hat": [1.0, 1.0]},
    ...     index=["p", "y_s"],
    ... )
    >>> print(format_summary(table))
         mean ess_bulk r_hat
    p    0.31     3612  1.00
    y_s 152.4 20000000  1.00
    """
    formatters = {}
    for column in summary.columns:
        if column.startswith("ess"):
            formatters[column] = lambda v: f"{v:.0f}"
        elif column == "r_hat":
            formatters[column] = lambda v: f"{v:.2f}"
        else:
            formatters[column] = _number
    import pandas as pd

    # ArviZ 1's summary is a DataFrame subclass that prints pre-formatted strings: format the
    # numbers underneath, the same way under both ArviZ versions.
    return pd.DataFrame(summary).to_string(formatters=formatters)
