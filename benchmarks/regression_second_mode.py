"""How much posterior mass does the trap release hold at a covariate variance near zero?

Issue 34 (``docs/regression.md``, section ``issue-34-small-variance-visits``): on the trap
release at d = 3 (n = 1000, ε = 1, x uniform on [−1, 1]³, Laplace scale b ≈ 21.4, the default
prior of x), chains of :func:`pymc_dp.regression.engine.collapsed.sample_regression` spend up to
half their draws at Σ_x[j, j] < 0.1 while the data's variances are near 1/3. The chains disagree
with each other, so they cannot measure that region's mass. This script measures it without the
package's sampler, on a hand-written model of the same posterior built from standard
distributions only.

The model (:func:`build_model`): (θ, σ²) from the NIG prior; Σ_x from its inverse-Wishart prior
by Bartlett's decomposition of Σ_x⁻¹ ~ Wishart(ν, Ψ⁻¹), with the coordinates permuted so that
the chosen covariate j comes last, where Σ_jj = Ψ_jj / B_dd² and, under ν = d,
B_dd ~ HalfNormal(1) (so the region Σ_jj < t is B_dd > √(Ψ_jj / t), a truncated normal);
μ_x | Σ_x ~ N(c, Σ_x/κ). Each record v = (x, y) is normal with mean (μ_x, θ₀ + θ_xᵀμ_x) and
covariance C = [[Σ_x, Σ_xθ_x], [θ_xᵀΣ_x, θ_xᵀΣ_xθ_x + σ²]] (the package's model: y given x
normal, intercept θ₀, clipping of y not modelled); the sums of n records are n v̄ and
W + n v̄ v̄ᵀ with v̄ ~ N(m, C/n) and W ~ Wishart(n − 1, C) by Bartlett (chol C is
[[L_x, 0], [θ_xᵀL_x, σ]]); the released vector s takes the upper triangle of [1, x, y]ᵀ[1, x, y]
but n in ``released_pairs`` order; z ~ Laplace(s, b) per component.

What it runs (``--threshold`` t = 0.1 by default):

* ``--check``: verifies that the model is the package's posterior. At prior points, for each
  choice of j, its log density (PyMC, with the log-Jacobians of its transforms) must equal an
  independently written joint density (SciPy NIG and NIW, the package's ``statistic_logpdf``,
  the Laplace release, as in ``tests/test_regression_scale_move.py``) at the image point plus
  the log-determinant of the map's Jacobian (finite differences): it does, to 4e-6. Also KS of
  the model's s at fixed φ and of :func:`draw_sums` against ``draw_statistic``, and the
  log-Jacobian of :func:`from_coordinates` against finite differences.
* ``--sampler-seeds``: ``sample_regression``'s chains, 4 chains × (``--tune`` + ``--draws``) per
  chain seed, as in the docs; per chain the share of draws with Σ_jj < t.
* ``--importance N`` (with ``--sampler-seeds``, whose draws only place the proposal): mixture
  importance sampling of φ = (θ, σ², μ_x, Σ_x) with the likelihood p(z | φ) estimated without
  bias by draws of s (:func:`draw_sums`, written here from the normal law of v), in
  coordinates the release pins (:func:`to_coordinates`), a proposal per mode (in and out of
  each region, regions the chains never reached seeded by swapping covariates), adapted over
  ``--rounds`` (population Monte Carlo), ``--repeats`` seeds. It crosses between the modes by
  construction: each mode's mass is its own sum of weights, whatever any chain did.
* ``--smc`` / ``--evidence``: PyMC's SMC on :func:`build_model`, unrestricted, or restricted to
  the region and its complement (the truncated prior of B_dd; then
  P(R | z) = P(R) Z_R / (P(R) Z_R + P(Rᶜ) Z_Rᶜ)). On this release it degenerates: 9–14 stages,
  the final particles far from the data (θ₁ ≈ 0.04–0.7 against 0.51), so its numbers are not
  used; the hand-written model is kept for the check.
* ``--tempering``: SMC over β with the package's own exact kernel as mutation
  (:func:`run_tempering`): Laplace(z | s, b)^β ∝ Laplace(z | s, b/β).

Results (2026-12-01, Python 3.11, release seed 1, t = 0.1; CPU seconds of one process):

* ``--check``: log p_model − (log p_joint + log#det J) = −4e-6 at every point and every j; KS
  of s: min p 0.003 over 14 components (model, via ``pm.do``), 0.048 (``draw_sums``);
  log-Jacobian of ψ equal to finite differences to 1e-9.
* ``sample_regression``, 4 chains × (1000 + 2000) per seed, 29–38 s per seed: per-chain share
  with Σ₃₃ < t: seed 1 all 0; 2: 0.001 0 0.038 0; 3: 0.098 0.012 0.002 0.328; 4: 0.001 0
  0.562 0.012; 5: 0 0.001 0.200 0. Pooled over the 20 chains: Σ₃₃ 0.063, Σ₂₂ 0.0023, Σ₁₁ 0.
* importance (40000 proposals × 128 draws of s, 4 rounds, seeds 34–36; 65–89 s per round;
  placed by seeds 3–5's draws): P(Σ₃₃ < t | z) = 0.065 (sd 0.011 over the 12 rounds, range
  0.053–0.088; last rounds 0.059, 0.062, 0.059); P(Σ₂₂ < t | z) median 1.0e-3 (range 2e-4 to
  7e-2: heavy weights, poorly resolved); P(Σ₁₁ < t | z) median 4e-6 (max 1e-4). log evidence
  −106.0 (sd 0.08); log Z in the regions −108.6, out −106.1. Weighted means in the regions:
  log prior density +0.3 against −10.9 outside, log p(z | φ) −84.0 against −69.6.
* tempering (ESS 0.8 per stage, 20–21 stages), shares of Σ₁₁, Σ₂₂, Σ₃₃ < t at β = 1:
  1000 particles × 20 sweeps per stage (37 s): 0, 0.035, 0.261, log evidence −107.42;
  2000 × 40 (162 s, seed 34): 0, 0.009, 0.105, −106.42; 2000 × 100 (418 s, seed 35): 0,
  0.0085, 0.080, −106.32. The share still falls over the last stages (the kernel lags the
  tempering), and falls with more sweeps, towards the importance sampler's 0.065.
* PyMC SMC (``--smc``, 500–1000 particles, IMH or MH): 9–14 stages, θ₁ 0.04–0.71, shares
  0.99 at Σ₃₃: degenerate, not used. NUTS on :func:`build_model` (one chain, 300 + 300 from
  Σ₃₃ = 0.625) had not finished after 13 CPU minutes and was stopped.

Usage (Python 3.11, from the worktree's root)::

    python benchmarks/regression_second_mode.py --check
    python benchmarks/regression_second_mode.py --sampler-seeds 1 2 3 4 5
    python benchmarks/regression_second_mode.py --sampler-seeds 3 4 5 --importance 40000 \
        --inner 128 --rounds 4 --repeats 3
    python benchmarks/regression_second_mode.py --tempering --particles 2000 --sweeps 40 --ess 0.8
    python benchmarks/regression_second_mode.py --smc --particles 1000 --chains 1
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from scipy import stats

from pymc_dp.curator.regression.statistics import released_pairs
from pymc_dp.regression import NIG, default_x_prior, release_regression
from pymc_dp.regression.kernels.data_model import NIW
from pymc_dp.regression.kernels.normal_model import draw_statistic, statistic_logpdf

D, N, EPS = 3, 1000, 1.0


def trap_release(seed: int = 1) -> tuple[np.ndarray, float, NIG, NIW]:
    """The docs' release (value, Laplace scale), the NIG prior and the default prior of x."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, size=(N, D))
    y = np.clip(0.2 + x @ [0.5, -0.3, 0.2] + 0.2 * rng.standard_normal(N), -2, 2)
    rel = release_regression(x, y, epsilon=EPS, rng=seed, x_bounds=[(-1.0, 1.0)] * D,
                             y_bounds=(-2.0, 2.0))  # fmt: skip
    prior = NIG(np.zeros(D + 1), 0.1 * np.eye(D + 1), np.array(3.0), np.array(0.1))
    return np.asarray(rel.value, float), float(rel.scale), prior, default_x_prior([(-1.0, 1.0)] * D)


