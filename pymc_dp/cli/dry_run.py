"""``pymc-dp release --dry-run``: the noise a release would add, from public values only.

Reads no data, draws no noise and spends no budget: from n (or each group's public size with
``--by``), ε (each column's part with several columns), the family and its window, it prints the
sensitivity, the noise's scale and standard deviation, and each component's plausible range,
each component named as the family's declaration labels it
(:attr:`~pymc_dp.families.FamilyDeclaration.statistic_labels`).
"""

from __future__ import annotations

import argparse
import math
from typing import Any, NamedTuple

from pymc_dp.cli.inputs import count_share
from pymc_dp.cli.messages import InputError, fail, one_line, release_message
from pymc_dp.cli.plans import ColumnPlan
from pymc_dp.cli.texts import windowed_families

__all__ = ["NoisePlan", "discrete_laplace_sd", "dry_run", "noise_plan", "public_sizes"]


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
    count_epsilon: float | None = None
    """ε of the window count released with the sum (its noise scale 1/ε), else ``None``."""


def discrete_laplace_sd(scale: float) -> float:
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
    count_share: float | str | None = None,
) -> NoisePlan:
    """The noise a release would add and the range of its statistic, from public values only.

    Parameters
    ----------
    family
        Family name as ``--family`` takes it, e.g. ``"poisson"`` (``"normal"`` with ``sigma``
        is the Normal family with known σ).
    settings
        The family's settings and window as :func:`pymc_dp.release` takes them (its options'
        settings: ``trials``, ``categories``, ``alpha``, ``sigma``, ...; ``bounds`` or
        ``bounds="private"`` with ``bounds_range`` and ``bounds_share``).
    n
        The public number of records.
    epsilon, rho
        The budget of the whole release: ε, or ρ for ``mechanism="discrete-gaussian"``.
    mechanism
        ``"discrete-laplace"`` (default), ``"discrete-gaussian"`` or ``"laplace-float"``.
    count_share
        As :func:`pymc_dp.release` takes it: the share of ε spent on the window count.

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
    from pymc_dp.curator.fixed_point import choose_quantum, quantised_sensitivity
    from pymc_dp.curator.noise import is_integer_statistic
    from pymc_dp.curator.single import DEFAULT_COUNT_SHARE, counts_window
    from pymc_dp.families import declared_families, family_declaration, get_family

    mechanism = mechanism or "discrete-laplace"
    gaussian = mechanism == "discrete-gaussian"
    budget = check_positive(rho if gaussian else epsilon, "rho" if gaussian else "epsilon")
    # The family's settings among the release's keyword arguments (the rest is the window).
    declared = {
        o.setting for d in declared_families() if family in (d.name, d.command) for o in d.options
    }
    params = {k: v for k, v in settings.items() if k in declared}
    fam = get_family(family, **params)
    count_epsilon = None
    if fam.needs_bounds:
        if settings.get("bounds") == "private":
            window = fam.check_bounds(settings["bounds_range"])
            share = settings["bounds_share"]
            budget *= 1.0 - share  # as pymc_dp.release splits ε (or ρ) with the window
        else:
            window = fam.check_bounds(settings["bounds"])
        if count_share == "auto":
            count_share = DEFAULT_COUNT_SHARE if counts_window(fam, gaussian) else None
        if count_share is not None:  # as pymc_dp.release splits ε with the window count
            count_epsilon = budget * count_share
            budget -= count_epsilon
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
        sd = scale if gaussian else discrete_laplace_sd(units / per) * quantum
    components = family_declaration(fam.name).component_labels(len(ranges))
    return NoisePlan(
        family, n, budget, mechanism, float(sensitivity), float(scale), float(sd),
        (float(window[0]), float(window[1])), ranges, components, count_epsilon,
    )  # fmt: skip


def dry_run(args: argparse.Namespace, plans: list[ColumnPlan]) -> int:
    """Print the noise of a release against its statistic's range; read and spend nothing.

    With several columns, each at its share of ε; with ``--by``, each group at its public size.
    """
    mechanism = args.mechanism or ("laplace-float" if args.seed is not None else None)
    try:
        if args.by is not None:
            return _dry_run_grouped(args, plans[0], mechanism)
        single = len(plans) == 1 and plans[0].labels is None
        if not single and args.count_share is not None:
            raise InputError("--count-share applies to a single --column release")
        for plan in plans:
            noise = noise_plan(
                plan.family, plan.settings, n=args.n, epsilon=plan.epsilon, rho=args.rho,
                mechanism=mechanism, count_share=count_share(args) if single else None,
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
    if plan.count_epsilon is not None:
        budget += " for the window sum"
    window = ""
    if plan.family in windowed_families():
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
    if plan.count_epsilon is not None:
        print(
            f"  and the number of records in the window: epsilon = {plan.count_epsilon:g}, "
            f"noise scale {1.0 / plan.count_epsilon:.4g} (--count-share 0 for the sum alone)"
        )


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
    sizes = public_sizes(args.public_sizes)
    if len(sizes) != len(groups):
        raise InputError(
            f"--public-sizes gives {len(sizes)} size(s) for the {len(groups)} --groups"
        )
    if min(sizes) < 1:
        raise InputError(f"--public-sizes must each be >= 1 (got {min(sizes)})")
    share = count_share(args)
    noise = [
        noise_plan(plan.family, plan.settings, n=n, epsilon=args.epsilon, rho=args.rho,
                   mechanism=mechanism, count_share=share)
        for n in sizes
    ]  # fmt: skip
    first = noise[0]
    budget = (
        f"rho = {first.budget:g}" if first.mechanism == "discrete-gaussian"
        else f"epsilon = {first.budget:g}"
    )  # fmt: skip
    window = (
        f", window [{first.window[0]:g}, {first.window[1]:g}]"
        if plan.family in windowed_families()
        else ""
    )
    total = budget
    if first.count_epsilon is not None:
        total = f"epsilon = {first.budget + first.count_epsilon:g}"
    print(
        f"dry run: {plan.family} releases of {len(groups)} groups of {args.by!r}{window}, "
        f"{total} for the whole set (parallel composition); no data read, no budget spent\n"
        f"  sensitivity {first.sensitivity:.4g}; {first.mechanism} noise on each group's statistic"
        + (f" ({budget} for the window sum)" if first.count_epsilon is not None else "")
        + ":"
    )
    for key, group in zip(groups, noise, strict=True):
        print(
            f"  {key} (n = {group.n}): noise scale {group.scale:.4g}, noise sd {group.noise_sd:.4g}"
        )
        _print_ranges(group, "    ")
    if first.count_epsilon is not None:
        print(
            f"  and each group's number of records in the window: epsilon = "
            f"{first.count_epsilon:g}, noise scale {1.0 / first.count_epsilon:.4g} "
            "(--count-share 0 for the sums alone)"
        )
    return 0


def public_sizes(text: str) -> list[int]:
    """The group sizes of ``--public-sizes N1,N2,...`` (whole numbers ≥ 1)."""
    try:
        sizes = [int(v) for v in text.split(",")]
    except ValueError:
        raise InputError(
            f"--public-sizes takes whole numbers, comma-separated in the order of --groups "
            f"(got {text!r})"
        ) from None
    return sizes
