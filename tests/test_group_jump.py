"""Group jumps beside NUTS (GroupJumpStep): the kernel's law, the step's conditional, the trap.

A grouped windowed Poisson release gives each group a far mode (λ_g beyond the window) that NUTS
cannot leave; with the counts released it holds no mass but traps a chain that enters it in
warm-up (50 groups, ε = 0.1: R-hat 1.85). The jump is an independence Metropolis–Hastings step
per group given (μ, τ): these tests check that it keeps each group's conditional exactly (against
closed forms and against the model's own density on a grid), that it frees groups started in the
far mode, and that ``pymc-dp fit``'s grouped model gets it. The vector form (J components per
group, one decision per group) is checked the same way on the Normal location-scale link's
(μ_g, log σ_g), whose groups with noisy sums near 0 have modes inside and outside the window.
"""

from __future__ import annotations

import argparse
import functools
import warnings

import numpy as np
import pymc as pm
import pytest
from pymc.initial_point import make_initial_point_fn
from scipy import stats

import pymc_dp as pmdp
from pymc_dp.cli.sampling import jumping_nuts
from pymc_dp.kernels import JumpProposal, jump
from pymc_dp.model.hierarchical import build_grouped_model
from pymc_dp.model.step_methods.group_jump import JUMP_ROUNDS_MAX, jump_rounds


def _two_modes(eta, weight, loc, sd):
    """log of weight·N(−loc, sd²) + (1 − weight)·N(loc, sd²), per group (unnormalised)."""
    return np.logaddexp(
        np.log(weight) - 0.5 * ((eta + loc) / sd) ** 2,
        np.log1p(-weight) - 0.5 * ((eta - loc) / sd) ** 2,
    )


def test_jumps_keep_each_groups_law_across_two_modes():
    # Four groups, each with two separated modes of its own weight; 3000 independent chains of
    # 200 jumps alone (no local moves), all started in the lower mode: their ends are 3000
    # independent draws, whose share and law in each mode must be the target's.
    rng = np.random.default_rng(0)
    weight = np.array([0.5, 0.2, 0.9, 0.35])
    loc, sd = np.array([3.0, 2.0, 4.0, 2.5]), np.array([0.3, 0.5, 0.2, 0.4])
    # Group 1's own estimate points at the other mode, group 2 has none: the population part
    # must then reach the rest.
    proposal = JumpProposal(np.array([loc[0], -loc[1], np.nan, loc[3]]), np.ones(4))
    eta = np.broadcast_to(-loc, (3000, 4)).copy()
    for _ in range(200):
        eta, _ = jump(rng, current=eta, log_target=lambda e: _two_modes(e, weight, loc, sd),
                      proposal=proposal, mu=0.0, tau=3.0)  # fmt: skip
    low = (eta < 0).mean(axis=0)
    band = 4 * np.sqrt(weight * (1 - weight) / 3000)
    assert np.all(np.abs(low - weight) < band), (low, weight)
    for g in range(4):
        upper = eta[eta[:, g] > 0, g]
        assert stats.kstest(upper, stats.norm(loc[g], sd[g]).cdf).pvalue > 1e-3


def test_a_refused_jump_keeps_the_value_bit_for_bit_and_nan_is_refused():
    rng = np.random.default_rng(1)
    current = np.array([0.1234567890123, -2.5])
    proposal = JumpProposal(np.array([0.0, 0.0]), np.ones(2))

    def only_here(eta):
        return np.where(eta == current, 0.0, np.nan)

    new, moved = jump(
        rng, current=current, log_target=only_here, proposal=proposal, mu=0.0, tau=1.0
    )
    assert not moved.any() and np.array_equal(new, current)
    with pytest.raises(ValueError, match="tau"):
        jump(rng, current=current, log_target=np.zeros_like, proposal=proposal, mu=0.0, tau=0.0)


