"""Curator side: release the regression statistics (and optionally moments of x) with noise.

The noise is Laplace (ε-DP) by default, or discrete Gaussian (ρ-zCDP) with
``mechanism="discrete-gaussian"``. This module never imports inference code. The record it
returns, :class:`~pymc_dp.curator.regression.record.RegressionRelease`, carries everything the
analyst needs (value, n, ε or ρ, Δ, bounds, and the optional noisy moments of the covariates)
and nothing about individual records.
"""

from __future__ import annotations

import numbers
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from pymc_dp._validation import (
    check_bool,
    check_finite_array,
    check_positive,
    describe_records,
)
from pymc_dp.curator.exact_sums import BATCH, combine_totals
from pymc_dp.curator.frames import exact_totals, is_frame
from pymc_dp.curator.noise import ExactTotal, vetted_gaussian_total, vetted_laplace_total
from pymc_dp.curator.regression.exact_sums import (
    RegressionPlan,
    binary_message,
    binary_outside,
    factor_message,
    factor_outside,
)
from pymc_dp.curator.regression.record import (
    FOURTH_DEGREES,
    SECOND_DEGREES,
    MomentRelease,
    RegressionRelease,
    check_binary,
    check_factor,
)
from pymc_dp.curator.regression.sensitivity import (
    check_box,
    default_sensitivity_bound,
    monomial_ranges,
    regression_sensitivity,
    regression_sensitivity_l2,
    sum_of_ranges,
)
from pymc_dp.curator.regression.statistics import covariate_powers, statistic_powers
from pymc_dp.curator.single import noise_settings
from pymc_dp.mechanisms import LAPLACE_FLOAT, laplace_mechanism, noise_scale
from pymc_dp.mechanisms.vetted import zcdp_to_approx_dp

__all__ = [
    "FOURTH_DEGREES",
    "SECOND_DEGREES",
    "MomentRelease",
    "RegressionRelease",
    "release_regression",
]


