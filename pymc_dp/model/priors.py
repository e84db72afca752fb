"""Default conjugate priors from public information only.

A release publishes its family, n, ε, Δ and, for a family with unbounded statistics, the window
``(a, b)`` the curator chose without looking at the data. That window says on what scale the
records live, so the default prior of a windowed family is put on that scale: shape 2 (a
coefficient of variation of 1/√2 or a heavy, infinite-variance tail), centred so that the
implied mean of one record is the window's centre m = (a + b)/2, with spread of the window's
width w = b − a. The window is read on the family's latent scale, clipped to its domain
((log a, log b) for LogNormal, whole numbers for counts). Bernoulli, Binomial and Categorical
records are bounded by the trials and categories, and keep the uniform Beta(1, 1) and
Dirichlet(1) priors, which are scale-free.

=====================  ==========================================  ============================
family                 default prior                               implied record mean
=====================  ==========================================  ============================
poisson                λ ~ Gamma(2, 2/m)                           λ: mean m
exponential            λ ~ Gamma(2, m)                             1/λ ~ InvGamma(2, m): mean m
gamma (shape k)        rate ~ Gamma(2, m/k)                        k/rate: mean m
geometric              p ~ Beta(2, m − 1)                          1/p: mean m
normal, lognormal      σ² ~ InvGamma(2, (w/4)²),                   μ: Student-t₄(m, w/2)
                       μ | σ² ~ Normal(m, σ²/κ), κ = 1/8
known σ                μ ~ Normal(m, w/2)                          μ
=====================  ==========================================  ============================

Each family declares its prior, the rule and the arithmetic behind it
(:attr:`~pymc_dp.families.FamilyDeclaration.prior` and
:attr:`~pymc_dp.families.FamilyDeclaration.window_prior`); this module reads them. Each prior is
worth a few pseudo-records on the window's scale (Gamma(2, m) on an Exponential
rate: 2 records summing to m; the Normal–Inverse-Gamma: 1/8 of a record for μ, 4 records with
squared deviations summing to w²/8 for σ²), so its pull on the released statistic is at most
about one window's reach, below the Laplace noise scale Δ/ε whenever ε ≤ 1. Its log density
changes by a few nats over the window's scale, where the unit-scale Gamma(1, 1) it replaces
falls by λ nats: 150 nats at a Poisson mean of 150, more than the Laplace likelihood's
exponential tails can undo.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from pymc_dp.curator.record import Release
from pymc_dp.families import ExponentialFamily, declared_families, family_declaration
from pymc_dp.families.declaration import DEFAULT_SHAPE, PriorSpec

__all__ = [
    "DEFAULT_SHAPE",
    "PRIORS",
    "PRIOR_RANGE",
    "PriorSpec",
    "default_prior_hyperparameters",
    "prior_hyperparameters",
    "prior_spec",
    "prior_summary",
    "window_scale",
]


class _DeclaredPriors(Mapping[str, PriorSpec]):
    """Family name → :class:`PriorSpec`, read from the registered declarations at each access."""

    def __getitem__(self, name: str) -> PriorSpec:
        try:
            return family_declaration(name).prior
        except ValueError:
            raise KeyError(name) from None

    def __iter__(self) -> Iterator[str]:
        return iter([d.name for d in declared_families()])

    def __len__(self) -> int:
        return len(declared_families())

    def __repr__(self) -> str:
        return f"PRIORS({dict(self)!r})"


PRIORS: Mapping[str, PriorSpec] = _DeclaredPriors()
"""Conjugate prior of each family, by family name: each declaration's
:attr:`~pymc_dp.families.FamilyDeclaration.prior`, a family registered later included. The
Dirichlet's ``alpha`` is one number for every category or one per category. The
Normal–Inverse-Gamma prior is σ² ~ InverseGamma(alpha, beta), μ | σ² ~ Normal(mean, σ²/kappa);
for LogNormal it is on log x. A windowed family's :attr:`PriorSpec.rule` gives its defaults from
the window's centre m and width w (:func:`window_scale`)."""

PRIOR_RANGE = (1e-10, 1e10)
"""Range of the positive hyperparameters :func:`prior_hyperparameters` accepts (means: size)."""


def prior_spec(family: ExponentialFamily | str) -> PriorSpec:
    """The :class:`PriorSpec` of a family (or family name).

    Examples
    --------
    >>> prior_spec("binomial").describe()
    'p ~ Beta(alpha=1, beta=1)'
    """
    name = family if isinstance(family, str) else family.name
    try:
        return PRIORS[name]
    except KeyError:
        raise ValueError(
            f"no model for family {name!r}; families with a model: {sorted(PRIORS)}"
        ) from None


