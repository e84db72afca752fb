"""Per-gradient cost of the exact log-linear moments: split sums against the junction tree.

K ternary columns with all 2-way marginals (the complete interaction graph: the junction
tree is one clique of every column). For each K, in one process, the cost of what NUTS pays per
leapfrog step on the default ``"clt-fixed"`` law: one
:func:`~pymc_dp.kernels.loglinear_moments.clt_fixed_logp_grad` (the mean, then its derivative
along one direction), by :class:`~pymc_dp.kernels.loglinear_split.SplitMoments` and, up to
``--junction-max`` columns, by :class:`~pymc_dp.kernels.loglinear_junction.JunctionTree`; the
largest difference of the two gradients relative to the gradient's largest entry; and, for the
split engine, the full covariance (``moments``, what the Laplace fit and Σ take; up to
:data:`COV_MAX_CELLS` cells) and n = 10⁴ records drawn (one synthetic data set).

θ ~ N(0, 0.3²) per term (as ``benchmarks/marginals_speed.py``), z the noiseless mean plus unit
noise, Σ at θ; the gradient is taken at θ + 0.01. BLAS on one thread (as inside the likelihood's
``Op``). Times are the best of ``reps`` calls (the junction tree: of one or two), each at a new
θ (1e-9 apart); the two engines' gradients are compared at θ + 0.01.

With graph modes (``NUMBA``, ``JAX``, ``FAST_RUN``: PyTensor's C backend), the same value and
gradient by :func:`~pymc_dp.likelihoods.marginals.marginals_clt_fixed_split_graph` compiled in
each (compile time, then the best of ``reps`` calls; JAX's call is timed until its result is
on the host), printed after the table.

A projected fit time is printed for each K: gradients × per-gradient time / chains, with
gradients = chains × (tune + draws) × steps/draw; steps/draw defaults to 7 (the whitened model
at 12 ternary columns, ``benchmarks/marginals_speed.py 1000 12x3``).

Run: ``python benchmarks/marginals_split_engine.py [cases] [junction max] [steps/draw]
[graph modes]`` from the repository root, e.g.
``python benchmarks/marginals_split_engine.py 8,10,12,13,14,15 12 7 NUMBA,JAX``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import itertools
import sys
import time

import numpy as np

import pymc_dp
from pymc_dp.kernels.loglinear import LogLinearDomain
from pymc_dp.kernels.loglinear_junction import JunctionTree
from pymc_dp.kernels.loglinear_moments import clt_fixed_logp_grad, feature_method
from pymc_dp.kernels.loglinear_split import SplitMoments

CHAINS, TUNE, DRAWS = 2, 1000, 1000  # pm.sample's defaults on 2 cores
COV_MAX_CELLS = 2_000_000
"""Above this, the full covariance is not timed (and Σ is a stand-in)."""


def best_of(fn, reps):
    """The least wall time of ``reps`` calls of ``fn``, and its last result."""
    best, out = np.inf, None
    for _ in range(reps):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def graph_cost(dom, z, n, sigma, at, reference, modes, reps=5):
    """Compile and time the plain PyTensor graph of the same law in each of ``modes``."""
    import pytensor
    import pytensor.tensor as pt

    from pymc_dp.likelihoods.marginals import marginals_clt_fixed_split_graph

    theta = pt.dvector("theta")
    logp = marginals_clt_fixed_split_graph(theta, dom, z, n=n, cov=sigma)
    for mode in modes:
        start = time.perf_counter()
        f = pytensor.function([theta], [logp, pytensor.grad(logp, theta)], mode=mode)
        f(at)
        compile_s = time.perf_counter() - start
        calls = iter(range(10**6))
        t, _ = best_of(lambda f=f: [np.asarray(o) for o in f(at + 1e-9 * next(calls))], reps)
        diff = np.max(np.abs(np.asarray(f(at)[1]) - reference)) / np.max(np.abs(reference))
        print(
            f"  K = {len(dom.sizes)}, graph on {mode}: compile {compile_s:.1f} s, "
            f"{1000 * t:.1f} ms a gradient, max rel. diff from the engine {diff:.1e}",
            flush=True,
        )


def case(k, junction_max, steps, reps=5, n=10_000, modes=()):
    dom = LogLinearDomain((3,) * k, tuple(itertools.combinations(range(k), 2)))
    rng = np.random.default_rng(k)
    theta = rng.normal(size=dom.n_params) * 0.3
    t_build, split = best_of(lambda: SplitMoments(dom, max_cells=10**8), 1)
    if dom.n_cells <= COV_MAX_CELLS:
        t_cov, (mean, cov) = best_of(lambda: split.moments(theta), 1)
        cov_text = f"{t_cov:.2f} s"
    else:
        # the full Cov is p passes over the cells (minutes here): for timing the gradient a
        # positive-definite stand-in Σ serves as well
        mean = split.mean(theta)
        cov = np.diag(mean * (1 - mean))
        cov_text = "not run"
    uc, um = dom.projected_table_map
    sigma = n * um @ cov @ um.T + np.eye(dom.n_params)
    chol = np.linalg.cholesky(sigma)
    z = n * (uc + um @ mean) + rng.normal(size=dom.n_params)
    calls = iter(range(10**6))

    def grad(engine):
        # a new θ each call, as along a trajectory (the split engine keeps the last θ's law)
        at = theta + 0.01 + 1e-9 * next(calls)
        return clt_fixed_logp_grad(at, dom, engine, z, n=n, chol=chol)

    t_split, _ = best_of(lambda: grad(split), reps)
    at = theta + 0.01
    _, g_split = clt_fixed_logp_grad(at, dom, split, z, n=n, chol=chol)
    t_sample, _ = best_of(lambda: split.sample(theta, n, rng), 1)
    method = feature_method(dom)
    if k <= junction_max:
        jt = JunctionTree(dom)
        t_jt, (_, g_jt) = best_of(
            lambda: clt_fixed_logp_grad(at, dom, jt, z, n=n, chol=chol), 1 if k >= 12 else 2
        )
        err = np.max(np.abs(g_split - g_jt)) / np.max(np.abs(g_jt))
        jt_text = f"{1000 * t_jt:.0f} ms | {t_jt / t_split:.0f}x | {err:.1e}"
    else:
        jt_text = "not run | | "
    gradients = CHAINS * (TUNE + DRAWS) * steps
    projected = gradients * t_split / CHAINS
    print(
        f"| {k} | {dom.n_cells} | {dom.n_params} | {method} | {1000 * t_split:.1f} ms | {jt_text} "
        f"| {cov_text} | {t_sample:.2f} s | {t_build:.2f} s | {projected / 60:.1f} min |",
        flush=True,
    )
    if modes:
        graph_cost(dom, z, n, sigma, at, g_split, modes)


def main(cases="8,10,12", junction_max=12, steps=7.0, modes=""):
    print(f"pymc_dp from {pymc_dp.__file__}")
    print(
        "| K | cells | p | feature_method | split gradient | junction gradient | ratio "
        "| max rel. diff | split Cov (p x p) | 10^4 records | split set-up "
        f"| projected NUTS fit ({CHAINS} x ({TUNE} + {DRAWS}) x {steps:g} steps) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for k in (int(v) for v in cases.split(",")):
        case(k, junction_max, steps, modes=tuple(m for m in modes.split(",") if m))


if __name__ == "__main__":
    args = sys.argv[1:]
    main(
        args[0] if args else "8,10,12",
        int(args[1]) if len(args) > 1 else 12,
        float(args[2]) if len(args) > 2 else 7.0,
        args[3] if len(args) > 3 else "",
    )
