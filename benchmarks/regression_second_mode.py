"""How much posterior mass does the trap release hold at a covariate variance near zero?

Issue 34 (``docs/regression.md``, section ``issue-34-small-variance-visits``): on the trap
release at d = 3 (n = 1000, ε = 1, x uniform on [−1, 1]³, Laplace scale b ≈ 21.4, the default
prior of x), chains of :func:`pymc_dp.regression.engine.collapsed.sample_regression` spend up to
half their draws at Σ_x[j, j] < 0.1 while the data's variances are near 1/3. The chains disagree
with each other, so they cannot measure that region's mass. This script measures it with a
sampler that shares no code with the package's: PyMC's SMC on a hand-written model of the same
posterior, built from standard distributions only.

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

Three estimates of P(Σ_jj < t | z), t = 0.1 by default:

* the share of the particles of an unrestricted SMC run (``--particles``, several chains);
* the ratio of evidences: SMC runs restricted to the region and to its complement (the
  truncated prior of B_dd), P(R | z) = P(R) Z_R / (P(R) Z_R + P(Rᶜ) Z_Rᶜ), which resolves a
  mass far below one particle in a thousand;
* next to them, ``sample_regression``'s chains (4 chains × (``--tune`` + ``--draws``), chain seeds
  ``--sampler-seeds``), as in the docs.

Before any of that, ``--check`` verifies that the model is the package's posterior: at
random unconstrained points its log density (PyMC, with the log-Jacobians of its transforms)
must equal an independently written joint density (SciPy NIG and NIW, the package's
``statistic_logpdf``, the Laplace release, as in ``tests/test_regression_scale_move.py``) at
the image point plus the log-determinant of the map's Jacobian (finite differences), to
~1e-5; and the model's simulated s at fixed φ must match ``draw_statistic`` (KS per component).

Usage (Python 3.11, from the worktree's root)::

    python benchmarks/regression_second_mode.py --check
    python benchmarks/regression_second_mode.py --sampler-seeds 1 2 3 4 5
    python benchmarks/regression_second_mode.py --smc --particles 4000 --chains 2
    python benchmarks/regression_second_mode.py --evidence --j 3 --particles 2000 --chains 2
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from scipy import stats

from pymc_dp.curator.regression.statistics import pack_statistic, released_pairs
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
        outs = model.replace_rvs_by_values([model[k] for k in
                                            ("theta", "sigma2", "x_loc", "x_cov", "s")])
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
        draws = pm.sample_prior_predictive(points, model=model, random_seed=rng,
                                           return_inferencedata=False)  # fmt: skip
        diffs = []
        for i in range(points):
            pt_ = {}
            for rv in model.free_RVs:
                val = np.asarray(draws[rv.name][i])
                tr = model.rvs_to_transforms.get(rv)
                vname = model.rvs_to_values[rv].name
                pt_[vname] = tr.forward(val).eval() if tr is not None else val
            u = np.concatenate([np.ravel(pt_[k]) for k in names])
            v = to_vector(u)
            step = 1e-6 * np.maximum(np.abs(u), 1.0)
            jac = np.stack([(to_vector(u + step[k] * e) - to_vector(u - step[k] * e)) / (2 * step[k])
                            for k, e in enumerate(np.eye(u.size))], axis=1)  # fmt: skip
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


def run_sampler(z, b, prior, x_prior, seeds, *, tune: int, draws: int, threshold: float) -> None:
    """The package's chains, as in the docs: per seed 4 chains, share of draws in the region."""
    from pymc_dp.regression.engine.collapsed import sample_regression

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


def summarise(idata, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """Per chain: the share of particles with Σ_jj < threshold, and the final log evidence."""
    post = idata.posterior
    diag = np.diagonal(post["x_cov"].values, 0, -2, -1)  # (chain, draw, d)
    share = (diag < threshold).mean(axis=1)
    lml = idata.sample_stats["log_marginal_likelihood"].values
    lml = np.array([np.asarray(row, float).ravel()[-1] if np.ndim(row) else float(row)
                    for row in lml.reshape(lml.shape[0], -1)[:, -1]])  # fmt: skip
    return share, lml


def run_smc(z, b, prior, x_prior, *, particles, chains, seed, j, region, threshold):
    """One SMC run; prints the shares, the evidence per chain and the posterior summaries."""
    model = build_model(z, b, prior, x_prior, j=j, region=region, threshold=threshold)
    t0 = time.process_time()
    with model:
        idata = pm.sample_smc(draws=particles, chains=chains, cores=1, random_seed=seed,
                              progressbar=False, compute_convergence_checks=False)  # fmt: skip
    cpu = time.process_time() - t0
    share, lml = summarise(idata, threshold)
    post = idata.posterior
    th = post["theta"].values
    diag = np.diagonal(post["x_cov"].values, 0, -2, -1)
    stages = idata.sample_stats["beta"].shape if "beta" in idata.sample_stats else "?"
    print(f"SMC region={region} j={j + 1} ({particles} particles × {chains} chains, seed {seed}, "
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="verify the hand-written model")
    parser.add_argument("--check-points", type=int, default=3)
    parser.add_argument("--sampler-seeds", type=int, nargs="*", default=[])
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--smc", action="store_true", help="unrestricted SMC")
    parser.add_argument("--evidence", action="store_true", help="SMC in and out of the region")
    parser.add_argument("--j", type=int, nargs="+", default=[3], help="covariates (1-based)")
    parser.add_argument("--particles", type=int, default=2000)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--threshold", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=34)
    args = parser.parse_args(argv)
    z, b, prior, x_prior = trap_release()
    print(f"release: b = {b:.3f}, released Σx_j² = {np.round(z[[3, 6, 8]], 1).tolist()}")
    if args.check:
        check_model(z, b, prior, x_prior, points=args.check_points, seed=args.seed)
    if args.sampler_seeds:
        run_sampler(z, b, prior, x_prior, args.sampler_seeds, tune=args.tune, draws=args.draws,
                    threshold=args.threshold)  # fmt: skip
    if args.smc:
        run_smc(z, b, prior, x_prior, particles=args.particles, chains=args.chains,
                seed=args.seed, j=D - 1, region="all", threshold=args.threshold)  # fmt: skip
    if args.evidence:
        for j1 in args.j:
            lml = {}
            for region in ("in", "out"):
                _, lml[region] = run_smc(z, b, prior, x_prior, particles=args.particles,
                                         chains=args.chains, seed=args.seed, j=j1 - 1,
                                         region=region, threshold=args.threshold)  # fmt: skip
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
