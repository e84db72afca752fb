"""When the CLT of K released counts can be trusted: its KS distance, computed per release.

The CLT of Categorical counts (``likelihood="clt"``) keeps the counts s latent as the normal
N(n p, n (diag p − p pᵀ)) and adds the release's noise. Each released count y_j then has the law
of a normal N(n p_j, n p_j (1 − p_j)) plus noise, where its exact law is Binomial(n, p_j) plus
noise. :func:`counts_clt_ks` computes the Kolmogorov distance between the two laws of each y_j
(the largest over the K counts, as :func:`~pymc_dp.likelihoods.window_trust.clt_ks` takes the
larger over a pair's components) at p = y / Σy, the public estimate that
:func:`~pymc_dp.likelihoods.choice.clt_trust` reads too, and :func:`counts_clt_trust` trusts the
CLT where that distance is at most :data:`~pymc_dp.likelihoods.window_trust.WINDOW_KS_LEVEL`
(0.01), the level of every other rule.

Why compute the distance rather than use the formula of
:func:`~pymc_dp.likelihoods.choice.clt_trust` (m·(1 + r)² ≥ 50 and r ≥ 0.1): that formula is
the region where KS ≤ 0.01 on a coarse grid of m and r (1, 3, 10, 30, …; 0, 0.1, 0.3, 1, …), so
between grid points it is conservative. At the 50 groups of ``benchmarks/grouped_speed.py``
(ε = 1, 50–500 records, K = 3) the formula rejects 9 groups whose computed distances are
0.0069–0.0088, and a grouped model took the exact sum in all of them for no change in the answer.
``benchmarks/categorical_clt_accuracy.py`` tabulates the distance against the formula's verdict,
and what it does to one release's posterior (K = 3, flat Dirichlet prior, n = 10–200,
ε = 0.3–3, smallest p 0.1 or 0.2, on a grid of step 0.01): where KS ≤ 0.01 the CLT posterior
mean of the smallest p_j is within 0.015 exact posterior sds of the exact one, its sd within
2.2%, and the KS distance between the two posteriors at most 0.017; where KS is 0.011–0.032 the
mean moves by up to 0.06 sds and the posteriors' KS reaches 0.05. So 0.01 is where the CLT
starts to move one release's posterior by a few hundredths of its sd.

The distance is taken over 801 y points (and both sides of every integer where the noise is
narrower than sd(s)), with the exact law summed over every integer s within 12 sds of the mean
(the binomial mass outside is below 10⁻³⁰) and the CLT law in closed form (normal plus Laplace,
or normal plus normal). It costs a few ms per count and is cached per (n, p rounded to 10⁻⁴,
noise), so a set of groups pays for it once, at model build.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import numpy.typing as npt
from scipy import special, stats

from pymc_dp.likelihoods.window_trust import WINDOW_KS_LEVEL

__all__ = ["COUNTS_ALWAYS_TRUSTED", "counts_clt_ks", "counts_clt_trust"]

COUNTS_ALWAYS_TRUSTED = 1000.0
"""From this smallest expected count the CLT is trusted without computing (KS < 0.004 at any
noise, ``benchmarks/clt_accuracy.py``)."""

_Y_POINTS = 801
_SPAN = 12.0
_CLOSED_FORM_RATIO = 10.0


def _noise_cdf(d: np.ndarray, scale: float, gaussian: bool) -> np.ndarray:
    if gaussian:
        return special.ndtr(d / scale)
    tail = 0.5 * np.exp(-np.abs(d) / scale)
    return np.where(d < 0, tail, 1.0 - tail)


def _normal_noise_cdf(z: np.ndarray, sd: float, scale: float, gaussian: bool) -> np.ndarray:
    """CDF at z of N(0, sd²) plus the noise, in closed form."""
    if gaussian:
        return special.ndtr(z / math.hypot(sd, scale))
    # Φ(z/σ) − ½ e^{−z/b + σ²/2b²} Φ(z/σ − σ/b) + ½ e^{z/b + σ²/2b²} Φ(−z/σ − σ/b), each
    # product in log space (its exponent is at most −z²/2σ² + O(1) wherever Φ is small).
    half = 0.5 * (sd / scale) ** 2
    down = np.exp(-z / scale + half + special.log_ndtr(z / sd - sd / scale))
    up = np.exp(z / scale + half + special.log_ndtr(-z / sd - sd / scale))
    return special.ndtr(z / sd) - 0.5 * down + 0.5 * up


@functools.lru_cache(maxsize=4096)
def _component_ks(n: int, p: float, scale: float, gaussian: bool) -> float:
    """KS distance between Binomial(n, p) + noise and N(np, np(1 − p)) + noise."""
    mean, sd = n * p, math.sqrt(n * p * (1.0 - p))
    if sd == 0.0:
        return 0.0
    s = np.arange(max(0, math.floor(mean - _SPAN * sd)), min(n, math.ceil(mean + _SPAN * sd)) + 1)
    pmf = stats.binom.pmf(s, n, p)
    reach = _SPAN * sd + 20.0 * scale
    y = np.linspace(mean - reach, mean + reach, _Y_POINTS)
    if scale < sd:  # little noise: the exact CDF keeps steps at the integers
        y = np.concatenate([y, s - 1e-9, s + 1e-9])
    exact = _noise_cdf(y[:, None] - s[None, :], scale, gaussian) @ pmf
    if gaussian or sd / scale <= _CLOSED_FORM_RATIO:
        clt = _normal_noise_cdf(y - mean, sd, scale, gaussian)
    else:  # e^{σ²/2b²} would overflow: the normal on quarter-integer cells instead
        grid = np.linspace(mean - _SPAN * sd, mean + _SPAN * sd, 4 * int(2 * _SPAN * sd) + 1)
        mass = np.diff(special.ndtr((grid - mean) / sd))
        centre = 0.5 * (grid[1:] + grid[:-1])
        clt = _noise_cdf(y[:, None] - centre[None, :], scale, gaussian) @ mass
    return float(np.max(np.abs(exact - clt)))


def counts_clt_ks(
    n: int, released: npt.ArrayLike, scale: float, *, gaussian: bool = False
) -> float:
    """The largest KS distance over the K counts between the CLT law of y_j and its exact law.

    Parameters
    ----------
    n
        Records of the release.
    released
        The K released counts y (public): p = y / Σy, each count clipped at 0.5 first.
    scale
        The noise scale (Laplace b, or the Gaussian mechanism's sd with ``gaussian=True``).
    gaussian
        Whether the noise is Gaussian.

    Returns
    -------
    float
        The supremum over y of abs(F_clt(y_j) − F_exact(y_j)), the largest over j.

    Examples
    --------
    >>> round(counts_clt_ks(60, [10.0, 30.0, 20.0], 2.0), 3)  # ε = 1: smallest count near 10
    0.008
    """
    y = np.clip(np.asarray(released, dtype=np.float64).reshape(-1), 0.5, None)
    p = np.round(y / np.sum(y), 4)
    return max(_component_ks(int(n), float(pj), float(scale), bool(gaussian)) for pj in p)


def counts_clt_trust(
    n: int, released: npt.ArrayLike, scale: float, *, gaussian: bool = False
) -> tuple[bool, str]:
    """Whether the CLT of K released counts is trusted: :func:`counts_clt_ks` ≤ 0.01.

    Returns
    -------
    (bool, str)
        Whether it is trusted, and the distance behind the answer.
    """
    y = np.clip(np.asarray(released, dtype=np.float64).reshape(-1), 0.5, None)
    m = float(n) * float(np.min(y) / np.sum(y))
    if m >= COUNTS_ALWAYS_TRUSTED:
        return True, f"smallest expected count m ≈ {m:.3g} ≥ {COUNTS_ALWAYS_TRUSTED:g}"
    ks = counts_clt_ks(n, y, scale, gaussian=gaussian)
    return ks <= WINDOW_KS_LEVEL, (
        f"KS distance of the CLT law of the counts from the exact one ≈ {ks:.3g} (trusted "
        f"≤ {WINDOW_KS_LEVEL:g}; smallest expected count m ≈ {m:.3g})"
    )
