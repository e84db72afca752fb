"""The ``NoisySuffStat`` observed node: a DP release inside an ordinary PyMC model.

One call adds three variables to the model, in the paper's generative order (Bernstein &
Sheldon 2018, §3.2):

* ``{name}_s``: the latent sufficient statistic s | θ ~ N(nμ(θ), nΣ(θ)) on its valid region;
* ``{name}``: the released y | s ~ Laplace(s, Δ/ε), observed;
* ``{name}_sigma2``: the Laplace mixing variance σ² | y, s (Park & Casella), so the trace shows
  it and the Gibbs update of s is a normal product.

``pm.sample()`` then assigns :class:`~pymc_dp.ConjugateStep` to θ (when its prior is the
conjugate one), :class:`~pymc_dp.NormProductStep` to s and :class:`~pymc_dp.NoiseVarianceStep`
to σ²; any other variable keeps PyMC's own sampler.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import numpy as np
import numpy.typing as npt
import pymc as pm
import pytensor.tensor as pt

from pymc_dp._validation import check_finite_array, check_int, check_positive
from pymc_dp.distributions import LaplaceNoiseVariance, SuffStatNormal, SuffStatSimplexNormal
from pymc_dp.families import ExponentialFamily, family_from_dist
from pymc_dp.release import Release

__all__ = ["NoisySuffStat", "NoisySuffStatInfo"]


@dataclasses.dataclass(frozen=True)
class NoisySuffStatInfo:
    """What the step methods need to know about one :class:`NoisySuffStat` node.

    Stored on the tags of the node's variables; holds names, not graph objects, so it pickles.
    """

    name: str
    """Name of the observed node y."""
    suffstat: str
    """Name of the latent sufficient statistic s."""
    noise_variance: str
    """Name of the mixing variance σ²."""
    theta: str | None
    """Name of θ if its prior is conjugate (sampled by ConjugateStep), else ``None``."""
    family: ExponentialFamily
    n: int
    epsilon: float
    sensitivity: float


TAG = "noisy_suffstat"
"""Attribute on ``rv.tag`` holding the :class:`NoisySuffStatInfo` of s and σ², or a tuple of
them on a conjugate θ (one per node that θ feeds)."""


class NoisySuffStat:
    """A released noisy sufficient statistic, as an observed node of a PyMC model.

    Parameters
    ----------
    name
        Name of the observed node; the latent s and σ² are ``{name}_s`` and ``{name}_sigma2``.
    dist
        Distribution of one record, with θ inside: ``pm.Bernoulli.dist(p=p)``,
        ``pm.Binomial.dist(n=trials, p=p)`` or ``pm.Categorical.dist(p=p)``.
    release
        A :class:`~pymc_dp.Release`. Alternatively give ``n``, ``epsilon``, ``sensitivity`` and
        ``observed`` for a value released elsewhere.
    n
        Number of records.
    epsilon
        Privacy parameter of the release.
    sensitivity
        L1 sensitivity Δ that scaled the noise (noise scale Δ/ε).
    observed
        The released value y, shape ``()`` or ``(K,)``.
    model
        Model to add to; defaults to the model on the context stack.

    Returns
    -------
    TensorVariable
        The observed node y.

    Notes
    -----
    When θ is a free ``pm.Beta`` (Binomial, Bernoulli) or ``pm.Dirichlet`` (Categorical) variable
    used nowhere else, θ | s is an exact conjugate draw. Any other θ (a transformed parameter, a
    non-conjugate prior) is left to PyMC's samplers, which then update θ | s with the CLT
    likelihood N(s; nμ(θ), nΣ(θ)).

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp as pmdp
    >>> rel = pmdp.release(np.r_[np.ones(30), np.zeros(70)], pm.Bernoulli, epsilon=1.0, rng=0)
    >>> with pm.Model() as model:
    ...     p = pm.Beta("p", 1, 1)
    ...     y = pmdp.NoisySuffStat("y", pm.Bernoulli.dist(p=p), release=rel)
    >>> [v.name for v in model.free_RVs]
    ['p', 'y_s', 'y_sigma2']
    """

    def __new__(
        cls,
        name: str,
        dist: pt.TensorVariable,
        *,
        release: Release | None = None,
        n: int | None = None,
        epsilon: float | None = None,
        sensitivity: float | None = None,
        observed: npt.ArrayLike | None = None,
        model: pm.Model | None = None,
    ) -> pt.TensorVariable:
        """Add the node's variables to the model and return the observed node y."""
        model = pm.modelcontext(model)
        if not isinstance(name, str) or not name:
            raise TypeError(f"name must be a non-empty string (got {name!r})")
        if dist in getattr(model, "basic_RVs", []):
            raise TypeError(
                "dist must be an unregistered distribution such as pm.Bernoulli.dist(p=p), "
                "not a model variable"
            )
        family = family_from_dist(dist)
        n, epsilon, sensitivity, value = _release_settings(
            family, release, n=n, epsilon=epsilon, sensitivity=sensitivity, observed=observed
        )
        theta = family.theta_of(dist)
        scale = sensitivity / epsilon

        mu, sigma = family.moments(theta)
        lower, upper = family.valid_region(n)
        s_name, v_name = f"{name}_s", f"{name}_sigma2"
        # Chains start from a prior draw (Algorithm 1), one per chain, rather than PyMC's
        # shared support point: the Gibbs chain can mix slowly, and dispersed starts are what
        # make R-hat able to see that.
        with model:
            if family.stat_shape == ():
                s = SuffStatNormal(
                    s_name,
                    mean=n * mu,
                    var=n * sigma,
                    lower=lower[0],
                    upper=upper[0],
                    initval="prior",
                )
            else:
                s = SuffStatSimplexNormal(
                    s_name, mean=n * mu, cov=n * sigma, total=n, initval="prior"
                )
            y = pm.Laplace(name, mu=s, b=scale, observed=value)
            sigma2 = LaplaceNoiseVariance(
                v_name, released=y, suffstat=s, scale=scale, initval="prior"
            )

        conjugate = _is_conjugate_prior(model, theta, family)
        info = NoisySuffStatInfo(
            name=name,
            suffstat=s_name,
            noise_variance=v_name,
            theta=theta.name if conjugate else None,
            family=family,
            n=n,
            epsilon=epsilon,
            sensitivity=sensitivity,
        )
        setattr(s.tag, TAG, info)
        setattr(sigma2.tag, TAG, info)
        if conjugate:
            setattr(theta.tag, TAG, (*getattr(theta.tag, TAG, ()), info))
            if model.rvs_to_initial_values.get(theta) is None:
                model.set_initval(theta, "prior")
        return y


