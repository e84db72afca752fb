"""Run the regression studies (Figures 3 and 4 of Bernstein & Sheldon 2019) and write a report.

:func:`run_regression_study` runs every synthetic (n, ε) point (in parallel processes) and the
cirrhosis predictive study, writes PNG figures, every plotted number as CSV and a JSON report,
and evaluates the paper's claims as named :class:`~pymc_dp.studies.Check` objects.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pymc_dp.evaluation.measures import ks_band
from pymc_dp.studies.regression import (
    PARAMETERS,
    RegressionPoint,
    RegressionSettings,
    run_regression_point,
)
from pymc_dp.studies.regression_predictive import (
    PredictiveResult,
    PredictiveSettings,
    run_predictive_study,
)
from pymc_dp.studies.reproduce import Check
from pymc_dp.studies.running import ProgressBar, environment, jsonable, map_tasks, write_csv

__all__ = [
    "FULL",
    "QUICK",
    "RegressionGrid",
    "RegressionReport",
    "evaluate_predictive_checks",
    "evaluate_synthetic_checks",
    "run_regression_study",
]


@dataclasses.dataclass(frozen=True)
class RegressionGrid:
    """Points, settings and check tolerances of the regression studies.

    ``n_values`` are run at ``n_epsilon`` (Figure 3a), ``epsilons`` at ``epsilon_n``
    (Figure 3b), as in the paper's caption (ε = 0.1; n = 10).
    """

    n_values: tuple[int, ...] = (10, 30, 100, 300, 1000)
    n_epsilon: float = 0.1
    epsilons: tuple[float, ...] = (0.1, 1.0, 10.0, 100.0)
    epsilon_n: int = 10
    settings: RegressionSettings = dataclasses.field(default_factory=RegressionSettings)
    predictive: PredictiveSettings = dataclasses.field(default_factory=PredictiveSettings)
    alpha: float = 0.01
    naive_max_n_eps: float = 10.0
    coverage_tolerance: float = 0.1
    """Largest |coverage − non-private coverage| accepted as "close" in Figure 4."""
    default_tolerance: float = 0.05
    """The same for the default sampler, at ε ≥ 1 (issue 17)."""

    def points(self) -> list[tuple[int, float]]:
        """Every (n, ε), without duplicates."""
        pts = [(n, self.n_epsilon) for n in self.n_values]
        pts += [(self.epsilon_n, e) for e in self.epsilons if (self.epsilon_n, e) not in pts]
        return pts


FULL = RegressionGrid(
    settings=RegressionSettings(trials=400, mcmc_trials=6, mcmc_tune=150, mcmc_draws=150)
)
"""The run of ``docs/regression.md``: 400 trials per point, 2 chains × 1500 Gibbs draws after
500, MCMC-Ind (NUTS, 150 + 150 iterations) on 6 trials at n = 10; Figure 4 with 100 splits
at ε ∈ {0.1, 1, 10}."""
QUICK = RegressionGrid(
    n_values=(10, 100),
    epsilons=(0.1, 10.0),
    settings=RegressionSettings(trials=60, tune=100, draws=300, reference_draws=500, mmd_draws=100),
    predictive=PredictiveSettings(splits=10, epsilons=(1.0,), tune=100, draws=300),
)
"""Seconds; a smoke test of the whole pipeline (its checks are not meaningful at 60 trials)."""


@dataclasses.dataclass(frozen=True)
class RegressionReport:
    """What :func:`run_regression_study` wrote and found."""

    output_dir: Path
    files: list[Path]
    checks: list[Check]
    wall_seconds: float

    @property
    def passed(self) -> bool:
        """Whether every check passed."""
        return all(c.passed for c in self.checks)


def _point_task(task: tuple[int, float, RegressionSettings, int]) -> RegressionPoint:
    n, epsilon, settings, seed = task
    # A point's stream depends only on its coordinates, so results do not depend on jobs.
    rng = np.random.default_rng([seed, n, round(epsilon * 1e6)])
    return run_regression_point(n, epsilon, settings, rng)


def _predictive_task(task: tuple[PredictiveSettings, int]) -> list[PredictiveResult]:
    settings, seed = task
    return run_predictive_study(settings, np.random.default_rng([seed, 4]))


def evaluate_synthetic_checks(
    points: Sequence[RegressionPoint], grid: RegressionGrid
) -> list[Check]:
    """The paper's Figure 3 claims as checks over every synthetic point.

    Calibration: a method passes at a point if the KS statistic of each parameter is below the
    null quantile at family-wise level ``alpha`` (Bonferroni over points × 3 parameters).
    """
    points = list(points)
    tests = max(3 * len(points), 1)

    def upper(trials: int) -> float:
        return ks_band(trials, level=1 - 2 * grid.alpha / tests).upper

    def rows(method, select=lambda p: True):
        out = []
        for p in points:
            if method in p.ks and select(p):
                limit = upper(p.trials[method])
                out.append({"n": p.n, "epsilon": p.epsilon, "ks": p.ks[method], "limit": limit})
        return out

    def calibrated(method):
        r = rows(method)
        return Check(
            f"{method}_calibrated",
            f"{method} is calibrated at every point: KS of each of {PARAMETERS} below the "
            f"null quantile at family-wise level {grid.alpha} ({tests} tests)",
            bool(r) and all(max(x["ks"]) <= x["limit"] for x in r),
            r,
        )

    small = rows("naive", lambda p: p.n * p.epsilon <= grid.naive_max_n_eps)
    cover = []
    for p in points:
        for m in ("gibbs_noisy", "gibbs_update"):
            se = np.sqrt(0.95 * 0.05 / p.trials[m])
            cover.append({"n": p.n, "epsilon": p.epsilon, "method": m,
                          "coverage": p.coverage95[m], "tolerance": 4 * se})  # fmt: skip
    mmd = [
        {"n": p.n, "epsilon": p.epsilon, "gibbs_noisy": p.mmd2["gibbs_noisy"][0],
         "naive": p.mmd2["naive"][0], "difference": p.mmd_difference[0],
         "se": p.mmd_difference[1]}
        for p in points
    ]  # fmt: skip
    default_cover = [
        {"n": p.n, "epsilon": p.epsilon, "coverage": p.coverage95["default"]}
        for p in points
        if "default" in p.coverage95
    ]
    default_mmd = [
        {"n": p.n, "epsilon": p.epsilon, "default": p.mmd2["default"][0],
         "gibbs_update": p.mmd2["gibbs_update"][0], "difference": p.default_mmd_difference[0],
         "se": p.default_mmd_difference[1]}
        for p in points
        if "default" in p.mmd2
    ]  # fmt: skip
    checks = [calibrated(m) for m in ("nonprivate", "gibbs_noisy", "gibbs_update", "default")]
    checks += [
        Check(
            "default_coverage95",
            "The default's 95 % credible intervals cover between 0.93 and 0.97 for each "
            "parameter at every point",
            bool(default_cover)
            and all(0.93 <= c <= 0.97 for r in default_cover for c in r["coverage"]),
            default_cover,
        ),
        Check(
            "default_mmd_below_gibbs_update",
            "The default's MMD² to the non-private posterior is below Gibbs-SS-Update's (with "
            "the design's own prior of x) at every point: paired difference < 0",
            bool(default_mmd) and all(r["difference"] < 0 for r in default_mmd),
            default_mmd,
        ),
    ]
    checks += [
        Check(
            "naive_miscalibrated_small_n_eps",
            f"Naive is miscalibrated (some parameter's KS above the limit) at every point with "
            f"n·ε ≤ {grid.naive_max_n_eps:g}",
            bool(small) and all(max(x["ks"]) > x["limit"] for x in small),
            small,
        ),
        Check(
            "gibbs_coverage95",
            "Gibbs-SS 95 % credible intervals cover at 0.95 ± 4 binomial standard errors for "
            "each parameter at every point",
            all(abs(c - 0.95) <= r["tolerance"] for r in cover for c in r["coverage"]),
            cover,
        ),
        Check(
            "gibbs_mmd_at_most_naive",
            "Gibbs-SS-Noisy's MMD² to the non-private posterior is at most naive's (paired "
            "difference < 3 standard errors) at every point",
            all(r["difference"] < 3 * r["se"] for r in mmd),
            mmd,
        ),
    ]
    return checks


def evaluate_predictive_checks(
    results: Sequence[PredictiveResult], grid: RegressionGrid
) -> list[Check]:
    """Figure 4's claims at every ε: Gibbs-SS close to non-private, naive far off."""
    tol = grid.coverage_tolerance
    checks = []
    default = [
        {"epsilon": r.epsilon, "coverage": r.coverage["default"],
         "nonprivate": r.coverage["nonprivate"]}
        for r in results
        if "default" in r.coverage and r.epsilon >= 1
    ]  # fmt: skip
    checks.append(
        Check(
            "default_predictive_close_to_nonprivate",
            f"The default's 50 % and 90 % predictive coverage is within {grid.default_tolerance:g} "
            "of the non-private posterior's at every ε ≥ 1",
            bool(default)
            and all(
                abs(d["coverage"][lv] - d["nonprivate"][lv]) <= grid.default_tolerance
                for d in default
                for lv in d["coverage"]
            ),
            default,
        )
    )
    for method in ("gibbs_noisy", "gibbs_update"):
        detail = [
            {"epsilon": r.epsilon, "coverage": r.coverage[method],
             "nonprivate": r.coverage["nonprivate"]}
            for r in results
        ]  # fmt: skip
        checks.append(
            Check(
                f"{method}_predictive_close_to_nonprivate",
                f"{method}'s 50 % and 90 % predictive coverage is within {tol:g} of the "
                "non-private posterior's at every ε",
                all(
                    abs(d["coverage"][lv] - d["nonprivate"][lv]) <= tol
                    for d in detail
                    for lv in d["coverage"]
                ),
                detail,
            )
        )
    detail = [
        {"epsilon": r.epsilon, "coverage": r.coverage["naive"],
         "nonprivate": r.coverage["nonprivate"]}
        for r in results
    ]  # fmt: skip
    checks.append(
        Check(
            "naive_predictive_off",
            f"Naive's coverage differs from the non-private one by more than {tol:g} at some "
            "level, at every ε",
            all(
                max(abs(d["coverage"][lv] - d["nonprivate"][lv]) for lv in d["coverage"]) > tol
                for d in detail
            ),
            detail,
        )
    )
    return checks


