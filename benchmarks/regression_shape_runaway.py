"""Reproducer of the shape model's runaway of σ_x² during tuning (issue 34).

The calibration cell of ``regression_x_models.py`` (n = 1000, ε = 1, released degree 3–4
moments, seed 34, one cell per call) crashed for x binary and clipped exponential: in a few
chains σ_x² ran to 10⁵–10¹⁹ while s stayed sane. This script runs the same batched sampler on
the same releases (``sample_regression`` with ``moments=``, the benchmark's settings) for the
first ``--iterations`` iterations only (the random numbers are those of the full run, which
tunes 300) and prints, per chain whose σ_x² exceeds ``--limit`` after iteration 20 (a start
from the prior's tail may, and comes back), the first such iteration and the peak.
``--releases`` picks a subset of the cell's releases (then the random numbers differ).
``--single`` runs one release with chain seeds 0..N−1 and reports the first that runs away.

Cause (found with this script): the released moments' log likelihood
(:func:`~pymc_dp.regression.kernels.x_models.moment_log_likelihood`) cancelled two terms of
size τ²/2b² (τ² the sums' sampling variance under the model, b the Laplace scale); at large
σ_x² (τ² ∝ σ_x⁸) the rounding error, of either sign, reached +10³…10²⁶ nats, so the target
itself grew without bound there.

Usage::

    python benchmarks/regression_shape_runaway.py --design binary --iterations 60
    python benchmarks/regression_shape_runaway.py --design binary --releases 24 --single 40
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from regression_x_models import PRIOR, simulate

import pymc_dp.regression.engine.collapsed as engine
from pymc_dp.regression import default_x_prior
from pymc_dp.regression.kernels.collapsed import unpack_parameters


class _Stop(Exception):
    pass


SETTLED = 20
"""Iterations after which a chain's σ_x² counts: a start drawn from the prior's heavy tail
(ν = 1) can exceed the limit at first and come back."""


def run(z, scale, extra, x_prior, n, seed, iterations, limit, tries=8):
    """Max σ_x² per row (chain-major) over sweeps ``SETTLED`` to ``iterations``, and the first
    of them above ``limit``."""
    rows = 2 * z.shape[0]
    peak = np.zeros(rows)
    first = np.full(rows, -1)
    count = [0]
    original = engine.collapsed_sweep

    def watched(*args, **kw):
        state, stats = original(*args, **kw)
        var = unpack_parameters(state.params, 1).x_cov[:, 0, 0, 0]
        if count[0] >= SETTLED:
            peak[:] = np.fmax(peak, var)
            first[(first < 0) & ~(var < limit)] = count[0]
        count[0] += 1
        if count[0] >= iterations:
            raise _Stop
        return state, stats

    engine.collapsed_sweep = watched
    try:
        engine.sample_regression(seed, released=z, n=n, prior=PRIOR, x_prior=x_prior,
                                 scale=scale, tries=tries, draws=1000, tune=300, chains=2,
                                 **extra)  # fmt: skip
    except _Stop:
        pass
    finally:
        engine.collapsed_sweep = original
    return peak, first


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--design", default="binary", choices=("binary", "exponential"))
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--eps", type=float, default=1.0)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=34, help="the cell's seed")
    parser.add_argument("--iterations", type=int, default=60)
    parser.add_argument("--limit", type=float, default=100.0, help="σ_x² counted as runaway")
    parser.add_argument("--releases", type=int, nargs="+", default=None)
    parser.add_argument("--single", type=int, default=0, help="chain seeds to try per release")
    args = parser.parse_args(argv)
    _truth, rels = simulate(np.random.default_rng(args.seed), args.design, args.n, args.eps,
                           args.trials, True)  # fmt: skip
    keep = range(len(rels)) if args.releases is None else args.releases
    rels = [rels[i] for i in keep]
    z = np.stack([r.value for r in rels])
    scale = np.array([r.scale for r in rels])
    fm = rels[0].fourth_moments
    extra = {"moments": np.stack([r.fourth_moments.value for r in rels]),
             "moment_powers": fm.powers,
             "moment_scale": np.array([r.fourth_moments.sensitivity / r.fourth_moments.epsilon
                                       for r in rels])}  # fmt: skip
    x_prior = default_x_prior(rels[0].x_bounds)
    t0 = time.perf_counter()
    if args.single:
        for i, rel in enumerate(keep):
            one = {k: (v if k == "moment_powers" else v[i : i + 1]) for k, v in extra.items()}
            for seed in range(args.single):
                peak, first = run(z[i : i + 1], scale[i : i + 1], one, x_prior, args.n, seed,
                                  args.iterations, args.limit)  # fmt: skip
                if np.any(first >= 0):
                    c = int(np.argmax(first >= 0))
                    print(f"release {rel} chain seed {seed}: chain {c} passed σ_x² {args.limit:g} "
                          f"at iteration {first[c]}, peak {peak[c]:.3g}", flush=True)  # fmt: skip
                    break
            else:
                print(f"release {rel}: no runaway in chain seeds 0..{args.single - 1} "
                      f"(peak σ_x² {peak.max():.3g})")  # fmt: skip
    else:
        peak, first = run(z, scale, extra, x_prior, args.n, args.seed, args.iterations,
                          args.limit)  # fmt: skip
        rows = np.flatnonzero(first >= 0)
        print(f"{args.design}: {len(rows)} of {len(peak)} chains passed σ_x² {args.limit:g} "
              f"in {args.iterations} iterations; largest peak {peak.max():.3g}")  # fmt: skip
        for r in rows:
            chain, rel = divmod(int(r), len(keep))
            print(f"  release {list(keep)[rel]} chain {chain}: iteration {first[r]}, "
                  f"peak {peak[r]:.3g}")  # fmt: skip
    print(f"{time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
