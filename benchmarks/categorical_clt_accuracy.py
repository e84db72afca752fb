"""Where the CLT of K released counts changes the answer: its KS distance and one posterior.

For K = 3 released Categorical counts, y = s + Laplace(2/ε) with s ~ Multinomial(n, p), this
script tabulates, over n, ε and the smallest category probability:

* ``KS y``: :func:`pymc_dp.likelihoods.count_trust.counts_clt_ks`, the largest KS distance over
  the counts between the CLT law of y_j (normal counts plus noise, what ``likelihood="clt"``
  models) and its exact law (binomial plus noise), at p = y / Σy;
* ``old rule``: whether :func:`pymc_dp.likelihoods.choice.clt_trust`'s formula
  (m·(1 + r)² ≥ 50, r ≥ 0.1) trusts the CLT there;
* the posterior of p under a flat Dirichlet prior on a grid of the simplex (step ``--step``),
  with the exact likelihood (:func:`pymc_dp.kernels.exact_counts.multinomial_log_likelihood`)
  and with the CLT likelihood (the latent normal counts integrated numerically on a grid of
  half-integers): ``shift/sd``, the difference of the two posterior means of the smallest p_j in
  exact posterior sds, ``sd ratio`` the CLT posterior's sd over the exact one's, and ``KS post``
  the KS distance between the two marginal posteriors of that p_j.

The release is the expected counts y = n p (no noise drawn): the typical release. Run::

    python benchmarks/categorical_clt_accuracy.py [--step 0.005]
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy import special

from pymc_dp.families import Categorical
from pymc_dp.kernels.exact_counts import NoiseLaw, multinomial_log_likelihood
from pymc_dp.likelihoods.choice import clt_trust
from pymc_dp.likelihoods.count_trust import counts_clt_ks

CASES = [
    (n, eps, p_min)
    for n in (10, 20, 50, 100, 200)
    for eps in (0.3, 1.0, 3.0)
    for p_min in (0.1, 0.2)
]


def clt_loglik(y: np.ndarray, p: np.ndarray, n: int, b: float) -> np.ndarray:
    """log ∫ N(s; n p, n(diag p − p pᵀ)) Π_j Lap(y_j − s_j; b) ds over the plane Σs = n."""
    out = np.empty(len(p))
    for i, (p1, p2) in enumerate(p[:, :2]):
        p3 = 1.0 - p1 - p2
        sd1 = math.sqrt(n * p1 * (1 - p1))
        sd2 = math.sqrt(n * p2 * p3 / (1 - p1))
        s1 = np.arange(n * p1 - 8 * sd1, n * p1 + 8 * sd1, 0.5)[:, None]
        m2 = n * p2 - p2 / (1 - p1) * (s1 - n * p1)
        s2 = np.arange(-8 * sd2, 8 * sd2, 0.5)[None, :] + m2
        logn = (
            -0.5 * ((s1 - n * p1) / sd1) ** 2
            - 0.5 * ((s2 - m2) / sd2) ** 2
            - math.log(2 * math.pi * sd1 * sd2)
        )
        noise = -(np.abs(y[0] - s1) + np.abs(y[1] - s2) + np.abs(y[2] - (n - s1 - s2))) / b
        out[i] = special.logsumexp(logn + noise) + 2 * math.log(0.5)
    return out


def posterior_check(n: int, eps: float, p_min: float, step: float) -> tuple[float, float, float]:
    p_true = np.array([p_min, 0.5, 0.5 - p_min])
    y = n * p_true
    b = 2.0 / eps
    grid = np.arange(step / 2, 1.0, step)
    p1, p2 = np.meshgrid(grid, grid, indexing="ij")
    keep = p1 + p2 < 1.0 - step / 2
    p = np.stack([p1[keep], p2[keep], 1.0 - p1[keep] - p2[keep]], axis=-1)
    noise = NoiseLaw("laplace", b)
    exact = np.array([multinomial_log_likelihood(y, q, n, noise) for q in p])
    clt = clt_loglik(y, p, n, b)
    out = []
    for ll in (exact, clt):
        w = np.exp(ll - ll.max())
        w /= w.sum()
        order = np.argsort(p[:, 0])
        out.append((p[:, 0], w, order))
    (x, we, order), (_, wc, _) = out
    me, mc = np.sum(we * x), np.sum(wc * x)
    sde = math.sqrt(np.sum(we * (x - me) ** 2))
    sdc = math.sqrt(np.sum(wc * (x - mc) ** 2))
    ks = float(np.max(np.abs(np.cumsum(we[order]) - np.cumsum(wc[order]))))
    return (mc - me) / sde, sdc / sde, ks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--step", type=float, default=0.005)
    args = parser.parse_args()
    print("| n | ε | p_min | KS y | old rule | shift/sd | sd ratio | KS post |")
    print("|---|---|---|---|---|---|---|---|")
    for n, eps, p_min in CASES:
        y = n * np.array([p_min, 0.5, 0.5 - p_min])
        b = 2.0 / eps
        ks = counts_clt_ks(n, y, b)
        old = clt_trust(Categorical(categories=3), n, y, b)[0]
        shift, ratio, ks_post = posterior_check(n, eps, p_min, args.step)
        print(
            f"| {n} | {eps:g} | {p_min:g} | {ks:.4f} | {'trusted' if old else 'untrusted'} | "
            f"{shift:+.3f} | {ratio:.3f} | {ks_post:.3f} |"
        )


if __name__ == "__main__":
    main()
