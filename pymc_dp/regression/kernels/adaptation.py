"""Tuning of the random walk of :func:`~pymc_dp.regression.kernels.collapsed.collapsed_move`.

During tuning the walk's covariance is the sample covariance of the chain's own states over
windows that double in length (as Stan's warm-up windows), shrunk towards a small multiple of
the identity, and its overall scale follows the Robbins–Monro recursion that drives the
acceptance rate to a target (Andrieu & Thoms 2008, Algorithm 4). After tuning both are frozen,
so the draws kept come from a fixed Metropolis–Hastings kernel. The end of tuning cuts the last
window short; one shorter than the window before is pooled with it
(:meth:`RandomWalkAdaptation.close_window`). Batched over leading dimensions
(chains, trials); each batch member adapts on its own.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["FIRST_WINDOW", "POOL_SHORT_LAST_WINDOW", "RandomWalkAdaptation"]

FIRST_WINDOW = 25
"""Tuning iterations before the first window closes (the walk's covariance first set)."""
_SHRINK = 5.0  # pseudo-states of the identity mixed into each window's covariance (Stan's 5)
_SHRINK_TO = 1e-3
POOL_SHORT_LAST_WINDOW = True
"""Whether :meth:`RandomWalkAdaptation.close_window` pools a last window shorter than the one
before with that one (``False``: the last window alone, as before 2026-12-07; for benchmarks)."""


class RandomWalkAdaptation:
    """Windowed covariance and Robbins–Monro scale of a batched random walk.

    Parameters
    ----------
    start
        States ``(..., k)`` the chains start from.
    initial_sd
        Proposal standard deviations ``(..., k)`` before the first window closes.
    target
        Acceptance rate the scale is driven to.

    Examples
    --------
    >>> import numpy as np
    >>> ad = RandomWalkAdaptation(np.zeros((2, 3)), initial_sd=np.ones(3))
    >>> ad.factor().shape
    (2, 3, 3)
    >>> for it in range(100):
    ...     ad.record_move(np.ones(2, dtype=bool))
    ...     ad.update(np.random.default_rng(it).normal(size=(2, 3)))
    >>> bool(np.all(ad.factor()[:, 0, 0] > 1.0))  # always accepted: the walk grows
    True
    """

    def __init__(
        self, start: npt.ArrayLike, *, initial_sd: npt.ArrayLike, target: float = 0.25
    ) -> None:
        start = np.asarray(start, dtype=np.float64)
        self.batch, self.k = start.shape[:-1], start.shape[-1]
        sd = np.broadcast_to(np.asarray(initial_sd, dtype=np.float64), start.shape)
        self.cov = sd[..., :, None] * sd[..., None, :] * np.eye(self.k)
        # 2.38²/k is optimal for a normal target (Roberts, Gelman & Gilks 1997); the window
        # covariance estimates the target's, so the initial sd enters through the same factor.
        self.log_scale = np.full(self.batch, np.log(2.38**2 / self.k))
        self.cov = self.cov / np.exp(self.log_scale)[..., None, None]
        self._chol: npt.NDArray[np.float64] | None = None
        self.target = float(target)
        self.center = start.copy()
        """Mean of the states of the last closed window."""
        self.moment_mean: npt.NDArray[np.float64] | None = None
        """Mean of the ``moments`` given to :meth:`update` over the last closed window."""
        self.moment_cov: npt.NDArray[np.float64] | None = None
        """Their covariance over that window (``None`` until one closes with moments)."""
        self.iteration = 0
        self._steps = 0  # Robbins–Monro steps since the covariance last changed
        self._window = FIRST_WINDOW
        self._closed: tuple[int, dict[str, list[np.ndarray]]] | None = None  # last window's sums
        self._reset()

    def _reset(self) -> None:
        self._count = 0
        self._sums: dict[str, list[np.ndarray]] = {}  # running mean and m2 per tracked vector

    def factor(self) -> npt.NDArray[np.float64]:
        """Lower-triangular L with L Lᵀ the current proposal covariance, ``(..., k, k)``."""
        if self._chol is None:
            self._chol = np.linalg.cholesky(self.cov + 1e-12 * np.eye(self.k))
        return np.exp(0.5 * self.log_scale)[..., None, None] * self._chol

    def record_move(self, accepted: npt.ArrayLike) -> None:
        """Move the scale after one proposal, accepted or not (``(...)`` booleans)."""
        self._steps += 1
        gain = (self._steps + 10.0) ** -0.6
        self.log_scale = self.log_scale + gain * (np.asarray(accepted, float) - self.target)

    def _track(self, key: str, x: np.ndarray) -> None:
        """Welford's update of the window's mean and m2 of ``x``."""
        zero = [np.zeros(x.shape), np.zeros((*x.shape, x.shape[-1]))]
        mean, m2 = self._sums.setdefault(key, zero)
        delta = x - mean
        mean = mean + delta / self._count
        self._sums[key] = [mean, m2 + delta[..., :, None] * (x - mean)[..., None, :]]

    def update(self, state: npt.ArrayLike, moments: npt.ArrayLike | None = None) -> None:
        """Record the state ``(..., k)`` at the end of one tuning iteration.

        ``moments`` ``(..., m)``, e.g. the state's η, get the same windows' mean and covariance
        (:attr:`moment_mean`, :attr:`moment_cov`), without shrinkage; give them at every
        update or never.
        """
        state = np.asarray(state, dtype=np.float64)
        self.iteration += 1
        self._count += 1
        self._track("state", state)
        if moments is not None:
            self._track("moments", np.asarray(moments, dtype=np.float64))
        if self._count >= self._window:
            self._close()

    def close_window(self, minimum: int = FIRST_WINDOW) -> None:
        """Close the current window early if it holds at least ``minimum`` states.

        For the end of tuning, whose last window is usually cut short. If it holds fewer states
        than the window before it, the two are pooled (their exact mean and covariance, as if
        the window before had run to the end of tuning, which is what Stan's warm-up does with
        a last window that would not fit): PyMC's 1000 tuning iterations leave 225 states in
        the last window after one of 400, and a covariance of 26 coordinates (the mixed model
        at d = 5) from 225 autocorrelated states made the multiple-try move's t so poor that
        3.6 % of its moves were accepted (16 % pooled).
        """
        if self._count < max(int(minimum), 2):
            return
        if POOL_SHORT_LAST_WINDOW and self._closed is not None and self._count < self._closed[0]:
            self._pool(*self._closed)
        self._close()

    def _pool(self, count: int, sums: dict[str, list[np.ndarray]]) -> None:
        """Add another window's ``count`` states (their ``sums``) to the current window's.

        Chan, Golub & LeVeque's pairwise update of the mean and m2.
        """
        total = self._count + count
        for key, (mean, m2) in self._sums.items():
            other_mean, other_m2 = sums[key]
            delta = other_mean - mean
            outer = delta[..., :, None] * delta[..., None, :]
            self._sums[key] = [mean + delta * (count / total),
                               m2 + other_m2 + outer * (self._count * count / total)]  # fmt: skip
        self._count = total

    def _close(self) -> None:
        mean, m2 = self._sums["state"]
        self.center = mean.copy()
        sample = m2 / (self._count - 1)
        if "moments" in self._sums:
            mean, m2 = self._sums["moments"]
            self.moment_mean, self.moment_cov = mean, m2 / (self._count - 1)
        weight = self._count / (self._count + _SHRINK)
        self.cov = weight * sample + (1.0 - weight) * _SHRINK_TO * np.eye(self.k)
        self.cov = 0.5 * (self.cov + np.swapaxes(self.cov, -1, -2))
        self._chol = None
        # The scale was tuned to the old covariance: start it again from 2.38²/k.
        self.log_scale = np.full(self.batch, np.log(2.38**2 / self.k))
        self._steps = 0
        self._window *= 2
        self._closed = (self._count, self._sums)
        self._reset()
