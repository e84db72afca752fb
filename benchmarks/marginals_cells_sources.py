"""Where the cell coverage of ``marginals_bethe_cells.py`` is lost: Bethe moments, readout, Laplace.

The releases are those of ``benchmarks/marginals_bethe_cells.py`` (seed 2026, same stream: K
ternary columns, all 2-way tables, θ ~ N(0, 0.3²) per term, n = 10⁴, ε = 1), and so are the
100 standard-normal draws each Laplace posterior uses (paired comparisons). For each release,
the central 90% intervals of the 27 cells of three 2-way margins, from:

* ``bethe``: the Laplace normal with Bethe moments (the benchmark's posterior), its cells read
  two ways: as the Bethe pair beliefs of each draw (the benchmark's readout) and as the exact
  pair marginals of the same draws (what ``synthetic_datasets`` draws records from);
* ``exact``: the Laplace normal with exact moments by dense sums over the full domain (a control
  for up to about 10⁶ cells: 12 ternary columns, 531 441 cells, a 1.2 GB feature matrix),
  found by Gauss-Newton from the Bethe mode with the covariance re-evaluated at each step; also
  the Mahalanobis distance of the Bethe mode from it and the sd of log p(θ | y) - log q(θ) over
  its draws (0 if the normal were the posterior);
* ``nuts``: ``pm.sample`` on ``marginals_model(rel, prior_sigma=0.3, features="bethe")`` (the
  same Bethe law, sampled instead of approximated), cells read both ways, with the Laplace
  normal on the same release for comparison; with ``nuts law`` ``exact`` instead, NumPyro's
  NUTS on the exact ``"clt-fixed"`` law (the library's default at 12 columns: exact moments,
  here by the matrix-product form of ``marginals_exact_law.py``, as the junction tree's
  gradient takes seconds), whitened at the ``exact`` fit (which it turns on), 2 chains ×
  (``nuts draws`` + ``nuts draws``), 100 draws read (the Laplace normal's mark), its cells
  read as exact marginals, and its cell means and sds against the exact Laplace normal's.

Printed per release and pooled: cells covered and the rms z-score of the truth under the draws'
mean and sd (1 for a calibrated normal). The pooled line gives the coverage a calibrated
posterior's interval from that many draws has (0.882 for 100 draws, 0.891 for NUTS's 200
read) and the 95% binomial band around it for independent intervals; the cells of one release
are correlated, so the real spread is wider.

Run: ``PYTHONPATH=. python benchmarks/marginals_cells_sources.py [trials] [k] [parts]
[nuts draws] [nuts law]``, ``parts`` a comma list of ``bethe``, ``exact``, ``nuts`` (e.g.
``20 12 bethe``, ``3 12 bethe,exact``, ``3 12 nuts 300``, ``4,5 12 nuts 150 exact``), ``nuts
law`` ``bethe`` (the default) or ``exact``; a trial list ``1,4`` in place of ``trials`` runs
those releases only. ``exact`` moments in the Gauss-Newton fit come from
``marginals_exact_law.TensorMoments`` (the dense sums' values to ~1e-14: release 4 reproduces
its earlier 23/27 cells, Mahalanobis 10.36, log-ratio sd 7.7).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import itertools
import sys
import time

import numpy as np
from marginals_bethe_cells import LEVELS, _joint, _margin, margins, nominal_coverage
from marginals_exact_law import TensorMoments, nuts_exact
from scipy import linalg, stats
from scipy.linalg import blas

import pymc_dp as pmdp
from pymc_dp.kernels.loglinear import LogLinearDomain
from pymc_dp.kernels.loglinear_bethe import BetheDidNotConverge, BetheMoments
from pymc_dp.kernels.loglinear_laplace import marginals_laplace
from pymc_dp.likelihoods.marginals import noise_variance

SD, N, EPSILON, DRAWS = 0.3, 10_000, 1.0, 100


class DenseMoments:
    """Exact E_θ[a] and Cov_θ[a] by dense sums over the full domain (the control)."""

    def __init__(self, domain, chunk=32768):
        cells = np.indices(domain.sizes).reshape(len(domain.sizes), -1).T
        self.a = np.zeros((cells.shape[0], domain.n_params))
        for j, (s, levels) in enumerate(domain.basis_terms):
            hit = np.ones(cells.shape[0], dtype=bool)
            for k, v in zip(s, levels, strict=True):
                hit &= cells[:, k] == v
            self.a[:, j] = hit
        self.sizes, self.chunk, self._last = domain.sizes, chunk, None

    def prob(self, theta):
        if self._last is not None and np.array_equal(theta, self._last[0]):
            return self._last[1]
        logits = self.a @ theta
        prob = np.exp(logits - logits.max())
        prob /= prob.sum()
        self._last = (np.array(theta), prob)
        return prob

    def mean(self, theta):
        return self.prob(theta) @ self.a

    def moments(self, theta):
        prob = self.prob(theta)
        root = np.sqrt(prob)
        second = None
        for start in range(0, len(prob), self.chunk):
            b = self.a[start : start + self.chunk] * root[start : start + self.chunk, None]
            if second is None:
                second = blas.dsyrk(1.0, b, trans=1)
            else:
                second = blas.dsyrk(1.0, b, trans=1, beta=1.0, c=second, overwrite_c=1)
        second = np.triu(second) + np.triu(second, 1).T
        mean = prob @ self.a
        return mean, second - np.outer(mean, mean)

    def cells(self, theta, pairs):
        joint = self.prob(theta).reshape(self.sizes)
        return np.stack([_margin(joint, m) for m in pairs])


def gauss_newton(dom, exact, dense, z, v, prec0, start, max_steps=12):
    """Mode and Laplace covariance of the clt-fixed posterior by exact moments, and chol(Σ).

    ``exact`` gives the moments (``TensorMoments``, equal to the dense sums to ~1e-14 and some
    ten times faster), ``dense`` the means of the line search."""
    uc, um = dom.projected_table_map
    theta = start.copy()
    for _ in range(max_steps):
        mean, cov_a = exact.moments(theta)
        jac = N * um @ cov_a
        factor = linalg.cho_factor(N * um @ cov_a @ um.T + v * np.eye(dom.n_params))
        resid = z - N * (uc + um @ mean)
        grad = jac.T @ linalg.cho_solve(factor, resid) - prec0 * theta
        step = np.linalg.solve(jac.T @ linalg.cho_solve(factor, jac) + np.diag(prec0), grad)

        def objective(t, factor=factor):
            r = z - N * (uc + um @ dense.mean(t))
            return -0.5 * r @ linalg.cho_solve(factor, r) - 0.5 * np.sum(prec0 * t * t)

        base, scale = objective(theta), 1.0
        while objective(theta + scale * step) < base and scale > 1e-3:
            scale /= 2
        theta = theta + scale * step
        if np.max(np.abs(scale * step)) < 1e-5:
            break
    mean, cov_a = exact.moments(theta)
    jac = N * um @ cov_a
    sigma = N * um @ cov_a @ um.T + v * np.eye(dom.n_params)
    cov = np.linalg.inv(jac.T @ np.linalg.solve(sigma, jac) + np.diag(prec0))
    return theta, 0.5 * (cov + cov.T), np.linalg.cholesky(sigma)


def releases(k, wanted):
    """The releases of marginals_bethe_cells.py (its rng stream) with their 100 normal draws."""
    pairs = list(itertools.combinations(range(k), 2))
    dom = LogLinearDomain((LEVELS,) * k, tuple(pairs))
    sd = np.full(dom.n_params, SD)
    names = [f"c{i}" for i in range(k)]
    rng = np.random.default_rng(2026)
    for t in range(max(wanted)):
        theta = rng.normal(size=dom.n_params) * sd
        joint = _joint(dom, theta)
        cells = rng.choice(dom.n_cells, size=N, p=joint.reshape(-1))
        true = np.stack([_margin(joint, m) for m in margins(k)])
        del joint
        seed = int(rng.integers(2**32))
        white = np.stack([rng.standard_normal(dom.n_params) for _ in range(DRAWS)])
        if t + 1 not in wanted:
            continue
        codes = np.stack(np.unravel_index(cells, dom.sizes), axis=1)
        rel = pmdp.release_marginals(
            {c: codes[:, i] for i, c in enumerate(names)},
            columns=names,
            domains={c: list(range(LEVELS)) for c in names},
            marginals=[(names[a], names[b]) for a, b in pairs],
            epsilon=EPSILON,
            rng=seed,
        )
        yield t + 1, dom, rel, true, white


def cover(kept, true):
    """Cells inside their central 90% interval, and the rms z-score of the truth."""
    lo, hi = np.quantile(kept, [0.05, 0.95], axis=0)
    z = (true - kept.mean(axis=0)) / kept.std(axis=0)
    return int(np.sum((lo <= true) & (true <= hi))), float(np.sqrt(np.mean(z**2))), len(kept)


def main(wanted, k=12, parts=("bethe",), nuts_draws=300, nuts_law="bethe"):
    if nuts_law not in ("bethe", "exact"):
        raise ValueError(f"nuts_law must be 'bethe' or 'exact' (got {nuts_law!r})")
    if "nuts" in parts and nuts_law == "exact" and "exact" not in parts:
        parts = (*parts, "exact")  # NUTS is whitened at, and compared with, the exact fit
    print(
        f"releases {wanted[0]}..{wanted[-1]} ({len(wanted)}), {k} x {LEVELS} columns, all 2-way "
        f"tables, θ ~ N(0, {SD}²), n = {N}, ε = {EPSILON}; parts {list(parts)}",
        flush=True,
    )
    pooled: dict[str, list] = {}
    dense = bethe = tensor = None
    for t, dom, rel, true, white in releases(k, wanted):
        start = time.perf_counter()
        if bethe is None:
            bethe = BetheMoments(dom)
            edge = {tuple(p): e for e, p in enumerate(bethe.pairs)}
        if dense is None and ("exact" in parts or "nuts" in parts or "bethe" in parts):
            dense = DenseMoments(dom)

        def bethe_cells(point):
            _, pair = bethe.beliefs(point)
            return np.stack([pair[edge[m]] for m in margins(k)])

        def both(points):
            kept_b, kept_x = [], []
            for point in points:
                try:
                    kept_b.append(bethe_cells(point))
                except BetheDidNotConverge:
                    pass
                kept_x.append(dense.cells(point, margins(k)))
            return cover(np.asarray(kept_b), true), cover(np.asarray(kept_x), true)

        z = rel.y @ dom.projection
        v = noise_variance(rel)
        sd = np.full(dom.n_params, SD)
        fit = marginals_laplace(dom, z, n=N, noise_variance=v, prior_sigma=sd, method="bethe")
        chol = np.linalg.cholesky(fit.cov)
        draws = fit.mode + white @ chol.T
        res, extra = {}, {}
        if "bethe" in parts or ("nuts" in parts and nuts_law == "bethe"):
            res["laplace bethe, bethe cells"], res["laplace bethe, exact cells"] = both(draws)
        if "exact" in parts:
            if tensor is None:
                tensor = TensorMoments(dom)
            mode, cov, chol_sigma = gauss_newton(dom, tensor, dense, z, v, 1 / sd**2, fit.mode)
            low = np.linalg.cholesky(cov)
            gap = np.linalg.solve(low, fit.mode - mode)
            extra["bethe mode, Mahalanobis from exact"] = round(float(np.sqrt(gap @ gap)), 2)
            uc, um = dom.projected_table_map
            kept, ratio = [], []
            for w in white:
                point = mode + low @ w
                kept.append(dense.cells(point, margins(k)))
                r = linalg.solve_triangular(
                    chol_sigma, z - N * (uc + um @ dense.mean(point)), lower=True
                )
                ratio.append(-0.5 * r @ r - 0.5 * np.sum(point**2) / SD**2 + 0.5 * w @ w)
            exact_cells = kept
            res["laplace exact, exact cells"] = cover(np.asarray(kept), true)
            extra["log-ratio sd"] = round(float(np.std(ratio)), 1)
        if "nuts" in parts and nuts_law == "exact":
            start_nuts = time.perf_counter()
            theta, steps, diverging = nuts_exact(
                dom,
                tensor,
                z,
                n=N,
                chol_sigma=chol_sigma,
                mode=mode,
                chol_cov=low,
                prior_sd=sd,
                draws=nuts_draws,
                seed=t,
            )
            kept = theta[:: max(1, len(theta) // DRAWS)][:DRAWS]
            res["nuts exact, exact cells"] = cover(
                np.asarray([dense.cells(point, margins(k)) for point in kept]), true
            )
            laplace_exact = mode + white @ low.T
            ratio = theta.std(axis=0) / laplace_exact.std(axis=0)
            extra["nuts / laplace sd, min-median-max"] = [
                round(float(q), 2) for q in np.quantile(ratio, [0, 0.5, 1])
            ]
            shift = (theta.mean(axis=0) - mode) / theta.std(axis=0)
            extra["nuts mean - laplace mode, rms in nuts sd"] = round(
                float(np.sqrt(np.mean(shift**2))), 2
            )
            # the cells themselves, NUTS against the exact Laplace normal on the same release
            cells_n = np.asarray([dense.cells(p, margins(k)) for p in kept]).reshape(len(kept), -1)
            cells_l = np.asarray(exact_cells).reshape(len(exact_cells), -1)
            cell_sd = cells_n.std(axis=0)
            extra["cells: nuts - laplace mean in nuts sd, rms"] = round(
                float(np.sqrt(np.mean(((cells_n.mean(0) - cells_l.mean(0)) / cell_sd) ** 2))), 2
            )
            extra["cells: nuts / laplace sd, median"] = round(
                float(np.median(cell_sd / cells_l.std(axis=0))), 2
            )
            extra["nuts steps/draw"] = round(steps, 1)
            extra["divergences"] = diverging
            extra["nuts s"] = round(time.perf_counter() - start_nuts)
        elif "nuts" in parts:
            import pymc as pm

            from pymc_dp._compat import posterior_dataset

            model = pmdp.marginals_model(rel, prior_sigma=SD, features="bethe")
            idata = pm.sample(
                nuts_draws,
                tune=nuts_draws,
                chains=2,
                cores=2,
                random_seed=t,
                progressbar=False,
                model=model,
                compute_convergence_checks=False,
            )
            theta = np.asarray(posterior_dataset(idata)["theta"]).reshape(-1, dom.n_params)
            res["nuts bethe, bethe cells"], res["nuts bethe, exact cells"] = both(theta[::3])
            ratio = theta.std(axis=0) / draws.std(axis=0)
            extra["nuts / laplace sd, min-median-max"] = [
                round(float(q), 2) for q in np.quantile(ratio, [0, 0.5, 1])
            ]
            shift = (theta.mean(axis=0) - fit.mode) / theta.std(axis=0)
            extra["nuts mean - laplace mode, rms in nuts sd"] = round(
                float(np.sqrt(np.mean(shift**2))), 2
            )
            extra["nuts steps/draw"] = round(float(np.mean(idata.sample_stats["n_steps"])), 1)
            extra["divergences"] = int(np.sum(idata.sample_stats["diverging"]))
        line = ", ".join(
            f"{key} {c}/{true.size} (z rms {zr:.2f})" for key, (c, zr, _) in res.items()
        )
        print(f"release {t} ({time.perf_counter() - start:.0f} s): {line}; {extra}", flush=True)
        for key, (c, zr, used) in res.items():
            entry = pooled.setdefault(key, [0, 0, [], used])
            entry[0], entry[1] = entry[0] + c, entry[1] + true.size
            entry[2].append(zr)
    for key, (c, m, zr, used) in pooled.items():
        nominal = nominal_coverage(used)
        lo, hi = stats.binom.ppf([0.025, 0.975], m, nominal) / m
        print(
            f"pooled {key}: {c}/{m} = {c / m:.3f} (calibrated: {nominal:.3f}, band of "
            f"independent intervals [{lo:.3f}, {hi:.3f}]), z rms "
            f"{np.sqrt(np.mean(np.square(zr))):.2f}"
        )


if __name__ == "__main__":
    args = sys.argv[1:]
    first = args[0] if args else "20"
    wanted = [int(x) for x in first.split(",")] if "," in first else list(range(1, int(first) + 1))
    main(
        wanted,
        int(args[1]) if len(args) > 1 else 12,
        tuple(args[2].split(",")) if len(args) > 2 else ("bethe",),
        int(args[3]) if len(args) > 3 else 300,
        args[4] if len(args) > 4 else "bethe",
    )
