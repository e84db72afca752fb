"""Ready-made analyst models: a :class:`~pymc_dp.Release` and a conjugate prior → a PyMC model.

Every family has one named model: the records' distribution with θ under the family's
conjugate prior, and a :class:`~pymc_dp.NoisySuffStat` node for the release, so that
``pm.sample()`` samples its noise-aware posterior (Bernstein & Sheldon 2018). The prior's
hyperparameters have names (``alpha``, ``beta``, …) and documented defaults, which is what
``pymc-dp fit --prior`` sets. Writing the model by hand gives the same result; this module is for
the command line, notebooks and quick looks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pymc as pm

from pymc_dp.baselines import naive_posterior
from pymc_dp.families import ExponentialFamily
from pymc_dp.noisy_suffstat import NoisySuffStat
from pymc_dp.release import Release

__all__ = [
    "PRIORS",
    "PRIOR_RANGE",
    "PriorSpec",
    "build_model",
    "naive_marginals",
    "prior_hyperparameters",
    "prior_spec",
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
        Default value of every hyperparameter.
    variables : tuple of str
        Names of the model variables that carry θ, e.g. ``("p",)``.
    """

    distribution: str
    parameters: tuple[str, ...]
    defaults: Mapping[str, float]
    variables: tuple[str, ...]

    def describe(self) -> str:
        """One line: the prior with its defaults, e.g. ``p ~ Beta(alpha=1, beta=1)``."""
        args = ", ".join(f"{k}={self.defaults[k]:g}" for k in self.parameters)
        return f"{', '.join(self.variables)} ~ {self.distribution}({args})"


_BETA = PriorSpec("Beta", ("alpha", "beta"), {"alpha": 1.0, "beta": 1.0}, ("p",))
_GAMMA_LAM = PriorSpec("Gamma", ("alpha", "beta"), {"alpha": 1.0, "beta": 1.0}, ("lam",))
_NORMAL_MEAN = PriorSpec("Normal", ("mean", "sd"), {"mean": 0.0, "sd": 10.0}, ("mu",))
_NIG = PriorSpec(
    "NormalInverseGamma",
    ("mean", "kappa", "alpha", "beta"),
    {"mean": 0.0, "kappa": 1.0, "alpha": 1.0, "beta": 1.0},
    ("mu", "sigma2"),
)

PRIORS: Mapping[str, PriorSpec] = {
    "bernoulli": _BETA,
    "binomial": _BETA,
    "geometric": _BETA,
    "categorical": PriorSpec("Dirichlet", ("alpha",), {"alpha": 1.0}, ("p",)),
    "exponential": _GAMMA_LAM,
    "poisson": _GAMMA_LAM,
    "gamma": PriorSpec("Gamma", ("alpha", "beta"), {"alpha": 1.0, "beta": 1.0}, ("rate",)),
    "normal_known_sigma": _NORMAL_MEAN,
    "lognormal_known_sigma": _NORMAL_MEAN,
    "normal": _NIG,
    "lognormal": _NIG,
}
"""Conjugate prior of each family, by family name. The Dirichlet's ``alpha`` is one number for
every category or one per category. The Normal–Inverse-Gamma prior is
σ² ~ InverseGamma(alpha, beta), μ | σ² ~ Normal(mean, σ²/kappa); for LogNormal it is on log x."""


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


