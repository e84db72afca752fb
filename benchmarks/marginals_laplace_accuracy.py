"""Accuracy of the Laplace posterior (``marginals_laplace_posterior``) against NUTS.

For K binary or ternary columns with all 2-way marginals and n = 10⁴ records (the releases of
``benchmarks/marginals_speed.py``: a log-linear model with 2-way terms of sd 0.3, ε = 1,
discrete Laplace noise), the same release is fitted twice:

* NUTS on ``pmdp.marginals_model`` (2 chains × (``draws`` tune + ``draws`` draws));
* ``pmdp.marginals_laplace_posterior`` (4000 independent draws of the normal at the mode).

Printed per case, over the p log-linear parameters: the shift of the Laplace mean from the NUTS
mean in NUTS posterior sd (largest and rms), the ratio of the Laplace sd to the NUTS sd (range),
how often the NUTS draws fall inside the Laplace 90% central interval (mean over parameters; 0.9
if the two agree), the NUTS Monte Carlo standard error of the mean in the same units (largest:
shifts below it are noise), and both wall times.

Run: ``PYTHONPATH=. python benchmarks/marginals_laplace_accuracy.py [draws] [cases]`` with cases
like ``5x2,5x3,10x2``.
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
from marginals_speed import release

import pymc_dp as pmdp
from pymc_dp._compat import posterior_dataset
from pymc_dp.kernels.loglinear_moments import feature_method
from pymc_dp.model.nodes.marginals import choose_likelihood


def compare(k, levels, draws):
    rel = release(k, levels, 10_000, seed=0)
    start = time.perf_counter()
    idata = pm.sample(
        draws,
        tune=draws,
        chains=2,
        cores=2,
        random_seed=1,
        progressbar=False,
        model=pmdp.marginals_model(rel),
        compute_convergence_checks=False,
    )
    t_nuts = time.perf_counter() - start
    nuts = np.asarray(posterior_dataset(idata)["theta"])
    start = time.perf_counter()
    lap = pmdp.marginals_laplace_posterior(rel, draws=4000, rng=2)
    t_lap = time.perf_counter() - start
    lap = np.asarray(posterior_dataset(lap)["theta"]).reshape(-1, rel.domain.n_params)
    flat = nuts.reshape(-1, rel.domain.n_params)
    sd = flat.std(axis=0)
    shift = (lap.mean(axis=0) - flat.mean(axis=0)) / sd
    ratio = lap.std(axis=0) / sd
    lo, hi = np.quantile(lap, [0.05, 0.95], axis=0)
    inside = np.mean((flat >= lo) & (flat <= hi), axis=0)
    mcse = np.asarray(az.mcse(az.convert_to_dataset({"x": nuts}), method="mean")["x"]) / sd
    dom = rel.domain
    print(
        f"| {k} x {levels} | p = {dom.n_params}, {choose_likelihood(rel)}, "
        f"{feature_method(dom)} | {np.max(np.abs(shift)):.2f} / "
        f"{np.sqrt(np.mean(shift**2)):.2f} | {ratio.min():.2f}–{ratio.max():.2f} | "
        f"{inside.mean():.3f} ({inside.min():.3f}–{inside.max():.3f}) | {mcse.max():.2f} | "
        f"{t_nuts:.0f} s | {t_lap:.1f} s |",
        flush=True,
    )


def main(draws=500, cases="5x2,5x3,10x2,8x3"):
    print(f"n = 10^4, all 2-way marginals, eps = 1; NUTS 2 chains x ({draws} + {draws})")
    print(
        "| columns x levels | model | mean shift, max / rms (NUTS sd) | sd ratio "
        "(Laplace / NUTS) | NUTS draws inside the Laplace 90% interval, mean (range) "
        "| NUTS MCSE, max (sd) | NUTS | Laplace |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for spec in cases.split(","):
        k, levels = (int(v) for v in spec.split("x"))
        compare(k, levels, draws)


if __name__ == "__main__":
    args = sys.argv[1:]
    main(int(args[0]) if args else 500, args[1] if len(args) > 1 else "5x2,5x3,10x2,8x3")
