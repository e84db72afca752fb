"""MCMC-Ind: NUTS over the n individual records (the paper's exact-model baseline).

The records are latent variables of a PyMC model, and the released statistic is observed through
the Laplace mechanism given the records' exact statistic (Bernstein & Sheldon 2019, §4)::

    (θ, σ²) ~ NIG(μ, Λ, a, b),   (μ_x, Σ_x) ~ NIW(m, κ, ν, Ψ),
    x_i ~ N(μ_x, Σ_x),   y_i | x_i ~ N(x̃_iᵀθ, σ²)   (x̃ = (1, x)),   i = 1..n,
    z ~ Laplace(Σ_i t(x_i, y_i), Δ/ε)   componentwise.

This is the generative model of Gibbs-SS-Update (:mod:`~pymc_dp.regression.kernels.data_model`)
without the CLT approximation of ``Σ_i t(x_i, y_i)``, so MCMC-Ind is the reference it approximates.
Its cost grows with n (``n (d + 1)`` latent coordinates), which is why the paper stops it at small
n.

Bounds of the records
---------------------
The box is part of the release (it fixes Δ), not of the data model. The latent records are *not*
truncated to it, by default: a truncated normal would give each record a likelihood with a
(θ, σ², μ_x, Σ_x)-dependent normaliser that the Gibbs-SS methods do not have, so MCMC-Ind would
target a different posterior; and for the normal model of x truncation is intractable for d > 1.
Under the model, records outside the box have the small probability that the simulation studies
condition away. With ``truncate=True`` (d = 1 only) x and y are truncated normals inside the box,
the exact posterior of the model conditioned on every record being in the box.

The PyMC import is confined to this module; the kernels stay PyMC-free.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pymc_dp._validation import check_int, check_positive
from pymc_dp.curator.regression.release import RegressionRelease
from pymc_dp.curator.regression.statistics import released_pairs
from pymc_dp.mechanisms import DISCRETE_GAUSSIAN
from pymc_dp.regression.kernels.conjugate import NIG, check_nig
from pymc_dp.regression.kernels.data_model import NIW, check_niw

__all__ = ["mcmc_ind_model", "sample_mcmc_ind"]


def mcmc_ind_model(
    release: RegressionRelease,
    *,
    prior: NIG | tuple,
    x_prior: NIW | tuple,
    truncate: bool = False,
) -> pm.Model:
    """Build the MCMC-Ind PyMC model of one regression release.

    Free variables: ``sigma2`` and ``theta`` (NIG), ``x_precision_bartlett_diag`` /
    ``x_precision_bartlett_offdiag`` (the Bartlett factors of ``Σ_x⁻¹ ~ Wishart(ν, Ψ⁻¹)``),
    ``x_loc``, the latent records ``x`` (n, d) and ``y`` (n,). Deterministics: ``x_cov`` (Σ_x)
    and ``suffstat`` (the records' exact released statistic). Observed: ``z``.

    Parameters
    ----------
    release
        The :class:`~pymc_dp.regression.RegressionRelease` (only its statistic, n, bounds and
        Laplace scale are used; the moments of x are not needed).
    prior
        :class:`~pymc_dp.regression.NIG` prior of (θ, σ²), unbatched.
    x_prior
        :class:`~pymc_dp.regression.NIW` prior of the covariates' normal model, unbatched.
    truncate
        Truncate the latent records to the release's box (d = 1 only; see the module notes).

    Returns
    -------
    pymc.Model

    Raises
    ------
    TypeError
        If ``release`` is not a :class:`~pymc_dp.regression.RegressionRelease`.
    ValueError
        If a prior is batched or has the wrong dimension, or ``truncate`` is asked for d > 1.
    """
    if not isinstance(release, RegressionRelease):
        raise TypeError(f"release must be a RegressionRelease (got {type(release).__name__})")
    d, n = release.d, release.n
    p = d + 1
    prior, x_prior = check_nig(prior), check_niw(x_prior)
    if prior.batch_shape or x_prior.batch_shape:
        raise ValueError("prior and x_prior must be unbatched (one release per model)")
    if prior.mean.shape != (p,) or x_prior.loc.shape != (d,):
        raise ValueError(
            f"prior.mean must have {p} and x_prior.loc {d} entries (got {prior.mean.shape} and "
            f"{x_prior.loc.shape})"
        )
    if truncate and d != 1:
        raise ValueError(f"truncate=True needs d = 1 (got d = {d})")
    rows, cols = released_pairs(d)
    (x_lo, x_hi), (y_lo, y_hi) = release.x_bounds[0], release.y_bounds
    # Ψ = R Rᵀ, so Σ_x⁻¹ = R⁻ᵀ (A Aᵀ) R⁻¹ ~ Wishart(ν, Ψ⁻¹) for Bartlett's A (Wishart(ν, I)).
    r_inv_t = np.linalg.inv(np.linalg.cholesky(x_prior.scale)).T
    tril = np.tril_indices(d, -1)
    with pm.Model() as model:
        sigma2 = pm.InverseGamma("sigma2", alpha=float(prior.shape), beta=float(prior.scale))
        theta = pm.MvNormal(
            "theta", mu=prior.mean, tau=pt.as_tensor(prior.precision) / sigma2, shape=(p,)
        )
        bart_diag = pm.ChiSquared(
            "x_precision_bartlett_diag", nu=float(x_prior.dof) - np.arange(d), shape=(d,)
        )
        a = pt.diag(pt.sqrt(bart_diag))
        if d > 1:
            off = pm.Normal("x_precision_bartlett_offdiag", 0.0, 1.0, shape=(len(tril[0]),))
            a = pt.set_subtensor(a[tril], off)
        factor = pt.as_tensor(r_inv_t) @ a
        x_prec = factor @ factor.T
        pm.Deterministic("x_cov", pt.linalg.inv(x_prec))
        x_loc = pm.MvNormal("x_loc", mu=x_prior.loc, tau=float(x_prior.kappa) * x_prec, shape=(d,))
        if truncate:
            sd = 1.0 / pt.sqrt(x_prec[0, 0])
            x = pm.TruncatedNormal("x", mu=x_loc[0], sigma=sd, lower=x_lo, upper=x_hi, shape=(n,))[
                :, None
            ]
        else:
            x = pm.MvNormal("x", mu=x_loc, tau=x_prec, shape=(n, d))
        mean_y = theta[0] + x @ theta[1:]
        if truncate:
            y = pm.TruncatedNormal(
                "y", mu=mean_y, sigma=pt.sqrt(sigma2), lower=y_lo, upper=y_hi, shape=(n,)
            )
        else:
            y = pm.Normal("y", mu=mean_y, sigma=pt.sqrt(sigma2), shape=(n,))
        w = pt.concatenate([pt.ones((n, 1)), x, y[:, None]], axis=1)
        b_mat = w.T @ w
        s = pm.Deterministic("suffstat", b_mat[rows, cols])
        if release.mechanism == DISCRETE_GAUSSIAN:
            pm.Normal("z", mu=s, sigma=release.scale, observed=release.value)
        else:
            pm.Laplace("z", mu=s, b=release.scale, observed=release.value)
    return model


def sample_mcmc_ind(
    release: RegressionRelease,
    *,
    prior: NIG | tuple,
    x_prior: NIW | tuple,
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 2,
    truncate: bool = False,
    target_accept: float = 0.9,
    random_seed: int | None = None,
    **sample_kwargs: Any,
) -> Any:
    """Sample the MCMC-Ind posterior of one release with NUTS (``pm.sample``).

    Parameters
    ----------
    release, prior, x_prior, truncate
        As in :func:`mcmc_ind_model`.
    draws, tune, chains
        Passed to ``pm.sample``.
    target_accept
        NUTS target acceptance; the likelihood is sharp at large n·ε/Δ, so the default is
        higher than PyMC's.
    random_seed
        Seed of ``pm.sample``.
    **sample_kwargs
        Further ``pm.sample`` options (e.g. ``cores``, ``progressbar``).

    Returns
    -------
    InferenceData or DataTree
        Whatever ``pm.sample`` returns on the installed PyMC
        (:func:`pymc_dp._compat.posterior_dataset` reads the posterior of either).

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_dp.regression import NIG, NIW, release_regression
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(0.0, 0.3, size=(10, 1)); y = 0.5 * x[:, 0] + 0.1 * rng.normal(size=10)
    >>> rel = release_regression(x, y, x_bounds=[(-2, 2)], y_bounds=(-2, 2), epsilon=1.0, rng=1)
    >>> prior = NIG(np.zeros(2), np.eye(2), np.array(5.0), np.array(0.5))
    >>> x_prior = NIW(np.zeros(1), np.array(1.0), np.array(5.0), np.array([[0.3]]))
    >>> model = mcmc_ind_model(rel, prior=prior, x_prior=x_prior)
    >>> [v.name for v in model.free_RVs]
    ['sigma2', 'theta', 'x_precision_bartlett_diag', 'x_loc', 'x', 'y']
    >>> idata = sample_mcmc_ind(rel, prior=prior, x_prior=x_prior, draws=20, tune=20, chains=1,
    ...                         random_seed=2, progressbar=False)  # doctest: +SKIP
    """
    draws = check_int(draws, "draws", minimum=1)
    tune = check_int(tune, "tune", minimum=0)
    chains = check_int(chains, "chains", minimum=1)
    target_accept = check_positive(target_accept, "target_accept")
    if target_accept >= 1.0:
        raise ValueError(f"target_accept must lie in (0, 1) (got {target_accept})")
    model = mcmc_ind_model(release, prior=prior, x_prior=x_prior, truncate=truncate)
    with model:
        return pm.sample(
            draws=draws,
            tune=tune,
            chains=chains,
            target_accept=target_accept,
            random_seed=random_seed,
            **sample_kwargs,
        )
