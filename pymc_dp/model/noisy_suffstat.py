"""The ``NoisySuffStat`` observed node: a DP release inside an ordinary PyMC model.

For a released statistic of one number (Bernoulli, Binomial and every windowed family with a
scalar statistic) the node is, by default, *collapsed*: y | θ is the normal–Laplace convolution
with s and σ² integrated out (:class:`~pymc_dp.likelihoods.CollapsedLaplace`), so
``pm.sample()`` draws θ | y directly: :class:`~pymc_dp.GridStep` gives independent exact draws of
a scalar θ with a fixed prior, and NUTS samples any other θ. :func:`~pymc_dp.sample_latent` adds
exact draws of s and σ² to the posterior afterwards.

The window's (Σz, Σz²) of Normal and LogNormal records is collapsed too: y | θ is the bivariate
normal–Laplace convolution (:func:`~pymc_dp.likelihoods.collapsed_pair.CollapsedLaplacePair`),
and :class:`~pymc_dp.IndependenceStep` draws θ = (μ, σ²) as one block.

Otherwise (Categorical counts under the CLT, or ``method="augmented"``), one call adds three
variables to the model, in the paper's generative order (Bernstein & Sheldon 2018, §3.2):

* ``{name}_s``: the latent sufficient statistic s | θ ~ N(nμ(θ), nΣ(θ)) on its valid region;
* ``{name}``: the released y | s ~ Laplace(s, Δ/ε), observed;
* ``{name}_sigma2``: the Laplace mixing variance σ² | y, s (Park & Casella), so the trace shows
  it and the Gibbs update of s is a normal product.

``pm.sample()`` then assigns :class:`~pymc_dp.ConjugateStep` to θ (when its prior is the
conjugate one), :class:`~pymc_dp.NormProductStep` to s and :class:`~pymc_dp.NoiseVarianceStep`
to σ²; any other variable keeps PyMC's own sampler.

For ArviZ, the node also records the release: n, ε, Δ and the bounds as ``pm.Data``
(``constant_data`` of the sampling result), and the whole release as JSON for the result's
``attrs`` (:func:`release_attrs`). Vector statistics get named dimensions, and
``pm.sample_posterior_predictive`` draws new released statistics y = ŝ + Laplace(0, Δ/ε).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import numpy.typing as npt
import pymc as pm
import pytensor.tensor as pt

from pymc_dp._validation import (
    check_finite_array,
    check_int,
    check_noise_scale,
    check_positive,
)
from pymc_dp.curator.record import Release
from pymc_dp.curator.release_set import ReleaseSet
from pymc_dp.families import ExponentialFamily, TruncatedFamily, family_from_dist
from pymc_dp.families.record_laws import continuous_window
from pymc_dp.likelihoods.choice import (
    LIKELIHOODS,
    CltWarning,
    choose_likelihood,
    clt_trust,
    noise_law,
)
from pymc_dp.likelihoods.released_normal import ReleasedNormal
from pymc_dp.mechanisms import DISCRETE_GAUSSIAN
from pymc_dp.model.distributions import (
    AuxiliarySimplexSuffStat,
    AuxiliaryWindowSuffStat,
    LaplaceMixingVariance,
    LaplaceNoiseVariance,
    SuffStatNormal,
    SuffStatSimplexNormal,
    WindowSuffStat,
)
from pymc_dp.model.nodes.collapsed import collapsed_node, collapsed_pair_node, exact_node
from pymc_dp.model.nodes.counted import counted_node
from pymc_dp.model.nodes.gaussian import gaussian_collapsed_node
from pymc_dp.model.nodes.grouped import grouped_node
from pymc_dp.model.nodes.info import (
    GRID_TAG,
    LIKELIHOOD_ATTR_PREFIX,
    RELEASE_ATTR_PREFIX,
    TAG,
    THETA_TAG,
    NodeRelease,
    NoisySuffStatInfo,
    node_infos,
    register_node,
    release_attrs,
    releases_from_attrs,
)
from pymc_dp.model.nodes.records import needs_records, records_node, records_ready

__all__ = [
    "GRID_TAG",
    "LIKELIHOOD_ATTR_PREFIX",
    "METHODS",
    "RELEASE_ATTR_PREFIX",
    "TAG",
    "THETA_TAG",
    "NoisySuffStat",
    "NoisySuffStatInfo",
    "node_infos",
    "release_attrs",
    "releases_from_attrs",
]

METHODS = ("auto", "collapsed", "augmented")
"""Values of ``NoisySuffStat(method=...)``."""


class NoisySuffStat:
    """A released noisy sufficient statistic, as an observed node of a PyMC model.

    Parameters
    ----------
    name
        Name of the observed node; the latent s and σ² are ``{name}_s`` and ``{name}_sigma2``.
    dist
        Distribution of one record, with θ inside: ``pm.Bernoulli.dist(p=p)``,
        ``pm.Binomial.dist(n=trials, p=p)``, ``pm.Categorical.dist(p=p)``, or a family released
        over a window: ``pm.Exponential``, ``pm.Gamma`` (fixed alpha), ``pm.Poisson``,
        ``pm.Geometric``, ``pm.Normal``, ``pm.LogNormal``.
    release
        A :class:`~pymc_dp.Release`. Alternatively give ``n``, ``epsilon``, ``sensitivity`` and
        ``observed`` (and ``bounds`` for a windowed family) for a value released elsewhere.
        Or a :class:`~pymc_dp.ReleaseSet` (one release per group, from
        :func:`~pymc_dp.release_grouped`): y then has one entry per group, along ``dims``, and
        θ has one entry per group (or one shared by all); see Notes.
    n
        Number of records.
    epsilon
        Privacy parameter of the release.
    sensitivity
        L1 sensitivity Δ that scaled the noise (noise scale Δ/ε).
    observed
        The released value y, shape ``()`` or ``(K,)``.
    bounds
        Truncation window ``(a, b)`` of a windowed family's release.
    method
        ``"collapsed"``: s is integrated out of θ's update. For a released statistic of one
        number, y | θ is the normal–Laplace convolution (exact draws of a scalar θ by
        :class:`~pymc_dp.GridStep`, NUTS for any other θ); for the pair (Σz, Σz²) of a windowed
        Normal or LogNormal, the bivariate convolution (θ = (μ, σ²) drawn as one block by
        :class:`~pymc_dp.IndependenceStep`, NUTS for any other θ); for Categorical counts,
        y | θ, σ² is normal and θ is drawn by NUTS inside a partially collapsed Gibbs sampler.
        ``"augmented"``: the paper's Algorithm 1 over (θ, s, σ²). ``"auto"`` (default):
        ``"collapsed"``, the faster method wherever it has been measured.
    likelihood
        ``"exact"``: for released counts (Bernoulli, Binomial, Categorical, and window sums
        of Poisson or Geometric records), y | θ sums over every value of s with the release's
        own noise law (Laplace, or OpenDP's discrete Laplace or discrete Gaussian), no CLT
        (:mod:`pymc_dp.likelihoods.exact`, :mod:`pymc_dp.likelihoods.exact_windows`). ``"clt"``:
        s | θ is the CLT normal (the paper's method). ``"auto"`` (default): exact whenever one
        evaluation costs at most :data:`~pymc_dp.likelihoods.choice.EXACT_MAX_TERMS` terms, else the
        CLT, with a :class:`~pymc_dp.likelihoods.choice.CltWarning` where the CLT was measured to be
        inaccurate. A release made with the Gaussian mechanism gets, under the CLT, y | θ
        normal with no mixing variance (:mod:`pymc_dp.model.nodes.gaussian`, for every family; the
        exact likelihood of continuous records models Laplace noise only, so ``"auto"`` takes
        the CLT for them); ``method="augmented"`` is refused for it.
    dims
        Name of the group dimension of a grouped release (default ``"group"``); the node adds
        the set's group keys as its coordinates if the model lacks them (else they must match).
        Only for a :class:`~pymc_dp.ReleaseSet`.
    model
        Model to add to; defaults to the model on the context stack.

    Returns
    -------
    TensorVariable
        The observed node y.

    Notes
    -----
    Collapsed (the default for a scalar statistic and for a windowed (Σz, Σz²)), the model holds
    θ and the observed y only;
    ``pmdp.sample_latent(idata, model)`` adds ``{name}_s`` and ``{name}_sigma2`` to a posterior,
    drawn exactly given θ and y. Both methods target the same posterior.

    A windowed release that carries the window count (``Release.window_count``, from
    ``pmdp.release(..., count_share=...)``) gives y = (window sum, window count), dimension
    ``{name}_stat`` (``window_sum``, ``window_count``): their bivariate normal–Laplace likelihood
    (:mod:`pymc_dp.model.nodes.counted`), with no latent statistic for ``sample_latent``. Where
    ``likelihood="auto"`` takes the exact likelihood of the sum, the count is not used (a
    warning says so).

    For a windowed family, ``{name}_s`` holds the stacked (ŝ, s) (dimension ``{name}_part``):
    the statistic of the records inside the window, which y releases, then that of all records,
    which θ's conjugate update uses (Algorithm 2).

    A vector statistic has a named dimension: ``{name}_category`` for Categorical counts
    (coordinates 0, …, K-1, or labels the model already holds under that name), ``{name}_stat``
    for t(x) = (x, x²) (coordinates ``sum_x``, ``sum_x2``). The node adds ``pm.Data``
    constants ``{name}_n``, ``{name}_epsilon``, ``{name}_sensitivity`` and ``{name}_bounds``
    (dimension ``{name}_bound``), which ``pm.sample`` stores as ``constant_data``;
    :func:`release_attrs` gives the full release (with the family) for the result's ``attrs``.
    ``pm.sample_posterior_predictive`` draws y from Laplace(ŝ, Δ/ε) at each posterior ŝ: new
    released statistics, comparable with the observed y.

    When θ is a free variable with the family's conjugate prior (``pm.Beta`` for Binomial,
    Bernoulli and Geometric, ``pm.Dirichlet`` for Categorical, ``pm.Gamma`` for the rate of
    Exponential, Gamma and Poisson, ``pm.Normal`` for a Normal mean with known σ, and the
    Normal–Inverse-Gamma pair for Normal and LogNormal) used nowhere else, θ | s is an exact
    conjugate draw. Any other θ (a transformed parameter, a
    non-conjugate prior) is left to PyMC's samplers, which then update θ | s with the CLT
    likelihood N(s; nμ(θ), nΣ(θ)).

    A grouped release (:class:`~pymc_dp.ReleaseSet`) of a one-number statistic (Bernoulli,
    Binomial, a windowed family with one statistic) gives one collapsed node of shape ``(G,)``:
    the groups are independent given θ_g, each with its own n_g, and the likelihood (exact or
    CLT, chosen once for the node: exact if every group's sum is affordable) is that of one
    release per group. A hierarchical θ (``p = pm.math.invlogit(mu + tau * z)`` with ``z`` of
    dims ``"group"``) is sampled by NUTS; a scalar θ shared by the groups with a fixed prior by
    :class:`~pymc_dp.GridStep`. A vector statistic gives y of shape ``(G, k)`` (dimensions
    ``dims`` and ``{name}_category`` or ``{name}_stat``) with θ_g as row g of a ``(G, K)`` p
    (e.g. ``pm.math.softmax(mu + tau * z, axis=-1)``), or μ and σ with one entry per group:
    Categorical counts take the exact sum per group (refused with Laplace noise where a group
    is too large for it: the CLT node of one Categorical release needs Gibbs steps that do not
    run per group), a window's (Σz, Σz²) the collapsed bivariate normal–Laplace likelihood per
    group (:mod:`pymc_dp.model.nodes.grouped_vector`); NUTS samples θ.
    :func:`~pymc_dp.sample_latent` skips grouped nodes.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_dp as pmdp
    >>> rel = pmdp.release(np.r_[np.ones(30), np.zeros(70)], pm.Bernoulli, epsilon=1.0, rng=0)
    >>> with pm.Model() as model:
    ...     p = pm.Beta("p", 1, 1)
    ...     y = pmdp.NoisySuffStat("y", pm.Bernoulli.dist(p=p), release=rel)
    >>> [v.name for v in model.free_RVs]
    ['p']
    >>> with pm.Model() as model:
    ...     p = pm.Beta("p", 1, 1)
    ...     y = pmdp.NoisySuffStat("y", pm.Bernoulli.dist(p=p), release=rel, method="augmented")
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
        bounds: tuple[float, float] | None = None,
        method: str = "auto",
        likelihood: str = "auto",
        dims: str | None = None,
        model: pm.Model | None = None,
    ) -> pt.TensorVariable:
        """Add the node's variables to the model and return the observed node y."""
        model = pm.modelcontext(model)
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS} (got {method!r})")
        if likelihood not in LIKELIHOODS:
            raise ValueError(f"likelihood must be one of {LIKELIHOODS} (got {likelihood!r})")
        if method == "augmented" and likelihood == "exact":
            raise ValueError(
                "likelihood='exact' sums s out of the model, so it has no augmented form: "
                "use method='auto' (or 'collapsed') with it, or likelihood='clt' with "
                "method='augmented'"
            )
        if not isinstance(name, str) or not name:
            raise TypeError(f"name must be a non-empty string (got {name!r})")
        if dist in getattr(model, "basic_RVs", []):
            raise TypeError(
                "dist must be an unregistered distribution such as pm.Bernoulli.dist(p=p), "
                "not a model variable"
            )
        family = family_from_dist(dist)
        if isinstance(release, ReleaseSet):
            explicit = _explicit(n, epsilon, sensitivity, observed, bounds)
            given = [k for k, v in explicit if v is not None]
            if given:
                raise TypeError(f"pass either release= or {given}, not both")
            return grouped_node(
                model,
                name,
                family=family,
                dist=dist,
                release=release,
                dims="group" if dims is None else dims,
                method=method,
                likelihood=likelihood,
                stat_dim=_stat_dim(model, name, family),
            )
        if dims is not None:
            raise TypeError(
                "dims applies to a grouped release (a pymc_dp.ReleaseSet), whose y has one "
                "entry per group; a single release has no group dimension"
            )
        if getattr(dist, "ndim", 0) != 0:
            raise ValueError(
                f"dist must be the law of one record, but its parameters give it "
                f"{dist.ndim} batch dimension(s) (e.g. a vector p where a scalar is expected): "
                "one release has one θ; for one release per group, pass a ReleaseSet "
                "(pymc_dp.release_grouped) with a θ per group"
            )
        spec = _release_settings(
            family,
            release,
            n=n,
            epsilon=epsilon,
            sensitivity=sensitivity,
            observed=observed,
            bounds=bounds,
        )
        n, value, bounds = spec.n, spec.value, spec.bounds
        theta = family.theta_of(dist)
        scale = spec.sensitivity / spec.epsilon
        gaussian = release is not None and release.mechanism == DISCRETE_GAUSSIAN
        if gaussian:
            scale = release.scale
        choice = (
            choose_likelihood(
                family,
                n,
                value,
                scale,
                likelihood,
                bounds=bounds,
                mechanism=None if release is None else release.mechanism,
            ).likelihood
            if method != "augmented"
            else "clt"
        )
        counted = release is not None and release.window_count is not None
        if counted and method == "augmented":
            raise ValueError(
                "method='augmented' models the window sum alone; this release also holds the "
                "window count, which the default method uses: use method='auto'"
            )
        if counted and choice != "exact":
            return counted_node(model, name, spec, theta=theta)
        if counted:
            warnings.warn(
                "the exact likelihood models the window sum alone: this release's window "
                "count is not used (pass likelihood='clt' to use it)",
                UserWarning,
                stacklevel=2,
            )
        if choice == "exact" and needs_records(family) and method != "augmented":
            # (Σz, Σz²): the record-level node, which needs the Normal–Inverse-Gamma prior.
            why = records_ready(model, family, dist)
            if why and likelihood == "exact":
                raise ValueError(f"likelihood='exact' for {family!r}: {why}")
            if why:
                choice = "clt"
                _warn_records_unready(family, n, value, scale, bounds, why)
        if gaussian and choice == "exact" and likelihood == "auto" and continuous_window(family):
            # The exact likelihood of continuous records models Laplace noise only.
            choice = "clt"
            _warn_untrusted_gaussian(family, n, value, scale, bounds)
        if gaussian and choice != "exact":
            # y | s is normal: the Laplace nodes (and their σ²) do not apply, the normal one does.
            if method == "augmented":
                raise ValueError(
                    "method='augmented' samples the Laplace noise's mixing variances; this "
                    "release used the Gaussian mechanism, which has none: use method='auto'"
                )
            return gaussian_collapsed_node(
                model, name, spec, theta=theta, stat_dim=_stat_dim(model, name, family)
            )
        if choice == "exact":
            noise = noise_law(
                release.mechanism if release is not None else None,
                scale,
                release.quantum if release is not None else None,
                family,
            )
            stat_dim = _stat_dim(model, name, family)
            if needs_records(family):
                return records_node(model, name, spec, dist=dist, noise=noise, stat_dim=stat_dim)
            return exact_node(model, name, spec, theta=theta, noise=noise, stat_dim=stat_dim)
        s_name, v_name = f"{name}_s", f"{name}_sigma2"
        scalar = family.stat_shape == () or getattr(family, "stat_size", 0) == 1
        partial = not scalar and method != "augmented"
        if method != "augmented" and scalar:
            return collapsed_node(model, name, spec, theta=theta)
        stat_dim = _stat_dim(model, name, family)
        if partial and isinstance(family, TruncatedFamily) and family.stat_size == 2:
            return collapsed_pair_node(model, name, spec, theta=theta, stat_dim=stat_dim)
        # Chains start from a prior draw of θ (Algorithm 1), one per chain: ConjugateStep draws
        # θ from its prior at a chain's first step. The Gibbs chain can mix slowly, and dispersed
        # starts are what make R-hat able to see that. No initval here: PyMC's model transforms
        # (pm.do, pm.observe, compute_log_likelihood) refuse non-default initial values.
        with model:
            if partial:
                s, sigma2, y = _partial_node(
                    model, name, family, theta, n, bounds, scale, value, stat_dim
                )
            elif isinstance(family, TruncatedFamily):
                s, released_stat = _window_suffstat(model, s_name, family, theta, n, bounds)
            elif family.stat_shape == ():
                mu, sigma = family.moments(theta)
                lower, upper = family.valid_region(n)
                s = SuffStatNormal(
                    s_name,
                    mean=n * mu,
                    var=n * sigma,
                    lower=lower[0],
                    upper=upper[0],
                )
                released_stat = s
            else:
                mu, sigma = family.moments(theta)
                s = SuffStatSimplexNormal(
                    s_name, mean=n * mu, cov=n * sigma, total=n, dims=stat_dim
                )
                released_stat = s
            if not partial:
                y = pm.Laplace(name, mu=released_stat, b=scale, observed=value, dims=stat_dim)
                # The released *value*, not the node y: σ²'s initial draw is then its
                # conditional given the actual release, and y is no ancestor of σ², so posterior
                # predictive sampling of y keeps σ² from the trace without PyMC 6's
                # ImplicitFreezeWarning.
                sigma2 = LaplaceNoiseVariance(
                    v_name,
                    released=model.rvs_to_values[y],
                    suffstat=released_stat,
                    scale=scale,
                    dims=stat_dim,
                )

        conjugate = () if partial else family.conjugate_prior_rvs(model, dist)
        info = register_node(
            model,
            name,
            spec,
            y,
            others=(s, sigma2),
            theta=tuple(rv.name for rv in conjugate),
        )
        for rv in conjugate:
            setattr(rv.tag, TAG, (*getattr(rv.tag, TAG, ()), info))
        return y


