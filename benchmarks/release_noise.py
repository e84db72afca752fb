"""Release throughput: the vetted OpenDP samplers against the floating-point one.

Times, in one process, (a) whole ``pymc_dp.release`` calls and (b) raw noise draws, for the
vetted mechanisms and ``laplace-float``, and prints the ratios; then (c) the distance between
discrete Laplace noise and the continuous Laplace law the analyst's likelihood assumes
(docs/privacy.md, "The analyst's continuous approximation"), computed exactly. Takes well under
a minute.

    python benchmarks/release_noise.py
"""

from __future__ import annotations

import time

import numpy as np
import pymc as pm

import pymc_dp as pmdp
from pymc_dp.mechanisms import (
    discrete_gaussian_mechanism,
    discrete_laplace_mechanism,
    laplace_mechanism,
)


def per_call(fn, repeats: int) -> float:
    fn()  # warm up (imports, OpenDP feature flags)
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats


def main() -> None:
    rng = np.random.default_rng(0)
    bern = rng.integers(0, 2, size=10_000)
    normal = rng.normal(1.0, 2.0, size=100_000)
    cases = {
        "bernoulli n=1e4": lambda mech, seed: pmdp.release(
            bern, pm.Bernoulli, epsilon=1.0, mechanism=mech, rng=seed
        ),
        "normal (Σx, Σx²) n=1e5": lambda mech, seed: pmdp.release(
            normal, pm.Normal, epsilon=1.0, bounds=(-5.0, 7.0), mechanism=mech, rng=seed
        ),
    }
    print("whole release calls (ms per call)")
    print(f"{'case':<26}{'laplace-float':>15}{'discrete-laplace':>18}{'ratio':>8}")
    for name, call in cases.items():
        flt = per_call(lambda call=call: call("laplace-float", 1), 20)
        vet = per_call(lambda call=call: call("discrete-laplace", None), 20)
        print(f"{name:<26}{flt * 1e3:>15.2f}{vet * 1e3:>18.2f}{vet / flt:>8.1f}")
    print("\nraw noise draws (microseconds per sample, 20 000 samples per call)")
    zeros = [0] * 20_000
    gen = np.random.default_rng(1)
    flt = per_call(
        lambda: laplace_mechanism(np.zeros(20_000), sensitivity=1.0, epsilon=1.0, rng=gen), 20
    )
    lap = per_call(lambda: discrete_laplace_mechanism(zeros, sensitivity=1024.0, epsilon=1.0), 3)
    gau = per_call(lambda: discrete_gaussian_mechanism(zeros, sensitivity=1024.0, rho=0.5), 3)
    for label, t in (
        ("laplace-float (numpy)", flt),
        ("discrete-laplace (OpenDP, scale 1024)", lap),
        ("discrete-gaussian (OpenDP, sigma 1024)", gau),
    ):
        print(f"{label:<42}{t / 20_000 * 1e6:>10.3f}   x{t / flt:>8.0f}")


def approximation_table() -> None:
    """KS and TV distances of discrete Laplace (scale t quanta) from continuous Laplace at t."""
    from scipy import stats

    print("\ndiscrete Laplace against continuous Laplace at scale t (quanta)")
    print(f"{'t':>6}{'KS':>10}{'TV (rounded)':>14}{'variance ratio':>16}")
    for t in (0.5, 1, 2, 4, 16, 64, 256, 1024):
        k = np.arange(-int(60 * t) - 60, int(60 * t) + 61)
        pmf = np.tanh(1.0 / (2 * t)) * np.exp(-np.abs(k) / t)
        cdf = np.cumsum(pmf)
        law = stats.laplace(scale=t)
        # The step CDF against the continuous one, at each jump from both sides.
        ks = max(np.max(np.abs(cdf - law.cdf(k))), np.max(np.abs(cdf - pmf - law.cdf(k))))
        rounded = law.cdf(k + 0.5) - law.cdf(k - 0.5)
        tv = 0.5 * np.sum(np.abs(pmf - rounded))
        r = np.exp(-1.0 / t)
        ratio = (2 * r / (1 - r) ** 2) / (2 * t**2)
        print(f"{t:>6g}{ks:>10.1e}{tv:>14.1e}{ratio:>16.5f}")


if __name__ == "__main__":
    main()
    approximation_table()
