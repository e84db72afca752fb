"""Gibbs-SS for many regression releases at once (Bernstein & Sheldon 2019, Algorithm 1).

:func:`sample_gibbs_ss` advances a whole batch of releases (calibration trials) and chains per
NumPy call, in the style of :func:`pymc_dp.engine.gibbs.sample_gibbs`. The CLT needs moments of x;
either they are given, e.g. from the private noisy moments of each release
(:func:`~pymc_dp.regression.x_moments_from_release`, Gibbs-SS-Noisy), or x gets a normal model
with a normal–inverse-Wishart prior that is updated inside the loop from the latent statistic
(:mod:`~pymc_dp.regression.kernels.data_model`, Gibbs-SS-Update). The sampler never sees raw data.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from pymc_dp._validation import check_int, check_rng
from pymc_dp.curator.regression.statistics import (
    check_released_batch,
    pack_statistic,
    unpack_statistic,
)
from pymc_dp.kernels import draw_noise_variance
from pymc_dp.regression.engine.batch_inputs import by_chain, chain_rows
from pymc_dp.regression.kernels.conjugate import NIG, check_nig, draw_nig, nig_update
from pymc_dp.regression.kernels.data_model import (
    NIW,
    check_niw,
    draw_niw,
    niw_update,
    normal_x_moments,
)
from pymc_dp.regression.kernels.moments import XMoments, check_x_moments, suffstat_moments
from pymc_dp.regression.kernels.psd import project_psd
from pymc_dp.regression.kernels.suffstat import draw_regression_suffstat

__all__ = ["RegressionTrace", "sample_gibbs_ss"]

# Smallest eigenvalue, relative to n, of the starting state's centred scatter matrix: strictly
# inside the PSD cone, as the Gibbs-sweep fallback needs.
_START_FLOOR = 1e-6


class RegressionTrace(NamedTuple):
    """Draws after tuning, each with leading axes ``(chain, draw, batch)`` as in ArviZ."""

    theta: npt.NDArray[np.float64]
    """Coefficients, intercept first, shape ``(chain, draw, batch, p)``."""
    sigma2: npt.NDArray[np.float64]
    """Regression noise variance σ², shape ``(chain, draw, batch)``."""
    suffstat: npt.NDArray[np.float64]
    """Latent statistic s, shape ``(chain, draw, batch, m)``."""
    noise_variance: npt.NDArray[np.float64] | None
    """Laplace mixing variances, shape ``(chain, draw, batch, m)``; ``None`` for Gaussian noise."""
    n_fallback: int
    """Total s updates that used the Gibbs-sweep fallback (no independent proposal valid)."""
    x_loc: npt.NDArray[np.float64] | None = None
    """Gibbs-SS-Update only: mean μ_x of the covariates' normal model, ``(chain, draw, batch,
    d)``."""
    x_cov: npt.NDArray[np.float64] | None = None
    """Gibbs-SS-Update only: covariance Σ_x, shape ``(chain, draw, batch, d, d)``."""


def _batched(value: npt.ArrayLike, core_ndim: int, releases: int, name: str) -> np.ndarray:
    """Broadcast ``value`` (core dims last) to ``(releases, *core)``."""
    arr = np.asarray(value, dtype=np.float64)
    core = arr.shape[arr.ndim - core_ndim :] if core_ndim else ()
    try:
        return np.broadcast_to(arr, (releases, *core))
    except ValueError:
        raise ValueError(
            f"{name} must broadcast to ({releases}, *{core}) (got shape {arr.shape})"
        ) from None


def sample_gibbs_ss(
    rng: int | np.random.Generator,
    *,
    released: npt.ArrayLike,
    n: int,
    scale: npt.ArrayLike | None = None,
    noise_sd: npt.ArrayLike | None = None,
    prior: NIG | tuple,
    x_moments: XMoments | None = None,
    x_prior: NIW | tuple | None = None,
    draws: int,
    tune: int = 0,
    chains: int = 1,
) -> RegressionTrace:
    """Run Gibbs-SS on a batch of regression releases with the same n and d.

    Each iteration (Algorithm 1): compute ``μ_t, Σ_t`` at (θ, σ²) (Eqs. (2)-(3),
    :func:`~pymc_dp.regression.suffstat_moments`); draw ``s ~ NormProduct(nμ_t, nΣ_t, z, diag
    σ²_noise)`` restricted to valid statistics (:mod:`pymc_dp.regression.kernels.suffstat`); draw
    ``(θ, σ²)`` from the conjugate NIG posterior given s; with ``x_prior``, draw ``(μ_x, Σ_x)``
    from the conjugate NIW posterior given s and take the next iteration's moments of x from
    ``N(μ_x, Σ_x)`` (:func:`~pymc_dp.regression.kernels.data_model.normal_x_moments`); draw every
    ``1/σ²_noise,j`` from its inverse-Gaussian conditional
    (:func:`pymc_dp.kernels.draw_noise_variance`). With Gaussian noise (``noise_sd``) the noise
    variances are τ², fixed, and that last step is skipped.

    Parameters
    ----------
    rng
        Seed or generator.
    released
        Released z, shape ``(batch, m)``.
    n
        Number of records of every release.
    scale, noise_sd
        Exactly one: the Laplace scale Δ/ε of each release's statistic, or the standard
        deviation τ of Gaussian noise (a ``"discrete-gaussian"`` release's ``scale``); scalar
        or shape ``(batch,)``.
    prior
        :class:`~pymc_dp.regression.kernels.conjugate.NIG` prior, broadcastable to the batch.
    x_moments
        Gibbs-SS with fixed moments: moments of x with the intercept, unbatched or with batch
        ``(batch,)`` (one per release).
    x_prior
        Gibbs-SS-Update: :class:`~pymc_dp.regression.kernels.data_model.NIW` prior of the
        covariates' normal model, broadcastable to the batch. Exactly one of ``x_moments`` and
        ``x_prior`` must be given.
    draws, tune
        Iterations kept and discarded.
    chains
        Independent chains per release, each started from its own prior draw.

    Returns
    -------
    RegressionTrace
        With ``x_loc`` and ``x_cov`` when ``x_prior`` is given.

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_dp.regression import release_regression, x_moments_from_release
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(0, 1, size=(500, 1)); y = 0.5 * x[:, 0] + 0.1 * rng.standard_normal(500)
    >>> rel = release_regression(x, y, x_bounds=[(0, 1)], y_bounds=(-1, 2), epsilon=2.0,
    ...                          moments_share=0.2, rng=1)
    >>> prior = NIG(np.zeros(2), np.eye(2), np.array(2.0), np.array(0.1))
    >>> tr = sample_gibbs_ss(2, released=rel.value[None], n=rel.n, scale=rel.scale, prior=prior,
    ...                      x_moments=x_moments_from_release(rel), draws=50, tune=50, chains=2)
    >>> tr.theta.shape, tr.sigma2.shape
    ((2, 50, 1, 2), (2, 50, 1))

    Gibbs-SS-Update needs no moments of x, so the whole budget can go to the statistic:

    >>> from pymc_dp.regression.kernels.data_model import NIW
    >>> rel = release_regression(x, y, x_bounds=[(0, 1)], y_bounds=(-1, 2), epsilon=2.0, rng=1)
    >>> x_prior = NIW(np.array([0.5]), np.array(1.0), np.array(5.0), np.array([[0.3]]))
    >>> tr = sample_gibbs_ss(2, released=rel.value[None], n=rel.n, scale=rel.scale, prior=prior,
    ...                      x_prior=x_prior, draws=50, tune=50, chains=2)
    >>> tr.x_loc.shape, tr.x_cov.shape
    ((2, 50, 1, 1), (2, 50, 1, 1, 1))
    """
    rng = check_rng(rng)
    z, d = check_released_batch(released)
    p = d + 1
    n = check_int(n, "n", minimum=d + 2)
    draws = check_int(draws, "draws", minimum=1)
    tune = check_int(tune, "tune", minimum=0)
    chains = check_int(chains, "chains", minimum=1)
    releases = z.shape[0]
    if (scale is None) == (noise_sd is None):
        raise TypeError("give exactly one of scale (Laplace noise) and noise_sd (Gaussian noise)")
    laplace = scale is not None
    name = "scale" if laplace else "noise_sd"
    scale = _batched(scale if laplace else noise_sd, 0, releases, name)
    if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
        raise ValueError(f"{name} must be finite and > 0")
    prior = check_nig(prior)
    if prior.mean.shape[-1] != p:
        raise ValueError(f"prior.mean must have {p} entries for d={d} (got {prior.mean.shape})")
    if (x_moments is None) == (x_prior is None):
        raise TypeError("give exactly one of x_moments (Gibbs-SS) and x_prior (Gibbs-SS-Update)")
    if x_prior is None:
        x_moments = check_x_moments(x_moments, p)
        second = _batched(x_moments.second, 2, releases, "x_moments.second")
        phi = _batched(x_moments.fourth_cov, 4, releases, "x_moments.fourth_cov")
    else:
        x_prior = check_niw(x_prior)
        if x_prior.loc.shape[-1] != d:
            raise ValueError(f"x_prior.loc must have {d} entries (got {x_prior.loc.shape})")

    # Chains are extra batch rows, chain-major, so that the output reshapes to (chain, ...).
    def tile(a: np.ndarray) -> np.ndarray:
        return chain_rows(a, chains)

    z, scale = tile(z), tile(scale)
    if x_prior is None:
        mom = XMoments(tile(second), tile(phi))
    prior = NIG(
        tile(_batched(prior.mean, 1, releases, "prior.mean")),
        tile(_batched(prior.precision, 2, releases, "prior.precision")),
        tile(_batched(prior.shape, 0, releases, "prior.shape")),
        tile(_batched(prior.scale, 0, releases, "prior.scale")),
    )

    theta, sigma2 = draw_nig(rng, prior)
    if x_prior is not None:
        x_prior = NIW(
            tile(_batched(x_prior.loc, 1, releases, "x_prior.loc")),
            tile(_batched(x_prior.kappa, 0, releases, "x_prior.kappa")),
            tile(_batched(x_prior.dof, 0, releases, "x_prior.dof")),
            tile(_batched(x_prior.scale, 2, releases, "x_prior.scale")),
        )
        x_loc, x_cov = draw_niw(rng, x_prior)
        mom = normal_x_moments(x_loc, x_cov)
    mean, _ = suffstat_moments(theta, sigma2, mom)
    b0 = project_psd(unpack_statistic(n * mean, n), floor=_START_FLOOR * n)
    s = pack_statistic(b0)
    # Laplace: start the mixing variances at their prior mean 2b²; Gaussian: τ², for good.
    noise_var = np.full(z.shape, 1.0) * ((2.0 if laplace else 1.0) * scale[:, None] ** 2)

    keep = {
        "theta": np.empty((draws, *theta.shape)),
        "sigma2": np.empty((draws, *sigma2.shape)),
        "suffstat": np.empty((draws, *s.shape)),
        "noise_variance": np.empty((draws, *z.shape)),
    }
    if x_prior is not None:
        keep["x_loc"] = np.empty((draws, *x_loc.shape))
        keep["x_cov"] = np.empty((draws, *x_cov.shape))
    n_fallback = 0
    for it in range(tune + draws):
        mean, cov = suffstat_moments(theta, sigma2, mom)
        out = draw_regression_suffstat(
            rng,
            clt_mean=n * mean,
            clt_cov=n * cov,
            released=z,
            noise_variance=noise_var,
            n=n,
            current=s,
        )
        s, n_fallback = out.value, n_fallback + out.n_fallback
        theta, sigma2 = draw_nig(rng, nig_update(prior, statistic=s, n=n))
        if x_prior is not None:
            x_loc, x_cov = draw_niw(rng, niw_update(x_prior, statistic=s, n=n))
            mom = normal_x_moments(x_loc, x_cov)
        if laplace:
            noise_var = draw_noise_variance(rng, residual=z - s, scale=scale[:, None])
        if it >= tune:
            state = [theta, sigma2, s, noise_var]
            if x_prior is not None:
                state += [x_loc, x_cov]
            for key, value in zip(keep, state, strict=True):
                keep[key][it - tune] = value

    out = {key: by_chain(a, chains, releases) for key, a in keep.items()}
    if not laplace:
        out["noise_variance"] = None
    return RegressionTrace(**out, n_fallback=n_fallback)
