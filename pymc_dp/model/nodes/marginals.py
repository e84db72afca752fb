"""The observed node of a noisy marginal release: :func:`NoisyMarginals`, :func:`marginals_model`.

The node observes z = Uᵀ y, the projection of the noisy tables onto the directions in which
they vary with the data (:mod:`pymc_dp.likelihoods.marginals`); the rest of y is the noise
alone in directions where every data set gives the same tables, and carries nothing about θ.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pymc_dp.kernels.loglinear_laplace import LaplaceFit, clt_covariance, marginals_laplace
from pymc_dp.kernels.loglinear_moments import feature_method
from pymc_dp.likelihoods.marginals import (
    exact_setup,
    marginals_clt_fixed_logp,
    marginals_clt_logp,
    marginals_exact_logp,
    noise_variance,
    projected_release,
)
from pymc_dp.model.starts import started

__all__ = [
    "FEATURES",
    "LIKELIHOODS",
    "NoisyMarginals",
    "choose_likelihood",
    "laplace_fit",
    "marginals_model",
    "prior_sigmas",
    "term_names",
]

FEATURES = (None, "enumerate", "split", "junction", "bethe")
"""The feature moments' methods a model can be asked for
(:func:`~pymc_dp.kernels.loglinear_moments.feature_method` chooses where None)."""
LIKELIHOODS = ("auto", "clt", "clt-fixed", "exact")
"""``"clt"``: collapsed normal; ``"clt-fixed"``: the same with its covariance held at the
Laplace mode; ``"exact"``: enumeration of the histograms (tiny releases)."""
_EXACT_AUTO_LIMIT = 5_000
_FULL_CLT_AUTO_LIMIT = 10**8
"""``"auto"`` holds the covariance fixed above this many C·p² operations per gradient."""


def term_names(release: Any) -> list[str]:
    """A label for each log-linear parameter, e.g. ``"sex=male, income=>50K"``."""
    dom = release.domain
    return [
        ", ".join(
            f"{release.columns[k]}={release.domains[k][v]}" for k, v in zip(s, lv, strict=True)
        )
        for s, lv in dom.basis_terms
    ]


def choose_likelihood(release: Any, likelihood: str = "auto", features: str | None = None) -> str:
    """The likelihood ``"auto"`` (or the one named) takes for ``release``.

    ``features`` is the feature moments' method (default
    :func:`~pymc_dp.kernels.loglinear_moments.feature_method`): anything but ``"enumerate"``
    allows ``"clt-fixed"`` only.
    """
    if likelihood not in LIKELIHOODS:
        raise ValueError(f"likelihood must be one of {list(LIKELIHOODS)} (got {likelihood!r})")
    if features not in FEATURES:
        raise ValueError(f"features must be one of {list(FEATURES)} (got {features!r})")
    dom = release.domain
    enumerated = (feature_method(dom) if features is None else features) == "enumerate"
    if features == "enumerate" and feature_method(dom) != "enumerate":
        raise ValueError(
            f"features='enumerate' sums over the product domain, which has {dom.n_cells} cells "
            "here (too many): leave features=None"
        )
    if likelihood != "auto":
        if likelihood != "clt-fixed" and not enumerated:
            raise ValueError(
                f"likelihood={likelihood!r} sums over the product domain, which has "
                f"{dom.n_cells} cells here or is not enumerated (features={features!r}): use "
                "'clt-fixed' (or 'auto')"
            )
        return likelihood
    import math

    if not enumerated:
        return "clt-fixed"
    count = math.comb(release.n + dom.n_cells - 1, dom.n_cells - 1)
    if count <= _EXACT_AUTO_LIMIT:
        return "exact"
    return "clt" if dom.n_cells * dom.n_params**2 <= _FULL_CLT_AUTO_LIMIT else "clt-fixed"


def _positive(name: str, value: Any) -> float:
    if not (isinstance(value, int | float) and np.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0 (got {value!r})")
    return float(value)


def prior_sigmas(
    release: Any, prior_sigma: float = 2.0, interaction_sigma: float | None = None
) -> np.ndarray:
    """The prior sd of each log-linear parameter, checked: the one place that validates them.

    Parameters
    ----------
    release
        A :class:`~pymc_dp.curator.marginals.MarginalRelease`.
    prior_sigma
        The prior sd of the 1-way terms (and of every term when ``interaction_sigma`` is None).
    interaction_sigma
        The prior sd of the terms of two or more columns (default ``prior_sigma``).

    Returns
    -------
    numpy.ndarray
        One sd per term, in the order of :func:`term_names`.

    Raises
    ------
    ValueError
        If either sd is not a finite number > 0 (the message names the argument).
    """
    sigma = _positive("prior_sigma", prior_sigma)
    if interaction_sigma is None:
        return np.full(release.domain.n_params, sigma)
    inter = _positive("interaction_sigma", interaction_sigma)
    return np.array([inter if len(s) > 1 else sigma for s, _ in release.domain.basis_terms])


def laplace_fit(
    release: Any,
    *,
    prior_sigma: float = 2.0,
    likelihood: str = "auto",
    features: str | None = None,
    interaction_sigma: float | None = None,
) -> LaplaceFit:
    """The Laplace fit of a release's posterior under θ ~ Normal(0, ``prior_sigma``), checked.

    ``prior_sigma`` (and ``interaction_sigma``, the prior sd of the terms of two or more
    columns, default ``prior_sigma``), then ``likelihood`` and ``features``
    (:func:`choose_likelihood`) are checked before the fit, so bad arguments fail fast; the fit
    is :func:`~pymc_dp.kernels.loglinear_laplace.marginals_laplace` on z = Uᵀ y. Shared by
    :func:`marginals_model` (its whitening map) and
    :func:`~pymc_dp.model.marginals_laplace.marginals_laplace_posterior`.
    """
    sigma = prior_sigmas(release, prior_sigma, interaction_sigma)
    choose_likelihood(release, likelihood, features)
    dom, z = projected_release(release)
    return marginals_laplace(
        dom,
        z,
        n=release.n,
        noise_variance=noise_variance(release),
        prior_sigma=float(prior_sigma) if interaction_sigma is None else sigma,
        method=features,
    )


def NoisyMarginals(
    name: str,
    *,
    release: Any,
    theta: Any,
    likelihood: str = "auto",
    covariance_at: Any = None,
    features: str | None = None,
) -> Any:
    """Add the likelihood of a noisy marginal release to the current PyMC model.

    Parameters
    ----------
    name
        The observed variable's name.
    release
        A :class:`~pymc_dp.curator.marginals.MarginalRelease`.
    theta
        The log-linear parameters, a PyMC vector of length ``release.domain.n_params`` (on the
        corner basis: :func:`term_names` labels them).
    likelihood
        ``"clt"`` (collapsed normal, any n), ``"exact"`` (sum over every histogram of the n
        records: tiny n and domains only), ``"clt-fixed"`` (the collapsed normal with its
        covariance held at ``covariance_at``: a gradient in O(C p) instead of O(C p²); the
        posterior moves by O(n^-1/2) of its sd) or ``"auto"`` (exact when at most 5000
        histograms, else ``"clt"`` up to C·p² = 10⁸, else ``"clt-fixed"``; always
        ``"clt-fixed"`` above 10⁵ cells, where the moments come from the split sums, a junction
        tree or the Bethe approximation, :func:`~pymc_dp.kernels.loglinear_moments.feature_method`).
    covariance_at
        The θ at which ``"clt-fixed"`` evaluates the covariance (default: the Laplace mode
        under a Normal(0, 2) prior, :func:`~pymc_dp.kernels.loglinear_laplace.marginals_laplace`).
    features
        How E_θ[a] and Cov_θ[a] are computed: None (the default,
        :func:`~pymc_dp.kernels.loglinear_moments.feature_method` by the domain's size),
        ``"enumerate"``, ``"split"``, ``"junction"`` or ``"bethe"``. Forcing one of the last
        three on a small domain is for checking them against the exact sums.

    Returns
    -------
    The observed variable.
    """
    kind = choose_likelihood(release, likelihood, features)
    if kind == "exact":
        dom, hist, const = exact_setup(release)

        def logp(value: Any, th: Any) -> Any:
            return marginals_exact_logp(th, dom, hist, const)

        observed = release.y
    elif kind == "clt-fixed":
        dom, z = projected_release(release)
        var = noise_variance(release)
        if covariance_at is None:
            covariance_at = marginals_laplace(
                dom, z, n=release.n, noise_variance=var, prior_sigma=2.0, method=features
            ).mode
        cov = clt_covariance(covariance_at, dom, n=release.n, noise_variance=var, method=features)

        def logp(value: Any, th: Any) -> Any:
            return marginals_clt_fixed_logp(th, dom, z, n=release.n, cov=cov, method=features)

        observed = z
    else:
        dom, z = projected_release(release)
        var = noise_variance(release)

        def logp(value: Any, th: Any) -> Any:
            # the observed value is the constant z; the Op holds it (its gradient is in θ only)
            return marginals_clt_logp(th, dom, z, n=release.n, noise_variance=var)

        observed = z
    return pm.CustomDist(name, theta, logp=logp, observed=np.asarray(observed, dtype=float))


def marginals_model(
    release: Any,
    *,
    prior_sigma: float = 2.0,
    likelihood: str = "auto",
    whiten: bool = True,
    features: str | None = None,
    interaction_sigma: float | None = None,
) -> pm.Model:
    """A ready model: θ ~ Normal(0, ``prior_sigma``) on each log-linear parameter, and the release.

    The parameter is named ``"theta"``, with the dimension ``"term"`` (:func:`term_names`).

    Parameters
    ----------
    release
        A :class:`~pymc_dp.curator.marginals.MarginalRelease`.
    prior_sigma
        Prior standard deviation of every θ_k.
    likelihood
        As in :func:`NoisyMarginals`.
    whiten
        Sample η with θ = θ̂ + L η, where θ̂ and L Lᵀ are the mode and the Laplace covariance
        of the collapsed normal posterior
        (:func:`~pymc_dp.kernels.loglinear_laplace.marginals_laplace`). The prior of η is the
        image of θ's Normal prior, so the posterior of θ (a deterministic) is unchanged; NUTS
        then takes a few leapfrog steps per draw instead of dozens. ``False``: θ itself is the
        free variable.
    features
        As in :func:`NoisyMarginals`.
    interaction_sigma
        Prior sd of the terms of two or more columns (default ``prior_sigma``). Where the noise
        leaves the interactions weakly identified (many tables at a small ε), a Normal(0, 2) on
        each lets the posterior roam over strongly coupled joint laws; a tighter prior on the
        interactions (e.g. 0.5, dependence of census-like strength) keeps it where the data
        put it (docs/marginals.md, "15 ternary columns").

    Examples
    --------
    >>> import pymc_dp as pmdp
    >>> rel = pmdp.release_marginals({"a": [0, 1, 1], "b": [1, 1, 0]}, columns=["a", "b"],
    ...     domains={"a": [0, 1], "b": [0, 1]}, marginals=[("a", "b")], epsilon=1.0, rng=0)
    >>> sorted(marginals_model(rel, whiten=False).named_vars)
    ['theta', 'y']
    >>> sorted(marginals_model(rel).named_vars)
    ['theta', 'theta_white', 'y']
    """
    fit = laplace_fit(
        release,
        prior_sigma=prior_sigma,
        likelihood=likelihood,
        features=features,
        interaction_sigma=interaction_sigma,
    )
    sigma = prior_sigmas(release, prior_sigma, interaction_sigma)
    coords = {"term": term_names(release)}
    with pm.Model(coords=coords) as model:
        if whiten:
            chol = np.linalg.cholesky(fit.cov)
            inv_chol = np.linalg.inv(chol)
            # η = L⁻¹(θ - θ̂) with θ ~ N(0, D²), D = diag(σ): η ~ N(-L⁻¹θ̂, L⁻¹D²L⁻ᵀ), lower
            # Cholesky L⁻¹D
            # NUTS starts at the mode (η = 0), not at the prior's centre θ = 0: that lies tens of
            # posterior sd away at n = 10⁴, where warm-up builds trajectories of hundreds of
            # steps and the Bethe moments have no fixed point
            white = started(
                pm.MvNormal,
                "theta_white",
                {"mu": -inv_chol @ fit.mode, "chol": inv_chol * sigma},
                np.zeros(len(fit.mode)),
                dims="term",
            )
            theta = pm.Deterministic("theta", fit.mode + pt.dot(chol, white), dims="term")
        else:
            theta = started(pm.Normal, "theta", {"mu": 0.0, "sigma": sigma}, fit.mode, dims="term")
        NoisyMarginals(
            "y",
            release=release,
            theta=theta,
            likelihood=likelihood,
            covariance_at=fit.mode,
            features=features,
        )
    return model
