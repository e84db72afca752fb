"""Benchmark: per-iteration cost of the default scalar step against PyMC's own loop.

Both run through ``pm.sample`` in the same process, one chain, many draws: the default
``NoisySuffStat`` model (a Binomial release; ``pm.sample`` assigns :class:`pymc_dp.GridStep`)
and a model with one scalar variable sampled by a trivial step that returns the point unchanged,
which measures PyMC's loop itself. Time per iteration is PyMC's ``sampling_time`` (tuning +
draws, no compile) divided by the iterations; the ratio is what the default step adds.

Usage::

    python benchmarks/step_cost.py [--draws 50000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import pymc as pm
from pymc.step_methods.compound import BlockedStep

import pymc_dp as pmdp
from pymc_dp._compat import posterior_dataset


class TrivialStep(BlockedStep):
    """Returns the point unchanged: the cost of PyMC's sampling loop alone."""

    name = "trivial"
    stats_dtypes_shapes: ClassVar[dict] = {}

    def __init__(self, vars, **kwargs):
        self.vars = vars
        self.var_names = tuple(v.name for v in vars)
        self.rng = np.random.default_rng(0)

    def step(self, point):
        return point, [{}]


def per_iteration(model: pm.Model, step, draws: int) -> float:
    with model:
        start = time.perf_counter()
        idata = pm.sample(
            draws=draws,
            tune=0,
            chains=1,
            cores=1,
            step=step,
            progressbar=False,
            compute_convergence_checks=False,
            random_seed=1,
        )
        wall = time.perf_counter() - start
    seconds = posterior_dataset(idata).attrs.get("sampling_time") or wall
    return float(seconds) / draws


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    logging.getLogger("pymc").setLevel(logging.ERROR)
    x = np.random.default_rng(0).binomial(5, 0.3, size=1000)
    rel = pmdp.release(x, pm.Binomial, epsilon=0.01, trials=5, rng=1)
    with pm.Model() as dp_model:
        p = pm.Beta("p", 3, 5)
        pmdp.NoisySuffStat("y", pm.Binomial.dist(n=5, p=p), release=rel)
        grid = pmdp.GridStep([p])
    with pm.Model() as plain:
        q = pm.Normal("q")
        trivial = TrivialStep([plain.rvs_to_values[q]])
    per_iteration(dp_model, grid, 100)  # warm-up outside the timing
    per_iteration(plain, trivial, 100)
    grid_t = statistics.median(
        per_iteration(dp_model, grid, args.draws) for _ in range(args.repeats)
    )
    base_t = statistics.median(
        per_iteration(plain, trivial, args.draws) for _ in range(args.repeats)
    )
    print(f"PyMC loop with a trivial step: {base_t * 1e6:7.1f} µs per iteration")
    print(f"GridStep (default, Binomial):  {grid_t * 1e6:7.1f} µs per iteration")
    print(f"ratio: {grid_t / base_t:.2f}x (goal <= 3x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
