"""Baseline regression posteriors: non-private (exact statistic) and naive (noisy z as exact).

Both are conjugate NIG posteriors (:func:`~pymc_dp.regression.kernels.conjugate.nig_update`). The
non-private one needs the raw data and is for comparison only. The naive one first projects z to
the nearest valid statistic (:func:`~pymc_dp.regression.kernels.psd.project_psd`, post-processing,
so still private) because the conjugate update is undefined for a non-PSD ``B``; it ignores the
privacy noise and is over-confident unless n·ε is large.
"""

from __future__ import annotations

import numpy.typing as npt

from pymc_dp._validation import check_finite_array
from pymc_dp.curator.regression.release import RegressionRelease
from pymc_dp.curator.regression.statistics import (
    pack_statistic,
    regression_statistic,
    unpack_statistic,
)
from pymc_dp.regression.kernels.conjugate import NIG, check_nig, nig_update
from pymc_dp.regression.kernels.psd import project_psd

__all__ = ["naive_regression_posterior", "nonprivate_regression_posterior"]


def nonprivate_regression_posterior(x: npt.ArrayLike, y: npt.ArrayLike, *, prior: NIG) -> NIG:
    """Conjugate NIG posterior from the exact statistic of covariates ``x`` (n, d) and ``y``.

    Examples
    --------
    >>> import numpy as np
    >>> prior = NIG(np.zeros(2), np.eye(2), np.array(2.0), np.array(1.0))
    >>> post = nonprivate_regression_posterior([[0.0], [1.0], [2.0]], [1.0, 2.0, 2.5], prior=prior)
    >>> float(post.shape)
    3.5
    """
    xs = check_finite_array(x, "x")
    xs = xs[:, None] if xs.ndim == 1 else xs
    ys = check_finite_array(y, "y", ndim=1)
    if xs.ndim != 2 or ys.shape[0] != xs.shape[0]:
        raise ValueError(f"x (n, d) and y (n,) do not fit (got {xs.shape} and {ys.shape})")
    prior = check_nig(prior)
    return nig_update(prior, statistic=regression_statistic(xs, ys), n=xs.shape[0])


def naive_regression_posterior(
    released: RegressionRelease | npt.ArrayLike, *, prior: NIG, n: int | None = None
) -> NIG:
    """Conjugate NIG posterior that treats the (projected) noisy z as the exact statistic.

    Parameters
    ----------
    released
        A :class:`~pymc_dp.regression.RegressionRelease`, or released values of shape
        ``(..., m)`` together with ``n``.
    prior
        NIG prior, broadcastable to the batch.
    n
        Number of records, when ``released`` is an array.

    Returns
    -------
    NIG

    Examples
    --------
    >>> import numpy as np
    >>> prior = NIG(np.zeros(2), np.eye(2), np.array(2.0), np.array(1.0))
    >>> post = naive_regression_posterior(np.array([[1.0, -5.0, 2.0, 1.0, 3.0]]), n=10,
    ...                                   prior=prior)
    >>> post.mean.shape
    (1, 2)
    """
    if isinstance(released, RegressionRelease):
        z, n = released.value, released.n
    else:
        if n is None:
            raise TypeError("n is required when released is an array")
        z = check_finite_array(released, "released")
    prior = check_nig(prior)
    valid = pack_statistic(project_psd(unpack_statistic(z, n)))
    return nig_update(prior, statistic=valid, n=n)
