"""Ready-made analyst models: a :class:`~pymc_dp.Release` and a conjugate prior → a PyMC model.

Every family has one named model: the records' distribution with θ under the family's
conjugate prior, and a :class:`~pymc_dp.NoisySuffStat` node for the release, so that
``pm.sample()`` samples its noise-aware posterior (Bernstein & Sheldon 2018). The prior's
hyperparameters have names (``alpha``, ``beta``, …) and defaults from public information only
(a windowed family's prior is put on the scale of its release window, :mod:`pymc_dp.model.priors`),
which ``pymc-dp fit --prior`` overrides one by one. Writing the model by hand gives the same
result; this module is for the command line, notebooks and quick looks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pymc as pm

from pymc_dp.curator.record import Release
from pymc_dp.evaluation.baselines import naive_posterior
from pymc_dp.families import ExponentialFamily
from pymc_dp.model.noisy_suffstat import NoisySuffStat
from pymc_dp.model.priors import (
    PRIOR_RANGE,
    PRIORS,
    PriorSpec,
    default_prior_hyperparameters,
    prior_hyperparameters,
    prior_spec,
    prior_summary,
)
from pymc_dp.model.window_premise import WINDOW_RECORDS, add_window_premise

# The priors live in pymc_dp.model.priors; they are re-exported here, where the models use them.
__all__ = [
    "PRIORS",
    "PRIOR_RANGE",
    "PriorSpec",
    "build_model",
    "default_prior_hyperparameters",
    "naive_marginals",
    "prior_hyperparameters",
    "prior_marginals",
    "prior_spec",
    "prior_summary",
]


def _prior_variables(
    family: ExponentialFamily, spec: PriorSpec, params: tuple, name: str
) -> tuple[Any, ...]:
    """θ as free variables named as ``spec.variables``, under the conjugate prior ``params``."""
    if spec.distribution == "NormalInverseGamma":  # two variables: σ², then μ given σ²
        mean, kappa, alpha, beta = params
        sigma2 = pm.InverseGamma("sigma2", alpha=alpha, beta=beta)
        return pm.Normal("mu", mu=mean, sigma=pm.math.sqrt(sigma2 / kappa)), sigma2
    dims = None
    if any(family.prior_shapes):
        # A vector θ (a Dirichlet's p) shares the node's category dimension {name}_category. The
        # model may hold it already, with the categories' public labels (build_model's labels=).
        dims = f"{name}_category"
        model = pm.modelcontext(None)
        if dims not in model.coords:
            model.add_coord(dims, list(range(family.prior_shapes[0][0])))
    return (family.conjugate_prior(spec.variables[0], *params, dims=dims),)


def build_model(
    release: Release,
    prior: Mapping[str, Any] | None = None,
    *,
    name: str = "y",
    method: str = "auto",
    likelihood: str = "auto",
    labels: Sequence[str] | None = None,
    window_records: float = WINDOW_RECORDS,
) -> pm.Model:
    """The family's conjugate model of a release: θ's prior, the records, a NoisySuffStat node.

    Parameters
    ----------
    release
        The :class:`~pymc_dp.Release` to fit.
    prior
        Hyperparameters by name, e.g. ``{"alpha": 3, "beta": 5}``; missing ones take the
        defaults from the release's public values
        (:func:`~pymc_dp.model.priors.default_prior_hyperparameters`: the window's scale for a
        windowed family, uniform Beta / Dirichlet otherwise).
    name
        Name of the NoisySuffStat node (its latent variables are ``{name}_s`` and
        ``{name}_sigma2``, added by :func:`~pymc_dp.sample_latent` for a scalar release).
    method
        Passed to :class:`~pymc_dp.NoisySuffStat` (``"auto"``, ``"collapsed"``,
        ``"augmented"``).
    likelihood
        Passed to :class:`~pymc_dp.NoisySuffStat` (``"auto"``, ``"clt"``, ``"exact"``).
    labels
        A Categorical release's public category labels (e.g. a
        :class:`~pymc_dp.curator.release_file.ColumnRelease`'s ``labels``): the coordinates of the
        dimension ``{name}_category`` of ``p`` and the counts, in place of 0..K-1.
    window_records
        A windowed family with a scalar θ: pseudo-records inside the release window that the
        prior adds, the public premise that the window holds most records
        (:mod:`pymc_dp.model.window_premise`; a potential ``window_premise``); 0 leaves it out,
        as does ``method="augmented"`` (the paper's Gibbs sampler: θ | s is a conjugate update).

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
    params = prior_hyperparameters(release, prior)
    with pm.Model() as model:
        if labels is not None:
            categories = getattr(family, "categories", None)
            if categories is None or len(labels) != categories:
                raise ValueError(
                    "labels must name each category of a Categorical release "
                    f"(got {len(labels)} for {family!r})"
                )
            model.add_coord(f"{name}_category", [str(v) for v in labels])
        # θ under its conjugate prior, then one record's distribution at θ (the family's own).
        theta = _prior_variables(family, spec, params, name)
        dist = family.dist_at(*theta)
        # The augmented sampler's conjugate update of θ | s has no room for the premise.
        if family.needs_bounds and method != "augmented":
            add_window_premise(family, theta[0], release.bounds, records=window_records)
        NoisySuffStat(name, dist, release=release, method=method, likelihood=likelihood)
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
    post = naive_posterior(release, prior=prior_hyperparameters(release, prior))
    return _labelled_marginals(release.get_family(), post)


def prior_marginals(release: Release, prior: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Marginals of the prior of each scalar θ component, labelled as :func:`naive_marginals`.

    Parameters
    ----------
    release
        The release (its window sets the default prior's scale).
    prior
        Hyperparameters by name, as for :func:`build_model`.

    Returns
    -------
    dict
        Label → frozen :mod:`scipy.stats` distribution.

    Examples
    --------
    >>> import pymc as pm, pymc_dp as pmdp
    >>> rel = pmdp.release([1, 0, 1], pm.Bernoulli, epsilon=1.0, rng=0)
    >>> float(prior_marginals(rel, {"alpha": 2.0, "beta": 3.0})["p"].mean())
    0.4
    """
    family = release.get_family()
    hyper = family.check_prior(prior_hyperparameters(release, prior))
    return _labelled_marginals(family, family.conjugate_distribution(hyper))


def _labelled_marginals(family: ExponentialFamily, dist: Any) -> dict[str, Any]:
    """Label → marginal of each scalar θ component of a conjugate distribution."""
    from scipy import stats

    spec = prior_spec(family)
    if spec.distribution == "Dirichlet":
        alpha = np.asarray(dist.alpha, dtype=np.float64)
        return {f"p[{k}]": stats.beta(a, alpha.sum() - a) for k, a in enumerate(alpha)}
    if spec.distribution == "NormalInverseGamma":
        return {"mu": dist.mu, "sigma2": dist.sigma2}
    return {spec.variables[0]: dist}
