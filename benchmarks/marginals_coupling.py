"""Where the strong couplings of the 15-ternary-column posterior come from: the truth or the noise.

For K ternary columns with all 2-way tables, n = 10⁴, ε = 1 (discrete Laplace, b = 2M/ε per
cell), one release from each data-generating θ:

* ``dense``: the speed benchmark's (``marginals_speed.release``): every one of the p terms
  N(0, 0.3²), so all K(K-1)/2 pairs of columns interact;
* ``sparse``: a Bayesian-network-like model, closer to census data: 1-way terms N(0, 0.5²),
  2-way terms N(0, 0.7²) on the K - 1 edges of a random tree plus 3 more random edges, and 0
  on every other pair.

For each, printed: the true θ (rms of its 1- and 2-way terms, largest |θ|), the dependence it
implies (Cramér's V of every pair of columns under the exact joint, full-domain sums), and the
error of the Bethe means there; then, for the Laplace fit under θ ~ N(0, σ²) on the 1-way and
N(0, σ₂²) on the 2-way terms (σ = 2; σ₂ = 2, the model's default, and tighter): the mode's
2-way terms (rms, largest |θ̂|), the Laplace sd, the mode's distance to the truth in sd units,
the Cramér's V and Bethe error at the mode, and the log-density drop at θ̂ + s L w over the
normal's s² p / 2 (1 where the posterior is normal; ``marginals_geometry.py``).

Run: ``PYTHONPATH=. python benchmarks/marginals_coupling.py [K] [generators] [σ₂,...]``, e.g.
``... 15 dense,sparse 2,0.5``. Each full-domain pass over 3¹⁵ cells takes several seconds.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import itertools
import sys
import time

import numpy as np
from marginals_speed import release

import pymc_dp as pmdp
from pymc_dp.kernels.loglinear import LogLinearDomain
from pymc_dp.kernels.loglinear_bethe import BetheDidNotConverge
from pymc_dp.kernels.loglinear_laplace import marginals_laplace
from pymc_dp.kernels.loglinear_moments import (
    _logits,
    clt_covariance,
    clt_fixed_logp,
    feature_moments,
    sample_records,
)
from pymc_dp.likelihoods.marginals import noise_variance, projected_release


def true_theta(dom, kind, rng):
    pair_term = np.array([len(s) == 2 for s, _ in dom.basis_terms])
    if kind == "dense":
        return rng.normal(size=dom.n_params) * 0.3
    k = len(dom.sizes)
    # a random tree (each column after the first joined to an earlier one) plus 3 more edges
    edges = {(int(rng.integers(i)), i) for i in range(1, k)}
    while len(edges) < k - 1 + 3:
        a, b = sorted(rng.choice(k, size=2, replace=False))
        edges.add((int(a), int(b)))
    theta = rng.normal(size=dom.n_params) * 0.5
    for j, (s, _) in enumerate(dom.basis_terms):
        if pair_term[j]:
            theta[j] = rng.normal() * 0.7 if tuple(s) in edges else 0.0
    return theta


def make_release(k, kind, n=10_000, seed=0):
    pairs = list(itertools.combinations(range(k), 2))
    dom = LogLinearDomain((3,) * k, tuple(pairs))
    if kind == "dense":  # the speed benchmark's release and its θ
        return release(k, 3, n, seed), np.random.default_rng(seed).normal(size=dom.n_params) * 0.3
    rng = np.random.default_rng(seed)
    theta = true_theta(dom, kind, rng)
    codes = sample_records(dom, theta, n, rng)
    names = [f"c{i}" for i in range(k)]
    rel = pmdp.release_marginals(
        {c: codes[:, i] for i, c in enumerate(names)},
        columns=names,
        domains={c: [0, 1, 2] for c in names},
        marginals=[(names[a], names[b]) for a, b in pairs],
        epsilon=1.0,
        rng=seed + 1,
    )
    return rel, theta


def exact_tables(dom, theta, engine):
    """Exact single and pair tables (Bethe's layout) by full-domain sums, and the mean."""
    logits = _logits(dom, theta)
    logits -= logits.max()
    prob = np.exp(logits, out=logits)
    prob /= prob.sum()
    prob = prob.reshape(dom.sizes)
    k = len(dom.sizes)
    node = np.stack([prob.sum(axis=tuple(i for i in range(k) if i != c)) for c in range(k)])
    pair = np.stack(
        [prob.sum(axis=tuple(i for i in range(k) if i not in (a, b))) for a, b in engine.pairs]
    )
    return node, pair, engine._mu(node, pair)


def cramers_v(pair):
    pa, pb = pair.sum(axis=2), pair.sum(axis=1)
    expected = pa[:, :, None] * pb[:, None, :]
    phi2 = ((pair - expected) ** 2 / expected).sum(axis=(1, 2))
    return np.sqrt(phi2 / (min(pair.shape[1:]) - 1))


def describe_v(v):
    return f"median {np.median(v):.3f}, 90% {np.quantile(v, 0.9):.3f}, max {v.max():.3f}"


def one(k, kind, sigmas, draws=10):
    rel, theta = make_release(k, kind)
    dom, z = projected_release(rel)
    var = noise_variance(rel)
    engine = feature_moments(dom, "bethe")
    pair_term = np.array([len(s) == 2 for s, _ in dom.basis_terms])
    start = time.perf_counter()
    _, pair, mu_true = exact_tables(dom, theta, engine)
    bethe_err = np.max(np.abs(engine.mean(theta) - mu_true))
    print(
        f"## {k} x 3, {kind}: b = {np.sqrt(var / 2):.0f} per cell (noise sd {np.sqrt(var):.0f}); "
        f"true θ: 1-way rms {np.sqrt(np.mean(theta[~pair_term] ** 2)):.2f}, 2-way rms "
        f"{np.sqrt(np.mean(theta[pair_term] ** 2)):.2f}, max |θ| {np.abs(theta).max():.2f}; "
        f"Cramér's V of the true joint {describe_v(cramers_v(pair))}; Bethe mean error "
        f"{bethe_err:.1e} ({time.perf_counter() - start:.0f} s)",
        flush=True,
    )
    for s2 in sigmas:
        sigma = np.where(pair_term, s2, 2.0)
        start = time.perf_counter()
        fit = marginals_laplace(dom, z, n=rel.n, noise_variance=var, prior_sigma=sigma)
        t_fit = time.perf_counter() - start
        sd = np.sqrt(np.diag(fit.cov))
        mode = fit.mode
        _, pair_m, mu_m = exact_tables(dom, mode, engine)
        err_m = np.max(np.abs(engine.mean(mode) - mu_m))
        zt = (mode - theta) / sd
        print(
            f"- prior sd of 2-way terms {s2}: Laplace fit {t_fit:.0f} s; mode 2-way rms "
            f"{np.sqrt(np.mean(mode[pair_term] ** 2)):.2f}, max |θ̂| {np.abs(mode).max():.2f}, "
            f"{np.mean(np.abs(mode[pair_term]) > 1):.0%} of 2-way |θ̂| > 1; Laplace sd of 2-way "
            f"terms median {np.median(sd[pair_term]):.2f}; (θ̂ - θ)/sd rms "
            f"{np.sqrt(np.mean(zt**2)):.2f}; 2-way θ̂ - θ rms "
            f"{np.sqrt(np.mean((mode - theta)[pair_term] ** 2)):.2f}; Cramér's V at the mode "
            f"{describe_v(cramers_v(pair_m))}; Bethe mean error at the mode {err_m:.1e}",
            flush=True,
        )
        chol = np.linalg.cholesky(clt_covariance(mode, dom, engine, n=rel.n, noise_variance=var))
        prec = 1.0 / sigma**2

        def logp(t, chol=chol, prec=prec):
            try:
                return clt_fixed_logp(t, dom, engine, z, n=rel.n, chol=chol) - 0.5 * (prec * t) @ t
            except BetheDidNotConverge:
                return -np.inf

        lower = np.linalg.cholesky(fit.cov)
        top = logp(mode)
        rng = np.random.default_rng(1)
        cells = []
        for s in (0.3, 0.5, 1.0):
            drop = np.mean(
                [
                    top - logp(mode + s * lower @ rng.standard_normal(dom.n_params))
                    for _ in range(draws)
                ]
            )
            cells.append(f"s = {s}: {drop / (s * s * dom.n_params / 2):.2f}")
        print("  log-density drop at θ̂ + s L w over the normal's: " + ", ".join(cells), flush=True)


def main(k=15, kinds="dense,sparse", sigmas="2,0.5"):
    for kind in kinds.split(","):
        one(k, kind, [float(s) for s in sigmas.split(",")])


if __name__ == "__main__":
    args = sys.argv[1:]
    main(
        int(args[0]) if args else 15,
        args[1] if len(args) > 1 else "dense,sparse",
        args[2] if len(args) > 2 else "2,0.5",
    )
