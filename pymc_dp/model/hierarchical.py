"""Partially pooled models of grouped releases (:class:`~pymc_dp.ReleaseSet`), for ``fit``.

One release per group, one parameter per group, drawn from a common population on the link
scale. A scalar θ_g (logit, log) and a location-scale μ_g are partially non-centred group by
group (:func:`information_weights`): non-centred where a group's release says little about it (NUTS
then mixes when the groups are alike, small τ), centred where the release pins it (large groups
at a large ε), where the non-centred model mixes badly. The Categorical's free logits are
centred in the same way along each group's own directions (the eigenvectors of the release's
information about them; ``GROUPED_LINKS["softmax"].free_logit_information``). The Normal's
log σ_g is non-centred. With a window, μ and log τ (and the Normal's ν and log τ_σ) start at
what the releases estimate (:func:`window_start`) and are sampled in units of their standard
errors (:func:`released_scales`): the same posterior, and first tuning steps of every NUTS
backend sized for them.
A family joins one of these models by naming its link in its declaration
(:attr:`~pymc_dp.families.FamilyDeclaration.grouped_link`; :data:`GROUPED_LINKS`):

==============  ==============================================================================
link            model (built-in families)
==============  ==============================================================================
logit           logit p_g ~ N(μ, τ²) (bernoulli, binomial)
log             log λ_g ~ N(μ, τ²) (poisson)
softmax         p_g = softmax(μ + τ z_g), μ and z_g zero-sum normal vectors (categorical)
location-scale  μ_g ~ N(μ, τ²), log σ_g = ν + τ_σ w_g, w_g ~ N(0, 1) (normal, lognormal)
==============  ==============================================================================

with μ ~ N(``mu_mean``, ``mu_sd``) and τ ~ HalfNormal(``tau_sd``) (and, for the Normal,
ν ~ N(``log_sigma_mean``, ``log_sigma_sd``), τ_σ ~ HalfNormal(``tau_sigma_sd``)). The
defaults come from public values only, as :mod:`pymc_dp.model.priors` does: μ centred at logit ½
(sd 1.5, flat over p on the probability scale) for counts of successes, and at log m for a
Poisson window [a, b] of centre m (sd 1, a factor e either way); τ ~ HalfNormal(1), groups
differing by a factor of up to about e on the link scale. Categorical log-odds have no
reference category: μ ~ ZeroSumNormal(``mu_sd`` = 1) over the K categories (p near uniform, a
factor of a few either way), τ ~ HalfNormal(1). A Normal window (a, b) of centre m and width w
(on log x for LogNormal) gives μ ~ N(m, w/2) and τ ~ HalfNormal(w/4), the population mean
anywhere in the window and the groups' means up to about half a window apart, and
ν ~ N(log(w/8), 0.75), τ_σ ~ HalfNormal(0.5): σ from about w/35 to w/2 (2 sd), the groups' σ
within a factor of about 2 of each other. The window is where the curator expects the records,
and this prior says so as :mod:`pymc_dp.model.priors`' Inverse-Gamma does for one release: σ
above w/2 holds 3% of its mass (the Inverse-Gamma's 2.6%) and above w 0.3% (0.2%). The earlier
ν ~ N(log(w/4), 1) gave σ above w/2 25%, and its sums' far mode (σ_g several windows wide, the
few records inside the window making up the noisy sums) took one NUTS chain of two in most
seeds on the benchmark's releases (``docs/scale.md``).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pymc_dp.curator.release_set import ReleaseSet
from pymc_dp.families import ExponentialFamily, declared_families, family_declaration
from pymc_dp.kernels.group_jump import JumpProposal
from pymc_dp.mechanisms import DISCRETE_GAUSSIAN
from pymc_dp.model.noisy_suffstat import NoisySuffStat
from pymc_dp.model.starts import started
from pymc_dp.model.step_methods.group_jump import GROUP_JUMP_TAG, GroupEffects

__all__ = [
    "GROUPED_LINKS",
    "MIN_CENTRED_GROUPS",
    "GroupedLink",
    "between_group_variance",
    "build_grouped_model",
    "centring_weights",
    "group_summary",
    "group_variables",
    "grouped_prior_hyperparameters",
    "hierarchical_families",
    "information_weights",
    "link_description",
    "population_variables",
    "released_scales",
    "save_grouped_figures",
    "shrunk_between_group_variance",
    "theta_name",
]

_Component = tuple[str | None, np.ndarray, np.ndarray, np.ndarray]
"""(label, draws ``(S, G)``, released ``(G,)``, naive ``(G,)``) of one component of θ_g."""


class GroupedLink(ABC):
    """One partially pooled model: how θ_g is drawn around a population, and its defaults.

    A family joins one by naming it in its declaration
    (:attr:`~pymc_dp.families.FamilyDeclaration.grouped_link`); the model then builds θ_g on the
    link's scale and hands it to the family's :meth:`~pymc_dp.families.ExponentialFamily.dist_at`.
    """

    prior_names: ClassVar[tuple[str, ...]] = ("mu_mean", "mu_sd", "tau_sd")
    """Names of the population prior's hyperparameters."""
    population: ClassVar[tuple[str, ...]] = ("mu", "tau")
    """Names of the population parameters."""

    @abstractmethod
    def defaults(self, family: ExponentialFamily, release: ReleaseSet) -> dict[str, float]:
        """The public defaults of the hyperparameters (window, categories; never the data)."""

    def group_variables(self, family: ExponentialFamily) -> tuple[str, ...]:
        """Names of the per-group parameters: θ's name in the family's prior (``p``, ``lam``)."""
        return family.declaration.prior.variables[:1]

    @abstractmethod
    def describe(self, family: ExponentialFamily, values: Mapping[str, float]) -> str:
        """One line: the link and the population prior, with its hyperparameters."""

    @abstractmethod
    def build(
        self,
        family: ExponentialFamily,
        values: Mapping[str, float],
        *,
        size: int,
        dims: str,
        name: str,
        release: ReleaseSet | None = None,
    ) -> Any:
        """Add the population and θ_g to the current model; return one record's dist at θ_g.

        ``release`` (the released values are public) may set the parametrisation, never the
        model.
        """

    def components(
        self, family: ExponentialFamily, post: Any, release: ReleaseSet
    ) -> list[_Component]:
        """Per component of θ_g: (label, draws, released, naive) for the summary and plots.

        A scalar θ has one component, label ``None``; the naive estimate takes y_g as exact:
        y_g / (n_g · trials).
        """
        size, n = len(release), release.n.astype(np.float64)
        value = release.value.reshape(size, -1)
        trials = release.first.family_params.get("trials", 1)
        draws = post[self.group_variables(family)[0]].values.reshape(-1, size)
        return [(None, draws, value[:, 0], value[:, 0] / (n * trials))]

    def axis_label(self, family: ExponentialFamily, label: str) -> str:
        """The x-axis of one component's panel in ``posterior.png``."""
        return f"{label} per group"