def release_regression(
    x: npt.ArrayLike | Any,
    y: npt.ArrayLike | None = None,
    *,
    columns: Any = None,
    client: Any = None,
    x_bounds: Any,
    y_bounds: Any,
    epsilon: float | None = None,
    moments_share: float | None = None,
    clamp: bool = False,
    rng: int | np.random.Generator | None = None,
    mechanism: str | None = None,
    rho: float | None = None,
    delta: float = 1e-9,
    budget: Any = None,
    label: str = "regression",
    binary: Any = None,
    factor: Any = None,
) -> RegressionRelease:
    """Release the sufficient statistics of a linear regression under differential privacy.

    Publishes ``z = s + Laplace(0, Δ/ε)`` (ε-DP) on every component of
    ``s = Σ_i t(x_i, y_i)`` (all unique entries of ``[X, y]ᵀ[X, y]`` but ``n``), where ``Δ`` is the
    L1 sensitivity over the box of records (Bernstein & Sheldon 2019, §3.4). With
    ``moments_share`` it also publishes noisy sums of the covariate monomials of degrees 3-4,
    which Gibbs-SS-Noisy uses, with the degree 1-2 sums that are entries of ``s``, for the CLT
    moments of ``s``. ``Δ`` is the exact L1 sensitivity for d <= 3 covariates and the sum of
    the components' ranges above
    (:func:`~pymc_dp.curator.regression.sensitivity.regression_sensitivity`; the release records
    which in ``sensitivity_bound``).

    With ``mechanism="discrete-gaussian"`` (and ``rho`` instead of ``epsilon``, as for
    :func:`pymc_dp.release`) it publishes ``z = s + N_Z(0, τ²)`` instead, OpenDP's discrete
    Gaussian on the statistic rounded to a public quantum q, with τ = Δ₂/√(2ρ) and Δ₂ a bound
    on the L2 sensitivity of the rounded statistic: the exact L2 sensitivity of ``s`` over the
    box (:func:`~pymc_dp.curator.regression.sensitivity.regression_sensitivity_l2`) plus √m·q for
    the rounding of its m components. It is ρ-zCDP, hence (ε, ``delta``)-DP with the ε recorded.
    The moments of x are not released with it (see ``moments_share``).

    Parameters
    ----------
    x
        Covariates, shape ``(n, d)`` (``(n,)`` for ``d = 1``), without an intercept column; or
        a data frame, relation or Parquet source (:mod:`pymc_dp.curator.frames`) holding covariates
        and response, with ``columns=``. Lazy input is streamed, Dask input reduced on its
        cluster.
    y
        Responses, shape ``(n,)`` (``None`` for a data frame).
    columns
        For a data frame: the names of the ``d`` covariate columns followed by the response
        column, e.g. ``["age", "income", "spend"]``.
    client
        A ``dask.distributed.Client`` for Dask input (default: Dask's current scheduler).
    x_bounds
        ``d`` pairs ``(lower, upper)``, chosen from public knowledge, without looking at the
        data. Every record must lie inside, unless ``clamp`` is set.
    y_bounds
        ``(lower, upper)`` of the response, likewise.
    epsilon
        Total privacy budget ε > 0 of the release (Laplace mechanisms).
    moments_share
        If given, the share in (0, 1) of ``epsilon`` spent on the degree 3-4 sums of x (their
        degree 1-2 sums are in the statistic); the statistics get the rest. Laplace
        mechanisms only: only Gibbs-SS-Noisy reads these sums, and it plugs them in as if
        they were exact; the default sampler and Gibbs-SS-Update need no moments of x.
    clamp
        If ``False`` (the default), a record outside the bounds stops the release. If ``True``,
        every covariate and response is clamped to its bounds and the release records
        ``clamped=True``; the bounds are public, so Δ is unchanged and the release stays ε-DP
        (the model then describes the clamped records).
    rng
        Seed or generator: a study, with ``"laplace-float"`` noise. ``None`` (the default) is a
        real release with vetted noise (OpenDP discrete Laplace on fixed-point sums).
    mechanism
        ``"discrete-laplace"`` (the default without ``rng``), ``"discrete-gaussian"``
        (ρ-zCDP, needs ``rho`` instead of ``epsilon``; no ``rng``: OpenDP cannot be seeded) or
        ``"laplace-float"``.
    rho
        zCDP budget ρ > 0 of a ``"discrete-gaussian"`` release.
    delta
        δ at which a ``"discrete-gaussian"`` release states its (ε, δ) guarantee (OpenDP's
        conversion); the release records that ε.
    budget
        A :class:`~pymc_dp.PrivacyBudget` charged ``epsilon`` (or ``rho``, which only a
        budget in ρ accepts) before any noise is drawn (refused if it would exceed the total);
        the release records what was spent.
    label
        Name of this release in the accountant's ledger.
    binary
        Indices of covariates that are 0 or 1 (a treated/untreated indicator): every record's
        value is checked to be 0 or 1 (clamping does not make it so), their box must hold
        both, and the release records them so that the analyst's default model treats one
        such covariate as Bernoulli (``RegressionRelease.binary``). The noise is unchanged:
        the box [0, 1] already bounds the sensitivity.
    factor
        Indices of covariates that are the dummy columns of one categorical factor with
        ``len(factor) + 1`` levels, in the order of its levels (the reference level is all 0,
        so it has no column): every record's value in them is checked to be 0 or 1 with at most
        one 1, and their box must hold 0 and 1. A column is declared in ``binary`` or here, not
        both. The release records them (``RegressionRelease.factor``); the noise is unchanged.

    Returns
    -------
    RegressionRelease

    Raises
    ------
    TypeError, ValueError
        For malformed arguments, records outside the bounds (without ``clamp``), fewer records
        than the ``d + 2`` parameters (coefficients and σ²), bounds so wide that the
        statistics overflow, or non-finite values. All checks run before any noise is drawn;
        messages never quote a record's value.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(-1, 1, size=(200, 2))
    >>> y = np.clip(x @ [0.5, -0.2] + 0.1 * rng.standard_normal(200), -2, 2)
    >>> rel = release_regression(x, y, x_bounds=[(-1, 1)] * 2, y_bounds=(-2, 2), epsilon=1.0,
    ...                          moments_share=0.2, rng=1)
    >>> rel.value.shape, rel.epsilon, rel.fourth_moments.epsilon, rel.total_epsilon
    ((9,), 0.8, 0.2, 1.0)
    >>> rel.sensitivity_bound, round(rel.sensitivity, 4)  # the sum of ranges would be 24
    ('exact', 15.375)

    The Gaussian mechanism, vetted (OpenDP), with ρ = 0.5:

    >>> rel = release_regression(x, y, x_bounds=[(-1, 1)] * 2, y_bounds=(-2, 2),
    ...                          mechanism="discrete-gaussian", rho=0.5)
    >>> rel.mechanism, rel.rho, round(rel.scale, 2)  # τ = Δ₂/√(2ρ), rounding included
    ('discrete-gaussian', 0.5, 6.94)

    Three regions as the dummy columns of a factor (the first region is the reference):

    >>> region = rng.integers(0, 3, size=200)
    >>> xf = np.column_stack([x[:, 0], region == 1, region == 2])
    >>> rel = release_regression(xf, y, x_bounds=[(-1, 1), (0, 1), (0, 1)], y_bounds=(-2, 2),
    ...                          epsilon=1.0, factor=[1, 2], rng=1)
    >>> rel.factor
    (1, 2)
    """
    mechanism, gaussian, epsilon, generator = noise_settings(mechanism, rng, epsilon, rho, delta)
    if gaussian and moments_share is not None:
        raise ValueError(
            "moments_share applies to the Laplace mechanisms only: a 'discrete-gaussian' "
            "regression release publishes the statistic alone. Drop moments_share (the default "
            "sampler and Gibbs-SS-Update need no moments of x), or release with "
            "mechanism='discrete-laplace' and epsilon= for Gibbs-SS-Noisy"
        )
    if moments_share is not None:
        if isinstance(moments_share, bool) or not isinstance(moments_share, numbers.Real):
            raise TypeError(f"moments_share must be a real number (got {moments_share!r})")
        if not 0.0 < moments_share < 1.0:
            raise ValueError(f"moments_share must lie in (0, 1) (got {moments_share!r})")
        # A float32 share would make the parts' ε add up to more than the total.
        moments_share = float(moments_share)
    clamp = check_bool(clamp, "clamp")
    # ρ as given (not (√(2ρ))²/2): the record and the accountant hold the budget asked for.
    zcdp = (check_positive(rho, "rho"), float(delta)) if gaussian else None
    noise = _Noise(mechanism, generator, budget, label, zcdp)
    if is_frame(x):
        return _release_frame(
            binary,
            x,
            y,
            factor=factor,
            columns=columns,
            client=client,
            x_bounds=x_bounds,
            y_bounds=y_bounds,
            epsilon=epsilon,
            moments_share=moments_share,
            clamp=clamp,
            noise=noise,
        )
    if columns is not None or y is None:
        raise TypeError(
            "pass x and y as arrays, or a data frame as x with columns=[*covariates, response]"
        )
    xs = check_finite_array(x, "x")
    if xs.ndim == 1:
        xs = xs[:, None]
    if xs.ndim != 2:
        raise ValueError(f"x must have shape (n, d) (got {xs.shape})")
    ys = check_finite_array(y, "y", ndim=1)
    n, d = xs.shape
    if ys.shape[0] != n:
        raise ValueError(f"y must have one value per row of x: {n} (got {ys.shape[0]})")
    if n < d + 2:
        raise ValueError(
            f"x has n={n} records but the model has d+2={d + 2} parameters ({d + 1} "
            "coefficients with the intercept, and σ²); need n >= d+2"
        )
    try:
        xb = check_box(x_bounds, "x_bounds", size=d)
        yb = check_box(y_bounds, "y_bounds", size=1)[0]
    except OverflowError:
        raise ValueError(
            "x_bounds and y_bounds must be finite numbers (got an integer too large for a float)"
        ) from None
    # Every released sum is of monomials of degree <= 4 (moments) or 2 (statistics) in values
    # bounded by the box: a public bound on |s| for the noise's resolution check.
    largest = max(1.0, float(np.max(np.abs(xb))), float(np.max(np.abs(yb))))
    with np.errstate(over="ignore"):
        magnitude = float(np.float64(n) * np.float64(largest) ** 2)
        moment_magnitude = float(np.float64(n) * np.float64(largest) ** 4)
    if not np.isfinite(moment_magnitude if moments_share is not None else magnitude):
        raise ValueError(
            f"x_bounds and y_bounds reach {largest:.3g}: the sums of squares"
            f"{'' if moments_share is None else ' and fourth powers'} of {n} records would "
            "overflow a float; choose narrower bounds (in other units if need be)"
        )
    binary = check_binary(binary, xb)
    factor = check_factor(factor, xb, binary=binary)
    xs = xs.astype(np.float64)
    ys = ys.astype(np.float64)
    # Before clamping: clamping can make a value fit the box, never binary or one level.
    other = binary_outside(xs, binary)
    if np.any(other):
        raise ValueError(binary_message("x", binary).format(records=describe_records(other)))
    other = factor_outside(xs, factor)
    if np.any(other):
        raise ValueError(factor_message("x", factor).format(records=describe_records(other)))
    if clamp:
        xs = np.clip(xs, xb[:, 0], xb[:, 1])
        ys = np.clip(ys, yb[0], yb[1])
    advice = (
        "the release was stopped. The bounds must come from public knowledge, not from the "
        "data: fix those records, or pass clamp=True to clamp every record to the bounds "
        "(recorded in the release; the sensitivity is unchanged)"
    )
    outside = np.any((xs < xb[:, 0]) | (xs > xb[:, 1]), axis=1)
    if np.any(outside):
        raise ValueError(
            f"x has {int(outside.sum())} record(s) outside x_bounds={xb.tolist()}, the first at "
            f"index {int(np.flatnonzero(outside)[0])}; {advice}"
        )
    outside = (ys < yb[0]) | (ys > yb[1])
    if np.any(outside):
        raise ValueError(
            f"y has {int(outside.sum())} value(s) outside y_bounds={yb.tolist()}, the first at "
            f"index {int(np.flatnonzero(outside)[0])}; {advice}"
        )

    plan = RegressionPlan(
        tuple(map(tuple, np.vstack([xb, yb[None, :]]).tolist())),
        moments=moments_share is not None,
        clamp=clamp,
        binary=binary,
        factor=factor,
    )
    records = np.column_stack([xs, ys])
    totals = combine_totals(
        plan.batch_totals(records[start : start + BATCH], checked=True)
        for start in range(0, n, BATCH)
    )[1]
    return _noisy_release(plan, n, totals, xb, yb, epsilon, moments_share, noise)


