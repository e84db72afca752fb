"""Partially centred against non-centred group effects: the same posterior, and its mixing.

For each release of :mod:`grouped_speed` given on the command line (family, G, ε), samples the
model ``pymc-dp fit`` builds (``build_grouped_model``: each group's effect centred by
:func:`pymc_dp.centring_weights`) and the README's non-centred model with the same node, in
one process, 2 chains × 1000 + 1000, and prints per model the wall time, the smallest bulk ESS
and largest R-hat of μ, τ and the θ_g, then the largest difference of the groups' posterior
means in posterior sds and the range of the sd ratios.

    python benchmarks/grouped_centring.py binomial:500:1.0 poisson:500:1.0 binomial:50:0.1

Only Binomial has the same priors on both sides (the benchmark's Poisson population prior is
its own): compare the Poisson rows' mixing, not their posteriors.
"""

from __future__ import annotations

import logging
import sys
import time
import warnings
from pathlib import Path

import arviz as az
import numpy as np
import pymc as pm

sys.path.insert(0, str(Path(__file__).parent))
import grouped_speed as gs


def run(family: str, groups: int, epsilon: float, seed: int = 1) -> None:
    setting = gs.Setting(family, groups, epsilon, mechanism="laplace", sigma="shared", seed=0)
    rs = gs.make_release(setting)
    theta = {"binomial": "p", "poisson": "lam"}[family]
    posts = {}
    for hierarchy in ("fit", "readme"):
        start = time.perf_counter()
        with gs.build(setting, rs, "default", "noncentred", hierarchy):
            idata = pm.sample(
                1000, tune=1000, chains=2, cores=1, random_seed=seed, progressbar=False,
                compute_convergence_checks=False,
            )  # fmt: skip
        seconds = time.perf_counter() - start
        post = idata.posterior[["mu", "tau", theta]]
        ess, rhat = az.ess(post, method="bulk"), az.rhat(post)
        low = {v: int(ess[v].min()) for v in ess.data_vars}
        high = {v: round(float(rhat[v].max()), 3) for v in rhat.data_vars}
        print(f"{family} G={groups} ε={epsilon:g} {hierarchy}: {seconds:.1f} s, "
              f"min ESS {low}, max R-hat {high}", flush=True)  # fmt: skip
        posts[hierarchy] = post[theta]
    fit, readme = posts["fit"], posts["readme"]
    sd = readme.std(("chain", "draw"))
    shift = np.abs(fit.mean(("chain", "draw")) - readme.mean(("chain", "draw"))) / sd
    ratio = fit.std(("chain", "draw")) / sd
    print(f"  θ_g: largest mean difference {float(shift.max()):.3f} sd; sd ratio "
          f"{float(ratio.min()):.3f}–{float(ratio.max()):.3f}", flush=True)  # fmt: skip


def main(argv: list[str]) -> int:
    warnings.simplefilter("ignore")
    logging.getLogger("pymc").setLevel(logging.ERROR)
    for spec in argv or ["binomial:500:1.0"]:
        family, groups, epsilon = spec.split(":")
        run(family, int(groups), float(epsilon))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
