"""Smoke check of the Bethe posterior at 15 ternary columns: coverage of 2-way cell probabilities.

Each trial draws θ from its prior (1-way terms N(0, s₁²), 2-way terms N(0, s₂²)), n records of
K columns with all 2-way marginals exactly from the full domain, and releases the tables at ε
(seeded float Laplace). The posterior is the Laplace approximation with Bethe moments (the
fast path of ``marginals_laplace_posterior``; Bethe forced, as ``feature_method`` picks it above
10⁵ cells for a complete graph) under the prior the truth was drawn from. For a few 2-way
margins, each posterior draw's cell probabilities are its Bethe pair beliefs (the model's
own law of those cells); the truth is the exact pair marginal of the true θ, summed over the
full domain. Printed per trial and pooled: the share of the margins' cells whose central 90%
interval covers the truth, and on how many draws loopy BP failed.

A smoke check, not a calibration test: the cells of one release are correlated, so the pooled
coverage over T trials has a wider spread than the binomial band of T × cells independent
intervals printed with it; only a coverage far outside it says something. The band is around
the coverage a calibrated posterior gives an interval between the 5% and 95% quantiles of
``draws`` draws (0.882 at 100 draws, not 0.9: the quantiles of a few draws scatter), printed
first.

Run: ``PYTHONPATH=. python benchmarks/marginals_bethe_cells.py [trials] [k] [s1] [s2] [n]
[epsilon] [draws] [method]``, e.g. ``20 15 0.3 0.3 10000 1 100``. ``method`` ``enumerate``
(at most 10⁵ cells) or ``junction`` (here: at most 10⁶) fits with exact moments and reads the
draws' cells off the exact joint law: the control, where the Laplace approximation alone is at
work.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import itertools
import sys
import time

import numpy as np
from scipy import stats

import pymc_dp as pmdp
from pymc_dp.kernels.loglinear import LogLinearDomain
from pymc_dp.kernels.loglinear_bethe import BetheDidNotConverge, BetheMoments
from pymc_dp.kernels.loglinear_laplace import marginals_laplace
from pymc_dp.kernels.loglinear_moments import _logits
from pymc_dp.likelihoods.marginals import noise_variance

LEVELS = 3


def margins(k):
    """The 2-way margins whose cells are checked (pairs of column indices; 15 columns: (0, 1),
    (5, 10), (13, 14))."""
    return ((0, 1), (k // 3, 2 * k // 3), (k - 2, k - 1))


def _joint(dom, theta):
    """The exact joint law p(x | θ), one axis per column, by a pass over the full domain."""
    logits = _logits(dom, theta)
    logits -= logits.max()
    prob = np.exp(logits, out=logits)
    prob /= prob.sum()
    return prob.reshape(dom.sizes)


def _margin(joint, pair):
    """The table of two columns of a full joint law (an array with one axis per column)."""
    return joint.sum(axis=tuple(i for i in range(joint.ndim) if i not in pair))


def nominal_coverage(draws, reps=200_000):
    """How often the 5%-95% quantile interval of ``draws`` normal draws covers one more draw."""
    rng = np.random.default_rng(0)
    hits = 0
    for _ in range(reps // 10_000):  # in blocks: 10⁴ × draws normals at a time
        lo, hi = np.quantile(rng.standard_normal((10_000, draws)), [0.05, 0.95], axis=1)
        truth = rng.standard_normal(10_000)
        hits += int(np.sum((lo <= truth) & (truth <= hi)))
    return hits / (reps // 10_000 * 10_000)


def trial(k, s1, s2, n, epsilon, draws, rng, method="bethe"):
    """One release: (cells covered, cells checked, draws on which BP failed)."""
    pairs = list(itertools.combinations(range(k), 2))
    dom = LogLinearDomain((LEVELS,) * k, tuple(pairs))
    sd = np.array([s2 if len(s) > 1 else s1 for s, _ in dom.basis_terms])
    theta = rng.normal(size=dom.n_params) * sd
    joint = _joint(dom, theta)
    cells = rng.choice(dom.n_cells, size=n, p=joint.reshape(-1))
    codes = np.stack(np.unravel_index(cells, dom.sizes), axis=1)
    truth = [_margin(joint, m) for m in margins(k)]
    del joint
    names = [f"c{i}" for i in range(k)]
    rel = pmdp.release_marginals(
        {c: codes[:, i] for i, c in enumerate(names)},
        columns=names,
        domains={c: list(range(LEVELS)) for c in names},
        marginals=[(names[a], names[b]) for a, b in pairs],
        epsilon=epsilon,
        rng=int(rng.integers(2**32)),
    )
    z = rel.y @ dom.projection
    fit = marginals_laplace(
        dom, z, n=n, noise_variance=noise_variance(rel), prior_sigma=sd, method=method
    )
    chol = np.linalg.cholesky(fit.cov)
    bethe = BetheMoments(dom)
    edge = {tuple(p): e for e, p in enumerate(bethe.pairs)}
    kept, failed = [], 0
    for _ in range(draws):
        point = fit.mode + chol @ rng.standard_normal(dom.n_params)
        if method != "bethe":
            kept.append(np.stack([_margin(_joint(dom, point), m) for m in margins(k)]))
            continue
        try:
            _, pair = bethe.beliefs(point)
        except BetheDidNotConverge:
            failed += 1
            continue
        kept.append(np.stack([pair[edge[m]] for m in margins(k)]))
    kept = np.asarray(kept)
    lo, hi = np.quantile(kept, [0.05, 0.95], axis=0)
    true = np.stack(truth)
    covered = int(np.sum((lo <= true) & (true <= hi)))
    return covered, true.size, failed


def main(trials=20, k=15, s1=0.3, s2=0.3, n=10_000, epsilon=1.0, draws=100, method="bethe"):
    rng = np.random.default_rng(2026)
    print(
        f"{trials} releases, {k} x {LEVELS} columns, all 2-way tables, θ 1-way N(0, {s1}²), "
        f"2-way N(0, {s2}²), n = {n}, ε = {epsilon}; Laplace posterior with {method} moments, "
        f"{draws} draws; margins {margins(k)}"
    )
    nominal = nominal_coverage(draws)
    print(f"a calibrated posterior's {draws}-draw 90% intervals cover {nominal:.3f}")
    covered = checked = failed = 0
    for t in range(trials):
        start = time.perf_counter()
        c, m, f = trial(k, s1, s2, n, epsilon, draws, rng, method)
        covered, checked, failed = covered + c, checked + m, failed + f
        lo, hi = stats.binom.ppf([0.025, 0.975], checked, nominal) / checked
        print(
            f"trial {t + 1}: {c}/{m} cells covered, BP failed on {f} draws "
            f"({time.perf_counter() - start:.0f} s); pooled {covered}/{checked} = "
            f"{covered / checked:.3f} (95% band of independent intervals [{lo:.3f}, {hi:.3f}])",
            flush=True,
        )


if __name__ == "__main__":
    args = sys.argv[1:]
    main(
        int(args[0]) if args else 20,
        int(args[1]) if len(args) > 1 else 15,
        float(args[2]) if len(args) > 2 else 0.3,
        float(args[3]) if len(args) > 3 else 0.3,
        int(args[4]) if len(args) > 4 else 10_000,
        float(args[5]) if len(args) > 5 else 1.0,
        int(args[6]) if len(args) > 6 else 100,
        args[7] if len(args) > 7 else "bethe",
    )
