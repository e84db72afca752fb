"""Benchmark: DP Gibbs (pymc_dp step methods) against NUTS on the same PyMC model.

For a Binomial(trials=5) release of n records at each ε, the script samples the model built by
``NoisySuffStat`` twice in one process: once with the step methods ``pm.sample()`` assigns (DP
Gibbs), once with ``pm.NUTS`` over all three free variables (p, y_s, y_sigma2). It prints
iterations per second, ArviZ bulk ESS of p per second and the Gibbs/NUTS ratios, plus the NUTS
divergences.

Each sampler's step objects are built once per model and warmed up with a short ``pm.sample``
call, which ``pm.sample`` allows because it resets their tuning; the timed runs then reuse them.
The warm-up matters on PyTensor 3, whose default Numba backend compiles each function on its
first call, i.e. inside the sampling loop. Time is PyMC's own ``sampling_time`` (tuning +
draws); where a PyMC version does not record it, the wall time of ``pm.sample`` is used and
marked ``*``.

Usage::

    python benchmarks/gibbs_vs_nuts.py                     # ε ∈ {0.01, 0.1}, n = 1000
    python benchmarks/gibbs_vs_nuts.py --epsilon 0.05 1 --n 5000 --repeats 5
    python benchmarks/gibbs_vs_nuts.py --quick             # seconds; smoke test only
"""

from __future__ import annotations

import argparse
import logging
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import arviz as az
import numpy as np
import pymc as pm

import pymc_dp as pmdp
from pymc_dp._compat import posterior_dataset

TRIALS = 5
PRIOR = (3.0, 5.0)
QUICK_DRAWS, QUICK_TUNE = 100, 50
LOW_ESS = 100  # ArviZ's threshold for trusting R-hat and ESS estimates
WARMUP = 10  # draws and tuning steps of the untimed warm-up call


@dataclass(frozen=True)
class Run:
    """Timing and efficiency of one ``pm.sample`` call."""

    seconds: float
    iterations: int
    ess_bulk: float
    mean_p: float
    divergences: int
    wall_clock: bool  # True when sampling_time was missing and compile time is included

    @property
    def its_per_s(self) -> float:
        return self.iterations / self.seconds

    @property
    def ess_per_s(self) -> float:
        return self.ess_bulk / self.seconds


def build_model(rel: pmdp.Release) -> pm.Model:
    with pm.Model() as model:
        p = pm.Beta("p", *PRIOR)
        # The paper's Algorithm 1 (the default collapsed sampler: benchmarks/collapsed_ess.py).
        pmdp.NoisySuffStat("y", pm.Binomial.dist(n=TRIALS, p=p), release=rel, method="augmented")
    return model


def gibbs_steps(model: pm.Model) -> list:
    """The DP Gibbs steps, as ``pm.sample()`` would assign them."""
    return [
        pmdp.ConjugateStep([model["p"]], model=model),
        pmdp.NormProductStep([model["y_s"]], model=model),
        pmdp.NoiseVarianceStep([model["y_sigma2"]], model=model),
    ]


def sample(model: pm.Model, step: Any, *, draws: int, tune: int, seed: int) -> Run:
    with model:
        start = time.perf_counter()
        idata = pm.sample(
            draws=draws,
            tune=tune,
            chains=1,
            cores=1,
            step=step,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
        )
        wall = time.perf_counter() - start
    stats = idata.sample_stats
    seconds = stats.attrs.get("sampling_time")
    posterior = posterior_dataset(idata)
    ess = float(az.ess(posterior, var_names=["p"], method="bulk")["p"])
    divergences = int(stats["diverging"].values.sum()) if "diverging" in stats else 0
    return Run(
        seconds=float(seconds) if seconds else wall,
        iterations=draws + tune,
        ess_bulk=ess,
        mean_p=float(posterior["p"].mean()),
        divergences=divergences,
        wall_clock=not seconds,
    )


