"""Calibration of the cell probabilities on an enumerable domain, over many releases.

The 12-column smoke check (``marginals_cells_sources.py``) found 0.843 of cells covered against
0.882 over 20 releases. Here the same study runs where the exact model posterior is affordable:
K columns of ``levels`` levels (at most a few thousand cells), all 2-way tables, every term of
the data-generating θ drawn from N(0, s²) and fitted under that same prior (so a calibrated
posterior covers at its nominal rate, averaged over releases), n records drawn exactly, the
tables released at ε (seeded float Laplace). Per release, the 9·M cells of all M 2-way margins
(the exact pair marginals of the true θ) are checked against the central 90% intervals of:

* ``prior``: θ drawn from the prior (a check of the study itself: nominal by construction);
* ``laplace``: ``marginals_laplace`` (the library's Laplace normal, exact moments);
* ``is``: the collapsed ``"clt"`` posterior itself (the model's own posterior, exact moments),
  by importance sampling: 2000 draws of the Laplace normal, reweighted,
  weighted quantiles (its effective sample size and log-weight sd are printed);
* ``naive``: the Laplace normal fitted to the noisy tables as if they were exact (v ≈ 0);
* ``exact``: the Laplace normal fitted to the exact (non-noisy) tables.

Every posterior is summarised by ``draws`` draws; each draw's cells are the exact marginals of
its joint law. Per release the share covered and the mean z² of the truth (1 if calibrated);
pooled, the mean share with its standard error from the spread *between releases* (the cells
of one release are correlated, the releases are independent) and the t statistic against the
nominal coverage of a ``draws``-draw interval.

Run: ``PYTHONPATH=. python benchmarks/marginals_cells_calibration.py [trials] [k] [levels] [n]
[epsilon] [s] [draws]``, e.g. ``100 6 3 10000 0.227 0.3 400``; ``IS_DRAWS=0`` in front skips the
``is`` row (e.g. ``IS_DRAWS=0 ... 60 8 3 10000 0.4242 0.3 400``).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import itertools
import sys
import time

import numpy as np
from marginals_bethe_cells import nominal_coverage
from scipy import stats

import pymc_dp as pmdp
from pymc_dp.kernels.loglinear import LogLinearDomain
from pymc_dp.kernels.loglinear_laplace import marginals_laplace
from pymc_dp.likelihoods.marginals import noise_variance

METHODS = ("prior", "laplace", "is", "naive", "exact")
IS_DRAWS, IS_SCALE = int(os.environ.get("IS_DRAWS", 2000)), 1.0
"""Importance draws per release (``IS_DRAWS=0`` in the environment skips the ``is`` row, whose
O(C p²) a draw is what costs above 6 ternary columns)."""


def weighted_interval(values, weights, level=0.9):
    """Central interval of weighted draws, per column: values (D, m), weights (D,) summing to 1."""
    order = np.argsort(values, axis=0)
    sorted_v = np.take_along_axis(values, order, axis=0)
    cum = np.cumsum(weights[order], axis=0)
    tail = (1 - level) / 2
    lo_i = np.argmax(cum >= tail, axis=0)
    hi_i = np.argmax(cum >= 1 - tail, axis=0)
    cols = np.arange(values.shape[1])
    return sorted_v[lo_i, cols], sorted_v[hi_i, cols]


def clt_logp(points, dom, z, n, v):
    """The collapsed "clt" log-likelihood at each point (as ``marginals_clt_logp``, one BLAS
    product per point: the batched version forms a (D, C, p) array)."""
    g = dom.projected_features
    out = np.empty(len(points))
    for i, theta in enumerate(points):
        logits = dom.basis @ theta
        prob = np.exp(logits - logits.max())
        prob /= prob.sum()
        mean = prob @ g
        root = g * np.sqrt(prob)[:, None]
        cov = n * (root.T @ root - np.outer(mean, mean)) + v * np.eye(len(mean))
        chol = np.linalg.cholesky(cov)
        w = np.linalg.solve(chol, z - n * mean)
        out[i] = -0.5 * (w @ w) - np.sum(np.log(np.diag(chol)))
    return out


def summary(cells, truth, weights=None):
    """(share of cells covered, mean z² of the truth) for draws ``cells`` (D, m)."""
    if weights is None:
        weights = np.full(len(cells), 1 / len(cells))
    lo, hi = weighted_interval(cells, weights)
    mean = weights @ cells
    var = weights @ (cells - mean) ** 2
    return float(np.mean((lo <= truth) & (truth <= hi))), float(np.mean((truth - mean) ** 2 / var))


def trial(dom, sd, n, epsilon, draws, rng):
    """One release: {method: (share covered, mean z²)} and the importance ESS."""
    names = [f"c{i}" for i in range(len(dom.sizes))]
    theta = rng.normal(size=dom.n_params) * sd
    prob = np.exp(dom.log_probs(theta))
    records = rng.choice(dom.n_cells, size=n, p=prob)
    codes = np.stack(np.unravel_index(records, dom.sizes), axis=1)
    features = dom.table_features
    truth = prob @ features
    rel = pmdp.release_marginals(
        {c: codes[:, i] for i, c in enumerate(names)},
        columns=names,
        domains={c: list(range(s)) for c, s in zip(names, dom.sizes, strict=True)},
        marginals=[tuple(names[i] for i in m) for m in dom.marginals],
        epsilon=epsilon,
        rng=int(rng.integers(2**32)),
    )
    v = noise_variance(rel)
    z = rel.y @ dom.projection
    z_exact = dom.tables(codes) @ dom.projection
    white = rng.standard_normal((draws, dom.n_params))

    def cells_of(points):
        logits = points @ dom.basis.T
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        return p @ features

    def laplace_points(zz, var):
        fit = marginals_laplace(
            dom, zz, n=n, noise_variance=var, prior_sigma=sd, method="enumerate"
        )
        return fit.mode + white @ np.linalg.cholesky(fit.cov).T, fit

    out = {"prior": summary(cells_of(white * sd), truth)}
    points, fit = laplace_points(z, v)
    cells = cells_of(points)
    out["laplace"] = summary(cells, truth)
    # the collapsed "clt" posterior by importance sampling: IS_DRAWS fresh draws of the Laplace
    # normal (its spread times IS_SCALE; widening by 1.25 was tried and cut the ESS tenfold)
    ess = log_w_sd = float("nan")
    if IS_DRAWS:
        wide = rng.standard_normal((IS_DRAWS, dom.n_params))
        proposal = fit.mode + IS_SCALE * wide @ np.linalg.cholesky(fit.cov).T
        log_p = clt_logp(proposal, dom, z, n, v) - 0.5 * np.sum((proposal / sd) ** 2, axis=1)
        log_w = log_p + 0.5 * np.sum(wide**2, axis=1)
        w = np.exp(log_w - log_w.max())
        w /= w.sum()
        out["is"] = summary(cells_of(proposal), truth, w)
        ess, log_w_sd = 1 / np.sum(w**2), float(np.std(log_w))
    tiny = 1e-6
    out["naive"] = summary(cells_of(laplace_points(z, tiny)[0]), truth)
    out["exact"] = summary(cells_of(laplace_points(z_exact, tiny)[0]), truth)
    return out, ess, log_w_sd


def main(trials=100, k=6, levels=3, n=10_000, epsilon=0.227, s=0.3, draws=400):
    dom = LogLinearDomain((levels,) * k, tuple(itertools.combinations(range(k), 2)))
    sd = np.full(dom.n_params, s)
    m = len(dom.marginals)
    print(
        f"{trials} releases, {k} x {levels} columns ({dom.n_cells} cells, p = {dom.n_params}), "
        f"all {m} 2-way tables, θ ~ N(0, {s}²) per term and the same prior, n = {n}, "
        f"ε = {epsilon} (float Laplace, b = {2 * m / epsilon:.1f}); {draws} draws per posterior",
        flush=True,
    )
    nominal = nominal_coverage(draws)
    print(f"a calibrated posterior's {draws}-draw 90% intervals cover {nominal:.3f}", flush=True)
    rng = np.random.default_rng(2027)
    methods = METHODS if IS_DRAWS else tuple(m for m in METHODS if m != "is")
    rows: dict[str, list] = {key: [] for key in methods}
    ess_all, lr_all = [], []
    start = time.perf_counter()
    for t in range(trials):
        out, ess, lr = trial(dom, sd, n, epsilon, draws, rng)
        for key in methods:
            rows[key].append(out[key])
        ess_all.append(ess)
        lr_all.append(lr)
        print(
            f"release {t + 1} ({time.perf_counter() - start:.0f} s): "
            + ", ".join(f"{key} {c:.3f}/{z2:.2f}" for key, (c, z2) in out.items())
            + f"; IS ESS {ess:.0f}, log-ratio sd {lr:.2f}",
            flush=True,
        )
    print(
        f"IS effective sample size median {np.median(ess_all):.0f} (min {np.min(ess_all):.0f}); "
        f"log-ratio sd median {np.median(lr_all):.2f}"
    )
    for key in methods:
        cov = np.array([c for c, _ in rows[key]])
        z2 = np.array([z for _, z in rows[key]])
        se = cov.std(ddof=1) / np.sqrt(trials)
        tstat = (cov.mean() - nominal) / se
        print(
            f"{key:8s} covers {cov.mean():.3f} ± {se:.3f} (between-release SE; t = {tstat:+.1f}, "
            f"p = {2 * stats.t.sf(abs(tstat), trials - 1):.3f}); mean z² {z2.mean():.2f} ± "
            f"{z2.std(ddof=1) / np.sqrt(trials):.2f}"
        )


if __name__ == "__main__":
    a = sys.argv[1:]
    main(
        int(a[0]) if a else 100,
        int(a[1]) if len(a) > 1 else 6,
        int(a[2]) if len(a) > 2 else 3,
        int(a[3]) if len(a) > 3 else 10_000,
        float(a[4]) if len(a) > 4 else 0.227,
        float(a[5]) if len(a) > 5 else 0.3,
        int(a[6]) if len(a) > 6 else 400,
    )
