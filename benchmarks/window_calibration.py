"""Calibration of windowed Poisson posteriors at small n: the CLT against the exact likelihood.

Each trial draws λ from its Gamma prior, n Poisson(λ) records, and releases their window sum
over [0, b] with Laplace noise of scale b/ε. The batched engine then samples λ | y twice, with
``likelihood="clt"`` (the normal–Laplace convolution of the window moments) and
``likelihood="exact"`` (the n-fold convolution, :mod:`pymc_dp.kernels.exact_windows`). A
calibrated posterior puts the true λ at a uniform quantile: the script prints the KS distance of
those quantiles from uniform and the coverage of the central 90% interval, per setting. Run:

    python benchmarks/window_calibration.py [--trials 1000] [--draws 500] [--seed 0]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats

from pymc_dp.engine import sample_gibbs
from pymc_dp.families import Poisson

SETTINGS = ((10, 0.1), (10, 1.0), (30, 1.0), (100, 1.0))
"""(n, ε) pairs."""
UPPER = 10
PRIOR = (2.0, 0.5)
"""Gamma(shape, rate) on λ: mean 4, so the window [0, 10] cuts some records off."""


def quantiles(rng, n, epsilon, trials, draws, likelihood, lam, released):
    trace = sample_gibbs(
        rng,
        family=Poisson(),
        prior=PRIOR,
        released=released,
        n=n,
        scale=UPPER / epsilon,
        bounds=(0.0, float(UPPER)),
        draws=draws,
        likelihood=likelihood,
    )
    theta = trace.theta.reshape(-1, trials)
    return np.mean(theta < lam, axis=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"windowed Poisson, window [0, {UPPER}], prior Gamma{PRIOR}, {args.trials} trials")
    print("| n | ε | CLT KS | exact KS | CLT 90% cover | exact 90% cover | exact time / CLT |")
    print("|---|---|---|---|---|---|---|")
    for n, epsilon in SETTINGS:
        rng = np.random.default_rng([args.seed, n, int(epsilon * 100)])
        lam = rng.gamma(PRIOR[0], 1.0 / PRIOR[1], size=args.trials)
        x = rng.poisson(lam[:, None], size=(args.trials, n))
        s_hat = np.where(x <= UPPER, x, 0).sum(axis=1)
        released = s_hat + rng.laplace(0.0, UPPER / epsilon, size=args.trials)
        row, times = [], []
        for likelihood in ("clt", "exact"):
            start = time.perf_counter()
            q = quantiles(rng, n, epsilon, args.trials, args.draws, likelihood, lam, released)
            times.append(time.perf_counter() - start)
            row.append((stats.kstest(q, "uniform").statistic, np.mean((q > 0.05) & (q < 0.95))))
        (ks_c, cov_c), (ks_e, cov_e) = row
        print(
            f"| {n} | {epsilon:g} | {ks_c:.3f} | {ks_e:.3f} | {cov_c:.3f} | {cov_e:.3f} "
            f"| {times[1] / times[0]:.1f}× |"
        )


if __name__ == "__main__":
    main()