@dataclass(frozen=True)
class Summary:
    """Medians over the repeats of one sampler (single-chain ESS and timings are noisy)."""

    seconds: float
    its_per_s: float
    ess_bulk: float
    ess_per_s: float
    mean_p: float
    divergences: int  # total over the repeats
    wall_clock: bool

    @classmethod
    def of(cls, runs: Sequence[Run]) -> Summary:
        def median(field: str) -> float:
            return statistics.median(getattr(r, field) for r in runs)

        return cls(
            seconds=median("seconds"),
            its_per_s=median("its_per_s"),
            ess_bulk=median("ess_bulk"),
            ess_per_s=median("ess_per_s"),
            mean_p=median("mean_p"),
            divergences=sum(r.divergences for r in runs),
            wall_clock=any(r.wall_clock for r in runs),
        )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon", type=float, nargs="+", default=[0.01, 0.1])
    parser.add_argument("--n", type=int, default=1000, help="number of records")
    parser.add_argument("--p", type=float, default=0.3, help="true Binomial p of the data")
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--tune", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3, help="runs per sampler (median)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="tiny draws, for the smoke test")
    args = parser.parse_args(argv)
    if args.quick:
        args.draws, args.tune, args.repeats = QUICK_DRAWS, QUICK_TUNE, 1
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.getLogger("pymc").setLevel(logging.ERROR)  # keep the table readable
    print(
        f"Gibbs vs NUTS on NoisySuffStat(Binomial(trials={TRIALS})), p ~ Beta{PRIOR}; "
        f"n = {args.n}, true p = {args.p}\n"
        f"1 chain, tune = {args.tune}, draws = {args.draws}, repeats = {args.repeats} "
        f"(median); time = tuning + draws, after an untimed warm-up\n"
        f"Python {platform.python_version()}, PyMC {pm.__version__}, ArviZ {az.__version__}\n"
    )
    header = (
        f"{'eps':>6}  {'sampler':<11} {'time[s]':>8} {'it/s':>9} {'ESS_bulk(p)':>11} "
        f"{'ESS/s':>9} {'mean p':>7} {'diverg.':>7}"
    )
    print(header)
    print("-" * len(header))
    data_rng = np.random.default_rng(args.seed)
    x = data_rng.binomial(TRIALS, args.p, size=args.n)
    for eps in args.epsilon:
        rel = pmdp.release(x, pm.Binomial, epsilon=eps, trials=TRIALS, rng=data_rng)
        model = build_model(rel)
        with model:
            steps = {
                "Gibbs": gibbs_steps(model),
                "NUTS": pm.NUTS([model["p"], model["y_s"], model["y_sigma2"]]),
            }
        results = {}
        for label, step in steps.items():
            sample(model, step, draws=WARMUP, tune=WARMUP, seed=args.seed)
            runs = [
                sample(model, step, draws=args.draws, tune=args.tune, seed=args.seed + r)
                for r in range(args.repeats)
            ]
            run = results[label] = Summary.of(runs)
            time_mark = "*" if run.wall_clock else " "
            ess_mark = "!" if run.ess_bulk < LOW_ESS else " "
            div = str(run.divergences) if label == "NUTS" else "-"
            print(
                f"{eps:>6g}  {label:<11} {run.seconds:>7.2f}{time_mark} {run.its_per_s:>9.0f} "
                f"{run.ess_bulk:>10.0f}{ess_mark} {run.ess_per_s:>9.1f} {run.mean_p:>7.4f} "
                f"{div:>7}"
            )
        gibbs, nuts_run = results["Gibbs"], results["NUTS"]
        print(
            f"{eps:>6g}  {'Gibbs/NUTS':<11} {'ratio':>8} "
            f"{gibbs.its_per_s / nuts_run.its_per_s:>9.2f} "
            f"{gibbs.ess_bulk / nuts_run.ess_bulk:>11.2f} "
            f"{gibbs.ess_per_s / nuts_run.ess_per_s:>9.2f}"
        )
        print()
        sys.stdout.flush()
    print(
        "it/s and ESS/s: per run, median over repeats; ratio = Gibbs / NUTS of those medians.\n"
        f"! ESS below {LOW_ESS}: the chain has not mixed, so ESS, ESS/s and mean p are unreliable "
        "(run longer, e.g. --draws 40000).\n"
        "diverg.: NUTS divergent transitions after tuning, summed over repeats."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
