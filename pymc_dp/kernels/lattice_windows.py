"""Likelihood of a window sum of continuous records, on a fine lattice, with a stated error.

A windowed release of Exponential, Gamma (known shape), Normal or LogNormal (known σ) records
sums t̂(z) = z · 1[a ≤ z ≤ b] over n records (z is the record, or log x for LogNormal), and
adds Laplace noise of scale β. Its exact likelihood p(y | θ) = E[k(y - Σ t̂(z_i))] has no closed
form. Here every record's t̂ is rounded to the lattice hℤ *at random and without bias*: a value
in [jh, (j + 1)h] goes to (j + 1)h with probability (t̂ - jh)/h, else to jh. Records outside the
window (t̂ = 0) sit on the lattice already. One record's rounded statistic then has a law q on
lattice points, computed exactly from the record's CDF and first partial moment
(:func:`lattice_record_log_law`), and the rounded window sum has law q^{∗n}, which
:func:`pymc_dp.kernels.exact_windows.window_sum_log_likelihood` convolves by a tilted FFT.

**Error bound.** The rounded sum is S + D, with abs(D) ≤ nh and, given the records, D a sum of
n independent terms of mean 0 within intervals of length h. The Laplace density k satisfies
k(r - d) ≥ k(r) e^{-abs(d)/β}, so E[k(r - D)] ≥ k(r) e^{-E abs(D)/β} ≥ k(r) e^{-√n h/(2β)};
and log k is concave with slopes ±1/β, so by Hoeffding's lemma E[k(r - D)] ≤ k(r) e^{n h²/(8β²)}.
Hence, for every θ and y,

    -√n·h/(2β) ≤ log p_h(y | θ) - log p(y | θ) ≤ n·h²/(8β²)        (:func:`discretisation_bound`)

and the posterior density from p_h is within a factor e^{±(sum of both)} of the exact one.
:func:`lattice_for` picks h so that the sum is at most a tolerance (default
:data:`LATTICE_TOLERANCE`). The lower side is the worst case, reached only where y - S lies
within abs(D) of 0 (the kink of the Laplace density); measured errors are second order in h and
far smaller (``tests/test_lattice_windows.py``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy import special

from pymc_dp.kernels.exact_counts import NoiseLaw
from pymc_dp.kernels.exact_windows import draw_window_sum, window_sum_log_likelihood

__all__ = [
    "LATTICE_MIN_CELLS",
    "LATTICE_TOLERANCE",
    "Lattice",
    "RecordLaw",
    "discretisation_bound",
    "draw_lattice_window_sum",
    "lattice_for",
    "lattice_log_likelihood",
    "lattice_record_log_law",
]

LATTICE_TOLERANCE = 0.01
"""Default bound on abs(log p_h - log p) (both sides of :func:`discretisation_bound` added): the
posterior density is then within a factor e^{±0.01} of the exact one everywhere."""

LATTICE_MIN_CELLS = 64
"""At least this many lattice cells span the window, whatever the bound allows."""

_LOG_HALF = math.log(0.5)


class Lattice(NamedTuple):
    """The lattice points h·(first + m), m = 0, …, size - 1, of one record's rounded t̂."""

    step: float
    """h."""
    first: int
    """Index of the lowest point: h·first ≤ min(0, a)."""
    size: int
    """Number of points: the last, h·(first + size - 1), is ≥ max(0, b)."""

    @property
    def zero(self) -> int:
        """Position of the point 0 (records outside the window)."""
        return -self.first


class RecordLaw(NamedTuple):
    """One record's law on the latent scale, as the lattice kernels need it.

    ``kind`` is ``"gamma"`` (shape ``a``, rate ``b``; Exponential has shape 1) or ``"normal"``
    (mean ``a``, sd ``b``). ``a`` and ``b`` broadcast (a batch of θ).
    """

    kind: str
    a: npt.NDArray[np.float64]
    b: npt.NDArray[np.float64]


