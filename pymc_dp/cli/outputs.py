"""What ``pymc-dp fit`` writes: the posterior file and the figures of a fit.

:func:`check_posterior_path` runs before any sampling, so that a fit never ends unable to save
what it drew.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from pymc_dp.cli.messages import InputError
from pymc_dp.curator.data_files import InputFileError
from pymc_dp.curator.record import Release

__all__ = ["check_posterior_path", "claim_output_dir", "save_fit_figures", "save_posterior"]

_MAX_TRACE_ROWS = 12
"""Labelled categories up to this many get a trace row each."""


def check_posterior_path(path: str | Path) -> Path:
    """Check that :func:`save_posterior` can write ``path``, before any sampling is spent.

    Raises
    ------
    InputFileError
        If the name ends neither in ``.nc`` nor ``.zarr``, or the writer's package is missing.
    """
    path = Path(path)
    if path.suffix == ".zarr":
        needed = [("zarr", "zarr")]
    elif path.suffix == ".nc":
        # Grouped (NetCDF4) files, written by ArviZ through h5netcdf and h5py.
        needed = [("h5netcdf", "h5netcdf h5py"), ("h5py", "h5py")]
    else:
        raise InputFileError(f"{path}: the posterior file must end in .nc (NetCDF) or .zarr")
    for module, package in needed:
        if not _importable(module):
            raise InputFileError(
                f"{path}: writing {path.suffix} files needs {module}; install it with "
                f"pip install {package}"
            )
    return path


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def save_posterior(idata: Any, path: str | Path) -> Path:
    """Write a sampling result to NetCDF (``.nc``) or Zarr (``.zarr``); return the path.

    Works with ArviZ 0.x ``InferenceData`` and ArviZ 1.x ``DataTree``, which both have
    ``to_netcdf`` and ``to_zarr``. Zarr needs the ``zarr`` package, NetCDF h5netcdf with h5py
    (or netCDF4).

    Raises
    ------
    InputFileError
        As :func:`check_posterior_path`.
    """
    path = check_posterior_path(path)
    if path.suffix == ".zarr":
        idata.to_zarr(str(path))
    else:
        idata.to_netcdf(str(path))
    return path


def save_fit_figures(
    idata: Any, release: Release, prior: Mapping[str, Any] | None, out_dir: str | Path
) -> tuple[Path, Path]:
    """Write ``posterior.png`` and ``trace.png`` for a fit of a ready-made model.

    The model is :func:`pymc_dp.model.ready_made.build_model`'s.

    ``posterior.png`` has one panel per scalar parameter (``p[k]`` for each category): the
    noise-aware posterior's draws (a histogram: no KDE smooths a sharp posterior; an inset per
    separated mode) against the naive posterior that takes the
    noisy value as exact, and the prior's density over the same range (where it is flat next to
    the posterior, the release outweighs the prior; where the two look alike, the prior decides).
    ``trace.png`` is the trace plot of θ. The caller chooses the Matplotlib backend.

    Parameters
    ----------
    idata
        The sampling result (InferenceData or DataTree).
    release
        The release that was fitted.
    prior
        The prior hyperparameters used, by name (``None``: the defaults).
    out_dir
        Directory to write to.

    Returns
    -------
    tuple of Path
        The two files written.
    """
    import matplotlib.pyplot as plt

    from pymc_dp._compat import posterior_dataset
    from pymc_dp.model.ready_made import naive_marginals, prior_marginals, prior_spec
    from pymc_dp.plots import plot_trace

    out_dir = Path(out_dir)
    posterior = posterior_dataset(idata)
    naive = naive_marginals(release, prior)
    priors = prior_marginals(release, prior)
    title = f"{release.family} release: n = {release.n}, ε = {release.epsilon:g}"
    if getattr(release, "window_count", None) is not None:
        title += f" (sum) + {release.count_epsilon:g} (window count)"
    cols = 2 if len(naive) == 4 else min(len(naive), 3)
    rows = -(-len(naive) // cols)
    fig, axes = plt.subplots(
        # At least 6.5 in wide so that the two-line title fits over a single panel.
        rows,
        cols,
        figsize=(max(4.5 * cols, 6.5), 3.4 * rows),
        layout="constrained",
        squeeze=False,
    )
    for ax, (label, dist) in zip(axes.ravel(), naive.items(), strict=False):
        name, _, index = label.partition("[")
        shown = label
        draws = posterior[name].values
        if index:
            k = int(index.rstrip("]"))
            draws = draws[..., k]
            # The category's coordinate: its public label when the fit was given labels.
            (dim,) = (d for d in posterior[name].dims if d not in ("chain", "draw"))
            shown = f"{name}[{posterior[name][dim].values[k]}]"
        draws = draws.ravel()
        grid, bins, log_x = _panel_grid(draws, dist)
        if log_x:
            ax.set_xscale("log")
        # A histogram, not a KDE: a sharp posterior (n·ε large) is narrower than any KDE's
        # bandwidth, and a far mode would be smeared into a bridge.
        ax.hist(draws, bins=bins, density=True, color="#0072B2", alpha=0.25, linewidth=0)
        ax.hist(
            draws,
            bins=bins,
            density=True,
            histtype="step",
            color="#0072B2",
            lw=1.5,
            label="noise-aware",
        )
        ax.plot(grid, dist.pdf(grid), color="#D55E00", ls="--", lw=2, label="naive")
        ax.plot(grid, priors[label].pdf(grid), color="#555555", ls=":", lw=1.5, label="prior")
        _mark_modes(ax, draws)
        ax.set_xlabel(shown)
        ax.set_ylim(bottom=0)
    for ax in axes.ravel()[len(naive) :]:
        ax.set_axis_off()
    axes[0, 0].set_ylabel("posterior density")
    axes[0, 0].legend(frameon=True, framealpha=0.8, loc="best")
    fig.suptitle(f"Private {title}\nnoise-aware posterior, naive (noisy value as exact), prior")
    posterior_png = out_dir / "posterior.png"
    fig.savefig(posterior_png, dpi=110)
    plt.close(fig)
    variables = list(prior_spec(release.get_family()).variables)
    data = idata
    labelled = [v for v in variables if posterior[v].ndim == 3 and posterior[v].dtype.kind == "f"]
    if labelled and all(posterior[v].shape[-1] <= _MAX_TRACE_ROWS for v in labelled):
        # One row per labelled category: colours alone would not say which line is which.
        data = posterior[[v for v in variables if v not in labelled]]
        for v in labelled:
            dim = posterior[v].dims[-1]
            if posterior[v][dim].dtype.kind not in "OUS":  # codes 0..K-1: compact rows
                data = idata
                break
            for key in posterior[v][dim].values:
                data[f"{v}[{key}]"] = posterior[v].sel({dim: key}, drop=True)
        else:
            variables = list(data.data_vars)
    fig = plot_trace(data, variables, title=f"Noise-aware posterior trace, {title}")
    trace_png = out_dir / "trace.png"
    fig.savefig(trace_png, dpi=100)
    plt.close(fig)
    return posterior_png, trace_png


def _panel_grid(draws: np.ndarray, dist: Any) -> tuple[np.ndarray, np.ndarray, bool]:
    """The x grid, histogram bins and log-axis choice of one panel.

    The naive posterior may sit away from the noise-aware one, and both are shown; but an axis
    that runs to a heavy tail (a σ² whose naive posterior reaches 2300) hides the posterior, so
    the panel spans at most five times the draws' central 99.8%. Separated modes
    (:func:`~pymc_dp.evaluation.modes.separated_modes`) each get their own fine bins, and
    an inset each (:func:`_mark_modes`), so that every mode's shape shows.
    """
    from pymc_dp.evaluation.modes import separated_modes

    lo_d, hi_d = np.quantile(draws, [0.001, 0.999])
    lo = min(lo_d, float(dist.ppf(0.001)))
    hi = max(hi_d, float(dist.ppf(0.999)))
    span = max(hi_d - lo_d, 1e-12 * max(abs(hi_d), 1.0))
    lo, hi = max(lo, lo_d - 2 * span), min(hi, hi_d + 2 * span)
    modes = separated_modes(draws)
    if len(modes) < 2:
        grid = np.linspace(lo, hi, 400)
        return grid, np.histogram_bin_edges(draws, bins="auto", range=(lo, hi)), False
    edges = []
    for mode in sorted(modes, key=lambda m: m.median):
        width = mode.high - mode.low
        edges.append(np.linspace(mode.low - width, mode.high + width, 41))
    bins = np.unique(np.concatenate([[draws.min()], *edges, [draws.max()]]))
    lo, hi = min(lo, bins[0]), max(hi, bins[-1])
    # A linear axis (log ticks collide over one decade); _mark_modes zooms on each mode.
    return np.unique(np.concatenate([np.linspace(lo, hi, 2000), *edges])), bins, False


def _mark_modes(ax: Any, draws: np.ndarray) -> None:
    """Label each separated mode with its share of the mass, and zoom on it in an inset."""
    from pymc_dp.evaluation.modes import separated_modes

    modes = separated_modes(draws)
    if len(modes) < 2:
        return
    shown = sorted(modes[:3], key=lambda m: m.median)
    for i, mode in enumerate(shown):
        ax.axvline(mode.median, color="#0072B2", lw=0.8, ls=":")
        width = mode.high - mode.low
        inside = draws[(draws >= mode.low - width) & (draws <= mode.high + width)]
        inset = ax.inset_axes([0.06 + i * 0.33, 0.45, 0.26, 0.4])
        inset.hist(inside, bins=30, color="#0072B2", alpha=0.6)
        inset.set_yticks([])
        inset.tick_params(labelsize=7)
        inset.set_title(f"{mode.mass:.0%} near {mode.median:.4g}", fontsize=8, color="#0072B2")


def claim_output_dir(out: Path, names: list[str], overwrite: bool) -> None:
    """Create ``out``; refuse, unless ``overwrite``, if it holds an earlier fit's outputs."""
    from pymc_dp.curator.atomic import existing_outputs

    check_posterior_path(out / names[0])
    out.mkdir(parents=True, exist_ok=True)
    existing = existing_outputs(out, names)
    if existing and not overwrite:
        raise InputError(
            f"{out} already holds {', '.join(p.name for p in existing)} of an earlier fit; "
            "pass --overwrite to replace them, or choose another --output-dir"
        )
