"""The three models of the paper's experiments (§4): prior, data model, release and baselines.

Each :class:`Design` says how one calibration trial is simulated — θ from the prior, data from the
model, the exact statistics, the release — and how the closed-form posteriors (non-private and
naive) score the true θ. Everything is batched over trials.

The calibrated quantity is a scalar: θ itself, or θ's first component for the multinomial, as in
the paper ("for multinomial we show measures only for the parameter of the first category").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import stats

from pymc_dp.families import Binomial, Categorical, Exponential, ExponentialFamily
from pymc_dp.mechanisms import laplace_mechanism

__all__ = ["DESIGNS", "Design", "SimulatedTrials"]


@dataclasses.dataclass(frozen=True)
class SimulatedTrials:
    """One batch of calibration trials, each array with the trials as its leading axis."""

    truth: npt.NDArray[np.float64]
    """True θ, shape ``(trials, *theta_shape)``."""
    statistic: npt.NDArray[np.float64]
    """Exact statistic of all records, s (what the non-private posterior sees)."""
    released: npt.NDArray[np.float64]
    """y = ŝ + Laplace(Δ/ε), where ŝ = s for bounded families and the window sum otherwise."""
    naive_input: npt.NDArray[np.float64]
    """What the naive baseline treats as s: y, or for a windowed family the paper's "cheating"
    s + Laplace(Δ/ε) of all records (not private; it sees more than the Gibbs sampler)."""
    scale: float
    """Laplace scale Δ/ε of the release."""


@dataclasses.dataclass(frozen=True)
class Design:
    """A model of the paper's experiments and how to simulate and score its trials.

    Parameters
    ----------
    name
        Identifier used in file names and tables.
    label
        Name in figure legends.
    family
        The exponential family of one record.
    prior
        Conjugate prior hyperparameters.
    draw_statistics
        ``(rng, truth, n, bounds) -> (s, ŝ)``: exact statistic of all n records and of the
        released part, batched over trials.
    marginal
        ``params -> frozen scipy distribution`` of the calibrated scalar under conjugate
        hyperparameters ``params`` (batched).
    bounds
        Truncation window of a windowed family, else ``None``.
    """

    name: str
    label: str
    family: ExponentialFamily
    prior: tuple[Any, ...]
    draw_statistics: Callable[..., tuple[npt.NDArray, npt.NDArray]]
    marginal: Callable[[tuple[npt.NDArray, ...]], Any]
    bounds: tuple[float, float] | None = None

    @property
    def windowed(self) -> bool:
        """Whether releases are over a truncation window (Algorithm 2)."""
        return self.bounds is not None

    def scalar(self, theta: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """The calibrated scalar of θ (its last axis dropped for a vector θ)."""
        theta = np.asarray(theta, dtype=np.float64)
        return theta[..., 0] if self.family.stat_shape != () else theta

    def batched_prior(self, trials: int) -> tuple[npt.NDArray[np.float64], ...]:
        """Prior hyperparameters broadcast to ``(trials, *core_shape)``."""
        return tuple(
            np.broadcast_to(np.asarray(p, dtype=np.float64), (trials, *shape))
            for p, shape in zip(self.prior, self.family.prior_shapes, strict=True)
        )

    def simulate(
        self, rng: np.random.Generator, *, trials: int, n: int, epsilon: float
    ) -> SimulatedTrials:
        """θ ~ prior, data ~ model, release with Laplace noise: ``trials`` times at once."""
        truth = self.family.draw_conjugate(rng, self.batched_prior(trials))
        statistic, window = self.draw_statistics(rng, truth, n, self.bounds)
        sensitivity = self.family.release_sensitivity(self.bounds)
        released = laplace_mechanism(window, sensitivity=sensitivity, epsilon=epsilon, rng=rng)
        if self.windowed:
            naive = laplace_mechanism(statistic, sensitivity=sensitivity, epsilon=epsilon, rng=rng)
        else:
            naive = released
        return SimulatedTrials(truth, statistic, released, naive, sensitivity / epsilon)

    def conjugate_posterior(
        self, statistic: npt.NDArray[np.float64], n: int
    ) -> tuple[npt.NDArray[np.float64], ...]:
        """Conjugate hyperparameters after ``statistic`` (batched over trials)."""
        return self.family.conjugate_update(self.batched_prior(len(statistic)), statistic, n)

    def naive_posterior(
        self, noisy: npt.NDArray[np.float64], n: int
    ) -> tuple[npt.NDArray[np.float64], ...]:
        """Naive baseline: conjugate update on the noisy statistic moved into its valid region.

        As :func:`pymc_dp.naive_posterior` does for one release.
        """
        lower, upper = self.family.valid_region(n)
        return self.conjugate_posterior(np.clip(noisy, lower, upper), n)

    def draw_posterior(
        self, rng: np.random.Generator, params: tuple[npt.NDArray, ...], size: int
    ) -> npt.NDArray[np.float64]:
        """``size`` iid draws per trial from conjugate hyperparameters: ``(trials, size, ...)``."""
        tiled = tuple(np.broadcast_to(p, (size, *np.shape(p))) for p in params)
        return np.moveaxis(self.family.draw_conjugate(rng, tiled), 0, 1)


def _binomial_statistics(rng, truth, n, bounds):
    s = rng.binomial(n * _BINOMIAL.trials, truth).astype(np.float64)
    return s, s


def _multinomial_statistics(rng, truth, n, bounds):
    s = rng.multinomial(n, truth).astype(np.float64)
    return s, s


def _exponential_statistics(rng, truth, n, bounds):
    # Records are needed here (not just their sum), to split them at the window.
    x = rng.exponential(1.0 / truth[:, None], size=(truth.shape[0], n))
    a, b = bounds
    inside = (x >= a) & (x <= b)
    return x.sum(axis=1), np.where(inside, x, 0.0).sum(axis=1)


def _beta_marginal(params):
    return stats.beta(*params)


def _dirichlet_first_marginal(params):
    (alpha,) = params
    return stats.beta(alpha[..., 0], alpha.sum(axis=-1) - alpha[..., 0])


def _gamma_marginal(params):
    shape, rate = params
    return stats.gamma(shape, scale=1.0 / rate)


_BINOMIAL = Binomial(trials=5)
_GAMMA_PRIOR = (8.0, 2.0)
# The central 95% of the prior predictive (Lomax): P(X > x) = (β / (β + x))^α. As in the paper,
# the window is fixed before any θ is drawn and "keeps the middle 95% of individuals".
_EXPONENTIAL_BOUNDS = tuple(
    float(_GAMMA_PRIOR[1] * (q ** (-1.0 / _GAMMA_PRIOR[0]) - 1.0)) for q in (0.975, 0.025)
)

DESIGNS: dict[str, Design] = {
    "binomial": Design(
        "binomial", "Binomial", _BINOMIAL, (3.0, 5.0), _binomial_statistics, _beta_marginal
    ),
    "multinomial": Design(
        "multinomial",
        "Multinomial",
        Categorical(categories=3),
        (np.array([2.0, 3.0, 4.0]),),
        _multinomial_statistics,
        _dirichlet_first_marginal,
    ),
    "exponential": Design(
        "exponential",
        "Exponential",
        Exponential(),
        _GAMMA_PRIOR,
        _exponential_statistics,
        _gamma_marginal,
        bounds=_EXPONENTIAL_BOUNDS,
    ),
}
"""The paper's three models: Binomial (5 trials, Beta(3, 5) prior), Multinomial (3 categories,
Dirichlet(2, 3, 4)) and Exponential (Gamma(8, 2) prior on the rate; window = central 95% of the
prior predictive)."""