def _grouped_counted(groups=12, epsilon=0.1, seed=0):
    """A grouped Poisson release in the window (0, 40) with counts, λ_g around 5."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(50, 400, size=groups)
    keys = [f"g{g}" for g in range(groups)]
    lam = np.exp(rng.normal(np.log(5.0), 0.3, size=groups))
    x = np.concatenate([rng.poisson(lam[g], sizes[g]) for g in range(groups)])
    by = np.repeat(keys, sizes)
    return pmdp.release_grouped(x, pm.Poisson, by=by, groups=keys, sizes="public",
                                bounds=(0, 40), epsilon=epsilon, count_share=0.2,
                                rng=seed + 1)  # fmt: skip


@pytest.fixture(scope="module")
def counted_model():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_grouped_model(_grouped_counted())


@pytest.fixture(scope="module")
def counted_step(counted_model):
    model = counted_model
    return pmdp.GroupJumpStep([model.rvs_to_values[model["z"]]], model=model)


def _point(model, step, lam_far=()):
    """A point at μ = log 5, τ = 0.5, groups at λ = 5 except those in ``lam_far`` (at 60)."""
    w = step._effects.weight
    eta = np.full(w.shape, np.log(5.0))
    eta[list(lam_far)] = np.log(60.0)
    z = w * np.log(5.0) + 0.5 ** (w - 1.0) * (eta - np.log(5.0))
    # Set through PyMC, which maps each variable to its sampler's coordinate (its transform).
    overrides = {"mu": np.log(5.0), "tau": 0.5, "z": z}
    return make_initial_point_fn(model=model, overrides=overrides)(0)


def test_the_step_samples_each_groups_conditional_of_the_model(counted_model, counted_step):
    # Jumps alone, everything else held: group 0's z must follow the model's own conditional,
    # tabulated on a grid with model.compile_logp (the whole model's density, z_0 varied).
    model, step = counted_model, counted_step
    step.set_rng(2)
    point = _point(model, step)
    draws = []
    for _ in range(1500):
        point, _ = step.step(point)
        draws.append(point["z"][0])
    logp = model.compile_logp(mode="FAST_COMPILE")  # 401 calls: compiling costs more
    grid = np.linspace(np.min(draws) - 1.0, np.max(draws) + 1.0, 401)
    dens = []
    for v in grid:
        p = dict(point)
        p["z"] = point["z"].copy()
        p["z"][0] = v
        dens.append(logp(p))
    dens = np.exp(np.array(dens) - np.max(dens))
    cdf = np.cumsum(dens) / np.sum(dens)
    thinned = np.array(draws)[::3]
    assert stats.kstest(thinned, lambda x: np.interp(x, grid, cdf)).pvalue > 1e-3


def test_groups_started_in_the_far_mode_are_freed(counted_model, counted_step):
    # Five groups at λ = 60 (beyond the window; their counts say ~0 records inside, against
    # hundreds released): within 20 sweeps of jumps every group is back below the window's end.
    model, step = counted_model, counted_step
    step.set_rng(3)
    point = _point(model, step, lam_far=range(5))
    mu, tau, w = np.log(5.0), 0.5, step._effects.weight

    def lam(p):
        return np.exp(mu + tau ** (1.0 - w) * (p["z"] - w * mu))

    assert np.sum(lam(point) > 40) == 5
    jumped = 0
    for _ in range(20):
        point, stats_ = step.step(point)
        jumped += stats_[0]["group_jumps"]
    assert np.all(lam(point) < 40), lam(point)
    assert jumped >= 5


def test_fit_adds_jumps_only_where_a_window_is():
    # `pymc-dp fit` samples through jumping_nuts: a Binomial has no window, so nothing is added
    # and pm.sample starts as usual (the counted Poisson's fit: the slow CLI test in
    # test_grouped_window_count.py, whose trace must hold group_jumps).
    rs = pmdp.release_grouped(np.r_[np.ones(30), np.zeros(30)], pm.Bernoulli, epsilon=1.0,
                              by=np.repeat(["a", "b"], 30), groups=["a", "b"], sizes="public",
                              rng=0)  # fmt: skip
    model = build_grouped_model(rs)
    assert jumping_nuts(argparse.Namespace(tune=50), model, [1, 2]) == {}
    assert pmdp.grouped_steps(model) is None


@pytest.mark.slow
def test_fits_start_for_a_window_is_pymcs_with_a_jump_step(counted_model):
    extra = jumping_nuts(argparse.Namespace(tune=50), counted_model, [1, 2])
    assert [type(s).__name__ for s in extra["step"]] == ["NUTS", "GroupJumpStep"]
    assert len(extra["initvals"]) == 2
    assert not np.array_equal(extra["initvals"][0]["z"], extra["initvals"][1]["z"])  # jittered


def test_a_step_over_a_shared_term_is_refused():
    with pm.Model() as model:
        z = pm.Normal("z", size=3)
        pm.MvNormal("y", z, np.eye(3), observed=np.zeros(3))
    z.tag.pymc_dp_group_effects = pmdp.model.step_methods.group_jump.GroupEffects(
        "mu", "tau", np.zeros(3), JumpProposal(np.zeros(3), np.ones(3))
    )
    with pytest.raises(ValueError, match="one log-density term per group"):
        pmdp.GroupJumpStep([model.rvs_to_values[z]], model=model)


def test_vector_jumps_keep_each_groups_joint_law_across_two_modes():
    # Three groups with a two-component effect (as the location-scale link's (μ_g, log σ_g)),
    # each with two separated 2-D modes of its own weight; one accept decision per group for
    # both components. 1500 independent chains of 250 jumps from the lower mode: the share of
    # each mode and each component's law within the upper mode must be the target's.
    rng = np.random.default_rng(4)
    weight = np.array([0.5, 0.25, 0.8])
    loc = np.array([[2.0, -0.8], [2.0, 1.0], [1.5, 0.5]])  # upper mode; lower at −loc
    sd = np.array([[0.5, 0.4], [0.4, 0.3], [0.4, 0.4]])

    def target(eta):  # eta (..., G, 2) -> (..., G)
        upper = -0.5 * np.sum(((eta - loc) / sd) ** 2, axis=-1)
        lower = -0.5 * np.sum(((eta + loc) / sd) ** 2, axis=-1)
        return np.logaddexp(np.log(weight) + lower, np.log1p(-weight) + upper)

    # Group 1's estimate has no second component: the population stands in for it there.
    estimate = np.array([[2.0, -0.8], [2.0, np.nan], [np.nan, np.nan]])
    proposal = JumpProposal(estimate, np.full((3, 2), 0.8))
    eta = np.broadcast_to(-loc, (1500, 3, 2)).copy()
    for _ in range(250):
        eta, moved = jump(rng, current=eta, log_target=target, proposal=proposal,
                          mu=np.zeros(2), tau=np.array([2.0, 1.0]))  # fmt: skip
    assert moved.shape == (1500, 3)
    low = (eta[..., 0] < 0).mean(axis=0)
    band = 4 * np.sqrt(weight * (1 - weight) / 1500)
    assert np.all(np.abs(low - weight) < band), (low, weight)
    for g in range(3):
        upper = eta[eta[:, g, 0] > 0, g]
        for j in range(2):
            law = stats.norm(loc[g, j], sd[g, j])
            assert stats.kstest(upper[:, j], law.cdf).pvalue > 1e-3


def test_a_scalar_effect_jumps_as_a_one_component_vector():
    # The scalar form is the vector one with J = 1, draw for draw.
    target = lambda e: _two_modes(e, np.full(4, 0.3), 2.0, 0.5)  # noqa: E731
    estimate, sd = np.array([2.0, np.nan, -2.0, 0.0]), np.array([1.0, 1.0, 0.5, 2.0])
    scalar, vector = np.zeros((5, 4)), np.zeros((5, 4, 1))
    r1, r2 = np.random.default_rng(5), np.random.default_rng(5)
    for _ in range(50):
        scalar, m1 = jump(r1, current=scalar, log_target=target,
                          proposal=JumpProposal(estimate, sd), mu=0.1, tau=2.0)  # fmt: skip
        vector, m2 = jump(r2, current=vector, log_target=lambda e: target(e[..., 0]),
                          proposal=JumpProposal(estimate[:, None], sd[:, None]),
                          mu=np.array([0.1]), tau=np.array([2.0]))  # fmt: skip
        assert np.array_equal(scalar, vector[..., 0]) and np.array_equal(m1, m2)
    with pytest.raises(ValueError, match="tau"):
        jump(r1, current=vector, log_target=target, proposal=JumpProposal(estimate[:, None],
             sd[:, None]), mu=np.zeros(1), tau=np.array([-1.0]))  # fmt: skip


def _grouped_normal(groups=12, epsilon=0.5, seed=0):
    """A grouped Normal release of (Σx, Σx²) in the window (−10, 12), μ_g around 1, σ_g ~ 2."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(50, 300, size=groups)
    keys = [f"g{g}" for g in range(groups)]
    mu = rng.normal(1.0, 1.0, size=groups)
    sigma = np.exp(rng.normal(np.log(2.0), 0.2, size=groups))
    x = np.concatenate([rng.normal(mu[g], sigma[g], sizes[g]) for g in range(groups)])
    return pmdp.release_grouped(x, pm.Normal, by=np.repeat(keys, sizes), groups=keys,
                                sizes="public", bounds=(-10, 12), epsilon=epsilon,
                                rng=seed + 1)  # fmt: skip


