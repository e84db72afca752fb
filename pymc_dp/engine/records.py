"""A record-level sampler for windowed releases of continuous records, with no CLT.

The n records are latent variables beside θ (data augmentation; Ju, Awan, Gong & Rao 2022), so
the likelihood is the noise density of the released window sum, exactly. The plain scheme —
records | θ, y, then θ | records by its conjugate update — mixes slowly where the noise
dominates: θ | records is then far narrower than θ | y, and the records follow θ only a little
per sweep (the paper's Algorithm 1 has the same trouble). So each iteration *interweaves*
(ASIS, Yu & Meng 2011) that sufficient step with an ancillary one:

1. records | θ, y: a Metropolis–Hastings sweep (:func:`~pymc_dp.kernels.records.sweep_records`);
2. sufficient: θ | records, drawn from the conjugate posterior given s = Σ t(z_i) (all records);
3. ancillary: write the records as z_i = m(θ) + c(θ)·e_i (:func:`~pymc_dp.families.record_laws.
   location_scale`; e_i's law is free of θ), hold e fixed and move θ | e, y, whose density is
   p(θ) · k(y - ŝ(m(θ) + c(θ)e)), by slice sampling on each coordinate of θ's unconstrained
   scale (log λ; μ; μ and log σ²); then map the records back.

Where the noise dominates, θ | e, y is nearly θ's prior and step 3 moves θ across the posterior
in one go; where the release pins the records, step 2 does. Every step leaves the exact
posterior of (θ, records) | y invariant.

:func:`sample_records` runs it for a batch of releases (the engine's ``likelihood="exact"`` for
Normal and LogNormal releases of (Σz, Σz²)); :class:`~pymc_dp.RecordStep` runs
:func:`interweave` inside ``pm.sample``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from pymc_dp.engine.batch import ReleaseBatch
from pymc_dp.families import Gamma, NormalKnownSigma, TruncatedFamily
from pymc_dp.families.record_laws import location_scale, standard_records
from pymc_dp.kernels.records import slice_sample, sweep_records, window_statistic

__all__ = [
    "RecordState",
    "initial_state",
    "initial_widths",
    "interweave",
    "sample_records",
]


class RecordState(NamedTuple):
    """θ (shape ``(B, *θ)``) and the latent records z (shape ``(B, n)``) of a batch."""

    theta: npt.NDArray[np.float64]
    records: npt.NDArray[np.float64]


def _to_coords(family: TruncatedFamily, theta: npt.NDArray) -> npt.NDArray[np.float64]:
    """θ on the slice sampler's unconstrained scale, shape ``(B, d)``."""
    if isinstance(family, Gamma):
        return np.log(theta)[:, None]
    if isinstance(family, NormalKnownSigma):
        return theta[:, None].astype(np.float64)
    return np.stack([theta[:, 0], np.log(theta[:, 1])], axis=-1)


def _from_coords(family: TruncatedFamily, u: npt.NDArray) -> npt.NDArray[np.float64]:
    if isinstance(family, Gamma):
        return np.exp(u[:, 0])
    if isinstance(family, NormalKnownSigma):
        return u[:, 0].copy()
    return np.stack([u[:, 0], np.exp(u[:, 1])], axis=-1)


def initial_state(
    rng: np.random.Generator,
    family: TruncatedFamily,
    params: tuple[npt.NDArray, ...],
    n: int,
) -> RecordState:
    """θ from its prior and records from their law at that θ (one row per release)."""
    theta = family.draw_conjugate(rng, params)
    loc, scale = location_scale(family, theta)
    e = standard_records(family, rng, (loc.shape[0], n))
    return RecordState(theta, loc[:, None] + scale[:, None] * e)


