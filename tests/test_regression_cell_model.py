"""The cell model of x (every covariate binary): exact law, moments, proposal, sampler."""

from __future__ import annotations

import arviz as az
import numpy as np
import pytest
from scipy import stats

from pymc_dp.curator.regression.statistics import (
    regression_statistic,
    released_pairs,
    unpack_statistic,
)
from pymc_dp.regression import NIG, draw_nig, nig_update
from pymc_dp.regression.engine.cells import cell_start, sample_cell_regression
from pymc_dp.regression.kernels import mixed_move
from pymc_dp.regression.kernels.cell_model import (
    CellParameters,
    cell_counts,
    cell_fiber,
    cell_layout,
    cell_record_moments,
    cell_statistic_logpdf,
    draw_cell_prior,
    draw_cell_probs,
    draw_cell_statistic,
)
from pymc_dp.regression.kernels.mixed_move import (
    MixedTarget,
    independence_move,
    joint_move,
    mixed_state,
    pack_cells,
    statistic_move,
    unpack_cells,
)
from pymc_dp.regression.kernels.normal_model import response_logpdf, split_statistic

PAIR = cell_layout(2, "pair")
LEVELS = cell_layout(3, "categories")
CUBE = cell_layout(3, "cube")
CUBE_PROBS = np.array([0.25, 0.1, 0.15, 0.1, 0.1, 0.1, 0.05, 0.15])


def _records(rng, par, layout, n, size):
    """Statistics of simulated records, conditioned on A being positive definite."""
    out = []
    while len(out) < size:
        cell = rng.choice(len(layout.corners), size=n, p=par.probs)
        x = layout.corners[cell]
        if np.linalg.matrix_rank(np.column_stack([np.ones(n), x])) < layout.d + 1:
            continue
        y = par.theta[0] + x @ par.theta[1:] + np.sqrt(par.sigma2) * rng.standard_normal(n)
        out.append(regression_statistic(x, y))
    return np.array(out)


def _par(layout):
    d = layout.d
    probs = {"pair": np.array([0.4, 0.2, 0.3, 0.1]), "cube": CUBE_PROBS}.get(
        layout.kind, np.full(d + 1, 0.25)
    )
    return CellParameters(np.linspace(0.3, -0.6, d + 1), np.array(0.5), probs)


@pytest.mark.parametrize("layout", [PAIR, LEVELS, cell_layout(1, "categories")])
def test_counts_are_read_from_the_statistic_of_records(layout):
    rng = np.random.default_rng(0)
    cell = rng.choice(len(layout.corners), size=25)
    s = regression_statistic(layout.corners[cell], rng.normal(size=25))
    counts, ok = cell_counts(s, 25, layout)
    assert ok
    np.testing.assert_array_equal(counts, np.bincount(cell, minlength=len(layout.corners)))
    for pos in layout.covariate_positions:  # every entry of A is tied to the counts
        broken = s.copy()
        broken[pos] += 0.5
        assert not cell_counts(broken, 25, layout)[1], pos


@pytest.mark.parametrize("layout", [PAIR, LEVELS, CUBE])
def test_draws_have_the_law_of_simulated_records(layout):
    """KS per released coordinate, 3000 exact draws against 3000 simulations of n = 12 records
    (small, so that A is sometimes singular and the conditioning matters)."""
    rng = np.random.default_rng(1)
    par, n = _par(layout), 12
    exact = draw_cell_statistic(rng, par, n, layout, size=(3000,))
    simulated = _records(rng, par, layout, n, 3000)
    for j in range(exact.shape[-1]):
        if np.all(exact[:, j] == 0) and np.all(simulated[:, j] == 0):
            continue  # two levels of a factor are never 1 together
        assert stats.ks_2samp(exact[:, j], simulated[:, j]).pvalue > 1e-3, j


