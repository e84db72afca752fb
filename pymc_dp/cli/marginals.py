"""``pymc-dp release --family marginals`` and ``pymc-dp fit`` on a marginal release.

The curator's side reads each ``--column`` as labels of its public ``--levels`` (the CSV and
Parquet readers of the other releases: a label outside the list stops the release, naming the
data rows, never the value), releases the ``--marginals`` tables with
:func:`pymc_dp.release_marginals` and writes them as JSON (``"kind": "marginals"``). The
analyst's side fits :func:`pymc_dp.marginals_model` and writes the posterior, a summary of the
log-linear parameters and, with ``--synthetic M``, M synthetic data sets as CSV files.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path
from typing import Any

from pymc_dp.cli.messages import InputError, fail, fit_message, one_line

__all__ = ["is_marginal_release", "marginals_fit", "marginals_settings", "release_command"]


def marginals_settings(args: argparse.Namespace) -> dict[str, Any]:
    """Columns, public levels and marginals of ``--family marginals`` (checked, no data read).

    Examples
    --------
    >>> ns = argparse.Namespace(column="a,b", levels=["a=x,y", "b=0,1,2"], marginals="a:b,a")
    >>> marginals_settings(ns)["marginals"]
    [('a', 'b'), ('a',)]
    """
    columns = [c.strip() for c in (args.column or "").split(",") if c.strip()]
    if len(columns) < 1 or len(set(columns)) != len(columns):
        raise InputError(
            f"--column must name distinct columns, comma-separated (got {args.column})"
        )
    domains: dict[str, list[str]] = {}
    for item in args.levels or []:
        name, sep, text = item.partition("=")
        labels = [v.strip() for v in text.split(",")]
        if not sep or name.strip() not in columns or len(labels) < 2 or "" in labels:
            raise InputError(
                f"--levels takes COLUMN=L1,L2,... for each --column, at least 2 public labels "
                f"(got {item!r}; the columns are {', '.join(columns)})"
            )
        if name.strip() in domains or len(set(labels)) != len(labels):
            raise InputError(f"--levels gives {name.strip()!r} twice or repeats a label")
        domains[name.strip()] = labels
    missing = [c for c in columns if c not in domains]
    if missing:
        raise InputError(
            f"--levels must declare the public labels of {', '.join(missing)} "
            "(COLUMN=L1,L2,...): they are never read from the data"
        )
    marginals = []
    for item in (args.marginals or "").split(","):
        names = tuple(v.strip() for v in item.split(":"))
        if not item.strip() or any(v not in columns for v in names):
            raise InputError(
                f"--marginals takes tables like a:b,b:c over the --column names (got "
                f"{args.marginals!r})"
            )
        marginals.append(names)
    return {"columns": columns, "domains": domains, "marginals": marginals}


def release_command(args: argparse.Namespace, settings: dict[str, Any]) -> int:
    """Run ``pymc-dp release --family marginals``; return the exit status."""
    with contextlib.ExitStack() as ledger:  # a --budget ledger stays locked until the end
        return _release(args, settings, ledger)


def _release(args: argparse.Namespace, settings: dict[str, Any], ledger: Any) -> int:
    import numpy as np

    from pymc_dp.cli.inputs import check_output, is_parquet, open_budget
    from pymc_dp.curator.data_files import read_labels
    from pymc_dp.curator.marginals import release_marginals, write_marginal_release

    output = Path(args.output)
    columns, domains = settings["columns"], settings["domains"]
    try:
        check_output(output, args.overwrite)
        fmt = "parquet" if is_parquet(args) else args.format
        data = {
            c: np.asarray(domains[c], dtype=object)[
                read_labels(args.data, c, domains[c], file_format=fmt)
            ]
            for c in columns
        }
        gaussian = args.mechanism == "discrete-gaussian"
        budget = open_budget(args, "rho" if gaussian else "epsilon", ledger)
        rel = release_marginals(
            data,
            columns=columns,
            domains=domains,
            marginals=settings["marginals"],
            epsilon=None if gaussian else args.epsilon,
            rho=args.rho if gaussian else None,
            mechanism=args.mechanism,
            rng=args.seed,
            budget=budget,
        )
        # The charge is in the ledger already (saved when made): a failed write still counts.
        write_marginal_release(rel, output)
    except (InputError, OSError, OverflowError, TypeError, ValueError) as err:
        return fail("release", one_line(err))
    tables = ", ".join(":".join(m) for m in settings["marginals"])
    print(
        f"wrote {output}: marginal tables {tables} of {', '.join(columns)}, n = {rel.n}, "
        f"{rel.mechanism} noise of scale {rel.noise_scale:.6g} per cell"
    )
    return 0


def is_marginal_release(path: str | Path) -> bool:
    """Whether ``path`` holds a marginal release (JSON with ``"kind": "marginals"``)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle).get("kind") == "marginals"
    except (OSError, ValueError, AttributeError, RecursionError):
        return False  # not one: the release reader then refuses the file in one line


def marginals_fit(args: argparse.Namespace, out: Path, suffix: str) -> int:
    """``pymc-dp fit`` on a marginal release: posterior, summary.csv, synthetic_K.csv."""
    from pymc_dp.cli.outputs import claim_output_dir
    from pymc_dp.curator.marginals import read_marginal_release

    m = getattr(args, "synthetic", None) or 0
    names = [f"posterior{suffix}", "summary.csv", *(f"synthetic_{k + 1}.csv" for k in range(m))]
    try:
        if args.prior:
            raise InputError("--prior does not apply to a marginal release (θ ~ Normal(0, 2))")
        if args.column is not None:
            raise InputError("--column does not apply to a marginal release")
        if m > args.draws * args.chains:
            raise InputError(
                f"--synthetic {m} exceeds the posterior draws ({args.draws} x {args.chains} chains)"
            )
        rel = read_marginal_release(args.release)
        claim_output_dir(out, names, args.overwrite)
        from pymc_dp.model.nodes.marginals import marginals_model

        likelihood = "clt" if args.likelihood == "clt" else args.likelihood
        model = marginals_model(rel, likelihood=likelihood)
    except (InputError, OSError, TypeError, ValueError) as err:
        return fail("fit", fit_message(one_line(err)))
    import arviz as az

    from pymc_dp.cli.outputs import save_posterior
    from pymc_dp.cli.sampling import format_summary, run_sampler
    from pymc_dp.curator.atomic import StagedOutputs
    from pymc_dp.model.synthetic import synthetic_datasets

    idata = run_sampler(args, model)
    with StagedOutputs(out, names) as staged:
        save_posterior(idata, staged.path(names[0]))
        summary = az.summary(idata, var_names=["theta"])
        summary.to_csv(staged.path("summary.csv"))
        if m:
            sets = synthetic_datasets(idata, rel, m=m, rng=args.seed)
            for k, frame in enumerate(sets):
                frame.to_csv(staged.path(f"synthetic_{k + 1}.csv"), index=False)
        staged.commit()
    print(
        f"Noise-aware posterior of the log-linear parameters from the marginal release "
        f"(n = {rel.n}, {rel.mechanism}); prior Normal(0, 2) on each:"
    )
    print(format_summary(summary))
    if m:
        print(f"wrote {m} synthetic data set(s) of {rel.n} records to {out}/synthetic_*.csv")
    return 0