def interweave(
    rng: np.random.Generator,
    state: RecordState,
    *,
    family: TruncatedFamily,
    params: tuple[npt.NDArray, ...],
    released: npt.NDArray[np.float64],
    window: tuple[float, float],
    noise_scale: float,
    widths: npt.NDArray[np.float64],
    ancillary: bool = True,
) -> tuple[RecordState, dict[str, npt.NDArray]]:
    """One iteration: records sweep, sufficient θ | z, ancillary θ | e, y (see the module).

    Parameters
    ----------
    rng
        Source of randomness.
    state
        Current θ and records of a batch of ``B`` releases.
    family
        The windowed family (Exponential, Gamma, Normal or LogNormal, with σ known or not).
    params
        Conjugate prior hyperparameters, each of shape ``(B,)``.
    released
        y, shape ``(B, k)``.
    window
        (a, b) on the latent scale.
    noise_scale
        Laplace scale β.
    widths
        Slice widths on θ's unconstrained scale, shape ``(B, d)``.
    ancillary
        Whether to take step 3; without it the iteration is the plain sufficient augmentation
        (for comparison: ``benchmarks/exact_windows_ess.py``).

    Returns
    -------
    state, info
        The new state; ``info`` holds the records' acceptance, the ancillary moves per
        coordinate (``"moves"``, ``(B, d)``) and the slice sampler's density evaluations.
    """
    k = family.stat_size
    theta, records = state
    n = records.shape[1]
    loc, scale = location_scale(family, theta)
    proposals = loc[:, None] + scale[:, None] * standard_records(family, rng, records.shape)
    records, accepted = sweep_records(
        rng,
        records=records,
        proposals=proposals,
        window=window,
        k=k,
        released=released,
        noise_scale=noise_scale,
    )
    # Sufficient step: θ | records is the conjugate posterior given all records' statistic.
    powers = [records, records * records][:k]
    s_all = np.stack([p.sum(axis=1) for p in powers], axis=-1).reshape(-1, *family.stat_shape)
    theta = family.draw_conjugate(rng, family.conjugate_update(params, s_all, n))
    if not ancillary:
        return RecordState(theta, records), {
            "accepted": accepted,
            "moves": np.zeros((theta.shape[0], _to_coords(family, theta).shape[1])),
            "evaluations": np.asarray(0),
        }
    # Ancillary step: the standardised records e stay fixed while θ moves.
    loc, scale = location_scale(family, theta)
    e = (records - loc[:, None]) / scale[:, None]
    u = _to_coords(family, theta)
    before = u.copy()
    calls = 0
    for j in range(u.shape[1]):
        log_density = _ancillary_target(family, params, e, released, window, noise_scale, u, j)
        u[:, j], used = slice_sample(rng, x=u[:, j], log_density=log_density, width=widths[:, j])
        calls += used
    theta = _from_coords(family, u)
    loc, scale = location_scale(family, theta)
    records = loc[:, None] + scale[:, None] * e
    info = {"accepted": accepted, "moves": np.abs(u - before), "evaluations": np.asarray(calls)}
    return RecordState(theta, records), info


def _ancillary_target(
    family: TruncatedFamily,
    params: tuple[npt.NDArray, ...],
    e: npt.NDArray[np.float64],
    released: npt.NDArray[np.float64],
    window: tuple[float, float],
    noise_scale: float,
    u: npt.NDArray[np.float64],
    j: int,
):
    """Log p(θ | e, y) up to a constant, as a function of coordinate j of θ's scale ``u``.

    The records are z = m + c·e; the target is the prior of θ (its kernel: constants dropped),
    the Jacobian of the coordinates and the Laplace log density of y at ŝ(z).
    """
    lo, hi = window
    squares = family.stat_size == 2

    def noise(z):
        inside = (z >= lo) & (z <= hi)
        s1 = np.where(inside, z, 0.0).sum(axis=1)
        gap = np.abs(released[:, 0] - s1)
        if squares:
            gap = gap + np.abs(released[:, 1] - np.where(inside, z * z, 0.0).sum(axis=1))
        return -gap / noise_scale

    if isinstance(family, Gamma):
        shape, rate = params

        def log_density(v):  # v = log λ; records e/λ; Gamma(shape, rate) prior with Jacobian λ
            lam = np.exp(v)
            return shape * v - rate * lam + noise(e / lam[:, None])

    elif isinstance(family, NormalKnownSigma):
        mean, sd = params
        sigma = family.sigma

        def log_density(v):  # v = μ
            return -0.5 * ((v - mean) / sd) ** 2 + noise(v[:, None] + sigma * e)

    else:
        mean, kappa, alpha, beta = params
        mu, log_var = u[:, 0], u[:, 1]

        def log_density(v):
            m, lv = (v, log_var) if j == 0 else (mu, v)
            var = np.exp(lv)
            # N(μ; m, σ²/κ) · InverseGamma(σ²; α, β) · σ² (Jacobian of log σ²), constants dropped.
            prior = -0.5 * kappa * (m - mean) ** 2 / var - (alpha + 0.5) * lv - beta / var
            return prior + noise(m[:, None] + np.exp(0.5 * lv)[:, None] * e)

    def safe(v):
        out = log_density(np.asarray(v, dtype=np.float64))
        return np.where(np.isnan(out), -np.inf, out)

    return safe


