"""Benchmark: the exact likelihood of continuous window sums against the CLT, in ESS per second.

For Exponential releases (one-number statistic: the lattice likelihood, GridStep) and Normal
releases of (Σz, Σz²) (the record-level node, RecordStep), per n × ε, on the same release:

* **exact**: ``NoisySuffStat(..., likelihood="exact")`` and ``pm.sample()``;
* **clt**: ``likelihood="clt"``, the CLT default (collapsed GridStep for Exponential, the
  partially collapsed Gibbs sampler with NUTS on (μ, σ²) for Normal).

Time is the wall time of building the model and the whole ``pm.sample`` call (2 chains, one
process, compile included); ESS is ArviZ's bulk ESS, the smallest over θ's components.

With ``--mixing`` it instead compares, per iteration, the record-level sampler with and without
its ancillary step (``pymc_dp.engine.records.sample_records(ancillary=...)``; without it, the
plain data augmentation whose mixing the paper's Algorithm 1 shares): ESS per 1000 iterations.

    python benchmarks/exact_windows_ess.py [--n 10 30 100] [--epsilon 0.1 1.0]
    python benchmarks/exact_windows_ess.py --mixing
"""

from __future__ import annotations

import argparse
import logging
import time
import warnings

import arviz as az
import numpy as np
import pymc as pm

import pymc_dp as pmdp
from pymc_dp.engine.batch import ReleaseBatch
from pymc_dp.engine.records import sample_records
from pymc_dp.families import Exponential, Normal
from pymc_dp.kernels.exact_counts import NoiseLaw

NIG = (30.0, 0.1, 3.0, 100.0)
"""Normal–Inverse-Gamma prior (m, κ, α, β) on (μ, σ²)."""


def make_release(family: str, n: int, epsilon: float, seed: int) -> pmdp.Release:
    rng = np.random.default_rng([seed, n, int(epsilon * 1000)])
    if family == "exponential":
        x = rng.exponential(0.4, n)
        return pmdp.release(x, pm.Exponential, epsilon=epsilon, bounds=(0.0, 1.5), rng=rng)
    x = rng.normal(30.0, 7.0, n)
    return pmdp.release(x, pm.Normal, epsilon=epsilon, bounds=(10.0, 50.0), rng=rng)


def run(family: str, rel: pmdp.Release, likelihood: str, draws: int, tune: int, seed: int):
    start = time.perf_counter()
    with pm.Model():
        if family == "exponential":
            lam = pm.Gamma("lam", 2.0, 1.0)
            dist, names = pm.Exponential.dist(lam=lam), ["lam"]
        else:
            sigma2 = pm.InverseGamma("sigma2", NIG[2], NIG[3])
            mu = pm.Normal("mu", NIG[0], sigma=pm.math.sqrt(sigma2 / NIG[1]))
            dist, names = pm.Normal.dist(mu=mu, sigma=pm.math.sqrt(sigma2)), ["mu", "sigma2"]
        pmdp.NoisySuffStat("y", dist, release=rel, likelihood=likelihood)
        idata = pm.sample(
            draws=draws,
            tune=tune,
            chains=2,
            cores=1,
            progressbar=False,
            random_seed=seed,
            compute_convergence_checks=False,
        )
    seconds = time.perf_counter() - start
    ess = min(float(az.ess(idata, var_names=[v])[v]) for v in names)
    return ess, seconds


def ess_main(args) -> None:
    print("| family | n | ε | exact ESS/s | CLT ESS/s | exact / CLT | exact ESS | exact s |")
    print("|---|---|---|---|---|---|---|---|")
    for family in args.families:
        for n in args.n:
            for eps in args.epsilon:
                rel = make_release(family, n, eps, args.seed)
                ess_x, sec_x = run(family, rel, "exact", args.draws, args.tune, args.seed)
                ess_c, sec_c = run(family, rel, "clt", args.draws, args.tune, args.seed)
                rate_x, rate_c = ess_x / sec_x, ess_c / sec_c
                print(
                    f"| {family} | {n} | {eps:g} | {rate_x:.0f} | {rate_c:.0f} | "
                    f"{rate_x / rate_c:.2f} | {ess_x:.0f} | {sec_x:.1f} |",
                    flush=True,
                )


def mixing_main(args) -> None:
    print("| family | n | ε | ESS per 1000 iterations, interweaving | plain augmentation | ratio |")
    print("|---|---|---|---|---|---|")
    chains = 4
    for family in args.families:
        fam = Exponential() if family == "exponential" else Normal()
        params = (
            (np.full(chains, 2.0), np.full(chains, 1.0))
            if family == "exponential"
            else tuple(np.full(chains, p) for p in NIG)
        )
        for n in args.n:
            for eps in args.epsilon:
                rel = make_release(family, n, eps, args.seed)
                y = np.tile(np.reshape(rel.value, (1, -1)), (chains, 1))
                out = []
                for ancillary in (True, False):
                    theta, _ = sample_records(
                        np.random.default_rng(args.seed),
                        ReleaseBatch(
                            fam,
                            params,
                            y,
                            n,
                            NoiseLaw("laplace", rel.sensitivity / rel.epsilon),
                            rel.bounds,
                        ),
                        draws=args.draws,
                        tune=args.tune,
                        ancillary=ancillary,
                    )
                    comps = theta[..., None] if theta.ndim == 2 else theta
                    ess = min(float(az.ess(comps[..., j].T)) for j in range(comps.shape[-1]))
                    out.append(1000 * ess / (args.draws * chains))
                print(
                    f"| {family} | {n} | {eps:g} | {out[0]:.0f} | {out[1]:.1f} | "
                    f"{out[0] / out[1]:.0f}× |",
                    flush=True,
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", default=["exponential", "normal"])
    parser.add_argument("--n", nargs="+", type=int, default=[10, 30, 100])
    parser.add_argument("--epsilon", nargs="+", type=float, default=[0.1, 1.0])
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--tune", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mixing", action="store_true")
    args = parser.parse_args()
    logging.getLogger("pymc").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    (mixing_main if args.mixing else ess_main)(args)


if __name__ == "__main__":
    main()
