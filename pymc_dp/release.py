"""Curator side: compute sufficient statistics and release them with Laplace noise.

This module never imports inference code, and nothing in inference touches raw data: a
:class:`Release` is the whole interface between the two roles.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import types
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from pymc_dp._validation import (
    MAX_CATEGORIES,
    MAX_N,
    check_bool,
    check_int,
    check_json_numbers,
    check_positive,
    check_records,
    check_rng,
    json_float,
)
from pymc_dp.exact_sums import BATCH, FamilyPlan, clamp_records, combine_totals
from pymc_dp.families import ExponentialFamily, get_family
from pymc_dp.frames import exact_totals, in_memory_column, is_frame
from pymc_dp.mechanisms import MECHANISM_NAME, laplace_mechanism, noise_scale, private_bounds

__all__ = ["Release", "release"]

_FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True, eq=False)
class Release:
    """A differentially private release of noisy sufficient statistics.

    Everything inference needs is here, and nothing about individual records.

    Attributes
    ----------
    value : numpy.ndarray
        The released y = s + Laplace(0, Δ/ε), shape ``family.stat_shape`` (read-only).
    n : int
        Number of records (public under replace-one neighbours).
    epsilon : float
        Privacy parameter ε of the statistics release.
    sensitivity : float
        L1 sensitivity Δ used to scale the noise.
    bounds : tuple of float
        Range of one record's value, ``(lower, upper)``; for a family with unbounded statistics,
        the truncation window: only records with lower ≤ x ≤ upper were summed.
    family : str
        Family name, e.g. ``"bernoulli"``.
    family_params : Mapping
        The family's public settings, e.g. ``{"trials": 5}``.
    mechanism : str
        Noise mechanism, ``"laplace"``.
    bounds_epsilon : float
        Privacy budget spent choosing ``bounds`` from the data (PrivateQuantile), 0 if they
        were public. The release as a whole is (``epsilon + bounds_epsilon``)-DP.
    clamped : bool
        Whether the curator asked for records outside the family's domain to be clamped to it
        (``clamp=True``) instead of stopping the release. It says that the option was on, not
        whether any record was clamped (that would depend on the data). Files written before
        this field existed load with ``False``.
    quantum : float or None
        The public fixed-point grid step q (a power of two) of the latent record for a family
        released over a window: every record in the window was rounded to the nearest multiple
        of q inside the window before t was summed exactly, so component j of the statistic is
        an exact multiple of q**(j + 1) and Δ covers the rounding unchanged. ``None`` for counts
        (summed exactly as integers) and for files written before this field existed.

    Examples
    --------
    >>> import pymc as pm
    >>> rel = release([0, 1, 1, 0, 1], pm.Bernoulli, epsilon=1.0, rng=0)
    >>> rel.n, rel.sensitivity, rel.family, rel.scale
    (5, 1.0, 'bernoulli', 1.0)
    >>> Release.from_json(rel.to_json()) == rel
    True
    """

    value: npt.NDArray[np.float64]
    n: int
    epsilon: float
    sensitivity: float
    bounds: tuple[float, float]
    family: str
    family_params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    mechanism: str = MECHANISM_NAME
    bounds_epsilon: float = 0.0
    clamped: bool = False
    quantum: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.family, str):
            raise TypeError(f"family must be a string (got {type(self.family).__name__})")
        if not isinstance(self.family_params, Mapping):
            raise TypeError(
                "family_params must be a mapping of the family's settings, e.g. "
                f'{{"trials": 5}} (got {type(self.family_params).__name__})'
            )
        fam = get_family(self.family, **dict(self.family_params))
        for name, setting in fam.params().items():
            json_float(setting, f"family_params[{name!r}]")
        try:
            value = np.array(self.value, dtype=np.float64)
        except OverflowError:
            raise ValueError("value holds a number too large for a float") from None
        except (TypeError, ValueError):
            raise TypeError(f"value must be numbers (got {self.value!r})") from None
        if value.shape != fam.stat_shape:
            raise ValueError(
                f"value must have shape {fam.stat_shape} for {fam!r} (got {value.shape})"
            )
        if not np.all(np.isfinite(value)):
            raise ValueError("value must be finite")
        value.setflags(write=False)
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "n", check_int(self.n, "n", minimum=1, maximum=MAX_N))
        object.__setattr__(self, "epsilon", check_positive(self.epsilon, "epsilon"))
        object.__setattr__(self, "sensitivity", check_positive(self.sensitivity, "sensitivity"))
        object.__setattr__(self, "bounds", _check_bounds(self.bounds))
        if fam.needs_bounds:
            fam.check_bounds(self.bounds)
        elif self.bounds != tuple(map(float, fam.domain)):
            raise ValueError(
                f"bounds must be the {fam.name} domain {list(fam.domain)}, the range of one "
                f"record of a family with bounded statistics (got {list(self.bounds)})"
            )
        bounds_epsilon = self.bounds_epsilon
        if isinstance(bounds_epsilon, bool) or not isinstance(bounds_epsilon, numbers.Real):
            raise TypeError(f"bounds_epsilon must be a real number (got {bounds_epsilon!r})")
        if not math.isfinite(json_float(bounds_epsilon, "bounds_epsilon")) or bounds_epsilon < 0:
            raise ValueError(
                f"bounds_epsilon must be finite and >= 0 (got {self.bounds_epsilon!r})"
            )
        object.__setattr__(self, "bounds_epsilon", float(bounds_epsilon))
        object.__setattr__(self, "clamped", check_bool(self.clamped, "clamped"))
        if self.quantum is not None:
            quantum = check_positive(self.quantum, "quantum")
            if math.frexp(quantum)[0] != 0.5:
                raise ValueError(f"quantum must be a power of two (got {self.quantum!r})")
            object.__setattr__(self, "quantum", quantum)
        needed = fam.release_sensitivity(self.bounds)
        if self.sensitivity < needed:
            raise ValueError(
                f"sensitivity must be >= {needed}, the L1 sensitivity of {fam!r} "
                f"(got {self.sensitivity}); with less noise the release is not ε-DP. For such "
                "a value, pass n, epsilon, sensitivity and observed to NoisySuffStat instead"
            )
        object.__setattr__(self, "family_params", types.MappingProxyType(fam.params()))
        if not isinstance(self.mechanism, str) or self.mechanism != MECHANISM_NAME:
            raise ValueError(f"mechanism must be {MECHANISM_NAME!r} (got {self.mechanism!r})")

    @property
    def total_epsilon(self) -> float:
        """Privacy cost of the whole release: statistics plus private bounds."""
        return self.epsilon + self.bounds_epsilon

    @property
    def scale(self) -> float:
        """Laplace scale b = Δ/ε of the noise on every component."""
        return self.sensitivity / self.epsilon

    def get_family(self) -> ExponentialFamily:
        """The :class:`~pymc_dp.families.ExponentialFamily` this release was computed for."""
        return get_family(self.family, **dict(self.family_params))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Release):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple:
        return (
            tuple(self.value.ravel().tolist()),
            self.value.shape,
            self.n,
            self.epsilon,
            self.sensitivity,
            self.bounds,
            self.family,
            tuple(sorted(self.family_params.items())),
            self.mechanism,
            self.bounds_epsilon,
            self.clamped,
            self.quantum,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary (floats round-trip exactly through :mod:`json`)."""
        quantum = {} if self.quantum is None else {"quantum": self.quantum}
        return {
            "format_version": _FORMAT_VERSION,
            "value": self.value.tolist(),
            "n": self.n,
            "epsilon": self.epsilon,
            "sensitivity": self.sensitivity,
            "bounds": list(self.bounds),
            "family": self.family,
            "family_params": dict(self.family_params),
            "mechanism": self.mechanism,
            "bounds_epsilon": self.bounds_epsilon,
            "clamped": self.clamped,
            **quantum,
        }

    def to_json(self, **kwargs: Any) -> str:
        """Serialise to a JSON string; ``kwargs`` go to :func:`json.dumps`."""
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Release:
        """Rebuild a release from :meth:`to_dict` output, checking every field strictly.

        Each field must have its JSON type: numbers (never strings or booleans) for ``value``,
        ``epsilon``, ``sensitivity``, ``bounds`` and ``bounds_epsilon``, an integer for ``n``
        and ``format_version``, strings for ``family`` and ``mechanism``, an object for
        ``family_params`` and a boolean for ``clamped`` (optional: older files lack it).

        Raises
        ------
        TypeError
            If a field has the wrong type (the message names it).
        ValueError
            If a field is missing, unknown, or has a bad value.
        """
        if not isinstance(data, Mapping):
            raise TypeError(f"a release must be a mapping (got {type(data).__name__})")
        data = dict(data)
        version = data.pop("format_version", _FORMAT_VERSION)
        if (
            isinstance(version, bool)
            or not isinstance(version, numbers.Integral)
            or version != _FORMAT_VERSION
        ):
            raise ValueError(
                f"unsupported release format_version {version!r}; this version of pymc_dp "
                f"reads format_version {_FORMAT_VERSION}"
            )
        expected = {f.name for f in dataclasses.fields(cls)}
        required = {"value", "n", "epsilon", "sensitivity", "bounds", "family"}
        if set(data) - expected or required - set(data):
            raise ValueError(f"a release needs the fields {sorted(expected)} (got {sorted(data)})")
        check_json_numbers(data["value"], "value")
        for name in ("epsilon", "sensitivity", "bounds_epsilon", "quantum"):
            if data.get(name) is not None:
                check_json_numbers(data[name], name, scalar=True)
        if not isinstance(data["bounds"], list | tuple):
            raise TypeError(f"bounds must be a list [lower, upper] (got {data['bounds']!r})")
        if len(data["bounds"]) != 2:
            raise ValueError(f"bounds must be a list [lower, upper] (got {data['bounds']!r})")
        check_json_numbers(data["bounds"], "bounds")
        for name, kind in (("family", str), ("mechanism", str), ("family_params", Mapping)):
            if name in data and not isinstance(data[name], kind):
                raise TypeError(
                    f"{name} must be {'a string' if kind is str else 'an object'} "
                    f"(got {type(data[name]).__name__}: {data[name]!r})"
                )
        for key, setting in data.get("family_params", {}).items():
            check_json_numbers(setting, f"family_params[{key!r}]", scalar=True)
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> Release:
        """Rebuild a release from :meth:`to_json` output."""
        return cls.from_dict(json.loads(text))