def discretisation_bound(n: int, step: float, noise_scale: float) -> tuple[float, float]:
    """(lower, upper): log p_h - log p lies in [-lower, upper] for every θ and y (Laplace noise).

    Examples
    --------
    >>> lo, hi = discretisation_bound(100, 0.001, 0.5)
    >>> round(lo, 6), round(hi, 9)
    (0.01, 5e-05)
    """
    return math.sqrt(n) * step / (2.0 * noise_scale), n * step**2 / (8.0 * noise_scale**2)


def lattice_for(
    window: tuple[float, float],
    *,
    n: int,
    noise_scale: float,
    tolerance: float = LATTICE_TOLERANCE,
) -> Lattice:
    """The coarsest lattice whose :func:`discretisation_bound` sums to at most ``tolerance``.

    Parameters
    ----------
    window
        (a, b) on the latent scale.
    n
        Number of records.
    noise_scale
        Laplace scale β of the release.
    tolerance
        Bound on abs(log p_h - log p).

    Returns
    -------
    Lattice

    Examples
    --------
    >>> lat = lattice_for((0.0, 1.5), n=10, noise_scale=1.5)
    >>> lat.first, lat.size
    (0, 160)
    >>> round(sum(discretisation_bound(10, lat.step, 1.5)), 6)
    0.01
    """
    a, b = (float(v) for v in window)
    if not b > a:
        raise ValueError(f"window must have a < b (got {window!r})")
    # √n h/(2β) + n h²/(8β²) ≤ tol: a quadratic in x = √n h/(2β), x + x²/2 ≤ tol.
    x = math.sqrt(1.0 + 2.0 * tolerance) - 1.0
    step = min(2.0 * noise_scale * x / math.sqrt(n), (b - a) / LATTICE_MIN_CELLS)
    first = math.floor(min(0.0, a) / step)
    last = math.ceil(max(0.0, b) / step)
    return Lattice(step, first, last - first + 1)