def prior_hyperparameters(
    family: ExponentialFamily, prior: Mapping[str, Any] | None = None
) -> tuple[npt.NDArray[np.float64], ...]:
    """Hyperparameters in the order of the family's conjugate update, defaults filled in.

    Parameters
    ----------
    family
        The release's family (:meth:`~pymc_dp.Release.get_family`).
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
            value = np.asarray(prior.get(key, spec.defaults[key]), dtype=np.float64)
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


PRIOR_RANGE = (1e-10, 1e10)
"""Range of the positive hyperparameters :func:`prior_hyperparameters` accepts (means: size)."""


def _first(values: npt.NDArray[np.float64]) -> float:
    return float(np.ravel(values)[0])


def _beta_record(fam: Any, params: tuple, name: str) -> Any:
    p = pm.Beta("p", alpha=params[0], beta=params[1])
    if fam.name == "bernoulli":
        return pm.Bernoulli.dist(p=p)
    if fam.name == "geometric":
        return pm.Geometric.dist(p=p)
    return pm.Binomial.dist(n=fam.trials, p=p)


def _dirichlet_record(fam: Any, params: tuple, name: str) -> Any:
    # The node names its category dimension {name}_category; the prior shares it.
    dim = f"{name}_category"
    pm.modelcontext(None).add_coord(dim, list(range(fam.categories)))
    return pm.Categorical.dist(p=pm.Dirichlet("p", a=params[0], dims=dim))


def _gamma_rate_record(fam: Any, params: tuple, name: str) -> Any:
    if fam.name == "gamma":
        rate = pm.Gamma("rate", alpha=params[0], beta=params[1])
        return pm.Gamma.dist(alpha=fam.alpha, beta=rate)
    lam = pm.Gamma("lam", alpha=params[0], beta=params[1])
    return pm.Poisson.dist(mu=lam) if fam.name == "poisson" else pm.Exponential.dist(lam=lam)


def _normal_mean_record(fam: Any, params: tuple, name: str) -> Any:
    mu = pm.Normal("mu", mu=params[0], sigma=params[1])
    record = pm.LogNormal if fam.name.startswith("lognormal") else pm.Normal
    return record.dist(mu=mu, sigma=fam.sigma)


def _nig_record(fam: Any, params: tuple, name: str) -> Any:
    mean, kappa, alpha, beta = params
    sigma2 = pm.InverseGamma("sigma2", alpha=alpha, beta=beta)
    mu = pm.Normal("mu", mu=mean, sigma=pm.math.sqrt(sigma2 / kappa))
    record = pm.LogNormal if fam.name == "lognormal" else pm.Normal
    return record.dist(mu=mu, sigma=pm.math.sqrt(sigma2))


_RECORDS: Mapping[str, Callable[[Any, tuple, str], Any]] = {
    "Beta": _beta_record,
    "Dirichlet": _dirichlet_record,
    "Gamma": _gamma_rate_record,
    "Normal": _normal_mean_record,
    "NormalInverseGamma": _nig_record,
}


def build_model(
    release: Release,
    prior: Mapping[str, Any] | None = None,
    *,
    name: str = "y",
    method: str = "auto",
) -> pm.Model:
    """The family's conjugate model of a release: θ's prior, the records, a NoisySuffStat node.

    Parameters
    ----------
    release
        The :class:`~pymc_dp.Release` to fit.
    prior
        Hyperparameters by name, e.g. ``{"alpha": 3, "beta": 5}``; missing ones take the
        defaults of :data:`PRIORS`.
    name
        Name of the NoisySuffStat node (its latent variables are ``{name}_s`` and
        ``{name}_sigma2``, added by :func:`~pymc_dp.sample_latent` for a scalar release).
    method
        Passed to :class:`~pymc_dp.NoisySuffStat` (``"auto"``, ``"collapsed"``,
        ``"augmented"``).

    Returns
    -------
    pymc.Model
        θ is named as in :attr:`PriorSpec.variables` (``p``, ``lam``, ``rate``, ``mu``,
        ``sigma2``); ``pm.sample()`` on it assigns the noise-aware samplers.

    Raises
    ------
    TypeError
        If ``release`` is not a Release.
    ValueError
        If a prior parameter is unknown or invalid.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp as pmdp
    >>> x = np.random.default_rng(0).binomial(5, 0.3, size=200)
    >>> rel = pmdp.release(x, pm.Binomial, epsilon=1.0, trials=5, rng=1)
    >>> model = build_model(rel, {"alpha": 3, "beta": 5})
    >>> [v.name for v in model.free_RVs]
    ['p']
    """
    if not isinstance(release, Release):
        raise TypeError(f"release must be a pymc_dp.Release (got {type(release).__name__})")
    family = release.get_family()
    spec = prior_spec(family)
    params = prior_hyperparameters(family, prior)
    with pm.Model() as model:
        dist = _RECORDS[spec.distribution](family, params, name)
        NoisySuffStat(name, dist, release=release, method=method)
    return model


def naive_marginals(release: Release, prior: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Marginals of the naive posterior (y taken as exact) of each scalar θ component.

    Parameters
    ----------
    release
        The release.
    prior
        Hyperparameters by name, as for :func:`build_model`.

    Returns
    -------
    dict
        Label (``"p"``, ``"p[2]"``, ``"mu"``, …) → frozen :mod:`scipy.stats` distribution,
        labelled as the posterior variables of :func:`build_model`'s model.

    Examples
    --------
    >>> import pymc as pm, pymc_dp as pmdp
    >>> rel = pmdp.release([0, 1, 2, 2], pm.Categorical, epsilon=1.0, categories=3, rng=0)
    >>> sorted(naive_marginals(rel))
    ['p[0]', 'p[1]', 'p[2]']
    """
    from scipy import stats

    family = release.get_family()
    spec = prior_spec(family)
    post = naive_posterior(release, prior=prior_hyperparameters(family, prior))
    if spec.distribution == "Dirichlet":
        alpha = np.asarray(post.alpha, dtype=np.float64)
        return {f"p[{k}]": stats.beta(a, alpha.sum() - a) for k, a in enumerate(alpha)}
    if spec.distribution == "NormalInverseGamma":
        return {"mu": post.mu, "sigma2": post.sigma2}
    return {spec.variables[0]: post}
