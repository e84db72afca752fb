"""Per-gradient cost of the fixed-covariance marginals law: enumerated sums against the default.

All 2-way tables of K columns with L levels (n = 10⁴ uniform records, ε = 1, float Laplace), the
covariance held at a point near θ (θ ~ N(0, 0.3²) per term). For each case, in one process,
the CPU time of one log-density and gradient of the ``CLTLogp`` Op (what NUTS pays a leapfrog
step, BLAS on one thread as inside the Op) with the moments enumerated over the domain (dense
feature matrices, or table sums where
:func:`~pymc_dp.kernels.loglinear_tables.prefer_tables` says so) and with the default engine
(:func:`~pymc_dp.kernels.loglinear_moments.fixed_law_method`); the ratio; and the largest
differences of the two log-densities and gradients (relative to the gradient's largest entry).

Run: ``python benchmarks/marginals_fixed_law.py [cases] [reps]`` from the repository root,
cases like ``3x2,7x2,10x2,15x2,5x3,8x3,10x3`` (columns x levels, the default).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import itertools
import sys
import time

import numpy as np

import pymc_dp as pmdp
from pymc_dp.kernels.loglinear_moments import clt_covariance, feature_moments, fixed_law_method
from pymc_dp.likelihoods.marginals import CLTLogp, noise_variance, projected_release


def release(k: int, levels: int, n: int = 10_000):
    """All 2-way tables of ``k`` uniform columns of ``levels`` levels."""
    codes = np.random.default_rng(0).integers(0, levels, (n, k))
    cols = [f"c{j}" for j in range(k)]
    return pmdp.release_marginals(
        {c: codes[:, j] for j, c in enumerate(cols)},
        columns=cols,
        domains={c: list(range(levels)) for c in cols},
        marginals=list(itertools.combinations(cols, 2)),
        epsilon=1.0,
        mechanism="laplace-float",
        rng=1,
    )


def per_call(op: CLTLogp, theta: np.ndarray, reps: int) -> tuple[float, float, np.ndarray]:
    """Mean CPU ms of ``op.perform`` over ``reps`` calls, and its log-density and gradient."""

    class _Node:
        outputs = (None, np.empty(0))

    out: list[list] = [[None], [None]]
    op.perform(_Node, [theta], out)
    start = time.process_time()
    for _ in range(reps):
        op.perform(_Node, [theta], out)
    return (time.process_time() - start) / reps * 1e3, float(out[0][0]), out[1][0].copy()


def main(cases: list[tuple[int, int]], reps: int) -> None:
    print("case   cells  params default   enumerated ms  default ms  ratio  |dlogp|  |dgrad|/max")
    for k, levels in cases:
        rel = release(k, levels)
        dom, z = projected_release(rel)
        theta = np.random.default_rng(1).normal(0.0, 0.3, dom.n_params)
        engine = feature_moments(dom, "split" if k > 1 else "enumerate")
        cov = clt_covariance(0.9 * theta, dom, engine, n=rel.n, noise_variance=noise_variance(rel))
        chol = np.linalg.cholesky(cov)
        t_enum, lp_enum, g_enum = per_call(
            CLTLogp(dom, z, rel.n, 0.0, chol, "enumerate"), theta, reps
        )
        t_def, lp_def, g_def = per_call(CLTLogp(dom, z, rel.n, 0.0, chol), theta, reps)
        print(
            f"{k}x{levels:<3} {dom.n_cells:7d} {dom.n_params:6d} {fixed_law_method(dom):9s} "
            f"{t_enum:13.2f} {t_def:11.2f} {t_enum / t_def:6.1f}  {abs(lp_enum - lp_def):.1e}  "
            f"{np.max(np.abs(g_enum - g_def)) / np.max(np.abs(g_enum)):.1e}",
            flush=True,
        )


if __name__ == "__main__":
    spec = sys.argv[1] if len(sys.argv) > 1 else "3x2,7x2,10x2,15x2,5x3,8x3,10x3"
    main(
        [tuple(int(v) for v in case.split("x")) for case in spec.split(",")],
        int(sys.argv[2]) if len(sys.argv) > 2 else 20,
    )