def _check_bounds(bounds: Any) -> tuple[float, float]:
    """Return ``bounds`` as ``(lower, upper)`` floats with lower <= upper, none NaN."""
    try:
        lower, upper = (float(b) for b in bounds)
    except OverflowError:
        raise ValueError("bounds are too large for floats") from None
    except (TypeError, ValueError):
        raise ValueError(
            f"bounds must be a pair (lower, upper) of numbers (got {bounds!r})"
        ) from None
    if np.isnan(lower) or np.isnan(upper) or lower > upper:
        raise ValueError(f"bounds must satisfy lower <= upper, without NaN (got {bounds!r})")
    return lower, upper


def release(
    x: npt.ArrayLike | Any,
    family: Any,
    *,
    epsilon: float,
    column: str | None = None,
    client: Any = None,
    bounds: tuple[float, float] | str | None = None,
    bounds_share: float = 0.1,
    bounds_range: tuple[float, float] | None = None,
    bounds_quantiles: tuple[float, float] = (0.025, 0.975),
    clamp: bool = False,
    rng: int | np.random.Generator | None = None,
    **family_params: Any,
) -> Release:
    """Release the sufficient statistics of ``x`` under ε-differential privacy.

    Computes s = Σ t(x_i) for the family, and publishes y = s + Laplace(0, Δ/ε) on every
    component, with Δ the L1 sensitivity of s under replacing one record (n is public).
    Families with unbounded statistics are released over a window ``bounds = (a, b)``: only
    records with a ≤ x ≤ b are summed, and Δ follows Appendix C of Bernstein & Sheldon (2018).

    Parameters
    ----------
    x
        The records: a one-dimensional array, or a data frame, series or relation that
        :mod:`pymc_dp.frames` reads (pandas, Polars eager or lazy, Dask, DuckDB, Parquet files
        through :func:`pymc_dp.frames.parquet_source`) with ``column=``. Lazy inputs are
        streamed in batches, Dask input is reduced on its cluster, and never collected whole.
    family
        PyMC distribution class of one record: ``pm.Bernoulli``, ``pm.Binomial`` (needs
        ``trials``), ``pm.Categorical`` (needs ``categories``), or, with ``bounds``,
        ``pm.Exponential``, ``pm.Gamma`` (needs ``alpha``), ``pm.Poisson``, ``pm.Geometric``,
        ``pm.Normal`` (releases Σx and Σx²; with ``sigma=`` only Σx), ``pm.LogNormal`` (the
        same on log x).
    epsilon
        Total privacy budget ε > 0 of the release.
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
        2011), spending ``bounds_share · epsilon`` of the budget on it.
    bounds_share
        Share of ``epsilon`` spent on private bounds, in (0, 1).
    bounds_range
        Public range ``(lower, upper)`` that PrivateQuantile searches (records are clamped to
        it); required with ``bounds="private"``.
    bounds_quantiles
        Quantiles of ``x`` that private bounds estimate.
    clamp
        If ``False`` (the default), a record outside the family's domain (e.g. 7 successes of
        5 trials, a category code ≥ K, a negative waiting time) stops the release. If
        ``True``, such records are clamped to the domain's nearest end (for LogNormal, whose
        domain is x > 0, a record ≤ 0 goes to the smallest positive normal float) and the
        release records ``clamped=True``. The domain is public, so Δ is unchanged and the
        release stays ε-DP. Records that are not whole numbers where the family needs them
        are never rounded.
    rng
        Seed or :class:`numpy.random.Generator` for the noise. ``None`` uses fresh OS entropy.
    **family_params
        Family settings: ``trials=`` for Binomial, ``categories=`` for Categorical, ``alpha=``
        for Gamma, ``sigma=`` for Normal or LogNormal with known σ.

    Returns
    -------
    Release
        The noisy statistic with n, ε, Δ, bounds, family and the fixed-point ``quantum``. The
        statistic is summed exactly (:mod:`pymc_dp.exact_sums`): the same records give the
        same statistic bit for bit from any engine, partitioning or order.

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
    fam = get_family(family, **family_params)
    for name, setting in fam.params().items():
        json_float(setting, name)  # e.g. trials=10**400 cannot be a float sensitivity
    categories = getattr(fam, "categories", None)
    if categories is not None and categories > MAX_CATEGORIES:
        raise ValueError(
            f"categories must be at most {MAX_CATEGORIES} (got {categories}): each category "
            "is a released count with its own noise; merge rare categories first"
        )
    epsilon = check_positive(epsilon, "epsilon")
    clamp = check_bool(clamp, "clamp")
    generator = check_rng(rng)
    frame = is_frame(x)
    if frame and isinstance(bounds, str) and fam.needs_bounds:
        # PrivateQuantile sorts the records: only an in-memory column can do that today.
        x, frame = in_memory_column(x, column), False
    elif not frame and column is not None:
        raise TypeError(
            f"column applies to data frames, not to {type(x).__name__}; pass the array alone"
        )
    if frame:
        records, name = None, "x" if column is None else f"column {column!r}"
    else:
        x = check_records(x, "x")
        records = fam.validate_data(clamp_records(fam, x) if clamp else x)
    bounds_epsilon = 0.0
    if not fam.needs_bounds:
        if bounds is not None:
            raise TypeError(f"bounds apply only to families with unbounded statistics, not {fam!r}")
        window = fam.domain
    elif isinstance(bounds, str):
        if bounds != "private":
            raise ValueError(f"bounds must be a pair (a, b) or 'private' (got {bounds!r})")
        bounds_share = _check_share(bounds_share)
        if bounds_range is None:
            raise ValueError(
                "bounds='private' needs bounds_range=(lower, upper), a public range that "
                "surely holds the quantiles; records are clamped to it"
            )
        # The search range must be a valid window itself, checked before any noise is drawn,
        # and so must the noise of a window as wide as the range (public values only).
        search = fam.check_bounds(bounds_range)
        bounds_epsilon = bounds_share * epsilon
        epsilon -= bounds_epsilon
        _statistic_magnitude(fam, search, int(np.shape(records)[0]))
        noise_scale(sensitivity=fam.release_sensitivity(search), epsilon=epsilon)
        window = private_bounds(
            records,
            epsilon=bounds_epsilon,
            quantiles=bounds_quantiles,
            lower=bounds_range[0],
            upper=bounds_range[1],
            rng=generator,
        )
        if window[0] >= window[1]:
            raise ValueError(
                f"the private bounds collapsed to {window}; widen bounds_quantiles or raise "
                "bounds_share"
            )
        if getattr(fam, "discrete", False) and math.ceil(window[0]) > math.floor(window[1]):
            # No count inside: widen to the nearest whole numbers (post-processing of the
            # private window), rather than refuse after its budget was spent.
            window = (float(math.floor(window[0])), float(math.ceil(window[1])))
        window = fam.check_bounds(window)
    else:
        window = fam.check_bounds(bounds)
    plan = FamilyPlan.for_release(
        fam, window if fam.needs_bounds else None, clamp=clamp, name="x" if not frame else name
    )
    if frame:
        n, totals = exact_totals(x, plan, [column] if column is not None else [None], client=client)
        if n == 0:
            raise ValueError(f"{name} must not be empty")
    else:
        n = int(records.shape[0])
        totals = combine_totals(
            plan.batch_totals(records[start : start + BATCH], checked=True)
            for start in range(0, n, BATCH)
        )[1]
    statistic = plan.statistic(totals)
    magnitude = _statistic_magnitude(fam, window, n)
    sensitivity = fam.release_sensitivity(window) if fam.needs_bounds else fam.sensitivity
    noisy = laplace_mechanism(
        statistic, sensitivity=sensitivity, epsilon=epsilon, rng=generator, magnitude=magnitude
    )
    return Release(
        value=noisy,
        n=n,
        epsilon=epsilon,
        sensitivity=sensitivity,
        bounds=window,
        family=fam.name,
        family_params=fam.params(),
        bounds_epsilon=bounds_epsilon,
        clamped=clamp,
        quantum=plan.quantum,
    )


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
