"""Reproduce §4 and Appendix E of Bernstein & Sheldon (2018): Figures 1a, 1b, 1c and 2.

:func:`reproduce` runs every (model, n, ε) point of a :class:`Grid` (in parallel processes),
writes the figures as PNG, every plotted number as CSV plus a JSON report, and evaluates the
paper's qualitative claims as named checks with the numbers behind them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from pymc_dp.engine.gibbs import sample_gibbs
from pymc_dp.evaluation.measures import ks_band
from pymc_dp.studies.calibration import PointResult, StudySettings, run_point
from pymc_dp.studies.designs import DESIGNS
from pymc_dp.studies.running import ProgressBar, environment, jsonable, map_tasks, write_csv

__all__ = ["PAPER", "QUICK", "Check", "Grid", "Report", "reproduce"]

MMD_MODELS = ("binomial", "multinomial")
"""Models whose utility the paper compares (its Figure 1c omits the Exponential)."""


@dataclasses.dataclass(frozen=True)
class Grid:
    """The points and settings of a reproduction.

    Parameters
    ----------
    models
        Keys of :data:`pymc_dp.studies.designs.DESIGNS`.
    n_values, epsilons
        The grid of records per data set and privacy parameters.
    settings
        Trials, Gibbs iterations and scoring settings per point.
    ecdf_point
        The (n, ε) whose calibration ECDFs make Figure 1b.
    trace_point, trace_iterations, trace_chains
        The (n, ε), iterations and chains of Figure 2's convergence traces.
    alpha
        Family-wise level of the calibration checks over the whole grid.
    naive_max_n_eps
        The naive posterior is checked to be miscalibrated at every point of the paper's grid
        (``n_values`` × ``epsilons``) with n·ε up to this.
    extra_points
        (n, ε) points run for every model beyond the paper's grid: n = 10 at ε = 1, where the
        CLT for s is least accurate (the exact likelihood's test).
    """

    models: tuple[str, ...] = ("binomial", "multinomial", "exponential")
    n_values: tuple[int, ...] = (10, 30, 100, 300, 1000, 3000)
    epsilons: tuple[float, ...] = (0.01, 0.1)
    settings: StudySettings = dataclasses.field(default_factory=StudySettings)
    ecdf_point: tuple[int, float] = (1000, 0.01)
    trace_point: tuple[int, float] = (1000, 0.1)
    trace_iterations: int = 500
    trace_chains: int = 4
    alpha: float = 0.01
    naive_max_n_eps: float = 10.0
    extra_points: tuple[tuple[int, float], ...] = ((10, 1.0),)

    def points(self) -> list[tuple[str, int, float]]:
        """Every (model, n, ε), most expensive first (for load balancing)."""
        pts = [(m, n, e) for m in self.models for n in self.n_values for e in self.epsilons]
        pts += [
            (m, n, e) for m in self.models for n, e in self.extra_points if (m, n, e) not in pts
        ]
        return sorted(pts, key=lambda p: (p[0] == "binomial", -p[1]))


PAPER = Grid()
"""The paper's grid: n ∈ {10, …, 3000}, ε ∈ {0.01, 0.1}, 1000 trials, 2000 + 5000 iterations."""

QUICK = Grid(
    n_values=(10, 100, 1000),
    settings=StudySettings(trials=200, tune=500, draws=2000, mmd_draws=200),
    ecdf_point=(1000, 0.01),
)
"""A small grid for CI (200 trials, 500 + 2000 iterations) that still shows every claim."""


@dataclasses.dataclass(frozen=True)
class Check:
    """One qualitative claim of the paper, evaluated on the results."""

    name: str
    claim: str
    passed: bool
    details: list[dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class Report:
    """What :func:`reproduce` wrote and found."""

    output_dir: Path
    files: list[Path]
    checks: list[Check]
    wall_seconds: float

    @property
    def passed(self) -> bool:
        """Whether every check passed."""
        return all(c.passed for c in self.checks)


def _point_rng(seed: int, model: str, n: int, epsilon: float) -> np.random.Generator:
    # A point's stream depends only on its coordinates, so results do not depend on --jobs.
    return np.random.default_rng([seed, list(DESIGNS).index(model), n, round(epsilon * 1e6)])


def _run_task(task: tuple[str, int, float, StudySettings, int]) -> PointResult:
    model, n, epsilon, settings, seed = task
    rng = _point_rng(seed, model, n, epsilon)
    return run_point(DESIGNS[model], n, epsilon, settings, rng, with_mmd=model in MMD_MODELS)


def _trace_task(task: tuple[str, int, float, int, int, int]) -> dict[str, Any]:
    model, n, epsilon, iterations, chains, seed = task
    design = DESIGNS[model]
    rng = _point_rng(seed + 1, model, n, epsilon)
    sim = design.simulate(rng, trials=1, n=n, epsilon=epsilon)
    trace = sample_gibbs(
        rng,
        family=design.family,
        prior=design.prior,
        released=sim.released,
        n=n,
        scale=sim.scale,
        draws=iterations,
        chains=chains,
        bounds=design.bounds,
        method="augmented",  # Figure 2 shows the paper's Gibbs chains (Algorithm 1)
    )
    return {
        "theta": design.scalar(trace.theta)[:, :, 0],
        "truth": float(design.scalar(sim.truth)[0]),
        "title": f"n = {n}, ε = {epsilon:g}",
    }


def reproduce(
    output_dir: str | os.PathLike,
    grid: Grid = PAPER,
    *,
    seed: int = 2018,
    jobs: int | None = None,
    progress: bool = True,
) -> Report:
    """Run the study and write Figures 1a, 1b, 1c and 2 with their numbers.

    Parameters
    ----------
    output_dir
        Directory for the PNG, CSV and JSON files (created if missing).
    grid
        :data:`PAPER` (the paper's grid) or :data:`QUICK`, or a custom :class:`Grid`.
    seed
        Seed of the whole study; each point draws from its own stream.
    jobs
        Worker processes (default: the number of CPUs).
    progress
        Show a progress bar.

    Returns
    -------
    Report
        Files written, the qualitative checks and the wall time.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from pymc_dp.studies import figures

    start = time.perf_counter()
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    jobs = jobs or os.cpu_count() or 1
    tasks = [(m, n, e, grid.settings, seed) for m, n, e in grid.points()]
    n_tr, e_tr = grid.trace_point
    trace_models = [m for m in ("binomial", "exponential") if m in grid.models]
    trace_tasks = [
        (m, n_tr, e_tr, grid.trace_iterations, grid.trace_chains, seed) for m in trace_models
    ]

    with ProgressBar(progress, len(tasks) + len(trace_tasks)) as advance:
        results = map_tasks(_run_task, tasks, jobs, advance)
        trace_results = map_tasks(_trace_task, trace_tasks, 1, advance)
        traces = dict(zip(trace_models, trace_results, strict=True))
    results.sort(key=lambda r: (grid.models.index(r.design), r.epsilon, r.n))
    labels = {k: d.label for k, d in DESIGNS.items()}
    rows = [row for r in results for row in r.to_rows()]
    files = []

    def save(fig, name):
        path = out / name
        fig.savefig(path, dpi=150)
        plt.close(fig)
        files.append(path)

    trials = grid.settings.trials
    band = ks_band(trials, level=0.95)
    save(figures.plot_ks(rows, band=band, labels=labels), "figure1a_calibration_ks.png")
    files.append(write_csv(out / "figure1a_calibration_ks.csv", rows))

    n_e, e_e = grid.ecdf_point
    at_ecdf = {r.design: r.quantiles for r in results if (r.n, r.epsilon) == (n_e, e_e)}
    if at_ecdf:
        title = f"Calibration ECDFs at n = {n_e}, ε = {e_e:g} ({trials} trials)"
        save(figures.plot_ecdf(at_ecdf, title=title, labels=labels), "figure1b_ecdf.png")
        ecdf_rows = [
            {"model": m, "method": k, "trial": i, "quantile": float(q)}
            for m, by in at_ecdf.items()
            for k, u in by.items()
            for i, q in enumerate(u)
        ]
        files.append(write_csv(out / "figure1b_ecdf.csv", ecdf_rows))
    mmd_rows = [r for r in rows if r["mmd2"] is not None]
    if mmd_rows:
        save(figures.plot_mmd(mmd_rows, labels=labels), "figure1c_mmd.png")
        files.append(write_csv(out / "figure1c_mmd.csv", mmd_rows))
    if traces:
        save(figures.plot_traces(traces, labels=labels), "figure2_traces.png")
        trace_rows = [
            {"model": m, "chain": c, "iteration": i, "theta": float(v), "truth": tr["truth"]}
            for m, tr in traces.items()
            for c, chain in enumerate(tr["theta"])
            for i, v in enumerate(chain)
        ]
        files.append(write_csv(out / "figure2_traces.csv", trace_rows))

    checks = evaluate_checks(results, grid)
    wall = time.perf_counter() - start
    report = {
        "paper": "Bernstein & Sheldon (2018), Differentially Private Bayesian Inference for "
        "Exponential Families, §4 and Appendix E",
        "grid": jsonable(dataclasses.asdict(grid)),
        "seed": seed,
        "jobs": jobs,
        "wall_seconds": wall,
        "environment": environment(),
        "ks_band_95_if_calibrated": list(band),
        "checks": [dataclasses.asdict(c) for c in checks],
        "points": [
            {
                "model": r.design,
                "n": r.n,
                "epsilon": r.epsilon,
                "seconds": r.seconds,
                "gibbs_median_ess": r.gibbs_median_ess,
                "mmd2_gibbs_minus_naive": r.mmd_gibbs_minus_naive,
                "scores": {k: dataclasses.asdict(s) for k, s in r.scores.items()},
            }
            for r in results
        ],
    }
    path = out / "report.json"
    path.write_text(json.dumps(jsonable(report), indent=1))
    files.append(path)
    return Report(out, files, checks, wall)


def evaluate_checks(results: Iterable[PointResult], grid: Grid) -> list[Check]:
    """The paper's §4 claims, each as a :class:`Check` over every grid point.

    Parameters
    ----------
    results
        One :class:`PointResult` per grid point.
    grid
        The grid that produced them (its trial count, ``alpha`` and ``naive_max_n_eps``).

    Returns
    -------
    list of Check
    """
    results = list(results)
    trials = grid.settings.trials
    # Family-wise level alpha over the grid: each point's KS must be below the null quantile.
    _, upper = ks_band(trials, level=1 - 2 * grid.alpha / max(len(results), 1))

    def ks_rows(method, select=lambda r: True):
        return [
            {"model": r.design, "n": r.n, "epsilon": r.epsilon, "ks": r.scores[method].ks}
            for r in results
            if method in r.scores and select(r)
        ]

    gibbs = ks_rows("gibbs")
    nonprivate = ks_rows("nonprivate")
    small = ks_rows(
        "naive", lambda r: r.n * r.epsilon <= grid.naive_max_n_eps and r.epsilon in grid.epsilons
    )
    ops = [
        {
            "model": r.design,
            "n": r.n,
            "epsilon": r.epsilon,
            "sd_ratio": r.scores["ops"].sd_ratio,
            "coverage_0.5": r.scores["ops"].coverage[0.5],
        }
        for r in results
        if "ops" in r.scores
    ]
    mmd = [
        {
            "model": r.design,
            "n": r.n,
            "epsilon": r.epsilon,
            "gibbs": r.scores["gibbs"].mmd2,
            "naive": r.scores["naive"].mmd2,
            "difference": r.mmd_gibbs_minus_naive[0],
            "se": r.mmd_gibbs_minus_naive[1],
        }
        for r in results
        if r.mmd_gibbs_minus_naive is not None
    ]
    band = f"KS ≤ {upper:.4f}, the {1 - grid.alpha / len(results):.5f} quantile of the KS of "
    band += f"{trials} uniforms (family-wise level {grid.alpha} over {len(results)} points)"
    return [
        Check(
            "gibbs_calibrated",
            f"Gibbs is calibrated at every point: {band}",
            all(r["ks"] <= upper for r in gibbs),
            gibbs,
        ),
        Check(
            "nonprivate_calibrated",
            f"The non-private posterior (exact by construction) passes the same band: {band}",
            all(r["ks"] <= upper for r in nonprivate),
            nonprivate,
        ),
        Check(
            "naive_miscalibrated_small_n_eps",
            f"Naive is miscalibrated (KS > {upper:.4f}) at every point with n·ε ≤ "
            f"{grid.naive_max_n_eps:g}",
            bool(small) and all(r["ks"] > upper for r in small),
            small,
        ),
        Check(
            "ops_overdispersed",
            "OPS samples an over-dispersed version of the posterior: its median posterior sd "
            "exceeds the non-private posterior's at every point (ratio > 1)",
            bool(ops) and all(r["sd_ratio"] > 1 for r in ops),
            ops,
        ),
        Check(
            "gibbs_mmd_at_most_naive",
            "Gibbs MMD² to the non-private posterior is at most naive's (mean paired difference "
            "< 3 standard errors) at every Binomial and Multinomial point",
            bool(mmd) and all(r["difference"] < 3 * r["se"] for r in mmd),
            mmd,
        ),
    ]
