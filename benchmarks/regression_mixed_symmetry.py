"""The mixed model of x with and without the moves along its symmetries, batched engine.

One binary covariate (Bernoulli(0.3), box [0, 1]) beside d − 1 normal ones (N(0, 0.4²)
clipped to [−1, 1]), y = 0.2 + x·θ + N(0, 0.2²) in [−2, 2] (``regression_ess.make_data``'s
``mixed`` design), released with Laplace noise; :func:`sample_mixed_regression` with the README
model's prior (θ | σ² ~ N(0, 10σ²I), σ² ~ IG(3, 0.1)) and the box's mixed prior of x, with
``symmetry_steps=()`` (off) and the default steps (on), back to back in one process on the same
release and chain seed. Reported: CPU seconds, the smallest bulk ESS and largest R-hat (ArviZ,
rank-normalised) over θ and σ², and ESS per CPU second.

    python benchmarks/regression_mixed_symmetry.py --d 3 4 --releases 2
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import arviz as az
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from regression_ess import make_data

from pymc_dp.regression import (
    NIG,
    release_regression,
    sample_cell_regression,
    sample_mixed_regression,
)
from pymc_dp.regression.kernels.scale_move import SCALE_STEPS
from pymc_dp.regression.model.default_prior import default_mixed_x_prior


def summary(trace) -> tuple[float, float]:
    """Smallest bulk ESS and largest R-hat over θ and σ² of one release's trace."""
    draws = np.concatenate([trace.theta[:, :, 0], trace.sigma2[:, :, 0, None]], axis=-1)
    data = az.convert_to_dataset({"v": draws})
    ess = float(az.ess(data, method="bulk")["v"].min())
    rhat = float(az.rhat(data)["v"].max())
    return ess, rhat


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, nargs="+", default=[3])
    parser.add_argument("--model", choices=("mixed", "cells"), default="mixed",
                        help="cells: the dummy columns of one factor (design categorical), the "
                        "cell model, whose moves are those of y")  # fmt: skip
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1], help="data and release seeds")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--tune", type=int, default=500)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--chain-seed", type=int, default=1)
    args = parser.parse_args()
    print("| d | release | symmetry moves | CPU s | smallest ESS (θ, σ²) | R-hat max | ESS/CPU s |")
    print("|---|---|---|---|---|---|---|")
    for d in args.d:
        for seed in args.seeds:
            design = "mixed" if args.model == "mixed" else "categorical"
            x, y = make_data(np.random.default_rng(seed), args.n, d, design)
            box = [(0.0, 1.0)] + [(-1.0, 1.0) if design == "mixed" else (0.0, 1.0)] * (d - 1)
            rel = release_regression(x, y, x_bounds=box, y_bounds=(-2.0, 2.0),
                                     epsilon=args.epsilon, rng=seed)  # fmt: skip
            prior = NIG(np.zeros(d + 1), 0.1 * np.eye(d + 1), np.array(3.0), np.array(0.1))
            for label, steps in (("off", ()), ("on", SCALE_STEPS)):
                start = time.process_time()
                kw = dict(released=rel.value[None], n=rel.n, scale=rel.scale, prior=prior,
                          draws=args.draws, tune=args.tune, chains=args.chains,
                          symmetry_steps=steps)  # fmt: skip
                if args.model == "mixed":
                    trace = sample_mixed_regression(
                        args.chain_seed, x_prior=default_mixed_x_prior(box, 0), **kw
                    )
                else:
                    with warnings.catch_warnings():  # the cell model's warning above d = 5
                        warnings.simplefilter("ignore")
                        trace = sample_cell_regression(args.chain_seed, **kw)
                cpu = time.process_time() - start
                ess, rhat = summary(trace)
                print(f"| {d} | {seed} | {label} | {cpu:.1f} | {ess:.0f} | {rhat:.3f} | "
                      f"{ess / cpu:.1f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