def _warn_records_unready(family, n, value, scale, bounds, why: str) -> None:
    """Warn that the CLT stands in, untrusted, for a record-level node the model cannot take."""
    warnings.warn(
        "the CLT for the window sum may be inaccurate for this release "
        f"({clt_trust(family, n, value, scale, bounds=bounds)[1]}), and its exact likelihood, "
        f"the record-level sampler, cannot be used here: {why}. The CLT is used",
        CltWarning,
        stacklevel=4,
    )


def _warn_untrusted_gaussian(family, n, value, scale, bounds) -> None:
    """Warn that a Gaussian release of continuous records gets the CLT where it is untrusted."""
    warnings.warn(
        "the CLT for the window sum may be inaccurate for this release "
        f"({clt_trust(family, n, value, scale, bounds=bounds)[1]}), and its exact likelihood "
        "models Laplace noise only, not this release's Gaussian mechanism: the CLT is used",
        CltWarning,
        stacklevel=4,
    )


def _partial_node(
    model: pm.Model,
    name: str,
    family: ExponentialFamily,
    theta: pt.TensorVariable,
    n: int,
    bounds: tuple[float, float] | None,
    scale: float,
    value: npt.NDArray[np.float64],
    stat_dim: str | None,
) -> tuple[pt.TensorVariable, pt.TensorVariable, pt.TensorVariable]:
    """Add s, σ² and y of a partially collapsed node (a vector statistic); return them.

    y | θ, σ² ~ N(m(θ), V(θ) + diag σ²) holds θ's likelihood with s integrated out; s (no
    density of its own) and σ² (its Exponential prior) are there for the Gibbs steps
    (:mod:`pymc_dp.model.distributions.partial`).
    """
    s_name, v_name = f"{name}_s", f"{name}_sigma2"
    if isinstance(family, TruncatedFamily):
        k = family.stat_size
        s, released_stat = _window_suffstat(
            model, s_name, family, theta, n, bounds, dist_class=AuxiliaryWindowSuffStat
        )
        mean, cov = family.joint_clt(theta, n, bounds)
        released_mean, released_cov = mean[:k], cov[:k, :k]
    else:
        mu, sigma = family.moments(theta)
        released_mean, released_cov = n * mu, n * sigma
        s = AuxiliarySimplexSuffStat(
            s_name, mean=released_mean, cov=released_cov, total=n, dims=stat_dim
        )
        released_stat = s
    sigma2 = LaplaceMixingVariance(
        v_name, released=value, suffstat=released_stat, scale=scale, dims=stat_dim
    )
    y = ReleasedNormal(
        name, released_mean, released_cov + pt.diag(sigma2), observed=value, dims=stat_dim
    )
    return s, sigma2, y


