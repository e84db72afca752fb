"""Speed of the noisy-marginals model: gradient cost and a short NUTS fit against domain size.

For K binary or ternary columns with all 2-way marginals and n = 10⁴ records (a log-linear model
with random 2-way terms), in one process:

* the cost of one log-density + gradient evaluation, pymc_dp's ``Op`` (analytic gradient in
  NumPy) against the same density as a plain PyTensor graph (``marginals_clt_logp_graph``,
  gradient by PyTensor: the hand-written baseline), as a ratio;
* the wall time of ``pm.sample`` (NUTS, 1 chain, ``--draws`` tune + draws) on
  ``pmdp.marginals_model`` and of drawing 20 synthetic data sets of n records.

Domains above the enumeration limit (10⁵ cells) are refused by the package and skipped here.

Run: ``PYTHONPATH=. python benchmarks/marginals_speed.py [draws] [cases]`` with cases like
``5x2,5x3,10x2`` (columns x levels).
"""

from __future__ import annotations

import itertools
import sys
import time

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt

import pymc_dp as pmdp
from pymc_dp.kernels.loglinear import MAX_CELLS, LogLinearDomain
from pymc_dp.likelihoods.marginals import (
    marginals_clt_logp,
    marginals_clt_logp_graph,
    noise_variance,
)


def per_call(f, x, repeat):
    f(x)
    start = time.perf_counter()
    for _ in range(repeat):
        f(x)
    return (time.perf_counter() - start) / repeat


def case(k, levels, draws, n=10_000, seed=0):
    if levels**k > MAX_CELLS:
        print(f"| {k} x {levels} | {levels**k} cells: above the enumeration limit | | | |")
        return
    names = [f"c{i}" for i in range(k)]
    pairs = list(itertools.combinations(range(k), 2))
    dom = LogLinearDomain((levels,) * k, tuple(pairs))
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=dom.n_params) * 0.3
    codes = dom.cells[rng.choice(dom.n_cells, n, p=np.exp(dom.log_probs(theta)))]
    rel = pmdp.release_marginals(
        {c: codes[:, i] for i, c in enumerate(names)},
        columns=names,
        domains={c: list(range(levels)) for c in names},
        marginals=[(names[a], names[b]) for a, b in pairs],
        epsilon=1.0,
        rng=1,
    )
    z = rel.y @ dom.projection
    x = pt.vector("x")
    args = dict(n=n, noise_variance=noise_variance(rel))
    ops = marginals_clt_logp(x, dom, z, **args)
    graph = marginals_clt_logp_graph(x, dom, z, **args)
    f_op = pytensor.function([x], [ops, pytensor.grad(ops, x)])
    f_graph = pytensor.function([x], [graph, pytensor.grad(graph, x)])
    repeat = max(3, int(2e7 / (dom.n_cells * dom.n_params**2)))
    t_op = per_call(f_op, theta, repeat)
    t_graph = per_call(f_graph, theta, repeat)
    start = time.perf_counter()
    idata = pm.sample(
        draws,
        tune=draws,
        chains=1,
        cores=1,
        random_seed=1,
        progressbar=False,
        model=pmdp.marginals_model(rel, likelihood="clt"),
        compute_convergence_checks=False,
    )
    t_fit = time.perf_counter() - start
    start = time.perf_counter()
    pmdp.synthetic_datasets(idata, rel, m=min(20, draws), rng=2)
    t_syn = time.perf_counter() - start
    print(
        f"| {k} x {levels} | {dom.n_cells} cells, p = {dom.n_params} | {1e3 * t_op:.2f} ms "
        f"({t_graph / t_op:.1f}x faster than the graph) | {t_fit:.0f} s | {t_syn:.1f} s |"
    )


def main(draws=200, cases="5x2,5x3,10x2"):
    print(f"n = 10^4, all 2-way marginals, NUTS {draws} tune + {draws} draws, 1 chain")
    print("| columns x levels | domain | logp + gradient | pm.sample | 20 synthetic sets |")
    print("|---|---|---|---|---|")
    for spec in cases.split(","):
        k, levels = (int(v) for v in spec.split("x"))
        case(k, levels, draws)


if __name__ == "__main__":
    args = sys.argv[1:]
    main(int(args[0]) if args else 200, args[1] if len(args) > 1 else "5x2,5x3,10x2")
