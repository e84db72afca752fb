"""Partially pooled models of grouped releases (:class:`~pymc_dp.ReleaseSet`), for ``fit``.

One release per group, one parameter per group, drawn from a common population on the link
scale, non-centred so that NUTS mixes when the groups are alike (small τ):

=====================  ==============================================================
family                 model
=====================  ==============================================================
bernoulli, binomial    logit p_g = μ + τ z_g,   z_g ~ N(0, 1)
poisson                log λ_g = μ + τ z_g,     z_g ~ N(0, 1)
categorical            p_g = softmax(μ + τ z_g), μ and each z_g zero-sum normal vectors
normal, lognormal      μ_g = μ + τ z_g,  log σ_g = ν + τ_σ w_g,  z_g, w_g ~ N(0, 1)
=====================  ==============================================================

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
ν ~ N(log(w/4), 1), τ_σ ~ HalfNormal(0.5): σ of the window's default scale w/4
(:mod:`pymc_dp.model.priors`' Inverse-Gamma has E σ² = (w/4)²) within a factor e either way, the
groups' σ within a factor of about 2 of each other.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pymc_dp.curator.release_set import ReleaseSet
from pymc_dp.model.noisy_suffstat import NoisySuffStat

__all__ = [
    "HIERARCHICAL_FAMILIES",
    "build_grouped_model",
    "group_summary",
    "group_variables",
    "grouped_prior_hyperparameters",
    "link_description",
    "population_variables",
    "save_grouped_figures",
    "theta_name",
]

HIERARCHICAL_FAMILIES = ("bernoulli", "binomial", "poisson", "categorical", "normal", "lognormal")
"""Families with a ready-made partially pooled model."""

_WINDOWED_NORMAL = ("normal", "lognormal")
_SCALE_NAMES = ("log_sigma_mean", "log_sigma_sd", "tau_sigma_sd")


def _prior_names(family_name: str) -> tuple[str, ...]:
    if family_name == "categorical":
        return ("mu_sd", "tau_sd")
    if family_name in _WINDOWED_NORMAL:
        return ("mu_mean", "mu_sd", "tau_sd", *_SCALE_NAMES)
    return ("mu_mean", "mu_sd", "tau_sd")


def _default_hyperparameters(family: Any, release: ReleaseSet) -> dict[str, float]:
    """The public defaults of the module's table (window, categories; never the data)."""
    if family.name == "poisson":
        from pymc_dp.model.priors import window_scale

        centre, _ = window_scale(family, release.first.bounds)
        return {"mu_mean": math.log(centre), "mu_sd": 1.0, "tau_sd": 1.0}
    if family.name == "categorical":
        return {"mu_sd": 1.0, "tau_sd": 1.0}
    if family.name in _WINDOWED_NORMAL:
        from pymc_dp.model.priors import window_scale

        centre, width = window_scale(family, release.first.bounds)
        return {
            "mu_mean": centre,
            "mu_sd": width / 2.0,
            "tau_sd": width / 4.0,
            "log_sigma_mean": math.log(width / 4.0),
            "log_sigma_sd": 1.0,
            "tau_sigma_sd": 0.5,
        }
    return {"mu_mean": 0.0, "mu_sd": 1.5, "tau_sd": 1.0}


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
    values = _default_hyperparameters(family, release)
    names = _prior_names(family.name)
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
    if family.name not in HIERARCHICAL_FAMILIES:
        raise ValueError(
            f"no ready-made grouped model for the {family.name} family (only "
            f"{', '.join(HIERARCHICAL_FAMILIES)}); write the model with NoisySuffStat"
        )
    return family


def group_variables(release: ReleaseSet) -> tuple[str, ...]:
    """Names of the per-group parameters: ``("p",)``, ``("lam",)`` or ``("mu_g", "sigma_g")``."""
    if release.family in _WINDOWED_NORMAL:
        return ("mu_g", "sigma_g")
    return ("lam",) if release.family == "poisson" else ("p",)


def population_variables(release: ReleaseSet) -> tuple[str, ...]:
    """Names of the population parameters: ``("mu", "tau")``, and ν, τ_σ for the Normal."""
    if release.family in _WINDOWED_NORMAL:
        return ("mu", "tau", "log_sigma", "tau_sigma")
    return ("mu", "tau")


def theta_name(release: ReleaseSet) -> str:
    """Name of the (first) per-group parameter: ``"p"``, ``"lam"`` or ``"mu_g"``."""
    return group_variables(release)[0]


def link_description(release: ReleaseSet, values: Mapping[str, float]) -> str:
    """One line: the model's link and population prior, with its hyperparameters."""
    if release.family == "categorical":
        return (
            f"p_g = softmax(mu + tau z_g), mu ~ ZeroSumNormal({values['mu_sd']:g}), "
            f"z_g ~ ZeroSumNormal(1), tau ~ HalfNormal({values['tau_sd']:g})"
        )
    if release.family in _WINDOWED_NORMAL:
        return (
            f"mu_g = mu + tau z_g, log sigma_g = log_sigma + tau_sigma w_g, "
            f"mu ~ Normal({values['mu_mean']:.4g}, {values['mu_sd']:.4g}), "
            f"tau ~ HalfNormal({values['tau_sd']:.4g}), "
            f"log_sigma ~ Normal({values['log_sigma_mean']:.4g}, {values['log_sigma_sd']:g}), "
            f"tau_sigma ~ HalfNormal({values['tau_sigma_sd']:g})"
        )
    link = "log lam_g" if release.family == "poisson" else "logit p_g"
    return (
        f"{link} = mu + tau z_g, mu ~ Normal({values['mu_mean']:.3g}, {values['mu_sd']:g}), "
        f"tau ~ HalfNormal({values['tau_sd']:g})"
    )


