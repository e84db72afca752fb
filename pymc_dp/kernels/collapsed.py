"""The latent statistic given θ and y, when s was integrated out of the model (collapsed).

With s ~ N(m, v) on [L, U] and y | s ~ Laplace(s, b), the conditional p(s | θ, y) is proportional
to N(s; m, v) e^{-|y - s|/b}: on each side of y a normal with a shifted mean, so s | θ, y is a
mixture of two truncated normals,

    s ≤ y: N(m + v/b, v) on [L, min(y, U)],     s ≥ y: N(m - v/b, v) on [max(y, L), U],

weighted by their masses (:func:`~pymc_dp.likelihoods.collapsed.normal_laplace_logp` is the log
of their sum). With Gaussian noise N(0, τ²) instead, s | θ, y is one normal, N(μ₃, σ₃²) on
[L, U] (:func:`~pymc_dp.kernels.collapsed_gaussian.gaussian_suffstat_moments`). Drawing s this
way after an exact draw of θ | y gives exact joint draws of (θ, s).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.stats import truncnorm

from pymc_dp.kernels.collapsed_gaussian import gaussian_suffstat_moments
from pymc_dp.kernels.numeric import log_normal_mass, normal_interval

__all__ = ["collapsed_piece_log_masses", "draw_collapsed_suffstat", "draw_truncated_piece"]

_FLOOR = 1e-6  # as in pymc_dp.likelihoods.collapsed: sd floored at 1e-6·b


def collapsed_piece_log_masses(
    *,
    released: npt.ArrayLike,
    mean: npt.ArrayLike,
    var: npt.ArrayLike,
    lower: npt.ArrayLike,
    upper: npt.ArrayLike,
    scale: npt.ArrayLike,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Log weights of the two pieces (s ≤ y, s ≥ y) of p(s | θ, y), up to a common constant.

    Examples
    --------
    >>> lw, rw = collapsed_piece_log_masses(released=0.0, mean=0.0, var=1.0, lower=-10.0,
    ...                                     upper=10.0, scale=1.0)
    >>> bool(np.isclose(lw, rw))
    True
    """
    y, m, v, lo, hi, b = np.broadcast_arrays(
        *(np.asarray(a, dtype=np.float64) for a in (released, mean, var, lower, upper, scale))
    )
    v = v + (_FLOOR * b) ** 2
    sd = np.sqrt(v)
    base = v / (2 * b * b)
    left_top = np.minimum(y, hi)
    right_bottom = np.maximum(y, lo)
    with np.errstate(invalid="ignore"):
        left = (
            -(y - m) / b
            + base
            + log_normal_mass(normal_interval((lo - m - v / b) / sd, (left_top - m - v / b) / sd))
        )
        right = (
            (y - m) / b
            + base
            + log_normal_mass(
                normal_interval((right_bottom - m + v / b) / sd, (hi - m + v / b) / sd)
            )
        )
    left = np.where(y > lo, left, -np.inf)
    right = np.where(y < hi, right, -np.inf)
    return left, right


def draw_collapsed_suffstat(
    rng: np.random.Generator,
    *,
    released: npt.ArrayLike,
    mean: npt.ArrayLike,
    var: npt.ArrayLike,
    lower: npt.ArrayLike,
    upper: npt.ArrayLike,
    scale: npt.ArrayLike,
    gaussian: bool = False,
) -> npt.NDArray[np.float64]:
    """Draw s | θ, y exactly: a truncated normal, or a mixture of two (see the module docstring).

    Parameters
    ----------
    rng
        Source of randomness.
    released
        The released y.
    mean, var
        Mean and variance of the normal for s given θ (before truncation).
    lower, upper
        The valid region of s.
    scale
        The noise's scale: Laplace b = Δ/ε, or the Gaussian's σ τ.
    gaussian
        Whether the noise is Gaussian (the Gaussian mechanism) rather than Laplace.

    Returns
    -------
    numpy.ndarray
        Draws of s, the broadcast shape of the arguments.

    Examples
    --------
    >>> s = draw_collapsed_suffstat(np.random.default_rng(0), released=np.full(20000, 3.0),
    ...                             mean=0.0, var=1.0, lower=-50.0, upper=50.0, scale=1.0)
    >>> round(float(s.mean()), 1)   # N(0, 1) · e^{-|3 - s|}: pulled towards y by about 1
    1.0
    >>> s = draw_collapsed_suffstat(np.random.default_rng(0), released=np.full(20000, 3.0),
    ...                             mean=0.0, var=1.0, lower=-50.0, upper=50.0, scale=1.0,
    ...                             gaussian=True)
    >>> round(float(s.mean()), 1), round(float(s.var()), 1)   # N(1.5, 0.5)
    (1.5, 0.5)
    """
    if gaussian:
        loc, sd = gaussian_suffstat_moments(released=released, mean=mean, var=var, scale=scale)
        lo, hi = np.broadcast_arrays(
            *(np.asarray(a, dtype=np.float64) for a in (lower, upper)), loc
        )[:2]
        return draw_truncated_piece(rng, loc, sd, lo, hi)
    y, m, v, lo, hi, b = np.broadcast_arrays(
        *(np.asarray(a, dtype=np.float64) for a in (released, mean, var, lower, upper, scale))
    )
    left, right = collapsed_piece_log_masses(released=y, mean=m, var=v, lower=lo, upper=hi, scale=b)
    top = np.maximum(left, right)
    p_left = np.exp(left - top) / (np.exp(left - top) + np.exp(right - top))
    take_left = rng.uniform(size=y.shape) < p_left
    v = v + (_FLOOR * b) ** 2
    sd = np.sqrt(v)
    loc = np.where(take_left, m + v / b, m - v / b)
    a = np.where(take_left, lo, np.maximum(y, lo))
    c = np.where(take_left, np.minimum(y, hi), hi)
    return draw_truncated_piece(rng, loc, sd, a, c)


def draw_truncated_piece(
    rng: np.random.Generator,
    loc: npt.NDArray[np.float64],
    sd: npt.NDArray[np.float64],
    lower: npt.NDArray[np.float64],
    upper: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """Draws of N(loc, sd²) truncated to [lower, upper], elementwise (scipy's ``truncnorm``).

    Clipped to the interval: in a far tail the inverse CDF can round just outside it.

    Examples
    --------
    >>> s = draw_truncated_piece(np.random.default_rng(0), np.zeros(3), np.ones(3),
    ...                          np.full(3, 1.0), np.full(3, 1.5))
    >>> bool(np.all((s >= 1.0) & (s <= 1.5)))
    True
    """
    s = truncnorm.rvs((lower - loc) / sd, (upper - loc) / sd, loc=loc, scale=sd, random_state=rng)
    return np.clip(np.asarray(s, dtype=np.float64), lower, upper)