@pytest.fixture(scope="module")
def normal_model():
    """``fit``'s grouped Normal model: ``build_grouped_model`` leaves the jumps' proposal."""
    rs = _grouped_normal()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_grouped_model(rs)


def test_the_location_scale_link_jumps_mu_and_sigma_together(normal_model):
    model = normal_model
    effects = model["z"].tag.pymc_dp_group_effects
    assert effects.variables == ("z_sigma",) and effects.weight.shape == (12, 2)
    assert effects.mu == ("mu", "log_sigma") and effects.tau == ("tau", "tau_sigma")
    assert np.all(np.isfinite(effects.proposal.estimate)) and np.all(effects.proposal.sd > 0)
    assert pmdp.GroupJumpStep.owns(model["z"]) and not pmdp.GroupJumpStep.owns(model["z_sigma"])
    assert [type(s).__name__ for s in pmdp.grouped_steps(model)] == ["NUTS", "GroupJumpStep"]


@pytest.mark.slow
def test_the_step_samples_each_groups_joint_conditional_of_the_location_scale_model(
    normal_model,
):
    # Jumps alone, everything else held: group 0's (z, z_sigma) must follow the model's own
    # joint conditional, tabulated on a 2-D grid with model.compile_logp; each component's
    # marginal is checked by KS.
    model = normal_model
    step = pmdp.GroupJumpStep([model.rvs_to_values[model["z"]]], model=model)
    step.set_rng(5)
    point = model.initial_point()
    draws = []
    for _ in range(1500):
        point, _ = step.step(point)
        draws.append((point["z"][0], point["z_sigma"][0]))
    draws = np.array(draws)
    logp = model.compile_logp(mode="FAST_COMPILE")
    grids = [np.linspace(d.min() - 1.0, d.max() + 1.0, 61) for d in draws.T]
    dens = np.empty((61, 61))
    for i, a in enumerate(grids[0]):
        for j, b in enumerate(grids[1]):
            p = dict(point)
            p["z"], p["z_sigma"] = point["z"].copy(), point["z_sigma"].copy()
            p["z"][0], p["z_sigma"][0] = a, b
            dens[i, j] = logp(p)
    dens = np.exp(dens - dens.max())
    thinned = draws[::3]
    for axis in range(2):
        marginal = dens.sum(axis=1 - axis)
        cdf = np.r_[0.0, np.cumsum(marginal[1:] + marginal[:-1])]  # trapezoids
        law = functools.partial(np.interp, xp=grids[axis], fp=cdf / cdf[-1])
        assert stats.kstest(thinned[:, axis], law).pvalue > 1e-3


