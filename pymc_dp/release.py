"""Curator side: compute sufficient statistics and release them with vetted noise.

This module never imports inference code, and nothing in inference touches raw data: a
:class:`Release` is the whole interface between the two roles. Noise is drawn in
:mod:`pymc_dp.release_noise`: OpenDP's discrete Laplace (the default) or discrete Gaussian on
exact integer (fixed-point) statistics, or, for seeded studies, floating-point Laplace.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import types
import warnings
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
    check_not_masked,
    check_positive,
    check_rng,
    json_float,
)
from pymc_dp.families import ExponentialFamily, get_family
from pymc_dp.mechanisms import noise_scale, private_bounds
from pymc_dp.mechanisms.vetted import (
    DISCRETE_GAUSSIAN,
    LAPLACE_FLOAT,
    zcdp_to_approx_dp,
)
from pymc_dp.release_noise import check_mechanism, noisy_statistic

__all__ = ["Release", "release"]

_FORMAT_VERSION = 2
"""Format 2 adds quantum, library, rho, delta, noise_scale and budget; format 1 files (float
Laplace, ``"mechanism": "laplace"``) are still read."""
_READABLE_VERSIONS = (1, 2)


@dataclasses.dataclass(frozen=True, eq=False)
class Release:
    """A differentially private release of noisy sufficient statistics.

    Everything inference needs is here, and nothing about individual records.

    Attributes
    ----------
    value : numpy.ndarray
        The released y = s + noise, shape ``family.stat_shape`` (read-only).
    n : int
        Number of records (public under replace-one neighbours).
    epsilon : float
        Privacy parameter ε of the statistics release; for ``"discrete-gaussian"``, the ε of
        the (ε, ``delta``)-DP guarantee that ρ-zCDP implies.
    sensitivity : float
        Sensitivity that scales the noise, in the statistic's units: L1 (Δ) for the Laplace
        mechanisms, L2 (Δ₂) for ``"discrete-gaussian"``; for a quantised statistic it
        includes the rounding (Δ + d·q, or Δ₂ + √d·q).
    bounds : tuple of float
        Range of one record's value, ``(lower, upper)``; for a family with unbounded statistics,
        the truncation window: only records with lower ≤ x ≤ upper were summed.
    family : str
        Family name, e.g. ``"bernoulli"``.
    family_params : Mapping
        The family's public settings, e.g. ``{"trials": 5}``.
    mechanism : str
        Noise mechanism: ``"discrete-laplace"`` (OpenDP, the default of :func:`release`),
        ``"discrete-gaussian"`` (OpenDP, ρ-zCDP) or ``"laplace-float"`` (numpy, for seeded
        studies; files written before the vetted mechanisms say ``"laplace"``, read as this).
    bounds_epsilon : float
        Privacy budget spent choosing ``bounds`` from the data (PrivateQuantile), 0 if they
        were public. The release as a whole is (``epsilon + bounds_epsilon``)-DP.
    clamped : bool
        Whether the curator asked for records outside the family's domain to be clamped to it
        (``clamp=True``) instead of stopping the release. It says that the option was on, not
        whether any record was clamped (that would depend on the data). Files written before
        this field existed load with ``False``.
    quantum : float or None
        Fixed-point quantum q (a power of two): every summed t(x) was rounded to a multiple of
        q, and ``value`` is a multiple of q. 1.0 for integer statistics; ``None`` for
        ``"laplace-float"``.
    library : str or None
        The sampler and its version, e.g. ``"opendp 0.16.0"``; ``None`` in older files.
    rho : float or None
        zCDP parameter ρ of a ``"discrete-gaussian"`` release, ``None`` otherwise.
    delta : float
        δ of the (ε, δ) guarantee stated in ``epsilon``: 0 for the Laplace mechanisms.
    budget : Mapping or None
        What a :class:`~pymc_dp.budget.PrivacyBudget` recorded when it charged this release:
        ``{"unit", "total", "spent", "remaining", "label"}``; ``None`` without an accountant.

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
    mechanism: str = LAPLACE_FLOAT
    bounds_epsilon: float = 0.0
    clamped: bool = False
    quantum: float | None = None
    library: str | None = None
    rho: float | None = None
    delta: float = 0.0
    budget: Mapping[str, Any] | None = None

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
        object.__setattr__(self, "mechanism", check_mechanism(self.mechanism, None))
        gaussian = self.mechanism == DISCRETE_GAUSSIAN
        if gaussian:
            needed, norm = fam.release_sensitivity_l2(self.bounds), "L2"
        else:
            needed, norm = fam.release_sensitivity(self.bounds), "L1"
        if self.sensitivity < needed:
            raise ValueError(
                f"sensitivity must be >= {needed}, the {norm} sensitivity of {fam!r} "
                f"(got {self.sensitivity}); with less noise the release is not private. For "
                "such a value, pass n, epsilon, sensitivity and observed to NoisySuffStat instead"
            )
        object.__setattr__(self, "family_params", types.MappingProxyType(fam.params()))
        _check_noise_fields(self, gaussian)

    @property
    def total_epsilon(self) -> float:
        """Privacy cost of the whole release: statistics plus private bounds."""
        return self.epsilon + self.bounds_epsilon

    @property
    def scale(self) -> float:
        """Noise scale on every component: Laplace b = Δ/ε, or Gaussian σ = Δ₂/√(2ρ)."""
        if self.rho is not None:
            return self.sensitivity / math.sqrt(2.0 * self.rho)
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
            self.library,
            self.rho,
            self.delta,
            json.dumps(_plain(self.budget), sort_keys=True),
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary (floats round-trip exactly through :mod:`json`)."""
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
            "quantum": self.quantum,
            "library": self.library,
            "rho": self.rho,
            "delta": self.delta,
            "noise_scale": self.scale,
            "budget": _plain(self.budget),
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
            or version not in _READABLE_VERSIONS
        ):
            raise ValueError(
                f"unsupported release format_version {version!r}; this version of pymc_dp "
                f"reads format_version {' and '.join(map(str, _READABLE_VERSIONS))}"
            )
        # noise_scale is written for readers of the file; it must agree with the fields.
        written_scale = data.pop("noise_scale", None)
        expected = {f.name for f in dataclasses.fields(cls)}
        required = {"value", "n", "epsilon", "sensitivity", "bounds", "family"}
        if set(data) - expected or required - set(data):
            raise ValueError(f"a release needs the fields {sorted(expected)} (got {sorted(data)})")
        for name in ("quantum", "rho"):
            if data.get(name) is not None:
                check_json_numbers(data[name], name, scalar=True)
        if "delta" in data:
            check_json_numbers(data["delta"], "delta", scalar=True)
        if data.get("library") is not None and not isinstance(data["library"], str):
            raise TypeError(f"library must be a string (got {data['library']!r})")
        if data.get("budget") is not None and not isinstance(data["budget"], Mapping):
            raise TypeError(f"budget must be an object (got {data['budget']!r})")
        check_json_numbers(data["value"], "value")
        for name in ("epsilon", "sensitivity", "bounds_epsilon"):
            if name in data:
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
        rel = cls(**data)
        if written_scale is not None:
            check_json_numbers(written_scale, "noise_scale", scalar=True)
            if not math.isclose(written_scale, rel.scale, rel_tol=1e-12):
                raise ValueError(
                    f"noise_scale {written_scale!r} disagrees with the release's fields "
                    f"(which give {rel.scale!r})"
                )
        return rel

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
    x: npt.ArrayLike,
    family: Any,
    *,
    epsilon: float | None = None,
    bounds: tuple[float, float] | str | None = None,
    bounds_share: float = 0.1,
    bounds_range: tuple[float, float] | None = None,
    bounds_quantiles: tuple[float, float] = (0.025, 0.975),
    bounds_candidates: str = "auto",
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

    The default noise is vetted: OpenDP's discrete Laplace on the exact integer statistic
    (counts as they are; float statistics rounded to multiples of a public power-of-two
    quantum q, with the rounding added to the sensitivity), drawn from the operating system's
    randomness. Passing ``rng`` makes the call a seeded *study*: the noise is then the
    floating-point Laplace sampler (``mechanism="laplace-float"``), which is not safe for
    real data (Mironov 2012), and the release records that name.

    Parameters
    ----------
    x
        One-dimensional array of records.
    family
        PyMC distribution class of one record: ``pm.Bernoulli``, ``pm.Binomial`` (needs
        ``trials``), ``pm.Categorical`` (needs ``categories``), or, with ``bounds``,
        ``pm.Exponential``, ``pm.Gamma`` (needs ``alpha``), ``pm.Poisson``, ``pm.Geometric``,
        ``pm.Normal`` (releases Σx and Σx²; with ``sigma=`` only Σx), ``pm.LogNormal`` (the
        same on log x).
    epsilon
        Total privacy budget ε > 0 of the release (Laplace mechanisms).
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
    bounds_candidates
        Outputs private bounds choose from: ``"gaps"`` (Smith's mechanism over the gaps between
        records), ``"log"`` (data-independent log-spaced candidates,
        :func:`~pymc_dp.mechanisms.private_quantile.log_candidates`), or ``"auto"`` (the
        default): ``"log"`` when ``bounds_range`` is non-negative and spans decades (it starts
        at 0, or upper/lower ≥ 100), else ``"gaps"``. A
        :class:`~pymc_dp.mechanisms.private_quantile.NoisyBoundsWarning` is issued, from n, ε
        and the share alone, when the quantiles' rank error (95 %) exceeds half the records
        between them (the window could then miss the data).
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
        A :class:`~pymc_dp.budget.PrivacyBudget`: the release is charged to it before any
        noise is drawn, refused if it would exceed the total, and records what was spent.
    label
        Name of this release in the accountant's ledger (default: the family name).
    **family_params
        Family settings: ``trials=`` for Binomial, ``categories=`` for Categorical, ``alpha=``
        for Gamma, ``sigma=`` for Normal or LogNormal with known σ.

    Returns
    -------
    Release
        The noisy statistic with n, ε, Δ, bounds and family.

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
    mechanism = check_mechanism(mechanism, rng)
    gaussian = mechanism == DISCRETE_GAUSSIAN
    if gaussian:
        if epsilon is not None:
            raise TypeError("a 'discrete-gaussian' release takes rho, not epsilon")
        if rho is None:
            raise TypeError("a 'discrete-gaussian' release needs rho=, its zCDP budget")
        rho = check_positive(rho, "rho")
        zcdp_to_approx_dp(rho, delta)  # checks delta
        # The Laplace-style bookkeeping below runs on √(2ρ): σ = Δ₂ / √(2ρ) plays b = Δ/ε.
        epsilon = math.sqrt(2.0 * rho)
    else:
        if rho is not None:
            raise TypeError(
                f"rho applies only to mechanism='discrete-gaussian' (not {mechanism!r})"
            )
        if epsilon is None:
            raise TypeError("release needs epsilon=, its privacy budget")
        epsilon = check_positive(epsilon, "epsilon")
    clamp = check_bool(clamp, "clamp")
    generator = check_rng(rng) if rng is not None or not mechanism.startswith("discrete") else None
    check_not_masked(x, "x")
    records = fam.validate_data(_clamped(fam, x) if clamp else x)
    bounds_epsilon = 0.0
    charged = False
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
        if gaussian:
            bounds_epsilon = math.sqrt(bounds_share) * epsilon  # ε²/2 = share · ρ
            epsilon = math.sqrt(1.0 - bounds_share) * epsilon
        else:
            bounds_epsilon = bounds_share * epsilon
            epsilon -= bounds_epsilon
        _statistic_magnitude(fam, search, int(np.shape(records)[0]))
        noise_scale(sensitivity=_sensitivity(fam, search, gaussian), epsilon=epsilon)
        _charge(budget, mechanism, epsilon, bounds_epsilon, label or fam.name)
        charged = True
        candidates = _bounds_candidates(bounds_candidates, search, int(np.shape(records)[0]))
        _warn_if_noisy_bounds(
            int(np.shape(records)[0]), bounds_epsilon, bounds_quantiles, candidates, search
        )
        window = private_bounds(
            records,
            epsilon=bounds_epsilon,
            quantiles=bounds_quantiles,
            lower=bounds_range[0],
            upper=bounds_range[1],
            candidates=candidates,
            rng=generator if generator is not None else np.random.default_rng(),
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
    n = int(records.shape[0])
    magnitude = _statistic_magnitude(fam, window, n)
    sensitivity = _sensitivity(fam, window, gaussian)
    noise_scale(sensitivity=sensitivity, epsilon=epsilon, magnitude=magnitude)
    if not charged:
        _charge(budget, mechanism, epsilon, bounds_epsilon, label or fam.name)
    noisy = noisy_statistic(
        fam,
        records,
        window,
        mechanism=mechanism,
        sensitivity=sensitivity,
        epsilon=None if gaussian else epsilon,
        rho=epsilon**2 / 2.0 if gaussian else None,
        rng=generator,
        magnitude=magnitude,
    )
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
        clamped=clamp,
        quantum=noisy.quantum,
        library=noisy.library,
        rho=epsilon**2 / 2.0 if gaussian else None,
        delta=delta if gaussian else 0.0,
        budget=budget.receipt() if budget is not None else None,
    )


def _sensitivity(fam: ExponentialFamily, window: tuple[float, float], gaussian: bool) -> float:
    """The exact statistic's sensitivity: L2 for the Gaussian mechanism, else L1."""
    if gaussian:
        return fam.release_sensitivity_l2(window) if fam.needs_bounds else fam.sensitivity_l2
    return fam.release_sensitivity(window) if fam.needs_bounds else fam.sensitivity


