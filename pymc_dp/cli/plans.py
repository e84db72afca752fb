"""What ``pymc-dp release`` will do, from its arguments alone: checked before any import.

:func:`check_release_args` enforces which flags go together (argparse errors, exit status 2);
:func:`release_plan` turns the family options, windows, category labels and the split of ε into
one :class:`ColumnPlan` per column, and :func:`regression_settings` checks a regression's
columns and box. Nothing here imports NumPy, PyMC or PyTensor: the families and their options
come from their declarations (:mod:`pymc_dp.cli.texts`).
"""

from __future__ import annotations

import argparse
import math
from typing import Any, NamedTuple

from pymc_dp.cli.messages import InputError
from pymc_dp.cli.texts import family_names, family_options, windowed_families

__all__ = [
    "ColumnPlan",
    "check_release_args",
    "family_settings",
    "regression_settings",
    "release_plan",
]


class ColumnPlan(NamedTuple):
    """What ``pymc-dp release`` will do with one column, from the arguments alone."""

    column: str | None
    """The column (``None`` with --dry-run)."""
    family: str
    settings: dict[str, Any]
    """Keyword arguments of :func:`pymc_dp.release`: family options and window."""
    labels: tuple[str, ...] | None
    """Public category labels (--categories red,green,blue), else ``None``."""
    epsilon: float | None
    """This column's ε: --epsilon, or its share given by --epsilon-split."""


def _split(text: str, flag: str) -> list[str]:
    items = [item.strip() for item in text.split(",")]
    if not all(items):
        raise InputError(f"{flag} takes names separated by commas, none empty (got {text!r})")
    return items


def _categories(text: str, flag: str = "--categories") -> tuple[int, tuple[str, ...] | None]:
    """``--categories``: K (codes 0..K-1) or public labels ``red,green,blue`` (K = 3)."""
    if text.strip().isdigit():
        k = int(text)
        if k < 2:
            raise InputError(f"{flag} must be at least 2 (got {k})")
        return k, None
    labels = _split(text, flag)
    if len(labels) < 2:
        raise InputError(f"{flag} needs K >= 2 or at least two labels (got {text!r})")
    if len(set(labels)) != len(labels):
        repeated = sorted({v for v in labels if labels.count(v) > 1})
        raise InputError(f"{flag} lists {', '.join(repeated)} more than once")
    return len(labels), tuple(labels)


def _epsilon_split(args: argparse.Namespace, columns: list[str]) -> list[float | None]:
    """Each column's ε: the explicit --epsilon-split, checked to sum to --epsilon."""
    if len(columns) == 1:
        if args.epsilon_split is not None:
            raise InputError("--epsilon-split applies only to several --column")
        return [args.epsilon]
    if args.epsilon_split is None:
        raise InputError(
            f"{len(columns)} columns share --epsilon: give each its part with --epsilon-split "
            f"E1,E2,... summing to --epsilon (in the order {','.join(columns)})"
        )
    if args.epsilon is None:
        raise InputError("--epsilon-split needs --epsilon, the total it splits")
    parts = args.epsilon_split.split(",")
    try:
        split = [float(v) for v in parts]
    except ValueError:
        raise InputError(
            f"--epsilon-split takes numbers, comma-separated (got {args.epsilon_split!r})"
        ) from None
    if len(split) != len(columns):
        raise InputError(
            f"--epsilon-split has {len(split)} part(s) for {len(columns)} columns "
            f"({', '.join(columns)})"
        )
    if not all(math.isfinite(e) and e > 0 for e in split):
        raise InputError(f"--epsilon-split parts must each be > 0 (got {args.epsilon_split})")
    if not math.isclose(math.fsum(split), args.epsilon, rel_tol=1e-9, abs_tol=0.0):
        raise InputError(
            f"--epsilon-split sums to {math.fsum(split):g}, not --epsilon {args.epsilon:g}: "
            "the split must account for the whole budget"
        )
    return list(split)