@pytest.mark.parametrize("layout", [PAIR, LEVELS, CUBE])
def test_record_moments_match_simulated_records(layout):
    rng = np.random.default_rng(2)
    par = _par(layout)
    cell = rng.choice(len(layout.corners), size=200_000, p=par.probs)
    x = layout.corners[cell]
    y = par.theta[0] + x @ par.theta[1:] + np.sqrt(par.sigma2) * rng.standard_normal(len(x))
    w = np.column_stack([np.ones(len(x)), x, y])
    rows, cols = released_pairs(layout.d)
    t = w[:, rows] * w[:, cols]
    mean, cov = cell_record_moments(par, layout)
    np.testing.assert_allclose(mean, t.mean(0), atol=0.02)
    np.testing.assert_allclose(cov, np.cov(t.T), atol=0.06)


def _compositions(n, cells):
    """Every vector of ``cells`` whole counts summing to n, ``(M, cells)``."""
    if cells == 1:
        return np.array([[n]])
    return np.array([[k, *rest] for k in range(n + 1) for rest in _compositions(n - k, cells - 1)])


def test_the_cube_fiber_holds_every_count_table_of_its_statistic():
    """Three binary covariates: every table of n = 7 records is in the fiber of its own
    statistic, and the fiber holds exactly the tables with the same two-way counts."""
    tables = _compositions(7, 8)
    grams = np.einsum("mc,ci,cj->mij", tables.astype(float), CUBE.records, CUBE.records)
    rows, cols = released_pairs(3)
    for index in np.random.default_rng(11).choice(len(tables), 40, replace=False):
        s = np.zeros(len(rows))
        s[CUBE.covariate_positions] = grams[index][rows[CUBE.covariate_positions],
                                                   cols[CUBE.covariate_positions]]  # fmt: skip
        counts, valid, ok = cell_fiber(s, 7, CUBE)
        same = tables[np.all(grams == grams[index], axis=(1, 2))]
        assert ok
        np.testing.assert_array_equal(np.sort(counts[valid], axis=0), np.sort(same, axis=0))
    with pytest.raises(ValueError, match="use cell_fiber"):
        cell_counts(s, 7, CUBE)


def test_the_cube_law_sums_the_multinomial_over_the_fiber():
    """The count part of the cube's density (the logpdf less the responses' part) is the
    multinomial probability of the two-way counts, summed by brute force over every table of
    n = 7 records; off the model (a fraction, a two-way count no table has) −∞."""
    rng = np.random.default_rng(12)
    n, par = 7, _par(CUBE)
    tables = _compositions(n, 8)
    grams = np.einsum("mc,ci,cj->mij", tables.astype(float), CUBE.records, CUBE.records)
    mass = stats.multinomial.pmf(tables, n, par.probs)
    s = draw_cell_statistic(rng, par, n, CUBE, size=(30,))
    law = cell_statistic_logpdf(s, par, n, CUBE)
    responses = response_logpdf(split_statistic(s, n), theta=par.theta, sigma2=par.sigma2, n=n)
    for one, value in zip(s, law - responses, strict=True):
        same = np.all(grams == unpack_statistic(one, n)[:4, :4], axis=(1, 2))
        assert np.exp(value) == pytest.approx(mass[same].sum(), rel=1e-10)
    off = np.array([s[0].copy(), s[0].copy()])
    off[0][[0, 3]] += 0.5  # Σx₁ (and Σx₁², its copy) a fraction
    off[1][[4, 6]] = off[1][0] + 1.0  # Σx₁x₂ above Σx₁
    assert np.all(cell_statistic_logpdf(off, par, n, CUBE) == -np.inf)


