"""CPU time per log density and gradient of the default marginals model on every NUTS backend.

K ternary columns (a chain of dependence), all 2-way tables, n = 10⁴, ε = 1: the model
:func:`pymc_dp.marginals_model` builds (whitened, ``likelihood="auto"``), compiled for PyMC's C
backend (``pm.sample()``), JAX (what numpyro and blackjax differentiate:
``get_jaxified_logp`` under :func:`jax.value_and_grad`, jitted) and Numba (nutpie's backend:
the logp and dlogp graph in ``mode="NUMBA"``), in one process. Each figure is the mean CPU time
(``time.process_time``, every thread) of ``reps`` calls at the initial point after one warm-up
call; C is timed before and after the others.

Run: ``python benchmarks/marginals_backends.py [K ...]`` from the repository root, e.g.
``python benchmarks/marginals_backends.py 6 10`` (docs/marginals.md, "NUTS backends").
"""

from __future__ import annotations

import itertools
import sys
import time
import warnings

import numpy as np


def release(k: int, n: int = 10_000, seed: int = 0):
    """All 2-way tables of k ternary columns, each a noisy copy of the one before."""
    import pymc_dp as pmdp

    rng = np.random.default_rng(seed)
    x = np.empty((n, k), dtype=int)
    x[:, 0] = rng.integers(0, 3, n)
    for j in range(1, k):
        x[:, j] = np.where(rng.random(n) < 0.6, x[:, j - 1], rng.integers(0, 3, n))
    cols = [f"c{j}" for j in range(k)]
    return pmdp.release_marginals(
        {c: x[:, j] for j, c in enumerate(cols)},
        columns=cols,
        domains={c: [0, 1, 2] for c in cols},
        marginals=list(itertools.combinations(cols, 2)),
        epsilon=1.0,
        rng=1,
    )


def per_call(f, reps: int) -> float:
    """Mean CPU milliseconds of ``f()`` over ``reps`` calls, after one warm-up call."""
    f()
    start = time.process_time()
    for _ in range(reps):
        f()
    return (time.process_time() - start) / reps * 1e3


def main(cases: list[int]) -> None:
    import jax
    import jax.numpy as jnp
    from pymc.sampling.jax import get_jaxified_logp

    import pymc_dp as pmdp
    from pymc_dp.kernels.loglinear_moments import likelihood_method
    from pymc_dp.model.nodes.marginals import choose_likelihood

    jax.config.update("jax_enable_x64", True)
    for k in cases:
        rel = release(k)
        model = pmdp.marginals_model(rel)
        dom = rel.domain
        kind = choose_likelihood(rel)
        print(
            f"{k} ternary columns: {dom.n_cells} cells, p = {dom.n_params}, "
            f"{kind}, features "
            f"{likelihood_method(dom, kind)}",
            flush=True,
        )
        point = model.initial_point()
        order = [v.name for v in model.value_vars]
        c_fn = model.compile_fn([model.logp(), model.dlogp()], point_fn=False)
        logp = get_jaxified_logp(model, negative_logp=True)
        value_and_grad = jax.jit(jax.value_and_grad(lambda args: logp(args)))
        args = [jnp.asarray(point[name]) for name in order]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Numba's object-mode notices
            nb_fn = model.compile_fn([model.logp(), model.dlogp()], point_fn=False, mode="NUMBA")
        reps = 200 if dom.n_cells < 10_000 else 30
        c_before = per_call(lambda: c_fn(**point), reps)
        jax_ms = per_call(lambda: jax.block_until_ready(value_and_grad(args)), reps)
        numba_ms = per_call(lambda: nb_fn(**point), reps)
        c_after = per_call(lambda: c_fn(**point), reps)
        c_ms = min(c_before, c_after)
        print(
            f"  ms per logp + gradient: C {c_before:.2f} / {c_after:.2f} (before / after), "
            f"JAX {jax_ms:.2f} ({jax_ms / c_ms:.2f}x), Numba {numba_ms:.2f} "
            f"({numba_ms / c_ms:.2f}x)",
            flush=True,
        )


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [6, 10])
