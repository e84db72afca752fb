"""Each group's window count released with its window sum (issue 36): curator, privacy, node.

A grouped windowed Poisson sum, like a single one, cannot tell a window that holds nearly every
record of a group from one far in the tail; each group's noisy count of records inside the
window can. These tests check the grouped release (ε split, one charge, files), the sensitivity
by search over neighbours that replace one record within its group, the count noise, the node
(each group's bivariate pair, vectorised), that the far mode is gone, the backends, the
calibration of λ_g, and the command line.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import subprocess
import sys
import warnings

import arviz as az
import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pymc.initial_point import make_initial_point_fn
from scipy import stats

import pymc_dp as pmdp
from pymc_dp.curator.exact_sums import FamilyPlan
from pymc_dp.curator.grouped_sums import GroupedPlan
from pymc_dp.curator.release_file import read_release
from pymc_dp.families import get_family
from pymc_dp.likelihoods.collapsed_pair import pair_logp
from pymc_dp.model.nodes.counted import grouped_counted_clt
from pymc_dp.model.nodes.info import node_infos

SITES = ("a", "b", "c", "d")
RATES = (2.0, 3.0, 4.0, 2.5)


def _records(n=2000, rates=RATES, seed=0):
    rng = np.random.default_rng(seed)
    code = rng.integers(len(rates), size=n)
    return rng.poisson(np.asarray(rates)[code]), np.asarray(SITES[: len(rates)])[code]


def _release(x, by, *, epsilon=1.0, bounds=(0, 30), count_share=0.1, seed=3, **kwargs):
    return pmdp.release_grouped(x, pm.Poisson, by=by, groups=kwargs.pop("groups", SITES),
                                sizes="public",
                                bounds=bounds, epsilon=epsilon, count_share=count_share,
                                rng=seed, **kwargs)  # fmt: skip


def _model(rs, *, prior=(2.0, 0.5), likelihood="auto"):
    with pm.Model(coords=rs.coords()) as model:
        lam = pm.Gamma("lam", *prior, dims="group")
        pmdp.NoisySuffStat(
            "y", pm.Poisson.dist(mu=lam), release=rs, dims="group", likelihood=likelihood
        )
    return model


def _without_counts(rs):
    """The same sums, their counts dropped (the release of earlier versions, read back)."""
    plain = {
        k: dataclasses.replace(r, window_count=None, count_epsilon=None)
        for k, r in rs.releases.items()
    }
    return pmdp.ReleaseSet(plain, by=rs.by)


# ---- curator: the release -------------------------------------------------------------------
def test_count_share_splits_epsilon_in_every_group_and_charges_the_set_once():
    x, by = _records()
    budget = pmdp.PrivacyBudget(epsilon=1.5)
    rs = _release(x, by, count_share=0.25, budget=budget)
    for rel in rs.releases.values():
        assert rel.epsilon == pytest.approx(0.75) and rel.count_epsilon == pytest.approx(0.25)
        assert rel.scale == pytest.approx(30 / 0.75) and rel.count_scale == pytest.approx(4.0)
    assert rs.total_epsilon == pytest.approx(1.0)
    assert budget.spent == pytest.approx(1.0)  # parallel composition: ε once, sum and counts
    assert rs.window_count.shape == (4,)
    data = json.loads(rs.to_json())
    assert all(r["count_epsilon"] == 0.25 for r in data["releases"])
    assert pmdp.ReleaseSet.from_json(rs.to_json()) == rs


def test_counts_are_each_groups_records_inside_the_window():
    # ε = 1e4: the noise (scale 1e-3) cannot move a count by half a record.
    pd = pytest.importorskip("pandas")
    x, by = _records(seed=1)
    rs = _release(x, by, epsilon=1e4, bounds=(1, 5), count_share=0.5)
    frame = _release(pd.DataFrame({"v": x, "site": by}), "site", epsilon=1e4, bounds=(1, 5),
                     count_share=0.5, column="v")  # fmt: skip
    for g, key in enumerate(SITES):
        inside = (by == key) & (x >= 1) & (x <= 5)
        assert abs(rs.window_count[g] - inside.sum()) < 0.5
        assert abs(rs.value[g] - x[inside].sum()) < 0.5
    np.testing.assert_array_equal(frame.window_count, rs.window_count)


def test_without_a_count_the_grouped_file_and_node_are_those_of_earlier_versions():
    x, by = _records()
    rs = _release(x, by, count_share=None)
    assert rs.window_count is None
    assert "window_count" not in rs.to_json() and "count_epsilon" not in rs.to_json()
    model = _model(pmdp.ReleaseSet.from_json(rs.to_json()))
    info = node_infos(model)[0]
    assert not info.counted and model["y"].type.ndim == 1


def test_count_share_is_refused_where_no_count_applies():
    rng = np.random.default_rng(0)
    x, by = rng.integers(0, 2, 60), rng.choice(["a", "b"], 60)
    with pytest.raises(ValueError, match="windowed family with one statistic"):
        pmdp.release_grouped(x, pm.Bernoulli, by=by, groups=["a", "b"], sizes="public",
                             epsilon=1.0, count_share=0.1, rng=1)  # fmt: skip
    with pytest.raises(ValueError, match="discrete-gaussian"):
        pmdp.release_grouped(x, pm.Poisson, by=by, groups=["a", "b"], sizes="public",
                             bounds=(0, 5), mechanism="discrete-gaussian", rho=0.5,
                             count_share=0.1)  # fmt: skip
    # "auto" takes a count only where one applies.
    auto = pmdp.release_grouped(x, pm.Bernoulli, by=by, groups=["a", "b"], sizes="public",
                                epsilon=1.0, count_share="auto", rng=1)  # fmt: skip
    assert auto.window_count is None


def test_a_set_with_counts_in_some_groups_only_is_refused():
    x, by = _records()
    rs = _release(x, by)
    mixed = dict(rs.releases)
    mixed["b"] = dataclasses.replace(mixed["b"], window_count=None, count_epsilon=None)
    with pytest.raises(ValueError, match="count_epsilon"):
        pmdp.ReleaseSet(mixed)


# ---- privacy: sensitivity by search over neighbouring records --------------------------------
@pytest.mark.parametrize(
    ("family", "window", "values"),
    [
        ("poisson", (2, 9), [0, 2, 9, 10, 40]),
        ("exponential", (0.5, 4.0), [0.0, 0.5, 4.0, 4.01, 50.0]),
    ],
)
def test_replace_one_within_its_group_moves_one_count_by_one(family, window, values):
    # Every data set of 3 records over 2 groups (values inside, at and beyond both ends, every
    # assignment of keys), and every replacement of one record's value within its group: the
    # exact totals of the curator's own grouped plan.
    fam = get_family(family)
    plan = GroupedPlan(FamilyPlan.for_release(fam, window, count=True), ("g0", "g1"))
    units = plan.plan.units()
    delta = fam.release_sensitivity(window)
    worst_sum = worst_count = 0.0
    for keys in itertools.product(("g0", "g1"), repeat=3):
        keys = np.array(keys)
        for data in itertools.product(values, repeat=3):
            base = plan.split(plan.totals_of(np.array(data, dtype=float), keys).totals)
            for i, other in itertools.product(range(3), values):
                neighbour = np.array(data, dtype=float)
                neighbour[i] = other
                moved = plan.split(plan.totals_of(neighbour, keys).totals)
                assert [n for n, _ in moved] == [n for n, _ in base]  # the sizes stay public
                sums = [abs(m[1][0] - b[1][0]) * units[0] for m, b in zip(moved, base)]
                counts = [abs(m[1][1] - b[1][1]) for m, b in zip(moved, base)]
                assert sum(c > 0 for c in counts) <= 1 and sum(s > 0 for s in sums) <= 1
                worst_sum, worst_count = max(worst_sum, *sums), max(worst_count, *counts)
    assert worst_count == 1
    assert delta - plan.plan.quantum <= worst_sum <= delta + 1e-12


def test_count_noise_is_laplace_of_scale_one_over_its_epsilon_in_every_group():
    x, by = _records(n=200)
    true = np.array([((by == k) & (x <= 5)).sum() for k in SITES])
    draws = np.concatenate([
        _release(x, by, epsilon=2.0, bounds=(0, 5), count_share=0.25, seed=s).window_count - true
        for s in range(100)
    ])  # fmt: skip
    # 400 draws of Laplace(0, 2) (ε_count = 0.5): KS against it, and its mean absolute value.
    assert stats.kstest(draws, stats.laplace(scale=2.0).cdf).pvalue > 0.01
    assert np.mean(np.abs(draws)) == pytest.approx(2.0, rel=0.15)


# ---- the node --------------------------------------------------------------------------------
def test_node_is_each_groups_bivariate_pair_with_its_sum_latent():
    # The node keeps each group's window sum latent (u, standard units): integrating u out of
    # its terms must give each group's pair likelihood of (sum, count) at λ_g.
    x, by = _records()
    rs = _release(x, by, epsilon=0.5)
    model = _model(rs)
    info = node_infos(model)[0]
    assert info.counted and info.likelihood == "clt"
    assert model.named_vars_to_dims["y"] == ("group", "y_stat")
    terms = model.compile_fn(pt.add(*model.logp(vars=[model["y_s1_std"], model["y"]], sum=False)))
    lam = np.array([1.5, 3.0, 5.0, 12.0])
    u = np.linspace(-40.0, 40.0, 8001)
    joint = np.array([terms({"lam_log__": np.log(lam), "y_s1_std": np.full(4, v)}) for v in u])
    top = joint.max(axis=0)
    integrated = top + np.log(np.trapezoid(np.exp(joint - top), u, axis=0))
    means, covs = (np.asarray(v.eval()) for v in
                   grouped_counted_clt(get_family("poisson"), lam, rs.n, (0, 30)))  # fmt: skip
    for g, key in enumerate(SITES):
        rel = rs[key]
        want = pair_logp([float(rel.value), rel.window_count], means[g], covs[g],
                         [rel.scale, rel.count_scale])  # fmt: skip
        assert integrated[g] == pytest.approx(float(want.eval()), abs=1e-4)  # trapezoid, kink


def _far_mass(rs, grid, far):
    """Per group, the flat-prior posterior mass of λ_g on ``far`` and its mean.

    From the node's likelihood with its latent sums integrated out: each group's pair of (sum,
    count) at the moments of :func:`grouped_counted_clt`, or without counts the collapsed
    normal–Laplace of the sum alone that the grouped node uses.
    """
    fam = get_family("poisson")
    if rs.window_count is None:
        model = _model(rs)
        terms = model.compile_fn(model.logp(vars=[model["y"]], sum=False)[0])
        logp = np.array([terms({"lam_log__": np.full(len(rs), np.log(v))}) for v in grid])
    else:
        y, b = pt.dmatrix(), pt.dmatrix()
        lam = pt.dvector()
        means, covs = grouped_counted_clt(fam, lam, rs.n, rs.first.bounds)
        pair = pytensor.function([lam, y, b], pair_logp(y, means, covs, b))
        yy = np.c_[rs.value, rs.window_count]
        bb = np.tile([rs.first.scale, rs.first.count_scale], (len(rs), 1))
        logp = np.array([pair(np.full(len(rs), v), yy, bb) for v in grid])  # (N, G)
    w = np.exp(logp - logp.max(axis=0)) * np.gradient(grid)[:, None]
    w /= w.sum(axis=0)
    mean = (w * grid[:, None]).sum(axis=0)
    sd = np.sqrt((w * (grid[:, None] - mean) ** 2).sum(axis=0))
    return w[far].sum(axis=0), mean, sd


def test_the_counts_remove_the_far_mode_of_a_grouped_poisson():
    # The case in groups: 4 × 5000 records of λ_g from 2 to 4 over [0, 30] at ε = 0.1.
    # Each sum alone is also explained by λ_g ≈ 35-45 (most records beyond the window, the rest
    # summing the same); with each group's count, that mode is gone.
    x, by = _records(n=20_000, seed=5)
    rs = _release(x, by, epsilon=0.1, seed=6)
    grid = np.geomspace(0.5, 80.0, 600)
    far = grid > 12.0
    with_counts, mean, sd = _far_mass(rs, grid, far)
    alone = _far_mass(_without_counts(rs), grid, far)[0]
    assert np.all(with_counts < 1e-3), with_counts
    assert np.all(alone > 0.01), alone
    truth = np.array([x[by == k].mean() for k in SITES])
    assert np.all(np.abs(mean - truth) < 3 * sd), (mean, truth, sd)


def _logp_and_gradient(mode):
    x, by = _records()
    model = _model(_release(x, by, epsilon=0.5))
    point = model.initial_point()
    fn = model.compile_fn([model.logp(), *model.dlogp()], mode=mode, point_fn=True)
    return fn(point), model.compile_fn([model.logp(), *model.dlogp()], point_fn=True)(point)


def test_the_grouped_pair_compiles_on_jax():
    pytest.importorskip("jax")
    got, want = _logp_and_gradient("JAX")
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-9)


@pytest.mark.slow
def test_the_grouped_pair_compiles_on_numba():
    # Slow: the Poisson window's incomplete gamma compiles anew on Numba (docs/scale.md).
    pytest.importorskip("numba")
    got, want = _logp_and_gradient("NUMBA")
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-9)


def test_exact_likelihood_says_the_counts_are_unused():
    x, by = _records(n=200)
    rs = _release(x, by, epsilon=0.5, bounds=(0, 8))
    with pytest.warns(UserWarning, match="window counts are not used"):
        model = _model(rs, likelihood="exact")
    assert not node_infos(model)[0].counted


# ---- calibration ------------------------------------------------------------------------------
def _coverage(count_scale_factor, *, releases=60, size=300, epsilon=0.5, seed=36):
    """90% coverage and KS p-value of λ_g over ``releases`` × 4 groups of ``size`` records.

    λ_g ~ Gamma(4, 1), Poisson records over [0, 6] (θ near 6 puts a third of them beyond it),
    ε = 0.5 with the default share. Posterior on a grid from the node's moments
    (:func:`grouped_counted_clt`) and pair likelihood, with the count's noise scale taken as
    ``count_scale_factor`` times the released one (1: the node's; else a wrong scale).
    """
    rng = np.random.default_rng(seed)
    fam = get_family("poisson")
    grid = np.linspace(0.05, 20.0, 800)
    means, covs = (np.asarray(a) for a in
                   pytensor.function([], grouped_counted_clt(fam, grid, np.full(grid.size, size),
                                                             (0, 6)))())  # fmt: skip
    y, b = pt.dvector(), pt.dvector()
    logp = pytensor.function([y, b], pair_logp(y[None, :], means, covs, b[None, :]))
    prior = stats.gamma(4.0).logpdf(grid)
    quantiles = []
    for _ in range(releases):
        true = rng.gamma(4.0, size=4)
        x = rng.poisson(np.repeat(true, size))
        by = np.repeat(np.array(SITES), size)
        rs = _release(x, by, epsilon=epsilon, bounds=(0, 6), seed=int(rng.integers(2**31)))
        for g, key in enumerate(SITES):
            rel = rs[key]
            yy = np.array([float(rel.value), rel.window_count])
            bb = np.array([rel.scale, rel.count_scale * count_scale_factor])
            w = logp(yy, bb) + prior
            cdf = np.cumsum(np.exp(w - w.max()))
            quantiles.append(float(np.interp(true[g], grid, cdf / cdf[-1])))
    quantiles = np.array(quantiles)
    covered = np.mean((quantiles >= 0.05) & (quantiles <= 0.95))
    return covered, stats.kstest(quantiles, "uniform").pvalue


def _calibrated(covered, pvalue):
    # 240 group-trials: the 90% interval must cover λ_g in a binomial 99.9% band and the
    # quantiles of the true λ_g pass a KS test of uniformity at 0.001.
    return 0.82 <= covered <= 0.96 and pvalue > 0.001


@pytest.mark.slow
def test_calibration_of_lambda_g_with_the_counts():
    band = stats.binom(240, 0.9).ppf([0.0005, 0.9995]) / 240
    assert band[0] >= 0.82 - 1e-9 and band[1] <= 0.96 + 1e-9  # the band the check uses
    covered, pvalue = _coverage(1.0)
    assert _calibrated(covered, pvalue), (covered, pvalue)
    # The same check fails when the likelihood takes the count's noise 20 times too narrow.
    assert not _calibrated(*_coverage(0.05))


# ---- command line ----------------------------------------------------------------------------
def _cli(*argv, cwd):
    return subprocess.run(
        [sys.executable, "-m", "pymc_dp.cli", *argv], capture_output=True, text=True, cwd=cwd
    )


def _release_cli(tmp_path, output, *flags):
    return _cli("release", "visits.csv", "--column", "visits", "--family", "poisson", "--bounds",
                "0", "30", "--epsilon", "0.5", "--by", "site", "--groups", "a,b,c,d",
                "--public-sizes", "--seed", "1", *flags, "--output", output,
                cwd=tmp_path)  # fmt: skip


def test_cli_release_by_includes_the_counts(tmp_path):
    x, by = _records(n=800)
    np.savetxt(tmp_path / "visits.csv", np.c_[by, x], fmt="%s", delimiter=",",
               header="site,visits", comments="")  # fmt: skip
    done = _release_cli(tmp_path, "r.json")
    assert done.returncode == 0, done.stderr
    assert "0.45 for each window sum + 0.05 for each window count" in done.stdout
    rs = read_release(tmp_path / "r.json", allow_grouped=True)
    assert rs.window_count.shape == (4,) and rs.total_epsilon == pytest.approx(0.5)
    done = _release_cli(tmp_path, "s.json", "--count-share", "0")
    assert done.returncode == 0, done.stderr
    assert "window count" not in done.stdout
    assert read_release(tmp_path / "s.json", allow_grouped=True).window_count is None


@pytest.mark.slow
def test_cli_fit_of_a_grouped_release_with_counts(tmp_path):
    x, by = _records(n=800)
    np.savetxt(tmp_path / "visits.csv", np.c_[by, x], fmt="%s", delimiter=",",
               header="site,visits", comments="")  # fmt: skip
    assert _release_cli(tmp_path, "r.json").returncode == 0
    done = _cli("fit", "r.json", "--draws", "100", "--tune", "200", "--chains", "1",
                "--output-dir", "fit", "--seed", "2", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "0.45 for each window sum + 0.05 for each window count" in done.stdout
    for name in ("posterior.nc", "summary.csv", "posterior.png", "trace.png"):
        assert (tmp_path / "fit" / name).exists()
    # NUTS with group jumps (GroupJumpStep: the window's far mode would trap a chain).
    idata = az.from_netcdf(tmp_path / "fit" / "posterior.nc")
    assert "group_jumps" in idata.sample_stats


def test_cli_dry_run_by_states_the_split(tmp_path):
    done = _cli("release", "--dry-run", "--family", "poisson", "--bounds", "0", "40",
                "--epsilon", "0.5", "--by", "site", "--groups", "a,b", "--public-sizes",
                "100,200", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "epsilon = 0.45 for the window sum" in done.stdout
    assert f"noise scale {40 / 0.45:.4g}," in done.stdout
    assert "number of records in the window: epsilon = 0.05, noise scale 20" in done.stdout


def test_warnings_are_quiet_for_a_plain_counted_node():
    x, by = _records()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _model(_release(x, by, epsilon=0.5))


def test_fits_model_starts_mu_at_the_released_estimates_with_or_without_counts():
    # The far mode keeps no mass with the counts but stays a local mode: a chain started at the
    # window's centre (μ = log 15 over [0, 30]) can stay there (randhie.mdvis by coinsurance
    # plan: 1 chain of 4 at λ_g ≈ 38, R-hat 1.74). μ starts at the estimates, with counts and,
    # since nutpie's chains split on sums alone (tests/test_grouped_window_start.py), without.
    from pymc_dp.model.hierarchical import build_grouped_model

    x, by = _records(n=4000)
    rs = _release(x, by, epsilon=0.5)
    for release in (rs, _without_counts(rs)):
        model = build_grouped_model(release)
        start = make_initial_point_fn(model=model, return_transformed=False)(0)["mu"]
        assert abs(np.exp(start) - np.median(RATES)) < 0.5
        assert abs(start - np.log(15.0)) > 1.0  # not the prior's mean