def test_the_cube_conjugate_draw_is_the_posterior_of_the_probabilities():
    """π | s for three binaries (a uniform triple count on the fiber, then the Dirichlet)
    against importance sampling: Dirichlet(1, …, 1) draws weighted by the sum over the fiber of
    the multinomial, computed by brute force over every table of n = 8 records."""
    rng = np.random.default_rng(13)
    n = 8
    x = CUBE.corners[[0, 3, 5, 6, 7, 7, 1, 2]]
    s = regression_statistic(x, rng.normal(size=n))
    tables = _compositions(n, 8)
    grams = np.einsum("mc,ci,cj->mij", tables.astype(float), CUBE.records, CUBE.records)
    own = np.einsum("c,ci,cj->ij", np.bincount([0, 3, 5, 6, 7, 7, 1, 2], minlength=8),
                    CUBE.records, CUBE.records)  # fmt: skip
    fiber = tables[np.all(grams == own, axis=(1, 2))]
    assert len(fiber) > 1
    prior = rng.dirichlet(np.ones(8), size=200_000)
    weight = stats.multinomial.pmf(fiber[None], n, prior[:, None]).sum(axis=1)
    expected = weight @ prior / weight.sum()
    draws = draw_cell_probs(rng, np.broadcast_to(s, (100_000, s.size)), n, CUBE)
    np.testing.assert_allclose(draws.mean(0), expected, atol=0.004)


def test_logpdf_is_the_multinomial_times_the_responses_part():
    rng = np.random.default_rng(3)
    par, n = _par(PAIR), 40
    s = draw_cell_statistic(rng, par, n, PAIR, size=(5,))
    counts, _ = cell_counts(s, n, PAIR)
    multinomial = stats.multinomial.logpmf(counts, n, par.probs)
    responses = response_logpdf(split_statistic(s, n), theta=par.theta, sigma2=par.sigma2, n=n)
    np.testing.assert_allclose(cell_statistic_logpdf(s, par, n, PAIR), multinomial + responses)
    # Off the model: a count below 0, a fraction, a singular A (two corners only).
    off = [s[0].copy() for _ in range(3)]
    off[0][3] = s[0][0] + 1.0  # Σx₁x₂ > Σx₁
    off[1][[0, 2]] += 0.5
    x = PAIR.corners[np.repeat([0, 3], 20)]
    off[2] = regression_statistic(x, rng.normal(size=40))
    assert np.all(cell_statistic_logpdf(np.array(off), par, n, PAIR) == -np.inf)


def _normal_proposal(layout, n, scale, rng):
    par = CellParameters(*(np.asarray(a)[None] for a in _par(layout)))
    s = draw_cell_statistic(rng, par, n, layout)
    prior = NIG(np.zeros(layout.d + 1), np.eye(layout.d + 1), np.array(3.0), np.array(1.0))
    z = s + rng.laplace(0.0, scale, s.shape)
    target = MixedTarget(z, np.full(s.shape, 2 * scale**2), float(n), prior, None, layout)
    return mixed_move._proposal(par, target), target


@pytest.mark.parametrize("layout", [PAIR, LEVELS, CUBE])
def test_the_proposal_of_the_counts_has_the_density_it_reports(layout):
    """Draws of the integer coordinates, one at a time and rounded, against exp(log q) of each
    value drawn: the reported masses sum to 1 over the values seen, and the frequencies fit them
    (chi-square, p > 0.001). Readings of noise scale 0.7 spread k over a few values each (0.25
    for the cube's six coordinates, whose values seen would otherwise hold 93 % of the mass)."""
    rng = np.random.default_rng(4)
    prop, target = _normal_proposal(layout, 60, 0.25 if layout.hidden else 0.7, rng)
    free = mixed_move._free(target)
    one = mixed_move._Proposal(
        *(None if a is None else np.broadcast_to(a[0], (20_000, *a.shape[2:])) for a in prop[:5])
    )
    k, log_q = mixed_move._integer_steps(one, free, 60.0, rng, None)
    _, first, freq = np.unique(k, axis=0, return_index=True, return_counts=True)
    mass = np.exp(log_q[first])
    assert mass.sum() > 0.995
    keep = mass * len(k) >= 5
    expected = mass[keep] / mass[keep].sum() * freq[keep].sum()
    assert stats.chisquare(freq[keep], expected).pvalue > 1e-3
    # log q of given k is the density the draw reported.
    _, again = mixed_move._integer_steps(one, free, 60.0, None, k.copy())
    np.testing.assert_allclose(again, log_q)