def window_scale(family: ExponentialFamily, bounds: tuple[float, float]) -> tuple[float, float]:
    """Centre m and width w of a release window on the family's latent scale.

    The window is clipped to the family's domain and read where the statistic lives: log x for
    LogNormal, whole numbers for counts (a count window's centre is at least 1/2, and at least
    the smallest record, 1 for Geometric, so that every rule stays positive).

    Parameters
    ----------
    family
        A family with unbounded statistics (``family.needs_bounds``).
    bounds
        The release window ``(a, b)`` on the data scale.

    Returns
    -------
    tuple of float
        ``(m, w)``: m = (a' + b')/2 and w = b' − a' of the latent window (a', b').

    Raises
    ------
    ValueError
        If the family takes no window, or the window is invalid for it.

    Examples
    --------
    >>> from pymc_dp.families import Exponential, LogNormal
    >>> window_scale(Exponential(), (0.0, 400.0))
    (200.0, 400.0)
    >>> [round(v, 3) for v in window_scale(LogNormal(), (1.0, 100.0))]
    [2.303, 4.605]
    """
    if not family.needs_bounds:
        raise ValueError(
            f"the {family.name} family has bounded statistics and no window; its default prior "
            "does not depend on one"
        )
    a, b = family.latent_window(family.check_bounds(bounds))
    centre, width = 0.5 * (a + b), b - a
    if getattr(family, "discrete", False):
        centre = max(centre, 0.5, float(family.domain[0]))
    return float(centre), float(width)


def default_prior_hyperparameters(
    family: ExponentialFamily, window: Release | tuple[float, float] | None = None
) -> dict[str, float]:
    """Default hyperparameters of a family's conjugate prior, from public values only.

    Windowed families follow their declaration's
    :attr:`~pymc_dp.families.FamilyDeclaration.window_prior` (stated by :attr:`PriorSpec.rule`)
    with the window's centre m and width w (:func:`window_scale`; the built-in rules are
    tabulated in :mod:`pymc_dp.model.priors`); the others keep :attr:`PriorSpec.defaults`
    (uniform Beta and Dirichlet).

    Parameters
    ----------
    family
        The release's family (:meth:`~pymc_dp.Release.get_family`).
    window
        The :class:`~pymc_dp.Release` (its ``bounds`` are used) or the window ``(a, b)``;
        required for a family with unbounded statistics.

    Returns
    -------
    dict
        Hyperparameter name → default value, in the order of :attr:`PriorSpec.parameters`.

    Raises
    ------
    ValueError
        If a windowed family is given no window, or the window is invalid.

    Examples
    --------
    >>> from pymc_dp.families import Binomial, Poisson
    >>> default_prior_hyperparameters(Poisson(), (0, 400))
    {'alpha': 2.0, 'beta': 0.01}
    >>> default_prior_hyperparameters(Binomial(trials=5))
    {'alpha': 1.0, 'beta': 1.0}
    """
    declaration = family_declaration(family.name)
    spec = declaration.prior
    if not family.needs_bounds or declaration.window_prior is None:
        return {k: float(spec.defaults[k]) for k in spec.parameters}
    bounds = window.bounds if isinstance(window, Release) else window
    if bounds is None:
        raise ValueError(
            f"window is required for the default prior of the {family.name} family, whose "
            "scale comes from the release window: pass the Release or its bounds (a, b)"
        )
    m, w = window_scale(family, bounds)
    values = declaration.window_prior(m, w, family.params())
    return {k: float(values[k]) for k in spec.parameters}


