"""Draws of the latent statistic s and the mixing variance σ² after a collapsed fit.

A collapsed :class:`~pymc_dp.NoisySuffStat` node (the default for a released scalar statistic)
integrates s and σ² out of the model, so ``pm.sample`` draws θ | y alone. Both latents have exact
conditionals given θ and y, so one draw of each per posterior draw of θ gives exact draws of
(θ, s, σ²) | y: :func:`sample_latent` adds them to the posterior, under the names the augmented
model uses (``{name}_s``, ``{name}_sigma2``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import xarray as xr
from pytensor.graph.replace import clone_replace

from pymc_dp._compat import ancestors, posterior_dataset, set_posterior
from pymc_dp._validation import check_rng
from pymc_dp.engine.moments import batched_moments, conditional_all_records
from pymc_dp.families import Categorical, TruncatedFamily
from pymc_dp.families.record_laws import continuous_window, record_law
from pymc_dp.kernels import draw_noise_variance, draw_suffstat
from pymc_dp.kernels.collapsed import draw_collapsed_suffstat
from pymc_dp.kernels.collapsed_pair import draw_pair_suffstat
from pymc_dp.kernels.exact_counts import draw_binomial_suffstat, draw_multinomial_suffstat
from pymc_dp.kernels.exact_windows import draw_window_sum, window_record_log_pmf
from pymc_dp.kernels.lattice_windows import (
    draw_lattice_window_sum,
    lattice_for,
    lattice_record_log_law,
)
from pymc_dp.likelihoods.choice import windowed_counts
from pymc_dp.mechanisms import DISCRETE_GAUSSIAN
from pymc_dp.model.noisy_suffstat import THETA_TAG, NoisySuffStatInfo, node_infos

__all__ = ["sample_latent"]


def sample_latent(idata: Any, model: pm.Model | None = None, *, random_seed: Any = None) -> Any:
    """Add exact draws of s and σ² of every collapsed node to a posterior.

    For each posterior draw of θ: ŝ | θ, y from its mixture of two truncated normals
    (:func:`~pymc_dp.kernels.collapsed.draw_collapsed_suffstat`), then, for a windowed family,
    the statistic of all records given ŝ from their joint CLT, and σ² | ŝ, y from its
    inverse-Gaussian conditional. A node with the exact likelihood (released counts) gets
    exact draws of the counts s | θ, y (:mod:`pymc_dp.kernels.exact_counts`; for a windowed
    release the window sum ŝ alone, :mod:`pymc_dp.kernels.exact_windows`, on the likelihood's
    lattice for continuous records, :mod:`pymc_dp.kernels.lattice_windows`), and σ² only if its
    noise is Laplace (integer noise has no scale mixture). A record-level node (Normal or
    LogNormal (Σz, Σz²) with ``likelihood="exact"``) has its records in the posterior already
    and is skipped.

    Parameters
    ----------
    idata
        The result of ``pm.sample`` on ``model`` (InferenceData or DataTree).
    model
        The model; defaults to the context model.
    random_seed
        Seed or generator.

    Returns
    -------
    The same object, with ``{name}_s`` (for a windowed family the stacked (ŝ, s), dimension
    ``{name}_part``) and ``{name}_sigma2`` in its posterior, for every collapsed node.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp as pmdp
    >>> rel = pmdp.release(np.r_[np.ones(30), np.zeros(70)], pm.Bernoulli, epsilon=1.0, rng=0)
    >>> with pm.Model() as model:
    ...     p = pm.Beta("p", 1, 1)
    ...     y = pmdp.NoisySuffStat("y", pm.Bernoulli.dist(p=p), release=rel)
    ...     idata = pm.sample(draws=50, tune=0, chains=1, progressbar=False, random_seed=1)
    >>> idata = pmdp.sample_latent(idata, model, random_seed=2)
    >>> sorted(idata.posterior.data_vars)
    ['p', 'y_s', 'y_sigma2']
    """
    model = pm.modelcontext(model)
    rng = check_rng(random_seed)
    posterior = posterior_dataset(idata)
    added = {}
    for info in node_infos(model):
        if not info.collapsed or info.groups or info.counted:
            # Grouped nodes, and the (window sum, window count) pair: latent draws are not
            # implemented yet.
            continue
        if info.likelihood == "exact":
            added.update(_exact_latent(rng, model, info, posterior))
            continue
        gaussian = info.noise is not None and info.noise.kind == DISCRETE_GAUSSIAN
        if getattr(info.family, "stat_size", 1) == 2:
            added.update(_pair_latent(rng, model, info, posterior, gaussian=gaussian))
            continue
        if gaussian and isinstance(info.family, Categorical):
            added.update(_gaussian_counts_latent(rng, model, info, posterior))
            continue
        y = model[info.name]
        mean, var, lower, upper, scale = y.owner.op.dist_params(y.owner)
        outputs = [mean, var, lower, upper, scale]
        family = info.family
        windowed = isinstance(family, TruncatedFamily)
        if windowed:
            theta = getattr(y.tag, THETA_TAG)
            outputs += list(family.joint_clt(theta, info.n, info.bounds))
        values = _evaluate_over_draws(model, outputs, posterior)
        chains, draws = posterior.sizes["chain"], posterior.sizes["draw"]
        m, v, lo, hi, b = (np.broadcast_to(a, (chains, draws)) for a in values[:5])
        released = np.asarray(model.rvs_to_values[y].eval(), dtype=np.float64)
        # Gaussian noise: s | θ, y is a truncated normal, and there is no mixing variance.
        s_hat = draw_collapsed_suffstat(
            rng, released=released, mean=m, var=v, lower=lo, upper=hi, scale=b, gaussian=gaussian
        )
        coords = {"chain": posterior["chain"].values, "draw": posterior["draw"].values}
        if windowed:
            s_all = conditional_all_records(rng, family, info.n, values[5], values[6], s_hat)
            s_all = np.reshape(s_all, s_hat.shape)  # a one-chain trace came back squeezed
            part = f"{info.name}_part"
            labels = [f"{p}_{stat}" for p in ("window", "all") for stat in family.stat_names]
            added[info.suffstat] = xr.DataArray(
                np.stack([s_hat, s_all], axis=-1),
                dims=("chain", "draw", part),
                coords={**coords, part: labels},
            )
        else:
            added[info.suffstat] = xr.DataArray(s_hat, dims=("chain", "draw"), coords=coords)
        if not gaussian:
            sigma2 = draw_noise_variance(rng, residual=released - s_hat, scale=b)
            added[info.noise_variance] = xr.DataArray(sigma2, dims=("chain", "draw"), coords=coords)
    return set_posterior(idata, added)


def _gaussian_counts_latent(
    rng: np.random.Generator, model: pm.Model, info: NoisySuffStatInfo, posterior: Any
) -> dict[str, xr.DataArray]:
    """Draws of Categorical counts s | θ, y of a Gaussian-mechanism node, on the simplex.

    NormProduct(nμ, nΣ, y, τ² I) restricted to s ≥ 0, Σ s = n, by the constrained-normal
    kernel that the Laplace counts use (exact unless its bounded fallback runs).
    """
    y = model[info.name]
    (theta,) = _evaluate_over_draws(model, [getattr(y.tag, THETA_TAG)], posterior)
    released = np.asarray(model.rvs_to_values[y].eval(), dtype=np.float64)
    k, n = theta.shape[-1], float(info.n)
    p = theta.reshape(-1, k)
    mean = n * p
    cov = n * (p[:, :, None] * np.eye(k) - p[:, :, None] * p[:, None, :])
    start = np.clip(mean, 1e-3 * n, None)
    start *= n / start.sum(axis=-1, keepdims=True)
    lower, upper = info.family.valid_region(info.n)
    s = draw_suffstat(
        rng,
        clt_mean=mean,
        clt_cov=cov,
        released=np.broadcast_to(released, mean.shape),
        noise_variance=np.full(mean.shape, info.noise.scale**2),
        lower=lower,
        upper=upper,
        current=start,
        total=np.full(mean.shape[0], n),
    ).value
    stat_dim = f"{info.name}_category"
    coords = {"chain": posterior["chain"].values, "draw": posterior["draw"].values}
    if stat_dim in model.coords:
        coords[stat_dim] = list(model.coords[stat_dim])
    return {
        info.suffstat: xr.DataArray(
            s.reshape(theta.shape), dims=("chain", "draw", stat_dim), coords=coords
        )
    }


def _exact_latent(
    rng: np.random.Generator, model: pm.Model, info: NoisySuffStatInfo, posterior: Any
) -> dict[str, xr.DataArray]:
    """Exact draws of the counts s | θ, y (and σ² | s, y for Laplace noise) of an exact node."""
    y = model[info.name]
    (theta,) = _evaluate_over_draws(model, [getattr(y.tag, THETA_TAG)], posterior)
    released = np.asarray(model.rvs_to_values[y].eval(), dtype=np.float64)
    coords = {"chain": posterior["chain"].values, "draw": posterior["draw"].values}
    dims: tuple[str, ...] = ("chain", "draw")
    if continuous_window(info.family):
        # ŝ on the likelihood's lattice (its rounding of the records, without bias).
        window = info.family.latent_window(info.bounds)
        lattice = lattice_for(window, n=info.n, noise_scale=info.noise.scale)
        log_q = lattice_record_log_law(record_law(info.family, theta), window, lattice)
        s = draw_lattice_window_sum(rng, log_q, lattice, info.n, released, info.noise)
    elif windowed_counts(info.family):
        # ŝ, the window sum (the statistic of all records is not a function of it).
        lo, hi = info.family.latent_window(info.bounds)
        log_q = window_record_log_pmf(info.family.record_distribution(theta), (lo, hi))
        s = draw_window_sum(rng, log_q, info.n, released, info.noise)
    elif isinstance(info.family, Categorical):
        s = draw_multinomial_suffstat(
            rng, released=released, theta=theta, n=info.n, noise=info.noise
        )
        stat_dim = f"{info.name}_category"
        dims += (stat_dim,)
        if stat_dim in model.coords:
            coords[stat_dim] = list(model.coords[stat_dim])
    else:
        total = info.n * info.family.trials
        s = draw_binomial_suffstat(
            rng, released=released, theta=theta, total=total, noise=info.noise
        )
    added = {info.suffstat: xr.DataArray(s, dims=dims, coords=coords)}
    if info.noise.kind == "laplace":
        # The Laplace scale mixture has no counterpart for integer noise laws.
        sigma2 = draw_noise_variance(rng, residual=released - s, scale=info.noise.scale)
        added[info.noise_variance] = xr.DataArray(sigma2, dims=dims, coords=coords)
    return added


def _pair_latent(
    rng: np.random.Generator,
    model: pm.Model,
    info: NoisySuffStatInfo,
    posterior: Any,
    *,
    gaussian: bool = False,
) -> dict[str, xr.DataArray]:
    """Exact draws of (ŝ, s) and σ² of a collapsed pair node (windowed (Σz, Σz²)).

    With Gaussian noise ŝ | θ, y is the bivariate normal product and there is no σ².
    """
    y = model[info.name]
    family = info.family
    (theta,) = _evaluate_over_draws(model, [getattr(y.tag, THETA_TAG)], posterior)
    mean, cov = batched_moments(family, info.n, info.bounds)(theta.reshape(-1, 2))
    mean = mean.reshape(*theta.shape[:-1], 4)
    cov = cov.reshape(*theta.shape[:-1], 4, 4)
    released = np.asarray(model.rvs_to_values[y].eval(), dtype=np.float64)
    scale = info.noise.scale if gaussian else info.sensitivity / info.epsilon
    s_hat = draw_pair_suffstat(
        rng,
        released=released,
        mean=mean[..., :2],
        cov=cov[..., :2, :2],
        scale=scale,
        gaussian=gaussian,
    )
    s_all = conditional_all_records(rng, family, info.n, mean, cov, s_hat)
    coords = {"chain": posterior["chain"].values, "draw": posterior["draw"].values}
    part = f"{info.name}_part"
    stat = f"{info.name}_stat"
    labels = [f"{p}_{name}" for p in ("window", "all") for name in family.stat_names]
    added = {
        info.suffstat: xr.DataArray(
            np.concatenate([s_hat, s_all], axis=-1),
            dims=("chain", "draw", part),
            coords={**coords, part: labels},
        )
    }
    if not gaussian:
        sigma2 = draw_noise_variance(rng, residual=released - s_hat, scale=scale)
        added[info.noise_variance] = xr.DataArray(
            sigma2,
            dims=("chain", "draw", stat),
            coords={**coords, stat: list(family.stat_names)},
        )
    return added


def _evaluate_over_draws(model: pm.Model, outputs: list, posterior: Any) -> list[np.ndarray]:
    """Evaluate model expressions at every posterior draw; arrays shaped ``(chain, draw, ...)``."""
    free = [rv for rv in model.free_RVs if rv in set(ancestors(outputs))]
    inputs = [rv.type(name=rv.name) for rv in free]
    # clone_replace: graph_replace refuses a replacement (σ²) that is also an ancestor of
    # another (μ | σ²) in a Normal–Inverse-Gamma θ.
    replaced = clone_replace(outputs, replace=dict(zip(free, inputs, strict=True)))
    fn = pytensor.function(inputs, [pt.as_tensor_variable(o) for o in replaced])
    chains, draws = posterior.sizes["chain"], posterior.sizes["draw"]
    stacked = [np.asarray(posterior[rv.name].values) for rv in free]
    results = [fn(*[a[c, d] for a in stacked]) for c in range(chains) for d in range(draws)]
    return [
        np.asarray([r[i] for r in results]).reshape(chains, draws, *np.shape(results[0][i]))
        for i in range(len(outputs))
    ]