def release_plan(args: argparse.Namespace) -> list[ColumnPlan]:
    """Each column's family, settings, labels and ε, checked before anything is imported.

    One column (or --dry-run) is one plan; ``--column a,b --family normal,poisson`` with
    ``--epsilon-split`` is one plan per column.

    Raises
    ------
    InputError
        For a family option given to a family that does not take it, a missing window, a
        split of ε that is not explicit or does not sum to --epsilon, and so on.
    """
    families = _split(args.family, "--family")
    known = family_names()
    unknown = [f for f in families if f not in known]
    if unknown:
        raise InputError(
            f"--family {unknown[0]!r} is not one of {', '.join(known)} (or "
            "regression, alone, with --x and --y)"
        )
    columns: list[str | None] = [None]
    if args.column is not None:
        columns = list(_split(args.column, "--column"))
        if len(set(columns)) != len(columns):
            raise InputError(f"--column lists a column more than once ({args.column})")
    if len(families) != len(columns):
        if len(families) != 1:
            raise InputError(
                f"--family gives {len(families)} families for {len(columns)} column(s); give "
                "one, or one per --column"
            )
        families = families * len(columns)
    several = len(columns) > 1
    if several:
        if args.by is not None or args.private_bounds is not None:
            raise InputError(
                "several --column do not combine with --by or --private-bounds; release "
                "them one by one"
            )
        if args.mechanism == "discrete-gaussian" or args.rho is not None:
            raise InputError(
                "several --column split --epsilon; the Gaussian mechanism (--rho) takes one "
                "column per call"
            )
    epsilons = _epsilon_split(args, [c or "" for c in columns])
    windowed = [f in windowed_families() for f in families]
    bounds = list(args.bounds or [])
    if not several and len(bounds) > 1:
        raise InputError(f"--bounds is given {len(bounds)} times for one column; give it once")
    if several and args.bounds is not None and len(bounds) != sum(windowed):
        raise InputError(
            f"--bounds is given {len(bounds)} time(s) for {sum(windowed)} windowed column(s); "
            "give it once per windowed --column, in their order"
        )
    plans = []
    for column, family, epsilon, is_windowed in zip(
        columns, families, epsilons, windowed, strict=True
    ):
        if several:
            pair = bounds.pop(0) if bounds and is_windowed else None
        else:
            pair = bounds[0] if bounds else None
        settings, labels = _family_settings(args, family, pair, several)
        plans.append(ColumnPlan(column, family, settings, labels, epsilon))
    if any(p.labels is not None for p in plans) and args.by is not None:
        raise InputError(
            "--categories with labels does not combine with --by; give the number K of codes"
        )
    return plans


def family_settings(args: argparse.Namespace) -> dict[str, Any]:
    """Keyword arguments of :func:`pymc_dp.release` for one column's family options."""
    return release_plan(args)[0].settings


def _family_settings(
    args: argparse.Namespace, family: str, pair: Any, several: bool
) -> tuple[dict[str, Any], tuple[str, ...] | None]:
    settings: dict[str, Any] = {}
    labels = None
    for flag, (option, allowed, required) in family_options().items():
        value = getattr(args, flag.replace("-", "_"))
        if value is None:
            if family in required:
                raise InputError(f"the {family} family needs --{flag}")
            continue
        if family not in allowed:
            if several:  # shared options: each applies to the columns of its family
                continue
            raise InputError(f"--{flag} applies to {', '.join(sorted(allowed))}, not {family}")
        if option.kind == "categories":
            value, labels = _categories(value, f"--{flag}")
        settings[option.setting] = value
    windowed = windowed_families()
    if family in windowed:
        if pair is None and args.private_bounds is None:
            raise InputError(
                f"the {family} family is released over a window: give --bounds A B "
                "(chosen without looking at the data) or --private-bounds LO HI"
            )
        if pair is not None:
            given = [
                f"--{opt.replace('_', '-')}"
                for opt in ("bounds_share", "bounds_quantiles")
                if getattr(args, opt) is not None
            ]
            if given:
                raise InputError(f"{' and '.join(given)} apply only with --private-bounds")
            settings["bounds"] = tuple(pair)
        else:
            settings.update(
                bounds="private",
                bounds_range=tuple(args.private_bounds),
                bounds_share=0.1 if args.bounds_share is None else args.bounds_share,
                bounds_quantiles=(0.025, 0.975)
                if args.bounds_quantiles is None
                else tuple(args.bounds_quantiles),
            )
    elif (pair is not None or args.private_bounds is not None) and not several:
        raise InputError(
            f"the {family} family has bounded records; --bounds and --private-bounds apply "
            f"only to {', '.join(sorted(windowed))}"
        )
    return settings, labels