def test_the_cube_proposes_its_responses_from_their_exact_moments_given_the_counts():
    """Given the counts the covariates are known: the responses' law alone (the second member)
    has the mean and covariance of (Σy, Σx_j y, Σy²) over simulated y ~ N(X̃θ, σ²) at those
    records (20 000 draws, 5 standard errors for the means, 6 % of sd_i sd_j for the covariances),
    and the first member is that normal times the readings N(z; ·, diag w)."""
    rng = np.random.default_rng(11)
    n = 60
    x = CUBE.corners[rng.choice(8, size=n, p=CUBE_PROBS)]
    theta, sigma2 = np.array([0.3, -0.5, 0.8, 0.2]), 0.4
    prop, target = _normal_proposal(CUBE, n, 3.0, rng)
    prop = prop._replace(exact=(theta[None], np.array([sigma2])))
    free = mixed_move._free(target)
    k = regression_statistic(x, np.zeros(n))[free.k]
    means, chols = mixed_move._exact_responses(k[None], prop, target)
    y = theta[0] + x @ theta[1:] + np.sqrt(sigma2) * rng.standard_normal((20_000, n))
    rest = np.array([regression_statistic(x, row)[free.rest] for row in y])
    sd = rest.std(axis=0)
    assert np.all(np.abs(means[1, 0] - rest.mean(axis=0)) < 5 * sd / np.sqrt(len(rest)))
    cov = chols[1, 0] @ chols[1, 0].T
    assert np.all(np.abs(cov - np.cov(rest.T)) <= 0.06 * np.outer(sd, sd))
    w, z = target.noise_variance[0, free.rest], target.released[0, free.rest]
    precision = np.linalg.inv(cov) + np.diag(1 / w)
    post = chols[0, 0] @ chols[0, 0].T
    np.testing.assert_allclose(post, np.linalg.inv(precision), rtol=1e-8, atol=1e-10)
    expected = np.linalg.solve(precision, np.linalg.solve(cov, means[1, 0]) + z / w)
    np.testing.assert_allclose(means[0, 0], expected, rtol=1e-8)


def test_the_tuned_cubes_proposal_reports_its_own_density():
    """Once tuned the cube's proposal of s has three members (the fitted law of the counts, here
    the readings shifted by 3 records with half their variance; the law alone; the readings'
    normal): its reported density q is the one it draws from, so E_q[q′/q] = 1 for the untuned
    proposal q′ at the same φ, which shares two of its members (20 000 draws, 4 standard
    errors)."""
    rng = np.random.default_rng(12)
    size, n = 20_000, 60
    _, target = _normal_proposal(CUBE, n, 3.0, rng)
    par = CellParameters(*(np.repeat(np.asarray(a)[None], size, axis=0) for a in _par(CUBE)))
    z, w = (np.repeat(a, size, axis=0) for a in (target.released, target.noise_variance))
    target = target._replace(released=z, noise_variance=w)
    law = (z[:, CUBE.positions] + 3.0, np.broadcast_to(0.5 * 2 * 3.0**2 * np.eye(6), (size, 6, 6)))
    tuned = target._replace(counts_law=law)
    prop, untuned = mixed_move._proposal(par, tuned), mixed_move._proposal(par, target)
    assert prop.k_mean.shape[0] == 3 and untuned.k_mean.shape[0] == 2
    s = mixed_move._draw(rng, prop, tuned)
    ratio = np.exp(mixed_move._log_q(s, untuned, target) - mixed_move._log_q(s, prop, tuned))
    assert abs(ratio.mean() - 1.0) < 4 * ratio.std() / np.sqrt(size)


def _joint_prior_draws(rng, layout, size, n, scale):
    """(prior, φ, s, w, z) from the joint prior (:func:`draw_cell_prior`), with Laplace noise
    as a scale mixture: z = s + √w ε."""
    p = layout.d + 1
    prior = NIG(np.zeros(p), 0.5 * np.eye(p), np.array(20.0), np.array(1.9))
    par, s = draw_cell_prior(rng, prior, layout, size, n)
    w = rng.exponential(2.0 * scale**2, size=s.shape)  # Laplace = N(0, w), w ~ Exp(2b²)
    return prior, par, s, w, s + np.sqrt(w) * rng.standard_normal(s.shape)


