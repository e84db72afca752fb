"""The default sampler with released moments of x: the shape family (kernels/shape_law.py)."""

import numpy as np
import pymc as pm
import pytest
from scipy import integrate, stats

from pymc_dp.kernels import draw_noise_variance
from pymc_dp.regression import (
    NIG,
    NIW,
    NoisyRegressionStat,
    draw_nig,
    draw_niw,
    nig_update,
    niw_update,
    regression_attrs,
    release_regression,
    sample_regression,
)
from pymc_dp.regression.engine.collapsed import collapsed_sweep, initial_step_sd, shape_gibbs
from pymc_dp.regression.kernels.adaptation import RandomWalkAdaptation
from pymc_dp.regression.kernels.collapsed import (
    collapsed_target,
    pack_parameters,
    unpack_parameters,
)
from pymc_dp.regression.kernels.moment_move import moment_prior
from pymc_dp.regression.kernels.shape_law import (
    XShape,
    hold,
    informative,
    moment_term,
    raw_moments,
    shape_log_ratio,
    shape_term,
    standardised,
)
from pymc_dp.regression.kernels.x_models import ShapePrior, moment_log_likelihood

PRIOR = NIG(np.zeros(2), 0.5 * np.eye(2), np.array(20.0), np.array(1.9))
X_PRIOR = NIW(np.zeros(1), np.array(4.0), np.array(20.0), np.array([[1.8]]))


def _release(rng, d=1, moments=0.2, n=200):
    x = rng.uniform(-0.5, 0.5, (n, d))
    y = np.clip(0.2 + x @ np.full(d, 0.5) + 0.3 * rng.standard_normal(n), -3, 3)
    return release_regression(x, y, x_bounds=[(-2, 2)] * d, y_bounds=(-3, 3), epsilon=1.0,
                              moments_share=moments, rng=rng)  # fmt: skip


def _node(rel, **kw):
    with pm.Model() as model:
        sigma2 = pm.InverseGamma("sigma2", 2.0, 0.1)
        d = rel.x_bounds.shape[0] if hasattr(rel.x_bounds, "shape") else len(rel.x_bounds)
        theta = pm.MvNormal("theta", np.zeros(d + 1), cov=sigma2 * np.eye(d + 1))
        NoisyRegressionStat("z", theta=theta, sigma2=sigma2, release=rel, **kw)
    return model


def test_shape_model_is_opt_in_and_recorded():
    """``x_model="shape"``: the shape family with moments (d = 1), recorded in the attrs;
    ``"auto"`` keeps the normal model with or without moments, and for d = 2; ``"shape"``
    refuses a release without moments by name."""
    rng = np.random.default_rng(0)
    with_moments, without = _release(rng), _release(rng, moments=None)
    assert regression_attrs(_node(with_moments))["pymc_dp_x_model_z"] == "normal"
    model = _node(with_moments, x_model="shape")
    assert regression_attrs(model)["pymc_dp_x_model_z"] == "shape"
    names = {v.name for v in model.free_RVs}
    assert {"z_x_skew", "z_x_excess"} <= names and "z_x_kurt" in model.named_vars
    assert "z_x_shape" in {v.name for v in model.potentials}
    assert regression_attrs(_node(without))["pymc_dp_x_model_z"] == "normal"
    assert regression_attrs(_node(with_moments, x_model="normal"))["pymc_dp_x_model_z"] == "normal"
    assert regression_attrs(_node(_release(rng, d=2)))["pymc_dp_x_model_z"] == "normal"
    with pytest.raises(ValueError, match=r"x_model='shape'.*moments_share"):
        _node(without, x_model="shape")