def regression_settings(args: argparse.Namespace) -> dict[str, Any]:
    """Columns and box of ``--family regression``: keyword arguments of the release."""
    x = _split(args.x, "--x")
    if len(set(x)) != len(x) or args.y in x:
        raise InputError(f"--x and --y must name distinct columns (got --x {args.x} --y {args.y})")
    values = args.x_bounds
    if len(values) != 2 * len(x):
        raise InputError(
            f"--x-bounds takes LO HI for each of the {len(x)} --x column(s) ({', '.join(x)}): "
            f"{2 * len(x)} numbers (got {len(values)})"
        )
    x_bounds = [(values[2 * j], values[2 * j + 1]) for j in range(len(x))]
    for name, (lo, hi) in [*zip(x, x_bounds, strict=True), (args.y, tuple(args.y_bounds))]:
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            flag = "--y-bounds" if name == args.y else "--x-bounds"
            raise InputError(f"{flag} of {name!r} must be finite with LO < HI (got {lo:g} {hi:g})")
    binary = [] if args.binary is None else _split(args.binary, "--binary")
    unknown = [b for b in binary if b not in x]
    if unknown:
        raise InputError(
            f"--binary names covariates among --x ({', '.join(x)}); {', '.join(unknown)} is not"
        )
    factor = [] if args.factor is None else _split(args.factor, "--factor")
    unknown = [f for f in factor if f not in x]
    if unknown:
        raise InputError(
            f"--factor names covariates among --x ({', '.join(x)}); {', '.join(unknown)} is not"
        )
    both = [f for f in factor if f in binary]
    if both:
        raise InputError(
            f"--binary and --factor both name {', '.join(both)}: declare a factor's dummy "
            "columns in --factor only"
        )
    return {
        "covariates": x,
        "response": args.y.strip(),
        "x_bounds": x_bounds,
        "y_bounds": tuple(args.y_bounds),
        "binary": [x.index(b) for b in binary],
        "factor": [x.index(f) for f in factor],
    }


def _given(pairs: Any) -> list[str]:
    return [flag for flag, value in pairs if value is not None and value is not False]


def _missing(pairs: Any) -> list[str]:
    return [flag for flag, value in pairs if value is None]


