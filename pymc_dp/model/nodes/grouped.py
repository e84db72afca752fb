"""The observed node of a grouped release: one released statistic per group.

:class:`~pymc_dp.NoisySuffStat` hands a :class:`~pymc_dp.ReleaseSet` to :func:`grouped_node`.
θ has a leading group dimension (a hierarchical ``p = invlogit(mu + tau * z)``, or a scalar
shared by every group), y has shape ``(G,)`` with the set's group keys as coordinates, and the
likelihood is collapsed as for one release: the normal–Laplace convolution per group
(:class:`~pymc_dp.likelihoods.CollapsedLaplace`, batched; the normal product
:class:`~pymc_dp.likelihoods.CollapsedGaussian` for a Gaussian-mechanism release), or the
exact sum over each s_g
(:mod:`pymc_dp.likelihoods.grouped`). Vector statistics (Categorical counts, a window's
(Σz, Σz²)) get y of shape ``(G, k)`` from :mod:`pymc_dp.model.nodes.grouped_vector`. The groups are
independent given θ, so the node's log density is the sum of the per-group ones, each with its
own n_g.
"""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pymc_dp.curator.record import Release
from pymc_dp.curator.release_set import ReleaseSet
from pymc_dp.families import ExponentialFamily, Poisson
from pymc_dp.families.record_laws import continuous_window
from pymc_dp.kernels.exact_counts import NoiseLaw
from pymc_dp.likelihoods.choice import (
    EXACT_MAX_TERMS,
    CltWarning,
    choose_likelihood,
    clt_trust,
    exact_cost,
    noise_law,
    windowed_counts,
)
from pymc_dp.likelihoods.clt import grouped_released_clt
from pymc_dp.likelihoods.count_trust import counts_clt_trust
from pymc_dp.likelihoods.exact import BinomialCounts, released_statistic
from pymc_dp.likelihoods.exact_windows import WindowCounts
from pymc_dp.likelihoods.grouped import CltLaw, MixedLaw
from pymc_dp.likelihoods.multinomial_window import window_table
from pymc_dp.likelihoods.window_sum import window_sum_model
from pymc_dp.likelihoods.window_trust import RECORDS_MAX_N, WINDOW_KS_LEVEL
from pymc_dp.mechanisms import DISCRETE_GAUSSIAN
from pymc_dp.model.nodes.collapsed import collapsed_y, mark_theta
from pymc_dp.model.nodes.counted import grouped_counted_y
from pymc_dp.model.nodes.grouped_vector import group_theta, vector_grouped_y
from pymc_dp.model.nodes.info import NoisySuffStatInfo, tag_node

__all__ = ["grouped_likelihood", "grouped_node"]


