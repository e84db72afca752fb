"""Calibration of the cell model of x for factors of many levels (own-prior ranks, batched engine).

Releases drawn from the sampler's own joint prior (:func:`draw_cell_prior` with the prior of
``tests/test_regression_cell_model.py``: θ | σ² ~ N(0, 2σ²I), σ² ~ IG(20, 1.9); π ~
Dirichlet(1, …, 1) over the d + 1 levels of one factor, counts multinomial, both drawn again
where the design is singular),
Laplace noise of scale ``--scale`` on every released entry; :func:`sample_cell_regression` on
all of them, ``--chunk`` releases per call (the batched engine's arrays grow with the batch).
Each true θ_j and σ² gets its rank among its posterior draws (every fourth draw); a calibrated
sampler gives ranks uniform on [0, 1] (Cook et al. 2006), tested by KS. Also reported: the
share of releases whose largest R-hat over (θ, σ²) is above 1.01 and 1.05, and CPU seconds.
A line is printed after every chunk, for all the releases so far (the last line is the study).

    python benchmarks/regression_cell_levels.py --d 6 8 10 --releases 120 --n 60 --scale 8
    python benchmarks/regression_cell_levels.py --d 10 --releases 40 --n 1000 --scale 113

(n = 1000 with scale 113 is ε = 1 for a factor of 11 levels with y in [−2, 2].)
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import arviz as az
import numpy as np
from scipy import stats

from pymc_dp.regression.engine.cells import sample_cell_regression
from pymc_dp.regression.kernels.cell_model import cell_layout, draw_cell_prior
from pymc_dp.regression.kernels.conjugate import NIG


def rhat_per_release(theta: np.ndarray, sigma2: np.ndarray) -> np.ndarray:
    """Largest rank-normalised R-hat over (θ, σ²) of each release, ``(releases,)``."""
    draws = np.concatenate([theta, sigma2[..., None]], axis=-1)  # (chain, draw, release, p + 1)
    data = az.convert_to_dataset({"v": draws})
    return np.asarray(az.rhat(data)["v"]).max(axis=-1)


def summary(d: int, par, theta, sigma2, rhat, done: int, cpu: float, args) -> dict:
    """KS tests of the ranks of the first ``done`` releases' true θ_j and σ², and their R-hats."""
    th = np.concatenate(theta, axis=2).reshape(-1, done, d + 1)
    s2 = np.concatenate(sigma2, axis=2).reshape(-1, done)
    rhat = np.concatenate(rhat)
    p_values = [
        stats.kstest(np.mean(th[..., j] < par.theta[:done, j], axis=0), "uniform").pvalue
        for j in range(d + 1)
    ]
    rank = np.mean(s2 < par.sigma2[:done], axis=0)
    p_values.append(stats.kstest(rank, "uniform").pvalue)
    return {
        "d": d, "releases": done, "n": args.n, "scale": args.scale, "draws": args.draws,
        "tune": args.tune, "chains": args.chains, "cpu_s": round(cpu, 1),
        "smallest_ks_p": round(min(p_values), 4), "ks_p": [round(p, 3) for p in p_values],
        "rhat_above_1.01": round(float(np.mean(rhat > 1.01)), 3),
        "rhat_above_1.05": round(float(np.mean(rhat > 1.05)), 3),
        "largest_rhat": round(float(rhat.max()), 3),
    }  # fmt: skip


def study(d: int, args: argparse.Namespace) -> None:
    """Print the KS tests of all releases so far after every ``--chunk`` of them."""
    rng = np.random.default_rng([args.seed, d, args.n])
    layout = cell_layout(d, "categories")
    prior = NIG(np.zeros(d + 1), 0.5 * np.eye(d + 1), np.array(20.0), np.array(1.9))
    par, s = draw_cell_prior(rng, prior, layout, args.releases, args.n)
    z = s + rng.laplace(0.0, args.scale, s.shape)
    theta, sigma2, rhat = [], [], []
    start = time.process_time()
    for first in range(0, args.releases, args.chunk):
        part = slice(first, first + args.chunk)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "checked up to d = …"
            tr = sample_cell_regression(
                np.random.default_rng([args.seed, d, first]), released=z[part], n=args.n,
                prior=prior, kind="categories", scale=args.scale, draws=args.draws,
                tune=args.tune, chains=args.chains,
            )  # fmt: skip
        theta.append(tr.theta[:, ::4])
        sigma2.append(tr.sigma2[:, ::4])
        rhat.append(rhat_per_release(tr.theta, tr.sigma2))
        done = min(first + args.chunk, args.releases)
        row = summary(d, par, theta, sigma2, rhat, done, time.process_time() - start, args)
        print(json.dumps(row), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, nargs="+", default=[6])
    parser.add_argument("--releases", type=int, default=120)
    parser.add_argument("--n", type=int, default=60)
    parser.add_argument("--scale", type=float, default=8.0, help="Laplace scale of the noise")
    parser.add_argument("--draws", type=int, default=400)
    parser.add_argument("--tune", type=int, default=300)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--chunk", type=int, default=4, help="releases per sampler call")
    parser.add_argument("--seed", type=int, default=9)
    args = parser.parse_args()
    for d in args.d:
        study(d, args)


if __name__ == "__main__":
    main()
