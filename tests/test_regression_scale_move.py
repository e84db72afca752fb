"""The moves along the model's symmetries (pymc_dp/regression/kernels/scale_move.py).

Two checks that fail if a Metropolis–Hastings ratio is wrong:

* the ratio each move computes equals log π(x') − log π(x) + log #det ∂x'/∂x, with π the joint
  density of (θ, σ², μ_x, Σ_x, s) given z written independently here (SciPy's NIG and NIW parts,
  the exact law of s, the release's likelihood) and the Jacobian of the move's map taken by
  finite differences: with a symmetric proposal of the group element that is detailed balance;
* Geweke's check: exact joint draws (φ, s, z) of the model are draws of φ, s | z for their own
  z, so the moves, iterated with every draw's own release, must keep φ and s at their prior
  marginals (two-sample KS against fresh draws).

Checked by hand when this was written: with the covariates' Jacobian exponent (d + 2) J instead
of (d + 2) J − 1, the first test is off by 0.59 nats and the second fails (KS p < 1e-4 for
log Σ_11, Σ_12 and the scatter of x); with c^(p + 1) instead of c^(p + 2) for y ↦ c y, the
first is off and the second rejects log σ² at p = 1e-4. With g instead of g² for the residuals'
rescaling (issue 34), the first fails for that move and the second rejects log σ² at p = 1e-6
(given w) and < 1e-6 (w integrated out). The
rescaling along the axes of Σ_x with the Jacobian of a fixed A (its first version, which
ignored that the map reads the axes) was rejected by the second at p < 1e-15 (Σ₁₂).
"""

import numpy as np
import pytest
from scipy import stats

from pymc_dp.curator.regression.statistics import pack_statistic, unpack_statistic
from pymc_dp.regression import NIG, NIW, draw_nig, draw_niw
from pymc_dp.regression.kernels.collapsed import (
    collapsed_target,
    move_state,
    pack_parameters,
    unpack_parameters,
)
from pymc_dp.regression.kernels.normal_model import draw_statistic, statistic_logpdf
from pymc_dp.regression.kernels.scale_move import MOVES as SAMPLER_MOVES
from pymc_dp.regression.kernels.scale_move import (
    posterior_shift_move,
    principal_scale_move,
    rescale_principal_axes,
    rescale_residuals,
    rescale_responses,
    scale_move,
    scale_moves,
    shift_precision,
    shift_responses,
    symmetry_state,
    transform_covariates,
    translate_covariates,
)

D = 2
PRIOR = NIG(np.array([0.1, 0.5, -0.3]),
            np.array([[1.0, 0.2, 0.0], [0.2, 2.0, 0.3], [0.0, 0.3, 1.5]]), np.array(4.0),
            np.array(2.0))  # fmt: skip
X_PRIOR = NIW(np.array([0.2, -0.1]), np.array(2.0), np.array(7.0),
              np.array([[4.0, 0.5], [0.5, 3.0]]))  # fmt: skip


def _draw_model(rng, rows, nodes, n, noise_sd, laplace):
    """Exact draws of (φ, s, z) with per-node NIW priors; z = s + noise."""
    theta, sigma2 = draw_nig(rng, PRIOR, size=(rows,))
    loc, cov = draw_niw(rng, X_PRIOR, size=(rows, nodes))
    s = draw_statistic(rng, theta=theta[:, None], sigma2=sigma2[:, None], x_loc=loc, x_cov=cov,
                       n=np.asarray(n, float))  # fmt: skip
    if laplace:
        z = s + rng.laplace(scale=noise_sd / np.sqrt(2.0), size=s.shape)
    else:
        z = s + noise_sd * rng.standard_normal(s.shape)
    return theta, sigma2, loc, cov, s, z


def _target(z, noise_sd, n, rows, nodes):
    prior = NIG(*(np.broadcast_to(a, (rows, *np.shape(a))) for a in PRIOR))
    x_prior = NIW(*(np.broadcast_to(a, (rows, nodes, *np.shape(a))) for a in X_PRIOR))
    return collapsed_target(z, np.full(z.shape, noise_sd**2), n, prior, x_prior)


