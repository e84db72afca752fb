"""Partially pooled models of grouped releases (:class:`~pymc_dp.ReleaseSet`), for ``fit``.

One release per group, one parameter per group, drawn from a common population on the link
scale, non-centred so that NUTS mixes when the groups are alike (small τ):

=====================  ==========================================================
family                 model
=====================  ==========================================================
bernoulli, binomial    logit p_g = μ + τ z_g,   z_g ~ N(0, 1)
poisson                log λ_g = μ + τ z_g,     z_g ~ N(0, 1)
=====================  ==========================================================

with μ ~ N(``mu_mean``, ``mu_sd``) and τ ~ HalfNormal(``tau_sd``). The defaults come from
public values only, as :mod:`pymc_dp.priors` does: μ centred at logit ½ (sd 1.5, flat over
p on the probability scale) for counts of successes, and at log m for a Poisson window
[a, b] of centre m (sd 1, a factor e either way); τ ~ HalfNormal(1), groups differing by a
factor of up to about e on the link scale.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pymc as pm

from pymc_dp.noisy_suffstat import NoisySuffStat
from pymc_dp.release_set import ReleaseSet

__all__ = [
    "HIERARCHICAL_FAMILIES",
    "build_grouped_model",
    "group_summary",
    "grouped_prior_hyperparameters",
    "save_grouped_figures",
    "theta_name",
]

HIERARCHICAL_FAMILIES = ("bernoulli", "binomial", "poisson")
"""Families with a ready-made partially pooled model."""

_PRIOR_NAMES = ("mu_mean", "mu_sd", "tau_sd")


def grouped_prior_hyperparameters(
    release: ReleaseSet, prior: Mapping[str, Any] | None = None
) -> dict[str, float]:
    """The hyperparameters ``mu_mean``, ``mu_sd`` and ``tau_sd``: defaults, then ``prior``.

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
    if family.name == "poisson":
        from pymc_dp.priors import window_scale

        centre, _ = window_scale(family, release.first.bounds)
        values = {"mu_mean": math.log(centre), "mu_sd": 1.0, "tau_sd": 1.0}
    else:
        values = {"mu_mean": 0.0, "mu_sd": 1.5, "tau_sd": 1.0}
    for key, value in dict(prior or {}).items():
        if key not in _PRIOR_NAMES:
            raise ValueError(
                f"unknown prior parameter {key!r} for a grouped {family.name} release; the "
                f"names are {', '.join(_PRIOR_NAMES)}"
            )
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not math.isfinite(value):
            raise ValueError(f"prior {key} must be a finite number (got {value!r})")
        if key != "mu_mean" and value <= 0:
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


def theta_name(release: ReleaseSet) -> str:
    """Name of the per-group parameter: ``"p"`` or ``"lam"``."""
    return "lam" if release.family == "poisson" else "p"


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
        A :class:`~pymc_dp.ReleaseSet` of Bernoulli, Binomial or windowed Poisson releases.
    prior
        ``mu_mean``, ``mu_sd``, ``tau_sd`` by name; missing ones take the public defaults
        (:func:`grouped_prior_hyperparameters`).
    name
        Name of the NoisySuffStat node.
    dims
        Name of the group dimension.
    likelihood
        Passed to :class:`~pymc_dp.NoisySuffStat`.

    Returns
    -------
    pymc.Model
        Free variables ``mu``, ``tau``, ``z`` (dims ``group``); deterministic ``p`` or ``lam``
        per group.

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
    with pm.Model(coords=release.coords(dims)) as model:
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


def _naive(release: ReleaseSet) -> np.ndarray:
    """Each group's naive estimate, the released value taken as exact: y_g / (n_g · trials)."""
    trials = release.first.family_params.get("trials", 1)
    return release.value.reshape(-1) / (release.n * trials)


def group_summary(idata: Any, release: ReleaseSet) -> Any:
    """Per-group table: n_g, released y_g, naive estimate, posterior mean, sd, 3 % and 97 %.

    Returns
    -------
    pandas.DataFrame
        One row per group, indexed by the group keys.
    """
    import pandas as pd

    from pymc_dp._compat import posterior_dataset

    name = theta_name(release)
    draws = posterior_dataset(idata)[name].values.reshape(-1, len(release))
    return pd.DataFrame(
        {
            "n": release.n,
            "released": release.value.reshape(-1),
            "naive": _naive(release),
            "mean": draws.mean(axis=0),
            "sd": draws.std(axis=0, ddof=1),
            "q3%": np.quantile(draws, 0.03, axis=0),
            "q97%": np.quantile(draws, 0.97, axis=0),
        },
        index=pd.Index([str(g) for g in release.groups], name=release.by or "group"),
    )


def save_grouped_figures(idata: Any, release: ReleaseSet, out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``posterior.png`` (per-group intervals against the naive estimates) and ``trace.png``.

    Returns
    -------
    tuple of Path
        The two files written.
    """
    import matplotlib.pyplot as plt

    from pymc_dp.plots import plot_trace

    out_dir = Path(out_dir)
    table = group_summary(idata, release)
    name = theta_name(release)
    rows = np.arange(len(table))[::-1]
    fig, ax = plt.subplots(figsize=(6.5, 1.2 + 0.4 * len(table)), layout="constrained")
    ax.hlines(rows, table["q3%"], table["q97%"], color="#0072B2", lw=2, label="DP posterior 94 %")
    ax.plot(table["mean"], rows, "o", color="#0072B2")
    ax.plot(table["naive"], rows, "x", color="#D55E00", label="naive (noisy value as exact)")
    ax.set_yticks(rows, table.index)
    ax.set_xlabel(f"{name} per group")
    ax.legend(frameon=False, loc="best")
    ax.set_title(
        f"Partially pooled fit of a grouped {release.family} release, "
        f"ε = {release.epsilon:g}, {len(release)} groups"
    )
    posterior_png = out_dir / "posterior.png"
    fig.savefig(posterior_png, dpi=110)
    plt.close(fig)
    fig = plot_trace(idata, ["mu", "tau"], title="Population parameters (link scale)")
    trace_png = out_dir / "trace.png"
    fig.savefig(trace_png, dpi=110)
    plt.close(fig)
    return posterior_png, trace_png