def grouped_likelihood(
    family: ExponentialFamily, release: ReleaseSet, likelihood: str
) -> list[str]:
    """Resolve ``likelihood`` group by group: ``"exact"`` or ``"clt"`` for each group.

    With ``"auto"`` each group takes the exact likelihood only where the CLT is untrusted for it
    and the exact sum affordable (:func:`~pymc_dp.likelihoods.choice.choose_likelihood`); a
    :class:`~pymc_dp.likelihoods.choice.CltWarning` names the groups where the CLT is used
    outside its measured safe region. Vector statistics (Categorical counts) are resolved group
    by group too: the exact sum where the KS distance of the group's CLT law of y from its exact
    law, computed (:func:`~pymc_dp.likelihoods.count_trust.counts_clt_trust`), is above 0.01
    and the sum affordable (:func:`~pymc_dp.likelihoods.choice.exact_cost`).
    """
    rel = release.first
    bounds = _window(family, rel)
    rows = list(zip(release.groups, release.n, release.value, strict=True))
    if continuous_window(family):
        # No grouped node sums continuous records exactly yet: the CLT, checked per group.
        if likelihood == "exact":
            raise ValueError(
                f"likelihood='exact' is not available for grouped releases of {family!r} yet; "
                "use likelihood='clt', or one NoisySuffStat per group"
            )
        choices = ["clt"] * len(rows)
        why = "no grouped exact likelihood exists for continuous records yet" + (
            # The record-level sampler: (μ, σ²) its own, under their conjugate prior.
            f": one NoisySuffStat per group of at most {RECORDS_MAX_N} records, with that "
            "group's (μ, σ²) under the Normal–Inverse-Gamma prior, can use it"
            if family.stat_size == 2
            else ": one NoisySuffStat per group can use it"
        )
    elif family.stat_shape not in ((), (1,)):
        # Each group its own: the exact sum where the CLT is untrusted for it and the sum
        # affordable; untrusted groups are those with few expected counts, whose sums are cheap.
        if likelihood == "exact":
            choices = ["exact"] * len(rows)
        elif likelihood == "auto":
            choices = [
                "exact"
                if not _vector_trusted(family, int(n_g), value, rel)
                and exact_cost(
                    family,
                    int(n_g),
                    bounds,
                    scale=rel.scale,
                    released=value,
                    mechanism=rel.mechanism,
                )
                <= EXACT_MAX_TERMS
                else "clt"
                for _, n_g, value in rows
            ]
            choices = _fit_window(family, release, choices)
        else:
            choices = ["clt"] * len(rows)
        why = "the exact likelihood is too large for them; pass likelihood='exact' to use it"
    else:
        resolved = [
            choose_likelihood(
                family,
                int(n_g),
                value,
                rel.scale,
                likelihood,
                bounds=bounds,
                warn=False,
                mechanism=rel.mechanism,
            )
            for _, n_g, value in rows
        ]
        choices = [r.likelihood for r in resolved]
        why = "the exact likelihood is too large for them; pass likelihood='exact' to use it"
    if likelihood == "auto":
        if family.stat_shape in ((), (1,)) and not continuous_window(family):
            # choose_likelihood has measured the CLT of every group already.
            untrusted = [r.reason.startswith("CLT outside") for r in resolved]
        elif family.stat_shape not in ((), (1,)) and not continuous_window(family):
            untrusted = [
                choice == "clt" and not _vector_trusted(family, int(n_g), value, rel)
                for (_, n_g, value), choice in zip(rows, choices, strict=True)
            ]
        else:
            untrusted = [
                choice == "clt"
                and not clt_trust(family, int(n_g), value, rel.scale, bounds=bounds)[0]
                for (_, n_g, value), choice in zip(rows, choices, strict=True)
            ]
        cause = (
            # window_clt_trust's measure: the KS distance at the θ consistent with y.
            f"the CLT law of y is more than {WINDOW_KS_LEVEL:g} in KS distance from the exact "
            "law at some θ consistent with y"
            if continuous_window(family)
            else "few expected counts or little noise"
        )
        doubtful = [key for (key, _, _), bad in zip(rows, untrusted, strict=True) if bad]
        if doubtful:
            warnings.warn(
                f"the CLT for s may be inaccurate for {len(doubtful)} of {len(rows)} groups "
                f"{_listed(doubtful)} ({cause}); {why}",
                CltWarning,
                stacklevel=4,
            )
    return choices


def _vector_trusted(family: ExponentialFamily, n: int, value: object, rel: Release) -> bool:
    """Whether one group's CLT of K counts is trusted: its KS distance, computed.

    :func:`~pymc_dp.likelihoods.count_trust.counts_clt_trust` (KS ≤ 0.01), the measured rule
    for counts, rather than :func:`~pymc_dp.likelihoods.choice.clt_trust`'s formula, which is
    conservative between the points it was fitted on and sent groups whose distance is below
    0.01 to the exact sum.
    """
    gaussian = rel.mechanism == DISCRETE_GAUSSIAN
    return counts_clt_trust(n, value, rel.scale, gaussian=gaussian)[0]


def _fit_window(family: ExponentialFamily, release: ReleaseSet, choices: list[str]) -> list[str]:
    """``choices`` with the CLT for the exact groups that need a window table that is too large.

    A group of many records is affordable only through the sum over the counts within the
    noise's reach of its y (:func:`~pymc_dp.likelihoods.choice.exact_cost`), and the exact
    groups share one padded table (:func:`~pymc_dp.likelihoods.multinomial_window.window_table`);
    without it the node would convolve every group's counts in full. So where the table of the
    exact groups does not fit, the groups that only the window made affordable take the CLT.
    """
    exact = [g for g, c in enumerate(choices) if c == "exact"]
    sizes, rel = release.n, release.first
    full = [g for g in exact if exact_cost(family, int(sizes[g])) > EXACT_MAX_TERMS]
    if not full:
        return choices
    noise = noise_law(rel.mechanism, rel.scale, rel.quantum)
    released = np.asarray(release.value, dtype=np.float64)[exact]
    if window_table(released, sizes[exact], noise) is not None:
        return choices
    return ["clt" if g in full else c for g, c in enumerate(choices)]


