"""Baseline posteriors: non-private (exact s) and naive (treats the noisy y as s).

Both are conjugate updates, returned as frozen :mod:`scipy.stats` distributions. The non-private
posterior needs the raw data and is for comparison only; the naive one is what ignoring the
privacy noise gives, and is miscalibrated unless n·ε is large (Bernstein & Sheldon 2018, §4).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy.typing as npt

from pymc_dp.curator.record import Release
from pymc_dp.families import ExponentialFamily, get_family

__all__ = ["naive_posterior", "nonprivate_posterior"]


def nonprivate_posterior(
    x: npt.ArrayLike, family: Any, *, prior: Sequence[npt.ArrayLike], **family_params: Any
) -> Any:
    """Conjugate posterior from the exact sufficient statistics of ``x`` (not private).

    Parameters
    ----------
    x
        The raw records.
    family
        ``pm.Bernoulli``, ``pm.Binomial`` or ``pm.Categorical`` (or the family name).
    prior
        Conjugate prior hyperparameters: ``(alpha, beta)`` for a Beta, ``(alpha,)`` for a
        Dirichlet with concentration vector ``alpha``.
    **family_params
        ``trials=`` or ``categories=``.

    Returns
    -------
    scipy.stats frozen distribution
        ``beta(α + s, β + n·trials - s)`` or ``dirichlet(α + s)``.

    Examples
    --------
    >>> import pymc as pm
    >>> post = nonprivate_posterior([1, 0, 1, 1], pm.Bernoulli, prior=(1, 1))
    >>> [float(a) for a in post.args]
    [4.0, 2.0]
    """
    fam = get_family(family, **family_params)
    records = fam.validate_data(x)
    s = fam.sufficient_statistic(records)
    return _posterior(fam, prior, s, int(records.shape[0]))


def naive_posterior(release: Release, *, prior: Sequence[npt.ArrayLike]) -> Any:
    """Conjugate posterior that treats the released y as the exact statistic.

    y is first clipped to the valid region of s (post-processing, so still private), because a
    conjugate update with a negative count is undefined.

    Parameters
    ----------
    release
        A :class:`~pymc_dp.Release`.
    prior
        Conjugate prior hyperparameters, as for :func:`nonprivate_posterior`.

    Returns
    -------
    scipy.stats frozen distribution
    """
    if not isinstance(release, Release):
        raise TypeError(f"release must be a pymc_dp.Release (got {type(release).__name__})")
    fam = release.get_family()
    return _posterior(fam, prior, fam.naive_statistic(release.value, release.n), release.n)


def _posterior(fam: ExponentialFamily, prior: Sequence[npt.ArrayLike], s: Any, n: int) -> Any:
    return fam.conjugate_distribution(fam.conjugate_update(fam.check_prior(prior), s, n))
