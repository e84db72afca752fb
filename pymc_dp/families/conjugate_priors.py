"""Conjugate priors shared by several families: the draw, the scipy form, the hyperparameters.

A family mixes one in and writes only its own Conjugate-Update (Algorithm 1, line 3).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from pytensor.tensor.variable import TensorVariable
from scipy import stats

from pymc_dp.families.lazy_pymc import PyMCName
from pymc_dp.families.util import reciprocal_of
from pymc_dp.kernels import draw_beta, draw_gamma, draw_normal

__all__ = ["BetaPrior", "GammaPrior", "NormalPrior"]


class GammaPrior:
    """θ ~ Gamma(shape, rate), PyMC's ``pm.Gamma(alpha, beta)``; hyperparameters (shape, rate)."""

    conjugate_prior = PyMCName("Gamma")
    prior_transform = PyMCName("distributions.transforms.log")
    """θ > 0 is tabulated on log θ (the collapsed engine)."""

    @staticmethod
    def prior_transform_forward(theta: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Log θ."""
        return np.log(np.asarray(theta, dtype=np.float64))

    @staticmethod
    def prior_transform_backward(z: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """e^z."""
        return np.exp(np.asarray(z, dtype=np.float64))

    @property
    def prior_shapes(self) -> tuple[tuple[int, ...], ...]:  # noqa: D102
        return ((), ())

    def prior_parameters(self, rvs: tuple[TensorVariable, ...]) -> tuple[TensorVariable, ...]:
        """(shape, rate) of the ``pm.Gamma`` θ (PyMC stores its scale = 1/rate)."""
        (theta,) = rvs
        alpha, scale = theta.owner.op.dist_params(theta.owner)
        return alpha, reciprocal_of(scale)

    def draw_conjugate(  # noqa: D102
        self, rng: np.random.Generator, params: tuple[npt.NDArray, ...]
    ) -> npt.NDArray[np.float64]:
        shape, rate = params
        return draw_gamma(rng, shape=shape, rate=rate)

    def conjugate_distribution(self, params: tuple[npt.ArrayLike, ...]) -> Any:  # noqa: D102
        shape, rate = params
        return stats.gamma(shape, scale=1.0 / np.asarray(rate))


class BetaPrior:
    """θ ~ Beta(alpha, beta), PyMC's ``pm.Beta``."""

    conjugate_prior = PyMCName("Beta")
    prior_transform = PyMCName("distributions.transforms.logodds")
    """θ in (0, 1) is tabulated on logit θ (the collapsed engine)."""

    @staticmethod
    def prior_transform_forward(theta: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Logit θ."""
        theta = np.asarray(theta, dtype=np.float64)
        return np.log(theta) - np.log1p(-theta)

    @staticmethod
    def prior_transform_backward(z: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """The logistic function of z."""
        from scipy.special import expit

        return expit(np.asarray(z, dtype=np.float64))

    @property
    def prior_shapes(self) -> tuple[tuple[int, ...], ...]:  # noqa: D102
        return ((), ())

    def draw_conjugate(  # noqa: D102
        self, rng: np.random.Generator, params: tuple[npt.NDArray, ...]
    ) -> npt.NDArray[np.float64]:
        alpha, beta = params
        return draw_beta(rng, alpha=alpha, beta=beta)

    def conjugate_distribution(self, params: tuple[npt.ArrayLike, ...]) -> Any:  # noqa: D102
        alpha, beta = params
        return stats.beta(alpha, beta)


class NormalPrior:
    """θ ~ N(mean, sd²), PyMC's ``pm.Normal(mu, sigma)``; hyperparameters (mean, sd)."""

    conjugate_prior = PyMCName("Normal")
    prior_positive: ClassVar[tuple[bool, ...]] = (False, True)
    prior_transform: ClassVar[Any] = None
    """θ is real: tabulated as it is (the collapsed engine)."""

    @staticmethod
    def prior_transform_forward(theta: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """θ itself."""
        return np.asarray(theta, dtype=np.float64)

    prior_transform_backward = prior_transform_forward

    @property
    def prior_shapes(self) -> tuple[tuple[int, ...], ...]:  # noqa: D102
        return ((), ())

    def draw_conjugate(  # noqa: D102
        self, rng: np.random.Generator, params: tuple[npt.NDArray, ...]
    ) -> npt.NDArray[np.float64]:
        mean, sd = params
        return draw_normal(rng, mean=mean, var=np.square(sd))

    def conjugate_distribution(self, params: tuple[npt.ArrayLike, ...]) -> Any:  # noqa: D102
        mean, sd = params
        return stats.norm(mean, sd)