_LISTED_GROUPS = 8
"""Most groups a warning names; it counts the rest."""


def _listed(keys: list) -> str:
    """``keys`` for a message: all of them up to ``_LISTED_GROUPS``, else the first and a count.

    A release of 500 groups whose CLT is doubtful in most of them (a Normal window's) would
    otherwise print 500 names.
    """
    if len(keys) <= _LISTED_GROUPS:
        return repr(keys)
    return f"{keys[:_LISTED_GROUPS]!r} and {len(keys) - _LISTED_GROUPS} more"


def _node_likelihood(groups: list, choices: list[str]) -> str:
    """What the node records: ``"exact"``, ``"clt"``, or which groups took which."""
    if len(set(choices)) == 1:
        return choices[0]
    exact = [str(g) for g, c in zip(groups, choices, strict=True) if c == "exact"]
    listed = ", ".join(exact)
    return f"mixed: exact in {len(exact)} of {len(groups)} groups ({listed}), clt in the rest"


def _window(family: ExponentialFamily, rel: Release) -> tuple[float, float] | None:
    return rel.bounds if family.needs_bounds else None


def grouped_node(
    model: pm.Model,
    name: str,
    *,
    family: ExponentialFamily,
    dist: pt.TensorVariable,
    release: ReleaseSet,
    dims: str,
    method: str,
    likelihood: str,
    stat_dim: str | None = None,
) -> pt.TensorVariable:
    """Add the observed y for a grouped release; return it.

    y has shape ``(G,)``, or ``(G, k)`` for a vector statistic, whose dimension ``stat_dim``
    (``{name}_category`` or ``{name}_stat``) the caller has added to the model.
    """
    rel = release.first
    if rel.get_family() != family:
        raise ValueError(
            f"dist is {family!r} but the release is for {rel.get_family()!r}; model the "
            "records with the family they were released for"
        )
    if method == "augmented":
        raise ValueError(
            "method='augmented' is not available for a grouped release; use method='auto'"
        )
    if not isinstance(dims, str) or not dims:
        raise TypeError(f"dims must name the group dimension, e.g. dims='group' (got {dims!r})")
    groups = list(release.groups)
    size = len(groups)
    _group_coords(model, dims, groups)
    vector = family.stat_shape not in ((), (1,))
    if vector:
        theta_g = group_theta(family, dist, size)
    else:
        theta = pt.as_tensor_variable(family.theta_of(dist))
        if theta.type.ndim > 1 or (
            theta.type.ndim == 1 and theta.type.shape[0] not in (None, size)
        ):
            raise ValueError(
                f"θ of a grouped release must be a scalar or have one entry per group ({size}), "
                f"got static shape {theta.type.shape}; give it dims={dims!r}"
            )
        theta_g = pt.broadcast_to(theta, (size,))
    bounds = _window(family, rel)
    gaussian = rel.mechanism == DISCRETE_GAUSSIAN
    choices = grouped_likelihood(family, release, likelihood)
    counted = _counted(release, choices, likelihood, vector)
    if counted:
        choices = ["clt"] * size
    choice = choices[0] if len(set(choices)) == 1 else "mixed"
    value = None if vector else np.asarray(release.value, dtype=np.float64).reshape(size)
    sizes = release.n
    noise = None
    with model:
        if counted:
            y = grouped_counted_y(
                model, name, family=family, theta=theta_g, release=release, dims=dims
            )
        elif vector:
            y, noise = vector_grouped_y(
                name,
                family=family,
                theta=theta_g,
                release=release,
                choices=choices,
                dims=(dims, stat_dim),
            )
        elif choice in ("exact", "mixed"):
            noise = noise_law(rel.mechanism, rel.scale, rel.quantum)
            exact = [g for g, c in enumerate(choices) if c == "exact"]
            if windowed_counts(family):
                law = WindowCounts(sizes[exact], family, bounds)
            else:
                law = BinomialCounts(sizes[exact] * family.trials)
            if choice == "mixed":
                clt = [g for g, c in enumerate(choices) if c == "clt"]
                law = MixedLaw([(exact, law), (clt, CltLaw(sizes[clt], family, bounds))])
            y = released_statistic(name, theta_g, law=law, noise=noise, observed=value, dims=dims)
        else:
            # Gaussian noise: the normal product, no mixing variance (pymc_dp.model.nodes.gaussian).
            if gaussian:
                noise = NoiseLaw(DISCRETE_GAUSSIAN, float(rel.scale))
            moments = grouped_released_clt(family, theta_g, sizes, bounds)
            if isinstance(family, Poisson) and bounds is not None and not gaussian:
                # One compiled loop for y's log density and its gradient (window_sum).
                v, w = family.window_edges(bounds)
                y = window_sum_model(
                    name,
                    eta=family.natural_parameters(theta_g),
                    n=sizes,
                    value=value,
                    scale=float(rel.scale),
                    spec=(v + 1.0, w),
                    moments=moments,
                    dims=dims,
                )
            else:
                y = collapsed_y(
                    name, moments, gaussian=gaussian, scale=rel.scale, observed=value, dims=dims
                )
        _add_release_data(model, name, release, dims)
    info = NoisySuffStatInfo.of_node(
        name,
        family,
        release.to_dict(),
        n=tuple(int(v) for v in sizes),
        epsilon=rel.epsilon,
        sensitivity=rel.sensitivity,
        bounds=bounds,
        collapsed=True,
        likelihood=_node_likelihood(groups, choices),
        noise=noise,
        groups=tuple(groups),
        counted=counted,
    )
    tag_node(y, info, theta=theta_g)
    # Only a θ shared by every group can be a GridStep variable; a hierarchical θ goes to NUTS.
    if not vector:
        mark_theta(model, theta, vector=False)
    return y