def test_moment_likelihood_matches_a_hand_computation():
    """Uniform x on [a, b] is the shape family with γ = 0, κ = 1.8: the released sums' log
    likelihood equals the convolution of N(n E x^k, n Var_normal(x^k)) with the Laplace noise,
    integrated numerically with E x^k = (b^{k+1} − a^{k+1}) / ((k + 1)(b − a))."""
    a, b, n, lap = -0.3, 0.7, 150, 3.0
    mu, var = (a + b) / 2, (b - a) ** 2 / 12
    released = np.array([2.0, 5.5])
    shape = XShape(np.array(0.0), np.array(1.8), released, np.array([3, 4]), np.array(lap))
    got = moment_term(mu, var, 0.0, 1.8, n, shape)
    normal = stats.norm(mu, np.sqrt(var))
    want = 0.0
    for value, k in zip(released, (3, 4), strict=True):
        mean = n * (b ** (k + 1) - a ** (k + 1)) / ((k + 1) * (b - a))
        sd = np.sqrt(n * (normal.moment(2 * k) - normal.moment(k) ** 2))
        dens = integrate.quad(
            lambda t, m=mean, s=sd, v=value: (
                stats.norm.pdf(t, m, s) * stats.laplace.pdf(v - t, 0, lap)
            ),
            mean - 12 * sd, mean + 12 * sd, points=[value], limit=200,
        )[0]  # fmt: skip
        want += np.log(dens)
    assert got == pytest.approx(want, rel=1e-6)