def _log_joint(theta, sigma2, loc, cov, s, z, n, noise_sd, laplace):
    """log π(θ, σ², μ_x, Σ_x, s | z) + const in the natural coordinates, one state."""
    out = stats.multivariate_normal.logpdf(
        theta, PRIOR.mean, sigma2 * np.linalg.inv(PRIOR.precision)
    )
    out += stats.invgamma.logpdf(sigma2, PRIOR.shape, scale=PRIOR.scale)
    for j in range(len(n)):
        out += stats.multivariate_normal.logpdf(loc[j], X_PRIOR.loc, cov[j] / X_PRIOR.kappa)
        out += stats.invwishart.logpdf(cov[j], df=float(X_PRIOR.dof), scale=X_PRIOR.scale)
        out += statistic_logpdf(s[j], theta=theta, sigma2=sigma2, x_loc=loc[j], x_cov=cov[j],
                                n=n[j])  # fmt: skip
    if laplace:
        return out + np.sum(stats.laplace.logpdf(z, s, noise_sd / np.sqrt(2.0)))
    return out + np.sum(stats.norm.logpdf(z, s, noise_sd))


ROWS, COLS = np.tril_indices(D)


def _to_vector(u, s, nodes):
    """Natural coordinates (θ, σ², per node μ_x and the lower triangle of Σ_x, s)."""
    par = unpack_parameters(u, D, nodes)
    node = np.concatenate([par.x_loc, par.x_cov[..., ROWS, COLS]], -1).ravel()
    return np.concatenate([par.theta, [par.sigma2], node, s.ravel()])


def _from_vector(v, nodes, m):
    theta, sigma2 = v[: D + 1], v[D + 1]
    per = D + len(ROWS)
    node = v[D + 2 : D + 2 + nodes * per].reshape(nodes, per)
    cov = np.zeros((nodes, D, D))
    cov[:, ROWS, COLS] = node[:, D:]
    cov[:, COLS, ROWS] = node[:, D:]
    s = v[D + 2 + nodes * per :].reshape(nodes, m)
    return theta, sigma2, node[:, :D], cov, s


MOVES = {
    "rescale": (transform_covariates, lambda rng: np.diag(0.3 * rng.standard_normal(D))),
    "linear": (transform_covariates, lambda rng: 0.3 * rng.standard_normal((D, D))),
    "translate": (translate_covariates, lambda rng: 0.3 * rng.standard_normal(D)),
    "shift": (shift_responses, lambda rng: 0.05 * rng.standard_normal(D + 1)),
    "response": (rescale_responses, lambda rng: np.asarray(0.3 * rng.standard_normal())),
    "residual": (rescale_residuals, lambda rng: np.asarray(0.3 * rng.standard_normal())),
    "principal": (rescale_principal_axes, lambda rng: 0.3 * rng.standard_normal(D)),
}