def run_regression_study(
    output_dir: str | os.PathLike,
    grid: RegressionGrid = FULL,
    *,
    seed: int = 2019,
    jobs: int | None = None,
    progress: bool = True,
) -> RegressionReport:
    """Run Figures 3a–e and 4 and write PNG, CSV and ``report.json`` into ``output_dir``.

    Parameters
    ----------
    output_dir
        Directory for the files (created if missing).
    grid
        :data:`FULL`, :data:`QUICK` or a custom :class:`RegressionGrid`.
    seed
        Seed of the whole study; each point draws from its own stream.
    jobs
        Worker processes (default: the number of CPUs).
    progress
        Show a progress bar.

    Returns
    -------
    RegressionReport
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from pymc_dp.studies import regression_figures as figs

    start = time.perf_counter()
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    jobs = jobs or os.cpu_count() or 1
    # Most expensive first (MCMC-Ind points), for load balancing.
    pts = sorted(grid.points(), key=lambda p: p[0] > grid.settings.mcmc_max_n)
    tasks: list[Any] = [(n, e, grid.settings, seed) for n, e in pts]
    with ProgressBar(progress, len(tasks) + 1) as advance:
        predictive = map_tasks(_predictive_task, [(grid.predictive, seed)], 1, advance)[0]
        points = map_tasks(_point_task, tasks, jobs, advance)
    points.sort(key=lambda p: (p.epsilon, p.n))
    rows = [r for p in points for r in p.to_rows()]
    pred_rows = [r for res in predictive for r in res.to_rows()]
    files = [write_csv(out / "figure3_synthetic.csv", rows)]
    files.append(write_csv(out / "figure4_predictive_coverage.csv", pred_rows))

    def save(fig, name):
        fig.savefig(out / name, dpi=150)
        plt.close(fig)
        files.append(out / name)

    band = ks_band(grid.settings.trials, level=0.95)
    save(figs.plot_calibration(rows, grid, band=band), "figure3ab_calibration_ks.png")
    at = (grid.epsilon_n, grid.n_epsilon)
    ecdf = next((p for p in points if (p.n, p.epsilon) == at), None)
    if ecdf is not None:
        save(figs.plot_regression_ecdf(ecdf), "figure3c_ecdf.png")
    save(figs.plot_coverage_and_mmd(rows, grid), "figure3de_coverage_mmd.png")
    save(figs.plot_predictive(pred_rows), "figure4_predictive_coverage.png")

    checks = evaluate_synthetic_checks(points, grid) + evaluate_predictive_checks(predictive, grid)
    wall = time.perf_counter() - start
    report = {
        "paper": "Bernstein & Sheldon (2019), Differentially Private Bayesian Linear Regression, "
        "Figures 3 and 4",
        "grid": jsonable(dataclasses.asdict(grid)),
        "seed": seed,
        "jobs": jobs,
        "wall_seconds": wall,
        "environment": environment(),
        "checks": [dataclasses.asdict(c) for c in checks],
        "synthetic": [
            {k: v for k, v in dataclasses.asdict(p).items() if k != "quantiles"} for p in points
        ],
        "predictive": [dataclasses.asdict(r) for r in predictive],
    }
    path = out / "report.json"
    path.write_text(json.dumps(jsonable(report), indent=1))
    files.append(path)
    return RegressionReport(out, files, checks, wall)