def _release_frame(
    binary: Any,
    data: Any,
    y: Any,
    *,
    factor: Any,
    columns: Any,
    client: Any,
    x_bounds: Any,
    y_bounds: Any,
    epsilon: float,
    moments_share: float | None,
    clamp: bool,
    noise: _Noise,
) -> RegressionRelease:
    """:func:`release_regression` of a data frame: one exact pass on its engine, then noise."""
    if y is not None:
        raise TypeError("with a data frame as x, name the response in columns=, and omit y")
    if isinstance(columns, str) or not isinstance(columns, list | tuple) or len(columns) < 2:
        raise TypeError(
            "columns must list the covariate columns and then the response column, e.g. "
            f"columns=['age', 'income', 'spend'] (got {columns!r})"
        )
    columns = [str(c) for c in columns]
    d = len(columns) - 1
    try:
        xb = check_box(x_bounds, "x_bounds", size=d)
        yb = check_box(y_bounds, "y_bounds", size=1)[0]
    except OverflowError:
        raise ValueError(
            "x_bounds and y_bounds must be finite numbers (got an integer too large for a float)"
        ) from None
    binary = check_binary(binary, xb)
    plan = RegressionPlan(
        tuple(map(tuple, np.vstack([xb, yb[None, :]]).tolist())),
        moments=moments_share is not None,
        clamp=clamp,
        names=(f"columns {columns[:-1]!r}", f"column {columns[-1]!r}"),
        binary=binary,
        factor=check_factor(factor, xb, binary=binary),
    )
    n, totals = exact_totals(data, plan, columns, client=client)
    if n < d + 2:
        raise ValueError(
            f"the data have n={n} records but the model has d+2={d + 2} parameters ({d + 1} "
            "coefficients with the intercept, and σ²); need n >= d+2"
        )
    return _noisy_release(plan, n, totals, xb, yb, epsilon, moments_share, noise)


