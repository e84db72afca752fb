"""The mixed model's moves along its symmetries (pymc_dp/regression/kernels/mixed_symmetry.py).

As for the normal model's (tests/test_regression_scale_move.py), two checks that fail if a
Metropolis–Hastings ratio is wrong: each map's ratio equals log π(x') − log π(x) + log #det ∂x'/∂x
with π the joint density of (θ, σ², π, m₀, m₁, Σ, s) given z written here from SciPy's parts and
the exact law of s, the Jacobian by finite differences; and Geweke's check on exact joint draws.

Checked by hand when this was written: with the covariates' Jacobian exponent d₂ + 1 (the
normal model's with one node) in place of d₂ + 2, the first test fails for both maps of x and
the second rejects the log-Cholesky diagonal of Σ (KS p = 4e-10); with θ_b kept by the
translation by group, the first fails for that map (the second, whose translations are short
against the prior's spread of the groups' means, does not see it).
"""

import numpy as np
import pytest
from scipy import stats

from pymc_dp.regression import NIG, NIW, draw_nig, draw_niw
from pymc_dp.regression.kernels.mixed_model import (
    MixedParameters,
    draw_mixed_statistic,
    log_prob_prior,
    mixed_statistic_logpdf,
    tied_positions,
)
from pymc_dp.regression.kernels.mixed_move import (
    MixedTarget,
    log_prior,
    mixed_state,
    pack_mixed,
    unpack_mixed,
)
from pymc_dp.regression.kernels.mixed_symmetry import (
    mixed_symmetry_moves,
    transform_normal_covariates,
    translate_groups,
)

D, D2 = 3, 2
PRIOR = NIG(np.array([0.1, -0.4, 0.5, -0.3]), np.diag([1.0, 1.5, 2.0, 1.2]), np.array(5.0),
            np.array(2.0))  # fmt: skip
X_PRIOR = NIW(np.array([0.2, -0.1]), np.array(2.0), np.array(6.0),
              np.array([[3.0, 0.4], [0.4, 2.0]]))  # fmt: skip
ROWS, COLS = np.tril_indices(D2)


def _draws(rng, size, n, scale):
    """(φ, s, z) from the joint prior, z = s + Laplace(b) (π by rejection from its prior)."""
    theta, sigma2 = draw_nig(rng, PRIOR, size=(size,))
    prob = rng.uniform(size=4 * size)
    prob = prob[rng.uniform(size=prob.size) < 1 - prob**n - (1 - prob) ** n][:size]
    loc0, cov = draw_niw(rng, X_PRIOR, size=(size,))
    xi = rng.standard_normal((size, D2, 1))
    loc1 = X_PRIOR.loc + (np.linalg.cholesky(cov) @ xi)[..., 0] / np.sqrt(X_PRIOR.kappa)
    par = MixedParameters(theta, sigma2, prob, np.stack([loc0, loc1], axis=-2), cov)
    s = draw_mixed_statistic(rng, par, n)
    z = s + rng.laplace(scale=scale, size=s.shape)
    return par, s, z


def _target(z, n, scale, laplace=True):
    size = z.shape[0]
    prior = NIG(*(np.broadcast_to(a, (size, *np.shape(a))) for a in PRIOR))
    x_prior = NIW(*(np.broadcast_to(a, (size, *np.shape(a))) for a in X_PRIOR))
    w = np.full(z.shape, 2.0 * scale**2)
    b = np.full((size, 1), float(scale)) if laplace else None
    return MixedTarget(z, w, float(n), prior, x_prior, laplace_scale=b)