def build_model(z: np.ndarray, b: float, prior: NIG, x_prior: NIW, *, j: int = D - 1,
                region: str = "all", threshold: float = 0.1) -> pm.Model:  # fmt: skip
    """The posterior of (θ, σ², μ_x, Σ_x, s) given z as a PyMC model (module docstring).

    ``j`` (0-based) is the covariate put last in Σ_x's Bartlett factor; ``region`` is
    ``"all"``, ``"in"`` (Σ_jj < ``threshold``) or ``"out"`` (Σ_jj ≥ ``threshold``).
    """
    d, p = D, D + 1
    nu = float(x_prior.dof)
    if region != "all" and nu != d:
        raise ValueError("the restricted prior is written for ν = d (B_dd ~ HalfNormal(1))")
    perm = [k for k in range(d) if k != j] + [j]
    inv = np.argsort(perm)
    psi = np.asarray(x_prior.scale, float)[np.ix_(perm, perm)]
    lp = np.linalg.cholesky(np.linalg.inv(psi))  # Σ'⁻¹ = Lp B Bᵀ Lpᵀ
    cut = 1.0 / (lp[-1, -1] * np.sqrt(threshold))  # Σ'_dd = 1 / (Lp_dd B_dd)²
    rows, cols = released_pairs(d)
    tril = np.tril_indices(d, -1)
    tril_v = np.tril_indices(p, -1)
    with pm.Model() as model:
        sigma2 = pm.InverseGamma("sigma2", alpha=float(prior.shape), beta=float(prior.scale))
        theta = pm.MvNormal("theta", mu=np.asarray(prior.mean, float),
                            cov=sigma2 * np.linalg.inv(prior.precision))  # fmt: skip
        chi = pm.ChiSquared("bx_chi2", nu=nu - np.arange(d - 1), shape=d - 1)
        if region == "in":
            last = pm.TruncatedNormal("bx_last", mu=0.0, sigma=1.0, lower=cut)
        elif region == "out":
            last = pm.TruncatedNormal("bx_last", mu=0.0, sigma=1.0, lower=0.0, upper=cut)
        elif nu == d:
            last = pm.HalfNormal("bx_last", sigma=1.0)
        else:
            last = pt.sqrt(pm.ChiSquared("bx_last2", nu=nu - d + 1))
        off = pm.Normal("bx_off", 0.0, 1.0, shape=d * (d - 1) // 2)
        bart = pt.zeros((d, d))
        bart = pt.set_subtensor(bart[np.arange(d - 1), np.arange(d - 1)], pt.sqrt(chi))
        bart = pt.set_subtensor(bart[d - 1, d - 1], last)
        bart = pt.set_subtensor(bart[tril], off)
        factor = pt.as_tensor(lp) @ bart  # Σ'⁻¹ = factor factorᵀ
        inv_factor = pt.linalg.solve_triangular(factor, pt.eye(d), lower=True)
        cov_p = inv_factor.T @ inv_factor  # Σ' = factor⁻ᵀ factor⁻¹
        x_cov = pm.Deterministic("x_cov", cov_p[inv][:, inv])
        x_loc = pm.MvNormal("x_loc", mu=np.asarray(x_prior.loc, float),
                            cov=x_cov / float(x_prior.kappa))  # fmt: skip
        # Records v = (x, y): mean m, covariance C = Lv Lvᵀ.
        slope = theta[1:]
        lx = pt.linalg.cholesky(x_cov)
        lv = pt.zeros((p, p))
        lv = pt.set_subtensor(lv[:d, :d], lx)
        lv = pt.set_subtensor(lv[d, :d], slope @ lx)
        lv = pt.set_subtensor(lv[d, d], pt.sqrt(sigma2))
        mean_v = pt.concatenate([x_loc, (theta[0] + slope @ x_loc)[None]])
        vbar = pm.MvNormal("vbar", mu=mean_v, chol=lv / np.sqrt(N))
        w_chi = pm.ChiSquared("bw_chi2", nu=N - 1 - np.arange(p), shape=p)
        w_off = pm.Normal("bw_off", 0.0, 1.0, shape=p * (p - 1) // 2)
        aw = pt.zeros((p, p))
        aw = pt.set_subtensor(aw[np.arange(p), np.arange(p)], pt.sqrt(w_chi))
        aw = pt.set_subtensor(aw[tril_v], w_off)
        la = lv @ aw
        scatter = la @ la.T
        full = pt.zeros((p + 1, p + 1))
        full = pt.set_subtensor(full[0, 0], float(N))
        full = pt.set_subtensor(full[0, 1:], N * vbar)
        full = pt.set_subtensor(full[1:, 0], N * vbar)
        full = pt.set_subtensor(full[1:, 1:], scatter + N * pt.outer(vbar, vbar))
        s = pm.Deterministic("s", full[rows, cols])
        pm.Laplace("z", mu=s, b=b, observed=z)
    return model


def log_joint(theta, sigma2, loc, cov, s, z, b, prior: NIG, x_prior: NIW) -> float:
    """log π(θ, σ², μ_x, Σ_x, s, z) in the natural coordinates, written as in the tests."""
    out = stats.multivariate_normal.logpdf(theta, prior.mean,
                                           sigma2 * np.linalg.inv(prior.precision))  # fmt: skip
    out += stats.invgamma.logpdf(sigma2, float(prior.shape), scale=float(prior.scale))
    out += stats.multivariate_normal.logpdf(loc, x_prior.loc, cov / float(x_prior.kappa))
    out += stats.invwishart.logpdf(cov, df=float(x_prior.dof), scale=x_prior.scale)
    out += statistic_logpdf(s, theta=theta, sigma2=sigma2, x_loc=loc, x_cov=cov, n=N)
    # Written out: SciPy 1.17's laplace.logpdf is −inf beyond #z − s#/b ≈ 745 (log of its pdf).
    return float(out - np.sum(np.abs(z - s)) / b - len(z) * np.log(2.0 * b))


def check_model(z, b, prior, x_prior, *, points: int, seed: int) -> None:
    """Model log density against the independent joint (module docstring); KS of s."""
    rng = np.random.default_rng(seed)
    tril = np.tril_indices(D)
    for j in range(D):
        model = build_model(z, b, prior, x_prior, j=j)
        logp = model.compile_logp()
        outs = model.replace_rvs_by_values(
            [model[k] for k in ("theta", "sigma2", "x_loc", "x_cov", "s")]
        )
        natural = model.compile_fn(outs, inputs=model.value_vars)
        ip = model.initial_point()
        names = list(ip)
        sizes = [ip[k].size for k in names]
        shapes = [ip[k].shape for k in names]

        def to_point(u, names=names, sizes=sizes, shapes=shapes):
            parts = np.split(u, np.cumsum(sizes)[:-1])
            return {k: v.reshape(sh) for k, v, sh in zip(names, parts, shapes, strict=True)}

        def to_vector(u, natural=natural, to_point=to_point):
            th, s2, lo, co, s = natural(to_point(u))
            return np.concatenate([th, [s2], lo, co[tril], s])

        # Points: prior draws of the free variables, in the unconstrained space.
        draws = pm.sample_prior_predictive(points, model=model, random_seed=rng).prior
        diffs = []
        for i in range(points):
            pt_ = {}
            for rv in model.free_RVs:
                val = draws[rv.name].values[0, i]
                tr = model.rvs_to_transforms.get(rv)
                vname = model.rvs_to_values[rv].name
                pt_[vname] = tr.forward(val).eval() if tr is not None else val
            u = np.concatenate([np.ravel(pt_[k]) for k in names])
            step = 1e-6 * np.maximum(np.abs(u), 1.0)
            cols = [(to_vector(u + h * e) - to_vector(u - h * e)) / (2 * h)
                    for h, e in zip(step, np.eye(u.size), strict=True)]  # fmt: skip
            jac = np.stack(cols, axis=1)
            logdet = np.linalg.slogdet(jac)[1]
            th, s2, lo, co, s = natural(to_point(u))
            ref = log_joint(th, s2, lo, co, s, z, b, prior, x_prior)
            diffs.append(logp(to_point(u)) - (ref + logdet))
        print(f"j={j + 1}: log p_model − (log p_joint + log#det J) at {points} prior points: "
              f"{np.round(diffs, 6).tolist()}")  # fmt: skip
    # The law of s at fixed φ: the model's conditional draws against draw_statistic.
    model = build_model(z, b, prior, x_prior)
    theta, sigma2 = np.array([0.2, 0.5, -0.3, 0.2]), 0.04
    loc, cov = np.array([0.1, -0.05, 0.0]), np.array([[0.3, 0.05, 0], [0.05, 0.35, -0.1],
                                                        [0, -0.1, 0.3]])  # fmt: skip
    fixed = pm.do(model, {"theta": theta, "sigma2": sigma2, "x_loc": loc})
    # Σ_x is fixed through its Bartlett factor: B = chol of (Lp⁻¹ Σ⁻¹ Lp⁻ᵀ) in model order.
    psi = np.asarray(x_prior.scale, float)
    lp = np.linalg.cholesky(np.linalg.inv(psi))
    lpi = np.linalg.inv(lp)
    bart = np.linalg.cholesky(lpi @ np.linalg.inv(cov) @ lpi.T)
    fixed = pm.do(fixed, {"bx_chi2": np.diag(bart)[:-1] ** 2, "bx_last": bart[-1, -1],
                          "bx_off": bart[np.tril_indices(D, -1)]})  # fmt: skip
    draws = pm.draw(fixed["s"], draws=20000, random_seed=seed)
    ref = draw_statistic(rng, theta=theta, sigma2=sigma2, x_loc=loc, x_cov=cov, n=N, size=(20000,))
    pvals = [stats.ks_2samp(draws[:, k], ref[:, k]).pvalue for k in range(ref.shape[1])]
    print(f"KS of the {ref.shape[1]} components of s at fixed φ (20000 draws each): "
          f"min p = {min(pvals):.3f}, all {np.round(pvals, 3).tolist()}")  # fmt: skip
    mine = draw_sums(rng, theta[None], np.array([sigma2]), loc[None], cov[None], 20000)[0]
    pvals = [stats.ks_2samp(mine[:, k], ref[:, k]).pvalue for k in range(ref.shape[1])]
    print(f"KS of draw_sums (importance sampler's law of s) against draw_statistic: "
          f"min p = {min(pvals):.3f}")  # fmt: skip
    # The log-Jacobian of ψ ↦ (θ, σ², μ_x, Σ_x) against finite differences.
    psi = to_coordinates(theta[None], np.array([sigma2]), loc[None], cov[None])[0]

    def image(v):
        th, s2, lo, co, _ = from_coordinates(v[None])
        return np.concatenate([th[0], s2, lo[0], co[0][TRIL]])

    jac = np.stack([(image(psi + 1e-6 * e) - image(psi - 1e-6 * e)) / 2e-6
                    for e in np.eye(psi.size)], axis=1)  # fmt: skip
    print(f"log-Jacobian of ψ: formula {from_coordinates(psi[None])[4][0]:.6f}, finite "
          f"differences {np.linalg.slogdet(jac)[1]:.6f}")  # fmt: skip


def run_sampler(z, b, prior, x_prior, seeds, *, tune: int, draws: int, threshold: float) -> None:
    """The package's chains, as in the docs: per seed 4 chains, share of draws in the region."""
    from pymc_dp.regression.engine.collapsed import sample_regression

    pooled = []
    for seed in seeds:
        t0 = time.process_time()
        tr = sample_regression(seed, released=z[None], n=N, prior=prior, x_prior=x_prior,
                               scale=b, draws=draws, tune=tune, chains=4)  # fmt: skip
        cpu = time.process_time() - t0
        diag = np.diagonal(tr.x_cov[:, :, 0], 0, -2, -1)  # (chain, draw, d)
        share = (diag < threshold).mean(axis=1)  # (chain, d)
        th = tr.theta[:, :, 0]
        print(f"sampler seed {seed} ({cpu:.0f} s CPU): share of draws with Σ_jj < {threshold} "
              f"per chain (rows j): {np.round(share.T, 3).tolist()}; pooled "
              f"{np.round((diag < threshold).mean(axis=(0, 1)), 3).tolist()}; θ mean "
              f"{np.round(th.mean(axis=(0, 1)), 3).tolist()} sd "
              f"{np.round(th.std(axis=(0, 1)), 3).tolist()}; σ² {tr.sigma2.mean():.4f}; "
              f"diag Σ_x mean {np.round(diag.mean(axis=(0, 1)), 3).tolist()}")  # fmt: skip
        pooled.append(
            (
                tr.theta[:, :, 0].reshape(-1, D + 1),
                tr.sigma2[:, :, 0].ravel(),
                tr.x_loc[:, :, 0].reshape(-1, D),
                tr.x_cov[:, :, 0].reshape(-1, D, D),
            )
        )
    return tuple(np.concatenate(parts) for parts in zip(*pooled, strict=True))


def summarise(idata, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """Per chain: the share of particles with Σ_jj < threshold, and the final log evidence."""
    post = idata.posterior
    diag = np.diagonal(post["x_cov"].values, 0, -2, -1)  # (chain, draw, d)
    share = (diag < threshold).mean(axis=1)
    lml = idata.sample_stats["log_marginal_likelihood"].values
    lml = np.array([np.asarray(row, float).ravel()[-1] if np.ndim(row) else float(row)
                    for row in lml.reshape(lml.shape[0], -1)[:, -1]])  # fmt: skip
    return share, lml


def run_smc(
    z,
    b,
    prior,
    x_prior,
    *,
    particles,
    chains,
    seed,
    j,
    region,
    threshold,
    kernel="MH",
    smc_threshold=0.5,
):
    """One SMC run; prints the shares, the evidence per chain and the posterior summaries."""
    model = build_model(z, b, prior, x_prior, j=j, region=region, threshold=threshold)
    t0 = time.process_time()
    with model:
        idata = pm.sample_smc(draws=particles, chains=chains, cores=1, random_seed=seed,
                              kernel=getattr(pm.smc.kernels, kernel), threshold=smc_threshold,
                              progressbar=False, compute_convergence_checks=False)  # fmt: skip
    cpu = time.process_time() - t0
    share, lml = summarise(idata, threshold)
    post = idata.posterior
    th = post["theta"].values
    diag = np.diagonal(post["x_cov"].values, 0, -2, -1)
    stages = idata.sample_stats["beta"].shape if "beta" in idata.sample_stats else "?"
    print(f"SMC {kernel} (threshold {smc_threshold}) region={region} j={j + 1} ({particles} "
          f"particles × {chains} chains, seed {seed}, "
          f"{cpu:.0f} s CPU, stats shape {stages}): log evidence per chain "
          f"{np.round(lml, 2).tolist()}")  # fmt: skip
    print(f"  share Σ_jj < {threshold} per chain (rows chain, cols j): "
          f"{np.round(share, 4).tolist()}")  # fmt: skip
    print(f"  θ mean {np.round(th.mean(axis=(0, 1)), 3).tolist()} sd "
          f"{np.round(th.std(axis=(0, 1)), 3).tolist()}; σ² mean "
          f"{post['sigma2'].values.mean():.4f} sd {post['sigma2'].values.std():.4f}; diag Σ_x "
          f"mean {np.round(diag.mean(axis=(0, 1)), 3).tolist()} sd "
          f"{np.round(diag.std(axis=(0, 1)), 3).tolist()}")  # fmt: skip
    return idata, lml


def run_tempering(z, b, prior, x_prior, *, particles, sweeps, seed, threshold, ess):
    """SMC over β with the package's exact kernel as mutation (module docstring, method 2).

    π_β ∝ prior(φ, s) · exp(−β Σ#z − s#/b), and Laplace(z | s, b)^β ∝ Laplace(z | s, b/β), so a
    sweep of the package with scale b/β leaves π_β invariant: per sweep the mixing variances
    w | s, z, the conjugate draws of (θ, σ²) and (μ_x, Σ_x) given s, then
    :func:`~pymc_dp.regression.engine.collapsed.collapsed_sweep` without the moment move and the
    random walk (its two moves of s and the moves along the symmetries). β grows so that the
    incremental weights keep an ESS of ``ess`` × particles; then systematic resampling.
    """
    from pymc_dp.kernels import draw_noise_variance
    from pymc_dp.regression.engine.collapsed import collapsed_sweep, initial_step_sd
    from pymc_dp.regression.kernels.adaptation import RandomWalkAdaptation
    from pymc_dp.regression.kernels.collapsed import (
        collapsed_target,
        pack_parameters,
        unpack_parameters,
    )
    from pymc_dp.regression.kernels.conjugate import draw_nig, nig_update
    from pymc_dp.regression.kernels.data_model import draw_niw, niw_update

    rng = np.random.default_rng(seed)
    rows, m = particles, z.size
    nig = NIG(*(np.broadcast_to(np.asarray(a, float), (rows, *np.shape(a))).copy()
                for a in prior))  # fmt: skip
    niw = NIW(*(np.broadcast_to(np.asarray(a, float), (rows, 1, *np.shape(a))).copy()
                for a in x_prior))  # fmt: skip
    sizes = np.array([float(N)])
    zt = np.broadcast_to(z, (rows, 1, m)).copy()
    theta, sigma2 = draw_nig(rng, nig)
    x_loc, x_cov = draw_niw(rng, niw)
    s = draw_statistic(rng, theta=theta[:, None], sigma2=sigma2[:, None], x_loc=x_loc,
                       x_cov=x_cov, n=sizes)  # fmt: skip
    u = pack_parameters(theta, sigma2, x_loc, x_cov)
    target = collapsed_target(zt, np.ones_like(zt), sizes, nig, niw)
    adapt = RandomWalkAdaptation(u, initial_sd=initial_step_sd(nig, niw))  # unused: no walk
    beta, log_z, stage = 0.0, 0.0, 0
    t0 = time.process_time()

    def loss(s):
        out = np.sum(np.abs(z - s[:, 0]), axis=-1) / b
        return np.where(np.isfinite(out), out, np.inf)

    while beta < 1.0:
        ell = loss(s)
        lo, hi = beta, 1.0
        new = 1.0
        if ess * rows > 1.0 / np.sum(_normalised(-(1.0 - beta) * ell) ** 2):
            for _ in range(60):  # bisection on the next β
                new = 0.5 * (lo + hi)
                if 1.0 / np.sum(_normalised(-(new - beta) * ell) ** 2) < ess * rows:
                    hi = new
                else:
                    lo = new
        logw = -(new - beta) * ell
        log_z += float(np.logaddexp.reduce(logw) - np.log(rows))
        beta, stage = new, stage + 1
        idx = _systematic(rng, _normalised(logw))
        u, s = u[idx], s[idx]
        scale = np.full((rows, 1, 1), b / beta)
        for _ in range(sweeps):
            w = draw_noise_variance(rng, residual=zt - s, scale=scale)
            tgt = target._replace(noise_variance=w)
            theta, sigma2 = draw_nig(rng, nig_update(nig, statistic=s[:, 0], n=N))
            x_loc, x_cov = draw_niw(rng, niw_update(niw, statistic=s, n=sizes))
            state, _ = collapsed_sweep(rng, pack_parameters(theta, sigma2, x_loc, x_cov), s,
                                       target=tgt, adaptation=adapt, fit=None, moves=0,
                                       tries=1, tune=False)  # fmt: skip
            u, s = state.params, state.suffstat
        par = unpack_parameters(u, D)
        diag = np.diagonal(par.x_cov[:, 0], 0, -2, -1)
        share = (diag < threshold).mean(axis=0)
        print(f"  stage {stage:3d} β = {beta:.3e}: share Σ_jj < {threshold} "
              f"{np.round(share, 4).tolist()}, unique particles {np.unique(idx).size}, "
              f"θ₁ {par.theta[:, 1].mean():.3f}, loss {np.median(loss(s)):.1f}",
              flush=True)  # fmt: skip
    cpu = time.process_time() - t0
    par = unpack_parameters(u, D)
    diag = np.diagonal(par.x_cov[:, 0], 0, -2, -1)
    log_z -= m * np.log(2.0 * b)
    print(
        f"tempering seed {seed} ({particles} particles, {sweeps} sweeps/stage, {stage} stages, "
        f"{cpu:.0f} s CPU): log evidence {log_z:.2f}; share Σ_jj < {threshold} "
        f"{np.round((diag < threshold).mean(axis=0), 4).tolist()}; θ mean "
        f"{np.round(par.theta.mean(0), 3).tolist()} sd {np.round(par.theta.std(0), 3).tolist()}"
        f"; σ² {par.sigma2.mean():.4f} sd {par.sigma2.std():.4f}; diag Σ_x mean "
        f"{np.round(diag.mean(0), 3).tolist()} sd {np.round(diag.std(0), 3).tolist()}"
    )
    return diag


TRIL = np.tril_indices(D)


def to_coordinates(theta, sigma2, x_loc, x_cov) -> np.ndarray:
    """ψ = (E y, L_xᵀθ_x, log σ², μ_x, L_x with log diagonal), ``(..., 14)``; Σ_x = L_x L_xᵀ.

    Coordinates that the release pins directly (the moments of v = (x, y)): with Σ_jj near
    zero, θ_j alone is a funnel (Σx_j y = n Σ_jj θ_j + …), L_xᵀθ_x is not.
    """
    chol = np.linalg.cholesky(x_cov)
    slope = np.einsum("...ji,...j->...i", chol, theta[..., 1:])
    mean_y = theta[..., 0] + np.sum(theta[..., 1:] * x_loc, -1)
    diag = np.arange(D)
    chol[..., diag, diag] = np.log(chol[..., diag, diag])
    return np.concatenate([mean_y[..., None], slope, np.log(sigma2)[..., None], x_loc,
                           chol[..., TRIL[0], TRIL[1]]], axis=-1)  # fmt: skip


def from_coordinates(psi: np.ndarray):
    """Inverse of :func:`to_coordinates`, and log #det of the map ψ ↦ (θ, σ², μ_x, Σ_x)."""
    sigma2, x_loc = np.exp(psi[..., D + 1]), psi[..., D + 2 : 2 * D + 2]
    chol = np.zeros((*psi.shape[:-1], D, D))
    chol[..., TRIL[0], TRIL[1]] = psi[..., 2 * D + 2 :]
    diag = np.arange(D)
    log_diag = chol[..., diag, diag].copy()
    chol[..., diag, diag] = np.exp(log_diag)
    slope = np.linalg.solve(np.swapaxes(chol, -1, -2), psi[..., 1 : D + 1, None])[..., 0]
    theta = np.concatenate([(psi[..., 0] - np.sum(slope * x_loc, -1))[..., None], slope], -1)
    # θ_x = L_x⁻ᵀ γ: −Σ log L_ii; σ² = e^ℓ: ℓ; Σ = L Lᵀ: d log 2 + Σ_i (d − i + 1) log L_ii
    # (i = 1..d); L_ii = e^λ: Σ_i λ_i.
    log_jac = psi[..., D + 1] + D * np.log(2.0) + log_diag @ (D + 1 - np.arange(1, D + 1))
    return theta, sigma2, x_loc, chol @ np.swapaxes(chol, -1, -2), log_jac


def log_prior(theta, sigma2, x_loc, x_cov, prior: NIG, x_prior: NIW) -> np.ndarray:
    """log NIG(θ, σ²) + log NIW(μ_x, Σ_x), SciPy densities, one state per row."""
    out = np.empty(len(sigma2))
    cov0 = np.linalg.inv(prior.precision)
    for i in range(len(sigma2)):
        try:
            out[i] = (stats.multivariate_normal.logpdf(theta[i], prior.mean, sigma2[i] * cov0)
                      + stats.invgamma.logpdf(sigma2[i], float(prior.shape),
                                              scale=float(prior.scale))
                      + stats.multivariate_normal.logpdf(x_loc[i], x_prior.loc,
                                                         x_cov[i] / float(x_prior.kappa))
                      + stats.invwishart.logpdf(x_cov[i], df=float(x_prior.dof),
                                                scale=x_prior.scale))  # fmt: skip
        except (np.linalg.LinAlgError, ValueError):
            out[i] = -np.inf  # a proposal in a tail where σ² or Σ_x is numerically singular
    return np.where(np.isfinite(out), out, -np.inf)


def draw_sums(rng, theta, sigma2, x_loc, x_cov, size: int) -> np.ndarray:
    """``size`` draws of s per state (rows), written here from the normal law of v = (x, y):
    v̄ ~ N(m, C/n), W ~ Wishart(n − 1, C) by Bartlett; ``(rows, size, m)``."""
    rows, p = len(sigma2), D + 1
    lx = np.linalg.cholesky(x_cov)
    lv = np.zeros((rows, p, p))
    lv[:, :D, :D] = lx
    lv[:, D, :D] = np.einsum("ri,rij->rj", theta[:, 1:], lx)
    lv[:, D, D] = np.sqrt(sigma2)
    mean = np.concatenate([x_loc, (theta[:, 0] + np.sum(theta[:, 1:] * x_loc, -1))[:, None]], -1)
    noise = np.einsum("rij,rkj->rki", lv, rng.standard_normal((rows, size, p)))
    vbar = mean[:, None] + noise / np.sqrt(N)
    low = np.tril(rng.standard_normal((rows, size, p, p)), -1)
    low[..., np.arange(p), np.arange(p)] = np.sqrt(
        rng.chisquare(N - 1 - np.arange(p), size=(rows, size, p))
    )
    factor = lv[:, None] @ low
    full = np.empty((rows, size, p + 1, p + 1))
    full[..., 0, 0] = N
    full[..., 0, 1:] = full[..., 1:, 0] = N * vbar
    full[..., 1:, 1:] = (
        factor @ np.swapaxes(factor, -1, -2) + N * vbar[..., :, None] * vbar[..., None, :]
    )
    rows_, cols_ = released_pairs(D)
    return full[..., rows_, cols_]


class _KernelMixture:
    """Equal-weight mixture over groups; per group a defensive t (weight ``defensive``) and
    normal kernels N(c, h² Σ_g) at ``centres`` of the group's draws c (the rest)."""

    def __init__(self, rng, groups, *, centres, bandwidth, df, inflate, defensive):
        self.parts = []  # (log weight, sampler, log density)
        k = len(groups)
        for psi in groups:
            cov = np.cov(psi, rowvar=False) + 1e-10 * np.eye(psi.shape[1])
            t_dist = stats.multivariate_t(loc=psi.mean(0), shape=inflate * cov, df=df)
            self.parts.append((np.log(defensive / k), t_dist.rvs, t_dist.logpdf))
            if defensive < 1.0:
                cen = psi[rng.choice(len(psi), size=min(centres, len(psi)), replace=False)]
                chol = bandwidth * np.linalg.cholesky(cov)
                self.parts.append((np.log((1.0 - defensive) / k), _kde_sampler(cen, chol),
                                   _kde_logpdf(cen, chol)))  # fmt: skip

    def rvs(self, rng, size):
        logw = np.array([p[0] for p in self.parts])
        pick = rng.choice(len(self.parts), size=size, p=np.exp(logw) / np.exp(logw).sum())
        out = []
        for i, part in enumerate(self.parts):
            m = int(np.sum(pick == i))
            if m:
                out.append(np.reshape(part[1](size=m, random_state=rng), (m, -1)))
        x = np.concatenate(out)
        return x[rng.permutation(size)]

    def logpdf(self, x):
        return np.logaddexp.reduce([p[0] + p[2](x) for p in self.parts], axis=0)


def _kde_sampler(cen, chol):
    def rvs(size, random_state):
        idx = random_state.integers(len(cen), size=size)
        return cen[idx] + random_state.standard_normal((size, cen.shape[1])) @ chol.T

    return rvs


def _kde_logpdf(cen, chol):
    k = cen.shape[1]
    const = -0.5 * k * np.log(2 * np.pi) - np.sum(np.log(np.diag(chol))) - np.log(len(cen))

    def logpdf(x):
        out = np.empty(len(x))
        for start in range(0, len(x), 500):
            diff = x[start : start + 500, None, :] - cen[None]
            white = np.linalg.solve(chol, diff.reshape(-1, k).T).T.reshape(diff.shape)
            out[start : start + 500] = np.logaddexp.reduce(-0.5 * np.sum(white**2, -1), -1)
        return out + const

    return logpdf


def run_importance(z, b, prior, x_prior, draws, *, proposals, inner, seed, threshold,
                   df=5.0, inflate=1.5, chunk=50, centres=1000, bandwidth=0.5,
                   defensive=0.2, rounds=1):  # fmt: skip
    """Mixture importance sampling of the posterior of φ, crossing the modes by construction.

    The proposal is a mixture in ψ (:func:`to_coordinates`) over groups of the given draws (all
    Σ_jj ≥ ``threshold``, and per j with at least 30 draws, Σ_jj < ``threshold``), equal weights;
    per group a multivariate t (``df``, covariance × ``inflate``, share ``defensive``) and
    normal kernels of bandwidth ``bandwidth`` at ``centres`` of its draws; with ``rounds`` > 1,
    each further round puts a group's t and kernels at its particles of the round before,
    resampled by weight (population Monte Carlo). The likelihood of φ,
    p(z | φ) = E[Laplace(z | s, b) | φ], is estimated without bias by ``inner`` draws of s
    (:func:`draw_sums`), so the self-normalised weights give P(Σ_jj < t | z) and each group's
    share of the evidence, whatever the sampler that placed the proposals did.
    """
    rng = np.random.default_rng(seed)
    theta, sigma2, x_loc, x_cov = draws
    psi = to_coordinates(theta, sigma2, x_loc, x_cov)
    small = np.diagonal(x_cov, 0, -2, -1) < threshold
    groups = {"out": ~small.any(-1)}
    for j in range(D):
        if small[:, j].sum() >= 30:
            groups[f"in{j + 1}"] = small[:, j]
    group_psi = {name: psi[mask] for name, mask in groups.items()}
    # Regions the draws never reached: the largest in-region group with its covariate swapped
    # into place (x_j ↔ x_k in θ, μ_x, Σ_x), a proposal that the later rounds adapt.
    seeds_in = max((k_ for k_ in groups if k_ != "out"), key=lambda k_: groups[k_].sum(),
                   default=None)  # fmt: skip
    if seeds_in is not None:
        k = int(seeds_in[2]) - 1
        for j in range(D):
            if f"in{j + 1}" not in groups:
                perm = np.arange(D)
                perm[[j, k]] = perm[[k, j]]
                group_psi[f"in{j + 1}p"] = to_coordinates(
                    theta[groups[seeds_in]][:, np.r_[0, 1 + perm]], sigma2[groups[seeds_in]],
                    x_loc[groups[seeds_in]][:, perm],
                    x_cov[groups[seeds_in]][:, perm][:, :, perm])  # fmt: skip
    for rnd in range(rounds):
        t0 = time.process_time()
        mix = _KernelMixture(
            rng,
            list(group_psi.values()),
            centres=centres,
            bandwidth=bandwidth,
            df=df,
            inflate=inflate,
            defensive=defensive,
        )
        x = mix.rvs(rng, proposals)
        log_q = mix.logpdf(x)
        # Proposals in a t tail so far out that σ² or Σ_x is numerically singular get weight 0
        # (their true weight is below e^-100 anyway); they are replaced by a harmless state.
        bad = np.any(np.abs(x[:, D + 1 :]) > 30.0, axis=-1)
        x_safe = np.where(bad[:, None], x[np.argmin(bad)], x)
        th, s2, lo, co, log_jac = from_coordinates(x_safe)
        log_lik = np.empty(proposals)
        for start in range(0, proposals, chunk):
            sl = slice(start, start + chunk)
            s = draw_sums(rng, th[sl], s2[sl], lo[sl], co[sl], inner)
            ell = -np.sum(np.abs(z - s), -1) / b - z.size * np.log(2.0 * b)
            log_lik[sl] = np.logaddexp.reduce(ell, axis=-1) - np.log(inner)
        lpr = np.where(bad, -np.inf, log_prior(th, s2, lo, co, prior, x_prior))
        logw = lpr + log_jac + log_lik - log_q
        cpu = time.process_time() - t0
        w = _normalised(logw)
        diag = np.diagonal(co, 0, -2, -1)
        share = [(w * (diag[:, j] < threshold)).sum() for j in range(D)]
        # Bootstrap over the proposals for the uncertainty of the self-normalised shares.
        boot = []
        for _ in range(200):
            idx = rng.integers(proposals, size=proposals)
            wb = _normalised(logw[idx])
            boot.append([(wb * (diag[idx, j] < threshold)).sum() for j in range(D)])
        boot = np.array(boot)
        log_z = float(np.logaddexp.reduce(logw) - np.log(proposals))
        print(f"importance seed {seed} round {rnd + 1} ({proposals} proposals × {inner} draws "
              f"of s, {cpu:.0f} s CPU; "
              f"groups {[(k_, len(v)) for k_, v in group_psi.items()]}, bandwidth {bandwidth}, "
              f"defensive {defensive}): log evidence {log_z:.2f}, ESS {1 / np.sum(w**2):.0f}, "
              f"largest weight {w.max():.3f}")  # fmt: skip
        print(f"  P(Σ_jj < {threshold} | z) = {np.array2string(np.array(share), precision=6)} "
              f"(bootstrap 95% upper {np.array2string(np.quantile(boot, 0.975, 0), precision=6)}); "
              f"θ mean {np.round(w @ th, 3).tolist()}, σ² {w @ s2:.4f}, diag Σ_x "
              f"{np.round(w @ diag, 3).tolist()}")  # fmt: skip
        in_region = diag.min(-1) < threshold
        for name, mask in (("in", in_region), ("out", ~in_region)):
            if mask.any():
                wm = _normalised(logw[mask])
                best = np.argmax(np.where(mask, logw, -np.inf))
                part = np.logaddexp.reduce(logw[mask]) - np.log(proposals)
                print(f"  {name}: log Z_part {part:.2f}"
                      f", ESS within {1 / np.sum(wm**2):.0f} of {int(mask.sum())}; weighted mean "
                      f"log prior {wm @ np.where(wm > 0, lpr[mask], 0.0):.2f}, "
                      f"log p(z | φ) {wm @ log_lik[mask]:.2f}; at "
                      f"the heaviest: diag Σ_x {np.round(diag[best], 3).tolist()}, θ "
                      f"{np.round(th[best], 3).tolist()}")  # fmt: skip
        # Next round: each group's kernels at its own weighted particles (population MC).
        for name in group_psi:
            j = None if name == "out" else int(name[2]) - 1
            mask = ~(diag < threshold).any(-1) if j is None else diag[:, j] < threshold
            if mask.sum() and 1.0 / np.sum(_normalised(logw[mask]) ** 2) >= 5:
                idx = rng.choice(np.flatnonzero(mask), size=2 * centres, p=_normalised(logw[mask]))
                old = group_psi[name][rng.integers(len(group_psi[name]), size=centres)]
                group_psi[name] = np.concatenate([x[idx], old])  # keeps the old spread too
    return share


def _normalised(logw: np.ndarray) -> np.ndarray:
    w = np.exp(logw - np.max(logw))
    return w / w.sum()


def _systematic(rng: np.random.Generator, weights: np.ndarray) -> np.ndarray:
    positions = (rng.uniform() + np.arange(weights.size)) / weights.size
    return np.minimum(np.searchsorted(np.cumsum(weights), positions), weights.size - 1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="verify the hand-written model")
    parser.add_argument("--check-points", type=int, default=3)
    parser.add_argument("--sampler-seeds", type=int, nargs="*", default=[])
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument(
        "--importance",
        type=int,
        default=0,
        help="proposals of the mixture importance sampler (0: none)",
    )
    parser.add_argument("--inner", type=int, default=256, help="draws of s per proposal")
    parser.add_argument("--bandwidth", type=float, default=0.5, help="kernels' h")
    parser.add_argument("--defensive", type=float, default=0.2, help="t share per group")
    parser.add_argument("--repeats", type=int, default=1, help="importance runs (seeds)")
    parser.add_argument("--rounds", type=int, default=1, help="population MC rounds per run")
    parser.add_argument("--cache", help="npz file to keep/reuse the sampler's draws in")
    parser.add_argument("--smc", action="store_true", help="unrestricted SMC")
    parser.add_argument("--evidence", action="store_true", help="SMC in and out of the region")
    parser.add_argument("--j", type=int, nargs="+", default=[3], help="covariates (1-based)")
    parser.add_argument("--particles", type=int, default=2000)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--kernel", choices=["MH", "IMH"], default="MH", help="PyMC SMC kernel")
    parser.add_argument(
        "--smc-threshold",
        type=float,
        default=0.5,
        help="PyMC SMC's ESS threshold (higher: more stages)",
    )
    parser.add_argument("--tempering", action="store_true", help="SMC with the package kernel")
    parser.add_argument("--sweeps", type=int, default=5, help="package sweeps per stage")
    parser.add_argument("--ess", type=float, default=0.5, help="ESS share kept per stage")
    parser.add_argument("--threshold", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=34)
    args = parser.parse_args(argv)
    z, b, prior, x_prior = trap_release()
    print(f"release: b = {b:.3f}, released Σx_j² = {np.round(z[[3, 6, 8]], 1).tolist()}")
    if args.check:
        check_model(z, b, prior, x_prior, points=args.check_points, seed=args.seed)
    if args.sampler_seeds:
        if args.cache and os.path.exists(args.cache):
            with np.load(args.cache) as f:
                draws = tuple(f[k] for k in ("theta", "sigma2", "x_loc", "x_cov"))
        else:
            draws = run_sampler(z, b, prior, x_prior, args.sampler_seeds, tune=args.tune,
                                draws=args.draws, threshold=args.threshold)  # fmt: skip
            if args.cache:
                np.savez(args.cache, **dict(zip(("theta", "sigma2", "x_loc", "x_cov"), draws,
                                                strict=True)))  # fmt: skip
        if args.importance:
            for seed in range(args.seed, args.seed + args.repeats):
                run_importance(
                    z,
                    b,
                    prior,
                    x_prior,
                    draws,
                    proposals=args.importance,
                    inner=args.inner,
                    seed=seed,
                    threshold=args.threshold,
                    bandwidth=args.bandwidth,
                    defensive=args.defensive,
                    rounds=args.rounds,
                )
    if args.smc:
        run_smc(z, b, prior, x_prior, particles=args.particles, chains=args.chains,
                seed=args.seed, j=D - 1, region="all", threshold=args.threshold,
                kernel=args.kernel, smc_threshold=args.smc_threshold)  # fmt: skip
    if args.tempering:
        run_tempering(z, b, prior, x_prior, particles=args.particles, sweeps=args.sweeps,
                      seed=args.seed, threshold=args.threshold, ess=args.ess)  # fmt: skip
    if args.evidence:
        for j1 in args.j:
            lml = {}
            for region in ("in", "out"):
                _, lml[region] = run_smc(z, b, prior, x_prior, particles=args.particles,
                                         chains=args.chains, seed=args.seed, j=j1 - 1,
                                         region=region, threshold=args.threshold,
                                         kernel=args.kernel,
                                         smc_threshold=args.smc_threshold)  # fmt: skip
            psi = float(np.asarray(x_prior.scale)[j1 - 1, j1 - 1])
            p_in = stats.chi2.sf(psi / args.threshold, float(x_prior.dof) - D + 1)
            log_in = np.log(p_in) + lml["in"][:, None]
            log_out = np.log1p(-p_in) + lml["out"][None, :]
            post = 1.0 / (1.0 + np.exp(log_out - log_in))  # every pair of chains
            print(f"j={j1}: prior P(Σ_jj < {args.threshold}) = {p_in:.3f}; P(region | z) over "
                  f"chain pairs: {np.array2string(post.ravel(), precision=3)}; "
                  f"log10 {np.round(np.log10(post.ravel()), 2).tolist()}")  # fmt: skip


if __name__ == "__main__":
    main()
