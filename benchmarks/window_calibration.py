"""Calibration of windowed posteriors at small n: the CLT against the exact likelihood.

Each trial draws θ from its prior, n records, and releases their window sum with Laplace noise of
scale Δ/ε. The batched engine then samples θ | y twice, with ``likelihood="clt"`` and
``likelihood="exact"``, and also reports what ``likelihood="auto"`` chose
(:func:`pymc_dp.likelihoods.window_trust.window_clt_trust`). A calibrated posterior puts the true θ
at a uniform quantile: the script prints the KS distance of those quantiles from uniform, its
p-value and the coverage of the central 90% interval, per setting. Designs:

* ``poisson``: λ ~ Gamma(2, 0.5), window [0, 10] (exact: the n-fold convolution);
* ``exponential``: the paper's Figure 1 design, λ ~ Gamma(8, 2), window the central 95% of the
  prior predictive (exact: the record-level sampler);
* ``normal``: (μ, σ²) ~ NIG(0, 1, 3, 2), window [-3, 3], both components scored (exact: the
  record-level sampler).

Run:

    python benchmarks/window_calibration.py [--design exponential] [--trials 400] [--draws 500]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats

from pymc_dp.engine.gibbs import _engine_likelihood, sample_gibbs
from pymc_dp.families import Normal, Poisson
from pymc_dp.studies.designs import DESIGNS

SETTINGS = ((10, 0.1), (10, 1.0), (30, 1.0), (100, 1.0))
"""(n, ε) pairs."""
NIG = (0.0, 1.0, 3.0, 2.0)


def simulate(design: str, rng: np.random.Generator, trials: int, n: int, epsilon: float):
    """(family, prior, bounds, truth (trials, d), released, scale)."""
    if design == "exponential":
        d = DESIGNS["exponential"]
        sim = d.simulate(rng, trials=trials, n=n, epsilon=epsilon)
        return d.family, d.prior, d.bounds, sim.truth[:, None], sim.released, sim.scale
    if design == "poisson":
        prior, bounds = (2.0, 0.5), (0.0, 10.0)
        lam = rng.gamma(prior[0], 1.0 / prior[1], size=trials)
        x = rng.poisson(lam[:, None], size=(trials, n))
        s_hat = np.where(x <= 10, x, 0).sum(axis=1)
        scale = 10.0 / epsilon
        return Poisson(), prior, bounds, lam[:, None], s_hat + rng.laplace(0, scale, trials), scale
    fam, bounds = Normal(), (-3.0, 3.0)
    m, kappa, alpha, beta = NIG
    sigma2 = beta / rng.gamma(alpha, size=trials)
    mu = rng.normal(m, np.sqrt(sigma2 / kappa))
    z = rng.normal(mu[:, None], np.sqrt(sigma2)[:, None], size=(trials, n))
    inside = (z >= bounds[0]) & (z <= bounds[1])
    s_hat = np.stack([np.where(inside, z, 0).sum(1), np.where(inside, z * z, 0).sum(1)], -1)
    scale = fam.release_sensitivity(bounds) / epsilon
    released = s_hat + rng.laplace(0, scale, s_hat.shape)
    return fam, NIG, bounds, np.stack([mu, sigma2], -1), released, scale


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--design", choices=("poisson", "exponential", "normal"), default="exponential"
    )
    parser.add_argument("--trials", type=int, default=400)
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--tune", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--settings",
        nargs="+",
        default=None,
        help="n:ε pairs, e.g. 10:1 30:1 (default: 10:0.1 10:1 30:1 100:1)",
    )
    args = parser.parse_args()
    settings = (
        SETTINGS
        if args.settings is None
        else tuple((int(a), float(b)) for a, b in (s.split(":") for s in args.settings))
    )
    print(f"{args.design}: {args.trials} trials × {args.draws} draws per likelihood")
    print(
        "| n | ε | auto | component | CLT KS (p) | exact KS (p) | CLT 90% cover | "
        "exact 90% cover | exact time / CLT |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for n, epsilon in settings:
        rng = np.random.default_rng([args.seed, n, int(epsilon * 100)])
        family, prior, bounds, truth, released, scale = simulate(
            args.design, rng, args.trials, n, epsilon
        )
        auto = _engine_likelihood(family, n, released, scale, "auto", "auto", bounds)
        scored, times = [], []
        for likelihood in ("clt", "exact"):
            start = time.perf_counter()
            trace = sample_gibbs(
                rng,
                family=family,
                prior=prior,
                released=released,
                n=n,
                scale=scale,
                bounds=bounds,
                draws=args.draws,
                tune=args.tune,
                likelihood=likelihood,
            )
            times.append(time.perf_counter() - start)
            theta = trace.theta.reshape(-1, args.trials, truth.shape[1])
            scored.append(np.mean(theta < truth[None], axis=0))
        for j in range(truth.shape[1]):
            cells = []
            for q in scored:
                test = stats.kstest(q[:, j], "uniform")
                cells.append(
                    (test.statistic, test.pvalue, np.mean((q[:, j] > 0.05) & (q[:, j] < 0.95)))
                )
            (ks_c, p_c, cov_c), (ks_e, p_e, cov_e) = cells
            print(
                f"| {n} | {epsilon:g} | {auto} | θ[{j}] | {ks_c:.3f} ({p_c:.2g}) | "
                f"{ks_e:.3f} ({p_e:.2g}) | {cov_c:.3f} | {cov_e:.3f} | "
                f"{times[1] / times[0]:.1f}× |",
                flush=True,
            )


if __name__ == "__main__":
    main()