def test_the_joint_prior_refuses_too_few_records():
    """With n < d + 1 no counts are regular: a ValueError, not an endless rejection loop."""
    prior = NIG(np.zeros(4), np.eye(4), np.array(3.0), np.array(1.0))
    with pytest.raises(ValueError, match="n must be at least d \\+ 1 = 4"):
        draw_cell_prior(np.random.default_rng(0), prior, LEVELS, 5, 3)


@pytest.mark.parametrize("laplace", [False, True], ids=["mixing-variances", "laplace-density"])
@pytest.mark.parametrize("layout", [PAIR, LEVELS, CUBE, "cube-fitted"])
def test_every_move_keeps_the_joint_prior(layout, laplace):
    """Geweke's test as for the mixed model: after 20 sweeps of the three moves from the joint
    prior, u keeps its prior law and (z − s)/√w stays standard normal (KS, 3000 chains); with
    the Laplace density in the target (what the samplers run), (z − s)/b stays Laplace.
    ``cube-fitted``: the cube once tuned, its proposal of the counts from a fitted law (here
    one off the counts' prior law: shifted by 2 records, half its covariance)."""
    fitted = layout == "cube-fitted"
    if fitted and not laplace:
        pytest.skip("the fitted law is the tuned cube's, whose target holds the Laplace density")
    layout = CUBE if fitted else layout
    rng = np.random.default_rng(5)
    size, n, scale = 3000, 30, 3.0
    prior, par, s, w, z = _joint_prior_draws(rng, layout, size, n, scale)
    if layout.hidden:  # the cube's moves integrate π out: u is (θ, log σ²)
        par = par._replace(probs=None)
    if laplace:
        target = MixedTarget(z, np.full(s.shape, 2 * scale**2), float(n), prior, None, layout,
                             laplace_scale=np.full((size, 1), scale))  # fmt: skip
    else:
        target = MixedTarget(z, w, float(n), prior, None, layout)
    if fitted:
        counts = s[:, CUBE.positions]
        law = (counts.mean(axis=0) + 2.0, 0.5 * np.cov(counts.T))
        target = target._replace(
            counts_law=tuple(np.broadcast_to(a, (size, *a.shape)) for a in law)
        )
    state = mixed_state(pack_cells(par), s, target)
    assert np.all(np.isfinite(state.log_target))
    k = state.params.shape[-1]
    factor = np.broadcast_to(0.15 * np.eye(k), (size, k, k))
    centre = np.broadcast_to(state.params.mean(axis=0), state.params.shape)
    chol = np.broadcast_to(np.linalg.cholesky(np.cov(state.params.T)), (size, k, k))
    for _ in range(20):
        state, _ = statistic_move(rng, state, target)
        state, _ = joint_move(rng, state, target, factor)
        state, _ = independence_move(rng, state, target, centre, chol, tries=4)
    before, after = pack_cells(par), state.params
    assert np.mean(np.any(after != before, axis=-1)) > 0.6
    for j in range(k):
        assert stats.ks_2samp(before[:, j], after[:, j]).pvalue > 1e-3, ("u", j)
    resid = (z - state.suffstat) / (scale if laplace else np.sqrt(w))
    for j in range(s.shape[1]):
        assert stats.kstest(resid[:, j], "laplace" if laplace else "norm").pvalue > 1e-3, ("s", j)


def test_parameters_round_trip_and_the_conjugate_draw_is_dirichlet():
    par = _par(LEVELS)
    back, _ = unpack_cells(pack_cells(par), LEVELS)
    np.testing.assert_allclose(back.probs, par.probs)
    rng = np.random.default_rng(6)
    s = draw_cell_statistic(rng, par, 50, LEVELS)
    counts, _ = cell_counts(s, 50, LEVELS)
    draws = draw_cell_probs(rng, np.broadcast_to(s, (20_000, s.size)), 50, LEVELS)
    np.testing.assert_allclose(draws.mean(0), (1 + counts) / (4 + 50), atol=0.003)