def _window_suffstat(
    model: pm.Model,
    s_name: str,
    family: TruncatedFamily,
    theta: pt.TensorVariable,
    n: int,
    bounds: tuple[float, float],
    *,
    dist_class: type = WindowSuffStat,
) -> tuple[pt.TensorVariable, pt.TensorVariable]:
    """Add the stacked (ŝ, s) of a windowed release; return it and ŝ (what y releases)."""
    k = family.stat_size
    mean, cov = family.joint_clt(theta, n, bounds)
    lower, upper, out_lower, out_upper = family.window_region(n, bounds)
    dim = f"{s_name.removesuffix('_s')}_part"
    labels = [f"{part}_{stat}" for part in ("window", "all") for stat in family.stat_names]
    if dim not in model.coords:
        model.add_coord(dim, labels)
    s = dist_class(
        s_name,
        mean=mean,
        cov=cov,
        lower=lower,
        upper=upper,
        out_lower=out_lower,
        out_upper=out_upper,
        total=n,
        quadratic=int(k == 2),
        dims=dim,
    )
    return s, pt.reshape(s[:k], family.stat_shape)


def _stat_dim(model: pm.Model, name: str, family: ExponentialFamily) -> str | None:
    """Name (and coordinates) of the dimension of a vector statistic; ``None`` for a scalar."""
    if family.stat_shape == ():
        return None
    stat_names = getattr(family, "stat_names", None)
    if stat_names is not None:
        dim, labels = f"{name}_stat", list(stat_names)
    else:
        dim, labels = f"{name}_category", list(range(family.stat_shape[0]))
    if dim in model.coords:
        # A model may name the categories itself: model.add_coord("y_category", ["a", "b"]).
        existing = model.coords[dim]
        if existing is None or len(existing) != len(labels):
            raise ValueError(
                f"the model's coordinate {dim!r} must have {len(labels)} labels, one per "
                f"component of the statistic (got {existing!r}); rename it or fix its length"
            )
    else:
        model.add_coord(dim, labels)
    return dim