def _release_settings(
    family: ExponentialFamily,
    release: Release | None,
    *,
    n: Any,
    epsilon: Any,
    sensitivity: Any,
    observed: Any,
) -> tuple[int, float, float, npt.NDArray[np.float64]]:
    """Check and return (n, ε, Δ, y) from a Release or from explicit arguments."""
    explicit = {"n": n, "epsilon": epsilon, "sensitivity": sensitivity, "observed": observed}
    if release is not None:
        if not isinstance(release, Release):
            raise TypeError(f"release must be a pymc_dp.Release (got {type(release).__name__})")
        given = [k for k, v in explicit.items() if v is not None]
        if given:
            raise TypeError(f"pass either release= or {given}, not both")
        released_family = release.get_family()
        if released_family != family:
            raise ValueError(
                f"dist is {family!r} but the release is for {released_family!r}; "
                "model the records with the family they were released for"
            )
        return release.n, release.epsilon, release.sensitivity, np.asarray(release.value)

    missing = [k for k, v in explicit.items() if v is None]
    if missing:
        raise TypeError(
            f"NoisySuffStat needs release= or all of n, epsilon, sensitivity, "
            f"observed; missing {missing}"
        )
    n = check_int(n, "n", minimum=1)
    epsilon = check_positive(epsilon, "epsilon")
    sensitivity = check_positive(sensitivity, "sensitivity")
    value = check_finite_array(observed, "observed").astype(np.float64)
    if value.shape != family.stat_shape:
        raise ValueError(
            f"observed must have shape {family.stat_shape} for {family!r} (got {value.shape})"
        )
    if sensitivity < family.sensitivity:
        warnings.warn(
            f"sensitivity={sensitivity} is below the {family.sensitivity} that ε-DP needs for "
            f"{family!r}: that release was not {epsilon}-DP. Inference follows the noise "
            "actually added.",
            UserWarning,
            stacklevel=3,
        )
    return n, epsilon, sensitivity, value


def _is_conjugate_prior(model: pm.Model, theta: Any, family: ExponentialFamily) -> bool:
    """Whether θ is itself a free variable with the family's conjugate prior."""
    return theta in model.free_RVs and family.is_conjugate_prior(theta)
