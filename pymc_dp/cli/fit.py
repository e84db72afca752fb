"""``pymc-dp fit``: the analyst's command (model, sampling, summary, plots, notes on mixing).

Imported by :mod:`pymc_dp.cli` only once the arguments have been parsed.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pymc_dp.cli.messages import InputError, fail, fit_message, one_line
from pymc_dp.cli.outputs import claim_output_dir
from pymc_dp.cli.sampling import format_summary, jumping_nuts, mixing_note, run_sampler

__all__ = ["fit_command"]


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
    from pymc_dp.curator.release_file import ReleaseFile, read_release
    from pymc_dp.curator.release_set import ReleaseSet

    out = Path(args.output_dir)
    suffix = ".zarr" if args.format == "zarr" else ".nc"
    names = [f"posterior{suffix}", "summary.csv", "posterior.png", "trace.png"]
    from pymc_dp.cli.marginals import is_marginal_release, marginals_fit

    if is_marginal_release(args.release):
        return marginals_fit(args, out, suffix)
    if args.synthetic is not None:
        return fail("fit", "--synthetic applies to a marginal release (--family marginals)")
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
    from pymc_dp.cli.regression import FIT_FILES, fit_regression

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
            claim_output_dir(where, names, args.overwrite)
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
    from pymc_dp.model.ready_made import build_model, prior_hyperparameters, prior_spec

    try:
        model = build_model(rel, prior, likelihood=args.likelihood, labels=labels)
        spec = prior_spec(rel.get_family())
        values = prior_hyperparameters(rel, prior)
        claim_output_dir(out, names, args.overwrite)
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
    from pymc_dp.cli.outputs import save_fit_figures, save_posterior
    from pymc_dp.curator.atomic import StagedOutputs
    from pymc_dp.model.noisy_suffstat import release_attrs
    from pymc_dp.model.priors import prior_summary

    idata = run_sampler(args, model)
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
    counted = ""
    if getattr(rel, "window_count", None) is not None:
        used = idata.attrs["pymc_dp_likelihood_y"] != "exact"
        counted = f" for the window sum + {rel.count_epsilon:g} for the window count" + (
            "" if used else ", which the exact likelihood does not use"
        )
    print(
        f"Noise-aware posterior from the {rel.family} release (n = {rel.n}, epsilon = "
        f"{rel.epsilon:g}{counted}, {idata.attrs['pymc_dp_likelihood_y']} likelihood); prior "
        f"{prior_summary(rel, prior)['text']}:"
    )
    print(format_summary(summary))
    note = mixing_note(idata, spec.variables, args.chains)
    if note:
        print(note)
    print(f"wrote {', '.join(names)} to {out}")
    return 0


def _grouped_fit(
    args: argparse.Namespace, rel: Any, prior: dict[str, Any], out: Path, names: list[str]
) -> int:
    """Fit the partially pooled model of a grouped release; write the same outputs as a fit."""
    from pymc_dp.model.hierarchical import build_grouped_model, grouped_prior_hyperparameters

    try:
        used = grouped_prior_hyperparameters(rel, prior)
        model = build_grouped_model(rel, prior, likelihood=args.likelihood)
        claim_output_dir(out, names, args.overwrite)
    except (InputError, OSError, TypeError, ValueError) as err:
        return fail("fit", fit_message(one_line(err)))
    import matplotlib

    matplotlib.use("Agg")
    import arviz as az

    from pymc_dp import __version__
    from pymc_dp.cli.outputs import save_posterior
    from pymc_dp.curator.atomic import StagedOutputs
    from pymc_dp.model.hierarchical import (
        group_summary,
        group_variables,
        link_description,
        population_variables,
        save_grouped_figures,
    )
    from pymc_dp.model.noisy_suffstat import node_infos, release_attrs

    idata = run_sampler(args, model, start=functools.partial(jumping_nuts, args, model))
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
    counted = ""
    if rel.window_count is not None:
        with_counts = node_infos(model)[0].counted
        counted = (
            f" ({rel.epsilon:g} for each window sum + {rel.first.count_epsilon:g} for each window "
            "count" + ("" if with_counts else ", which the exact likelihood does not use") + ")"
        )
    print(
        f"Partially pooled noise-aware posterior from the grouped {rel.family} release "
        f"({len(rel)} groups, n = {int(rel.n.sum())}, epsilon = {rel.total_epsilon:g} for the "
        f"whole set{counted}, {idata.attrs['pymc_dp_likelihood_y']} likelihood); "
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