def _check_regression_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``--family regression``: its own columns and box; the family options do not apply."""
    refused = _given(
        [
            ("--column", args.column),
            ("--by", args.by),
            ("--groups", args.groups),
            ("--public-sizes", args.public_sizes),
            ("--bounds", args.bounds),
            ("--private-bounds", args.private_bounds),
            ("--bounds-share", args.bounds_share),
            ("--bounds-quantiles", args.bounds_quantiles),
            ("--count-share", args.count_share),
            *[(f"--{flag}", getattr(args, flag.replace("-", "_"))) for flag in family_options()],
            ("--epsilon-split", args.epsilon_split),
            ("--dry-run", args.dry_run),
            ("--n", args.n),
            ("--scheduler", args.scheduler),
        ]
    )
    if refused:
        parser.error(
            f"--family regression takes --x COLS --y COL --x-bounds ... --y-bounds LO HI; "
            f"{', '.join(refused)} do(es) not apply to it"
        )
    gaussian = args.mechanism == "discrete-gaussian"
    if gaussian and (args.rho is None or args.epsilon is not None):
        parser.error(
            "--family regression with --mechanism discrete-gaussian takes --rho, not --epsilon"
        )
    if not gaussian and args.rho is not None:
        parser.error("--rho is only for --mechanism discrete-gaussian")
    missing = _missing(
        [
            ("DATA", args.data),
            ("--x", args.x),
            ("--y", args.y),
            ("--x-bounds", args.x_bounds),
            ("--y-bounds", args.y_bounds),
            ("--rho" if gaussian else "--epsilon", args.rho if gaussian else args.epsilon),
            ("--output", args.output),
        ]
    )
    if missing:
        parser.error(f"--family regression needs {', '.join(missing)}")


def check_release_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The release's required arguments, which depend on --dry-run (an argparse error if not)."""
    total = args.budget_total
    if total is not None and not (math.isfinite(total) and total > 0):
        parser.error(f"--budget-total must be a finite number > 0 (got {total:g})")
    if args.mechanism == "laplace-float" and args.seed is None and not args.dry_run:
        parser.error(
            "--mechanism laplace-float needs --seed SEED: floating-point noise is for seeded "
            "studies only; drop --mechanism for a real release (OpenDP's discrete Laplace)"
        )
    families = [f.strip() for f in args.family.split(",")]
    marginal = _given([("--marginals", args.marginals), ("--levels", args.levels)])
    if "marginals" in families:
        if len(families) > 1:
            parser.error("--family marginals is released alone, not beside other families")
        if args.dry_run or args.by is not None:
            parser.error("--family marginals has no --dry-run or --by yet")
        missing = _missing(
            [("DATA", args.data), ("--column", args.column), ("--marginals", args.marginals),
             ("--levels", args.levels), ("--output", args.output)]
        )  # fmt: skip
        if missing:
            parser.error(f"--family marginals needs {', '.join(missing)}")
        return
    if marginal:
        parser.error(f"{', '.join(marginal)} apply only with --family marginals")
    if "regression" in families:
        if len(families) > 1:
            parser.error("--family regression is released alone, not beside other families")
        _check_regression_args(parser, args)
        return
    regression = _given(
        [("--x", args.x), ("--y", args.y), ("--x-bounds", args.x_bounds),
         ("--y-bounds", args.y_bounds), ("--binary", args.binary), ("--factor", args.factor)]
    )  # fmt: skip
    if regression:
        parser.error(f"{', '.join(regression)} apply only with --family regression")
    grouped = _given(
        [("--by", args.by), ("--groups", args.groups), ("--public-sizes", args.public_sizes)]
    )
    if grouped and args.by is None:
        parser.error(f"{' and '.join(grouped)} apply only with --by COLUMN")
    if args.by is not None:
        if args.groups is None:
            parser.error("--by needs --groups A,B,...: the public group keys")
        if args.public_sizes is None:
            parser.error(
                "--by needs --public-sizes: each group's size is published exactly, so it "
                "must be public (a record moving between groups would change two sizes)"
            )
        if args.private_bounds is not None:
            parser.error(
                "--by does not combine with --private-bounds; give public --bounds for a "
                "windowed family"
            )
        if args.dry_run and args.public_sizes == "public":
            parser.error(
                "--dry-run --by needs the group sizes: --public-sizes N1,N2,... in the order "
                "of --groups (they stand for --n)"
            )
    if args.dry_run:
        given = _given(
            [
                ("DATA", args.data),
                ("--output", args.output),
                ("--budget", args.budget),
                ("--budget-total", args.budget_total),
                ("--scheduler", args.scheduler),
                ("--format", args.format),
                ("--clamp", args.clamp),
                ("--overwrite", args.overwrite),
            ]
        )
        if given:
            parser.error(
                f"--dry-run reads no data and writes nothing; drop {', '.join(given)} "
                "(give the number of records with --n)"
            )
        if args.by is not None:
            if args.n is not None:
                parser.error("--dry-run --by takes the group sizes from --public-sizes, not --n")
        elif args.n is None:
            parser.error("--dry-run needs --n N, the public number of records")
        return
    if args.n is not None:
        parser.error("--n applies only with --dry-run (otherwise n is the file's record count)")
    missing = _missing(
        [
            ("DATA", args.data),
            ("--column", args.column),
            ("--output", args.output),
        ]
    )
    if missing:
        parser.error(
            f"the following arguments are required: {', '.join(missing)} (or --dry-run --n N "
            "to see the noise of a release without reading data)"
        )
