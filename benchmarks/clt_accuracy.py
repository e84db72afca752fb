"""Where the CLT for s fails: KS distance between the CLT law of y and its exact law.

For a Binomial count s ~ Binomial(N, θ) released as y = s + Laplace(b), the exact law of y is
Σ_s Binomial(s) · Laplace(y - s); the CLT law replaces Binomial(s) by N(Nθ, Nθ(1-θ)) truncated
to [0, N] (what ``likelihood="clt"`` assumes). This script tabulates sup_y |F_clt - F_exact|
over the smallest expected count m = N · min(θ, 1 - θ) and the noise-to-spread ratio
r = b / sd(s), the two numbers :func:`pymc_dp.likelihood.clt_trust` reads. Run:

    python benchmarks/clt_accuracy.py [--total 20000]
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats

COUNTS = (1, 3, 10, 30, 100, 300, 1000)
RATIOS = (0.0, 0.1, 0.3, 1.0, 3.0, 10.0)


def laplace_cdf(d: np.ndarray, b: float) -> np.ndarray:
    if b == 0:
        return (d >= 0).astype(float)
    return stats.laplace.cdf(d, scale=b)


def ks_distance(total: int, m: float, ratio: float) -> float:
    """sup_y |F_clt(y) - F_exact(y)| for θ = m / total and b = ratio · sd(s)."""
    theta = m / total
    mean, sd = total * theta, np.sqrt(total * theta * (1 - theta))
    b = ratio * sd
    lo, hi = max(0.0, mean - 14 * sd - 40 * b), min(total, mean + 14 * sd + 40 * b)
    s_int = np.arange(np.floor(lo), np.ceil(hi) + 1)
    pmf = stats.binom.pmf(s_int, total, theta)
    s_cont = np.linspace(lo, hi, 6001)
    dens = stats.norm.pdf(s_cont, mean, sd)
    dens /= np.trapezoid(dens, s_cont) if hasattr(np, "trapezoid") else np.trapz(dens, s_cont)
    w = dens * np.gradient(s_cont)
    ys = np.linspace(lo - 10 * b - 1, hi + 10 * b + 1, 3001)
    # Both sides of each lattice point, where the exact CDF jumps when b = 0.
    ys = np.unique(np.concatenate([ys, s_int - 1e-9, s_int]))
    f_exact = np.array([np.sum(pmf * laplace_cdf(y - s_int, b)) for y in ys])
    f_clt = np.array([np.sum(w * laplace_cdf(y - s_cont, b)) for y in ys])
    return float(np.max(np.abs(f_exact - f_clt)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total", type=int, default=20000, help="N, trials behind s")
    args = parser.parse_args()
    print("KS(CLT law of y, exact law) for Binomial counts, N =", args.total)
    print("| m = N·min(θ, 1-θ) | " + " | ".join(f"r = {r:g}" for r in RATIOS) + " |")
    print("|---" * (len(RATIOS) + 1) + "|")
    for m in COUNTS:
        row = [ks_distance(args.total, m, r) for r in RATIOS]
        print(f"| {m} | " + " | ".join(f"{v:.3f}" for v in row) + " |")


if __name__ == "__main__":
    main()
