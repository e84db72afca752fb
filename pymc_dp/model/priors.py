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

Each prior is worth a few pseudo-records on the window's scale (Gamma(2, m) on an Exponential
rate: 2 records summing to m; the Normal–Inverse-Gamma: 1/8 of a record for μ, 4 records with
squared deviations summing to w²/8 for σ²), so its pull on the released statistic is at most
about one window's reach, below the Laplace noise scale Δ/ε whenever ε ≤ 1. Its log density
changes by a few nats over the window's scale, where the unit-scale Gamma(1, 1) it replaces
falls by λ nats: 150 nats at a Poisson mean of 150, more than the Laplace likelihood's
exponential tails can undo.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from pymc_dp.curator.record import Release
from pymc_dp.families import ExponentialFamily

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


@dataclasses.dataclass(frozen=True)
class PriorSpec:
    """The conjugate prior of one family, with named hyperparameters and their defaults.

    Attributes
    ----------
    distribution : str
        Name of the prior, e.g. ``"Beta"``.
    parameters : tuple of str
        Hyperparameter names, in the order of the family's conjugate update.
    defaults : Mapping
        Default value of every hyperparameter when no window is known (a family without a
        release); a windowed release's defaults come from :func:`default_prior_hyperparameters`.
    variables : tuple of str
        Names of the model variables that carry θ, e.g. ``("p",)``.
    rule : str
        How a release's window sets the defaults (empty: they do not depend on it).
    """

    distribution: str
    parameters: tuple[str, ...]
    defaults: Mapping[str, float]
    variables: tuple[str, ...]
    rule: str = ""

    def describe(self) -> str:
        """One line: the prior with its defaults, e.g. ``p ~ Beta(alpha=1, beta=1)``."""
        args = ", ".join(f"{k}={self.defaults[k]:g}" for k in self.parameters)
        return f"{', '.join(self.variables)} ~ {self.distribution}({args})"

    def describe_rule(self) -> str:
        """One line: the defaults a release gets, from its window's centre m and width w.

        Examples
        --------
        >>> PRIORS["poisson"].describe_rule()
        'lam ~ Gamma(alpha=2, beta=2/m)'
        >>> PRIORS["binomial"].describe_rule()
        'p ~ Beta(alpha=1, beta=1)'
        """
        if not self.rule:
            return self.describe()
        return f"{', '.join(self.variables)} ~ {self.distribution}({self.rule})"


DEFAULT_SHAPE = 2.0
"""Shape of every window-scaled Gamma, Beta and Inverse-Gamma default: the smallest whole
shape whose implied record mean is finite (its variance is not), so the prior is centred on the
window without ruling out a scale an order of magnitude away."""

_NIG_KAPPA = 1.0 / 8.0
# With alpha = 2 and beta = (w/4)², kappa = beta / (alpha (w/2)²) makes μ's marginal a
# Student-t with 4 degrees of freedom and scale w/2: centred on the window, wide as the window.

_BETA = PriorSpec("Beta", ("alpha", "beta"), {"alpha": 1.0, "beta": 1.0}, ("p",))
_NORMAL_MEAN = PriorSpec(
    "Normal", ("mean", "sd"), {"mean": 0.0, "sd": 10.0}, ("mu",), "mean=m, sd=w/2"
)
_NIG = PriorSpec(
    "NormalInverseGamma",
    ("mean", "kappa", "alpha", "beta"),
    {"mean": 0.0, "kappa": 1.0, "alpha": 1.0, "beta": 1.0},
    ("mu", "sigma2"),
    "mean=m, kappa=1/8, alpha=2, beta=(w/4)^2",
)

