"""The empirical privacy audit's table (docs/privacy.md): claimed ε against the bound found.

Runs the audit of ``tests/test_privacy_audit.py`` for every mechanism and family with the slow
suite's draw counts (10⁶ per data set for the float sampler, 10⁵ for OpenDP's), and the
vetted private window's choice, and prints a Markdown table. Several minutes.

    python benchmarks/privacy_audit.py [--float-draws 1000000] [--vetted-draws 100000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.test_privacy_audit import CASES, audit, noisy_min_audit

MECHANISMS = ("laplace-float", "discrete-laplace", "discrete-gaussian")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--float-draws", type=int, default=1_000_000)
    parser.add_argument("--vetted-draws", type=int, default=100_000)
    args = parser.parse_args()
    start = time.perf_counter()
    print("| mechanism | family | N per data set | claimed ε | lower bound found | with Δ halved |")
    print("|---|---|---|---|---|---|")
    for mechanism in MECHANISMS:
        draws = args.float_draws if mechanism == "laplace-float" else args.vetted_draws
        for family, case in CASES.items():
            claimed, found = audit(mechanism, case, draws, seed=3)
            _, broken = audit(mechanism, case, draws, factor=0.5, seed=4)
            print(
                f"| {mechanism} | {family} | {draws} | {claimed:.3f} | {found:.3f} | "
                f"{broken:.3f} |",
                flush=True,
            )
    found = noisy_min_audit(args.vetted_draws)
    broken = noisy_min_audit(args.vetted_draws, factor=0.5)
    print(
        f"| OpenDP noisy-min (private window) | any | {args.vetted_draws} | 1.000 | "
        f"{found:.3f} | {broken:.3f} |"
    )
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
