"""Cost of the exact likelihood against the CLT, per evaluation of θ's log density and gradient.

NUTS evaluates the model's log density and gradient a few times per draw, and GridStep a few
hundred times per grid, so the ratio of one evaluation is the ratio of cost per draw. For each
case the two models (``likelihood="exact"`` and ``"clt"``) are built on the same release and
timed in the same process. Run:

    python benchmarks/exact_cost.py [--repeats 2000]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pymc as pm

import pymc_dp as pmdp

CASES = (
    ("bernoulli", 100),
    ("bernoulli", 10_000),
    ("bernoulli", 100_000),
    ("binomial5", 1_000),
    ("categorical3", 30),
    ("categorical3", 100),
    ("categorical3", 300),
    ("categorical3", 1000),
)


def _model(kind: str, n: int, likelihood: str) -> pm.Model:
    rng = np.random.default_rng(0)
    with pm.Model() as model:
        if kind.startswith("categorical"):
            x = rng.choice(3, size=n, p=[0.2, 0.3, 0.5])
            rel = pmdp.release(x, pm.Categorical, epsilon=0.1, categories=3, rng=1)
            p = pm.Dirichlet("p", np.ones(3))
            dist = pm.Categorical.dist(p=p)
        elif kind == "binomial5":
            rel = pmdp.release(
                rng.binomial(5, 0.3, size=n), pm.Binomial, epsilon=0.1, trials=5, rng=1
            )
            p = pm.Beta("p", 1, 1)
            dist = pm.Binomial.dist(n=5, p=p)
        else:
            rel = pmdp.release(rng.binomial(1, 0.3, size=n), pm.Bernoulli, epsilon=0.1, rng=1)
            p = pm.Beta("p", 1, 1)
            dist = pm.Bernoulli.dist(p=p)
        pmdp.NoisySuffStat("y", dist, release=rel, likelihood=likelihood)
    return model


def _seconds_per_eval(model: pm.Model, repeats: int) -> float:
    fn = model.logp_dlogp_function(ravel_inputs=True)
    fn.set_extra_values({})
    x = np.concatenate([np.ravel(v) for v in model.initial_point().values()])
    fn(x)
    start = time.perf_counter()
    for _ in range(repeats):
        fn(x)
    return (time.perf_counter() - start) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2000)
    args = parser.parse_args()
    print("| case | n | exact (µs) | CLT (µs) | exact / CLT |")
    print("|---|---|---|---|---|")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kind, n in CASES:
            exact = _seconds_per_eval(_model(kind, n, "exact"), args.repeats)
            clt = _seconds_per_eval(_model(kind, n, "clt"), args.repeats)
            print(f"| {kind} | {n} | {exact * 1e6:.0f} | {clt * 1e6:.0f} | {exact / clt:.1f}× |")


if __name__ == "__main__":
    main()