def _noisy_release(
    plan: RegressionPlan,
    n: int,
    totals: tuple[int, ...],
    xb: npt.NDArray[np.float64],
    yb: npt.NDArray[np.float64],
    epsilon: float,
    moments_share: float | None,
    noise: _Noise,
) -> RegressionRelease:
    """Noise on exact sums, after every noise scale has been checked (public values only).

    The exact sums (``totals``, the same bit for bit from every input) get the float Laplace
    noise of a study, or, for ``"discrete-laplace"``, are rounded as totals to a public
    statistic quantum and get OpenDP's integer noise (:func:`vetted_laplace_total`, or
    :func:`vetted_gaussian_total` for ``"discrete-gaussian"``, where ``epsilon`` is √(2ρ) as
    :func:`pymc_dp.curator.single.noise_settings` returns it: τ = Δ₂/√(2ρ) plays b = Δ/ε).
    """
    d = xb.shape[0]
    gaussian = noise.zcdp is not None
    largest = max(1.0, float(np.max(np.abs(xb))), float(np.max(np.abs(yb))))
    with np.errstate(over="ignore"):
        magnitude = float(np.float64(n) * np.float64(largest) ** 2)
        moment_magnitude = float(np.float64(n) * np.float64(largest) ** 4)
    if not np.isfinite(moment_magnitude if moments_share is not None else magnitude):
        raise ValueError(
            f"x_bounds and y_bounds reach {largest:.3g}: the sums of squares of {n} records "
            "would overflow a float; choose narrower bounds (in other units if need be)"
        )
    stat_epsilon, moments_epsilon = _split_epsilon(epsilon, moments_share)
    bound = default_sensitivity_bound(d)
    sensitivity = (regression_sensitivity_l2 if gaussian else regression_sensitivity)(
        xb, yb, bound=bound
    )
    statistic, *sums = plan.sums(totals)
    exact_blocks = plan.blocks(totals)
    # Only the degree 3-4 sums of x: the degree 1-2 ones are entries of the statistic.
    powers = covariate_powers(d, FOURTH_DEGREES)
    moment_delta = None if moments_epsilon is None else sum_of_ranges(powers, xb[:, 0], xb[:, 1])
    if noise.budget is not None:
        from pymc_dp.curator.budget import PrivacyBudget

        if not isinstance(noise.budget, PrivacyBudget):
            raise TypeError(
                f"budget must be a pymc_dp.PrivacyBudget (got {type(noise.budget).__name__})"
            )
    # Noise only after every check above, and every noise scale, has passed.
    noise_scale(sensitivity=sensitivity, epsilon=stat_epsilon, magnitude=magnitude)
    if moments_epsilon is not None:
        noise_scale(sensitivity=moment_delta, epsilon=moments_epsilon, magnitude=moment_magnitude)
    if noise.budget is not None:
        if gaussian:
            noise.budget.spend(rho=noise.zcdp[0], label=noise.label)
        else:  # statistics and moments: ε in all
            noise.budget.spend(epsilon=epsilon, label=noise.label)
    generator = noise.rng
    moments = None
    if noise.mechanism == LAPLACE_FLOAT:
        noisy = laplace_mechanism(
            statistic,
            sensitivity=sensitivity,
            epsilon=stat_epsilon,
            rng=generator,
            magnitude=magnitude,
        )
        quantum, library = None, f"numpy {np.__version__}"
        if moments_epsilon is not None:
            value = laplace_mechanism(
                sums[0],
                sensitivity=moment_delta,
                epsilon=moments_epsilon,
                rng=generator,
                magnitude=moment_magnitude,
            )
            moments = MomentRelease(
                value=value, powers=powers, epsilon=moments_epsilon, sensitivity=moment_delta
            )
    else:
        # Vetted: each exact total rounded to a public quantum (release_noise.ExactTotal).
        stat_powers = statistic_powers(d)
        t_bounds = np.column_stack(
            monomial_ranges(stat_powers, np.append(xb[:, 0], yb[0]), np.append(xb[:, 1], yb[1]))
        )
        if gaussian:
            vetted = vetted_gaussian_total(
                ExactTotal(*exact_blocks[0]),
                n=n,
                t_bounds=t_bounds,
                sensitivity=sensitivity,
                rho=noise.zcdp[0],
            )
        else:
            vetted = vetted_laplace_total(
                ExactTotal(*exact_blocks[0]),
                n=n,
                t_bounds=t_bounds,
                sensitivity=sensitivity,
                epsilon=stat_epsilon,
            )
        noisy, sensitivity = vetted.value, vetted.sensitivity
        quantum, library = vetted.quantum, vetted.library
        if moments_epsilon is not None:
            part = vetted_laplace_total(
                ExactTotal(*exact_blocks[1]),
                n=n,
                t_bounds=np.column_stack(monomial_ranges(powers, xb[:, 0], xb[:, 1])),
                sensitivity=moment_delta,
                epsilon=moments_epsilon,
            )
            moments = MomentRelease(
                value=part.value,
                powers=powers,
                epsilon=moments_epsilon,
                sensitivity=part.sensitivity,
                quantum=part.quantum,
            )
    rho, delta = noise.zcdp if gaussian else (None, 0.0)
    return RegressionRelease(
        value=noisy,
        n=n,
        epsilon=zcdp_to_approx_dp(rho, delta) if gaussian else stat_epsilon,
        sensitivity=sensitivity,
        x_bounds=tuple(tuple(r) for r in xb.tolist()),
        y_bounds=(float(yb[0]), float(yb[1])),
        fourth_moments=moments,
        clamped=plan.clamp,
        mechanism=noise.mechanism,
        quantum=quantum,
        record_quantum=plan.quanta,
        library=library,
        budget=None if noise.budget is None else noise.budget.receipt(),
        sensitivity_bound=bound,
        rho=rho,
        delta=delta,
        binary=plan.binary,
        factor=plan.factor,
    )


def _split_epsilon(epsilon: float, moments_share: float | None) -> tuple[float, float | None]:
    """ε of the statistic and of the moments, never adding up (in floats) to more than ε."""
    if moments_share is None:
        return epsilon, None
    moments_epsilon = epsilon * moments_share
    stat_epsilon = epsilon * (1.0 - moments_share)
    while stat_epsilon + moments_epsilon > epsilon:
        stat_epsilon = float(np.nextafter(stat_epsilon, 0.0))
    return stat_epsilon, moments_epsilon


class _Noise(NamedTuple):
    """How a regression release draws its noise: the mechanism, its generator, the accountant."""

    mechanism: str
    rng: np.random.Generator | None
    budget: Any
    label: str
    zcdp: tuple[float, float] | None = None
    """(ρ, δ) of a Gaussian release (δ of its (ε, δ) statement); ``None`` for Laplace."""
