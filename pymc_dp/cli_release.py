"""``pymc-dp release``: the curator's command, and its ``--dry-run`` that reads no data.

The arguments are parsed and the family options checked by :mod:`pymc_dp_cli` before this module
(and PyMC with it) is imported.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any, NamedTuple

from pymc_dp_cli.messages import InputError, fail, one_line, release_message
from pymc_dp_cli.parser import ColumnPlan
from pymc_dp_cli.texts import FAMILY_CLASSES, WINDOWED

__all__ = ["NoisePlan", "dry_run", "noise_plan", "release_command"]


class NoisePlan(NamedTuple):
    """What a release would add, from public values only (see :func:`noise_plan`)."""

    family: str
    n: int
    budget: float  # ε of the statistic, or ρ for the discrete Gaussian (after a window's share)
    mechanism: str
    sensitivity: float
    scale: float
    noise_sd: float
    window: tuple[float, float]
    ranges: tuple[float, ...]
    components: tuple[str, ...]


def _discrete_laplace_sd(scale: float) -> float:
    """Standard deviation of the discrete Laplace on the integers, P(k) ∝ exp(-|k| / scale)."""
    r = math.exp(-1.0 / scale)
    return math.sqrt(2.0 * r) / (1.0 - r)


def noise_plan(
    family: str,
    settings: dict[str, Any],
    *,
    n: int,
    epsilon: float | None,
    rho: float | None = None,
    mechanism: str | None = None,
) -> NoisePlan:
    """The noise a release would add and the range of its statistic, from public values only.

    Parameters
    ----------
    family
        Family name, e.g. ``"poisson"``.
    settings
        The family's settings and window as :func:`pymc_dp.release` takes them (``trials``,
        ``categories``, ``alpha``, ``sigma``, ``bounds`` or ``bounds="private"`` with
        ``bounds_range`` and ``bounds_share``).
    n
        The public number of records.
    epsilon, rho
        The budget of the whole release: ε, or ρ for ``mechanism="discrete-gaussian"``.
    mechanism
        ``"discrete-laplace"`` (default), ``"discrete-gaussian"`` or ``"laplace-float"``.

    Returns
    -------
    NoisePlan
        The sensitivity Δ, the noise scale (Δ/ε for Laplace, Δ₂/√(2ρ) for the Gaussian), its
        standard deviation (√2·Δ/ε for ``laplace-float``; that of the discrete Laplace on the
        statistic's public quantum for the default) and, for each component of the statistic,
        its plausible range: n·(b − a) over a window [a, b] (t(x) over it), n·trials for
        Binomial, n for counts. With a private window the public search range stands for the
        window, and ε is what is left after the window's share.

    Raises
    ------
    ValueError
        If a value breaks the family's rules (as :func:`pymc_dp.release` would say).

    Examples
    --------
    >>> plan = noise_plan("poisson", {"bounds": (0, 40)}, n=1000, epsilon=0.5,
    ...                   mechanism="laplace-float")
    >>> plan.sensitivity, plan.scale, round(plan.noise_sd, 2), plan.ranges
    (40.0, 80.0, 113.14, (40000.0,))
    """
    import numpy as np

    from pymc_dp._validation import check_positive
    from pymc_dp.families import get_family
    from pymc_dp.fixed_point import choose_quantum, quantised_sensitivity
    from pymc_dp.release_noise import is_integer_statistic

    mechanism = mechanism or "discrete-laplace"
    gaussian = mechanism == "discrete-gaussian"
    budget = check_positive(rho if gaussian else epsilon, "rho" if gaussian else "epsilon")
    params = {k: v for k, v in settings.items() if k in ("trials", "categories", "alpha", "sigma")}
    fam = get_family(FAMILY_CLASSES[family].lower(), **params)
    if fam.needs_bounds:
        if settings.get("bounds") == "private":
            window = fam.check_bounds(settings["bounds_range"])
            share = settings["bounds_share"]
            budget *= 1.0 - share  # as pymc_dp.release splits ε (or ρ) with the window
        else:
            window = fam.check_bounds(settings["bounds"])
        sensitivity = (
            fam.release_sensitivity_l2(window) if gaussian else fam.release_sensitivity(window)
        )
        tmin, tmax = fam.statistic_range(*fam.latent_window(window))
        lower = np.minimum(np.atleast_1d(np.asarray(tmin, dtype=float)), 0.0)
        upper = np.maximum(np.atleast_1d(np.asarray(tmax, dtype=float)), 0.0)
    else:
        window = tuple(float(v) for v in fam.domain)
        sensitivity = fam.sensitivity_l2 if gaussian else fam.sensitivity
        lo, hi = fam.valid_region(1)
        lower, upper = np.atleast_1d(lo), np.atleast_1d(hi)
    ranges = tuple(float(n * (u - lo_)) for lo_, u in zip(lower, upper, strict=True))
    # The noise's denominator: ε for the Laplace mechanisms, √(2ρ) for the Gaussian.
    per = math.sqrt(2.0 * budget) if gaussian else budget
    if mechanism == "laplace-float":
        scale = sensitivity / per
        sd = math.sqrt(2.0) * scale
    else:  # discrete noise on the statistic in units of its public quantum (release_noise)
        quantum, units = 1.0, sensitivity
        if not is_integer_statistic(fam):
            t_bounds = np.stack([lower, upper], axis=-1)
            quantum = choose_quantum(t_bounds=t_bounds, n=n, noise_scale=sensitivity / per)
            norm = "l2" if gaussian else "l1"
            units = quantised_sensitivity(sensitivity, quantum, len(ranges), norm)
        scale = units * quantum / per
        # The discrete Gaussian's sd is at most its sigma and close to it at these scales.
        sd = scale if gaussian else _discrete_laplace_sd(units / per) * quantum
    components = (
        ("sum x", "sum x^2") if len(ranges) == 2 and family in ("normal", "lognormal") else ()
    )
    if family == "categorical":
        components = tuple(f"count {k}" for k in range(len(ranges)))
    if family == "lognormal":
        components = ("sum log x", "sum (log x)^2")[: len(ranges)]
    return NoisePlan(
        family, n, budget, mechanism, float(sensitivity), float(scale), float(sd),
        (float(window[0]), float(window[1])), ranges, components or ("statistic",),
    )  # fmt: skip


def dry_run(args: argparse.Namespace, plans: list[ColumnPlan]) -> int:
    """Print the noise of a release against its statistic's range; read and spend nothing.

    With several columns, each at its share of ε; with ``--by``, each group at its public size.
    """
    mechanism = args.mechanism or ("laplace-float" if args.seed is not None else None)
    try:
        if args.by is not None:
            return _dry_run_grouped(args, plans[0], mechanism)
        for plan in plans:
            noise = noise_plan(
                plan.family, plan.settings, n=args.n, epsilon=plan.epsilon, rho=args.rho,
                mechanism=mechanism,
            )  # fmt: skip
            private = plan.settings.get("bounds") == "private"
            _print_plan(noise, private, f"{plan.column} " if len(plans) > 1 else "")
    except (InputError, TypeError, ValueError) as err:
        return fail("release", release_message(one_line(err), "RECORDS"))
    if len(plans) > 1:
        print(
            f"in all: epsilon = {math.fsum(p.epsilon for p in plans):g} for the "
            f"{len(plans)} columns (sequential composition, charged once)"
        )
    return 0


def _print_plan(plan: NoisePlan, private: bool, what: str) -> None:
    gaussian = plan.mechanism == "discrete-gaussian"
    budget = f"rho = {plan.budget:g}" if gaussian else f"epsilon = {plan.budget:g}"
    window = ""
    if plan.family in WINDOWED:
        window = f", window [{plan.window[0]:g}, {plan.window[1]:g}]"
        window += " (the private window's search range)" if private else ""
    print(
        f"dry run: {what}{plan.family} release of n = {plan.n} records{window}, {budget}"
        + (" (after the private window's share)" if private else "")
        + "; no data read, no budget spent\n"
        f"  sensitivity {plan.sensitivity:.4g}, {plan.mechanism} noise scale {plan.scale:.4g}, "
        f"noise sd {plan.noise_sd:.4g}"
    )
    _print_ranges(plan, "  ")


def _print_ranges(plan: NoisePlan, indent: str) -> None:
    for name, width in zip(plan.components, plan.ranges, strict=True):
        ratio = plan.noise_sd / width if width > 0 else math.inf
        print(
            f"{indent}{name}: plausible range {width:.6g} (n × {width / plan.n:.6g}); "
            f"noise sd / range = {ratio:.3g}"
        )


def _dry_run_grouped(args: argparse.Namespace, plan: ColumnPlan, mechanism: str | None) -> int:
    """The noise of each group's release at its public size (parallel composition)."""
    groups = [g.strip() for g in args.groups.split(",")]
    sizes = _public_sizes(args.public_sizes)
    if len(sizes) != len(groups):
        raise InputError(
            f"--public-sizes gives {len(sizes)} size(s) for the {len(groups)} --groups"
        )
    if min(sizes) < 1:
        raise InputError(f"--public-sizes must each be >= 1 (got {min(sizes)})")
    noise = [
        noise_plan(plan.family, plan.settings, n=n, epsilon=args.epsilon, rho=args.rho,
                   mechanism=mechanism)
        for n in sizes
    ]  # fmt: skip
    first = noise[0]
    budget = (
        f"rho = {first.budget:g}" if first.mechanism == "discrete-gaussian"
        else f"epsilon = {first.budget:g}"
    )  # fmt: skip
    window = (
        f", window [{first.window[0]:g}, {first.window[1]:g}]" if plan.family in WINDOWED else ""
    )
    print(
        f"dry run: {plan.family} releases of {len(groups)} groups of {args.by!r}{window}, "
        f"{budget} for the whole set (parallel composition); no data read, no budget spent\n"
        f"  sensitivity {first.sensitivity:.4g}; {first.mechanism} noise on each group's statistic:"
    )
    for key, group in zip(groups, noise, strict=True):
        print(
            f"  {key} (n = {group.n}): noise scale {group.scale:.4g}, noise sd {group.noise_sd:.4g}"
        )
        _print_ranges(group, "    ")
    return 0


def _public_sizes(text: str) -> list[int]:
    try:
        sizes = [int(v) for v in text.split(",")]
    except ValueError:
        raise InputError(
            f"--public-sizes takes whole numbers, comma-separated in the order of --groups "
            f"(got {text!r})"
        ) from None
    return sizes


def release_command(args: argparse.Namespace, plans: list[ColumnPlan]) -> int:
    """Run ``pymc-dp release`` with the checked column ``plans``; return the exit status."""
    output = Path(args.output)
    settings = plans[0].settings
    try:
        if output.exists() and not args.overwrite:
            raise InputError(
                f"{output} exists; pass --overwrite to replace it (a new release of the same "
                "data spends epsilon again)"
            )
        # Checked before any noise is drawn, so that a bad path wastes no privacy budget.
        if output.is_dir():
            raise InputError(f"{output} is a directory; --output takes a file name")
        if not output.parent.is_dir():
            raise InputError(f"{output.parent} is not a directory; create it first")
        if len(plans) > 1 or plans[0].labels is not None:
            from pymc_dp.cli_columns import release_columns

            return release_columns(args, plans, output)
        import pymc as pm

        from pymc_dp._validation import check_positive
        from pymc_dp.io import read_column, write_release
        from pymc_dp.release import release

        gaussian = args.mechanism == "discrete-gaussian"
        if gaussian:
            if args.rho is None or args.epsilon is not None:
                raise InputError("--mechanism discrete-gaussian takes --rho, not --epsilon")
            check_positive(args.rho, "--rho")
        else:
            if args.epsilon is None or args.rho is not None:
                raise InputError(
                    "--epsilon is required (--rho only with --mechanism discrete-gaussian)"
                )
            check_positive(args.epsilon, "--epsilon")
        family = getattr(pm, FAMILY_CLASSES[args.family])
        parquet = _is_parquet(args)
        if not parquet and args.scheduler is not None:
            raise InputError("--scheduler reads Parquet data; convert the CSV file first")
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
        if args.by is not None:
            rel = _release_grouped(args, family, options, parquet)
        elif parquet:
            rel = _release_parquet(
                args,
                lambda data, client: release(
                    data, family, column=args.column, client=client, **options
                ),
            )
        else:
            records = read_column(args.data, args.column, file_format=args.format)
            rel = release(records, family, **options)
        if budget is not None:
            # Saved before the release is written: a failed write still counts as spent.
            budget.save(args.budget)
        write_release(rel, output, overwrite=args.overwrite)
    except (InputError, OSError, OverflowError, TypeError, ValueError) as err:
        return fail("release", release_message(one_line(err), args.column))
    if args.by is not None:
        _print_grouped(output, args, rel)
        return 0
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


def _release_grouped(
    args: argparse.Namespace, family: Any, options: dict[str, Any], parquet: bool
) -> Any:
    """One release per group of --by (a CSV file, or Parquet streamed), ε spent once."""
    from pymc_dp.grouped_release import release_grouped
    from pymc_dp.io import read_column, read_keys

    groups = [g.strip() for g in args.groups.split(",")]
    sizes: Any = "public"
    if args.public_sizes != "public":
        sizes = _public_sizes(args.public_sizes)
    options = dict(options)
    options["label"] = f"{Path(args.data).name}:{args.column} by {args.by}"
    settings = dict(groups=groups, sizes=sizes, by_name=args.by, **options)
    if parquet:
        # One pass over the files (or on the cluster): each group's exact totals.
        return _release_parquet(
            args,
            lambda data, client: release_grouped(
                data, family, column=args.column, by=args.by, client=client, **settings
            ),
        )
    records = read_column(args.data, args.column, file_format=args.format)
    keys = read_keys(args.data, args.by, file_format=args.format)
    return release_grouped(records, family, by=keys, **settings)


def _print_grouped(output: Path, args: argparse.Namespace, rs: Any) -> None:
    rel = rs.first
    params = ", ".join(f"{k}={v:g}" for k, v in rel.family_params.items())
    print(
        f"wrote {output}: {rel.family}({params}) releases of column {args.column!r} for "
        f"{len(rs)} groups of {args.by!r}, epsilon = {rs.total_epsilon:g} for the whole set "
        f"(parallel composition), sensitivity = {rel.sensitivity:g}, {rel.mechanism} scale = "
        f"{rel.scale:g} per group"
        + (
            f"; budget: {rs.budget['spent']:g} of {rs.budget['total']:g} spent"
            if rs.budget is not None
            else ""
        )
    )
    for key, n_g in zip(rs.groups, rs.n, strict=True):
        print(f"  {key}: n = {n_g}")


def _is_parquet(args: argparse.Namespace) -> bool:
    """Whether DATA is Parquet: by --format, or a directory, a glob or a .parquet name."""
    import glob

    if args.format is not None:
        return args.format == "parquet"
    path = Path(args.data)
    return path.is_dir() or glob.has_magic(args.data) or path.suffix.lower() in (".parquet", ".pq")


def _release_parquet(args: argparse.Namespace, run: Any) -> Any:
    """``run(data, client)`` on Parquet, streamed here or on a Dask cluster (--scheduler)."""
    from pymc_dp.frames import parquet_source

    source = parquet_source(args.data)  # checks that the files exist and are Parquet
    columns = [args.column] + ([args.by] if args.by is not None else [])
    for column in columns:
        if column not in source.columns:
            raise InputError(
                f"{args.data}: no column {column!r}; the columns are "
                f"{', '.join(map(repr, source.columns))}"
            )
    try:
        if args.scheduler is None:
            return run(source, None)
        try:
            import dask.dataframe as dd
            from distributed import Client
        except ImportError:
            raise InputError(
                "--scheduler needs Dask; install it with pip install 'pymc-dp[dask]'"
            ) from None
        files = source.dataset.files
        with Client(args.scheduler, timeout="30s") as client:
            # A partition per row group: the workers share the files, memory stays bounded.
            frame = dd.read_parquet(files, columns=columns, split_row_groups=True)
            return run(frame, client)
    except ValueError as err:
        raise InputError(f"{args.data}: {err}") from None


def _open_budget(args: argparse.Namespace, unit: str) -> Any:
    """The ledger named by --budget (created with --budget-total), or None."""
    from pymc_dp.budget import PrivacyBudget

    if args.budget is None:
        if args.budget_total is not None:
            raise InputError("--budget-total needs --budget LEDGER")
        return None
    path = Path(args.budget)
    if path.exists():
        if args.budget_total is not None:
            raise InputError(f"{path} exists: its total is fixed; drop --budget-total")
        budget = PrivacyBudget.load(path)
    else:
        if args.budget_total is None:
            raise InputError(f"{path} does not exist; create it with --budget-total TOTAL")
        budget = PrivacyBudget(**{unit: args.budget_total})
    if budget.unit != unit:
        raise InputError(f"{path} accounts in {budget.unit}, but this release spends {unit}")
    return budget
