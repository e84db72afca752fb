"""Where the CLT for s fails: KS distance between the CLT law of y and its exact law.

For a Binomial count s ~ Binomial(N, θ) released as y = s + Laplace(b), the exact law of y is
Σ_s Binomial(s) · Laplace(y - s); the CLT law replaces Binomial(s) by N(Nθ, Nθ(1-θ)) truncated
to [0, N] (what ``likelihood="clt"`` assumes). This script tabulates sup_y |F_clt - F_exact|
over the smallest expected count m = N · min(θ, 1 - θ) and the noise-to-spread ratio
r = b / sd(s), the two numbers :func:`pymc_dp.likelihoods.choice.clt_trust` reads. Run:

    python benchmarks/clt_accuracy.py [--total 20000]

With ``--windows`` it measures window sums instead, with
:func:`pymc_dp.likelihoods.window_trust.clt_ks`: for each family, window, θ, n and r = β/sd(ŝ), the
exact law of ŝ (the n-fold convolution of one record's windowed statistic, on a lattice of 64 cells
across the window; the integers for counts) and the CLT normal of the same mean and variance,
truncated to the range of ŝ as ``likelihood="clt"`` does, both convolved with the Laplace noise.
Beside each distance it prints the Edgeworth expansion's prediction (skewness and kurtosis of ŝ,
smoothed by the noise, plus Esseen's lattice term for counts), which explains most of it:

    python benchmarks/clt_accuracy.py --windows
"""

from __future__ import annotations

import argparse
import functools
import math

import numpy as np
from scipy import signal, stats

from pymc_dp.families import Exponential, Gamma, Normal, NormalKnownSigma, Poisson
from pymc_dp.likelihoods.window_trust import WINDOW_KS_LEVEL, clt_ks, window_sum_law

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


WINDOW_CASES = (
    # (label, family, bounds, θ): windows that hold most records, few, or cut the bulk.
    ("Exponential λb = 0.5", Exponential(), (0.0, 1.0), 0.5),
    ("Exponential λb = 2", Exponential(), (0.0, 1.0), 2.0),
    ("Exponential λb = 6", Exponential(), (0.0, 1.0), 6.0),
    ("Exponential, window [0.2, 1.5] at λ = 0.3", Exponential(), (0.2, 1.5), 0.3),
    ("Gamma(0.5) λb = 2", Gamma(alpha=0.5), (0.0, 1.0), 2.0),
    ("Gamma(5) λb = 8", Gamma(alpha=5.0), (0.0, 1.0), 8.0),
    ("Normal σ = 1, window [-2, 2] at μ = 0", NormalKnownSigma(sigma=1.0), (-2.0, 2.0), 0.0),
    ("Normal σ = 1, window [-2, 2] at μ = 2", NormalKnownSigma(sigma=1.0), (-2.0, 2.0), 2.0),
    ("Normal σ = 1, window [1, 4] at μ = 0", NormalKnownSigma(sigma=1.0), (1.0, 4.0), 0.0),
    ("Poisson λ = 4, window [0, 10]", Poisson(), (0.0, 10.0), 4.0),
    ("Poisson λ = 0.5, window [0, 10]", Poisson(), (0.0, 10.0), 0.5),
    # (Σz, Σz²): the distance is the larger of the two components'; Edgeworth is of Σz only.
    ("Normal (μ, σ²) = (0, 1), window [-2, 2]", Normal(), (-2.0, 2.0), np.array([0.0, 1.0])),
    ("Normal (μ, σ²) = (0, 1), window [1, 4]", Normal(), (1.0, 4.0), np.array([0.0, 1.0])),
)
WINDOW_N = (10, 30, 100, 300)
WINDOW_RATIOS = (0.0, 0.3, 1.0, 3.0)


_X = np.linspace(-14.0, 14.0, 2801)


