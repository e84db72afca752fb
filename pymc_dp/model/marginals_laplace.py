"""The Laplace approximation of a noisy-marginals posterior as a posterior sample (no MCMC).

The fast path of NAPSU-MQ (Räisä et al. 2023): the posterior of the log-linear parameters θ is
replaced by the normal N(θ̂, (I(θ̂) + I/σ²)⁻¹) at the mode θ̂ of the collapsed normal posterior,
with I the Fisher information of the noisy tables
(:func:`~pymc_dp.kernels.loglinear_laplace.marginals_laplace`), and independent draws of it stand
in for ``pm.sample``. At n = 10⁴ records the posterior is close to normal and the draws cost
nothing beyond the fit; how close is measured against NUTS in ``docs/marginals.md``
(``benchmarks/marginals_laplace_accuracy.py``). It is also the way to fit a domain whose moments
come from the Bethe approximation when NUTS is too slow (15 ternary columns with all 2-way
tables: the fit takes seconds).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from pymc_dp._validation import check_rng
from pymc_dp.kernels.loglinear_bethe import BetheDidNotConverge
from pymc_dp.kernels.loglinear_moments import (
    clt_covariance,
    clt_fixed_logp,
    feature_moments,
    fixed_law_method,
)
from pymc_dp.likelihoods.marginals import noise_variance, projected_release
from pymc_dp.model.nodes.marginals import laplace_fit, prior_sigmas, term_names

__all__ = ["marginals_laplace_posterior"]

_CHECK_DRAWS = 200
"""Draws on which the approximation is checked against the posterior density."""
_WARN_SPREAD = 3.0
"""Spread of the log density ratio above which the approximation is called poor."""


def marginals_laplace_posterior(
    release: Any,
    *,
    draws: int = 1000,
    chains: int = 1,
    prior_sigma: float = 2.0,
    interaction_sigma: float | None = None,
    features: str | None = None,
    rng: Any = None,
) -> Any:
    """Independent draws of θ from the Laplace approximation of its noise-aware posterior.

    Parameters
    ----------
    release
        A :class:`~pymc_dp.curator.marginals.MarginalRelease`.
    draws, chains
        The draws are stored as ``chains`` × ``draws`` (all independent), so the result reads
        like a fit of :func:`~pymc_dp.model.nodes.marginals.marginals_model` by ``pm.sample``.
    prior_sigma
        Prior standard deviation of every θ_k (θ ~ Normal(0, σ)), as in ``marginals_model``.
    interaction_sigma
        Prior standard deviation of the terms of two or more columns (default ``prior_sigma``),
        as in :func:`~pymc_dp.model.nodes.marginals.marginals_model`: the approximation and its
        check are of the posterior under that prior.
    features
        How the features' moments are computed, as in
        :func:`~pymc_dp.model.nodes.marginals.NoisyMarginals`.
    rng
        Seed or generator.

    Returns
    -------
    InferenceData or DataTree
        A ``posterior`` group with ``theta`` (dims ``chain``, ``draw``, ``term``, labelled by
        :func:`~pymc_dp.model.nodes.marginals.term_names`), and the attributes
        ``pymc_dp_method`` (``"laplace"``), ``pymc_dp_features`` (the moments' method) and
        ``pymc_dp_log_ratio_sd``: the sd of log p(θ | y) - log q(θ) over 200 of the draws
        (the collapsed normal posterior with its covariance at the mode against the
        approximation q; 0 if q were exact, infinite where Bethe has no fixed point). Above 3 a
        UserWarning says to use NUTS instead (measured: 0.2, 0.6 and 1.5 for all 2-way tables of
        5 binary, 5 ternary and 10 binary columns at n = 10⁴, ε = 1; 16 to 43 for 10 ternary
        and 15 binary columns; ``docs/marginals.md``).
        :func:`~pymc_dp.model.synthetic.synthetic_datasets` reads it like a NUTS posterior.

    Raises
    ------
    RuntimeError
        If the optimiser did not converge (the mode, hence the approximation, is not trusted).

    Examples
    --------
    >>> import pymc_dp as pmdp
    >>> rel = pmdp.release_marginals({"a": [0, 1, 1] * 50, "b": [1, 1, 0] * 50},
    ...     columns=["a", "b"], domains={"a": [0, 1], "b": [0, 1]}, marginals=[("a", "b")],
    ...     epsilon=1.0, rng=0)
    >>> post = marginals_laplace_posterior(rel, draws=200, rng=1)
    >>> post.posterior["theta"].shape
    (1, 200, 3)
    """
    for name, value in (("draws", draws), ("chains", chains)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise ValueError(f"{name} must be a positive integer (got {value!r})")
    rng = check_rng(rng)
    # "clt-fixed": any features allowed (the check is of ``features`` alone)
    fit = laplace_fit(
        release,
        prior_sigma=prior_sigma,
        likelihood="clt-fixed",
        features=features,
        interaction_sigma=interaction_sigma,
    )
    sigma = prior_sigmas(release, prior_sigma, interaction_sigma)
    dom = release.domain
    method = fixed_law_method(dom) if features is None else features
    if not fit.converged:
        raise RuntimeError(
            "the optimiser did not find the posterior mode (L-BFGS did not converge): the "
            "Laplace approximation is not defined; fit marginals_model with pm.sample instead"
        )
    chol = np.linalg.cholesky(fit.cov)
    white = rng.standard_normal((int(chains), int(draws), dom.n_params))
    theta = fit.mode + white @ chol.T
    spread = _log_ratio_sd(
        theta.reshape(-1, dom.n_params)[:_CHECK_DRAWS],
        white.reshape(-1, dom.n_params)[:_CHECK_DRAWS],
        release,
        method,
        fit.mode,
        sigma,
    )
    if spread > _WARN_SPREAD:
        warnings.warn(
            f"the Laplace approximation is far from the posterior here: log p(θ | y) - "
            f"log q(θ) has sd {spread:.3g} over its draws (0 if exact): the posterior is not "
            "close to normal (a weakly identified θ: much noise, few records or rare cells); "
            "fit marginals_model with pm.sample instead",
            UserWarning,
            stacklevel=2,
        )
    return _posterior(
        theta,
        term_names(release),
        {
            "pymc_dp_method": "laplace",
            "pymc_dp_features": method,
            "pymc_dp_log_ratio_sd": spread,
        },
    )


def _log_ratio_sd(
    theta: np.ndarray,
    white: np.ndarray,
    release: Any,
    method: str,
    mode: np.ndarray,
    prior_sigma: np.ndarray,
) -> float:
    """The sd of log p(θ | y) - log q(θ) over draws of q, the Laplace normal (0 if exact).

    The target is the collapsed normal posterior with its covariance held at the mode (the law
    NUTS samples above 10⁵ cells); a point where the Bethe moments have no fixed point has
    density 0 there, which makes the spread infinite. ``prior_sigma`` holds the prior sd of
    each θ_k.
    """
    dom, z = projected_release(release)
    engine = feature_moments(dom, method)
    sigma = clt_covariance(mode, dom, engine, n=release.n, noise_variance=noise_variance(release))
    chol = np.linalg.cholesky(sigma)
    ratios = []
    for t, w in zip(theta, white, strict=True):
        try:
            logp = clt_fixed_logp(t, dom, engine, z, n=release.n, chol=chol)
        except BetheDidNotConverge:
            return math.inf
        ratios.append(logp - 0.5 * np.sum((t / prior_sigma) ** 2) + 0.5 * w @ w)
    return float(np.std(ratios))


def _posterior(theta: np.ndarray, terms: list[str], attrs: dict) -> Any:
    """A posterior group under ArviZ 0.x (InferenceData) or 1.x (DataTree)."""
    import arviz as az
    import xarray as xr

    chains, draws, _ = theta.shape
    ds = xr.Dataset(
        {"theta": (("chain", "draw", "term"), theta)},
        coords={"chain": np.arange(chains), "draw": np.arange(draws), "term": terms},
        attrs=attrs,
    )
    if hasattr(az, "plot_trace_dist"):  # ArviZ 1.x
        return xr.DataTree.from_dict({"posterior": ds})
    return az.InferenceData(posterior=ds)
