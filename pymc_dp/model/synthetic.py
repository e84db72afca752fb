"""Synthetic data from a noise-aware posterior of a marginal release, and Rubin's rules for it.

:func:`synthetic_datasets` draws m data sets, each from the log-linear distribution of a
different posterior draw of θ, so the spread between the data sets carries the posterior's
uncertainty (the noise and the finite sample). :func:`combine` pools one analysis per data set
by the rules for fully synthetic data (Raghunathan, Reiter & Rubin 2003), as NAPSU-MQ does
(Räisä et al. 2023).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from scipy import stats

from pymc_dp._validation import check_rng
from pymc_dp.kernels.loglinear_moments import sample_records

__all__ = ["SyntheticCombined", "combine", "synthetic_datasets"]


def synthetic_datasets(
    idata: Any,
    release: Any,
    *,
    m: int,
    n: int | None = None,
    var_name: str = "theta",
    rng: Any = None,
) -> list[Any]:
    """Draw m synthetic data sets, each from a different posterior draw of θ.

    Parameters
    ----------
    idata
        The posterior of a :func:`~pymc_dp.model.nodes.marginals.marginals_model` (an
        ``InferenceData`` or ``DataTree`` with a ``posterior`` group holding ``var_name``).
    release
        The :class:`~pymc_dp.curator.marginals.MarginalRelease` the model was fitted to (its
        columns and public domains label the records).
    m
        Number of data sets (at most the number of posterior draws).
    n
        Records per data set (default: the release's n).
    var_name
        The log-linear parameter vector in the posterior.
    rng
        Seed or generator.

    Returns
    -------
    list of pandas.DataFrame
        Columns named as in the release, values its labels.
    """
    import pandas as pd

    rng = check_rng(rng)
    post = idata.posterior if hasattr(idata, "posterior") else idata["posterior"]
    theta = np.asarray(post[var_name]).reshape(-1, release.domain.n_params)
    if isinstance(m, bool) or not isinstance(m, int | np.integer) or not 1 <= m <= len(theta):
        raise ValueError(
            f"m must be an integer in [1, {len(theta)}] (the posterior draws); got {m!r}"
        )
    n = release.n if n is None else int(n)
    if n < 1:
        raise ValueError(f"n must be a positive integer (got {n})")
    dom = release.domain
    picks = rng.choice(len(theta), size=m, replace=False)
    out = []
    for i in picks:
        codes = sample_records(dom, theta[i], n, rng)
        out.append(
            pd.DataFrame(
                {
                    c: np.asarray(labels, dtype=object)[codes[:, k]]
                    for k, (c, labels) in enumerate(
                        zip(release.columns, release.domains, strict=True)
                    )
                }
            ).infer_objects()
        )
    return out


class SyntheticCombined(NamedTuple):
    """Pooled estimate over m synthetic data sets (:func:`combine`)."""

    estimate: npt.NDArray[np.float64]
    """q̄, the mean of the m estimates."""
    variance: npt.NDArray[np.float64]
    """T = (1 + 1/m) b - ū, or ū where that is not positive (Reiter's adjustment)."""
    df: npt.NDArray[np.float64]
    """Degrees of freedom of the t reference law (infinite where the adjustment applied)."""
    between: npt.NDArray[np.float64]
    """b, the sample variance of the m estimates."""
    within: npt.NDArray[np.float64]
    """ū, the mean of the m variance estimates."""

    def interval(
        self, level: float = 0.9
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """The central ``level`` interval q̄ ± t_ν √T."""
        if not 0 < level < 1:
            raise ValueError(f"level must lie in (0, 1) (got {level})")
        half = stats.t.ppf(0.5 + level / 2.0, self.df) * np.sqrt(self.variance)
        return self.estimate - half, self.estimate + half


def combine(estimates: npt.ArrayLike, variances: npt.ArrayLike) -> SyntheticCombined:
    """Rubin's rules for fully synthetic data (Raghunathan, Reiter & Rubin 2003).

    With q_i and u_i the estimate and its variance from data set i (i = 1..m): q̄ = mean q_i,
    b = sample variance of q_i, ū = mean u_i, T = (1 + 1/m) b - ū and ν = (m - 1)(1 - ū /
    ((1 + 1/m) b))². Where T ≤ 0 (possible for small m), T = ū and ν = ∞ (Reiter 2002).

    Parameters
    ----------
    estimates, variances
        Shape (m,) or (m, k): one row per synthetic data set, m >= 2.

    Examples
    --------
    >>> c = combine([1.0, 2.0, 3.0], [0.1, 0.1, 0.1])
    >>> float(c.estimate), round(float(c.variance), 4), round(float(c.df), 3)
    (2.0, 1.2333, 1.711)
    """
    q = np.asarray(estimates, dtype=float)
    u = np.asarray(variances, dtype=float)
    if q.shape != u.shape or q.ndim not in (1, 2) or q.shape[0] < 2:
        raise ValueError(
            f"estimates and variances must have the same shape (m,) or (m, k) with m >= 2 "
            f"(got {q.shape} and {u.shape})"
        )
    if not (np.all(np.isfinite(q)) and np.all(np.isfinite(u)) and np.all(u >= 0)):
        raise ValueError("estimates must be finite and variances finite and non-negative")
    m = q.shape[0]
    qbar = q.mean(axis=0)
    b = q.var(axis=0, ddof=1)
    ubar = u.mean(axis=0)
    total = (1.0 + 1.0 / m) * b - ubar
    ok = total > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(ok, (m - 1) * (1.0 - ubar / ((1.0 + 1.0 / m) * b)) ** 2, np.inf)
    return SyntheticCombined(qbar, np.where(ok, total, ubar), df, b, ubar)
