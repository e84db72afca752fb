"""Reduced Figure 3 check of the default regression sampler: a few (n, ε) points, fewer trials.

The full study (``benchmarks/regression_study.py``) runs 8 points × 400 trials and Figure 4;
this script runs chosen points of the same synthetic design with every method of
:func:`pymc_dp.studies.regression.run_regression_point` except MCMC-Ind, and prints per method
the KS statistic of the calibration quantiles of (θ₀, θ₁, σ²), their 95 % coverage, the MMD² to
the non-private posterior, and the paired MMD² difference default − Gibbs-SS-Update. The KS
limit printed is the null quantile at family-wise level 0.01 over the 3 × points tests of one
method, as in the full study's checks. ``--x-prior design`` gives the default the design's own
prior of x, as Gibbs-SS-Update always gets, so that their MMD² is compared at equal information.

With ``--figure4``, it runs the Figure 4 study on the cirrhosis data instead
(:func:`pymc_dp.studies.regression_predictive.run_predictive_study`, every method including
the default) and prints each method's 50 % and 90 % predictive coverage and 90 % width per ε.

Usage::

    python benchmarks/regression_default_calibration.py --trials 200 --points 10:0.1 100:0.1 10:1
    python benchmarks/regression_default_calibration.py --trials 200 --points 10:10 --x-prior design
    python benchmarks/regression_default_calibration.py --figure4 --splits 100 --draws 1000
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from pymc_dp.evaluation.measures import ks_band
from pymc_dp.studies.regression import PARAMETERS, RegressionSettings, run_regression_point
from pymc_dp.studies.regression_predictive import PredictiveSettings, run_predictive_study


def figure4(args: argparse.Namespace) -> list[dict]:
    """Figure 4 rows (one per ε and method) at the given splits and sampler settings."""
    settings = PredictiveSettings(splits=args.splits, tune=args.tune, draws=args.draws)
    rows = []
    for result in run_predictive_study(settings, np.random.default_rng(args.seed)):
        for row in result.to_rows():
            rows.append(row)
            print(
                f"eps={row['epsilon']:g} {row['method']:13s} 50% {row['coverage_0.5']:.3f} "
                f"90% {row['coverage_0.9']:.3f} width90 {row['width_0.9']:.3f}",
                flush=True,
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", nargs="+", default=["10:0.1", "100:0.1", "10:1"],
                        help="n:epsilon pairs")  # fmt: skip
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--tune", type=int, default=300)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=2019)
    parser.add_argument(
        "--x-prior", choices=("box", "design"), default="box",
        help="prior of x of the default: the public box's (a user's) or the design's (equal "
        "information with Gibbs-SS-Update, which always gets the design's)",
    )  # fmt: skip
    parser.add_argument("--output", default=None, help="write the rows as JSON here")
    parser.add_argument("--figure4", action="store_true", help="the cirrhosis study instead")
    parser.add_argument("--splits", type=int, default=100, help="Figure 4 train/test splits")
    args = parser.parse_args(argv)
    if args.figure4:
        rows = figure4(args)
        if args.output:
            with open(args.output, "w") as fh:
                json.dump({"settings": vars(args), "rows": rows}, fh, indent=1)
        return 0
    points = [(int(p.split(":")[0]), float(p.split(":")[1])) for p in args.points]
    settings = RegressionSettings(
        trials=args.trials, tune=args.tune, draws=args.draws, default_x_prior=args.x_prior
    )
    limit = ks_band(args.trials, level=1 - 2 * 0.01 / (3 * len(points))).upper
    print(f"{args.trials} trials per point; KS limit {limit:.4f}", flush=True)
    rng = np.random.default_rng(args.seed)
    rows = []
    for n, epsilon in points:
        start = time.perf_counter()
        point = run_regression_point(n, epsilon, settings, rng)
        for method in point.ks:
            ks, cover = point.ks[method], point.coverage95[method]
            mmd = point.mmd2.get(method, (float("nan"), float("nan")))
            rows.append({"n": n, "epsilon": epsilon, "method": method, "ks": ks,
                         "coverage95": cover, "mmd2": mmd, "seconds": point.seconds[method],
                         "trials": point.trials[method]})  # fmt: skip
            print(
                f"n={n:5d} eps={epsilon:g} {method:13s} KS "
                + " ".join(f"{k:.3f}" for k in ks)
                + " | cov95 "
                + " ".join(f"{c:.3f}" for c in cover)
                + f" | MMD2 {mmd[0]:.4f} ± {mmd[1]:.4f} | {point.seconds[method]:.1f} s",
                flush=True,
            )
        gain = point.default_mmd_difference
        print(f"  MMD2 default − gibbs_update: {gain[0]:+.4f} ± {gain[1]:.4f} "
              f"({time.perf_counter() - start:.0f} s for the point)", flush=True)  # fmt: skip
    if args.output:
        meta = vars(args) | {"ks_limit": limit, "parameters": PARAMETERS}
        with open(args.output, "w") as fh:
            json.dump({"settings": meta, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
