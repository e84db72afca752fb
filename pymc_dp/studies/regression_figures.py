"""Figures 3 and 4 of Bernstein & Sheldon (2019), drawn from the study's CSV rows.

Each function takes plain rows (as written to the CSV files) and returns a
:class:`matplotlib.figure.Figure` without choosing a backend.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pymc_dp.evaluation.measures import ecdf
from pymc_dp.studies.figures import axes_grid
from pymc_dp.studies.regression import PARAMETERS

__all__ = ["STYLE", "plot_calibration", "plot_coverage_and_mmd", "plot_predictive",
           "plot_regression_ecdf"]  # fmt: skip

STYLE = {
    "nonprivate": {"label": "Non-private", "color": "#009E73", "marker": "s", "linestyle": "--"},
    "naive": {"label": "Naive", "color": "#D55E00", "marker": "^", "linestyle": "-."},
    "gibbs_noisy": {"label": "Gibbs-SS-Noisy", "color": "#0072B2", "marker": "o",
                    "linestyle": "-"},
    "gibbs_update": {"label": "Gibbs-SS-Update", "color": "#56B4E9", "marker": "v",
                     "linestyle": "-"},
    "default": {"label": "Default (exact, collapsed)", "color": "#000000", "marker": "*",
                "linestyle": "-"},
    "mcmc_ind": {"label": "MCMC-Ind", "color": "#CC79A7", "marker": "D", "linestyle": ":"},
}  # fmt: skip
"""Okabe–Ito colours, with markers and line styles that survive greyscale."""


def _legend_below(fig: Any, ax: Any, ncols: int = 3) -> None:
    handles, names = ax.get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncols=ncols, frameon=False)


_SYMBOL = {"theta0": "θ₀", "theta1": "θ₁", "sigma2": "σ²"}


def _series(rows, method, parameter, column, select):
    pts = sorted(
        (r[select[0]], r[column])
        for r in rows
        if r["method"] == method and r["parameter"] == parameter and select[1](r)
        and r[column] is not None
    )  # fmt: skip
    return [p[0] for p in pts], [p[1] for p in pts]


def plot_calibration(
    rows: Sequence[Mapping[str, Any]], grid: Any, *, band: tuple[float, float] | None = None
) -> Any:
    """Figure 3a/b: KS of the calibration quantiles vs n (at ε) and vs ε (at n), per parameter.

    Methods run on fewer than ``grid.settings.trials`` trials (MCMC-Ind) are left out: their KS
    has another null band (about 0.3 for 6 trials), so on these axes it would look like a
    calibration failure.
    """
    rows = [r for r in rows if int(r["trials"]) >= grid.settings.trials]
    fig, axes = axes_grid(len(PARAMETERS), 2, 3.8, 2.6, sharey=True)
    panels = [
        ("n", lambda r: r["epsilon"] == grid.n_epsilon, f"ε = {grid.n_epsilon:g}", "n"),
        ("epsilon", lambda r: r["n"] == grid.epsilon_n, f"n = {grid.epsilon_n}", "ε"),
    ]
    for i, par in enumerate(PARAMETERS):
        for j, (key, keep, title, xlabel) in enumerate(panels):
            ax = axes[i, j]
            for method, style in STYLE.items():
                x, y = _series(rows, method, par, "ks", (key, keep))
                if x:
                    ax.plot(x, y, markersize=4, **style)
            if band:
                ax.axhspan(*band, color="0.85", zorder=0, label="95% band if calibrated")
            ax.set_xscale("log")
            ax.set_ylim(0, 1)
            ax.set_title(f"{_SYMBOL[par]}, {title}", fontsize=10)
            if i == len(PARAMETERS) - 1:
                ax.set_xlabel(xlabel)
            if j == 0:
                ax.set_ylabel("KS statistic")
    _legend_below(fig, axes[0, 0])
    return fig


def plot_regression_ecdf(point: Any) -> Any:
    """Figure 3c: ECDF of each method's calibration quantiles at one point, per parameter."""
    fig, axes = axes_grid(1, len(PARAMETERS), 3.2, 3.2)
    for j, par in enumerate(PARAMETERS):
        ax = axes[0, j]
        ax.plot([0, 1], [0, 1], color="0.6", linewidth=0.8)
        for method, style in STYLE.items():
            if method in point.quantiles:
                x, f = ecdf(point.quantiles[method][:, j])
                ax.step(x, f, where="post", **{k: v for k, v in style.items() if k != "marker"})
        ax.set_title(_SYMBOL[par], fontsize=10)
        ax.set_xlabel("quantile of true value")
        ax.set_aspect("equal")
    axes[0, 0].set_ylabel("empirical CDF")
    _legend_below(fig, axes[0, 0])
    fig.suptitle(f"n = {point.n}, ε = {point.epsilon:g}")
    return fig


def plot_coverage_and_mmd(rows: Sequence[Mapping[str, Any]], grid: Any) -> Any:
    """Figure 3d/e: 95 % coverage of θ₁ and MMD² to the non-private posterior vs n."""
    fig, axes = axes_grid(1, 2, 4.0, 3.0)
    keep = ("n", lambda r: r["epsilon"] == grid.n_epsilon)
    for method, style in STYLE.items():
        x, y = _series(rows, method, "theta1", "coverage_0.95", keep)
        if x:
            axes[0, 0].plot(x, y, markersize=4, **style)
        x, y = _series(rows, method, "theta1", "mmd2", keep)
        _, se = _series(rows, method, "theta1", "mmd2_se", keep)
        if x:
            axes[0, 1].errorbar(x, y, yerr=2 * np.asarray(se), markersize=4, **style)
    axes[0, 0].axhline(0.95, color="0.5", linewidth=0.8)
    axes[0, 0].set_ylabel("95% interval coverage of θ₁")
    axes[0, 1].set_ylabel("MMD² to non-private (± 2 se)")
    for ax in axes[0]:
        ax.set_xscale("log")
        ax.set_xlabel(f"n (ε = {grid.n_epsilon:g})")
    _legend_below(fig, axes[0, 0])
    return fig


def plot_predictive(rows: Sequence[Mapping[str, Any]]) -> Any:
    """Figure 4: coverage of the 50 % and 90 % predictive intervals, one panel per ε."""
    epsilons = sorted({r["epsilon"] for r in rows})
    fig, axes = axes_grid(1, len(epsilons), 3.4, 3.0, sharey=True)
    for ax, eps in zip(axes[0], epsilons, strict=True):
        sub = [r for r in rows if r["epsilon"] == eps]
        methods = [m for m in STYLE if any(r["method"] == m for r in sub)]
        width = 0.8 / len(methods)
        for k, m in enumerate(methods):
            (r,) = [r for r in sub if r["method"] == m]
            xs = np.arange(2) + (k - (len(methods) - 1) / 2) * width
            ax.bar(xs, [r["coverage_0.5"], r["coverage_0.9"]], width, color=STYLE[m]["color"],
                   label=STYLE[m]["label"])  # fmt: skip
        for i, level in enumerate((0.5, 0.9)):
            ax.hlines(level, i - 0.45, i + 0.45, color="k", linewidth=1)
        ax.set_xticks([0, 1], ["50% interval", "90% interval"])
        ax.set_ylim(0, 1.05)
        ax.set_title(f"ε = {eps:g}", fontsize=10)
    axes[0, 0].set_ylabel("coverage of test responses")
    _legend_below(fig, axes[0, 0], ncols=2)
    return fig