def initial_widths(family: TruncatedFamily, params: tuple[npt.NDArray, ...], rows: int):
    """Slice widths ``(rows, d)`` from the prior's spread on θ's unconstrained scale.

    Tuning adapts them (:func:`sample_records`, :class:`~pymc_dp.RecordStep`).
    """
    if isinstance(family, Gamma):
        shape, _ = params
        return np.broadcast_to(2.0 / np.sqrt(shape), (rows,))[:, None].copy()
    if isinstance(family, NormalKnownSigma):
        return np.broadcast_to(2.0 * params[1], (rows,))[:, None].copy()
    _, kappa, alpha, beta = params
    sd_mu = np.sqrt(beta / (np.maximum(alpha - 1.0, 0.5) * kappa))
    sd_log = 2.0 / np.sqrt(alpha)
    return np.stack(np.broadcast_arrays(2.0 * sd_mu, sd_log), axis=-1).reshape(rows, 2).copy()


def sample_records(
    rng: np.random.Generator,
    batch: ReleaseBatch,
    *,
    draws: int,
    tune: int,
    ancillary: bool = True,
) -> tuple[npt.NDArray, npt.NDArray]:
    """Posterior draws of θ and of the window sum ŝ for a batch of releases (no CLT).

    Parameters
    ----------
    rng
        Source of randomness.
    batch
        Releases y (shape ``(B, *family.stat_shape)``) of a continuous windowed family with
        Laplace noise, their window (data scale) and conjugate priors (each ``(B,)``).
    draws, tune
        Iterations kept, and discarded first (during which the slice widths adapt to three
        times the mean ancillary move).
    ancillary
        Interweave the ancillary step (default); ``False`` runs the plain data augmentation.

    Returns
    -------
    theta, suffstat
        Shapes ``(draws, B, *θ)`` and ``(draws, B, 2k)`` (the stacked (ŝ, s)).

    Examples
    --------
    >>> from pymc_dp.families import Exponential
    >>> from pymc_dp.kernels.exact_counts import NoiseLaw
    >>> batch = ReleaseBatch(Exponential(), (np.full(2, 8.0), np.full(2, 2.0)),
    ...                      np.array([4.0, 6.0]), 20, NoiseLaw("laplace", 1.5), (0.0, 1.5))
    >>> th, s = sample_records(np.random.default_rng(0), batch, draws=50, tune=50)
    >>> th.shape, s.shape
    ((50, 2), (50, 2, 2))
    """
    family, noise_scale = batch.family, batch.noise.scale
    k = family.stat_size
    y = np.asarray(batch.released, dtype=np.float64).reshape(-1, k)
    rows = y.shape[0]
    params = tuple(np.broadcast_to(np.asarray(p, dtype=np.float64), (rows,)) for p in batch.params)
    window = family.latent_window(batch.bounds)
    state = initial_state(rng, family, params, batch.n)
    widths = initial_widths(family, params, rows)
    keep_theta = np.empty((draws, *state.theta.shape))
    keep_s = np.empty((draws, rows, 2 * k))
    for it in range(tune + draws):
        state, info = interweave(
            rng,
            state,
            family=family,
            params=params,
            released=y,
            window=window,
            noise_scale=noise_scale,
            widths=widths,
            ancillary=ancillary,
        )
        if it < tune:
            # Towards three times the typical ancillary move (an exponential average); frozen
            # after tuning, so the kept draws come from a fixed kernel.
            widths = np.clip(0.9 * widths + 0.1 * 3.0 * info["moves"], 1e-6, 1e6)
        else:
            keep_theta[it - tune] = state.theta
            t = window_statistic(state.records, window, k).sum(axis=1)
            powers = [state.records, state.records**2][:k]
            s_all = np.stack([p.sum(axis=1) for p in powers], axis=-1)
            keep_s[it - tune] = np.concatenate([t, s_all], axis=-1)
    return keep_theta, keep_s