def build_grouped_model(
    release: ReleaseSet,
    prior: Mapping[str, Any] | None = None,
    *,
    name: str = "y",
    dims: str = "group",
    likelihood: str = "auto",
) -> pm.Model:
    """The partially pooled (non-centred) model of a grouped release.

    Parameters
    ----------
    release
        A :class:`~pymc_dp.ReleaseSet` of Bernoulli, Binomial, Categorical or windowed
        Poisson, Normal or LogNormal releases.
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
        also along ``{name}_category``; Normal: also ``log_sigma``, ``tau_sigma`` and
        ``z_sigma``); deterministic ``p``, ``lam``, or ``mu_g`` and ``sigma_g`` per group.

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
    size = len(release)
    with pm.Model(coords=release.coords(dims)) as model:
        if family.name == "categorical":
            k = family.categories
            cat = f"{name}_category"
            model.add_coord(cat, list(range(k)))
            mu = pm.ZeroSumNormal("mu", sigma=values["mu_sd"], dims=cat)
            tau = pm.HalfNormal("tau", values["tau_sd"])
            z = pm.ZeroSumNormal("z", sigma=1.0, dims=(dims, cat))
            # Static (G, K): the Categorical family reads K from p's shape.
            logits = pt.specify_shape(mu + tau * z, (size, k))
            p = pm.Deterministic("p", pm.math.softmax(logits, axis=-1), dims=(dims, cat))
            dist = pm.Categorical.dist(p=p)
        elif family.name in _WINDOWED_NORMAL:
            mu = pm.Normal("mu", values["mu_mean"], values["mu_sd"])
            tau = pm.HalfNormal("tau", values["tau_sd"])
            z = pm.Normal("z", 0.0, 1.0, dims=dims)
            log_sigma = pm.Normal("log_sigma", values["log_sigma_mean"], values["log_sigma_sd"])
            tau_sigma = pm.HalfNormal("tau_sigma", values["tau_sigma_sd"])
            z_sigma = pm.Normal("z_sigma", 0.0, 1.0, dims=dims)
            mu_g = pm.Deterministic("mu_g", mu + tau * z, dims=dims)
            sigma_g = pm.Deterministic(
                "sigma_g", pm.math.exp(log_sigma + tau_sigma * z_sigma), dims=dims
            )
            records = pm.Normal if family.name == "normal" else pm.LogNormal
            dist = records.dist(mu=mu_g, sigma=sigma_g)
        else:
            mu = pm.Normal("mu", values["mu_mean"], values["mu_sd"])
            tau = pm.HalfNormal("tau", values["tau_sd"])
            z = pm.Normal("z", 0.0, 1.0, dims=dims)
            if family.name == "poisson":
                lam = pm.Deterministic("lam", pm.math.exp(mu + tau * z), dims=dims)
                dist = pm.Poisson.dist(mu=lam)
            else:
                p = pm.Deterministic("p", pm.math.invlogit(mu + tau * z), dims=dims)
                dist = (
                    pm.Bernoulli.dist(p=p)
                    if family.name == "bernoulli"
                    else pm.Binomial.dist(n=family.trials, p=p)
                )
        NoisySuffStat(name, dist, release=release, dims=dims, likelihood=likelihood)
    return model


def _components(
    idata: Any, release: ReleaseSet
) -> list[tuple[str | None, np.ndarray, np.ndarray, np.ndarray]]:
    """Per component of θ_g: (label, draws ``(S, G)``, released ``(G,)``, naive ``(G,)``).

    The naive estimate takes the released value as exact: y_g / (n_g · trials) for counts of
    successes, each category's share y_gk / n_g, and for a Normal window the moments
    (Σz/n, √(Σz²/n − (Σz/n)²)) of the window's records. A scalar θ has one component, label
    ``None``.
    """
    from pymc_dp._compat import posterior_dataset

    post = posterior_dataset(idata)
    size, n = len(release), release.n.astype(np.float64)
    value = release.value.reshape(size, -1)
    if release.family == "categorical":
        draws = post["p"].values.reshape(-1, size, value.shape[1])
        return [
            (str(k), draws[..., k], value[:, k], value[:, k] / n) for k in range(value.shape[1])
        ]
    if release.family in _WINDOWED_NORMAL:
        mean = value[:, 0] / n
        spread = np.sqrt(np.maximum(value[:, 1] / n - mean**2, 0.0))
        return [
            ("mu", post["mu_g"].values.reshape(-1, size), value[:, 0], mean),
            ("sigma", post["sigma_g"].values.reshape(-1, size), value[:, 1], spread),
        ]
    trials = release.first.family_params.get("trials", 1)
    name = theta_name(release)
    draws = post[name].values.reshape(-1, size)
    return [(None, draws, value[:, 0], value[:, 0] / (n * trials))]


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
        elif release.family == "categorical":
            ax.set_xlabel(f"p of category {label} per group")
        else:
            ax.set_xlabel(f"{label} per group")
    axes[0][0].legend(frameon=False, loc="best")
    fig.suptitle(
        f"Partially pooled fit of a grouped {release.family} release, "
        f"ε = {release.epsilon:g}, {len(release)} groups"
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
