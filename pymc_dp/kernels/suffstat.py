"""The full conditional draw of the latent statistic s | θ, σ², y (Algorithm 1, lines 4-5)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from pymc_dp.kernels.constraints import Constraint
from pymc_dp.kernels.norm_product import norm_product
from pymc_dp.kernels.truncated_normal import TruncatedDraw, draw_truncated_normal

__all__ = ["draw_suffstat"]


def draw_suffstat(
    rng: np.random.Generator,
    *,
    clt_mean: npt.ArrayLike,
    clt_cov: npt.ArrayLike,
    released: npt.ArrayLike,
    noise_variance: npt.ArrayLike,
    lower: npt.ArrayLike,
    upper: npt.ArrayLike,
    current: npt.ArrayLike,
    total: npt.ArrayLike | None = None,
    constraints: Sequence[Constraint] = (),
    proposals: int = 16,
    sweeps: int = 4,
) -> TruncatedDraw:
    """Draw s ~ NormProduct(nμ, nΣ, y, diag σ²) restricted to its valid region.

    For a truncated family (Algorithm 2) s is the stacked ``(ŝ, s_all)``: the statistic of the
    records inside the window, which is released, then that of all records; ``clt_mean`` and
    ``clt_cov`` are their joint (random-sum) CLT moments and y observes the first ``k``.

    Parameters
    ----------
    rng
        Source of randomness.
    clt_mean, clt_cov
        CLT mean, shape ``(..., m)``, and covariance, shape ``(..., m, m)``.
    released, noise_variance
        Released y and mixing variances σ², shape ``(..., k)`` with ``k <= m``.
    lower, upper
        Box of the valid region, broadcastable to ``(..., m)``.
    current
        Current s, inside the region, shape ``(..., m)``.
    total
        For counts that sum to n (singular ``clt_cov``), that sum, broadcastable to ``(...)``;
        the draw is rescaled onto it exactly to remove rounding drift.
    constraints
        Further convex constraints of the valid region (:mod:`pymc_dp.kernels.constraints`).
    proposals, sweeps
        Passed to :func:`~pymc_dp.kernels.draw_truncated_normal`.

    Returns
    -------
    TruncatedDraw
        The new s, strictly inside the box (PyMC's interval and simplex transforms are finite
        there), and the number of batch members that used the fallback.

    Examples
    --------
    >>> import numpy as np
    >>> out = draw_suffstat(np.random.default_rng(0), clt_mean=[[30.0]], clt_cov=[[[21.0]]],
    ...                     released=[[35.0]], noise_variance=[[4.0]], lower=0.0, upper=100.0,
    ...                     current=[[30.0]])
    >>> out.value.shape
    (1, 1)
    """
    mean3, cov3 = norm_product(clt_mean, clt_cov, released, noise_variance)
    lower = np.broadcast_to(np.asarray(lower, dtype=np.float64), mean3.shape)
    upper = np.broadcast_to(np.asarray(upper, dtype=np.float64), mean3.shape)
    draw = draw_truncated_normal(
        rng,
        mean=mean3,
        cov=cov3,
        lower=lower,
        upper=upper,
        current=current,
        constraints=constraints,
        proposals=proposals,
        sweeps=sweeps,
    )
    value = np.clip(draw.value, *_open_box(lower, upper))
    if total is not None:
        total = np.asarray(total, dtype=np.float64)[..., None]
        value = value * (total / np.sum(value, axis=-1, keepdims=True))
    return TruncatedDraw(value, draw.n_fallback)


def _open_box(
    lower: npt.NDArray[np.float64], upper: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The box shrunk to its interior by the least margin PyMC's transforms can resolve.

    One ulp is not enough at a bound of 0: the interval and scaled-simplex transforms divide by
    the width (n for counts), and 5e-324 / n rounds to 0, whose log is infinite. The margin is
    therefore at least the smallest normal float times the width.
    """
    width = np.where(np.isfinite(upper - lower), upper - lower, 1.0)
    margin = np.finfo(np.float64).tiny * np.maximum(width, 1.0)
    return (
        np.maximum(np.nextafter(lower, upper), lower + margin),
        np.minimum(np.nextafter(upper, lower), upper - margin),
    )