def test_shape_law_has_the_families_moments():
    """The law of (x̄, S): log ratio 0 at the normal shape; its Gamma and conditional normal
    at a point against SciPy; and E S, Var S, Cov(x̄, S) against 20 000 simulated samples of
    n = 40 uniform and exponential covariates (within 4 Monte Carlo standard errors)."""
    assert float(shape_log_ratio(0.2, 9.0, 0.1, 0.3, 0.0, 3.0, 40)) == 0.0
    n, mu, var, g, k = 40, 0.1, 0.3, 0.8, 4.5
    c = ((n - 1) * k - n + 3) / (2 * n)
    cov = (n - 1) * g * var**1.5 / n
    var_s = 2 * c * (n - 1) * var**2
    xbar, s = 0.2, 10.0
    centre = mu + cov / var_s * (s - (n - 1) * var)
    want = (stats.gamma.logpdf(s, (n - 1) / c / 2, scale=2 * c * var)
            + stats.norm.logpdf(xbar, centre, np.sqrt(var / n - cov**2 / var_s))
            - stats.chi2.logpdf(s / var, n - 1) + np.log(var)
            - stats.norm.logpdf(xbar, mu, np.sqrt(var / n)))  # fmt: skip
    assert float(shape_log_ratio(xbar, s, mu, var, g, k, n)) == pytest.approx(want, rel=1e-10)
    rng = np.random.default_rng(3)
    for u, g, k in [(rng.uniform(-np.sqrt(3), np.sqrt(3), (20000, n)), 0.0, 1.8),
                    (rng.exponential(1.0, (20000, n)) - 1.0, 2.0, 9.0)]:  # fmt: skip
        x = mu + np.sqrt(var) * u
        xb, sc = x.mean(axis=1), ((x - x.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
        c = ((n - 1) * k - n + 3) / (2 * n)
        for got, want in [
            (sc.mean(), (n - 1) * var),
            (sc.var(), 2 * c * (n - 1) * var**2),
            (np.cov(xb, sc)[0, 1], (n - 1) * g * var**1.5 / n),
        ]:
            se = np.std(sc) * np.sqrt(var / n) / np.sqrt(len(sc)) + np.std(sc) ** 2 / np.sqrt(
                len(sc) / 2
            )  # a generous scale for the three statistics
            assert abs(got - want) < 4 * se


def test_shape_law_mean_of_xbar_given_s_matches_simulation():
    """The tie of x̄ to S, its sign and size: 20 000 samples of n = 100 exponential records
    (γ = 2, κ = 9; the clipped design's skew sign): E[x̄ | S] rises with S, and its mean over
    each of the middle eight deciles of S is the model's μ + Cov(x̄, S)/Var S · (S − (n − 1)σ²)
    to 0.15 sd of x̄ (the extreme deciles, where the true mean bends, to 0.35 sd)."""
    n, rng = 100, np.random.default_rng(11)
    x = rng.exponential(1.0, (20000, n))
    xb, sc = x.mean(axis=1), ((x - x.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
    c = ((n - 1) * 9.0 - n + 3) / (2 * n)
    beta = ((n - 1) * 2.0 / n) / (2 * c * (n - 1))
    edges = np.quantile(sc, np.linspace(0, 1, 11))
    which = np.clip(np.searchsorted(edges, sc, side="right") - 1, 0, 9)
    got = np.array([xb[which == i].mean() for i in range(10)])
    want = np.array([1.0 + beta * (sc[which == i].mean() - (n - 1)) for i in range(10)])
    assert np.all(np.diff(got) > 0) and beta > 0
    sd = 1.0 / np.sqrt(n)
    assert np.all(np.abs(got - want)[1:-1] < 0.15 * sd)
    assert np.all(np.abs(got - want) < 0.35 * sd)


def test_potential_is_the_kernels_shape_term():
    """The model's ``pm.Potential`` equals :func:`shape_term` at the same point, less γ's prior
    density, which is the variable ``z_x_skew``'s own (a truncated Cauchy): together they are
    the kernel's target."""
    rel = _release(np.random.default_rng(5))
    model = _node(rel, x_model="shape")
    point = model.initial_point()
    outs = model.replace_rvs_by_values(
        [model[v] for v in ("z_x_shape", "z_x_cov", "z_x_skew", "z_x_kurt")]
    )
    fn = model.compile_fn(outs, inputs=model.value_vars, on_unused_input="ignore", point_fn=True)
    s = np.array([1.5, 15.0, 40.0, 8.0, 30.0])
    point = dict(point)
    point["z_s"] = s
    point["z_x_loc"] = np.array([0.05])
    point["z_x_cov"] = np.array([[0.09]])
    point["z_x_skew_interval__"] = np.array(0.3)
    point["z_x_excess_interval__"] = np.array(-0.4)
    got, cov, skew_m, kurt_m = fn(point)
    got, cov = float(got), float(cov[0, 0])
    skew, kurt = float(skew_m), float(kurt_m)
    assert -2 < skew < 2 and 1 + skew**2 < kurt < 7 + skew**2
    fm = rel.fourth_moments
    shape = XShape(np.array(skew), np.array(kurt), fm.value, fm.powers[:, 0],
                   np.array(fm.sensitivity / fm.epsilon))  # fmt: skip
    xbar = s[0] / rel.n
    want = shape_term(xbar, s[1] - rel.n * xbar**2, 0.05, cov, rel.n, shape, skew, kurt)
    assert got + ShapePrior().log_skew(skew) == pytest.approx(float(want), rel=1e-6)
    # The variable's density differs from log_skew by a constant.
    logp = model.compile_logp(vars=[model["z_x_skew"]], jacobian=False)
    gap = []
    for g in (-1.9, -0.3, 0.0, 0.7, 1.95):
        point["z_x_skew_interval__"] = np.log((g + 2.0) / (2.0 - g))
        gap.append(float(logp(point)) - float(ShapePrior().log_skew(g)))
    assert np.ptp(gap) < 1e-9


def test_shape_prior_draws_are_its_density():
    """:meth:`ShapePrior.draw` and :meth:`ShapePrior.log_skew` are the same prior: γ against the
    truncated Cauchy's CDF (KS, 20 000 draws, α = 0.001), the excess uniform on (0, 6); half
    of γ's mass is within ±0.22 and its tail reaches the clipped exponential's 1.79."""
    rng = np.random.default_rng(11)
    prior = ShapePrior()
    g, k = prior.draw(rng, 20_000)
    edge = stats.cauchy.cdf(2.0, scale=0.25)
    cdf = lambda v: (stats.cauchy.cdf(v, scale=0.25) - (1 - edge)) / (2 * edge - 1)  # noqa: E731
    assert stats.kstest(g, cdf).pvalue > 0.001
    assert stats.kstest(k - 1 - g**2, stats.uniform(0, 6).cdf).pvalue > 0.001
    grid = np.linspace(-1.99, 1.99, 2001)
    dens = np.exp(prior.log_skew(grid))
    dens /= integrate.trapezoid(dens, grid)
    hist, edges = np.histogram(g, bins=20, range=(-2, 2), density=True)
    mid = 0.5 * (edges[1:] + edges[:-1])
    assert np.allclose(hist[[0, 4, 15, 19]], np.interp(mid[[0, 4, 15, 19]], grid, dens),
                       rtol=0.25)  # fmt: skip
    assert 0.47 < np.mean(np.abs(g) < 0.22) < 0.53 and 0.003 < np.mean(g > 1.79) < 0.008
    uniform = ShapePrior(skew_scale=None)
    assert np.all(uniform.log_skew(grid) == 0.0)
    assert stats.kstest(uniform.draw(rng, 5000)[0], stats.uniform(-2, 4).cdf).pvalue > 0.001


def test_holding_gamma_kappa_or_the_raw_moments_is_the_same_state():
    """:func:`hold` converts between (γ, κ) and (E x³, E x⁴) at (μ, σ²) both ways, per member;
    the two targets of a move of (μ, σ²) differ by the raw moments' Jacobian σ⁻⁷ alone; the
    released sums of the grid (n = 100, Laplace scale 160) are not informative, sums with scale
    2 are."""
    rng = np.random.default_rng(3)
    loc, var = rng.normal(0, 0.5, (4, 1)), rng.uniform(0.05, 1, (4, 1))
    skew = rng.uniform(-2, 2, (4, 1))
    kurt = 1 + skew**2 + rng.uniform(0, 6, (4, 1))
    m3, m4 = raw_moments(loc, var, skew, kurt)
    raw = XShape(m3, m4, np.full((4, 1, 2), 50.0), np.array([3, 4]), np.full((4, 1), 2.0))
    mixed = hold(raw, np.array([[True], [False], [True], [False]]), loc, var)
    assert np.allclose(mixed.third[::2], skew[::2]) and np.allclose(mixed.fourth[1::2], m4[1::2])
    assert np.allclose(standardised(mixed, loc, var), (skew, kurt))
    back = hold(mixed, False, loc, var)
    assert np.allclose(back.third, m3) and np.allclose(back.fourth, m4)
    xbar, scatter = loc + 0.01, 99 * var * 1.1
    got = shape_term(xbar, scatter, loc, var, 100, hold(raw, True, loc, var))
    want = shape_term(xbar, scatter, loc, var, 100, raw) + 3.5 * np.log(var)
    assert np.allclose(got, want)
    assert np.all(informative(raw))
    assert not np.any(informative(raw._replace(moments=np.full((4, 1, 2), 1.25),
                                               moment_scale=np.full((4, 1), 160.0))))  # fmt: skip


def _shape_joint(rng, rows, n, scale, m_scale):
    """(φ, ψ, s, sums of x³ and x⁴, z) from the shape model: (x̄, S) from the shape law,
    X̃ᵀy | X̃ᵀX̃ and the residual sum of squares from normal regression."""
    prior = NIG(*(np.broadcast_to(np.asarray(a, float), (rows, *np.shape(a))) for a in PRIOR))
    x_prior = NIW(*(np.broadcast_to(np.asarray(a, float), (rows, 1, *np.shape(a)))
                    for a in X_PRIOR))  # fmt: skip
    theta, sigma2 = draw_nig(rng, prior)
    loc, cov = draw_niw(rng, x_prior)
    sp = ShapePrior()
    skew, kurt = sp.draw(rng, (rows, 1))
    mu, v = loc[..., 0], cov[..., 0, 0]
    c = ((n - 1) * kurt - n + 3) / (2 * n)
    var_s = 2 * c * (n - 1) * v**2
    cxs = (n - 1) * skew * v**1.5 / n
    scat = rng.gamma((n - 1) / c / 2, 2 * c * v)
    xbar = (
        mu
        + cxs / var_s * (scat - (n - 1) * v)
        + np.sqrt(v / n - cxs**2 / var_s) * (rng.standard_normal((rows, 1)))
    )
    gram = np.empty((rows, 2, 2))
    gram[:, 0, 0], gram[:, 0, 1] = n, n * xbar[:, 0]
    gram[:, 1, 0], gram[:, 1, 1] = n * xbar[:, 0], scat[:, 0] + n * xbar[:, 0] ** 2
    chol = np.linalg.cholesky(gram)
    xty = (gram @ theta[..., None])[..., 0] + np.sqrt(sigma2)[:, None] * (
        chol @ rng.standard_normal((rows, 2, 1))
    )[..., 0]
    rss = sigma2 * rng.chisquare(n - 2, rows)
    yty = rss + np.sum(xty * np.linalg.solve(gram, xty[..., None])[..., 0], axis=-1)
    s = np.stack([gram[:, 0, 1], gram[:, 1, 1], xty[:, 0], xty[:, 1], yty], -1)[:, None]
    third, fourth = raw_moments(mu, v, skew, kurt)
    shape = XShape(third, fourth, np.zeros((rows, 1, 2)), np.array([3, 4]),
                   np.full((rows, 1), m_scale))  # fmt: skip
    # The released sums: n E x^k + a normal sampling error + Laplace noise (the model's law).
    sd = np.sqrt(v)
    means = [mu**3 + 3 * mu * v + skew * sd**3,
             mu**4 + 6 * mu**2 * v + 4 * mu * skew * sd**3 + kurt * v**2]  # fmt: skip
    pw = [np.ones_like(mu), mu]
    for j in range(2, 9):
        pw.append(mu * pw[-1] + (j - 1) * v * pw[-2])
    sums = np.stack([n * m + np.sqrt(n * (pw[2 * k] - pw[k] ** 2)) * rng.standard_normal(m.shape)
                     for m, k in zip(means, (3, 4), strict=True)], -1)  # fmt: skip
    shape = shape._replace(moments=sums + rng.laplace(0, m_scale, sums.shape))
    z = s + rng.laplace(0.0, scale, s.shape)
    return prior, x_prior, pack_parameters(theta, sigma2, loc, cov), shape, (skew, kurt), s, z


@pytest.mark.slow
@pytest.mark.parametrize(
    ("scale", "n", "m_scale"),
    [(24.33, 20, 2.0), (1.0, 20, 2.0), (1.0, 20, 0.05), (24.33, 100, 1600.0)],
)
def test_sweep_with_the_shape_model_leaves_the_joint_posterior_invariant(scale, n, m_scale):
    """Geweke's test of the default's iteration with released moments, as ``sample_regression``
    runs it: (φ, γ, κ, s, sums of x³ and x⁴, z) from the shape model (1500 members), then three
    rounds of (w | s, z; θ, σ² | s; the NIW proposal of (μ_x, Σ_x) accepted by the shape's
    factor and the moves of (γ, κ); one collapsed sweep). θ, σ², μ_x, σ_x², γ and κ must still
    follow the prior (KS against prior draws at α = 0.001 / 7) and have moved. n = 20 with
    Laplace scale 2 on the sums (4 % of the members informative: the moves of (μ_x, Σ_x) hold
    (γ, κ) in the others), statistic's scale 24.33 and 1, and 0.05 (92 % informative: half the
    moves hold the raw moments); n = 100 with the grid's scale 1600 on the sums."""
    rows = 1500
    rng = np.random.default_rng(43)
    prior, x_prior, u, shape, (skew0, _), s, z = _shape_joint(rng, rows, n, scale, m_scale)
    share = np.mean(informative(shape))
    assert share > 0.9 if m_scale < 1 else share < 0.05  # the noise alone tops 4b: e⁻⁴
    start = u.copy()
    target = collapsed_target(z, np.ones_like(z), [n], prior, x_prior)
    adapt = RandomWalkAdaptation(u, initial_sd=2.0 * initial_step_sd(prior, x_prior))
    adapt.center = np.broadcast_to(adapt.center.mean(axis=0), u.shape)
    fit = moment_prior(np.random.default_rng(0), prior, NIW(*(a[:, 0] for a in x_prior)))
    sizes = np.array([float(n)])
    for _ in range(3):
        w = draw_noise_variance(rng, residual=z - s, scale=scale)
        theta, sigma2 = draw_nig(rng, nig_update(prior, statistic=s[:, 0], n=n))
        now = unpack_parameters(u, 1)
        loc, cov = draw_niw(rng, niw_update(x_prior, statistic=s, n=sizes))
        loc, cov, shape = shape_gibbs(rng, shape, s, sizes, (loc, cov), (now.x_loc, now.x_cov))
        target = target._replace(noise_variance=w, x_shape=shape)
        state, _ = collapsed_sweep(rng, pack_parameters(theta, sigma2, loc, cov), s,
                                   target=target, adaptation=adapt, fit=fit, moves=2, tries=8,
                                   tune=False)  # fmt: skip
        u, s = state.params, state.suffstat
    par = unpack_parameters(u, 1)
    skew, kurt = standardised(shape, par.x_loc[..., 0], par.x_cov[..., 0, 0])
    assert np.mean(np.any(u != start, axis=-1)) > 0.5
    assert np.mean(np.abs(skew - skew0) > 1e-9) > 0.5
    _, _, ref_u, _, (ref_skew, ref_kurt), _, _ = _shape_joint(np.random.default_rng(7), 6000, n,
                                                              scale, m_scale)  # fmt: skip
    ref = unpack_parameters(ref_u, 1)
    pairs = [
        (par.theta[:, 0], ref.theta[:, 0]),
        (par.theta[:, 1], ref.theta[:, 1]),
        (par.sigma2, ref.sigma2),
        (par.x_loc[:, 0, 0], ref.x_loc[:, 0, 0]),
        (par.x_cov[:, 0, 0, 0], ref.x_cov[:, 0, 0, 0]),
        (skew[:, 0], ref_skew[:, 0]),
        (kurt[:, 0], ref_kurt[:, 0]),
    ]
    for ours, theirs in pairs:
        assert stats.ks_2samp(ours, theirs).pvalue > 1e-3 / len(pairs)


def test_sample_regression_with_moments_records_the_shape():
    """The batched default takes the moments: its trace has γ and κ inside the prior, and it
    refuses them for d = 2 by name."""
    rng = np.random.default_rng(9)
    rels = [_release(rng) for _ in range(2)]
    fm = rels[0].fourth_moments
    kw = dict(released=np.stack([r.value for r in rels]), n=rels[0].n, prior=PRIOR,
              x_prior=X_PRIOR, scale=rels[0].scale, draws=30, tune=30, tries=4)  # fmt: skip
    tr = sample_regression(
        1,
        **kw,
        moments=np.stack([r.fourth_moments.value for r in rels]),
        moment_powers=fm.powers,
        moment_scale=fm.sensitivity / fm.epsilon,
    )
    assert tr.x_model == "shape" and tr.x_skew.shape == (2, 30, 2)
    assert np.all(np.abs(tr.x_skew) < 2) and np.all(tr.x_kurt > 1 + tr.x_skew**2)
    assert sample_regression(1, **kw).x_model == "normal"
    rel2 = _release(rng, d=2)
    with pytest.raises(ValueError, match="d = 1 only"):
        sample_regression(1, released=rel2.value[None], n=rel2.n, prior=NIG(
            np.zeros(3), np.eye(3), np.array(3.0), np.array(1.0)), x_prior=NIW(
            np.zeros(2), np.array(1.0), np.array(4.0), np.eye(2)), scale=rel2.scale, draws=5,
            tune=0, moments=rel2.fourth_moments.value[None],
            moment_powers=rel2.fourth_moments.powers, moment_scale=1.0)  # fmt: skip


@pytest.mark.slow
def test_shape_chains_leave_a_start_drawn_far_from_the_statistic():
    """Both ``pm.sample`` chains of the shape model reach the release's spread of x.

    The release of ``benchmarks/regression_ess.py --d 1`` (n = 500, x uniform on [−1, 1], so
    σ_x² = 1/3, ε = 1, ``moments_share=0.2``: the sums inform), chain seed 1. When a chain's
    (μ_x, Σ_x) started from their prior, chain 0 drew μ_x = −0.48, σ_x² = 0.063 with s at the
    model's initial point (x̄ = 0), 43 sds from its law; the shape factor there was e²⁰⁰ above
    that at any NIW draw given s, so every proposal was rejected and σ_x² stayed 0.063 for the
    whole run (R-hat 2.35). Fixed: they start from their NIW posterior given s. The chain that
    mixes reaches σ_x² ≈ 1/3 within ten iterations; the check is on the last ten of 40.
    """
    rng = np.random.default_rng(1)
    x = rng.uniform(-1.0, 1.0, size=(500, 1))
    y = np.clip(0.2 + 0.5 * x[:, 0] + 0.2 * rng.standard_normal(500), -2.0, 2.0)
    rel = release_regression(x, y, epsilon=1.0, moments_share=0.2, rng=1,
                             x_bounds=[(-1.0, 1.0)], y_bounds=(-2.0, 2.0))  # fmt: skip
    with pm.Model():
        sigma2 = pm.InverseGamma("sigma2", 3.0, 0.1)
        theta = pm.MvNormal("theta", np.zeros(2), cov=10.0 * sigma2 * np.eye(2))
        NoisyRegressionStat("z", theta=theta, sigma2=sigma2, release=rel, x_model="shape")
        idata = pm.sample(draws=10, tune=30, chains=2, cores=1, random_seed=1,
                          progressbar=False, compute_convergence_checks=False)  # fmt: skip
    var = idata.posterior["z_x_cov"].values.reshape(2, 10)
    assert np.all((var > 0.2) & (var < 0.6)), var


def test_moment_likelihood_stays_a_density_where_the_sums_sampling_variance_is_huge():
    """The released moments' log likelihood at the sampling variances of a runaway σ_x².

    A sum of x⁴ has sampling variance τ² = n Var(x⁴) ∝ σ_x⁸: 10²² at σ_x² ≈ 10⁴ (n = 1000). The
    normal–Laplace convolution is below the normal density's peak, −½ log(2πτ²), everywhere,
    and for τ ≫ b it is the normal N(r; 0, τ² + 2b²). The closed form used to cancel two terms
    of size τ²/2b², and gave +8189 nats at τ² = 10²², b = 10, and +1.1 · 10¹² at τ² = 10³⁰
    (issue 34: the shape model's chains ran to σ_x² = 10⁵–10¹⁹ on that spurious mass).
    """
    for b in (10.0, 160.0):
        for var in (1e10, 1e14, 1e18, 1e22, 1e30, 1e44):
            tau = np.sqrt(var)
            r = np.array([0.0, 300.0, -2e3, 0.5 * tau, -3.0 * tau])
            got = moment_log_likelihood(r[:, None], np.zeros((5, 1)), np.full((5, 1), var), b)
            assert np.all(got <= -0.5 * np.log(2.0 * np.pi * var) + 1e-9), (b, var, got)
            ref = stats.norm.logpdf(r, 0.0, np.sqrt(var + 2.0 * b * b))
            np.testing.assert_allclose(got, ref, rtol=0, atol=1e-6)


@pytest.mark.slow
def test_shape_chain_does_not_run_away_on_the_binary_release_that_crashed():
    """Release 24 of the binary cell at n = 1000, ε = 1 (issue 34), chain seed 15.

    ``benchmarks/regression_x_models.py --trials 200 --designs binary --n 1000 --eps 1
    --moments yes --methods default`` crashed with a ``LinAlgError``: σ_x² of two chains ran
    away during tuning (to 10⁵–10⁸) while s stayed sane, carried by the rounding error of the
    released moments' likelihood at large σ_x² (the test above).
    ``benchmarks/regression_shape_runaway.py --design binary --releases 24 --single 16
    --iterations 80`` finds this release alone running away at iteration 73 with chain seed 15
    (σ_x² 5 · 10⁴). The release's Bernoulli(0.3) covariates have σ_x² = 0.21; every draw must
    stay below 10 (before the fix they were 10⁴ and more).
    """
    from pymc_dp.regression import default_x_prior

    released = [299.47811604672677, 304.6880514734114, -881.4304102520915, -379.9742906389406,
                969.8635161300472]  # fmt: skip
    tr = sample_regression(
        15, released=np.array([released]), n=1000, prior=PRIOR,
        x_prior=default_x_prior([(0.0, 1.0)]), scale=21.562500021562503, tries=8, tune=80,
        draws=20, chains=2, moments=np.array([[283.3626126516987, 314.66032471162987]]),
        moment_powers=[[3], [4]], moment_scale=10.0,
    )  # fmt: skip
    var = tr.x_cov[..., 0, 0, 0]
    assert np.all(var < 10.0), var.max(axis=1)