def _log_joint(par, s, z, n, scale):
    """log π(θ, σ², π, m₀, m₁, Σ, s | z) + const in the natural coordinates, one state."""
    out = stats.multivariate_normal.logpdf(par.theta, PRIOR.mean,
                                           par.sigma2 * np.linalg.inv(PRIOR.precision))  # fmt: skip
    out += stats.invgamma.logpdf(par.sigma2, PRIOR.shape, scale=PRIOR.scale)
    out += log_prob_prior(par.prob, n)
    out += stats.invwishart.logpdf(par.x_cov, df=float(X_PRIOR.dof), scale=X_PRIOR.scale)
    for g in range(2):
        out += stats.multivariate_normal.logpdf(par.group_loc[g], X_PRIOR.loc,
                                                par.x_cov / X_PRIOR.kappa)  # fmt: skip
    out += mixed_statistic_logpdf(s, par, n)
    return out + np.sum(stats.laplace.logpdf(z, s, scale))


def _free_s(m):
    tied = tied_positions(D)
    return np.array([j for j in range(m) if j not in tied])


def _to_vector(par, s):
    return np.concatenate([par.theta, [par.sigma2, par.prob], par.group_loc.ravel(),
                           par.x_cov[ROWS, COLS], s[_free_s(s.size)]])  # fmt: skip


def _from_vector(v, s_template):
    p = D + 1
    theta, sigma2, prob = v[:p], v[p], v[p + 1]
    loc = v[p + 2 : p + 2 + 2 * D2].reshape(2, D2)
    k = p + 2 + 2 * D2
    cov = np.zeros((D2, D2))
    cov[ROWS, COLS] = v[k : k + len(ROWS)]
    cov[COLS, ROWS] = v[k : k + len(ROWS)]
    s = s_template.copy()
    s[_free_s(s.size)] = v[k + len(ROWS) :]
    return MixedParameters(theta, sigma2, prob, loc, cov), s


MAPS = {
    "rescale": (transform_normal_covariates, lambda rng: np.diag(0.3 * rng.standard_normal(D2))),
    "linear": (transform_normal_covariates, lambda rng: 0.3 * rng.standard_normal((D2, D2))),
    "translate": (translate_groups, lambda rng: 0.3 * rng.standard_normal((2, D2))),
}


