"""Gibbs-SS with a non-normal model of the covariates, for many releases at once.

:func:`sample_x_model` is :func:`~pymc_dp.regression.sample_gibbs_ss` (Algorithm 1 of Bernstein &
Sheldon 2019: s | θ, σ², x-model from the CLT normal times the noise, restricted to PSD ``B``;
(θ, σ²) | s from the NIG posterior) with the covariates' model of
:mod:`~pymc_dp.regression.kernels.x_models`:

* ``"shape"``: (μ_x, Σ_x) | s from the NIW posterior (as Gibbs-SS-Update; exact for normal x, the
  first two moments' update otherwise), then a few random-walk Metropolis moves of the shape
  (γ, κ) targeting the CLT density of s times, when the release carries them, the likelihood of
  the noisy degree 3–4 sums of x
  (:func:`~pymc_dp.regression.kernels.x_models.moment_log_likelihood`: each sum is its
  expectation under the model, a normal sampling error, plus its Laplace noise).
  Without released moments the shape is informed only by the statistic's spread, so its
  posterior stays near its prior: the intervals average over the kurtoses the prior allows.
* ``"binary"`` (d ≤ 2): the cell probabilities π | s ~ Dirichlet(α + counts(s)).
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
from pymc_dp.regression.kernels.data_model import NIW, check_niw, draw_niw, niw_update
from pymc_dp.regression.kernels.moments import XMoments, suffstat_moments
from pymc_dp.regression.kernels.psd import project_psd
from pymc_dp.regression.kernels.suffstat import draw_regression_suffstat
from pymc_dp.regression.kernels.x_models import (
    ShapePrior,
    binary_cell_counts,
    binary_x_moments,
    moment_log_likelihood,
    shape_monomial_means,
    shape_x_moments,
)

__all__ = ["XModelTrace", "clt_logpdf", "sample_x_model"]

X_MODELS = ("shape", "binary")
_START_FLOOR = 1e-6
_JITTER = 1e-9


class XModelTrace(NamedTuple):
    """Draws of :func:`sample_x_model`, shaped ``(chain, draw, release, ...)``."""

    theta: npt.NDArray[np.float64]
    sigma2: npt.NDArray[np.float64]
    suffstat: npt.NDArray[np.float64]
    x_params: dict[str, npt.NDArray[np.float64]]
    """``x_loc``, ``x_cov``, ``skew``, ``kurt`` (shape) or ``probs`` (binary)."""
    acceptance: float
    """Mean acceptance rate of the shape moves (``nan`` for binary)."""


def clt_logpdf(
    s: npt.ArrayLike, theta: npt.ArrayLike, sigma2: npt.ArrayLike, mom: XMoments, n: int
) -> npt.NDArray[np.float64]:
    """Log N(s; nμ_t, nΣ_t) at the moments ``mom``, batched (a tiny relative jitter on Σ_t)."""
    mean, cov = suffstat_moments(theta, sigma2, mom)
    cov = n * cov
    k = cov.shape[-1]
    jitter = _JITTER * np.max(np.diagonal(cov, axis1=-2, axis2=-1), axis=-1)
    chol = np.linalg.cholesky(cov + jitter[..., None, None] * np.eye(k))
    white = np.linalg.solve(chol, (np.asarray(s) - n * mean)[..., None])[..., 0]
    logdet = np.sum(np.log(np.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)
    return -0.5 * k * np.log(2.0 * np.pi) - logdet - 0.5 * np.sum(white**2, axis=-1)


def _normal_power_moments(loc: np.ndarray, var: np.ndarray, k: int) -> np.ndarray:
    """E x^j, j = 0..k, of N(loc, var) (d = 1): m_j = μ m_{j−1} + (j − 1) σ² m_{j−2}."""
    out = [np.ones_like(loc), loc]
    for j in range(2, k + 1):
        out.append(loc * out[-1] + (j - 1) * var * out[-2])
    return np.stack(out, axis=-1)


def sample_x_model(
    rng: int | np.random.Generator,
    *,
    released: npt.ArrayLike,
    n: int,
    prior: NIG | tuple,
    x_model: str,
    scale: npt.ArrayLike,
    x_prior: NIW | tuple | None = None,
    shape_prior: ShapePrior | None = None,
    binary_prior: npt.ArrayLike | None = None,
    moments: npt.ArrayLike | None = None,
    moment_powers: npt.ArrayLike | None = None,
    moment_scale: npt.ArrayLike | None = None,
    draws: int,
    tune: int = 0,
    chains: int = 1,
    shape_moves: int = 3,
) -> XModelTrace:
    """Gibbs-SS with the ``"shape"`` or ``"binary"`` model of x, on a batch of Laplace releases.

    Parameters
    ----------
    rng
        Seed or generator.
    released
        Released z, shape ``(batch, m)``.
    n
        Number of records of every release.
    prior
        NIG prior of (θ, σ²), unbatched.
    x_model
        ``"shape"`` or ``"binary"``.
    scale
        Laplace scale Δ/ε of the statistic, scalar or ``(batch,)``.
    x_prior
        ``"shape"``: NIW prior of (μ_x, Σ_x), unbatched.
    shape_prior
        ``"shape"``: prior of (γ, κ) (default :class:`ShapePrior()`); ``ShapePrior(0, 0)``
        pins γ = 0 and κ = 1 + ..., so use it only for tests.
    binary_prior
        ``"binary"``: Dirichlet concentration over the ``2^d`` cells (default all ones).
    moments, moment_powers, moment_scale
        ``"shape"``, d = 1: released noisy sums of x³ and x⁴ ``(batch, K)``, their exponents
        ``(K, 1)`` and Laplace scale (scalar or ``(batch,)``). Omit for a release without them.
    draws, tune, chains
        Iterations kept and discarded; chains per release.
    shape_moves
        Metropolis moves of (γ, κ) per iteration.

    Returns
    -------
    XModelTrace
    """
    rng = check_rng(rng)
    z, d = check_released_batch(released)
    p = d + 1
    n = check_int(n, "n", minimum=d + 2)
    draws = check_int(draws, "draws", minimum=1)
    tune = check_int(tune, "tune", minimum=0)
    chains = check_int(chains, "chains", minimum=1)
    if x_model not in X_MODELS:
        raise ValueError(f"x_model must be one of {X_MODELS} (got {x_model!r})")
    releases = z.shape[0]
    scale = np.broadcast_to(np.asarray(scale, dtype=np.float64), (releases,))
    prior = check_nig(prior)
    if prior.mean.shape != (p,):
        raise ValueError(f"prior must be unbatched with {p} coefficients")

    def tile(a: npt.ArrayLike) -> np.ndarray:
        return chain_rows(a, chains)

    total = chains * releases
    z, scale = tile(z), tile(scale)
    prior = NIG(*(np.broadcast_to(a, (total, *np.shape(a))) for a in prior))
    theta, sigma2 = draw_nig(rng, prior)
    state: dict[str, np.ndarray] = {}
    use_moments = moments is not None
    if x_model == "shape":
        if x_prior is None:
            raise TypeError("x_model='shape' needs x_prior=NIW(...) for (μ_x, Σ_x)")
        x_prior = check_niw(x_prior)
        x_prior = NIW(*(np.broadcast_to(a, (total, *np.shape(a))) for a in x_prior))
        shape_prior = ShapePrior() if shape_prior is None else shape_prior
        loc, cov = draw_niw(rng, x_prior)
        skew, kurt = shape_prior.draw(rng, total)
        state = {"x_loc": loc, "x_cov": cov, "skew": skew, "kurt": kurt}
        if use_moments:
            if d != 1:
                raise ValueError("released moments enter the shape model for d = 1 only")
            zm = tile(moments)
            powers = np.asarray(moment_powers, dtype=np.int64)
            deg = powers[:, 0]
            bm = tile(np.broadcast_to(np.asarray(moment_scale, dtype=np.float64), (releases,)))
    else:
        if d > 2:
            raise ValueError("x_model='binary' supports d <= 2 covariates")
        alpha = np.ones(2**d) if binary_prior is None else np.asarray(binary_prior, float)
        state = {"probs": rng.dirichlet(alpha, total)}

    def x_moments(st: dict) -> XMoments:
        if x_model == "binary":
            return binary_x_moments(st["probs"])
        return shape_x_moments(st["x_loc"], st["x_cov"], st["skew"], st["kurt"])

    def shape_logp(st: dict, s: np.ndarray) -> np.ndarray:
        out = clt_logpdf(s, theta, sigma2, x_moments(st), n)
        if use_moments:
            means = shape_monomial_means(st["x_loc"], st["x_cov"], st["skew"], st["kurt"], powers)
            # Sampling variance of Σ x^k from the normal with the same mean and variance.
            pw = _normal_power_moments(st["x_loc"][:, 0], st["x_cov"][:, 0, 0], 8)
            var = n * (pw[:, 2 * deg] - pw[:, deg] ** 2)
            out = out + moment_log_likelihood(zm, n * means, var, bm[:, None])
        return out

    mom = x_moments(state)
    mean, _ = suffstat_moments(theta, sigma2, mom)
    s = pack_statistic(project_psd(unpack_statistic(n * mean, n), floor=_START_FLOOR * n))
    noise_var = 2.0 * np.ones(z.shape) * scale[:, None] ** 2
    step = np.array([0.5, 1.0])
    keep: dict[str, list] = {"theta": [], "sigma2": [], "suffstat": []}
    keep.update({k: [] for k in state})
    accepted = tried = 0
    for it in range(tune + draws):
        mean, cov = suffstat_moments(theta, sigma2, mom)
        s = draw_regression_suffstat(
            rng, clt_mean=n * mean, clt_cov=n * cov, released=z, noise_variance=noise_var,
            n=n, current=s,
        ).value  # fmt: skip
        theta, sigma2 = draw_nig(rng, nig_update(prior, statistic=s, n=n))
        if x_model == "binary":
            state["probs"] = _dirichlet(rng, alpha + binary_cell_counts(s, n, d))
        else:
            state["x_loc"], state["x_cov"] = draw_niw(rng, niw_update(x_prior, statistic=s, n=n))
            current = shape_logp(state, s)
            for _ in range(shape_moves):
                prop = dict(state)
                prop["skew"] = state["skew"] + step[0] * rng.standard_normal(total)
                excess = state["kurt"] - 1.0 - state["skew"] ** 2
                excess = excess + step[1] * rng.standard_normal(total)
                prop["kurt"] = 1.0 + prop["skew"] ** 2 + excess
                inside = (
                    (np.abs(prop["skew"]) < shape_prior.skew)
                    & (excess > 0)
                    & (excess < shape_prior.excess)
                )
                for k in ("skew", "kurt"):  # a valid shape where the proposal is not
                    prop[k] = np.where(inside, prop[k], state[k])
                new = np.where(inside, shape_logp(prop, s), -np.inf)
                log_prior = shape_prior.log_skew(prop["skew"]) - shape_prior.log_skew(state["skew"])
                ok = np.log(rng.uniform(size=total)) < new - current + log_prior
                for k in ("skew", "kurt"):
                    state[k] = np.where(ok, prop[k], state[k])
                current = np.where(ok, new, current)
                accepted += int(ok.sum())
                tried += total
        mom = x_moments(state)
        noise_var = draw_noise_variance(rng, residual=z - s, scale=scale[:, None])
        if it >= tune:
            for k, v in (("theta", theta), ("sigma2", sigma2), ("suffstat", s), *state.items()):
                keep[k].append(np.array(v))

    out = {k: by_chain(np.stack(v), chains, releases) for k, v in keep.items()}
    x_params = {k: out.pop(k) for k in list(state)}
    rate = accepted / tried if tried else float("nan")
    return XModelTrace(out["theta"], out["sigma2"], out["suffstat"], x_params, rate)


def _dirichlet(rng: np.random.Generator, alpha: np.ndarray) -> np.ndarray:
    """Batched Dirichlet draws (rows of ``alpha``)."""
    g = rng.standard_gamma(alpha)
    return g / g.sum(axis=-1, keepdims=True)
