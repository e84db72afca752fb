"""Exact posterior draws for many scalar releases at once, with s integrated out (collapsed).

For a family whose released statistic is one number and whose θ is scalar, p(θ | y) is a
one-dimensional density known in closed form up to a constant: the conjugate prior times the
normal–Laplace convolution (:func:`~pymc_dp.likelihoods.collapsed.normal_laplace_logp`). It is
tabulated on an adaptive grid over θ's unconstrained scale (every mode kept) and drawn from
exactly, for a whole batch of releases per NumPy call; s and σ² then follow from their exact
conditionals. This is what :func:`pymc_dp.engine.gibbs.sample_gibbs` runs by default for such
families, and what :class:`~pymc_dp.GridStep` does inside ``pm.sample``.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import numpy.typing as npt
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pytensor.graph.replace import vectorize_graph

from pymc_dp.engine.moments import batched_moments
from pymc_dp.families import ExponentialFamily, TruncatedFamily
from pymc_dp.kernels import GridDensity, draw_from_grid, draw_noise_variance, grid_density
from pymc_dp.kernels.collapsed import draw_collapsed_suffstat
from pymc_dp.kernels.collapsed_gaussian import draw_gaussian_suffstat
from pymc_dp.likelihoods.collapsed import normal_laplace_logp
from pymc_dp.likelihoods.collapsed_gaussian import normal_normal_logp

__all__ = [
    "collapsible",
    "conditional_all_records",
    "log_posterior",
    "posterior_grid",
    "sample_collapsed",
    "statistic_of_all_records",
]


def collapsible(family: ExponentialFamily) -> bool:
    """Whether a family's releases are one number with a scalar θ (the collapsed engine applies).

    Examples
    --------
    >>> from pymc_dp.families import Binomial, Categorical, Normal
    >>> collapsible(Binomial(trials=5)), collapsible(Categorical(categories=3))
    (True, False)
    >>> collapsible(Normal())
    False
    """
    scalar_stat = family.stat_shape in ((), (1,))
    return (
        scalar_stat
        and all(shape == () for shape in family.prior_shapes)
        and (family.prior_transform is not NotImplemented)
    )


@functools.cache
def log_posterior(
    family: ExponentialFamily,
    n: int,
    bounds: tuple[float, float] | None,
    clt: bool = True,
    gaussian: bool = False,
):
    """Compile (z (B, G), y (B,), scale (B,), *prior (B,)) -> log p(θ(z) | y) + log |dθ/dz|.

    With ``clt=False`` the likelihood is left out: the log prior density of z alone (y and
    scale are then ignored), for samplers that add an exact likelihood in NumPy. With
    ``gaussian=True`` the noise is normal of sd ``scale`` (the normal product), not Laplace.
    """
    z = pt.dscalar("z")
    y, scale = pt.dscalar("y"), pt.dscalar("scale")
    prior = [pt.dscalar(f"prior_{i}") for i in range(len(family.prior_shapes))]
    transform = family.prior_transform
    theta = z if transform is None else transform.backward(z)
    jacobian = 0.0 if transform is None else transform.log_jac_det(z)
    prior_dist = family.conjugate_prior.dist(*prior)
    logp = pm.logp(prior_dist, theta) + jacobian
    if clt:
        mean, var, lower, upper = family.released_clt(theta, n, bounds)
        likelihood = normal_normal_logp if gaussian else normal_laplace_logp
        logp = logp + likelihood(y, mean, var, lower, upper, scale)
    zs = pt.dmatrix("zs")
    cols = [pt.tensor(v.name, dtype="float64", shape=(None, 1)) for v in (y, scale, *prior)]
    batched = vectorize_graph(
        logp, replace=dict(zip([z, y, scale, *prior], [zs, *cols], strict=True))
    )
    return pytensor.function([zs, *cols], batched, mode="FAST_COMPILE", on_unused_input="ignore")


@functools.cache
def _released_moments(family: ExponentialFamily, n: int, bounds: tuple[float, float] | None):
    """Compile θ (M,) -> (mean, var) of the released statistic, and its region (floats)."""
    theta = family.prior_example().type()
    mean, var, lower, upper = family.released_clt(theta, n, bounds)
    batched = pt.dvector("theta")
    out = vectorize_graph([mean, var], replace={theta: batched})
    return pytensor.function([batched], out, mode="FAST_COMPILE"), lower, upper


def posterior_grid(
    rng: np.random.Generator,
    *,
    family: ExponentialFamily,
    params: tuple[npt.NDArray[np.float64], ...],
    released: npt.NDArray[np.float64],
    n: int,
    scale: float,
    bounds: tuple[float, float] | None = None,
    gaussian: bool = False,
) -> GridDensity:
    """The collapsed posterior of θ on its unconstrained scale, tabulated for each release.

    Parameters are those of :func:`sample_collapsed`; ``rng`` draws the prior points the grids
    start from. Returns the :class:`~pymc_dp.kernels.GridDensity` over z (logit p, log λ, or
    μ itself), batch shape ``(B,)``.
    """
    y = np.asarray(released, dtype=np.float64).reshape(-1)
    batch = y.shape[0]
    fn = log_posterior(family, n, bounds, gaussian=gaussian)
    cols = [y, np.full(batch, float(scale)), *(np.broadcast_to(p, (batch,)) for p in params)]
    cols = [np.asarray(c, dtype=np.float64)[:, None] for c in cols]

    def log_density(z):
        return fn(np.asarray(z, dtype=np.float64), *cols)

    prior_draw = family.draw_conjugate(rng, tuple(np.broadcast_to(p, (batch,)) for p in params))
    return grid_density(log_density, center=family.prior_transform_forward(prior_draw))


def sample_collapsed(
    rng: np.random.Generator,
    *,
    family: ExponentialFamily,
    params: tuple[npt.NDArray[np.float64], ...],
    released: npt.NDArray[np.float64],
    n: int,
    scale: float,
    draws: int,
    bounds: tuple[float, float] | None = None,
    gaussian: bool = False,
) -> tuple[npt.NDArray, npt.NDArray, npt.NDArray]:
    """Independent draws of (θ, s, σ²) | y for a batch of scalar releases.

    Parameters
    ----------
    rng
        Source of randomness.
    family
        A family with :func:`collapsible` true.
    params
        Conjugate prior hyperparameters, each of shape ``(B,)``.
    released
        Released values, shape ``(B,)``.
    n, scale, bounds
        Records per release, Laplace scale Δ/ε (the Gaussian's σ if ``gaussian``), and a
        windowed family's window.
    draws
        Draws per release.
    gaussian
        Whether the releases carry Gaussian noise (Gaussian mechanism): the likelihood is then
        the normal product (:func:`~pymc_dp.likelihoods.collapsed_gaussian.normal_normal_logp`),
        s | θ, y a truncated normal, and σ² is τ² on every draw (no mixing variance).

    Returns
    -------
    theta, suffstat, noise_variance
        Shapes ``(draws, B)``, ``(draws, B, m)`` (m = 1, or 2 for a windowed family's stacked
        (ŝ, s)) and ``(draws, B, 1)``.
    """
    y = np.asarray(released, dtype=np.float64).reshape(-1)
    batch = y.shape[0]
    grid = posterior_grid(
        rng,
        family=family,
        params=params,
        released=y,
        n=n,
        scale=scale,
        bounds=bounds,
        gaussian=gaussian,
    )
    z = draw_from_grid(rng, grid, size=draws)  # (draws, B)
    theta = family.prior_transform_backward(z)
    moments, lower, upper = _released_moments(family, n, bounds)
    mean, var = (np.asarray(a).reshape(draws, batch) for a in moments(theta.reshape(-1)))
    draw = draw_gaussian_suffstat if gaussian else draw_collapsed_suffstat
    s_hat = draw(rng, released=y, mean=mean, var=var, lower=lower, upper=upper, scale=scale)
    if gaussian:
        sigma2 = np.full_like(s_hat, float(scale) ** 2)
    else:
        sigma2 = draw_noise_variance(rng, residual=y - s_hat, scale=scale)
    if isinstance(family, TruncatedFamily):
        s_all = statistic_of_all_records(rng, family, n, bounds, theta, s_hat)
        suffstat = np.stack([s_hat, s_all], axis=-1)
    else:
        suffstat = s_hat[..., None]
    return theta, suffstat, sigma2[..., None]


def statistic_of_all_records(
    rng: np.random.Generator,
    family: TruncatedFamily,
    n: int,
    bounds: Any,
    theta: npt.NDArray,
    s_hat: npt.NDArray,
) -> npt.NDArray:
    """S | ŝ, θ from the joint CLT of (ŝ, s), drawn inside s's valid region."""
    mean, cov = batched_moments(family, n, bounds)(theta.reshape(-1))
    mean, cov = mean.reshape(*theta.shape, 2), cov.reshape(*theta.shape, 2, 2)
    return conditional_all_records(rng, family, n, mean, cov, s_hat)


def conditional_all_records(
    rng: np.random.Generator,
    family: TruncatedFamily,
    n: int,
    mean: npt.NDArray,
    cov: npt.NDArray,
    s_hat: npt.NDArray,
) -> npt.NDArray:
    """Draw s (all records) from N((ŝ, s) joint CLT) conditioned on ŝ, in s's valid region."""
    from scipy.stats import truncnorm

    c11 = np.maximum(cov[..., 0, 0], 1e-300)
    cond_mean = mean[..., 1] + cov[..., 0, 1] / c11 * (s_hat - mean[..., 0])
    cond_sd = np.sqrt(np.maximum(cov[..., 1, 1] - cov[..., 0, 1] ** 2 / c11, 1e-300))
    lower, upper = (float(v[0]) for v in family.valid_region(n))
    a, b = (lower - cond_mean) / cond_sd, (upper - cond_mean) / cond_sd
    s = truncnorm.rvs(a, b, loc=cond_mean, scale=cond_sd, random_state=rng)
    return np.clip(np.asarray(s, dtype=np.float64), lower, upper)
