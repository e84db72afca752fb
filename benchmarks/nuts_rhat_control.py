"""What R-hat NUTS gives on a posterior that is exactly normal: the control for a large θ.

The 15-ternary-column marginals posterior has 450 terms; the largest R-hat over them is a
maximum of 450 noisy statistics. This runs PyMC's NUTS, with the settings of
``benchmarks/marginals_speed.py`` (``draws`` tune + ``draws`` draws, ``jitter+adapt_diag``), on
θ ~ Normal(0, I_p), a posterior no parameterisation can improve on (the whitened model's target
is this law where the Laplace approximation is exact), and prints for each seed the largest
R-hat over the p coordinates, its location (rank-normalised split) and scale (folded) parts,
how many coordinates exceed 1.01, the smallest bulk and tail ESS and the steps per draw.

At p = 450 and 2 chains × (500 + 500) the largest R-hat is about 1.02, all of it the scale part:
the NUTS trajectory stops near half an orbit of the normal, θ → -θ, so |θ - median| is
strongly correlated from draw to draw (tail ESS ≈ 0.35 per draw where the bulk ESS exceeds the
draws). A model whose largest R-hat matches this control mixes as well as NUTS can; only more
draws or more chains lower it (``docs/marginals.md``, "R-hat at 15 ternary columns").

Run: ``python benchmarks/nuts_rhat_control.py [p] [draws] [chains] [seeds]``, e.g. ``450 500 2
1,2,3``. Chains run in this process one after the other (their CPU time is what counts).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import sys

import arviz as az
import numpy as np
import pymc as pm


def control(p, draws, chains, seed):
    """One NUTS run on Normal(0, I_p): the largest R-hat and its parts, and the ESS."""
    with pm.Model():
        pm.Normal("theta", 0.0, 1.0, shape=p)
        idata = pm.sample(
            draws,
            tune=draws,
            chains=chains,
            cores=1,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
        )
    rhat = np.asarray(az.rhat(idata)["theta"])
    location = np.asarray(az.rhat(idata, method="z_scale")["theta"])
    scale = np.asarray(az.rhat(idata, method="folded")["theta"])
    bulk = np.asarray(az.ess(idata, method="bulk")["theta"])
    tail = np.asarray(az.ess(idata, method="tail")["theta"])
    steps = float(np.mean(np.asarray(idata.sample_stats["n_steps"])))
    return (
        f"| {p} | {chains} x ({draws} + {draws}) | {seed} | {rhat.max():.4f} "
        f"({location.max():.4f}, {scale.max():.4f}) | {int((rhat > 1.01).sum())} | "
        f"{bulk.min():.0f} / {tail.min():.0f} | {steps:.1f} |"
    )


def main(p=450, draws=500, chains=2, seeds="1,2,3"):
    print(
        "| p | chains x (tune + draws) | seed | largest R-hat (location, scale) | terms > 1.01 "
        "| min ESS bulk / tail | steps/draw |"
    )
    print("|---|---|---|---|---|---|---|")
    for seed in (int(s) for s in seeds.split(",")):
        print(control(p, draws, chains, seed), flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    main(
        int(args[0]) if args else 450,
        int(args[1]) if len(args) > 1 else 500,
        int(args[2]) if len(args) > 2 else 2,
        args[3] if len(args) > 3 else "1,2,3",
    )
