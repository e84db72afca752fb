"""Figures for the demo: posterior comparison and trace plots, on ArviZ 0.x and 1.x.

ArviZ 0.x draws the classic two-column trace plot with ``az.plot_trace``; ArviZ 1.x moved its
plotting to ``arviz_plots``, where that figure is ``plot_trace_dist`` and ``plot_trace`` draws
only the trace column. The difference is confined to :func:`plot_trace`. Both functions return
a :class:`matplotlib.figure.Figure`, and neither picks a backend, so a script can call
``matplotlib.use("Agg")`` first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import arviz as az
import numpy as np
import numpy.typing as npt
from scipy import stats

__all__ = ["plot_posterior_comparison", "plot_trace"]

# Colour-blind-safe (Okabe-Ito) so the three posteriors stay distinguishable in greyscale too.
_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00")
_LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1)))


def plot_posterior_comparison(
    draws: Mapping[str, npt.ArrayLike],
    densities: Mapping[str, Any],
    *,
    truth: float | None = None,
    title: str | None = None,
    xlabel: str = "p",
    grid_size: int = 512,
) -> Any:
    """Overlay posterior densities of one scalar parameter.

    Sampled posteriors are drawn as a Gaussian KDE over a light histogram of their draws;
    closed-form posteriors (frozen :mod:`scipy.stats` distributions) as their pdf.

    Parameters
    ----------
    draws
        Label → posterior draws (any shape; flattened), e.g. ``{"DP Gibbs": p_draws}``.
    densities
        Label → frozen scipy distribution with ``pdf`` and ``ppf``, e.g. the naive posterior.
    truth
        True parameter value, drawn as a vertical line when given.
    title
        Figure title.
    xlabel
        Label of the parameter axis.
    grid_size
        Number of grid points for the curves.

    Returns
    -------
    matplotlib.figure.Figure
        A one-axis figure; the caller saves or closes it.

    Raises
    ------
    ValueError
        If nothing is given to plot, or a set of draws has fewer than two finite values.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import stats
    >>> draws = np.random.default_rng(0).beta(30, 70, size=500)
    >>> fig = plot_posterior_comparison(
    ...     {"MCMC": draws}, {"exact": stats.beta(30, 70)}, truth=0.3, title="demo"
    ... )
    >>> [t.get_text() for t in fig.axes[0].get_legend().get_texts()][:2]
    ['MCMC', 'exact']
    >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    import matplotlib.pyplot as plt  # deferred so that callers choose the backend first

    if not draws and not densities:
        raise ValueError("plot_posterior_comparison needs at least one of draws or densities")
    samples = {}
    for label, values in draws.items():
        flat = np.asarray(values, dtype=np.float64).ravel()
        flat = flat[np.isfinite(flat)]
        if flat.size < 2:
            raise ValueError(f"draws[{label!r}] needs at least 2 finite values (got {flat.size})")
        samples[label] = flat

    # One grid wide enough for every curve and the truth: a posterior that misses the truth
    # (the naive one at small n·ε) is the point of the figure, so nothing may be cut off.
    lows = [np.quantile(v, 0.0005) for v in samples.values()]
    highs = [np.quantile(v, 0.9995) for v in samples.values()]
    lows += [float(d.ppf(0.0005)) for d in densities.values()]
    highs += [float(d.ppf(0.9995)) for d in densities.values()]
    if truth is not None:
        lows.append(truth)
        highs.append(truth)
    lo, hi = min(lows), max(highs)
    pad = 0.05 * (hi - lo) if hi > lo else 0.05
    grid = np.linspace(lo - pad, hi + pad, grid_size)

    fig, ax = plt.subplots(figsize=(7.5, 4.5), layout="constrained")
    styles = iter(zip(_COLOURS, _LINESTYLES, strict=True))
    for label, flat in samples.items():
        colour, style = next(styles)
        ax.hist(flat, bins="auto", density=True, color=colour, alpha=0.2, linewidth=0)
        ax.plot(grid, stats.gaussian_kde(flat)(grid), color=colour, ls=style, lw=2, label=label)
    for label, dist in densities.items():
        colour, style = next(styles)
        ax.plot(grid, dist.pdf(grid), color=colour, ls=style, lw=2, label=label)
    if truth is not None:
        ax.axvline(truth, color="black", lw=1.2, label=f"true {xlabel} = {truth:.3f}")
    ax.set_xlim(grid[0], grid[-1])
    ax.set_ylim(bottom=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("posterior density")
    if title:
        ax.set_title(title)
    ax.legend(frameon=False)
    return fig


def plot_trace(data: Any, var_names: Sequence[str], *, title: str | None = None) -> Any:
    """Trace plot (marginal density and draws against iteration, one row per variable).

    Parameters
    ----------
    data
        ``arviz.InferenceData`` (ArviZ 0.x), ``xarray.DataTree`` (ArviZ 1.x) or an
        ``xarray.Dataset`` of posterior draws with ``chain`` and ``draw`` dimensions.
    var_names
        Scalar variables to plot, in order.
    title
        Figure title.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> rng = np.random.default_rng(0)
    >>> ds = xr.Dataset({"a": (("chain", "draw"), rng.normal(size=(2, 100)))})
    >>> fig = plot_trace(ds, ["a"], title="a trace")
    >>> len(fig.axes) >= 2
    True
    >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    var_names = list(var_names)
    figsize = (10.0, 1.0 + 2.2 * len(var_names))
    if hasattr(az, "plot_trace_dist"):
        # ArviZ 1.x: arviz_plots returns a PlotCollection wrapping the matplotlib figure.
        collection = az.plot_trace_dist(
            data,
            var_names=var_names,
            backend="matplotlib",
            figure_kwargs={"figsize": figsize},
            # Its default lines are thick and opaque: thousands of draws become a solid band.
            visuals={"trace": {"width": 0.6, "alpha": 0.6}},
        )
        fig = collection.get_viz("figure")
    else:
        axes = az.plot_trace(data, var_names=var_names, figsize=figsize, compact=True)
        fig = np.asarray(axes).ravel()[0].figure
    if fig.get_layout_engine() is None:  # ArviZ 0.x leaves subplot titles overlapping
        fig.set_layout_engine("constrained")
    if title:
        fig.suptitle(title)
    return fig