class _ScalarLink(GroupedLink):
    """link(θ_g) = μ + τ z_g, partially non-centred on z_g (:func:`centring_weights`)."""

    link: ClassVar[str]

    @staticmethod
    @abstractmethod
    def inverse(eta: Any) -> Any:
        """θ from the link scale."""

    @abstractmethod
    def information(
        self, family: ExponentialFamily, release: ReleaseSet
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per group: the link-scale estimate from y_g, and the release's information about it."""

    def describe(self, family: ExponentialFamily, values: Mapping[str, float]) -> str:
        theta = self.group_variables(family)[0]
        return (
            f"{self.link} {theta}_g = mu + tau z_g, mu ~ Normal({values['mu_mean']:.3g}, "
            f"{values['mu_sd']:g}), tau ~ HalfNormal({values['tau_sd']:g})"
        )

    def build(self, family, values, *, size, dims, name, release=None):
        mu_start = tau_start = None
        scales: tuple[float | None, float | None] = (None, None)
        weight = np.zeros(size)
        if release is not None:
            estimate, information = self.information(family, release)
            weight = information_weights(estimate, information, values["tau_sd"])
            if family.needs_bounds:
                mu_start, tau_start = window_start(estimate, information, values)
                if tau_start is not None:
                    scales = released_scales(estimate, information, tau_start, values["mu_sd"])
        mu = started(
            pm.Normal, "mu", {"mu": values["mu_mean"], "sigma": values["mu_sd"]}, mu_start,
            scales[0],
        )  # fmt: skip
        tau = started(pm.HalfNormal, "tau", {"sigma": values["tau_sd"]}, tau_start, scales[1])
        eta = partially_centred("z", mu, tau, weight, dims)
        if release is not None and family.needs_bounds:
            _mark_group_effects(estimate, information, weight, values)
        theta = self.group_variables(family)[0]
        return family.dist_at(pm.Deterministic(theta, self.inverse(eta), dims=dims))


def _mark_group_effects(
    estimate: np.ndarray,
    information: np.ndarray,
    weight: np.ndarray,
    values: Mapping[str, float],
) -> None:
    """Leave on ``z`` what :class:`~pymc_dp.model.step_methods.GroupJumpStep` needs.

    A windowed family gives each group a far mode that NUTS cannot leave
    (:func:`~pymc_dp.model.step_methods.grouped_steps`). The jumps propose each η_g from its
    release's estimate, with the release's standard error (at most μ's and τ's prior scales
    together, where the release says little): ``estimate`` and ``information`` are the link's
    :meth:`_ScalarLink.information`.
    """
    proposal = _jump_proposal(estimate, information, values["mu_sd"] + values["tau_sd"])
    effects = GroupEffects(mu="mu", tau="tau", weight=np.asarray(weight, float), proposal=proposal)
    setattr(pm.modelcontext(None)["z"].tag, GROUP_JUMP_TAG, effects)


def _jump_proposal(estimate: np.ndarray, information: np.ndarray, cap: Any) -> JumpProposal:
    """The jumps' proposal: each group's estimate, with its standard error 1/√information.

    The error is at most ``cap`` (the population parameters' prior scales together), where the
    release says little.
    """
    sd = np.minimum(1.0 / np.sqrt(np.maximum(information, 1e-300)), cap)
    return JumpProposal(np.where(np.isfinite(estimate), estimate, np.nan), sd)


def _pair_moments(family: Any, release: ReleaseSet) -> tuple[np.ndarray, ...]:
    """Per group of a (Σz, Σz²) release: n, the mean of z and its variance.

    The variance is at least a twentieth of the window, squared; z is x, or log x for a
    LogNormal.
    """
    from pymc_dp.model.priors import window_scale

    n = release.n.astype(np.float64)
    value = np.asarray(release.value, dtype=np.float64).reshape(len(release), -1)
    _, width = window_scale(family, release.first.bounds)
    mean = value[:, 0] / n
    return n, mean, np.maximum(value[:, 1] / n - mean * mean, (width / 20.0) ** 2)


def _noise_variance(release: ReleaseSet) -> float:
    """Variance of the noise added to each released value."""
    scale = float(release.first.scale)
    return scale * scale * (1.0 if release.first.mechanism == DISCRETE_GAUSSIAN else 2.0)


def window_start(
    estimate: Any, information: Any, values: Mapping[str, float]
) -> tuple[float | None, float | None]:
    """Initial μ and τ of a windowed family's groups: from the released (public) values.

    μ starts at the median of the groups' released estimates η̂_g on the link scale (with
    their information I_g, the link's ``information``), kept within 2 sd of its prior, and τ
    at their spread (:func:`released_spread`). A window's sums have a far mode (a Poisson's
    λ_g above the window, whose few records inside make up the same sum), which the counts
    rule out when released and the population makes improbable otherwise, but which traps a
    chain that starts near it. PyMC and nutpie start μ at its prior's centre and τ at its
    prior's scale, then jitter every z_g by up to ±1: at 50 Poisson groups and ε = 1 one
    nutpie chain of two put most groups above the window and stayed (R-hat 1.83,
    ``docs/scale.md``), where PyMC's chains are freed by the group jumps. The prior is
    unchanged; ``(None, None)`` (PyMC's default start) when no estimate is finite.
    """
    finite = np.isfinite(estimate)
    if not finite.any():
        return None, None
    reach = 2.0 * values["mu_sd"]
    mu = np.clip(np.median(estimate[finite]), values["mu_mean"] - reach, values["mu_mean"] + reach)
    return float(mu), released_spread(estimate[finite], information[finite], values["tau_sd"])


def released_scales(
    estimate: Any, information: Any, spread: float, mean_sd: float
) -> tuple[float, float]:
    """How far the release lets μ and log τ move: the scales NUTS first steps them in.

    With the random-effects weights w_g = 1/(τ̂² + 1/I_g) at τ̂ = ``spread``, μ's standard
    error is 1/√Σw_g, and log τ's 1/√(2τ̂⁴Σw_g²) (Fisher's information about τ² is ½Σw_g²),
    kept at most ``mean_sd`` (μ's prior sd) and 1 (log τ's spread under its HalfNormal
    prior): never wider than the prior. Public values only; the posterior is unchanged
    (:func:`~pymc_dp.model.starts.started`).
    """
    finite = np.isfinite(estimate) & (np.asarray(information) > 0.0)
    weight = 1.0 / (spread * spread + 1.0 / np.asarray(information, float)[finite])
    total, squares = float(np.sum(weight)), float(np.sum(weight * weight))
    mu = 1.0 / math.sqrt(total) if total > 0.0 else mean_sd
    log_tau = 1.0 / math.sqrt(2.0 * spread**4 * squares) if squares > 0.0 else 1.0
    return min(mu, mean_sd), min(log_tau, 1.0)


def released_spread(estimate: Any, information: Any, scale: float) -> float:
    """Initial spread of the groups' effects: the DerSimonian–Laird τ̂ of the released estimates.

    √τ̂² (:func:`between_group_variance`, averaged over coordinates) kept within [a tenth,
    twice] ``scale``, the scale of the spread's prior: under wide noise τ̂ can be 0 or far
    out in the prior's tail, and a chain started there mixes slowly.
    """
    tau2 = float(np.mean(between_group_variance(estimate, information)))
    return float(np.clip(np.sqrt(tau2), scale / 10.0, 2.0 * scale))


def partially_centred(
    name: str, mu: Any, tau: Any, weight: np.ndarray, dims: str | tuple[str, ...]
) -> Any:
    """η_g ~ N(μ, τ²) through the free variable ``name``, centred by ``weight`` (in [0, 1]).

    ``name`` is z_g ~ N(w_g μ, τ^(2 w_g)) and η_g = μ + τ^(1−w_g) (z_g − w_g μ); all weights
    0 give the plain non-centred z_g ~ N(0, 1), η_g = μ + τ z_g.
    """
    if np.all(weight == 0.0):
        return mu + tau * pm.Normal(name, 0.0, 1.0, dims=dims)
    # τ^w_g as exp(w_g log τ), τ^(1−w_g) as τ / τ^w_g: one exp a group where pow with a
    # vector exponent costs three (pow, and two more in its gradient); log τ of τ's log
    # transform rewrites away.
    spread = pt.exp(weight * pt.log(tau))
    z = pm.Normal(name, weight * mu, spread, dims=dims)
    return mu + tau / spread * (z - weight * mu)


def centring_weights(release: ReleaseSet, *, tau_sd: float | None = None) -> np.ndarray:
    """How far to centre each group's effect in a partially pooled model, from public values.

    For a model of your own, ``w = pmdp.centring_weights(rs)`` then
    ``z = pm.Normal("z", w * mu, tau**w, dims="group")`` and
    ``eta = mu + tau**(1 - w) * (z - w * mu)`` gives η_g ~ N(μ, τ²) as ``mu + tau * z`` with
    ``z ~ N(0, 1)`` does, and the same posterior, with far better mixing where some groups'
    releases pin their η_g (:func:`information_weights`; :func:`build_grouped_model` does this).

    Parameters
    ----------
    release
        A grouped release of a family with a scalar link (logit, log) or a location-scale one
        (the weights are then those of the groups' means).
    tau_sd
        Scale of τ's prior (HalfNormal); default the link's (:func:`grouped_prior_hyperparameters`).

    Returns
    -------
    numpy.ndarray
        w_g in [0, 1], one per group.

    Raises
    ------
    ValueError
        If the family's link has no scalar effect per group (Categorical: its free logits
        are centred along each group's own directions, which one weight per group cannot
        say; :func:`build_grouped_model` does it).

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp as pmdp
    >>> rng = np.random.default_rng(0)
    >>> keys = [f"site{g}" for g in range(12)]
    >>> by = np.repeat(keys, [10, *[1000] * 10, 5000])
    >>> rs = pmdp.release_grouped(rng.binomial(1, 0.3, by.size), pm.Bernoulli, epsilon=1.0,
    ...     by=by, groups=keys, sizes="public", rng=1)
    >>> w = pmdp.centring_weights(rs)
    >>> bool(w[0] < 0.1 < 0.9 < w[-1])
    True
    """
    family = _check_family(release)
    link = _link(family.name)
    if not hasattr(link, "information"):
        raise ValueError(
            f"release: a grouped {family.name} release has no scalar effect per group to "
            "centre (build_grouped_model centres its free logits along each group's own "
            "directions)"
        )
    if tau_sd is None:
        tau_sd = link.defaults(family, release)["tau_sd"]
    return information_weights(*link.information(family, release), tau_sd)


MIN_CENTRED_GROUPS = 10
"""Fewer groups than this keep the non-centred model (:func:`information_weights`)."""


def information_weights(estimate: Any, information: Any, tau_sd: float) -> np.ndarray:
    """How far to centre each group's z_g: w_g = τ̂² / (τ̂² + 1/I_g), in [0, 1].

    For η_g ~ N(μ, τ²) observed with variance 1/I_g, z_g ~ N(w_g μ, τ^(2 w_g)) with
    η_g = μ + τ^(1−w_g) (z_g − w_g μ) is the partially non-centred parametrisation of
    Papaspiliopoulos, Roberts & Sköld (2007): w_g = 0 is the non-centred one (best where the
    data say little about η_g: z_g ≈ its prior whatever τ), w_g = 1 the centred one (best where
    they pin η_g: its posterior then does not move with μ or τ), and the weight above makes
    z_g a posteriori uncorrelated with μ in the normal model. The law of η_g, and so the
    posterior, is the same for every w. τ̂² is the DerSimonian–Laird estimate from the groups'
    estimates η̂_g and their information I_g (:func:`between_group_variance`), shrunk towards
    0 by its own jackknife standard error (:func:`shrunk_between_group_variance`; at least
    (tau_sd/10)²): where every group's release is noisy next to the spread, τ̂² is noise, and
    centring by it brought back the centred funnel at small τ (11.3 for a true 1 at 500
    windowed Normal groups and ε = 0.1: 114 divergences). Too little centring costs ESS where
    too much costs divergences, so the estimate errs low. The unweighted moment estimate
    var(η̂_g) − mean(1/I_g) it replaced was
    negative at ε = 0.1 on every benchmark release, where a few small groups' noise swamps the
    spread (Binomial, Poisson, Categorical: τ̂² at the floor, a ninth to a twenty-fifth of the
    truth), or 70 times the truth (Normal window); DerSimonian–Laird weighs each group by I_g
    and came within a factor of 3 in most of them (``docs/scale.md``).

    A vector η_g ~ N(μ, τ² I) (the Categorical's free logits) takes ``estimate`` of shape
    ``(G, J)`` on any orthonormal coordinates and ``information`` ``(G, J)`` the eigenvalues of
    each group's information matrix: τ̂² is then the mean over the J coordinates, and the
    weights, one per group and eigenvector, are those of the eigenvectors' coordinates.

    With fewer than :data:`MIN_CENTRED_GROUPS` groups every weight is 0: τ is then weakly
    identified, and a centred group's funnel at small τ mixes worse than the non-centred model
    (3 groups at ε = 1e6: μ's posterior sd 1.33× the exact model's with centred groups).
    """
    estimate = np.asarray(estimate, dtype=np.float64)
    information = np.maximum(np.asarray(information, dtype=np.float64), 1e-12)
    if estimate.shape[0] < MIN_CENTRED_GROUPS:
        return np.zeros(information.shape)
    tau2 = max(shrunk_between_group_variance(estimate, information), (tau_sd / 10.0) ** 2)
    return tau2 / (tau2 + 1.0 / information)


def shrunk_between_group_variance(estimate: Any, information: Any) -> float:
    """The DerSimonian–Laird τ̂² shrunk by its jackknife standard error: τ̂² (1 − SE²/τ̂²)₊.

    τ̂² is :func:`between_group_variance` before its truncation at 0, averaged over the
    coordinates of a vector effect, and SE its leave-one-group-out (jackknife) standard error,
    which needs no model of the noise (Laplace noise is heavy-tailed) and costs O(G). For an
    unbiased τ̂² of variance SE², τ̂⁴ − SE² is unbiased for τ⁴, so (τ̂⁴ − SE²)₊/τ̂² is τ̂²
    where τ̂² lies many SEs above 0 and 0 where it lies within one SE of it: a release that
    does not measure the spread gets none. A hard test (centre only where τ̂² > 2 SE) was
    tried and dropped: it also took the centring from 50 Categorical groups at ε = 0.1, whose
    τ̂² was 1.8 SEs above 0 and whose centring doubled ESS/s (``docs/scale.md``).

    Parameters
    ----------
    estimate, information
        As :func:`between_group_variance`; fewer than 3 groups give 0.

    Returns
    -------
    float
        The shrunk τ̂², at least 0.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> info = rng.uniform(1.0, 100.0, size=4000)
    >>> eta = 0.5 + rng.normal(0.0, np.sqrt(0.25 + 1.0 / info))
    >>> round(shrunk_between_group_variance(eta, info), 2)
    0.25
    >>> noisy = 1.0 / rng.uniform(100.0, 500.0, size=500)
    >>> shrunk_between_group_variance(rng.normal(0.0, np.sqrt(1.0 + 1.0 / noisy)), noisy) < 1.0
    True
    """
    estimate = np.asarray(estimate, dtype=np.float64).reshape(len(estimate), -1)
    weight = np.asarray(information, dtype=np.float64).reshape(estimate.shape)
    groups = estimate.shape[0]
    if groups < 3:
        return 0.0
    total, square, first, second, eta = _weighted_sums(estimate, weight)
    full = float(np.mean(_dersimonian_laird(total, square, first, second, groups)))
    left_out = np.mean(
        _dersimonian_laird(total - weight, square - weight * weight, first - weight * eta,
                           second - weight * eta * eta, groups - 1),
        axis=-1,
    )  # fmt: skip
    variance = (groups - 1) / groups * np.sum((left_out - left_out.mean()) ** 2)
    if full <= 0.0:
        return 0.0
    return max(full - float(variance) / full, 0.0)


def _weighted_sums(estimate: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, ...]:
    """S₁ = Σ I_g, S₂ = Σ I_g², Σ I_g η_g, Σ I_g η_g² and η_g, η centred at its I-weighted mean.

    Centred so that Q = Σ I_g η_g² − (Σ I_g η_g)²/S₁ is not a difference of large numbers.
    """
    total = weight.sum(axis=0)
    eta = estimate - np.sum(weight * estimate, axis=0) / total
    return (
        total,
        np.sum(weight * weight, axis=0),
        np.sum(weight * eta, axis=0),
        np.sum(weight * eta * eta, axis=0),
        eta,
    )


def _dersimonian_laird(
    total: np.ndarray, square: np.ndarray, first: np.ndarray, second: np.ndarray, groups: int
) -> np.ndarray:
    """(Q − (G − 1)) / (S₁ − S₂/S₁) from :func:`_weighted_sums`' sums, not truncated at 0."""
    return (second - first * first / total - (groups - 1)) / (total - square / total)


def between_group_variance(estimate: Any, information: Any) -> np.ndarray:
    """The DerSimonian–Laird estimate of τ² in η̂_g ~ N(η, τ² + 1/I_g), per coordinate.

    τ̂² = max(0, (Q − (G − 1)) / (S₁ − S₂/S₁)) with Q = Σ I_g (η̂_g − η̄)², η̄ the
    I-weighted mean, S_k = Σ I_g^k (DerSimonian & Laird 1986, the random-effects
    meta-analysis moment estimator): groups whose release says little weigh little.

    Parameters
    ----------
    estimate
        η̂_g, shape ``(G,)`` or ``(G, J)``.
    information
        I_g > 0, the same shape.

    Returns
    -------
    numpy.ndarray
        τ̂², shape ``()`` or ``(J,)``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> info = rng.uniform(1.0, 100.0, size=4000)
    >>> eta = 0.5 + rng.normal(0.0, np.sqrt(0.25 + 1.0 / info))
    >>> round(float(between_group_variance(eta, info)), 2)
    0.25
    """
    estimate = np.asarray(estimate, dtype=np.float64)
    weight = np.asarray(information, dtype=np.float64)
    total, square, first, second, _ = _weighted_sums(estimate, weight)
    return np.maximum(_dersimonian_laird(total, square, first, second, estimate.shape[0]), 0.0)


def _zero_sum_basis(k: int) -> np.ndarray:
    """An orthonormal basis ``(k, k − 1)`` of the vectors of R^k that sum to zero."""
    _, vectors = np.linalg.eigh(np.eye(k) - 1.0 / k)
    return vectors[:, 1:]  # eigenvalue 0 (the ones vector) first, then k − 1 ones


class _LogitLink(_ScalarLink):
    """logit p_g = μ + τ z_g: μ ~ N(0, 1.5), flat over p on the probability scale."""

    link = "logit"

    @staticmethod
    def inverse(eta: Any) -> Any:
        return pm.math.invlogit(eta)

    def defaults(self, family, release):
        return {"mu_mean": 0.0, "mu_sd": 1.5, "tau_sd": 1.0}

    def information(self, family, release):
        # Σx of n_g records with `trials` each: var n_g·trials·p(1 − p), and dη/dp = 1/(p(1 − p)).
        total = release.n.astype(np.float64) * family.domain[1]
        p = np.clip(np.ravel(release.value) / total, 0.5 / total, 1.0 - 0.5 / total)
        var = total * p * (1.0 - p)
        return np.log(p / (1.0 - p)), var * var / (var + _noise_variance(release))


class _LogLink(_ScalarLink):
    """log θ_g = μ + τ z_g for a windowed θ that is the record mean: μ ~ N(log m, 1)."""

    link = "log"

    @staticmethod
    def inverse(eta: Any) -> Any:
        return pm.math.exp(eta)

    def defaults(self, family, release):
        from pymc_dp.model.priors import window_scale

        centre, _ = window_scale(family, release.first.bounds)
        return {"mu_mean": math.log(centre), "mu_sd": 1.0, "tau_sd": 1.0}

    def information(self, family, release):
        # Σx of n_g Poisson records: var n_g λ = d(n_g λ)/d log λ (the window's cut ignored).
        n = release.n.astype(np.float64)
        lam = np.clip(np.ravel(release.value) / n, 0.5 / n, release.first.bounds[1])
        var = n * lam
        return np.log(lam), var * var / (var + _noise_variance(release))


class _SoftmaxLink(GroupedLink):
    """p_g = softmax(η_g), η_g − μ ~ ZeroSumNormal(τ), μ ~ ZeroSumNormal(``mu_sd``) over K.

    η_g = μ + τ z_g with z_g ~ ZeroSumNormal(1) (non-centred) below
    :data:`MIN_CENTRED_GROUPS` groups or without a release; otherwise each group's K − 1 free
    logits are partially centred along the eigenvectors of the release's information about
    them (:meth:`free_logit_information`, :func:`information_weights`, the scalar links'
    :func:`partially_centred` on their coordinates). The prior of (μ, τ, η_g), and so the
    posterior, is the same for any weights.
    """

    prior_names = ("mu_sd", "tau_sd")

    def defaults(self, family, release):
        return {"mu_sd": 1.0, "tau_sd": 1.0}

    def describe(self, family, values):
        theta = self.group_variables(family)[0]
        return (
            f"{theta}_g = softmax(mu + tau z_g), mu ~ ZeroSumNormal({values['mu_sd']:g}), "
            f"z_g ~ ZeroSumNormal(1), tau ~ HalfNormal({values['tau_sd']:g})"
        )

    def free_logit_information(
        self, family: ExponentialFamily, release: ReleaseSet
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per group, the free logits' estimate, information and directions.

        Not the scalar links' ``information`` (one number per group, which
        :func:`centring_weights` looks for): the information here is a matrix.

        The counts s_g of n_g records have the CLT covariance Σ_g = n_g (diag p_g − p_g p_gᵀ),
        which is also ∂(n_g p_g)/∂η_g on the zero-sum logits η_g, and y_g = s_g + noise of
        variance σ² per count, so the release's information about η_g is
        I_g = Σ_g (Σ_g + σ² I)⁻¹ Σ_g (the Binomial's var²/(var + σ²) in matrix form), at
        p̂_g from y_g (clipped to at least half a count, public). On an orthonormal basis H of
        the zero-sum vectors, Hᵀ I_g H = V_g diag(λ_g) V_gᵀ.

        Returns
        -------
        tuple of numpy.ndarray
            Hᵀ η̂_g ``(G, K − 1)`` (η̂_g the centred log p̂_g), λ_g ``(G, K − 1)`` and the
            directions E_g = H V_g ``(G, K, K − 1)``: orthonormal, zero-sum, and the release's
            information about the coordinates Eᵀ η_g is diag(λ_g).
        """
        n = release.n.astype(np.float64)
        value = np.asarray(release.value, dtype=np.float64).reshape(len(release), -1)
        k = value.shape[1]
        counts = np.clip(value, 0.5, n[:, None])
        p = counts / counts.sum(axis=1, keepdims=True)
        cov = n[:, None, None] * (
            np.einsum("gk,kl->gkl", p, np.eye(k)) - p[:, :, None] * p[:, None, :]
        )
        noisy = cov + _noise_variance(release) * np.eye(k)
        info = cov @ np.linalg.solve(noisy, cov)
        basis = _zero_sum_basis(k)
        lam, vec = np.linalg.eigh(basis.T @ info @ basis)
        log_p = np.log(p)
        estimate = (log_p - log_p.mean(axis=1, keepdims=True)) @ basis
        return estimate, lam, basis @ vec

    def build(self, family, values, *, size, dims, name, release=None):
        k = family.stat_shape[0]
        cat = f"{name}_category"
        model = pm.modelcontext(None)
        model.add_coord(cat, list(range(k)))
        mu = pm.ZeroSumNormal("mu", sigma=values["mu_sd"], dims=cat)
        tau = pm.HalfNormal("tau", values["tau_sd"])
        weight = np.zeros((size, k - 1))
        if release is not None:
            estimate, lam, directions = self.free_logit_information(family, release)
            weight = information_weights(estimate, lam, values["tau_sd"])
        if np.all(weight == 0.0):
            z = pm.ZeroSumNormal("z", sigma=1.0, dims=(dims, cat))
            logits = mu + tau * z
        else:
            # Each group's free logits on its own directions E_g (the eigenvectors of the
            # release's information): c_g = E_gᵀ μ, z_g ~ N(w_g c_g, τ^(2 w_g)) and
            # η_g = μ + E_g τ^(1−w_g) (z_g − w_g c_g). Given μ and τ, E_gᵀ η_g ~ N(c_g, τ² I)
            # and η_g − μ lies in the zero-sum plane (μ = E_g c_g): η_g − μ is ZeroSumNormal(τ)
            # for any weights, as with z_g ~ ZeroSumNormal(1), η_g = μ + τ z_g.
            free = f"{name}_free_logit"
            model.add_coord(free, list(range(k - 1)))
            centre = pt.sum(directions * mu[None, :, None], axis=1)
            coordinates = partially_centred("z", centre, tau, weight, (dims, free))
            logits = mu + pt.sum(directions * (coordinates - centre)[:, None, :], axis=2)
        # Static (G, K): the Categorical family reads K from p's shape.
        logits = pt.specify_shape(logits, (size, k))
        theta = self.group_variables(family)[0]
        p = pm.Deterministic(theta, pm.math.softmax(logits, axis=-1), dims=(dims, cat))
        return family.dist_at(p)

    def components(self, family, post, release):
        size, n = len(release), release.n.astype(np.float64)
        value = release.value.reshape(size, -1)
        draws = post[self.group_variables(family)[0]].values.reshape(-1, size, value.shape[1])
        return [
            (str(k), draws[..., k], value[:, k], value[:, k] / n) for k in range(value.shape[1])
        ]

    def axis_label(self, family, label):
        return f"{self.group_variables(family)[0]} of category {label} per group"


class _LocationScaleLink(GroupedLink):
    """μ_g = μ + τ z_g and log σ_g = ν + τ_σ w_g, for (Σz, Σz²) over a window."""

    prior_names = ("mu_mean", "mu_sd", "tau_sd", "log_sigma_mean", "log_sigma_sd", "tau_sigma_sd")
    population = ("mu", "tau", "log_sigma", "tau_sigma")

    def defaults(self, family, release):
        from pymc_dp.model.priors import window_scale

        centre, width = window_scale(family, release.first.bounds)
        return {
            "mu_mean": centre,
            "mu_sd": width / 2.0,
            "tau_sd": width / 4.0,
            "log_sigma_mean": math.log(width / 8.0),
            "log_sigma_sd": 0.75,
            "tau_sigma_sd": 0.5,
        }

    def group_variables(self, family):
        return ("mu_g", "sigma_g")

    def information(self, family, release):
        # Σz of n_g records: mean n_g μ_g, variance n_g σ_g² (σ_g from the pair), plus the noise
        n, mean, var = _pair_moments(family, release)
        return mean, n * n / (n * var + _noise_variance(release))

    def scale_information(self, family, release):
        """Per group: log σ̂_g from the pair, and the information about it (1 / its variance).

        σ̂_g² = Σz²/n − (Σz/n)² (at least (w/20)²), with variance about 1/(2n) from the records
        and, by the delta method, (1 + 4 m̂²)·v/(4 n² σ̂⁴) from the noise of variance v on each
        sum.
        """
        n, mean, var = _pair_moments(family, release)
        noise = _noise_variance(release) * (1.0 + 4.0 * mean * mean) / (4.0 * n * n * var * var)
        return 0.5 * np.log(var), 1.0 / (0.5 / n + noise)

    def jump_effects(
        self,
        family: ExponentialFamily,
        release: ReleaseSet,
        weight: np.ndarray,
        values: Mapping[str, float],
    ) -> None:
        """Leave on ``z`` of the context model the jumps' proposal for (μ_g, log σ_g).

        The :class:`~pymc_dp.GroupJumpStep` then moves ``z`` and ``z_sigma`` together, as the
        scalar links' jumps (``_mark_group_effects``): each group's estimate from its pair,
        with its standard error, at most the prior scales of the population parameters
        together. A group whose noisy sums are near 0 is explained as well by records inside
        the window near 0 as by records outside it, above or below, and NUTS crosses between
        those modes slowly: on Grunfeld's 11 firms at ε = 1 μ's bulk ESS was 6 and 22 of
        2 × 1000 draws (R-hat 1.24, 1.07), with one round of jumps an iteration 62 and 90
        (1.03, 1.006), with 5 (the default at 11 groups, :func:`~pymc_dp.model.step_methods.
        jump_rounds`) 175 and 92 (1.004, 1.009); on the benchmark's 50 groups, whose records
        sit well inside, ESS/s is unchanged (geometric mean 1.00× over 6 seeds at both ε with
        one round, 1.01× over 3 with 2; ``docs/scale.md``). Under the wider ν prior
        before 2026-12-01 the jumps carried one chain into a collective far mode (σ_g near
        100); under the current prior no chain went there in those 12 runs.
        """
        parts = [
            (self.information(family, release), values["mu_sd"] + values["tau_sd"]),
            (
                self.scale_information(family, release),
                values["log_sigma_sd"] + values["tau_sigma_sd"],
            ),
        ]
        estimate = np.stack([e for (e, _), _ in parts], axis=-1)
        proposal = _jump_proposal(
            estimate, np.stack([i for (_, i), _ in parts], axis=-1), np.array([c for _, c in parts])
        )
        effects = GroupEffects(
            mu=("mu", "log_sigma"),
            tau=("tau", "tau_sigma"),
            weight=np.stack([np.asarray(weight, float), np.zeros(len(weight))], axis=-1),
            proposal=proposal,
            variables=("z_sigma",),
        )
        setattr(pm.modelcontext(None)["z"].tag, GROUP_JUMP_TAG, effects)

    def released_start(
        self,
        family: ExponentialFamily,
        release: ReleaseSet | None,
        values: Mapping[str, float] | None = None,
    ) -> tuple[float | None, float | None]:
        """Initial μ and ν: the medians of the groups' released estimates (public values).

        A window's sums have a far mode where σ_g is several windows wide and the few records
        inside explain the noisy sums; the default prior gives it little room, but a chain
        that PyMC starts at the prior's centre, far from both modes, can still settle there
        or between (one chain of two in one of four seeds at 50 groups and ε = 1; none of
        eight from here, ``docs/scale.md``). The prior is unchanged; ``None`` without a
        release (PyMC's default start). μ is kept inside the window and ν within 2 sd of its
        prior ``values`` (``log_sigma_mean``, ``log_sigma_sd``; the defaults' when ``None``).
        """
        if release is None:
            return None, None
        from pymc_dp.model.priors import window_scale

        _, mean, var = _pair_moments(family, release)
        centre, width = window_scale(family, release.first.bounds)
        if values is None:
            values = self.defaults(family, release)
        # Kept inside the window, and σ within the prior's 2 sd: under very wide noise the
        # medians of the groups' estimates can lie anywhere.
        mu = np.clip(np.median(mean), centre - width / 2.0, centre + width / 2.0)
        reach = 2.0 * values["log_sigma_sd"]
        log_sigma = np.clip(
            np.median(0.5 * np.log(var)),
            values["log_sigma_mean"] - reach,
            values["log_sigma_mean"] + reach,
        )
        return float(mu), float(log_sigma)

    def released_spreads(
        self, family: ExponentialFamily, release: ReleaseSet | None, values: Mapping[str, float]
    ) -> tuple[float | None, float | None]:
        """Initial τ and τ_σ: the groups' spreads, estimated from the released values.

        DerSimonian–Laird estimates (:func:`released_spread`) from the groups' means and
        log σ̂_g with their information. PyMC and nutpie start τ at its prior's scale otherwise
        (a quarter of the window), and their jitter of every z_g by up to ±1 then spreads the
        groups' μ_g over ±τ: at 500 groups and ε = 1 one chain of two under nutpie put a group
        below the window, in the far mode of its sums, in its first step and kept it there
        (R-hat 1.83, ``docs/scale.md``). The prior is unchanged; ``None`` without a release.
        """
        if release is None:
            return None, None
        return (
            released_spread(*self.information(family, release), values["tau_sd"]),
            released_spread(*self.scale_information(family, release), values["tau_sigma_sd"]),
        )

    def released_scales(
        self,
        family: ExponentialFamily,
        release: ReleaseSet | None,
        values: Mapping[str, float],
        spreads: tuple[float | None, float | None],
    ) -> tuple[float | None, ...]:
        """The scales NUTS first steps μ, τ, ν and τ_σ in (:func:`released_scales`).

        From the groups' means and log σ̂_g with their information, at the spreads
        :meth:`released_spreads` starts τ and τ_σ at; ``None`` each without a release.
        """
        if release is None or spreads[0] is None or spreads[1] is None:
            return None, None, None, None
        return (
            *released_scales(*self.information(family, release), spreads[0], values["mu_sd"]),
            *released_scales(
                *self.scale_information(family, release), spreads[1], values["log_sigma_sd"]
            ),
        )

    def describe(self, family, values):
        return (
            f"mu_g = mu + tau z_g, log sigma_g = log_sigma + tau_sigma w_g, "
            f"mu ~ Normal({values['mu_mean']:.4g}, {values['mu_sd']:.4g}), "
            f"tau ~ HalfNormal({values['tau_sd']:.4g}), "
            f"log_sigma ~ Normal({values['log_sigma_mean']:.4g}, {values['log_sigma_sd']:g}), "
            f"tau_sigma ~ HalfNormal({values['tau_sigma_sd']:g})"
        )

    def build(self, family, values, *, size, dims, name, release=None):
        start = self.released_start(family, release, values)
        spreads = self.released_spreads(family, release, values)
        scales = self.released_scales(family, release, values, spreads)
        mu = started(
            pm.Normal, "mu", {"mu": values["mu_mean"], "sigma": values["mu_sd"]}, start[0],
            scales[0],
        )  # fmt: skip
        tau = started(pm.HalfNormal, "tau", {"sigma": values["tau_sd"]}, spreads[0], scales[1])
        weight = np.zeros(size)
        if release is not None:
            weight = information_weights(*self.information(family, release), values["tau_sd"])
        mu_g = partially_centred("z", mu, tau, weight, dims)
        log_sigma = started(
            pm.Normal,
            "log_sigma",
            {"mu": values["log_sigma_mean"], "sigma": values["log_sigma_sd"]},
            start[1],
            scales[2],
        )
        tau_sigma = started(
            pm.HalfNormal, "tau_sigma", {"sigma": values["tau_sigma_sd"]}, spreads[1], scales[3]
        )
        z_sigma = pm.Normal("z_sigma", 0.0, 1.0, dims=dims)
        if release is not None:
            self.jump_effects(family, release, weight, values)
        mu_g = pm.Deterministic("mu_g", mu_g, dims=dims)
        sigma_g = pm.Deterministic(
            "sigma_g", pm.math.exp(log_sigma + tau_sigma * z_sigma), dims=dims
        )
        # The family's PyMC distribution is a location-scale one (pm.Normal, pm.LogNormal):
        # σ_g is given as it is drawn, not through σ².
        return family.pymc_distribution.dist(mu=mu_g, sigma=sigma_g)

    def components(self, family, post, release):
        # The naive moments (Σz/n, √(Σz²/n − (Σz/n)²)) of the window's records.
        size, n = len(release), release.n.astype(np.float64)
        value = release.value.reshape(size, -1)
        mean = value[:, 0] / n
        spread = np.sqrt(np.maximum(value[:, 1] / n - mean**2, 0.0))
        return [
            ("mu", post["mu_g"].values.reshape(-1, size), value[:, 0], mean),
            ("sigma", post["sigma_g"].values.reshape(-1, size), value[:, 1], spread),
        ]


GROUPED_LINKS: Mapping[str, GroupedLink] = {
    "logit": _LogitLink(),
    "log": _LogLink(),
    "softmax": _SoftmaxLink(),
    "location-scale": _LocationScaleLink(),
}
"""The partially pooled models, by the name a family's declaration gives its ``grouped_link``."""


def hierarchical_families() -> tuple[str, ...]:
    """Names of the families with a ready-made partially pooled model, by link.

    Examples
    --------
    >>> hierarchical_families()[:4]
    ('bernoulli', 'binomial', 'poisson', 'categorical')
    """
    declarations = declared_families()
    return tuple(d.name for link in GROUPED_LINKS for d in declarations if d.grouped_link == link)


def __getattr__(name: str) -> Any:
    # HIERARCHICAL_FAMILIES, the constant hierarchical_families() replaces, still reads: from
    # the declarations, so that a family registered after this module was imported is listed.
    if name == "HIERARCHICAL_FAMILIES":
        return hierarchical_families()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _link(family_name: str) -> GroupedLink:
    link = family_declaration(family_name).grouped_link
    if link not in GROUPED_LINKS:
        raise ValueError(
            f"no ready-made grouped model for the {family_name} family (only "
            f"{', '.join(hierarchical_families())}); write the model with NoisySuffStat"
        )
    return GROUPED_LINKS[link]


def grouped_prior_hyperparameters(
    release: ReleaseSet, prior: Mapping[str, Any] | None = None
) -> dict[str, float]:
    """The population prior's hyperparameters: public defaults, then ``prior``.

    The names are ``mu_mean``, ``mu_sd`` and ``tau_sd`` (Categorical: ``mu_sd`` and
    ``tau_sd``; Normal and LogNormal also ``log_sigma_mean``, ``log_sigma_sd`` and
    ``tau_sigma_sd``); see :mod:`pymc_dp.model.hierarchical` for the defaults.

    Raises
    ------
    ValueError
        If a name is unknown, a value is not a finite number, or an sd is not > 0.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp as pmdp
    >>> rs = pmdp.release_grouped(np.array([2, 5, 1, 3]), pm.Poisson, epsilon=1.0,
    ...     bounds=(0, 20), by=["a", "a", "b", "b"], groups=["a", "b"], sizes="public", rng=0)
    >>> {k: round(v, 3) for k, v in grouped_prior_hyperparameters(rs).items()}
    {'mu_mean': 2.303, 'mu_sd': 1.0, 'tau_sd': 1.0}
    """
    family = _check_family(release)
    link = _link(family.name)
    values = link.defaults(family, release)
    names = link.prior_names
    for key, value in dict(prior or {}).items():
        if key not in names:
            raise ValueError(
                f"unknown prior parameter {key!r} for a grouped {family.name} release; the "
                f"names are {', '.join(names)}"
            )
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not math.isfinite(value):
            raise ValueError(f"prior {key} must be a finite number (got {value!r})")
        if not key.endswith("_mean") and value <= 0:
            raise ValueError(f"prior {key} must be > 0 (got {value!r})")
        values[key] = float(value)
    return values


def _check_family(release: Any) -> Any:
    if not isinstance(release, ReleaseSet):
        raise TypeError(f"release must be a pymc_dp.ReleaseSet (got {type(release).__name__})")
    family = release.first.get_family()
    _link(family.name)
    return family


def group_variables(release: ReleaseSet) -> tuple[str, ...]:
    """Names of the per-group parameters: ``("p",)``, ``("lam",)`` or ``("mu_g", "sigma_g")``."""
    family = release.first.get_family()
    return _link(family.name).group_variables(family)


def population_variables(release: ReleaseSet) -> tuple[str, ...]:
    """Names of the population parameters: ``("mu", "tau")``, and ν, τ_σ for the Normal."""
    return _link(release.family).population


def theta_name(release: ReleaseSet) -> str:
    """Name of the (first) per-group parameter: ``"p"``, ``"lam"`` or ``"mu_g"``."""
    return group_variables(release)[0]


def link_description(release: ReleaseSet, values: Mapping[str, float]) -> str:
    """One line: the model's link and population prior, with its hyperparameters."""
    family = release.first.get_family()
    return _link(family.name).describe(family, values)


def build_grouped_model(
    release: ReleaseSet,
    prior: Mapping[str, Any] | None = None,
    *,
    name: str = "y",
    dims: str = "group",
    likelihood: str = "auto",
) -> pm.Model:
    """The partially pooled model of a grouped release.

    Parameters
    ----------
    release
        A :class:`~pymc_dp.ReleaseSet` of a family with a grouped link
        (:func:`hierarchical_families`): Bernoulli, Binomial, Categorical or windowed Poisson,
        Normal or LogNormal releases among the built-in ones.
    prior
        The hyperparameters by name (:func:`grouped_prior_hyperparameters`); missing ones take
        the public defaults.
    name
        Name of the NoisySuffStat node.
    dims
        Name of the group dimension.
    likelihood
        Passed to :class:`~pymc_dp.NoisySuffStat`.

    Returns
    -------
    pymc.Model
        Free variables ``mu``, ``tau``, ``z`` (dims ``group``; Categorical: ``mu`` and ``z``
        also along ``{name}_category``, or ``z`` along ``{name}_free_logit`` (K − 1) when
        its groups are partially centred; Normal: also ``log_sigma``, ``tau_sigma`` and
        ``z_sigma``); deterministic ``p``, ``lam``, or ``mu_g`` and ``sigma_g`` per group.
        The node may add latent variables after these: the CLT groups' counts of a Categorical
        release with Laplace noise (``{name}_s_std``), or Σz of a Normal window (``{name}_s1``).

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp as pmdp
    >>> rs = pmdp.release_grouped(np.array([1, 0, 1, 1]), pm.Bernoulli, epsilon=1.0,
    ...     by=["a", "a", "b", "b"], groups=["a", "b"], sizes="public", rng=0)
    >>> model = build_grouped_model(rs)
    >>> [v.name for v in model.free_RVs], model.coords["group"]
    (['mu', 'tau', 'z'], ('a', 'b'))
    """
    family = _check_family(release)
    values = grouped_prior_hyperparameters(release, prior)
    link = _link(family.name)
    with pm.Model(coords=release.coords(dims)) as model:
        dist = link.build(family, values, size=len(release), dims=dims, name=name, release=release)
        NoisySuffStat(name, dist, release=release, dims=dims, likelihood=likelihood)
    return model


def _components(idata: Any, release: ReleaseSet) -> list[_Component]:
    """Per component of θ_g: (label, draws ``(S, G)``, released ``(G,)``, naive ``(G,)``)."""
    from pymc_dp._compat import posterior_dataset

    family = release.first.get_family()
    return _link(family.name).components(family, posterior_dataset(idata), release)


def group_summary(idata: Any, release: ReleaseSet) -> Any:
    """Per-group table: n_g, released y_g, naive estimate, posterior mean, sd, 3 % and 97 %.

    Returns
    -------
    pandas.DataFrame
        One row per group, indexed by the group keys; for a vector θ_g one row per group and
        component (category, or ``mu`` and ``sigma``), indexed by both.
    """
    import pandas as pd

    groups = [str(g) for g in release.groups]
    tables = []
    for label, draws, released, naive in _components(idata, release):
        table = pd.DataFrame(
            {
                "n": release.n,
                "released": released,
                "naive": naive,
                "mean": draws.mean(axis=0),
                "sd": draws.std(axis=0, ddof=1),
                "q3%": np.quantile(draws, 0.03, axis=0),
                "q97%": np.quantile(draws, 0.97, axis=0),
            },
            index=pd.Index(groups, name=release.by or "group"),
        )
        if label is None:
            return table
        tables.append(table.assign(component=label).set_index("component", append=True))
    return pd.concat(tables).sort_index(level=0, sort_remaining=False).loc[groups]


def save_grouped_figures(idata: Any, release: ReleaseSet, out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``posterior.png`` (per-group intervals against the naive estimates) and ``trace.png``.

    A vector θ_g gets one panel per component (category, or μ_g and σ_g).

    Returns
    -------
    tuple of Path
        The two files written.
    """
    import matplotlib.pyplot as plt

    from pymc_dp.plots import plot_trace

    out_dir = Path(out_dir)
    parts = _components(idata, release)
    groups = [str(g) for g in release.groups]
    rows = np.arange(len(groups))[::-1]
    fig, axes = plt.subplots(
        1,
        len(parts),
        figsize=(1.0 + 5.5 * min(len(parts), 3), 1.2 + 0.4 * len(groups)),
        layout="constrained",
        squeeze=False,
    )
    name = theta_name(release)
    for ax, (label, draws, _, naive) in zip(axes[0], parts, strict=True):
        lo, hi = np.quantile(draws, [0.03, 0.97], axis=0)
        ax.hlines(rows, lo, hi, color="#0072B2", lw=2, label="DP posterior 94 %")
        ax.plot(draws.mean(axis=0), rows, "o", color="#0072B2")
        ax.plot(naive, rows, "x", color="#D55E00", label="naive (noisy value as exact)")
        ax.set_yticks(rows, groups)
        if label is None:
            ax.set_xlabel(f"{name} per group")
        else:
            ax.set_xlabel(_link(release.family).axis_label(release.first.get_family(), label))
    # Below the panels: inside, "best" still covered a group's interval (issue 36).
    handles, texts = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, texts, loc="outside lower center", ncols=2, frameon=False)
    counted = getattr(release, "window_count", None) is not None
    budget = (
        f"ε = {release.epsilon:g} (sums) + {release.first.count_epsilon:g} (window counts)"
        if counted
        else f"ε = {release.epsilon:g}"
    )
    fig.suptitle(
        f"Partially pooled fit of a grouped {release.family} release"
        + ("\n" if counted else ", ")
        + f"{budget}, {len(release)} groups"
    )
    posterior_png = out_dir / "posterior.png"
    fig.savefig(posterior_png, dpi=110)
    plt.close(fig)
    fig = plot_trace(
        idata, list(population_variables(release)), title="Population parameters (link scale)"
    )
    trace_png = out_dir / "trace.png"
    fig.savefig(trace_png, dpi=110)
    plt.close(fig)
    return posterior_png, trace_png
