"""Benchmark: the grouped exact Categorical sum over the noise's window against the recursion Op.

On the release of ``benchmarks/grouped_speed.py`` (Categorical, K = 3, G = 50, 50–500 records per
group), the groups whose CLT :func:`pymc_dp.likelihoods.count_trust.counts_clt_trust` rejects at
ε (or, with ``--old-groups``, the 9 groups the old formula sent to the exact sum at ε = 1), one
logp + gradient of their exact likelihood, in one process: the sum over the noise's window
(:func:`pymc_dp.likelihoods.multinomial_window.window_logp`: a graph before 2026-12-02, the
compiled ``TableLogLikelihood`` since) and the recursion ``Op``
(:class:`pymc_dp.likelihoods.exact.GroupedMultinomialLogLikelihood`), at p = y / Σy. Run::

    python benchmarks/categorical_window_cost.py --epsilons 3 10
    python benchmarks/categorical_window_cost.py --epsilons 1 --old-groups
    python benchmarks/categorical_window_cost.py --groups 500 --epsilons 1 --mode NUMBA

``--groups``: the release's G (500: the 7 exact groups of ``grouped_speed``'s G = 500, ε = 1);
``--mode``: PyTensor's compile mode (``FAST_RUN``, the C backend PyMC's NUTS uses; ``NUMBA``,
nutpie's).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytensor
import pytensor.tensor as pt

sys.path.insert(0, str(Path(__file__).parent))
import grouped_speed as gs

from pymc_dp.kernels.exact_counts import NoiseLaw
from pymc_dp.likelihoods.count_trust import counts_clt_trust
from pymc_dp.likelihoods.exact import GroupedMultinomialLogLikelihood
from pymc_dp.likelihoods.multinomial_window import window_logp, window_table

OLD_GROUPS = [2, 4, 6, 16, 17, 23, 32, 38, 49]


def per_call(f, p: np.ndarray) -> float:
    f(p)
    start, calls = time.perf_counter(), 0
    while time.perf_counter() - start < 1.0:
        f(p)
        calls += 1
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilons", type=float, nargs="+", default=[3.0, 10.0])
    parser.add_argument("--old-groups", action="store_true")
    parser.add_argument("--groups", type=int, default=50)
    parser.add_argument("--mode", default="FAST_RUN", choices=["FAST_RUN", "NUMBA"])
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    print("| ε | exact groups | table | window µs | Op µs |")
    print("|---|---|---|---|---|")
    for eps in args.epsilons:
        rs = gs.make_release(gs.Setting("categorical", args.groups, eps))
        b = rs.first.scale
        rows = zip(rs.n, rs.value, strict=True)
        idx = [g for g, (n, y) in enumerate(rows) if not counts_clt_trust(int(n), y, b)[0]]
        if args.old_groups:
            idx = OLD_GROUPS
        if not idx:
            print(f"| {eps:g} | 0 | | | |")
            continue
        y, n = np.asarray(rs.value)[idx], np.asarray(rs.n)[idx]
        noise = NoiseLaw("laplace", b)
        p = np.clip(y, 0.5, None)
        p /= p.sum(axis=1, keepdims=True)
        theta = pt.dmatrix("theta")
        table = window_table(y, n, noise)
        sides = {"window": window_logp(y, theta, table, noise) if table else None}
        sides["op"] = GroupedMultinomialLogLikelihood(n, noise)(pt.as_tensor(y), theta)
        cost = {}
        for name, logp in sides.items():
            if logp is None:
                cost[name] = float("nan")
                continue
            mode = "FAST_RUN" if name == "op" else args.mode  # the Op has no Numba build
            f = pytensor.function(
                [theta], [logp.sum(), pytensor.grad(logp.sum(), theta)], mode=mode
            )
            cost[name] = per_call(f, p)
        shape = "×".join(map(str, table[0].shape[:2])) if table else "over budget"
        print(f"| {eps:g} | {len(idx)} | {shape} | {cost['window']:.0f} | {cost['op']:.0f} |")


if __name__ == "__main__":
    main()
