"""Figures 1a–c and 2 of Bernstein & Sheldon (2018), drawn from study results.

Each function takes plain tables (lists of dicts as written to the CSV files) so a figure can be
redrawn from the saved numbers, and returns a :class:`matplotlib.figure.Figure` without choosing
a backend.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from pymc_dp.evaluation.measures import ecdf

__all__ = ["plot_ecdf", "plot_ks", "plot_mmd", "plot_traces"]

STYLE = {
    "gibbs": {"label": "Gibbs (DP)", "color": "#0072B2", "marker": "o", "linestyle": "-"},
    "nonprivate": {"label": "Non-private", "color": "#009E73", "marker": "s", "linestyle": "--"},
    "naive": {"label": "Naive", "color": "#D55E00", "marker": "^", "linestyle": "-."},
    "ops": {"label": "OPS", "color": "#CC79A7", "marker": "D", "linestyle": ":"},
}
"""Colour-blind-safe (Okabe–Ito) colours, with markers and line styles that survive greyscale."""


def _models(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    return list(dict.fromkeys(r["model"] for r in rows))  # in the order of the rows


def _epsilons(rows: Sequence[Mapping[str, Any]]) -> list[float]:
    return sorted({r["epsilon"] for r in rows})


def axes_grid(rows: int, cols: int, width: float, height: float, **kwargs: Any) -> tuple[Any, Any]:
    """A rows × cols grid of panels of the given size (inches), always as a 2-D array."""
    import matplotlib.pyplot as plt  # deferred so that callers choose the backend first

    size = (width * cols, height * rows)
    return plt.subplots(rows, cols, figsize=size, squeeze=False, layout="constrained", **kwargs)


def _legend_below(fig: Any, ax: Any) -> None:
    handles, names = ax.get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncols=len(names), frameon=False)


def _series(rows, model, epsilon, method, column):
    pts = sorted(
        (r["n"], r[column])
        for r in rows
        if r["model"] == model
        and r["epsilon"] == epsilon
        and r["method"] == method
        and r[column] is not None
    )
    return [p[0] for p in pts], [p[1] for p in pts]


def plot_ks(
    rows: Sequence[Mapping[str, Any]],
    *,
    band: tuple[float, float] | None = None,
    labels: Mapping[str, str] | None = None,
) -> Any:
    """Figure 1a: KS statistic of the calibration quantiles against n, one panel per model × ε.

    Parameters
    ----------
    rows
        Table rows with ``model, n, epsilon, method, ks``.
    band
        Central interval of a perfectly calibrated method's KS statistic, drawn shaded.
    labels
        Model key → display name.

    Returns
    -------
    matplotlib.figure.Figure
    """
    models, epsilons = _models(rows), _epsilons(rows)
    fig, axes = axes_grid(len(epsilons), len(models), 3.6, 3.0, sharex=True)
    for i, eps in enumerate(epsilons):
        for j, model in enumerate(models):
            ax = axes[i, j]
            for method, style in STYLE.items():
                x, y = _series(rows, model, eps, method, "ks")
                if x:
                    ax.plot(x, y, markersize=4, **style)
            if band:
                ax.axhspan(*band, color="0.85", zorder=0, label="95% band if calibrated")
            ax.set_xscale("log")
            ax.set_ylim(0, 1)
            ax.set_title(f"{(labels or {}).get(model, model)}, ε = {eps:g}", fontsize=10)
            if i == len(epsilons) - 1:
                ax.set_xlabel("n (records)")
            if j == 0:
                ax.set_ylabel("KS statistic (lower is better)")
    _legend_below(fig, axes[0, 0])
    return fig


def plot_ecdf(
    quantiles: Mapping[str, Mapping[str, npt.ArrayLike]],
    *,
    title: str,
    labels: Mapping[str, str] | None = None,
) -> Any:
    """Figure 1b: empirical CDFs of each method's calibration quantiles, one panel per model.

    Parameters
    ----------
    quantiles
        Model → method → calibration quantiles.
    title
        Figure title (the (n, ε) of the panels).
    labels
        Model key → display name.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, axes = axes_grid(1, len(quantiles), 3.6, 3.4)
    for ax, (model, by_method) in zip(axes[0], quantiles.items(), strict=True):
        ax.plot([0, 1], [0, 1], color="0.6", linewidth=0.8)
        for method, style in STYLE.items():
            if method in by_method:
                x, f = ecdf(by_method[method])
                ax.step(x, f, where="post", **{k: v for k, v in style.items() if k != "marker"})
        ax.set_title((labels or {}).get(model, model), fontsize=10)
        ax.set_xlabel("quantile of true θ in posterior")
        ax.set_aspect("equal")
    axes[0, 0].set_ylabel("empirical CDF")
    _legend_below(fig, axes[0, 0])
    fig.suptitle(title)
    return fig


def plot_mmd(rows: Sequence[Mapping[str, Any]], *, labels: Mapping[str, str] | None = None) -> Any:
    """Figure 1c: MMD² to the non-private posterior against n, one panel per model × ε.

    Parameters
    ----------
    rows
        Table rows with ``model, n, epsilon, method, mmd2, mmd2_se``; rows without MMD are
        skipped.
    labels
        Model key → display name.

    Returns
    -------
    matplotlib.figure.Figure
    """
    rows = [r for r in rows if r.get("mmd2") is not None]
    models, epsilons = _models(rows), _epsilons(rows)
    fig, axes = axes_grid(len(epsilons), len(models), 3.6, 3.0, sharex=True)
    for i, eps in enumerate(epsilons):
        for j, model in enumerate(models):
            ax = axes[i, j]
            for method in ("gibbs", "naive"):
                x, y = _series(rows, model, eps, method, "mmd2")
                _, se = _series(rows, model, eps, method, "mmd2_se")
                if x:
                    ax.errorbar(x, y, yerr=2 * np.asarray(se), markersize=4, **STYLE[method])
            ax.set_xscale("log")
            ax.set_title(f"{(labels or {}).get(model, model)}, ε = {eps:g}", fontsize=10)
            if i == len(epsilons) - 1:
                ax.set_xlabel("n (records)")
            if j == 0:
                ax.set_ylabel("MMD² to non-private (± 2 se)")
    _legend_below(fig, axes[0, 0])
    return fig


def plot_traces(
    traces: Mapping[str, Mapping[str, Any]], *, labels: Mapping[str, str] | None = None
) -> Any:
    """Figure 2: θ over the first Gibbs iterations of several chains, with the true θ.

    Parameters
    ----------
    traces
        Model → ``{"theta": (chains, iterations) array, "truth": float, "title": str}``.
    labels
        Model key → display name.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, axes = axes_grid(1, len(traces), 4.8, 3.2)
    for ax, (model, tr) in zip(axes[0], traces.items(), strict=True):
        theta = np.asarray(tr["theta"])
        for c, chain in enumerate(theta):
            ax.plot(chain, linewidth=0.8, alpha=0.8, label=f"chain {c + 1}")
        ax.axhline(tr["truth"], color="k", linestyle="--", linewidth=1.2, label="true θ")
        ax.set_title(f"{(labels or {}).get(model, model)}: {tr['title']}", fontsize=10)
        ax.set_xlabel("iteration")
        ax.set_ylabel(tr.get("ylabel", "θ"))
    axes[0, 0].legend(fontsize=8, ncols=2)
    return fig
