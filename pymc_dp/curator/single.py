"""Curator side: compute sufficient statistics and release them with vetted noise.

This module never imports inference code, and nothing in inference touches raw data: a
:class:`~pymc_dp.curator.record.Release` is the whole interface between the two roles. Noise is
drawn in :mod:`pymc_dp.curator.noise`: OpenDP's discrete Laplace (the default) or discrete
Gaussian on exact integer (fixed-point) statistics, or, for seeded studies, floating-point
Laplace.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from pymc_dp._validation import (
    MAX_CATEGORIES,
    check_bool,
    check_positive,
    check_records,
    check_rng,
    json_float,
)
from pymc_dp.curator.budget import charge_release
from pymc_dp.curator.exact_sums import BATCH, FamilyPlan, clamp_records, combine_totals
from pymc_dp.curator.frames import exact_totals, in_memory_column, is_frame
from pymc_dp.curator.noise import ExactTotal, check_mechanism, noisy_statistic
from pymc_dp.curator.private_window import (
    bounds_mechanism as window_mechanism,
)
from pymc_dp.curator.private_window import (
    choose_window,
    count_below,
    resolve_candidates,
    warn_if_noisy_bounds,
    widen_to_counts,
)
from pymc_dp.curator.record import Release, counts_window
from pymc_dp.families import ExponentialFamily, get_family
from pymc_dp.mechanisms import noise_scale
from pymc_dp.mechanisms.laplace import laplace_mechanism
from pymc_dp.mechanisms.private_quantile import check_quantile_pair
from pymc_dp.mechanisms.vetted import (
    DISCRETE_GAUSSIAN,
    LAPLACE_FLOAT,
    discrete_laplace_mechanism,
    zcdp_to_approx_dp,
)

__all__ = ["DEFAULT_COUNT_SHARE", "check_count_share", "counts_window", "release"]


def release(
    x: npt.ArrayLike | Any,
    family: Any,
    *,
    epsilon: float | None = None,
    column: str | None = None,
    client: Any = None,
    bounds: tuple[float, float] | str | None = None,
    bounds_share: float = 0.1,
    bounds_range: tuple[float, float] | None = None,
    bounds_quantiles: tuple[float, float] = (0.025, 0.975),
    bounds_candidates: str = "auto",
    count_share: float | str | None = None,
    clamp: bool = False,
    rng: int | np.random.Generator | None = None,
    mechanism: str | None = None,
    rho: float | None = None,
    delta: float = 1e-9,
    budget: Any = None,
    label: str | None = None,
    **family_params: Any,
) -> Release:
    """Release the sufficient statistics of ``x`` under differential privacy.

    Computes s = Σ t(x_i) for the family, and publishes y = s + noise on every component,
    scaled to the sensitivity of s under replacing one record (n is public). Families with
    unbounded statistics are released over a window ``bounds = (a, b)``: only records with
    a ≤ x ≤ b are summed, and Δ follows Appendix C of Bernstein & Sheldon (2018).

    The statistic is summed exactly (:mod:`pymc_dp.curator.exact_sums`; a windowed record is first
    put on a fine public grid of step ``record_quantum`` inside the window, which Δ covers
    unchanged). The default noise is vetted: OpenDP's discrete Laplace on that exact total
    (counts as they are; a float total rounded to a multiple of a public power-of-two
    statistic quantum q, with the rounding added to the sensitivity), drawn from the operating
    system's randomness. Passing ``rng`` makes the call a seeded *study*: the noise is then the
    floating-point Laplace sampler (``mechanism="laplace-float"``), which is not safe for
    real data (Mironov 2012), and the release records that name.

    Parameters
    ----------
    x
        The records: a one-dimensional array, or a data frame, series or relation that
        :mod:`pymc_dp.curator.frames` reads (pandas, Polars eager or lazy, Dask, DuckDB, Parquet
        files through :func:`pymc_dp.curator.frames.parquet_source`) with ``column=``. Lazy inputs
        are streamed in batches, Dask input is reduced on its cluster, and never collected whole.
    family
        PyMC distribution class of one record: ``pm.Bernoulli``, ``pm.Binomial`` (needs
        ``trials``), ``pm.Categorical`` (needs ``categories``), or, with ``bounds``,
        ``pm.Exponential``, ``pm.Gamma`` (needs ``alpha``), ``pm.Poisson``, ``pm.Geometric``,
        ``pm.Normal`` (releases Σx and Σx²; with ``sigma=`` only Σx), ``pm.LogNormal`` (the
        same on log x).
    epsilon
        Total privacy budget ε > 0 of the release (Laplace mechanisms).
    column
        The column of a data frame that holds the records (not for arrays; optional for a
        series).
    client
        A ``dask.distributed.Client`` whose cluster runs the reduction of Dask input (default:
        Dask's current scheduler). Only the exact integer totals come back; the noise is
        added here, once.
    bounds
        Truncation window ``(a, b)`` for a family with unbounded statistics, chosen without
        looking at ``x``; or ``"private"`` to choose it from ``x`` with PrivateQuantile (Smith
        2011), spending ``bounds_share · epsilon`` of the budget on it
        (:mod:`pymc_dp.curator.private_window`).
    bounds_share
        Share of ``epsilon`` spent on private bounds, in (0, 1).
    bounds_range
        Public range ``(lower, upper)`` that PrivateQuantile searches (records are clamped to
        it); required with ``bounds="private"``.
    bounds_quantiles
        Quantiles of ``x`` that private bounds estimate.
    bounds_candidates
        Outputs private bounds choose from: ``"linear"`` (1025 evenly spaced public
        candidates), ``"log"`` (1025 log-spaced ones,
        :func:`~pymc_dp.mechanisms.private_quantile.log_candidates`), ``"gaps"`` (Smith's
        mechanism over the gaps between records, drawn in floating point: seeded studies and
        in-memory records only), or ``"auto"`` (the default): ``"log"`` when ``bounds_range``
        is non-negative and spans decades (it starts at 0, or upper/lower ≥ 100), else
        ``"linear"`` (``"gaps"`` in a seeded study). Candidates need only the number of
        records below each, counted exactly in one pass on any engine (lazy and Dask input
        included); a real release then chooses with OpenDP's report-noisy-min. A
        :class:`~pymc_dp.mechanisms.private_quantile.NoisyBoundsWarning` is issued, from n, ε
        and the share alone, when the quantiles' rank error (95 %) exceeds half the records
        between them (the window could then miss the data).
    count_share
        Also release the number of records inside the window (a windowed family with a
        one-number statistic, Laplace mechanisms), spending this share of the statistics' ε on
        it: the sum gets ε·(1 - share) and noise Δ/(ε·(1 - share)), the count ε·share and noise
        1/(ε·share) (a count moves by at most 1 when one record is replaced). The sum alone
        cannot tell a window that holds nearly every record from one far out in the tail (a
        Poisson rate of 2.7 from one of 38 over [0, 30]); the count can. ``0.1`` (the command
        line's default) costs at most 18% of the Fisher information about θ (sd 11% wider)
        where noise dominates, and adds up to 1.5× where the window cuts the data
        (``benchmarks/window_count_share.py``).
        ``"auto"``: 0.1 where a count applies, else none. ``None`` (the default here): no
        count, the release of earlier versions.
    clamp
        If ``False`` (the default), a record outside the family's domain (e.g. 7 successes of
        5 trials, a category code ≥ K, a negative waiting time) stops the release. If
        ``True``, such records are clamped to the domain's nearest end (for LogNormal, whose
        domain is x > 0, a record ≤ 0 goes to the smallest positive normal float) and the
        release records ``clamped=True``. The domain is public, so Δ is unchanged and the
        release stays ε-DP. Records that are not whole numbers where the family needs them
        are never rounded.
    rng
        Seed or :class:`numpy.random.Generator`: a study, with ``"laplace-float"`` noise (a
        vetted ``mechanism`` with ``rng`` is refused: OpenDP's samplers cannot be seeded).
        ``None`` (the default) is a real release with vetted noise.
    mechanism
        ``"discrete-laplace"`` (ε-DP, the default without ``rng``), ``"discrete-gaussian"``
        (ρ-zCDP, needs ``rho`` instead of ``epsilon``) or ``"laplace-float"`` (studies).
    rho
        zCDP budget ρ > 0 of a ``"discrete-gaussian"`` release, private bounds included (they
        spend ``bounds_share · rho``, as ε = √(2 · bounds_share · rho)-DP).
    delta
        δ at which the Gaussian release states its (ε, δ) guarantee (OpenDP's conversion).
    budget
        A :class:`~pymc_dp.curator.budget.PrivacyBudget`: the release is charged to it before any
        noise is drawn, refused if it would exceed the total, and records what was spent.
    label
        Name of this release in the accountant's ledger (default: the family name).
    **family_params
        Family settings: ``trials=`` for Binomial, ``categories=`` for Categorical, ``alpha=``
        for Gamma, ``sigma=`` for Normal or LogNormal with known σ.

    Returns
    -------
    Release
        The noisy statistic with n, ε, Δ, bounds, family, the statistic's ``quantum`` (vetted
        mechanisms) and the records' grid step ``record_quantum``. The statistic is summed
        exactly (:mod:`pymc_dp.curator.exact_sums`): the same records give the same statistic bit
        for bit from any engine, partitioning or order.

    Raises
    ------
    TypeError, ValueError
        If an argument is malformed or a record does not belong to the family (checked before
        any noise is drawn). Messages never quote a record's value.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> x = np.random.default_rng(0).integers(0, 3, size=200)
    >>> rel = release(x, pm.Categorical, epsilon=0.5, categories=3, rng=1)
    >>> rel.value.shape, rel.sensitivity
    ((3,), 2.0)
    >>> x = np.random.default_rng(0).exponential(0.5, size=500)
    >>> rel = release(x, pm.Exponential, epsilon=0.5, bounds=(0.0, 1.5), rng=1)
    >>> rel.sensitivity, rel.bounds
    (1.5, (0.0, 1.5))
    """
    fam = checked_family(family, family_params)
    mechanism, gaussian, epsilon, generator = noise_settings(mechanism, rng, epsilon, rho, delta)
    clamp = check_bool(clamp, "clamp")
    count_share = check_count_share(count_share, fam, gaussian)
    private = fam.needs_bounds and isinstance(bounds, str) and bounds == "private"
    kind = (
        resolve_candidates(bounds_candidates, bounds_range, study=generator is not None)
        if private
        else None
    )
    x, records, name = _records_input(x, fam, column=column, clamp=clamp, kind=kind)
    bounds_epsilon = 0.0
    bounds_mechanism = None
    charged = False
    if not fam.needs_bounds:
        if bounds is not None:
            raise TypeError(f"bounds apply only to families with unbounded statistics, not {fam!r}")
        window = fam.domain
    elif isinstance(bounds, str):
        if not private:
            raise ValueError(f"bounds must be a pair (a, b) or 'private' (got {bounds!r})")
        window, epsilon, bounds_epsilon, bounds_mechanism = _private_window(
            x,
            fam,
            kind=kind,
            records=records,
            name=name,
            column=column,
            client=client,
            clamp=clamp,
            epsilon=epsilon,
            gaussian=gaussian,
            share=bounds_share,
            search_range=bounds_range,
            quantiles=bounds_quantiles,
            charge=lambda eps, bounds_eps: charge_release(
                budget, mechanism, eps, bounds_eps, label or fam.name
            ),
            rng=generator,
        )
        charged = True
    else:
        window = fam.check_bounds(bounds)
    # One pipeline for every input: the exact total s (the same bit for bit from arrays and
    # from every engine), then the noise of the mechanism on s (release_noise).
    try:
        plan = FamilyPlan.for_release(
            fam,
            window if fam.needs_bounds else None,
            clamp=clamp,
            name=name,
            count=count_share is not None,
        )
    except ValueError:
        if not charged:
            raise
        # The window was chosen from the data: its values stay private.
        raise PrivateWindowError(
            "is narrower than the fixed-point quantum of its records"
        ) from None
    n, totals = _exact_totals(x, plan, records=records, name=name, column=column, client=client)
    sum_epsilon = epsilon if count_share is None else epsilon * (1.0 - count_share)
    try:
        check_release_noise(fam, window, n, gaussian=gaussian, epsilon=sum_epsilon)
    except ValueError:
        if not charged:
            raise
        raise PrivateWindowError("gives noise that the statistic cannot carry") from None
    if not charged:
        charge_release(budget, mechanism, epsilon, bounds_epsilon, label or fam.name)
    return release_from_totals(
        fam,
        plan,
        window,
        n,
        totals,
        mechanism=mechanism,
        epsilon=epsilon,
        delta=delta,
        rng=generator,
        bounds_epsilon=bounds_epsilon,
        bounds_mechanism=bounds_mechanism,
        budget=budget,
        count_share=count_share,
    )


class PrivateWindowError(ValueError):
    """A privately chosen window cannot be used; the message never quotes its ends."""

    def __init__(self, problem: str) -> None:
        super().__init__(
            f"the privately chosen window {problem}; its budget is spent (and charged); "
            "change bounds_range, bounds_quantiles or bounds_share, or give public bounds"
        )


def _records_input(
    x: Any, fam: ExponentialFamily, *, column: str | None, clamp: bool, kind: str | None
) -> tuple[Any, npt.NDArray[Any] | None, str]:
    """``x`` as :func:`release` reads it: (input, validated records or ``None`` for a frame, name).

    Arrays are checked (and clamped) here; a data frame is checked batch by batch as it is
    summed. Smith's gaps sort the records, so an eager frame is then read whole (lazy input is
    refused by :func:`~pymc_dp.curator.frames.in_memory_column`).
    """
    frame = is_frame(x)
    if frame and kind == "gaps":
        x, frame = in_memory_column(x, column), False
    elif not frame and column is not None:
        raise TypeError(
            f"column applies to data frames, not to {type(x).__name__}; pass the array alone"
        )
    if frame:
        return x, None, "x" if column is None else f"column {column!r}"
    x = check_records(x, "x")
    return x, fam.validate_data(clamp_records(fam, x) if clamp else x), "x"


def _private_window(
    x: Any,
    fam: ExponentialFamily,
    *,
    kind: str | None,
    records: npt.NDArray[Any] | None,
    name: str,
    column: str | None,
    client: Any,
    clamp: bool,
    epsilon: float,
    gaussian: bool,
    share: float,
    search_range: tuple[float, float] | None,
    quantiles: tuple[float, float],
    charge: Any,
    rng: np.random.Generator | None,
) -> tuple[tuple[float, float], float, float, str]:
    """Choose the window of ``bounds="private"``.

    Returns (window, ε left for the statistic, ε of the window, the window's mechanism). Every
    check of public values comes before ``charge(ε, ε_window)``, and that before any noise.
    """
    share = _check_share(share)
    if search_range is None:
        raise ValueError(
            "bounds='private' needs bounds_range=(lower, upper), a public range that "
            "surely holds the quantiles; records are clamped to it"
        )
    # The search range must be a valid window itself, checked before any noise is drawn,
    # and so must the noise of a window as wide as the range (public values only).
    search = fam.check_bounds(search_range)
    check_quantile_pair(quantiles)
    if gaussian:
        bounds_epsilon = math.sqrt(share) * epsilon  # ε²/2 = share · ρ
        epsilon = math.sqrt(1.0 - share) * epsilon
    else:
        bounds_epsilon = share * epsilon
        epsilon -= bounds_epsilon
    # Candidates need only the number of records below each one: a pass that any engine
    # runs (and that checks every record) before anything is charged or drawn.
    counts = None
    if kind != "gaps":
        counts = count_below(
            x, fam, kind, search, records=records, column=column, client=client,
            clamp=clamp, name=name,
        )  # fmt: skip
    n_records = counts[0] if counts is not None else int(np.shape(records)[0])
    _statistic_magnitude(fam, search, n_records)
    # A search range narrower than its fixed-point quantum refuses every window in it: a
    # public refusal, made before anything is charged.
    try:
        FamilyPlan.for_release(fam, search, clamp=clamp, name=name)
    except ValueError:
        raise ValueError(
            f"bounds_range ({search[0]!r}, {search[1]!r}) is narrower than the fixed-point "
            "quantum of records of that size, and so is every window in it: widen it"
        ) from None
    noise_scale(sensitivity=_sensitivity(fam, search, gaussian), epsilon=epsilon)
    charge(epsilon, bounds_epsilon)
    warn_if_noisy_bounds(n_records, bounds_epsilon, quantiles, kind, search)
    window = choose_window(
        kind=kind,
        search=search,
        epsilon=bounds_epsilon,
        quantiles=quantiles,
        rng=rng,
        records=records,
        counts=counts,
    )
    if window[0] >= window[1]:
        raise PrivateWindowError("collapsed to a point")
    try:
        window = fam.check_bounds(widen_to_counts(window, getattr(fam, "discrete", False)))
    except ValueError:
        raise PrivateWindowError("is not a valid window of the family") from None
    return window, epsilon, bounds_epsilon, window_mechanism(kind, study=rng is not None)


def _exact_totals(
    x: Any,
    plan: FamilyPlan,
    *,
    records: npt.NDArray[Any] | None,
    name: str,
    column: str | None,
    client: Any,
) -> tuple[int, Any]:
    """(n, exact totals of the statistic): over validated records in batches, or a frame."""
    if records is None:
        n, totals = exact_totals(x, plan, [column] if column is not None else [None], client=client)
        if n == 0:
            raise ValueError(f"{name} must not be empty")
        return n, totals
    n = int(records.shape[0])
    totals = combine_totals(
        plan.batch_totals(records[start : start + BATCH], checked=True)
        for start in range(0, n, BATCH)
    )[1]
    return n, totals


def checked_family(family: Any, family_params: dict[str, Any]) -> ExponentialFamily:
    """The family of a release, its settings checked to be public numbers a file can hold."""
    fam = get_family(family, **family_params)
    for name, setting in fam.params().items():
        json_float(setting, name)  # e.g. trials=10**400 cannot be a float sensitivity
    categories = getattr(fam, "categories", None)
    if categories is not None and categories > MAX_CATEGORIES:
        raise ValueError(
            f"categories must be at most {MAX_CATEGORIES} (got {categories}): each category "
            "is a released count with its own noise; merge rare categories first"
        )
    return fam


def noise_settings(
    mechanism: Any, rng: Any, epsilon: Any, rho: Any, delta: Any
) -> tuple[str, bool, float, np.random.Generator | None]:
    """(mechanism, gaussian, ε, generator) of a release, its noise arguments checked.

    For the Gaussian mechanism the ε returned is √(2ρ): σ = Δ₂ / √(2ρ) plays b = Δ/ε in the
    bookkeeping. The generator is ``None`` for a vetted mechanism (OpenDP cannot be seeded).
    """
    mechanism = check_mechanism(mechanism, rng)
    gaussian = mechanism == DISCRETE_GAUSSIAN
    if gaussian:
        if epsilon is not None:
            raise TypeError("a 'discrete-gaussian' release takes rho, not epsilon")
        if rho is None:
            raise TypeError("a 'discrete-gaussian' release needs rho=, its zCDP budget")
        rho = check_positive(rho, "rho")
        zcdp_to_approx_dp(rho, delta)  # checks delta
        epsilon = math.sqrt(2.0 * rho)
    else:
        if rho is not None:
            raise TypeError(
                f"rho applies only to mechanism='discrete-gaussian' (not {mechanism!r})"
            )
        if epsilon is None:
            raise TypeError("release needs epsilon=, its privacy budget")
        epsilon = check_positive(epsilon, "epsilon")
    if mechanism == LAPLACE_FLOAT and rng is None:
        # Unseeded float noise would be a real release with a sampler that is not safe for one
        # (Mironov 2012): the float sampler is for seeded studies only.
        raise ValueError(
            "mechanism='laplace-float' needs rng= (a seed: it is for seeded studies only); "
            "for a real release drop mechanism (OpenDP's 'discrete-laplace' is the default)"
        )
    generator = check_rng(rng) if rng is not None else None
    return mechanism, gaussian, epsilon, generator


def check_release_noise(
    fam: ExponentialFamily, window: tuple[float, float], n: int, *, gaussian: bool, epsilon: float
) -> None:
    """Refuse, from public values only, noise that would overflow or fall below float resolution."""
    magnitude = _statistic_magnitude(fam, window, n)
    noise_scale(
        sensitivity=_sensitivity(fam, window, gaussian), epsilon=epsilon, magnitude=magnitude
    )


def release_from_totals(
    fam: ExponentialFamily,
    plan: FamilyPlan,
    window: tuple[float, float],
    n: int,
    totals: tuple[int, ...],
    *,
    mechanism: str,
    epsilon: float,
    delta: float,
    rng: np.random.Generator | None,
    bounds_epsilon: float = 0.0,
    bounds_mechanism: str | None = None,
    budget: Any = None,
    count_share: float | None = None,
) -> Release:
    """The :class:`Release` of exact integer totals: the mechanism's noise added once.

    ``epsilon`` is √(2ρ) for the Gaussian mechanism (:func:`noise_settings`); ``budget`` was
    charged by the caller and is only recorded here. With ``count_share`` the plan counted the
    records in the window (its last total), and that count is released with ε·share, the sum
    with the rest.
    """
    count_epsilon = None
    window_count = None
    if count_share is not None:
        *totals, inside = totals
        totals = tuple(totals)
        count_epsilon = epsilon * count_share
        epsilon = epsilon - count_epsilon
    gaussian = mechanism == DISCRETE_GAUSSIAN
    magnitude = _statistic_magnitude(fam, window, n)
    sensitivity = _sensitivity(fam, window, gaussian)
    noise_scale(sensitivity=sensitivity, epsilon=epsilon, magnitude=magnitude)
    noisy = noisy_statistic(
        fam,
        ExactTotal(totals, plan.units()[: len(totals)]),
        window,
        n=n,
        mechanism=mechanism,
        sensitivity=sensitivity,
        epsilon=None if gaussian else epsilon,
        rho=epsilon**2 / 2.0 if gaussian else None,
        rng=rng,
        magnitude=magnitude,
    )
    if count_share is not None:  # the sum's noise first, then the count's
        window_count = _noisy_count(inside, n, mechanism, count_epsilon, rng)
    return Release(
        value=noisy.value,
        n=n,
        epsilon=zcdp_to_approx_dp(epsilon**2 / 2.0, delta) if gaussian else epsilon,
        sensitivity=noisy.sensitivity,
        bounds=window,
        family=fam.name,
        family_params=fam.params(),
        mechanism=mechanism,
        bounds_epsilon=bounds_epsilon,
        bounds_mechanism=bounds_mechanism,
        clamped=plan.clamp,
        quantum=noisy.quantum,
        record_quantum=plan.quantum,
        library=noisy.library,
        rho=epsilon**2 / 2.0 if gaussian else None,
        delta=delta if gaussian else 0.0,
        budget=budget.receipt() if budget is not None else None,
        window_count=window_count,
        count_epsilon=count_epsilon,
    )


def _noisy_count(
    count: int, n: int, mechanism: str, epsilon: float, rng: np.random.Generator | None
) -> float:
    """The window count with Laplace noise of scale 1/ε (sensitivity 1 under replace-one).

    OpenDP's discrete Laplace on the integer count, or the float sampler of a seeded study.
    """
    if mechanism == LAPLACE_FLOAT:
        noisy = laplace_mechanism(
            np.array([float(count)]), sensitivity=1.0, epsilon=epsilon, rng=rng, magnitude=n
        )
        return float(noisy[0])
    noisy = discrete_laplace_mechanism(np.array([count], dtype=np.int64), sensitivity=1.0,
                                       epsilon=epsilon)  # fmt: skip
    return float(noisy[0])


DEFAULT_COUNT_SHARE = 0.1
"""The share of ε that ``count_share="auto"`` (the command line's default) spends on the window
count: it costs at most 18% of the Fisher information about θ (sd 11% wider) where the noise
dominates, and adds up to 1.5× where the window cuts the data
(``benchmarks/window_count_share.py``)."""


def check_count_share(share: Any, fam: ExponentialFamily, gaussian: bool) -> float | None:
    """``count_share`` checked: ``None``, or a share in (0, 1) for a one-number window sum.

    ``"auto"`` is :data:`DEFAULT_COUNT_SHARE` where a count applies, else ``None``.
    """
    if share is None:
        return None
    if isinstance(share, str) and share == "auto":
        return DEFAULT_COUNT_SHARE if counts_window(fam, gaussian) else None
    if not counts_window(fam, gaussian=False):
        raise ValueError(
            f"count_share applies to a windowed family with one statistic (Poisson, "
            f"Exponential, ...), not {fam!r}: pass count_share=None"
        )
    if gaussian:
        raise ValueError(
            "count_share releases the window count with Laplace noise; it does not apply to "
            "mechanism='discrete-gaussian': pass count_share=None"
        )
    share = check_positive(share, "count_share")
    if share >= 1:
        raise ValueError(
            f"count_share must lie in (0, 1), the share of epsilon spent on the window count "
            f"(got {share})"
        )
    return share


def _sensitivity(fam: ExponentialFamily, window: tuple[float, float], gaussian: bool) -> float:
    """The exact statistic's sensitivity: L2 for the Gaussian mechanism, else L1."""
    if gaussian:
        return fam.release_sensitivity_l2(window) if fam.needs_bounds else fam.sensitivity_l2
    return fam.release_sensitivity(window) if fam.needs_bounds else fam.sensitivity


def _statistic_magnitude(fam: ExponentialFamily, window: tuple[float, float], n: int) -> float:
    """Largest |s_j| that any n records can give: a public number (n, the window, the family).

    The noise's resolution check uses it instead of the exact statistic, so that refusing a
    release never depends on the data.
    """
    if fam.needs_bounds:
        tmin, tmax = fam.statistic_range(*fam.latent_window(window))
        per_record = float(np.max(np.maximum(np.abs(tmin), np.abs(tmax))))
    else:
        lower, upper = fam.valid_region(1)
        per_record = float(np.max(np.maximum(np.abs(lower), np.abs(upper))))
    with np.errstate(over="ignore"):
        magnitude = float(np.float64(n) * np.float64(per_record))
    if not math.isfinite(magnitude):
        raise ValueError(
            f"bounds {list(window)} are too wide for n={n} records of the {fam.name} family: "
            "the sum of the statistic could overflow a float; choose a narrower window"
        )
    return magnitude


def _check_share(share: Any) -> float:
    """A budget share strictly between 0 and 1."""
    share = check_positive(share, "bounds_share")
    if share >= 1:
        raise ValueError(
            f"bounds_share must lie in (0, 1), the share of epsilon spent on bounds (got {share})"
        )
    return share