@pytest.mark.parametrize("laplace", [False, True])
@pytest.mark.parametrize("name", list(MOVES))
def test_ratio_is_joint_density_times_jacobian(name, laplace):
    """Each move's log ratio = Δ log π + log #det of its map (finite differences), to 1e-6,
    at 4 states of a two-node model, and the inverse element maps the state back."""
    func, draw_element = MOVES[name]
    rng = np.random.default_rng(34)
    nodes, noise_sd = 2, 5.0
    n = np.array([12.0, 20.0])
    theta, sigma2, loc, cov, s, z = _draw_model(rng, 4, nodes, n, noise_sd, laplace)
    m = s.shape[-1]
    for i in range(4):
        tgt = _target(z[i : i + 1], noise_sd, n, 1, nodes)
        kw = {"target": tgt, "laplace_scale": noise_sd / np.sqrt(2.0) if laplace else None}
        element = draw_element(rng)[None]
        u = pack_parameters(theta[i], sigma2[i], loc[i], cov[i])

        def mapped(v, element=element, kw=kw):
            th, s2, lo, co, st = _from_vector(v, nodes, m)
            u_new, s_new, _ = func(pack_parameters(th, s2, lo, co)[None], st[None], element, **kw)
            return _to_vector(u_new[0], s_new[0], nodes)

        v = _to_vector(u, s[i], nodes)
        u_new, s_new, ratio = func(u[None], s[i][None], element, **kw)
        v_new = mapped(v)
        step = 1e-5 * np.maximum(np.abs(v), 1.0)
        jac = np.stack([(mapped(v + step[k] * e) - mapped(v - step[k] * e)) / (2 * step[k])
                        for k, e in enumerate(np.eye(v.size))], axis=1)  # fmt: skip
        log_det = np.linalg.slogdet(jac)[1]
        expected = (_log_joint(*_from_vector(v_new, nodes, m), z[i], n, noise_sd, laplace)
                    - _log_joint(*_from_vector(v, nodes, m), z[i], n, noise_sd, laplace)
                    + log_det)  # fmt: skip
        assert np.isfinite(ratio[0])
        np.testing.assert_allclose(ratio[0], expected, atol=1e-6, rtol=1e-8)
        back_u, back_s, back_ratio = func(u_new, s_new, -element, **kw)
        np.testing.assert_allclose(back_u[0], u, rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(back_s[0], s[i], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(back_ratio[0], -ratio[0], atol=1e-8)
        if name in ("shift", "residual"):  # the proposal of δ reads G only, which both keep
            p = D + 1
            np.testing.assert_allclose(unpack_statistic(s_new[0], n)[..., :p, :p],
                                       unpack_statistic(s[i], n)[..., :p, :p])  # fmt: skip


@pytest.mark.parametrize("laplace", [False, True])
def test_posterior_shift_proposal_reads_only_what_the_shift_keeps(laplace):
    """The precision P of :func:`posterior_shift_move`'s δ is the same at the image of the
    shift as at its start (so δ ~ N(0, τ² P⁻¹) is a symmetric proposal and the ratio is that of
    :func:`shift_responses`, tested above), at 4 states of a two-node model; and a seeded move
    proposes exactly δ = τ L⁻ᵀξ."""
    rng = np.random.default_rng(3434)
    nodes, noise_sd = 2, 5.0
    n = np.array([12.0, 20.0])
    theta, sigma2, loc, cov, s, z = _draw_model(rng, 4, nodes, n, noise_sd, laplace)
    tgt = _target(z, noise_sd, n, 4, nodes)
    b = noise_sd / np.sqrt(2.0) if laplace else None
    u = pack_parameters(theta, sigma2, loc, cov)
    precision = shift_precision(u, s, target=tgt, laplace_scale=b)
    assert np.all(np.linalg.eigvalsh(precision) > 0)
    delta = np.linalg.solve(np.linalg.cholesky(precision).swapaxes(-1, -2),
                            rng.standard_normal((4, D + 1, 1)))[..., 0]  # fmt: skip
    u_new, s_new, _ = shift_responses(u, s, delta, target=tgt, laplace_scale=b)
    np.testing.assert_allclose(shift_precision(u_new, s_new, target=tgt, laplace_scale=b),
                               precision, rtol=1e-10)  # fmt: skip
    state = symmetry_state(move_state(u, s, tgt), target=tgt, laplace_scale=b)
    moved, took = posterior_shift_move(np.random.default_rng(5), state, target=tgt, step=0.2,
                                       laplace_scale=b)  # fmt: skip
    xi = np.random.default_rng(5).standard_normal((4, D + 1, 1))
    step = 0.2 * np.linalg.solve(np.linalg.cholesky(precision).swapaxes(-1, -2), xi)[..., 0]
    expected = unpack_parameters(shift_responses(u, s, step, target=tgt, laplace_scale=b)[0], D,
                                 nodes).theta  # fmt: skip
    assert took.any() and not took.all()
    np.testing.assert_allclose(moved.theta[took], expected[took], rtol=1e-12)
    np.testing.assert_allclose(moved.theta[~took], state.theta[~took])


GEWEKE_MOVES = (*SAMPLER_MOVES, (principal_scale_move, 1.0))
"""The sampler's moves and the rescaling along the axes of Σ_x, which is not among them."""


def _two_sample(moved, fresh, alpha=1e-3):
    """Two-sample KS p-values of paired samples, all above alpha / (number of tests)."""
    pvalues = [stats.ks_2samp(a, b).pvalue for a, b in zip(moved, fresh, strict=True)]
    assert min(pvalues) > alpha / len(pvalues), np.round(pvalues, 5)


def _summaries(u, s, n):
    par = unpack_parameters(u, D)
    b_mat = unpack_statistic(s[:, 0], n)
    xbar = b_mat[:, 0, 1:3] / n
    scatter = b_mat[:, 1:3, 1:3] - n * xbar[:, :, None] * xbar[:, None, :]
    return [
        par.theta[:, 0], par.theta[:, 1], par.theta[:, 2], np.log(par.sigma2),
        par.x_loc[:, 0, 0], np.log(par.x_cov[:, 0, 0, 0]), np.log(par.x_cov[:, 0, 1, 1]),
        par.x_cov[:, 0, 0, 1], np.log(scatter[:, 0, 0]), b_mat[:, 1, 3], np.log(b_mat[:, 3, 3]),
    ]  # fmt: skip


@pytest.mark.parametrize("laplace", [False, True])
def test_moves_keep_the_joint_law(laplace):
    """Geweke: 3000 exact draws of (φ, s, z), n = 15, noise sd 10; 12 cycles of
    :func:`scale_moves` (each three of every move of the sampler's ``MOVES`` and
    :func:`principal_scale_move`: maps and translations of x, shifts and rescalings of y,
    rescalings of the residuals) with every draw's own z; 11 summaries of φ and s against 3000
    fresh draws, KS at α = 0.001 / 11. With ``laplace`` the moves integrate the Laplace mixing
    variances out."""
    rng = np.random.default_rng(2034)
    # Noise sd 10 leaves the orbits wide, so that a wrong ratio tilts them visibly (sd 3: a
    # Jacobian exponent off by one passed; 10: p < 1e-4 on log Σ_11).
    rows, n, noise_sd = 3000, 15.0, 10.0
    theta, sigma2, loc, cov, s, z = _draw_model(rng, rows, 1, [n], noise_sd, laplace)
    tgt = _target(z, noise_sd, [n], rows, 1)
    state = move_state(pack_parameters(theta, sigma2, loc, cov), s, tgt)
    b = noise_sd / np.sqrt(2.0) if laplace else None
    rates = []
    for _ in range(12):
        state, taken = scale_moves(rng, state, target=tgt, laplace_scale=b, moves=GEWEKE_MOVES)
        rates.append(taken.mean())
    assert 0.2 < np.mean(rates) < 0.9  # the moves move
    # They moved the state: log Σ_11 changed by 0.26 (sd over the draws).
    start = unpack_parameters(pack_parameters(theta, sigma2, loc, cov), D)
    end = unpack_parameters(state.params, D)
    assert np.std(np.log(end.x_cov[:, 0, 0, 0] / start.x_cov[:, 0, 0, 0])) > 0.2
    fresh = _draw_model(rng, rows, 1, [n], noise_sd, laplace)
    ref_u = pack_parameters(*fresh[:4])
    _two_sample(_summaries(state.params, state.suffstat, n), _summaries(ref_u, fresh[4], n))


@pytest.mark.parametrize("laplace", [False, True])
def test_carried_terms_equal_a_fresh_evaluation(laplace):
    """Through 14 moves of a batch of 6 two-node states (each taken by some members and not
    others) the members that took a move, and only they, moved, and the log-target terms a
    :class:`SymmetryState` carries equal those evaluated afresh at its final coordinates;
    and ``scale_moves(refresh=False)`` returns the same φ and s as the default, with the
    start's surrogate and correction."""
    rng = np.random.default_rng(3535)
    n = np.array([12.0, 20.0])
    theta, sigma2, loc, cov, s, z = _draw_model(rng, 6, 2, n, 5.0, laplace)
    tgt = _target(z, 5.0, n, 6, 2)
    b = 5.0 / np.sqrt(2.0) if laplace else None
    start = move_state(pack_parameters(theta, sigma2, loc, cov), s, tgt)
    state = symmetry_state(start, target=tgt, laplace_scale=b)
    partial = 0
    for step in (0.3, 0.1):
        for move, factor in GEWEKE_MOVES:
            before = state
            state, took = move(rng, state, target=tgt, step=factor * step, laplace_scale=b)
            partial += bool(took.any() and not took.all())
            np.testing.assert_array_equal(state.matrix[~took], before.matrix[~took])
            assert np.all(np.any(state.matrix[took] != before.matrix[took], axis=(-3, -2, -1)))
    assert partial >= 3
    u = pack_parameters(state.theta, state.sigma2, state.x_loc, state.x_cov)
    fresh = symmetry_state(start._replace(params=u, suffstat=pack_statistic(state.matrix)),
                           target=tgt, laplace_scale=b)  # fmt: skip
    for name in ("log_nig", "log_niw", "log_likelihood"):
        np.testing.assert_allclose(getattr(state, name), getattr(fresh, name), rtol=1e-9)
    kept, _ = scale_moves(np.random.default_rng(1), start, target=tgt, laplace_scale=b)
    stale, _ = scale_moves(np.random.default_rng(1), start, target=tgt, laplace_scale=b,
                           refresh=False)  # fmt: skip
    np.testing.assert_array_equal(stale.params, kept.params)
    np.testing.assert_array_equal(stale.suffstat, kept.suffstat)
    np.testing.assert_array_equal(stale.surrogate, start.surrogate)
    np.testing.assert_array_equal(stale.correction, start.correction)


def test_scale_move_refuses_the_shape_family():
    rng = np.random.default_rng(0)
    theta, sigma2, loc, cov, s, z = _draw_model(rng, 1, 1, [15.0], 3.0, False)
    tgt = _target(z, 3.0, [15.0], 1, 1)
    state = symmetry_state(move_state(pack_parameters(theta, sigma2, loc, cov), s, tgt), target=tgt)
    with pytest.raises(ValueError, match="x_shape=None"):
        scale_move(rng, state, target=tgt._replace(x_shape=object()), step=0.1)


@pytest.mark.parametrize("rows", [1, 2, 5])
def test_two_nodes_correction_is_the_sum_of_their_own(rows):
    """log r(s, φ) of a two-node target (n = 50 and 80) is the sum of each node's alone. Until
    this stop the statistic's matrix took n as (J, 1): one row crashed, and two rows (as many
    as the nodes) silently gave each row one node's n (−inf against 0.35 here)."""
    rng = np.random.default_rng(3)
    n = np.array([50.0, 80.0])
    theta, sigma2, loc, cov, s, z = _draw_model(rng, rows, 2, n, 10.0, False)
    both = move_state(pack_parameters(theta, sigma2, loc, cov), s, _target(z, 10.0, n, rows, 2))
    alone = [
        move_state(
            pack_parameters(theta, sigma2, loc[:, [j]], cov[:, [j]]),
            s[:, [j]],
            _target(z[:, [j]], 10.0, n[[j]], rows, 1),
        ).correction
        for j in range(2)
    ]
    assert np.all(np.isfinite(both.correction))
    np.testing.assert_allclose(both.correction, alone[0] + alone[1], rtol=1e-10, atol=1e-10)
