"""The :class:`Release` record: a validated, versioned, JSON-serialisable noisy statistic.

Written by the curator (:func:`pymc_dp.release`), read by the analyst; it holds nothing about
individual records.
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
    MAX_N,
    MAX_NOISE_SCALE,
    check_bool,
    check_int,
    check_json_numbers,
    check_positive,
    check_zcdp_fields,
    json_float,
)
from pymc_dp.curator.budget import check_receipt
from pymc_dp.curator.noise import check_mechanism
from pymc_dp.curator.strict_json import strict_loads
from pymc_dp.families import ExponentialFamily, get_family
from pymc_dp.mechanisms.vetted import DISCRETE_GAUSSIAN, LAPLACE_FLOAT

__all__ = ["FORMAT_VERSION", "Release", "counts_window"]

FORMAT_VERSION = 2
"""Format 2 adds quantum, record_quantum, library, rho, delta, noise_scale and budget; format 1
files (float Laplace, ``"mechanism": "laplace"``) are still read, and the ``quantum`` of a
format 1 file (the record grid step, written before the vetted mechanisms existed) is read as
``record_quantum``."""
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
    bounds_mechanism : str or None
        How a private window was chosen: its candidates and sampler, one of
        :data:`pymc_dp.curator.private_window.BOUNDS_MECHANISMS` (``"linear-opendp"``,
        ``"log-opendp"`` for a real release; ``"gaps-float"``, ``"log-float"``,
        ``"linear-float"`` for a seeded study). ``None`` for public bounds and in files
        written before this field existed.
    clamped : bool
        Whether the curator asked for records outside the family's domain to be clamped to it
        (``clamp=True``) instead of stopping the release. It says that the option was on, not
        whether any record was clamped (that would depend on the data). Files written before
        this field existed load with ``False``.
    quantum : float or None
        The statistic's quantum q_s (a power of two) of a vetted mechanism: the exact total s
        was rounded to a multiple of q_s before integer noise was added, the sensitivity
        includes that rounding (Δ + d·q_s, or Δ₂ + √d·q_s), and ``value`` is a multiple of
        q_s. 1.0 for integer statistics; ``None`` for ``"laplace-float"``.
    record_quantum : float or None
        The public grid step q_r (a power of two) of the latent record for a family released
        over a window: every record in the window was rounded to the nearest multiple of q_r
        inside the window before t was summed exactly, so Δ covers it unchanged (the rounded
        record is a possible record). ``None`` for counts (summed exactly as integers) and for
        files written before this field existed. Not to be confused with ``quantum``.
    library : str or None
        The sampler and its version, e.g. ``"opendp 0.16.0"``; ``None`` in older files.
    rho : float or None
        zCDP parameter ρ of a ``"discrete-gaussian"`` release, ``None`` otherwise.
    delta : float
        δ of the (ε, δ) guarantee stated in ``epsilon``: 0 for the Laplace mechanisms.
    budget : Mapping or None
        What a :class:`~pymc_dp.curator.budget.PrivacyBudget` recorded when it charged this release:
        ``{"unit", "total", "spent", "remaining", "label"}``; ``None`` without an accountant.
    window_count : float or None
        For a windowed family with a one-number statistic: the number of records inside the
        window, released with its own Laplace noise of scale 1/``count_epsilon`` (a count moves
        by at most 1 when one record is replaced), on the integers for ``"discrete-laplace"``.
        It tells a window that holds most records from one that holds few (the sum alone
        cannot, :func:`pymc_dp.release`'s ``count_share``). ``None`` when no count was released
        (files written before this field existed).
    count_epsilon : float or None
        The ε spent on ``window_count``, on top of ``epsilon`` (the sum's): the release is
        (``epsilon + count_epsilon + bounds_epsilon``)-DP. ``None`` without a count.

    Examples
    --------
    >>> import pymc as pm
    >>> from pymc_dp import release
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
    bounds_mechanism: str | None = None
    clamped: bool = False
    quantum: float | None = None
    record_quantum: float | None = None
    library: str | None = None
    rho: float | None = None
    delta: float = 0.0
    budget: Mapping[str, Any] | None = None
    window_count: float | None = None
    count_epsilon: float | None = None

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
        _check_bounds_mechanism(self.bounds_mechanism, self.bounds_epsilon)
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
        _check_count_fields(self, fam, gaussian)
        if not self.scale <= MAX_NOISE_SCALE:
            # The analyst's mixing variances hold 2·scale²: they would overflow.
            raise ValueError(
                f"the noise scale {self.scale:.3g} (sensitivity {self.sensitivity:g} over "
                f"epsilon {self.epsilon:g}) is above {MAX_NOISE_SCALE:g}: such a release carries "
                "no information and its fit would overflow"
            )

    @property
    def total_epsilon(self) -> float:
        """Privacy cost of the whole release: statistics (sum and window count) plus bounds."""
        return self.epsilon + (self.count_epsilon or 0.0) + self.bounds_epsilon

    @property
    def count_scale(self) -> float | None:
        """Laplace scale 1/``count_epsilon`` of the window count's noise; ``None`` without one."""
        return None if self.count_epsilon is None else 1.0 / self.count_epsilon

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
            self.bounds_mechanism,
            self.clamped,
            self.quantum,
            self.record_quantum,
            self.library,
            self.rho,
            self.delta,
            json.dumps(_plain(self.budget), sort_keys=True),
            self.window_count,
            self.count_epsilon,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary (floats round-trip exactly through :mod:`json`).

        The window count's fields are written only when a count was released, so a release
        without one is the same file as before they existed.
        """
        counted = (
            {"window_count": self.window_count, "count_epsilon": self.count_epsilon}
            if self.window_count is not None
            else {}
        )
        return {
            "format_version": FORMAT_VERSION,
            "value": self.value.tolist(),
            "n": self.n,
            "epsilon": self.epsilon,
            "sensitivity": self.sensitivity,
            "bounds": list(self.bounds),
            "family": self.family,
            "family_params": dict(self.family_params),
            "mechanism": self.mechanism,
            "bounds_epsilon": self.bounds_epsilon,
            "bounds_mechanism": self.bounds_mechanism,
            "clamped": self.clamped,
            "quantum": self.quantum,
            "record_quantum": self.record_quantum,
            "library": self.library,
            "rho": self.rho,
            "delta": self.delta,
            "noise_scale": self.scale,
            "budget": _plain(self.budget),
            **counted,
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
        version = data.pop("format_version", FORMAT_VERSION)
        if (
            isinstance(version, bool)
            or not isinstance(version, numbers.Integral)
            or version not in _READABLE_VERSIONS
        ):
            raise ValueError(
                f"unsupported release format_version {version!r}; this version of pymc_dp "
                f"reads format_version {' and '.join(map(str, _READABLE_VERSIONS))}"
            )
        if version == 1 and "quantum" in data:
            # Format 1 wrote the record grid step as "quantum" (there was no statistic quantum).
            data["record_quantum"] = data.pop("quantum")
        # noise_scale is written for readers of the file; it must agree with the fields.
        written_scale = data.pop("noise_scale", None)
        expected = {f.name for f in dataclasses.fields(cls)}
        required = {"value", "n", "epsilon", "sensitivity", "bounds", "family"}
        if set(data) - expected or required - set(data):
            raise ValueError(f"a release needs the fields {sorted(expected)} (got {sorted(data)})")
        for name in ("quantum", "record_quantum", "rho", "window_count", "count_epsilon"):
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
        return cls.from_dict(strict_loads(text))


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


def _check_bounds_mechanism(name: Any, bounds_epsilon: float) -> None:
    """A known name when the window was private, ``None`` when it was public."""
    from pymc_dp.curator.private_window import BOUNDS_MECHANISMS

    if name is None:
        return
    if not isinstance(name, str):
        raise TypeError(f"bounds_mechanism must be a string or null (got {name!r})")
    if name not in BOUNDS_MECHANISMS:
        raise ValueError(
            f"bounds_mechanism must be one of {', '.join(BOUNDS_MECHANISMS)} (got {name!r})"
        )
    if bounds_epsilon == 0:
        raise ValueError(
            f"bounds_mechanism {name!r} needs bounds_epsilon > 0: a private window has a cost"
        )


def counts_window(fam: ExponentialFamily, gaussian: bool) -> bool:
    """Whether a release of ``fam`` can carry a window count (one-number window sum, Laplace)."""
    return fam.needs_bounds and getattr(fam, "stat_size", 0) == 1 and not gaussian


def _check_count_fields(rel: Release, fam: ExponentialFamily, gaussian: bool) -> None:
    """Check ``window_count`` and ``count_epsilon``: both or neither, for a one-number window."""
    count, count_epsilon = rel.window_count, rel.count_epsilon
    if count is None and count_epsilon is None:
        return
    if count is None or count_epsilon is None:
        raise ValueError(
            "window_count and count_epsilon go together: give both (a released window count "
            "and its ε) or neither"
        )
    if not counts_window(fam, gaussian=False):
        raise ValueError(
            f"a window count goes with the window sum of a windowed family with one statistic, "
            f"not {fam!r}"
        )
    if gaussian:
        raise ValueError(
            "a window count is released with Laplace noise; this release used the Gaussian "
            "mechanism: release it without a count"
        )
    if isinstance(count, bool) or not isinstance(count, numbers.Real):
        raise TypeError(f"window_count must be a number (got {count!r})")
    count = float(count)
    if not math.isfinite(count):
        raise ValueError("window_count must be finite")
    object.__setattr__(rel, "window_count", count)
    count_epsilon = check_positive(count_epsilon, "count_epsilon")
    if not 1.0 / count_epsilon <= MAX_NOISE_SCALE:
        raise ValueError(
            f"count_epsilon {count_epsilon:g} gives the window count a noise scale above "
            f"{MAX_NOISE_SCALE:g}: such a count carries no information"
        )
    object.__setattr__(rel, "count_epsilon", count_epsilon)


def _plain(budget: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if budget is None else dict(budget)


def _check_noise_fields(rel: Release, gaussian: bool) -> None:
    """Check ``quantum``, ``record_quantum``, ``library``, ``rho``, ``delta`` and ``budget``."""
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
    if rel.record_quantum is not None:
        record_quantum = check_positive(rel.record_quantum, "record_quantum")
        if math.frexp(record_quantum)[0] != 0.5:
            raise ValueError(f"record_quantum must be a power of two (got {rel.record_quantum!r})")
        object.__setattr__(rel, "record_quantum", record_quantum)
    if rel.library is not None and not isinstance(rel.library, str):
        raise TypeError(f"library must be a string (got {rel.library!r})")
    rho, delta = check_zcdp_fields(gaussian, rel.rho, rel.delta, rel.mechanism)
    object.__setattr__(rel, "rho", rho)
    object.__setattr__(rel, "delta", delta)
    if rel.budget is not None:
        object.__setattr__(rel, "budget", types.MappingProxyType(check_receipt(rel.budget)))
