"""The mathematics every exponential family implements, in one class.

A family says what the curator computes (t(x), data checks, sensitivity), what the analyst's
model needs (η(θ), A(η) as PyTensor, the valid region of s, one record's PyMC distribution at θ)
and how its conjugate prior updates. Release code uses only the first group; inference code uses
the rest. What the package says about the family by name (its prior, command-line text, dry-run
labels, grouped model) is its :class:`~pymc_dp.families.declaration.FamilyDeclaration`, set as
the class's ``declaration``: defining the class registers the family
(:func:`~pymc_dp.families.registry.register_family`).
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pytensor.tensor as pt
from pytensor.gradient import grad, jacobian
from pytensor.tensor.variable import TensorVariable

from pymc_dp.families.declaration import FamilyDeclaration
from pymc_dp.families.registry import register_family

__all__ = ["ExponentialFamily"]


@dataclasses.dataclass(frozen=True)
class ExponentialFamily(ABC):
    """An exponential family p(x | θ) = h(x) exp(η(θ)ᵀ t(x) - A(η(θ))) with a conjugate prior.

    Subclasses are frozen dataclasses whose fields are the family's fixed settings (``trials``,
    ``categories``); they are hashable and picklable, so step methods can carry them. A
    subclass that sets ``declaration`` is registered when it is defined.
    """

    declaration: ClassVar[FamilyDeclaration]
    """What the package says about the family by name (:mod:`pymc_dp.families.declaration`)."""
    name: ClassVar[str]
    """Short lower-case name stored in a :class:`~pymc_dp.Release` (the declaration's)."""
    pymc_distribution: ClassVar[Any]
    """The PyMC distribution class modelling one record, e.g. ``pm.Bernoulli``."""
    conjugate_prior: ClassVar[Any]
    """The PyMC distribution class of the conjugate prior on θ, e.g. ``pm.Beta``."""
    needs_bounds: ClassVar[bool] = False
    """Whether releases need truncation bounds (unbounded statistics)."""
    prior_positive: ClassVar[tuple[bool, ...] | None] = None
    """Which conjugate hyperparameters must be > 0 (``None``: all of them)."""
    prior_transform: ClassVar[Any] = NotImplemented
    """PyMC transform to θ's unconstrained scale for the collapsed engine (``None``: θ is real;
    ``NotImplemented``: the family's θ is not scalar). Conjugate-prior mixins set it."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Only a class that declares a family registers it: not its mixins and bases, and not
        # a subclass that inherits its parent's declaration.
        declaration = cls.__dict__.get("declaration")
        if declaration is not None:
            cls.name = declaration.name
            register_family(declaration, cls)

    # ---- curator side -------------------------------------------------------------------
    @property
    @abstractmethod
    def stat_shape(self) -> tuple[int, ...]:
        """Shape of the sufficient statistic s = Σ t(x_i)."""

    @property
    @abstractmethod
    def sensitivity(self) -> float:
        """L1 sensitivity of s under replace-one neighbours, over all released components."""

    @property
    @abstractmethod
    def domain(self) -> tuple[float, float]:
        """Smallest and largest value one record can take."""

    @abstractmethod
    def validate_data(self, x: npt.ArrayLike) -> npt.NDArray:
        """Return ``x`` as an array after checking every record belongs to the family."""

    @abstractmethod
    def sufficient_statistic(self, x: npt.NDArray) -> npt.NDArray[np.float64]:
        """Return s = Σ_i t(x_i) for validated records ``x``."""

    @property
    def sensitivity_l2(self) -> float:
        """L2 sensitivity of s under replace-one neighbours (the Gaussian mechanism's Δ₂)."""
        raise NotImplementedError(f"{type(self).__name__} declares no L2 sensitivity")

    def release_sensitivity(self, bounds: tuple[float, float] | None = None) -> float:
        """L1 sensitivity of the released statistic; bounded families ignore ``bounds``."""
        return self.sensitivity

    def release_sensitivity_l2(self, bounds: tuple[float, float] | None = None) -> float:
        """L2 sensitivity of the released statistic; bounded families ignore ``bounds``."""
        return self.sensitivity_l2

    def params(self) -> dict[str, Any]:
        """The family's settings, as keyword arguments that rebuild it."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init}

    # ---- analyst side -------------------------------------------------------------------
    @classmethod
    @abstractmethod
    def from_dist(cls, dist: TensorVariable) -> ExponentialFamily | None:
        """The family of a ``pm.<Dist>.dist(...)`` variable, or ``None`` if it is another one."""

    @abstractmethod
    def theta_of(self, dist: TensorVariable) -> TensorVariable:
        """Return the parameter θ of ``dist`` (e.g. ``p``); ``dist`` must match the family."""

    @abstractmethod
    def dist_at(self, *theta: TensorVariable) -> TensorVariable:
        """One record's ``pm.<Dist>.dist(...)`` at θ, the inverse of :meth:`theta_of`.

        ``theta`` holds the variables of the declaration's prior (``p``; ``mu`` and ``sigma2``),
        as the ready-made and partially pooled models (:mod:`pymc_dp.model`) build them.
        """

    def conjugate_prior_rvs(self, model: Any, dist: TensorVariable) -> tuple[TensorVariable, ...]:
        """The free variables that carry θ's conjugate prior, or ``()`` if θ has another prior.

        The default finds θ itself as a free variable with the :attr:`conjugate_prior`.
        """
        theta = self.theta_of(dist)
        if theta in model.free_RVs and self.is_conjugate_prior(theta):
            return (theta,)
        return ()

    def prior_parameters(self, rvs: tuple[TensorVariable, ...]) -> tuple[TensorVariable, ...]:
        """Hyperparameters of the conjugate prior on ``rvs``, as :meth:`conjugate_update` takes."""
        (theta,) = rvs
        return tuple(theta.owner.op.dist_params(theta.owner))

    def split_theta(self, theta: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], ...]:
        """The values of :meth:`conjugate_prior_rvs` in a draw of :meth:`draw_conjugate`."""
        return (theta,)

    @abstractmethod
    def natural_parameters(self, theta: TensorVariable) -> TensorVariable:
        """η(θ) as a PyTensor expression."""

    @abstractmethod
    def log_partition(self, eta: TensorVariable) -> TensorVariable:
        """A(η) as a scalar PyTensor expression."""

    def moments(self, theta: TensorVariable) -> tuple[TensorVariable, TensorVariable]:
        """Mean μ = ∂A/∂η and covariance Σ = ∂²A/∂η∂ηᵀ of t(x) for one record (Eq. 1).

        The default differentiates :meth:`log_partition` with PyTensor; families may override
        it with a closed form that is better behaved at the edge of the parameter space.
        """
        eta = self.natural_parameters(theta)
        a = self.log_partition(eta)
        mu = grad(a, eta)
        sigma = jacobian(mu, eta) if eta.ndim else grad(mu, eta)
        return mu, sigma

    def released_clt(
        self, theta: TensorVariable, n: int, bounds: tuple[float, float] | None = None
    ) -> tuple[TensorVariable, TensorVariable, float, float]:
        """CLT mean, variance and valid region of a released *scalar* statistic of n records.

        The statistic is s = Σ t(x_i), normal with mean nμ(θ) and variance nΣ(θ) on
        :meth:`valid_region`; a windowed family overrides this with the moments of ŝ.

        Raises
        ------
        TypeError
            If the family's statistic is a vector.
        """
        if self.stat_shape not in ((), (1,)):
            raise TypeError(f"{self!r} releases a vector statistic, not one number")
        mu, sigma = self.moments(theta)
        lower, upper = self.valid_region(n)
        return n * pt.reshape(mu, ()), n * pt.reshape(sigma, ()), float(lower[0]), float(upper[0])

    @abstractmethod
    def valid_region(self, n: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Box ``(lower, upper)`` that s = Σ t(x_i) over ``n`` records must lie in."""

    # ---- conjugacy ----------------------------------------------------------------------
    @abstractmethod
    def conjugate_update(
        self, prior: tuple[npt.NDArray, ...], s: npt.NDArray, n: int
    ) -> tuple[npt.NDArray, ...]:
        """Conjugate-Update(λ, s, n): posterior hyperparameters after s from n records."""

    @abstractmethod
    def draw_conjugate(
        self, rng: np.random.Generator, params: tuple[npt.NDArray, ...]
    ) -> npt.NDArray[np.float64]:
        """Draw θ from the conjugate distribution with hyperparameters ``params``."""

    @abstractmethod
    def conjugate_distribution(self, params: tuple[npt.ArrayLike, ...]) -> Any:
        """The conjugate distribution with hyperparameters ``params`` as a frozen scipy object."""

    def check_prior(
        self, prior: Sequence[npt.ArrayLike], *, batched: bool = False
    ) -> tuple[npt.NDArray, ...]:
        """Check conjugate-prior hyperparameters and return them as float arrays.

        ``prior`` holds one array per hyperparameter, each with the core shape of
        :attr:`prior_shapes` (after leading batch dimensions if ``batched``); all finite
        and > 0.

        Examples
        --------
        >>> from pymc_dp.families import Binomial
        >>> Binomial(trials=2).check_prior((1, -1))
        Traceback (most recent call last):
        ...
        ValueError: prior hyperparameters must be finite and > 0 (got -1)
        """
        shapes = self.prior_shapes
        positive = self.prior_positive or (True,) * len(shapes)
        if not isinstance(prior, Sequence) or isinstance(prior, str) or len(prior) != len(shapes):
            raise TypeError(
                f"prior must be a sequence of {len(shapes)} hyperparameter arrays with core "
                f"shapes {shapes} for the {self.name} family (got {prior!r})"
            )
        params = []
        for value, shape, must_be_positive in zip(prior, shapes, positive, strict=True):
            arr = np.asarray(value, dtype=np.float64)
            core = arr.shape[arr.ndim - len(shape) :] if batched else arr.shape
            if core != shape or arr.ndim < len(shape):
                raise ValueError(
                    f"prior hyperparameter must have core shape {shape} (got {value!r})"
                )
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"prior hyperparameters must be finite (got {value!r})")
            if must_be_positive and np.any(arr <= 0):
                raise ValueError(f"prior hyperparameters must be finite and > 0 (got {value!r})")
            params.append(arr)
        return tuple(params)

    @property
    @abstractmethod
    def prior_shapes(self) -> tuple[tuple[int, ...], ...]:
        """Core shape of each conjugate-prior hyperparameter, e.g. ``((), ())`` for a Beta."""

    def is_conjugate_prior(self, rv: TensorVariable) -> bool:
        """Whether ``rv`` is a variable of the family's conjugate prior (e.g. a ``pm.Beta``)."""
        return rv.owner is not None and isinstance(rv.owner.op, type(self.prior_example().owner.op))

    def prior_example(self) -> TensorVariable:
        """An unregistered conjugate-prior variable with unit hyperparameters, of θ's shape."""
        return self.conjugate_prior.dist(*(np.ones(shape) for shape in self.prior_shapes))

    def naive_statistic(self, y: npt.ArrayLike, n: int) -> npt.NDArray[np.float64]:
        """Project a noisy statistic onto the valid region (for the naive baseline only)."""
        lower, upper = self.valid_region(n)
        return np.clip(np.asarray(y, dtype=np.float64), lower, upper).reshape(self.stat_shape)


def rv_op_type(distribution: Any, *args: Any) -> type:
    """The PyTensor op class behind a PyMC distribution, found by building one instance."""
    return type(distribution.dist(*args).owner.op)
