"""The window count released with a window sum (issue 36): curator, privacy, likelihood, CLI.

A windowed Poisson or Exponential sum cannot tell a window that holds nearly every record from
one far in the tail; the noisy number of records inside the window can. These tests check the
release (ε split, noise scales, files), the sensitivity by search over neighbouring records, the
CLT of (window sum, window count) against Monte Carlo, that the far mode is gone, the model's
calibration, and the command line.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import stats

import pymc_dp as pmdp
from pymc_dp.cli import main
from pymc_dp.curator.exact_sums import FamilyPlan
from pymc_dp.curator.release_file import read_release
from pymc_dp.families import get_family
from pymc_dp.likelihoods.collapsed import normal_laplace_logp
from pymc_dp.likelihoods.collapsed_pair import pair_logp
from pymc_dp.model.nodes.info import node_infos, release_attrs


def _poisson(n=2000, lam=3.0, seed=0):
    return np.random.default_rng(seed).poisson(lam, size=n)


# ---- curator: the release -------------------------------------------------------------------
def test_count_share_splits_epsilon_and_states_it_in_the_file():
    x = _poisson()
    rel = pmdp.release(x, pm.Poisson, epsilon=1.0, bounds=(0, 6), count_share=0.25, rng=3)
    assert rel.epsilon == pytest.approx(0.75) and rel.count_epsilon == pytest.approx(0.25)
    assert rel.total_epsilon == pytest.approx(1.0)
    assert rel.scale == pytest.approx(6 / 0.75) and rel.count_scale == pytest.approx(4.0)
    data = json.loads(rel.to_json())
    assert data["window_count"] == rel.window_count and data["count_epsilon"] == 0.25
    assert pmdp.Release.from_json(rel.to_json()) == rel


def test_count_is_the_number_of_records_inside_the_window():
    # At ε = 1e4 the noise (scale 1e-3) cannot move the count by half a record.
    x = _poisson(seed=1)
    inside = (x >= 1) & (x <= 5)
    for mechanism, rng in (("laplace-float", 4), ("discrete-laplace", None)):
        rel = pmdp.release(
            x, pm.Poisson, epsilon=1e4, bounds=(1, 5), count_share=0.5, mechanism=mechanism, rng=rng
        )
        assert abs(rel.window_count - inside.sum()) < 0.5
        assert abs(float(rel.value) - x[inside].sum()) < 0.5


def test_count_of_continuous_records_and_of_a_data_frame():
    pd = pytest.importorskip("pandas")
    x = np.random.default_rng(2).exponential(2.0, size=3000)
    inside = (x >= 0.5) & (x <= 4.0)
    from_array = pmdp.release(
        x, pm.Exponential, epsilon=1e4, bounds=(0.5, 4.0), count_share=0.5, rng=5
    )
    from_frame = pmdp.release(
        pd.DataFrame({"w": x}),
        pm.Exponential,
        column="w",
        epsilon=1e4,
        bounds=(0.5, 4.0),
        count_share=0.5,
        rng=5,
    )
    assert abs(from_array.window_count - inside.sum()) < 0.5
    assert from_frame.window_count == from_array.window_count
    assert from_frame.value == from_array.value


def test_release_without_a_count_is_the_file_of_earlier_versions():
    rel = pmdp.release(_poisson(), pm.Poisson, epsilon=1.0, bounds=(0, 6), rng=3)
    data = json.loads(rel.to_json())
    assert rel.window_count is None and rel.count_epsilon is None
    assert "window_count" not in data and "count_epsilon" not in data
    assert rel.total_epsilon == 1.0
    # An old file (no count fields) reads, and fits with the window sum alone.
    old = pmdp.Release.from_json(json.dumps(data))
    with pm.Model() as model:
        lam = pm.Gamma("lam", 2.0, 0.5)
        pmdp.NoisySuffStat("y", pm.Poisson.dist(mu=lam), release=old)
    assert not node_infos(model)[0].counted


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(count_share=0.0), ValueError, "count_share"),
        (dict(count_share=1.0), ValueError, r"count_share must lie in \(0, 1\)"),
        (dict(count_share="most"), TypeError, "count_share"),
    ],
)
def test_bad_count_share_is_refused(kwargs, error, match):
    with pytest.raises((error, ValueError), match=match):
        pmdp.release(_poisson(), pm.Poisson, epsilon=1.0, bounds=(0, 6), rng=3, **kwargs)


def test_count_share_is_refused_where_no_count_applies():
    with pytest.raises(ValueError, match="windowed family with one statistic"):
        pmdp.release(np.r_[0, 1, 1], pm.Bernoulli, epsilon=1.0, count_share=0.1, rng=1)
    x = np.random.default_rng(0).normal(size=50)
    with pytest.raises(ValueError, match="windowed family with one statistic"):
        pmdp.release(x, pm.Normal, epsilon=1.0, bounds=(-3, 3), count_share=0.1, rng=1)
    with pytest.raises(ValueError, match="discrete-gaussian"):
        pmdp.release(
            _poisson(),
            pm.Poisson,
            mechanism="discrete-gaussian",
            rho=0.5,
            bounds=(0, 6),
            count_share=0.1,
        )
    # "auto" takes a count only where one applies.
    assert (
        pmdp.release(
            x, pm.Normal, epsilon=1.0, bounds=(-3, 3), count_share="auto", rng=1
        ).window_count
        is None
    )


def test_release_file_checks_the_count_fields():
    data = json.loads(
        pmdp.release(
            _poisson(), pm.Poisson, epsilon=1.0, bounds=(0, 6), count_share=0.1, rng=3
        ).to_json()
    )
    half = {k: v for k, v in data.items() if k != "count_epsilon"}
    with pytest.raises(ValueError, match="go together"):
        pmdp.Release.from_dict(half)
    with pytest.raises(TypeError, match="count_epsilon"):
        pmdp.Release.from_dict({**data, "count_epsilon": "0.1"})
    with pytest.raises(ValueError, match="count_epsilon"):
        pmdp.Release.from_dict({**data, "count_epsilon": -0.1})


# ---- privacy: sensitivity by search over neighbouring records --------------------------------
@pytest.mark.parametrize(
    ("family", "window", "values"),
    [
        ("poisson", (2, 9), [0, 1, 2, 3, 5, 8, 9, 10, 40]),
        ("exponential", (0.5, 4.0), [0.0, 0.2, 0.5, 0.51, 2.0, 3.99, 4.0, 4.01, 50.0]),
        ("geometric", (1, 6), [1, 2, 5, 6, 7, 30]),
    ],
)
def test_replace_one_moves_the_count_by_one_and_the_sum_by_delta(family, window, values):
    # Every data set of 3 records from the values (inside, at and beyond both ends), and every
    # replacement of one record by any value: exact totals from the curator's own plan.
    fam = get_family(family)
    plan = FamilyPlan.for_release(fam, window, count=True)
    delta = fam.release_sensitivity(window)
    worst_sum = worst_count = 0.0
    for data in itertools.product(values, repeat=3):
        base = plan.batch_totals(np.array(data, dtype=float), checked=False).totals
        for i, other in itertools.product(range(3), values):
            neighbour = np.array(data, dtype=float)
            neighbour[i] = other
            moved = plan.batch_totals(neighbour).totals
            units = plan.units()
            worst_sum = max(worst_sum, abs(moved[0] - base[0]) * units[0])
            worst_count = max(worst_count, abs(moved[1] - base[1]))
    assert worst_count == 1
    assert worst_sum <= delta + 1e-12
    assert worst_sum >= delta - plan.quantum  # the bound is reached (up to the record grid)


def test_noise_scales_give_epsilon_in_all():
    # Laplace noise of Δ/ε_sum on the sum and 1/ε_count on the count: ε_sum + ε_count = ε.
    rel = pmdp.release(_poisson(), pm.Poisson, epsilon=0.3, bounds=(0, 7), count_share=0.2)
    assert rel.sensitivity / rel.scale + 1.0 / rel.count_scale == pytest.approx(0.3)
    assert rel.total_epsilon == pytest.approx(0.3)


def test_count_noise_is_laplace_of_scale_one_over_its_epsilon():
    x = _poisson(n=100)
    true = int(((x >= 0) & (x <= 5)).sum())
    draws = [
        pmdp.release(
            x, pm.Poisson, epsilon=2.0, bounds=(0, 5), count_share=0.25, rng=s
        ).window_count
        - true
        for s in range(400)
    ]
    # 400 draws of Laplace(0, 2): KS against it, and its mean absolute value 2.
    assert stats.kstest(draws, stats.laplace(scale=2.0).cdf).pvalue > 0.01
    assert np.mean(np.abs(draws)) == pytest.approx(2.0, rel=0.15)


# ---- likelihood ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("family", "theta", "window", "draw"),
    [
        ("poisson", 3.0, (1, 5), lambda r, n: r.poisson(3.0, n)),
        ("poisson", 38.0, (0, 30), lambda r, n: r.poisson(38.0, n)),
        ("exponential", 0.5, (0.5, 4.0), lambda r, n: r.exponential(2.0, n)),
    ],
)
def test_counted_clt_matches_monte_carlo(family, theta, window, draw):
    fam = get_family(family)
    mean, cov = (
        np.asarray(v)
        for v in pytensor.function([], fam.counted_clt(pt.constant(theta), 1, window))()
    )
    x = draw(np.random.default_rng(0), 400_000)
    inside = (x >= window[0]) & (x <= window[1])
    pairs = np.stack([np.where(inside, x, 0.0), inside.astype(float)], axis=1)
    np.testing.assert_allclose(mean, pairs.mean(axis=0), rtol=0.02, atol=1e-3)
    np.testing.assert_allclose(cov, np.cov(pairs.T), rtol=0.03, atol=1e-3)


def test_node_is_the_bivariate_normal_laplace_of_sum_and_count():
    rel = pmdp.release(_poisson(), pm.Poisson, epsilon=0.5, bounds=(0, 6), count_share=0.1, rng=3)
    with pm.Model() as model:
        lam = pm.Gamma("lam", 2.0, 0.5)
        pmdp.NoisySuffStat("y", pm.Poisson.dist(mu=lam), release=rel)
    info = node_infos(model)[0]
    assert info.counted and "window_count" in release_attrs(model)["pymc_dp_release_y"]
    fam = get_family("poisson")
    logp = model.compile_fn(model.observedlogp)
    for value in (2.0, 3.0, 4.5):
        m, v = fam.counted_clt(pt.constant(value), rel.n, rel.bounds)
        want = pair_logp(
            [float(rel.value), rel.window_count], m, v, [rel.scale, rel.count_scale]
        ).eval()
        got = logp({"lam_log__": np.log(value)})
        assert got == pytest.approx(float(want), rel=1e-6)


def _grid_posterior(logp, grid):
    w = np.array([logp(g) for g in grid])
    w = np.exp(w - w.max()) * np.gradient(grid)
    return w / w.sum()


def test_the_count_removes_the_far_mode_of_a_windowed_poisson():
    # The case in small: n = 20 000 records of λ = 2.7 over [0, 30] at ε = 0.1. The
    # sum alone is as likely at λ ≈ 38 (most records beyond the window, the rest summing the
    # same); with the count, that mode is gone.
    x = _poisson(n=20_000, lam=2.7, seed=5)
    rel = pmdp.release(x, pm.Poisson, epsilon=0.1, bounds=(0, 30), count_share=0.1, rng=6)
    fam = get_family("poisson")
    lam = pt.dscalar()
    # (m, V) at every grid point, then one batched evaluation of the pair likelihood.
    moments = pytensor.function([lam], fam.counted_clt(lam, rel.n, rel.bounds))
    mean, var, lower, upper = fam.released_clt(lam, rel.n, rel.bounds)
    alone = pytensor.function(
        [lam], normal_laplace_logp(float(rel.value), mean, var, lower, upper, rel.scale)
    )
    grid = np.linspace(0.5, 80.0, 4000)
    far = grid > 10.0
    # Same prior on both (flat on the grid): only the likelihood differs.
    assert _grid_posterior(alone, grid)[far].sum() > 0.05
    means, covs = (np.stack(a) for a in zip(*(moments(g) for g in grid)))
    yy = np.array([float(rel.value), rel.window_count])
    pair = pair_logp(yy[None, :], means, covs, np.array([[rel.scale, rel.count_scale]])).eval()
    with_count = np.exp(pair - pair.max()) * np.gradient(grid)
    with_count /= with_count.sum()
    assert with_count[far].sum() < 1e-6
    assert abs(np.sum(with_count * grid) - 2.7) < 0.1


@pytest.mark.slow
def test_calibration_of_lambda_with_the_count():
    # 300 seeded trials: λ ~ Gamma(4, 1), n = 300 Poisson records over [0, 6] (the window
    # drops the upper tail: θ near 6 puts a third of the records beyond it), ε = 0.5 with the
    # default share. Posterior on a grid from the node's own likelihood. The 90% interval must
    # cover λ in a binomial 99.9% band of 300 trials ([0.840, 0.947]) and the quantiles of
    # the true λ must pass a KS test of uniformity at 0.001.
    rng = np.random.default_rng(36)
    fam = get_family("poisson")
    grid = np.linspace(0.05, 20.0, 800)
    # (m, V) of the node at every grid point (they do not depend on the release), then one
    # batched evaluation of the node's pair likelihood per release.
    lam = pt.dscalar()
    moments = pytensor.function([lam], fam.counted_clt(lam, 300, (0, 6)))
    means, covs = (np.stack(a) for a in zip(*(moments(g) for g in grid)))
    y, b = pt.dvector(), pt.dvector()
    logp = pytensor.function([y, b], pair_logp(y[None, :], means, covs, b[None, :]))
    prior = stats.gamma(4.0).logpdf(grid)
    quantiles, covered = [], 0
    trials = 300
    for _ in range(trials):
        true = rng.gamma(4.0)
        x = rng.poisson(true, size=300)
        rel = pmdp.release(
            x, pm.Poisson, epsilon=0.5, bounds=(0, 6), count_share=0.1, rng=int(rng.integers(2**31))
        )
        yy = np.array([float(rel.value), rel.window_count])
        bb = np.array([rel.scale, rel.count_scale])
        w = logp(yy, bb) + prior
        w = np.exp(w - w.max())
        cdf = np.cumsum(w) / w.sum()
        u = float(np.interp(true, grid, cdf))
        quantiles.append(u)
        covered += 0.05 <= u <= 0.95
    coverage = covered / trials
    assert 0.840 <= coverage <= 0.947, coverage
    assert stats.kstest(quantiles, "uniform").pvalue > 0.001


# ---- command line ----------------------------------------------------------------------------
def _cli(*argv, cwd):
    return subprocess.run(
        [sys.executable, "-m", "pymc_dp.cli", *argv], capture_output=True, text=True, cwd=cwd
    )


def _release_visits(tmp_path, output, *flags):
    """``pymc-dp release`` of tmp_path/visits.csv (Poisson over [0, 8], ε = 1, seed 1), run
    in-process by :func:`pymc_dp.cli.main` (test_cli_release_fit runs the console script):
    (exit status, stdout, stderr)."""
    argv = ["release", str(tmp_path / "visits.csv"), "--column", "visits", "--family",
            "poisson", "--bounds", "0", "8", "--epsilon", "1", "--seed", "1", *flags,
            "--output", str(tmp_path / output)]  # fmt: skip
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own errors
        code = exit_.code
    return code


def test_cli_release_includes_the_count_by_default_and_says_so(tmp_path, capsys):
    data = tmp_path / "visits.csv"
    data.write_text("visits\n" + "\n".join(map(str, _poisson(n=300))) + "\n")
    assert _release_visits(tmp_path, "r.json") == 0, capsys.readouterr().err
    assert "0.9 for the window sum + 0.1 for the window count" in capsys.readouterr().out
    rel = read_release(tmp_path / "r.json")
    assert rel.count_epsilon == pytest.approx(0.1) and rel.total_epsilon == pytest.approx(1.0)
    assert _release_visits(tmp_path, "s.json", "--count-share", "0") == 0
    assert "window count" not in capsys.readouterr().out
    assert read_release(tmp_path / "s.json").window_count is None
    assert _release_visits(tmp_path, "t.json", "--count-share", "1.5") != 0
    assert "--count-share" in capsys.readouterr().err


def test_cli_dry_run_states_the_split(tmp_path):
    done = _cli("release", "--dry-run", "--n", "1000", "--family", "poisson", "--bounds", "0",
                "40", "--epsilon", "0.5", "--mechanism", "laplace-float", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    # Δ = 40 at ε = 0.45 for the sum; the count at ε = 0.05, scale 20.
    assert "epsilon = 0.45 for the window sum" in done.stdout
    assert f"noise scale {40 / 0.45:.4g}," in done.stdout
    assert "the number of records in the window: epsilon = 0.05, noise scale 20" in done.stdout


def test_private_window_then_count_then_sum_share_epsilon():
    x = np.random.default_rng(3).exponential(2.0, size=2000)
    rel = pmdp.release(x, pm.Exponential, epsilon=1.0, bounds="private", bounds_share=0.2,
                       bounds_range=(0.0, 40.0), count_share=0.25, rng=1)  # fmt: skip
    assert rel.bounds_epsilon == pytest.approx(0.2)
    assert rel.count_epsilon == pytest.approx(0.2) and rel.epsilon == pytest.approx(0.6)
    assert rel.total_epsilon == pytest.approx(1.0)
    assert rel.scale == pytest.approx(rel.sensitivity / 0.6)