def test_huge_epsilon_posterior_is_the_exact_one():
    """With noise of scale 10⁻⁴ the posterior of (θ, σ²) is the NIG posterior of s itself."""
    rng = np.random.default_rng(7)
    prior = NIG(np.zeros(3), np.eye(3), np.array(3.0), np.array(1.0))
    s = draw_cell_statistic(rng, _par(PAIR), 80, PAIR, size=(3,))
    z = s + rng.laplace(0.0, 1e-4, s.shape)
    tr = sample_cell_regression(8, released=z, n=80, prior=prior, kind="pair", scale=1e-4,
                                draws=400, tune=200)  # fmt: skip
    ref_theta, ref_sigma2 = draw_nig(rng, nig_update(prior, statistic=s, n=80), size=(20000,))
    for r in range(3):
        th = tr.theta[:, :, r].reshape(-1, 3)
        sd = ref_theta[:, r].std(0)
        np.testing.assert_allclose(th.mean(0), ref_theta[:, r].mean(0), atol=4 * sd.max() / 14)
        np.testing.assert_allclose(th.std(0), sd, rtol=0.2)
        assert tr.sigma2[:, :, r].mean() == pytest.approx(ref_sigma2[:, r].mean(), rel=0.05)
        counts, _ = cell_counts(s[r], 80, PAIR)
        np.testing.assert_allclose(tr.probs[:, :, r].mean((0, 1)), (1 + counts) / 84, atol=0.02)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["pair", "categories", "cube"])
def test_sampler_is_calibrated_on_releases_drawn_from_its_model(kind):
    """Ranks of the true θ and σ² in their posteriors over 120 releases drawn from the model's
    own prior (n = 60, Laplace scale 8, so the noise matters): uniform by KS (p > 0.001)."""
    rng = np.random.default_rng(9)
    d = 3 if kind == "cube" else 2
    layout, releases = cell_layout(d, kind), 120
    prior, par, s, _, _ = _joint_prior_draws(rng, layout, releases, 60, 1.0)
    z = s + rng.laplace(0.0, 8.0, s.shape)
    tr = sample_cell_regression(10, released=z, n=60, prior=prior, kind=kind, scale=8.0,
                                draws=400, tune=300)  # fmt: skip
    draws_theta = tr.theta[:, ::4].reshape(-1, releases, d + 1)
    for j in range(d + 1):
        rank = np.mean(draws_theta[..., j] < par.theta[:, j], axis=0)
        assert stats.kstest(rank, "uniform").pvalue > 1e-3, j
    rank = np.mean(tr.sigma2[:, ::4].reshape(-1, releases) < par.sigma2, axis=0)
    assert stats.kstest(rank, "uniform").pvalue > 1e-3


def test_a_chain_starts_where_its_first_law_leaves_cells_empty():
    """A factor of 11 levels from 40 records under Laplace noise of scale 8: the start's π
    (readings floored at a record or so) left a level empty in all 100 draws of the first s,
    and the sampler raised. A chain's first s may be any regular statistic: with ``start``
    every cell gets a record and the rest are multinomial; without it the kernel still refuses."""
    layout = cell_layout(10, "categories")
    par = CellParameters(np.zeros(11), np.array(0.1), np.full(11, 1 / 11))
    rng = np.random.default_rng(0)
    s = draw_cell_statistic(rng, par, 40, layout, size=(4,))
    z = s + rng.laplace(0.0, 8.0, s.shape)
    prior = NIG(np.zeros(11), 0.5 * np.eye(11), np.array(20.0), np.array(1.9))
    tr = sample_cell_regression(1, released=z, n=40, prior=prior, scale=8.0, draws=5, tune=5)
    assert np.all(np.isfinite(tr.theta)) and np.all(tr.probs > 0)
    rare = CellParameters(np.zeros(11), np.array(0.1), np.r_[1.0 - 1e-12, np.full(10, 1e-13)])
    with pytest.raises(ValueError, match="give every cell a probability of order 1/n"):
        draw_cell_statistic(rng, rare, 40, layout, size=(2,))
    s = draw_cell_statistic(rng, rare, 40, layout, size=(2,), start=True)
    counts, regular = cell_counts(s, 40, layout)
    assert np.all(regular) and np.all(counts >= 1) and np.all(counts.sum(-1) == 40)


