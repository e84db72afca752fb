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

from pymc_dp.engine.batch import ReleaseBatch
from pymc_dp.engine.moments import statistic_of_all_records
from pymc_dp.families import ExponentialFamily, TruncatedFamily
from pymc_dp.kernels import GridDensity, draw_from_grid, draw_noise_variance, grid_density
from pymc_dp.kernels.collapsed import draw_collapsed_suffstat
from pymc_dp.likelihoods.collapsed import normal_laplace_logp
from pymc_dp.likelihoods.collapsed_gaussian import normal_normal_logp
from pymc_dp.likelihoods.quick_mode import QUICK_MODE

__all__ = ["collapsible", "log_posterior", "posterior_grid", "sample_collapsed"]


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
    """Compile (z (B, G), y (B,), scale (B,), *prior (B,)) -> log p(θ(z) | y) + log abs(dθ/dz).

    Compiled in ``QUICK_MODE`` (every elementwise operation a NumPy ufunc) from
    :func:`log_posterior_graph`, which takes the same arguments.
    """
    inputs, output = log_posterior_graph(family, n, bounds, clt, gaussian)
    return pytensor.function(inputs, output, mode=QUICK_MODE, on_unused_input="ignore")


def log_posterior_graph(
    family: ExponentialFamily,
    n: int,
    bounds: tuple[float, float] | None,
    clt: bool = True,
    gaussian: bool = False,
) -> tuple[list, Any]:
    """The inputs and output of :func:`log_posterior`, uncompiled.

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
    return [zs, *cols], batched


@functools.cache
def _released_moments(family: ExponentialFamily, n: int, bounds: tuple[float, float] | None):
    """Compile θ (M,) -> (mean, var) of the released statistic, and its region (floats)."""
    theta = family.prior_example().type()
    mean, var, lower, upper = family.released_clt(theta, n, bounds)
    batched = pt.dvector("theta")
    out = vectorize_graph([mean, var], replace={theta: batched})
    return pytensor.function([batched], out, mode=QUICK_MODE), lower, upper


def posterior_grid(rng: np.random.Generator, batch: ReleaseBatch) -> GridDensity:
    """The collapsed posterior of θ on its unconstrained scale, tabulated for each release.

    ``rng`` draws the prior points the grids start from; ``batch`` is as for
    :func:`sample_collapsed`. Returns the :class:`~pymc_dp.kernels.GridDensity` over z
    (logit p, log λ, or μ itself), batch shape ``(B,)``.
    """
    family, params = batch.family, batch.params
    y = np.asarray(batch.released, dtype=np.float64).reshape(-1)
    size = y.shape[0]
    fn = log_posterior(family, batch.n, batch.bounds, gaussian=batch.gaussian)
    scale = float(batch.noise.scale)
    cols = [y, np.full(size, scale), *(np.broadcast_to(p, (size,)) for p in params)]
    cols = [np.asarray(c, dtype=np.float64)[:, None] for c in cols]

    def log_density(z):
        return fn(np.asarray(z, dtype=np.float64), *cols)

    prior_draw = family.draw_conjugate(rng, tuple(np.broadcast_to(p, (size,)) for p in params))
    return grid_density(log_density, center=family.prior_transform_forward(prior_draw))


def sample_collapsed(
    rng: np.random.Generator, batch: ReleaseBatch, *, draws: int
) -> tuple[npt.NDArray, npt.NDArray, npt.NDArray]:
    """Independent draws of (θ, s, σ²) | y for a batch of scalar releases.

    Parameters
    ----------
    rng
        Source of randomness.
    batch
        The releases (shape ``(B,)``), of a family with :func:`collapsible` true, with their
        conjugate priors (each ``(B,)``). Laplace noise (discrete or not) is modelled by the
        Laplace density; Gaussian noise by the normal of its σ: the likelihood is then the
        normal product (:func:`~pymc_dp.likelihoods.collapsed_gaussian.normal_normal_logp`),
        s | θ, y a truncated normal, and σ² is τ² on every draw (no mixing variance).
    draws
        Draws per release.

    Returns
    -------
    theta, suffstat, noise_variance
        Shapes ``(draws, B)``, ``(draws, B, m)`` (m = 1, or 2 for a windowed family's stacked
        (ŝ, s)) and ``(draws, B, 1)``.
    """
    family, n, bounds = batch.family, batch.n, batch.bounds
    scale = batch.noise.scale
    y = np.asarray(batch.released, dtype=np.float64).reshape(-1)
    grid = posterior_grid(rng, batch)
    z = draw_from_grid(rng, grid, size=draws)  # (draws, B)
    theta = family.prior_transform_backward(z)
    moments, lower, upper = _released_moments(family, n, bounds)
    mean, var = (np.asarray(a).reshape(draws, y.shape[0]) for a in moments(theta.reshape(-1)))
    s_hat = draw_collapsed_suffstat(
        rng,
        released=y,
        mean=mean,
        var=var,
        lower=lower,
        upper=upper,
        scale=scale,
        gaussian=batch.gaussian,
    )
    if batch.gaussian:
        sigma2 = np.full_like(s_hat, float(scale) ** 2)
    else:
        sigma2 = draw_noise_variance(rng, residual=y - s_hat, scale=scale)
    if isinstance(family, TruncatedFamily):
        s_all = statistic_of_all_records(rng, family, n, bounds, theta, s_hat)
        suffstat = np.stack([s_hat, s_all], axis=-1)
    else:
        suffstat = s_hat[..., None]
    return theta, suffstat, sigma2[..., None]
