"""The CLT moments of a release's statistic for a batch of θ, compiled once per setting.

The batched engine, the collapsed and pair samplers and :func:`~pymc_dp.sample_latent` all take
(mean, cov) of s (or of the stacked (ŝ, s) of a window) from here, and the statistic of all
records of a window given ŝ (:func:`conditional_all_records`), which the joint CLT gives.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import numpy.typing as npt
import pytensor
import pytensor.tensor as pt
from pytensor.graph.replace import vectorize_graph
from scipy.stats import truncnorm

from pymc_dp.families import ExponentialFamily, TruncatedFamily

__all__ = ["batched_moments", "conditional_all_records", "statistic_of_all_records"]


@functools.cache
def batched_moments(family: ExponentialFamily, n: int, bounds: tuple[float, float] | None) -> Any:
    """Compile, once per setting, θ of shape (batch, ...) → CLT (mean, cov), batched.

    The moments are those of s, or of the stacked (ŝ, s) for a windowed family.
    """
    core = family.prior_example().type()
    if bounds is None:
        mu, sigma = family.moments(core)
        mean, cov = n * mu, n * sigma
    else:
        mean, cov = family.joint_clt(core, n, bounds)
    batched = pt.tensor(dtype="float64", shape=(None, *core.type.shape))
    mean, cov = vectorize_graph([mean, cov], replace={core: batched})
    m = batched.shape[0]
    fn = pytensor.function([batched], [mean.reshape((m, -1)), cov.reshape((m, mean.size // m, -1))])
    return fn


def statistic_of_all_records(
    rng: np.random.Generator,
    family: TruncatedFamily,
    n: int,
    bounds: Any,
    theta: npt.NDArray,
    s_hat: npt.NDArray,
) -> npt.NDArray:
    """S | ŝ, θ of a window with one statistic, from the joint CLT of (ŝ, s) at each θ."""
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
    *,
    max_rounds: int = 100,
) -> npt.NDArray:
    """Draw s, the statistic of all records, from the joint CLT of (ŝ, s) conditioned on ŝ.

    The draw is restricted to s's valid region: exactly (a truncated normal) for one
    statistic, by rejection for (Σz, Σz²) (its box, and n·Σz² ≥ (Σz)²), which the CLT normal
    passes almost surely wherever it is trusted.

    Parameters
    ----------
    rng
        Source of randomness.
    family
        The windowed family.
    n
        Number of records.
    mean, cov
        Joint CLT mean ``(..., 2k)`` and covariance ``(..., 2k, 2k)`` of the stacked (ŝ, s).
    s_hat
        The window statistic ŝ: ``(...)`` for one statistic, ``(..., 2)`` for (Σz, Σz²).
    max_rounds
        Rounds of rejection before giving up (the pair).

    Returns
    -------
    numpy.ndarray
        s, shaped like ``s_hat``.

    Raises
    ------
    RuntimeError
        If some pair stays outside the valid region: the CLT puts almost no mass there, so the
        release is too small for it.
    """
    if family.stat_size == 1:
        c11 = np.maximum(cov[..., 0, 0], 1e-300)
        cond_mean = mean[..., 1] + cov[..., 0, 1] / c11 * (s_hat - mean[..., 0])
        cond_sd = np.sqrt(np.maximum(cov[..., 1, 1] - cov[..., 0, 1] ** 2 / c11, 1e-300))
        lower, upper = (float(v[0]) for v in family.valid_region(n))
        a, b = (lower - cond_mean) / cond_sd, (upper - cond_mean) / cond_sd
        s = truncnorm.rvs(a, b, loc=cond_mean, scale=cond_sd, random_state=rng)
        return np.clip(np.asarray(s, dtype=np.float64), lower, upper)
    c11, c21, c22 = cov[..., :2, :2], cov[..., 2:, :2], cov[..., 2:, 2:]
    gain = np.linalg.solve(c11, np.swapaxes(c21, -1, -2))  # C11⁻¹ C12
    cond_mean = mean[..., 2:] + np.einsum("...ji,...j->...i", gain, s_hat - mean[..., :2])
    cond_cov = c22 - np.swapaxes(gain, -1, -2) @ np.swapaxes(c21, -1, -2)
    cond_cov = 0.5 * (cond_cov + np.swapaxes(cond_cov, -1, -2))
    values, vectors = np.linalg.eigh(cond_cov)
    root = vectors * np.sqrt(np.maximum(values, 0.0))[..., None, :]
    lower, upper = (np.asarray(v, dtype=np.float64) for v in family.valid_region(n))
    s = np.empty_like(cond_mean)
    todo = np.ones(cond_mean.shape[:-1], dtype=bool)
    for _ in range(max_rounds):
        z = rng.standard_normal(cond_mean[todo].shape)
        draw = cond_mean[todo] + np.einsum("...ij,...j->...i", root[todo], z)
        valid = np.all((draw >= lower) & (draw <= upper), axis=-1) & (
            n * draw[..., 1] >= draw[..., 0] ** 2
        )
        where = np.argwhere(todo)[valid]
        s[tuple(where.T)] = draw[valid]
        todo[tuple(where.T)] = False
        if not todo.any():
            return s
    raise RuntimeError(
        "the statistic of all records fell outside its valid region in every draw: the CLT "
        f"puts almost no mass there, so n = {n} is too small for it"
    )