def test_more_levels_than_checked_warn():
    layout = cell_layout(11, "categories")
    par = CellParameters(np.zeros(12), np.array(1.0), np.full(12, 1 / 12))
    z = draw_cell_statistic(np.random.default_rng(0), par, 60, layout, size=(1,))
    prior = NIG(np.zeros(12), np.eye(12), np.array(3.0), np.array(1.0))
    with pytest.warns(UserWarning, match=r"checked up to d = 10 covariates \(d = 11\)"):
        tr = sample_cell_regression(0, released=z, n=60, prior=prior, scale=1.0, draws=3, tune=0)
    assert tr.probs.shape == (2, 3, 1, 12)


def test_bad_input_is_refused():
    z = np.zeros((1, 9))
    prior = NIG(np.zeros(3), np.eye(3), np.array(3.0), np.array(1.0))
    with pytest.raises(ValueError, match="kind must be one of"):
        sample_cell_regression(0, released=z, n=50, prior=prior, kind="levels", scale=1.0,
                               draws=5)  # fmt: skip
    with pytest.raises(ValueError, match="d must be 2"):
        sample_cell_regression(0, released=np.zeros((1, 5)), n=50, kind="pair", scale=1.0,
                               prior=NIG(np.zeros(2), np.eye(2), 3.0, 1.0), draws=5)  # fmt: skip
    with pytest.raises(TypeError, match="exactly one of scale"):
        sample_cell_regression(0, released=z, n=50, prior=prior, draws=5)
    with pytest.raises(ValueError, match="fewer cells than the model needs"):
        draw_cell_statistic(np.random.default_rng(0), CellParameters(np.zeros(3), 1.0,
                            np.array([0.5, 0.5, 0.0, 0.0])), 30, PAIR)  # fmt: skip


NOISY_SQUARES_RELEASE = np.array([318.7, 343.2, 517.0, 300.6, 74.1, 27.6, 406.9, 72.1, 303.1,
                                  -778.5, -313.1, -158.2, -171.5, 788.7])  # fmt: skip
"""Release 97 of `benchmarks/regression_x_models.py`'s cell (binary, d = 3, n = 1000, ε = 1,
seed 37): Laplace scale 30.25; its truth θ = (−0.78, −0.46, 0.28, 0.23), σ² = 0.109."""

WEAK_CUBE_RELEASE = np.array([229.4, 254.9, 260.1, 319.2, 80.0, 94.8, 257.1, -782.7, -15.6,
                              -1125.0, -1001.6, 323.7, 372.3, -282.3])  # fmt: skip
"""Release 199 of `benchmarks/regression_x_models.py`'s cell (binary, d = 3, n = 100, ε = 0.1,
seed 34): Laplace scale 302.5 against Σy² ≈ 40."""


def _max_rhat(draws: np.ndarray) -> float:
    """The largest R-hat over ``(chain, draw, ...)`` draws."""
    return float(np.max(az.rhat(az.convert_to_dataset({"v": draws})).v.values))


