"""Calibration of the Bethe-approximate posterior over repeated releases, against exact sums.

Each trial draws θ from its prior N(0, scale²) (every log-linear parameter), n records of K
columns with all 2-way marginals, and releases the tables at ε (discrete Laplace). The
posterior of θ is the Laplace approximation (:func:`pmdp.marginals_laplace_posterior`'s normal)
with the moments from the Bethe approximation (``features="bethe"``, loopy BP on the complete
graph) and, on the same release, from exact sums over the domain (``features="enumerate"``), both
with the prior the truth was drawn from. Printed for each: the coverage of the joint 90% region
(the χ²_p quantile of (θ - m)ᵀ S⁻¹ (θ - m)), which is 0.9 in expectation for a calibrated normal
posterior and falls with any bias, and the mean coverage of the p central 90% intervals, with
the 95% binomial band of one coverage over the trials.

Run: ``PYTHONPATH=. python benchmarks/marginals_bethe_calibration.py [trials] [k] [levels]
[scales] [n] [epsilon]``, e.g. ``200 5 3 0.1,0.3 10000 1``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import itertools
import sys
import time

import numpy as np
from scipy import stats

import pymc_dp as pmdp
from pymc_dp.kernels.loglinear import LogLinearDomain
from pymc_dp.kernels.loglinear_laplace import marginals_laplace
from pymc_dp.kernels.loglinear_moments import sample_records
from pymc_dp.likelihoods.marginals import noise_variance


def trial(k, levels, scale, n, epsilon, rng, methods=("bethe", "enumerate")):
    """One release: for each method, (joint statistic's χ² CDF, per-parameter coverage)."""
    pairs = list(itertools.combinations(range(k), 2))
    dom = LogLinearDomain((levels,) * k, tuple(pairs))
    theta = rng.normal(size=dom.n_params) * scale
    codes = sample_records(dom, theta, n, rng)
    names = [f"c{i}" for i in range(k)]
    rel = pmdp.release_marginals(
        {c: codes[:, i] for i, c in enumerate(names)},
        columns=names,
        domains={c: list(range(levels)) for c in names},
        marginals=[(names[a], names[b]) for a, b in pairs],
        epsilon=epsilon,
        rng=int(rng.integers(2**32)),
    )
    z = rel.y @ dom.projection
    out = {}
    for method in methods:
        fit = marginals_laplace(
            dom, z, n=n, noise_variance=noise_variance(rel), prior_sigma=scale, method=method
        )
        d = theta - fit.mode
        chi2 = d @ np.linalg.solve(fit.cov, d)
        half = stats.norm.ppf(0.95) * np.sqrt(np.diag(fit.cov))
        out[method] = (stats.chi2.cdf(chi2, dom.n_params), np.abs(d) <= half)
    return out


def main(trials=200, k=5, levels=3, scales="0.1,0.3", n=10_000, epsilon=1.0, seed=0):
    band = np.array(stats.binom.interval(0.95, trials, 0.9)) / trials
    print(
        f"{trials} releases, {k} x {levels} columns, all 2-way tables, n = {n}, eps = {epsilon}; "
        f"95% binomial band of 0.9: [{band[0]:.3f}, {band[1]:.3f}]"
    )
    print("| θ sd (= prior sd) | features | joint 90% region | 90% intervals, mean | time |")
    print("|---|---|---|---|---|")
    for scale in (float(s) for s in scales.split(",")):
        rng = np.random.default_rng(seed)
        start = time.perf_counter()
        runs = [trial(k, levels, scale, n, epsilon, rng) for _ in range(trials)]
        seconds = time.perf_counter() - start
        for method in ("bethe", "enumerate"):
            u = np.array([r[method][0] for r in runs])
            inside = np.array([r[method][1] for r in runs])
            print(
                f"| {scale} | {method} | {np.mean(u <= 0.9):.3f} | {inside.mean():.3f} "
                f"| {seconds:.0f} s (both) |",
                flush=True,
            )


if __name__ == "__main__":
    args = sys.argv[1:]
    main(
        int(args[0]) if args else 200,
        int(args[1]) if len(args) > 1 else 5,
        int(args[2]) if len(args) > 2 else 3,
        args[3] if len(args) > 3 else "0.1,0.3",
        int(args[4]) if len(args) > 4 else 10_000,
        float(args[5]) if len(args) > 5 else 1.0,
    )