@pytest.mark.parametrize("name", sorted(MAPS))
def test_ratio_is_joint_density_times_jacobian(name):
    """At 4 joint draws (n = 40, Laplace b = 3): the map's log ratio equals the change of the
    joint log density plus log #det of the map's Jacobian in natural coordinates (θ, σ², π,
    m₀, m₁, lower Σ, the free entries of s), by central differences, to 1e-5; the inverse
    element maps the state back with the opposite ratio."""
    mapper, element = MAPS[name]
    rng = np.random.default_rng(21)
    n, scale = 40, 3.0
    par, s, z = _draws(rng, 4, n, scale)
    target = _target(z, n, scale)
    for i in range(4):
        one = MixedParameters(*(a[i] for a in par))
        el = element(rng)
        tgt = MixedTarget(z[i], target.noise_variance[i], float(n), PRIOR, X_PRIOR,
                          laplace_scale=target.laplace_scale[i])  # fmt: skip

        def image(v, el=el, tgt=tgt, s0=s[i]):
            p, si = _from_vector(v, s0)
            u2, s2, _ = mapper(pack_mixed(p), si, el, target=tgt)
            return _to_vector(unpack_mixed(u2, D)[0], s2)

        v0 = _to_vector(one, s[i])
        u2, s2, ratio = mapper(pack_mixed(one), s[i], el, target=tgt)
        new = unpack_mixed(u2, D)[0]
        step = 1e-6 * np.maximum(np.abs(v0), 1.0)
        jac = np.stack([(image(v0 + step[k] * e) - image(v0 - step[k] * e)) / (2 * step[k])
                        for k, e in enumerate(np.eye(v0.size))], axis=1)  # fmt: skip
        want = (_log_joint(new, s2, z[i], n, scale) - _log_joint(one, s[i], z[i], n, scale)
                + np.linalg.slogdet(jac)[1])  # fmt: skip
        assert np.isfinite(ratio)
        assert float(ratio) == pytest.approx(want, abs=1e-5), (name, i)
        # The inverse element maps back, with the opposite ratio (the proposal is symmetric).
        back_u, back_s, back_ratio = mapper(u2, s2, -el, target=tgt)
        np.testing.assert_allclose(back_u, pack_mixed(one), rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(back_s, s[i], rtol=1e-9, atol=1e-9)
        assert float(back_ratio) == pytest.approx(-float(ratio), abs=1e-8)


def test_log_group_prior_is_the_priors_x_part():
    """The moves' prior of (m₀, m₁, Σ) is mixed_move.log_prior's less its NIG and π parts."""
    rng = np.random.default_rng(22)
    par, _, z = _draws(rng, 5, 40, 3.0)
    target = _target(z, 40, 3.0)
    full = log_prior(par, target)
    nig_only = log_prior(par._replace(group_loc=par.group_loc[..., :0],
                                      x_cov=par.x_cov[..., :0, :0]), target)  # fmt: skip
    from pymc_dp.regression.kernels.mixed_move import log_group_prior

    want = log_group_prior(par.group_loc, par.x_cov, target.x_prior)
    np.testing.assert_allclose(full - nig_only, want, rtol=1e-12)


def _geweke(rng, u, s, target, free, law):
    """10 sweeps of the moves from exact joint draws (u, s) given their own z: most chains
    move, and u, s's ``free`` entries and the scaled residuals (z − s)/b (law ``law``) keep
    their laws (KS at 0.001 over the number of tests). Returns the last state."""
    start = state = mixed_state(u, s, target)
    taken = np.zeros(len(s))
    for _ in range(10):
        state, took = mixed_symmetry_moves(rng, state, target)
        taken += took
    assert np.mean(taken > 0) > 0.9
    assert np.all(np.isfinite(state.log_target))
    before = np.concatenate([start.params, start.suffstat[:, free]], axis=1)
    after = np.concatenate([state.params, state.suffstat[:, free]], axis=1)
    scale = (
        target.laplace_scale
        if target.laplace_scale is not None
        else np.sqrt(0.5 * target.noise_variance)
    )
    resid = (target.released - state.suffstat) / scale
    level = 1e-3 / (before.shape[1] + resid.shape[1])
    for j in range(before.shape[1]):
        assert stats.ks_2samp(before[:, j], after[:, j]).pvalue > level, j
    for j in range(resid.shape[1]):
        assert stats.kstest(resid[:, j], law.cdf).pvalue > level, ("resid", j)
    return state


@pytest.mark.parametrize("laplace", [True, False], ids=["laplace", "gaussian"])
def test_moves_keep_the_joint_law(laplace):
    """Geweke's check: 3000 exact draws of (φ, s, z) (n = 30, d = 3, noise sd 30√2), then 10
    sweeps of :func:`mixed_symmetry_moves` given each draw's own z (Laplace: its density;
    Gaussian: N(z; s, w), z redrawn so). Every move keeps φ, s | z, so u and the free entries
    of s keep their prior marginals (two-sample KS against the draws they started from, at
    0.001 / the number of tests) and the release's residuals keep their law; most chains move.
    A noisy release, so that the maps travel far (73 % of the moves taken)."""
    rng = np.random.default_rng(23)
    size, n, scale = 3000, 30, 30.0
    par, s, z = _draws(rng, size, n, scale)
    if not laplace:
        z = s + np.sqrt(2.0) * scale * rng.standard_normal(s.shape)
    target = _target(z, n, scale, laplace=laplace)
    law = stats.laplace if laplace else stats.norm(scale=np.sqrt(2.0))
    state = _geweke(rng, pack_mixed(par), s, target, _free_s(s.shape[1]), law)
    # The binary covariate's count and π are never moved.
    tied = list(tied_positions(D))
    np.testing.assert_array_equal(state.suffstat[:, tied], s[:, tied])
    np.testing.assert_allclose(unpack_mixed(state.params, D)[0].prob, par.prob, rtol=1e-12)


@pytest.mark.parametrize("kind", ["pair", "categories"])
def test_moves_of_y_keep_the_cell_models_joint_law(kind):
    """The cell model (every covariate binary) has no continuous map of x; the moves of y
    remain. Geweke's check as above on 3000 exact joint draws of the cell model (n = 30, Laplace
    b = 30, the pair of indicators and a factor of four levels; (θ, σ²) from a broad NIG so that
    the moves travel): u and the free entries of s keep their prior marginals, the residuals
    their Laplace law; the covariates' part never moves. This checks the cell model's state
    (its φ, the prior's constant x part); the maps' ratios are the normal model's, checked
    against the joint density in tests/test_regression_scale_move.py (this check alone does
    not see c^(p + 1) in place of c^(p + 2): smallest p 2e-4, over 17 tests at 0.001)."""
    from pymc_dp.regression.kernels.cell_model import draw_cell_statistic
    from pymc_dp.regression.kernels.mixed_move import pack_cells
    from tests.test_regression_cell_model import LEVELS, PAIR, _joint_prior_draws

    layout = PAIR if kind == "pair" else LEVELS
    rng = np.random.default_rng(25)
    size, n, scale = 3000, 30, 30.0
    _, par, _, _, _ = _joint_prior_draws(rng, layout, size, n, scale)
    p = layout.d + 1
    prior = NIG(PRIOR.mean[:p], PRIOR.precision[:p, :p], PRIOR.shape, PRIOR.scale)
    theta, sigma2 = draw_nig(rng, prior, size=(size,))
    par = par._replace(theta=theta, sigma2=sigma2)
    s = draw_cell_statistic(rng, par, n, layout)
    z = s + rng.laplace(scale=scale, size=s.shape)
    target = MixedTarget(z, np.full(s.shape, 2 * scale**2), float(n), prior, None, layout,
                         laplace_scale=np.full((size, 1), scale))  # fmt: skip
    state = _geweke(rng, pack_cells(par), s, target, layout.response_positions, stats.laplace)
    counts = layout.covariate_positions
    np.testing.assert_array_equal(state.suffstat[:, counts], s[:, counts])


def test_the_sweep_runs_them_from_three_covariates():
    """``mixed_sweep``'s default: the moves from d = 3 for the mixed model
    (MIXED_SYMMETRY_MIN_D), none at d = 2; the moves of y from d = 5 for the cell model
    (CELL_SYMMETRY_MIN_D); ``symmetry_steps=()`` turns them off."""
    from pymc_dp.regression.engine.mixed import default_symmetry_steps
    from pymc_dp.regression.kernels.cell_model import cell_layout
    from pymc_dp.regression.kernels.mixed_symmetry import (
        CELL_SYMMETRY_MIN_D,
        MIXED_SYMMETRY_MIN_D,
    )
    from pymc_dp.regression.kernels.scale_move import SCALE_STEPS

    assert (MIXED_SYMMETRY_MIN_D, CELL_SYMMETRY_MIN_D) == (3, 5)
    rng = np.random.default_rng(24)
    _, _, z = _draws(rng, 2, 40, 3.0)
    assert default_symmetry_steps(_target(z, 40, 3.0)) == SCALE_STEPS
    two = MixedTarget(np.zeros((2, 9)), np.ones((2, 9)), 40.0, PRIOR, X_PRIOR)
    assert default_symmetry_steps(two) == ()
    for d, want in ((4, ()), (5, SCALE_STEPS)):
        m = (d + 2) * (d + 3) // 2 - 1  # the released layout's length
        cells = MixedTarget(np.zeros(m), np.ones(m), 40.0, PRIOR, None,
                            cells=cell_layout(d, "categories"))  # fmt: skip
        assert default_symmetry_steps(cells) == want, d
    from pymc_dp.regression import sample_mixed_regression

    kw = dict(released=z, n=40, scale=3.0, prior=PRIOR, x_prior=X_PRIOR, draws=30, tune=20)
    on = sample_mixed_regression(5, **kw)
    same = sample_mixed_regression(5, symmetry_steps=SCALE_STEPS, **kw)
    off = sample_mixed_regression(5, symmetry_steps=(), **kw)
    np.testing.assert_array_equal(on.theta, same.theta)
    assert not np.array_equal(on.theta, off.theta)