@functools.lru_cache(maxsize=512)
def _smoothed_basis(r: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The 2nd, 3rd and 5th derivatives of φ convolved with Laplace(r), on ``_X``."""
    x = _X
    phi = np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    basis = [(x**2 - 1) * phi, -(x**3 - 3 * x) * phi, -(x**5 - 10 * x**3 + 15 * x) * phi]
    dx = x[1] - x[0]
    if r < dx:
        return tuple(basis)
    grid = np.arange(-min(40.0 * r, 400.0), min(40.0 * r, 400.0) + dx / 2, dx)
    kernel = np.exp(-np.abs(grid) / r)
    return tuple(signal.fftconvolve(f, kernel / kernel.sum(), mode="same") for f in basis)


def _lattice_term(sd: float, beta: float) -> float:
    """Esseen's lattice term of a sum on the integers, damped by Laplace noise of scale β."""
    x = np.linspace(0.0, 1.0, 401)[:, None]
    k = np.arange(1, 200)[None, :]
    terms = np.sin(2 * np.pi * k * x) / (np.pi * k) / (1.0 + (2 * np.pi * k * beta) ** 2)
    return float(np.max(np.abs(terms.sum(axis=1)))) / (math.sqrt(2 * math.pi) * sd)


def edgeworth_ks(skew: float, kurt: float, r: float) -> float:
    """The largest Edgeworth correction to the CDF of y, smoothed by the noise.

    sup |-(γ/6)ψ₂ + (κ/24)ψ₃ + (γ²/72)ψ₅|, with ψ_k the k-th derivative of the normal density
    convolved with the noise (Laplace of scale r in sds of ŝ).
    """
    d2, d3, d5 = _smoothed_basis(float(f"{min(r, 1e3):.2g}"))
    return float(np.max(np.abs(-(skew / 6) * d2 + (kurt / 24) * d3 + (skew**2 / 72) * d5)))


def window_ks(family, bounds, theta: float, n: int, ratio: float) -> tuple[float, float]:
    """(exact KS, Edgeworth prediction) of the CLT law of y; β = ratio · sd(ŝ)."""
    points, q = window_sum_law(family, theta, bounds, 1)
    mean = float(q @ points)
    k2, k3 = (float(q @ (points - mean) ** j) for j in (2, 3))
    k4 = float(q @ (points - mean) ** 4) - 3 * k2**2
    sd = math.sqrt(n * k2)
    beta = ratio * sd
    skew, kurt = n * k3 / sd**3, n * k4 / sd**4
    predicted = edgeworth_ks(skew, kurt, ratio)
    if family.discrete:
        predicted += _lattice_term(sd, beta)
    return clt_ks(family, theta, n, bounds, beta), predicted


def windows_main() -> None:
    print("KS(CLT law of y, exact law) of window sums: computed / Edgeworth prediction")
    print("| case | n | " + " | ".join(f"r = {r:g}" for r in WINDOW_RATIOS) + " |")
    print("|---|---" + "|---" * len(WINDOW_RATIOS) + "|")
    pairs = []
    for label, family, bounds, theta in WINDOW_CASES:
        for n in WINDOW_N:
            row = [window_ks(family, bounds, theta, n, r) for r in WINDOW_RATIOS]
            if family.stat_size == 1:  # Edgeworth of Σz only: not a prediction for (Σz, Σz²)
                pairs += row
            cells = " | ".join(f"{e:.3f} / {p:.3f}" for e, p in row)
            print(f"| {label} | {n} | {cells} |", flush=True)
    exact, pred = np.array(pairs).T
    big = exact > 0.005
    ratio = exact[big] / pred[big]
    print(
        f"\n{len(pairs)} settings of one-number statistics; KS > {WINDOW_KS_LEVEL} in "
        f"{np.sum(exact > WINDOW_KS_LEVEL)}. "
        f"Where KS > 0.005, computed / Edgeworth: median {np.median(ratio):.2f}, "
        f"max {np.max(ratio):.2f}. Edgeworth ≤ {WINDOW_KS_LEVEL} but KS above it: "
        f"{np.sum((pred <= WINDOW_KS_LEVEL) & (exact > WINDOW_KS_LEVEL))}."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total", type=int, default=20000, help="N, trials behind s")
    parser.add_argument("--windows", action="store_true", help="window sums instead")
    args = parser.parse_args()
    if args.windows:
        windows_main()
        return
    print("KS(CLT law of y, exact law) for Binomial counts, N =", args.total)
    print("| m = N·min(θ, 1-θ) | " + " | ".join(f"r = {r:g}" for r in RATIOS) + " |")
    print("|---" * (len(RATIOS) + 1) + "|")
    for m in COUNTS:
        row = [ks_distance(args.total, m, r) for r in RATIOS]
        print(f"| {m} | " + " | ".join(f"{v:.3f}" for v in row) + " |")


if __name__ == "__main__":
    main()