def test_the_cube_starts_a_weak_release_at_the_prior_centre():
    """Read as a statistic, the weak release's responses fit θ₀ ≈ −11 (the prior's sd is 0.45):
    chains started there stayed (R-hat 2.6 over 4 × (300 + 1000) before the start compared it
    with the prior's centre). Now every chain starts at the centre, whose log target is the
    highest of the start's candidates, with the s drawn there, and the chains mix (R-hat < 1.02
    over 4 × (300 + 300)); a release of scale 0.5 keeps its fit."""
    prior = NIG(np.zeros(4), 0.5 * np.eye(4), np.array(20.0), np.array(1.9))
    layout = cell_layout(3, "cube")
    z = np.tile(WEAK_CUBE_RELEASE, (4, 1))
    target = MixedTarget(z, np.full(z.shape, 2 * 302.5**2), 100.0, prior, None, layout,
                         laplace_scale=np.full(z.shape, 302.5))  # fmt: skip
    start, s = cell_start(np.random.default_rng(1), target)
    np.testing.assert_array_equal(start.theta, 0.0)
    np.testing.assert_allclose(start.sigma2, 1.9 / 21.0)
    # The first s is the draw at the kept start (yᵀy ≈ nσ² = 9 there; about 12 000 at the fit).
    assert np.all(s[:, -1] < 30.0)
    state = mixed_state(pack_cells(start._replace(probs=None)), s, target)
    assert np.all(np.isfinite(state.log_target))
    rng = np.random.default_rng(2)
    par = CellParameters(np.array([0.2, 0.5, -0.3, 0.4]), np.array(0.1), np.full(8, 1 / 8))
    s = draw_cell_statistic(rng, par, 100, layout, size=(4,))
    sharp = target._replace(
        released=s + rng.laplace(0.0, 0.5, s.shape),
        noise_variance=np.full(s.shape, 0.5),
        laplace_scale=np.full(s.shape, 0.5),
    )
    assert np.all(np.abs(cell_start(rng, sharp)[0].theta[:, 1] - 0.5) < 0.3)
    tr = sample_cell_regression(3, released=WEAK_CUBE_RELEASE[None], n=100, prior=prior,
                                kind="cube", scale=302.5, draws=300, tune=300,
                                chains=4)  # fmt: skip
    assert _max_rhat(np.concatenate([tr.theta, tr.sigma2[..., None]], axis=-1)) < 1.02


def test_the_cube_starts_a_release_with_noisy_squares_at_its_fit_and_the_prior_mode():
    """Read as a statistic, this release's noisy Σy², Σy and Σxy leave a residual sum of
    squares near 0: its fit has θ₀ ≈ −1.5 and σ² ≈ 0.006 (the prior's mode is 0.09), a log
    target near −380 against the prior centre's −60, so the start of 2026-12-06 took the
    centre, whose s is hundreds from the readings: two chains of four accepted 0.1 % of their
    moves and stayed there (R-hat 2.1 over this test's 4 × (300 + 300)). The fit's θ with σ² at
    the prior's mode is likelier than both, and no chain is trapped (R-hat 1.07 here; 1.03 over
    4 × (300 + 1000): the release mixes slowly, so the bound is for a trap)."""
    prior = NIG(np.zeros(4), 0.5 * np.eye(4), np.array(20.0), np.array(1.9))
    z = np.tile(NOISY_SQUARES_RELEASE, (4, 1))
    target = MixedTarget(z, np.full(z.shape, 2 * 30.25**2), 1000.0, prior, None,
                         cell_layout(3, "cube"), laplace_scale=np.full(z.shape, 30.25))  # fmt: skip
    start, s = cell_start(np.random.default_rng(1), target)
    np.testing.assert_allclose(start.sigma2, 1.9 / 21.0)
    assert np.all(start.theta[:, 0] < -0.5)  # the fit's θ₀, not the centre's 0
    assert np.all(np.abs(s[:, 9] - NOISY_SQUARES_RELEASE[9]) < 400.0)  # Σy near its reading
    tr = sample_cell_regression(3, released=NOISY_SQUARES_RELEASE[None], n=1000, prior=prior,
                                kind="cube", scale=30.25, draws=300, tune=300,
                                chains=4)  # fmt: skip
    assert _max_rhat(np.concatenate([tr.theta, tr.sigma2[..., None]], axis=-1)) < 1.2