def _explicit(n, epsilon, sensitivity, observed, bounds) -> list[tuple[str, object]]:
    return [
        ("n", n),
        ("epsilon", epsilon),
        ("sensitivity", sensitivity),
        ("observed", observed),
        ("bounds", bounds),
    ]


def _release_settings(
    family: ExponentialFamily,
    release: Release | None,
    *,
    n: Any,
    epsilon: Any,
    sensitivity: Any,
    observed: Any,
    bounds: Any,
) -> NodeRelease:
    """Check (n, ε, Δ, y, window) from a Release or from explicit arguments; return them."""
    explicit = {"n": n, "epsilon": epsilon, "sensitivity": sensitivity, "observed": observed}
    if bounds is not None:
        explicit["bounds"] = bounds
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
        window = release.bounds if family.needs_bounds else None
        return NodeRelease(
            family,
            release,
            release.n,
            release.epsilon,
            release.sensitivity,
            np.asarray(release.value),
            window,
        )

    missing = [k for k, v in explicit.items() if v is None]
    if missing:
        raise TypeError(
            f"NoisySuffStat needs release= or all of n, epsilon, sensitivity, "
            f"observed; missing {missing}"
        )
    n = check_int(n, "n", minimum=1)
    epsilon = check_positive(epsilon, "epsilon")
    sensitivity = check_positive(sensitivity, "sensitivity")
    check_noise_scale(sensitivity, epsilon)
    value = check_finite_array(observed, "observed").astype(np.float64)
    if value.shape != family.stat_shape:
        raise ValueError(
            f"observed must have shape {family.stat_shape} for {family!r} (got {value.shape})"
        )
    if family.needs_bounds:
        bounds = family.check_bounds(bounds)
    elif bounds is not None:
        raise TypeError(f"bounds apply only to families released over a window, not {family!r}")
    needed = family.release_sensitivity(bounds)
    if sensitivity < needed:
        warnings.warn(
            f"sensitivity={sensitivity} is below the {needed} that ε-DP needs for "
            f"{family!r}: that release was not {epsilon}-DP. Inference follows the noise "
            "actually added.",
            UserWarning,
            stacklevel=3,
        )
    return NodeRelease(family, None, n, epsilon, sensitivity, value, bounds)