PRIORS: Mapping[str, PriorSpec] = {
    "bernoulli": _BETA,
    "binomial": _BETA,
    "geometric": dataclasses.replace(_BETA, rule="alpha=2, beta=m-1"),
    "categorical": PriorSpec("Dirichlet", ("alpha",), {"alpha": 1.0}, ("p",)),
    "exponential": PriorSpec(
        "Gamma", ("alpha", "beta"), {"alpha": 1.0, "beta": 1.0}, ("lam",), "alpha=2, beta=m"
    ),
    "poisson": PriorSpec(
        "Gamma", ("alpha", "beta"), {"alpha": 1.0, "beta": 1.0}, ("lam",), "alpha=2, beta=2/m"
    ),
    "gamma": PriorSpec(
        "Gamma", ("alpha", "beta"), {"alpha": 1.0, "beta": 1.0}, ("rate",), "alpha=2, beta=m/k"
    ),
    "normal_known_sigma": _NORMAL_MEAN,
    "lognormal_known_sigma": _NORMAL_MEAN,
    "normal": _NIG,
    "lognormal": _NIG,
}
"""Conjugate prior of each family, by family name. The Dirichlet's ``alpha`` is one number for
every category or one per category. The Normal–Inverse-Gamma prior is
σ² ~ InverseGamma(alpha, beta), μ | σ² ~ Normal(mean, σ²/kappa); for LogNormal it is on log x.
A windowed family's :attr:`PriorSpec.rule` gives its defaults from the window's centre m and
width w (:func:`window_scale`)."""

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
    if name not in PRIORS:
        raise ValueError(f"no model for family {name!r}; families with a model: {sorted(PRIORS)}")
    return PRIORS[name]


def window_scale(family: ExponentialFamily, bounds: tuple[float, float]) -> tuple[float, float]:
    """Centre m and width w of a release window on the family's latent scale.

    The window is clipped to the family's domain and read where the statistic lives: log x for
    LogNormal, whole numbers for counts (a count window's centre is at least 1/2, and at least
    1 for Geometric, whose records start at 1, so that every rule stays positive).

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
        centre = max(centre, 1.0 if family.name == "geometric" else 0.5)
    return float(centre), float(width)


def default_prior_hyperparameters(
    family: ExponentialFamily, window: Release | tuple[float, float] | None = None
) -> dict[str, float]:
    """Default hyperparameters of a family's conjugate prior, from public values only.

    Windowed families follow :attr:`PriorSpec.rule` with the window's centre m and width w
    (:func:`window_scale`; the rules are tabulated in :mod:`pymc_dp.model.priors`); the others keep
    :attr:`PriorSpec.defaults` (uniform Beta and Dirichlet).

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
    spec = prior_spec(family)
    if not family.needs_bounds:
        return {k: float(spec.defaults[k]) for k in spec.parameters}
    bounds = window.bounds if isinstance(window, Release) else window
    if bounds is None:
        raise ValueError(
            f"window is required for the default prior of the {family.name} family, whose "
            "scale comes from the release window: pass the Release or its bounds (a, b)"
        )
    m, w = window_scale(family, bounds)
    shape = DEFAULT_SHAPE
    name = family.name
    if name == "poisson":  # λ is the record mean: Gamma mean shape/rate = m
        values = {"alpha": shape, "beta": shape / m}
    elif name == "exponential":  # 1/λ ~ InvGamma(shape, rate): mean rate/(shape − 1) = m
        values = {"alpha": shape, "beta": (shape - 1.0) * m}
    elif name == "gamma":  # record mean k/rate: mean k·rate_β/(shape − 1) = m
        values = {"alpha": shape, "beta": (shape - 1.0) * m / float(family.alpha)}
    elif name == "geometric":  # E[1/p] = (α + β − 1)/(α − 1) = m; m ≥ 1, β kept > 0
        values = {"alpha": shape, "beta": max((shape - 1.0) * m - (shape - 1.0), 0.5)}
    elif name in ("normal_known_sigma", "lognormal_known_sigma"):
        values = {"mean": m, "sd": 0.5 * w}
    else:  # normal, lognormal: E[σ²] = (w/4)², μ ~ t₄(m, w/2)
        beta = (shape - 1.0) * (w / 4.0) ** 2
        values = {"mean": m, "kappa": _NIG_KAPPA, "alpha": shape, "beta": beta}
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
            f"is {spec.describe()}"
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