def test_groups_started_outside_the_normal_window_are_freed(normal_model):
    # Four groups at μ_g = −40 and σ_g = 50 (almost no records in the window (−10, 12)), the
    # population at μ = 1, τ = 1, log σ = log 2, τ_σ = 0.3: within 20 sweeps of jumps every
    # group's μ_g is back inside the window and its σ_g below 10.
    model = normal_model
    step = pmdp.GroupJumpStep([model.rvs_to_values[model["z"]]], model=model)
    step.set_rng(6)
    w = step._effects.weight[:, 0]
    mu_g, log_sigma_g = np.full(12, 1.0), np.full(12, np.log(2.0))
    mu_g[:4], log_sigma_g[:4] = -40.0, np.log(50.0)
    overrides = {
        "mu": 1.0, "tau": 1.0, "log_sigma": np.log(2.0), "tau_sigma": 0.3,
        "z": w * 1.0 + 1.0 ** (w - 1.0) * (mu_g - 1.0),
        "z_sigma": (log_sigma_g - np.log(2.0)) / 0.3,
    }  # fmt: skip
    point = make_initial_point_fn(model=model, overrides=overrides)(0)
    jumped = 0
    for _ in range(20):
        point, stats_ = step.step(point)
        jumped += stats_[0]["group_jumps"]
    mu_g = 1.0 + (point["z"] - w * 1.0)
    sigma_g = np.exp(np.log(2.0) + 0.3 * point["z_sigma"])
    assert np.all((mu_g > -10) & (mu_g < 12)), mu_g
    assert np.all(sigma_g < 10), sigma_g
    assert jumped >= 4


