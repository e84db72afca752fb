"""Where one gradient of the Bethe likelihood goes, and compiled against NumPy BP sweeps.

The release of ``benchmarks/marginals_speed.py`` for K columns of L levels (all 2-way tables,
n = 10⁴, ε = 1); the fixed-covariance collapsed log-density and its gradient
(:func:`pymc_dp.kernels.loglinear_moments.clt_fixed_logp_grad`, Bethe moments) at the Laplace
mode and along a random walk from it in the whitened coordinates (steps of ``step``, the size
NUTS adapts to there, spread 0.25), warm-started as NUTS runs them. In one process, interleaved:

* ``numpy``: loopy BP sweeps in NumPy (``bp_sweeps_numpy``), BP run twice per gradient (for
  the mean, then again for the mean and its derivative) and the Bethe Hessian as a sparse
  product: the code before;
* ``compiled``: the compiled sweeps (``bp_sweeps``), BP once per gradient (the mean is
  cached), the Hessian filled into its fixed sparsity structure.

Then a profile of the compiled variant by function (cumulative seconds).

Run: ``PYTHONPATH=. python benchmarks/marginals_bethe_gradient.py [KxL] [points] [step]``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import cProfile
import pstats
import sys
import time

import numpy as np
from marginals_speed import release
from scipy import sparse

from pymc_dp.kernels import loglinear_bethe
from pymc_dp.kernels.loglinear_bethe_jit import bp_sweeps, bp_sweeps_numpy
from pymc_dp.kernels.loglinear_laplace import marginals_laplace
from pymc_dp.kernels.loglinear_moments import clt_covariance, clt_fixed_logp_grad
from pymc_dp.likelihoods.marginals import noise_variance, projected_release


class _Uncached:
    """The engine with its mean cache cleared before every call (BP runs twice a gradient)."""

    def __init__(self, engine):
        self.engine = engine

    def mean(self, theta):
        self.engine._last = None
        return self.engine.mean(theta)

    def mean_and_jvp(self, theta, v):
        self.engine._last = None
        return self.engine.mean_and_jvp(theta, v)


def main(spec="15x3", points=200, step=0.05):
    k, levels = (int(v) for v in spec.split("x"))
    rel = release(k, levels, 10_000, seed=0)
    dom, z = projected_release(rel)
    var = noise_variance(rel)
    fit = marginals_laplace(dom, z, n=rel.n, noise_variance=var, prior_sigma=2.0, method="bethe")
    engine = loglinear_bethe.BetheMoments(dom)
    chol = np.linalg.cholesky(clt_covariance(fit.mode, dom, engine, n=rel.n, noise_variance=var))
    lower = np.linalg.cholesky(fit.cov)
    rng = np.random.default_rng(0)
    # an AR(1) walk of steps ``step`` whose spread is 0.25 (the log-density there falls about
    # 1.5x as fast as the Laplace normal says: NUTS's typical set, not the normal's)
    rho = np.sqrt(1.0 - (step / 0.25) ** 2)
    eta = np.zeros((points, dom.n_params))
    for t in range(1, points):
        eta[t] = rho * eta[t - 1] + step * rng.standard_normal(dom.n_params)
    path = fit.mode + eta @ lower.T

    def product_hessian(mean):
        # the Bethe Hessian as the sparse product Mᵀ diag(d) M (before its fixed structure)
        m = engine.region_matrix
        tau = engine.region_const + m @ mean
        return (m.T @ sparse.diags(engine.region_weight / tau) @ m).tocsc()

    def run(variant):
        loglinear_bethe.bp_sweeps = bp_sweeps_numpy if variant == "numpy" else bp_sweeps
        if variant == "numpy":
            engine.hessian = product_hessian
        else:
            engine.__dict__.pop("hessian", None)
        eng = _Uncached(engine) if variant == "numpy" else engine
        engine.messages[:] = 0.0
        engine._last = None
        sweeps, out = [], []
        start = time.perf_counter()
        for theta in path:
            out.append(clt_fixed_logp_grad(theta, dom, eng, z, n=rel.n, chol=chol))
            sweeps.append(engine.iterations)
        return time.perf_counter() - start, out, sweeps

    run("compiled")  # compile and warm up
    times = {"numpy": [], "compiled": []}
    for _ in range(3):
        for variant in times:
            seconds, out, sweeps = run(variant)
            times[variant].append(1000 * seconds / points)
            if variant == "numpy":
                reference = out
            else:
                diff = max(
                    np.max(np.abs(g - g0)) / (1 + np.max(np.abs(g0)))
                    for (_, g), (_, g0) in zip(out, reference, strict=True)
                )
    print(
        f"{spec}: p = {dom.n_params}, {points} points along a walk of step {step}; "
        f"BP sweeps a point (the last BP run) median {np.median(sweeps):.0f}"
    )
    for variant, ms in times.items():
        print(f"  {variant}: {np.median(ms):.1f} ms a logp + gradient (runs {np.round(ms, 1)})")
    print(
        f"  ratio numpy / compiled: {np.median(times['numpy']) / np.median(times['compiled']):.2f}"
        f"; largest relative gradient difference {diff:.1e}"
    )
    profile = cProfile.Profile()
    profile.enable()
    run("compiled")
    profile.disable()
    stats = pstats.Stats(profile).stats
    total = sum(v[2] for v in stats.values())
    parts = {
        "bp_sweeps": "BP sweeps (compiled)",
        "beliefs": "BP with beliefs",
        "hessian": "sparse Bethe Hessian (build)",
        "spsolve": "sparse solve (linear response)",
        "_solve_triangular": "dense triangular solves (Σ₀)",
        "clt_fixed_logp_grad": "whole logp + gradient",
    }
    print(f"  profile of the compiled variant ({total:.2f} s own time in all):")
    for name, label in parts.items():
        cum = sum(v[3] for key, v in stats.items() if key[2] == name)
        print(f"    {label}: {cum:.2f} s cumulative ({1000 * cum / points:.1f} ms a point)")


if __name__ == "__main__":
    args = sys.argv[1:]
    main(
        args[0] if args else "15x3",
        int(args[1]) if len(args) > 1 else 200,
        float(args[2]) if len(args) > 2 else 0.05,
    )