def _charge(budget: Any, mechanism: str, epsilon: float, bounds_epsilon: float, label: str) -> None:
    """Charge the accountant (if any) before noise is drawn; it refuses an overspend."""
    if budget is None:
        return
    from pymc_dp.budget import PrivacyBudget

    if not isinstance(budget, PrivacyBudget):
        raise TypeError(f"budget must be a pymc_dp.PrivacyBudget (got {type(budget).__name__})")
    if mechanism == DISCRETE_GAUSSIAN:
        budget.spend(rho=epsilon**2 / 2.0 + bounds_epsilon**2 / 2.0, label=label)
    else:
        budget.spend(epsilon=epsilon + bounds_epsilon, label=label)


def _clamped(fam: ExponentialFamily, x: npt.ArrayLike) -> npt.ArrayLike:
    """``x`` with numeric records outside the family's (public) domain moved to its ends."""
    arr = np.asarray(x)
    if arr.dtype.kind not in "iuf":
        return x  # booleans and anything else are checked, not clamped
    lo, hi = fam.domain
    with np.errstate(invalid="ignore"):
        out = np.clip(arr, lo, hi)
        if fam.name.startswith("log"):
            # The domain is x > 0 (log x must be finite): the nearest point is the smallest float.
            out = np.where(out <= 0, np.finfo(np.float64).tiny, out)
    return out


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