def prior_hyperparameters(
    source: Release | ExponentialFamily, prior: Mapping[str, Any] | None = None
) -> tuple[npt.NDArray[np.float64], ...]:
    """Hyperparameters in the order of the family's conjugate update, defaults filled in.

    Parameters
    ----------
    source
        The :class:`~pymc_dp.Release`, whose window sets a windowed family's defaults
        (:func:`default_prior_hyperparameters`); or a family alone, which takes the
        window-free :attr:`PriorSpec.defaults` (pass the release wherever there is one).
    prior
        Hyperparameters to change, by name (see :data:`PRIORS`); others keep their default.

    Raises
    ------
    ValueError
        If a name is not a hyperparameter of the family's prior, or a value is invalid: not
        finite, or (positive hyperparameters) outside :data:`PRIOR_RANGE`.

    Examples
    --------
    >>> from pymc_dp.families import Categorical
    >>> prior_hyperparameters(Categorical(categories=3), {"alpha": [1, 2, 3]})
    (array([1., 2., 3.]),)
    >>> prior_hyperparameters(Categorical(categories=3), {"gamma": 1})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: unknown prior parameter 'gamma' for the categorical family; ...
    """
    if isinstance(source, Release):
        family = source.get_family()
        defaults: Mapping[str, float] = default_prior_hyperparameters(family, source)
    elif isinstance(source, ExponentialFamily):
        family, defaults = source, prior_spec(source).defaults
    else:
        raise TypeError(
            "source must be a pymc_dp.Release or an ExponentialFamily "
            f"(got {type(source).__name__})"
        )
    spec = prior_spec(family)
    prior = dict(prior or {})
    unknown = sorted(set(prior) - set(spec.parameters))
    if unknown:
        raise ValueError(
            f"unknown prior parameter {unknown[0]!r} for the {family.name} family; its prior "
            f"is {_describe_defaults(spec, defaults)}"
        )
    values = []
    for key, shape in zip(spec.parameters, family.prior_shapes, strict=True):
        try:
            value = np.asarray(prior.get(key, defaults[key]), dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(
                f"prior parameter {key} must be a number (got {prior[key]!r})"
            ) from None
        if value.ndim == 0 and shape:
            value = np.full(shape, float(value))
        if value.shape != shape:
            raise ValueError(
                f"prior parameter {key} must have {shape[0] if shape else 1} value(s) for "
                f"{family!r} (got {value.size})"
            )
        values.append(value)
    try:
        checked = family.check_prior(tuple(values))
    except ValueError as err:
        raise ValueError(f"{err} for the prior {spec.describe()}") from None
    positive = family.prior_positive or (True,) * len(checked)
    for key, value, is_positive in zip(spec.parameters, checked, positive, strict=True):
        low, high = PRIOR_RANGE
        outside = (value < low) | (value > high) if is_positive else np.abs(value) > high
        if np.any(outside):
            rule = f"between {low:g} and {high:g}" if is_positive else f"at most {high:g} in size"
            raise ValueError(
                f"prior parameter {key} must be {rule} (got {_first(value[outside]):g}): beyond "
                f"that the prior is numerically a point mass or flat; rescale the data or choose "
                f"another prior ({spec.describe()})"
            )
    return checked


def _first(values: npt.NDArray[np.float64]) -> float:
    return float(np.ravel(values)[0])


def prior_summary(release: Release, prior: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The prior a fit of ``release`` uses, as a dictionary for printing and storing.

    Parameters
    ----------
    release
        The release to fit.
    prior
        Hyperparameters set by the analyst (``pymc-dp fit --prior``); others take the defaults.

    Returns
    -------
    dict
        ``distribution``, ``variables``, ``hyperparameters`` (name → number, or list for a
        Dirichlet with one value per category), ``source`` (where the defaults came from:
        ``"window (a, b)"`` or ``"uniform"``), ``set`` (names the analyst gave) and ``text``,
        one printable line.

    Examples
    --------
    >>> import pymc as pm, pymc_dp as pmdp
    >>> rel = pmdp.release([150, 98, 201], pm.Poisson, epsilon=0.5, bounds=(0, 400), rng=0)
    >>> prior_summary(rel)["text"]
    'lam ~ Gamma(alpha=2, beta=0.01) from window (0, 400)'
    >>> prior_summary(rel, {"alpha": 3})["text"]
    'lam ~ Gamma(alpha=3, beta=0.01): alpha as given, the rest from window (0, 400)'
    """
    family = release.get_family()
    spec = prior_spec(family)
    values = prior_hyperparameters(release, prior)
    given = [k for k in spec.parameters if k in (prior or {})]
    hyper = {
        k: (float(v) if v.ndim == 0 else v.tolist())
        for k, v in zip(spec.parameters, values, strict=True)
    }
    source = _window_text(release.bounds) if family.needs_bounds else "uniform"
    args = ", ".join(f"{k}={_fmt(v)}" for k, v in hyper.items())
    text = f"{', '.join(spec.variables)} ~ {spec.distribution}({args})"
    if not given:
        text += f" from {source}" if family.needs_bounds else " (uniform)"
    elif len(given) < len(spec.parameters):
        text += f": {', '.join(given)} as given, the rest from {source}"
    return {
        "distribution": spec.distribution,
        "variables": list(spec.variables),
        "hyperparameters": hyper,
        "source": source,
        "set": given,
        "text": text,
    }


def _fmt(value: float | list[float]) -> str:
    """A number as printed: up to 4 significant digits, never a NumPy repr."""
    if isinstance(value, list):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    if value != 0 and not 1e-4 <= abs(value) < 1e6:
        return f"{value:.4g}"
    return np.format_float_positional(value, precision=4, unique=True, fractional=False, trim="-")


def _window_text(bounds: tuple[float, float]) -> str:
    return f"window ({_fmt(float(bounds[0]))}, {_fmt(float(bounds[1]))})"


def _describe_defaults(spec: PriorSpec, defaults: Mapping[str, Any]) -> str:
    """``lam ~ Gamma(alpha=2, beta=0.04)``: the prior with the defaults this fit would use."""

    def text(value: Any) -> str:
        if np.size(value) != 1:
            return str(np.asarray(value).tolist())
        return np.format_float_positional(np.float64(np.ravel(value)[0]), precision=4, trim="-")

    args = ", ".join(f"{k}={text(defaults[k])}" for k in spec.parameters)
    return f"{', '.join(spec.variables)} ~ {spec.distribution}({args})"
