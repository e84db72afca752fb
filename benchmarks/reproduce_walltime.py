"""Benchmark: wall time of ``pymc-dp reproduce``, and the batched engine against ``pm.sample``.

Two measurements, in one process:

1. **Batched engine vs one ``pm.sample`` per trial** at one grid point (default: Binomial and
   Exponential, n = 1000, ε = 0.1, the paper's 2000 + 5000 iterations). The baseline is what a
   study would do without the engine: per trial, build the PyMC model with ``NoisySuffStat`` and
   call ``pm.sample`` (1 chain, 1 core), which compiles the model's functions each time. It is
   timed on ``--baseline-trials`` trials and reported per trial; the engine runs all
   ``--trials`` trials in one call. The ratio is (baseline per trial × trials) / engine time.
2. **The full reproduction** (``--grid paper``, the default; ``--grid quick`` for CI's grid, or
   ``--grid none`` to skip): wall time of :func:`pymc_dp.studies.reproduce` with ``--jobs``
   worker processes, and its slowest grid points.

Usage::

    python benchmarks/reproduce_walltime.py                       # both, paper grid
    python benchmarks/reproduce_walltime.py --grid quick --baseline-trials 2
    python benchmarks/reproduce_walltime.py --grid none           # engine vs pm.sample only
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import tempfile
import time

import numpy as np
import pymc as pm

import pymc_dp as pmdp
from pymc_dp.engine.gibbs import sample_gibbs
from pymc_dp.studies import DESIGNS, PAPER, QUICK, reproduce


def _pm_sample_one(design, sim, i, n, epsilon, tune, draws, seed):
    """Model construction + pm.sample for trial i (what a study without the engine pays)."""
    fam = design.family
    rel = pmdp.Release(
        value=float(sim.released[i]),
        n=n,
        epsilon=epsilon,
        sensitivity=fam.release_sensitivity(design.bounds),
        bounds=design.bounds if design.windowed else (0.0, float(fam.trials)),
        family=fam.name,
        family_params=fam.params(),
    )
    with pm.Model():
        if design.name == "binomial":
            theta = pm.Beta("theta", *design.prior)
            dist = pm.Binomial.dist(n=fam.trials, p=theta)
        else:
            theta = pm.Gamma("theta", alpha=design.prior[0], beta=design.prior[1])
            dist = pm.Exponential.dist(lam=theta)
        pmdp.NoisySuffStat("y", dist, release=rel)
        pm.sample(
            draws=draws,
            tune=tune,
            chains=1,
            cores=1,
            random_seed=seed + i,
            progressbar=False,
            compute_convergence_checks=False,
        )


def engine_vs_pm_sample(name, *, n, epsilon, trials, baseline_trials, tune, draws, seed):
    """Seconds per trial of both ways, for the same releases."""
    design = DESIGNS[name]
    rng = np.random.default_rng(seed)
    sim = design.simulate(rng, trials=trials, n=n, epsilon=epsilon)
    kwargs = {
        "family": design.family,
        "prior": design.prior,
        "n": n,
        "scale": sim.scale,
        "bounds": design.bounds,
    }
    sample_gibbs(rng, released=sim.released[:2], draws=5, **kwargs)  # compile outside the timing
    start = time.perf_counter()
    sample_gibbs(rng, released=sim.released, draws=draws, tune=tune, **kwargs)
    engine = time.perf_counter() - start

    _pm_sample_one(design, sim, 0, n, epsilon, 5, 5, seed)  # warm PyTensor's compile cache
    start = time.perf_counter()
    for i in range(baseline_trials):
        _pm_sample_one(design, sim, i, n, epsilon, tune, draws, seed)
    per_trial = (time.perf_counter() - start) / baseline_trials
    return {
        "model": name,
        "n": n,
        "epsilon": epsilon,
        "trials": trials,
        "engine_seconds": engine,
        "engine_seconds_per_trial": engine / trials,
        "pm_sample_seconds_per_trial": per_trial,
        "pm_sample_trials_timed": baseline_trials,
        "speedup": per_trial * trials / engine,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grid", choices=["paper", "quick", "none"], default="paper")
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--baseline-trials", type=int, default=3)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--epsilon", type=float, default=0.1)
    parser.add_argument("--models", nargs="+", default=["binomial", "exponential"])
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument(
        "--output-dir", help="keep the reproduction's figures and numbers here (default: discard)"
    )
    args = parser.parse_args(argv)
    logging.getLogger("pymc").setLevel(logging.ERROR)

    results = {
        "python": platform.python_version(),
        "pymc": pm.__version__,
        "cpus": os.cpu_count(),
        "engine_vs_pm_sample": [],
    }
    print(f"Python {platform.python_version()}, PyMC {pm.__version__}, {os.cpu_count()} CPUs")
    print("\nBatched engine vs one pm.sample per trial (2000 tune + 5000 draws):")
    for name in args.models:
        r = engine_vs_pm_sample(
            name,
            n=args.n,
            epsilon=args.epsilon,
            trials=args.trials,
            baseline_trials=args.baseline_trials,
            tune=PAPER.settings.tune,
            draws=PAPER.settings.draws,
            seed=7,
        )
        results["engine_vs_pm_sample"].append(r)
        print(
            f"  {name:12s} n={r['n']} ε={r['epsilon']:g}: engine {r['engine_seconds']:.1f} s for "
            f"{r['trials']} trials ({1e3 * r['engine_seconds_per_trial']:.1f} ms/trial); "
            f"pm.sample {r['pm_sample_seconds_per_trial']:.1f} s/trial "
            f"(timed on {r['pm_sample_trials_timed']}) -> ratio {r['speedup']:.0f}x"
        )

    if args.grid != "none":
        grid = PAPER if args.grid == "paper" else QUICK
        with tempfile.TemporaryDirectory() as scratch:
            start = time.perf_counter()
            report = reproduce(args.output_dir or scratch, grid, jobs=args.jobs, progress=False)
            wall = time.perf_counter() - start
            points = json.loads((report.output_dir / "report.json").read_text())["points"]
        slowest = sorted(points, key=lambda p: -p["seconds"])[:5]
        results["reproduce"] = {
            "grid": args.grid,
            "jobs": args.jobs,
            "points": len(points),
            "wall_seconds": wall,
            "point_seconds_total": sum(p["seconds"] for p in points),
            "slowest": [{k: p[k] for k in ("model", "n", "epsilon", "seconds")} for p in slowest],
            "checks_passed": report.passed,
        }
        rep = results["reproduce"]
        print(
            f"\nreproduce --grid {args.grid} with {args.jobs} jobs: {wall / 60:.1f} min wall "
            f"({rep['point_seconds_total'] / 60:.1f} min of grid-point work over "
            f"{rep['points']} points); checks passed: {report.passed}"
        )
        for p in rep["slowest"]:
            print(f"  {p['model']:12s} n={p['n']:5d} ε={p['epsilon']:g}: {p['seconds']:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