@pytest.mark.parametrize("fixture", ["counted_model", "normal_model"])
def test_rounds_are_single_jumps_in_a_row(fixture, request):
    # Three rounds in one step must be three one-round steps from the same generator, bit for
    # bit: each round starts from the log density of what the last kept (cached, not
    # recomputed), so a stale cache would change an acceptance and the values.
    model = request.getfixturevalue(fixture)
    z = model.rvs_to_values[model["z"]]
    rounds = pmdp.GroupJumpStep([z], model=model, rounds=3)
    single = pmdp.GroupJumpStep([z], model=model, rounds=1)
    rounds.set_rng(8)
    single.set_rng(8)
    point = model.initial_point()
    together, stats_ = rounds.step(point)
    jumped = 0
    for _ in range(3):
        point, one = single.step(point)
        jumped += one[0]["group_jumps"]
    assert stats_[0]["group_jumps"] == jumped > 0
    for name in point:
        np.testing.assert_array_equal(together[name], point[name])


def test_the_default_rounds_follow_the_number_of_groups(counted_model, normal_model):
    # A vector effect (the Normal window's) of 12 groups: the most rounds; a scalar one: one.
    z = normal_model.rvs_to_values[normal_model["z"]]
    assert pmdp.GroupJumpStep([z], model=normal_model).rounds == JUMP_ROUNDS_MAX == jump_rounds(12)
    assert jump_rounds(50) == 2 and jump_rounds(500) == 1
    z = counted_model.rvs_to_values[counted_model["z"]]
    assert pmdp.GroupJumpStep([z], model=counted_model).rounds == 1
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="rounds must be a whole number"):
            pmdp.GroupJumpStep([z], model=counted_model, rounds=bad)