def _counted(release: ReleaseSet, choices: list[str], likelihood: str, vector: bool) -> bool:
    """Whether the node uses each group's window count with its sum (the CLT pair).

    Only without ``likelihood="exact"``, which models the sums alone (a warning says the counts
    are unused). Under ``"auto"`` every group takes the pair; a warning names the groups whose
    sums alone would have taken the exact likelihood (few records: the CLT may be off there).
    """
    if release.window_count is None or vector:
        return False
    if likelihood == "exact":
        warnings.warn(
            "the exact likelihood models the window sums alone: this release's window counts "
            "are not used (pass likelihood='clt' or 'auto' to use them)",
            UserWarning,
            stacklevel=4,
        )
        return False
    exact = [g for g, c in zip(release.groups, choices, strict=True) if c == "exact"]
    if exact:
        warnings.warn(
            f"the window counts are used through the CLT of (window sum, window count) in every "
            f"group; for groups {exact!r} the CLT may be inaccurate (few records): "
            "likelihood='exact' models their sums exactly, without the counts",
            CltWarning,
            stacklevel=4,
        )
    return True


def _group_coords(model: pm.Model, dims: str, groups: list) -> None:
    """Add the group keys as coordinates, or check those the model already holds."""
    if dims in model.coords:
        existing = model.coords[dims]
        if existing is None or [str(v) for v in existing] != [str(g) for g in groups]:
            raise ValueError(
                f"the model's coordinate {dims!r} must be the release's groups {groups!r} in "
                f"that order (got {existing!r}); use another dims name or fix the coordinates"
            )
    else:
        model.add_coord(dims, groups)


def _add_release_data(model: pm.Model, name: str, release: ReleaseSet, dims: str) -> None:
    """n_g, ε, Δ and the window as ``pm.Data`` (ArviZ ``constant_data``), as for one release."""
    bound_dim = f"{name}_bound"
    if bound_dim not in model.coords:
        model.add_coord(bound_dim, ["lower", "upper"])
    rel = release.first
    pm.Data(f"{name}_n", release.n.astype(np.int64), dims=dims)
    pm.Data(f"{name}_epsilon", np.asarray(rel.epsilon, dtype=np.float64))
    pm.Data(f"{name}_sensitivity", np.asarray(rel.sensitivity, dtype=np.float64))
    pm.Data(f"{name}_bounds", np.asarray(rel.bounds, dtype=np.float64), dims=bound_dim)