def _plain(budget: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if budget is None else dict(budget)


def _check_noise_fields(rel: Release, gaussian: bool) -> None:
    """Check ``quantum``, ``library``, ``rho``, ``delta`` and ``budget`` against the mechanism."""
    quantum = rel.quantum
    if rel.mechanism == LAPLACE_FLOAT:
        if quantum is not None:
            raise ValueError(f"quantum must be None for {LAPLACE_FLOAT!r} (got {quantum!r})")
    else:
        if quantum is None:
            raise ValueError(f"mechanism {rel.mechanism!r} needs quantum, the fixed-point step")
        quantum = check_positive(quantum, "quantum")
        if math.frexp(quantum)[0] != 0.5:
            raise ValueError(f"quantum must be a power of two (got {quantum!r})")
        object.__setattr__(rel, "quantum", quantum)
    if rel.library is not None and not isinstance(rel.library, str):
        raise TypeError(f"library must be a string (got {rel.library!r})")
    if gaussian:
        if rel.rho is None:
            raise ValueError("a 'discrete-gaussian' release needs rho")
        object.__setattr__(rel, "rho", check_positive(rel.rho, "rho"))
        delta = check_positive(rel.delta, "delta")
        if delta >= 1:
            raise ValueError(f"delta must lie in (0, 1) (got {delta})")
        object.__setattr__(rel, "delta", delta)
    else:
        if rel.rho is not None:
            raise ValueError(f"rho applies only to 'discrete-gaussian' (got rho={rel.rho!r})")
        if rel.delta != 0:
            raise ValueError(f"delta must be 0 for {rel.mechanism!r} (got {rel.delta!r})")
        object.__setattr__(rel, "delta", 0.0)
    if rel.budget is not None:
        if not isinstance(rel.budget, Mapping):
            raise TypeError(f"budget must be a mapping (got {type(rel.budget).__name__})")
        object.__setattr__(rel, "budget", types.MappingProxyType(dict(rel.budget)))


def _bounds_candidates(choice: Any, search: tuple[float, float], n: int) -> str:
    """Resolve ``bounds_candidates="auto"`` from the public search range alone."""
    if choice not in ("auto", "gaps", "log"):
        raise ValueError(f"bounds_candidates must be 'auto', 'gaps' or 'log' (got {choice!r})")
    if choice != "auto":
        return choice
    lower, upper = search
    spans_decades = lower >= 0 and (lower == 0 or upper / lower >= 100)
    return "log" if spans_decades else "gaps"


def _warn_if_noisy_bounds(
    n: int,
    bounds_epsilon: float,
    quantiles: Any,
    candidates: str,
    search: tuple[float, float],
) -> None:
    """Warn, from public values only, when the private window cannot locate its quantiles."""
    from pymc_dp.mechanisms.private_quantile import (
        NoisyBoundsWarning,
        bounds_rank_error,
        log_candidates,
    )

    try:
        q_lo, q_hi = (float(q) for q in quantiles)
    except (TypeError, ValueError):
        return  # private_bounds names the problem
    size = len(log_candidates(*search)) if candidates == "log" else n + 1
    error = bounds_rank_error(n, bounds_epsilon / 2.0, size)
    half = (q_hi - q_lo) * n / 2.0
    if error > half:
        # Each end can then land past the middle of the data: the window may hold few or none
        # of the records (a public-range end far from the data, for example).
        warnings.warn(
            f"private bounds are too noisy to be useful: with n={n} and {bounds_epsilon:g} of "
            f"epsilon for the window, each quantile's rank can be off by {error:.0f} records "
            f"(95 %), more than the {half:.0f} records between either quantile ({q_lo:g}, "
            f"{q_hi:g}) and the middle; raise bounds_share or epsilon, or give public bounds",
            NoisyBoundsWarning,
            stacklevel=3,
        )
