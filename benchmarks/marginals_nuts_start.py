"""Does NUTS's start change its ESS on the noisy-marginals model? At the mode vs at θ = 0.

Since commit a37fcc1, ``marginals_model`` starts NUTS at the Laplace mode (η = 0 in the whitened
coordinates θ = θ̂ + L η); before, at θ = 0, i.e. η = -L⁻¹θ̂ (tens of posterior sds away at
n = 10⁴). One release (``marginals_speed.py``'s, seed 0: K columns of ``levels`` levels, all
2-way tables, n = 10⁴, ε = 1) and one compiled model; ``pm.sample`` is run for each seed with
each start (``initvals`` for θ = 0), PyMC's default ``jitter+adapt_diag`` otherwise. Printed
per run: the smallest, 10% quantile and median bulk ESS over the terms of θ, the smallest tail
ESS, leapfrog steps per draw, the final step size, divergences, wall and CPU seconds.

Run: ``PYTHONPATH=. python benchmarks/marginals_nuts_start.py [KxL] [draws] [seeds] [chains]``,
e.g. ``10x3 300 1,2,3`` (the 10 × 3 question: about 900 CPU s a run at load 9-15) or
``5x3 300 1,2,3`` (under a minute a run).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import sys
import time

import arviz as az
import numpy as np
import pymc as pm
from marginals_speed import cpu_seconds, release

import pymc_dp as pmdp
from pymc_dp._compat import posterior_dataset
from pymc_dp.model.nodes.marginals import laplace_fit


def main(case="5x3", draws=300, seeds=(1, 2, 3), chains=2):
    k, levels = (int(x) for x in case.split("x"))
    rel = release(k, levels, 10_000, seed=0)
    fit = laplace_fit(rel)
    zero = -np.linalg.solve(np.linalg.cholesky(fit.cov), fit.mode)  # η at θ = 0
    model = pmdp.marginals_model(rel)
    print(
        f"{k} x {levels}, {chains} chains x ({draws} + {draws}); |η| at θ = 0: "
        f"{np.linalg.norm(zero):.1f}",
        flush=True,
    )
    for seed in seeds:
        for start in ("mode", "theta0"):
            wall, cpu = time.perf_counter(), cpu_seconds()
            extra = {} if start == "mode" else {"initvals": {"theta_white": zero}}
            idata = pm.sample(
                draws,
                tune=draws,
                chains=chains,
                cores=min(chains, 2),
                random_seed=seed,
                progressbar=False,
                model=model,
                compute_convergence_checks=False,
                **extra,
            )
            data = az.convert_to_dataset({"x": np.asarray(posterior_dataset(idata)["theta"])})
            bulk = np.asarray(az.ess(data, method="bulk")["x"]).ravel()
            tail = np.asarray(az.ess(data, method="tail")["x"]).ravel()
            stats = idata.sample_stats
            print(
                f"seed {seed}, start {start}: min bulk ESS {bulk.min():.0f} (10% "
                f"{np.quantile(bulk, 0.1):.0f}, median {np.median(bulk):.0f}), min tail ESS "
                f"{tail.min():.0f}, {float(np.mean(stats['n_steps'])):.1f} steps/draw, step "
                f"size {float(np.mean(np.asarray(stats['step_size'])[:, -1])):.3f}, "
                f"{int(np.sum(stats['diverging']))} divergences, "
                f"{time.perf_counter() - wall:.0f} s wall, {cpu_seconds() - cpu:.0f} CPU s",
                flush=True,
            )


if __name__ == "__main__":
    args = sys.argv[1:]
    main(
        args[0] if args else "5x3",
        int(args[1]) if len(args) > 1 else 300,
        tuple(int(s) for s in args[2].split(",")) if len(args) > 2 else (1, 2, 3),
        int(args[3]) if len(args) > 3 else 2,
    )