def _log1mexp(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """log(1 - e^x) for x ≤ 0 (-inf at 0)."""
    x = np.minimum(x, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > _LOG_HALF, np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


def _log_gamma_tails(
    shape: npt.NDArray, t: npt.NDArray
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(log P(α, t), log Q(α, t)): log regularised incomplete gammas, finite in both tails.

    Where ``gammainc``/``gammaincc`` underflow, the series
    P = t^α e^{-t}/Γ(α + 1) · Σ_k t^k/((α + 1)⋯(α + k)) and the asymptotic
    Q ≈ t^{α-1} e^{-t}/Γ(α) · (1 + (α - 1)/t + (α - 1)(α - 2)/t² + …) give the logs.
    """
    shape, t = np.broadcast_arrays(np.asarray(shape, float), np.asarray(t, float))
    out_shape = t.shape
    shape, t = np.atleast_1d(shape), np.atleast_1d(t)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        lower = np.log(special.gammainc(shape, t))
        upper = np.log(special.gammaincc(shape, t))
        bad_lo = ~np.isfinite(lower) & (t > 0)
        if np.any(bad_lo):
            a, x = shape[bad_lo], t[bad_lo]
            term, total = np.ones_like(x), np.ones_like(x)
            for k in range(1, 200):
                term = term * x / (a + k)
                total = total + term
            lower[bad_lo] = a * np.log(x) - x - special.gammaln(a + 1.0) + np.log(total)
        bad_up = ~np.isfinite(upper) & np.isfinite(t)
        if np.any(bad_up):
            a, x = shape[bad_up], t[bad_up]
            term, total = np.ones_like(x), np.ones_like(x)
            for k in range(1, 12):
                term = term * (a - k) / x
                total = total + term
            upper[bad_up] = (a - 1.0) * np.log(x) - x - special.gammaln(a) + np.log(total)
    lower = np.where(t <= 0, -np.inf, lower)
    upper = np.where(t <= 0, 0.0, np.where(np.isinf(t), -np.inf, upper))
    return lower.reshape(out_shape), upper.reshape(out_shape)


def _log_diff(log_hi: npt.NDArray, log_lo: npt.NDArray) -> npt.NDArray[np.float64]:
    """log(e^hi - e^lo) for hi ≥ lo (-inf where equal)."""
    with np.errstate(invalid="ignore"):
        return np.where(np.isneginf(log_hi), -np.inf, log_hi + _log1mexp(log_lo - log_hi))


def _cell_log_mass(law: RecordLaw, lo: npt.NDArray, hi: npt.NDArray, shift: float = 0.0):
    """Log P(lo ≤ z ≤ hi), from whichever tail keeps it accurate.

    ``shift`` adds 1 to a Gamma's shape: the size-biased law, whose masses give first moments.
    """
    if law.kind == "gamma":
        shape, rate = law.a + shift, law.b
        cdf_lo, sf_lo = _log_gamma_tails(shape, rate * lo)
        cdf_hi, sf_hi = _log_gamma_tails(shape, rate * hi)
    else:
        z_lo, z_hi = (lo - law.a) / law.b, (hi - law.a) / law.b
        cdf_lo, sf_lo = special.log_ndtr(z_lo), special.log_ndtr(-z_lo)
        cdf_hi, sf_hi = special.log_ndtr(z_hi), special.log_ndtr(-z_hi)
    upper_tail = sf_lo < _LOG_HALF
    return np.where(upper_tail, _log_diff(sf_lo, sf_hi), _log_diff(cdf_hi, cdf_lo))


def _cell_mean(law: RecordLaw, lo: npt.NDArray, hi: npt.NDArray, log_mass: npt.NDArray):
    """E[z | lo ≤ z ≤ hi] (NaN where the cell has no mass)."""
    with np.errstate(invalid="ignore", over="ignore"):
        if law.kind == "gamma":
            # z f_α(z) = (α/λ) f_{α+1}(z): the cell's first moment is a mass of the size-biased law.
            biased = _cell_log_mass(law, lo, hi, shift=1.0)
            return law.a / law.b * np.exp(biased - log_mass)
        u, v = (lo - law.a) / law.b, (hi - law.a) / law.b
        # ∫ z φ = μ·P + σ(φ(u) - φ(v)); the difference of the φ's in logs, with its sign.
        far, near = -0.5 * np.maximum(u * u, v * v), -0.5 * np.minimum(u * u, v * v)
        log_gap = _log_diff(near, far) - 0.5 * math.log(2.0 * math.pi)
        sign = np.where(np.abs(u) < np.abs(v), 1.0, -1.0)
        return law.a + law.b * sign * np.exp(log_gap - log_mass)


def _outside_log_mass(law: RecordLaw, a: float, b: float) -> npt.NDArray[np.float64]:
    """Log P(z < a or z > b)."""
    lo_mass = _cell_log_mass(law, np.full_like(law.b, -np.inf), np.full_like(law.b, a))
    hi_mass = _cell_log_mass(law, np.full_like(law.b, b), np.full_like(law.b, np.inf))
    return np.logaddexp(lo_mass, hi_mass)


def lattice_record_log_law(
    law: RecordLaw, window: tuple[float, float], lattice: Lattice
) -> npt.NDArray[np.float64]:
    """Log q: the law of one record's t̂, rounded to the lattice at random without bias.

    Parameters
    ----------
    law
        The record's law (batch shape B).
    window
        (a, b) on the latent scale.
    lattice
        From :func:`lattice_for`.

    Returns
    -------
    ndarray
        Shape ``(*B, lattice.size)``.

    Examples
    --------
    Exponential(2) records over [0, 1], ten cells: the law sums to 1 and keeps the mean
    E[t̂] = E[z; z ≤ 1].

    >>> lat = Lattice(0.1, 0, 11)
    >>> q = np.exp(lattice_record_log_law(RecordLaw("gamma", 1.0, 2.0), (0.0, 1.0), lat))
    >>> h = lat.step * np.arange(11)
    >>> round(float(q.sum()), 12), round(float(q @ h), 12), round(0.5 - 1.5 * float(np.exp(-2)), 12)
    (1.0, 0.296997075145, 0.296997075145)
    """
    a, b = (float(v) for v in window)
    law = RecordLaw(law.kind, *np.broadcast_arrays(np.asarray(law.a, float), np.asarray(law.b)))
    h = lattice.step
    first_cell = math.floor(a / h) - lattice.first
    last_cell = math.ceil(b / h) - lattice.first - 1
    cells = np.arange(first_cell, last_cell + 1)
    left = h * (lattice.first + cells)
    lo = np.maximum(left, a)
    hi = np.minimum(left + h, b)
    batch = law.a.shape
    law_c = RecordLaw(law.kind, law.a[..., None], law.b[..., None])
    log_mass = _cell_log_mass(law_c, lo, hi)
    mean = _cell_mean(law_c, lo, hi, log_mass)
    rho = np.clip(np.nan_to_num((mean - left) / h, nan=0.5), 0.0, 1.0)
    with np.errstate(divide="ignore"):
        to_left = log_mass + np.log1p(-rho)
        to_right = log_mass + np.log(rho)
    log_q = np.full((*batch, lattice.size), -np.inf)
    log_q[..., cells] = to_left
    log_q[..., cells + 1] = np.logaddexp(log_q[..., cells + 1], to_right)
    zero = lattice.zero
    log_q[..., zero] = np.logaddexp(log_q[..., zero], _outside_log_mass(law, a, b))
    return log_q


def _lattice_units(
    lattice: Lattice, n: int, released: npt.ArrayLike, noise: NoiseLaw
) -> tuple[npt.NDArray[np.float64], NoiseLaw]:
    """Y and the noise law in lattice units (the rounded sum is h·(n·first + Σ m_i))."""
    h = lattice.step
    y = (np.asarray(released, dtype=np.float64) - n * lattice.first * h) / h
    if noise.kind != "laplace":
        raise ValueError(
            f"the lattice likelihood of continuous records takes Laplace noise (got {noise.kind!r})"
        )
    return y, NoiseLaw("laplace", noise.scale / h)


def lattice_log_likelihood(
    log_q: npt.ArrayLike,
    lattice: Lattice,
    n: int,
    released: npt.ArrayLike,
    noise: NoiseLaw,
    *,
    gradient: bool = False,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64] | None]:
    """Log p_h(y | θ): the released window sum's log density with records on the lattice.

    Within :func:`discretisation_bound` of the exact log p(y | θ).

    Parameters
    ----------
    log_q
        :func:`lattice_record_log_law`, shape ``(..., lattice.size)``.
    lattice
        Its lattice.
    n
        Number of records.
    released
        y, broadcasting against the batch shape of ``log_q``.
    noise
        Laplace noise law of the release (its scale β on the statistic's scale).
    gradient
        Also return ∂ log p_h / ∂ log q (n times the law of one record's rounded t̂ given y).

    Returns
    -------
    (ndarray, ndarray or None)
    """
    y, law = _lattice_units(lattice, n, released, noise)
    log_lik, grad = window_sum_log_likelihood(log_q, n, y, law, gradient=gradient)
    return log_lik - math.log(lattice.step), grad


def draw_lattice_window_sum(
    rng: np.random.Generator,
    log_q: npt.ArrayLike,
    lattice: Lattice,
    n: int,
    released: npt.ArrayLike,
    noise: NoiseLaw,
) -> npt.NDArray[np.float64]:
    """Draws of the rounded window sum given θ and y (one per batch element)."""
    y, law = _lattice_units(lattice, n, released, noise)
    m = draw_window_sum(rng, log_q, n, y, law)
    return lattice.step * (m + n * lattice.first)
