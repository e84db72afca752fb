"""The measured CLT rule for window sums and what "auto" chooses with it."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pymc as pm
import pytest
from scipy import fft, special, stats

import pymc_dp as pmdp
from pymc_dp.engine.gibbs import _engine_likelihood
from pymc_dp.families import Exponential, Geometric, Normal, Poisson
from pymc_dp.likelihoods import window_trust
from pymc_dp.likelihoods.choice import CltWarning, choose_likelihood, clt_trust
from pymc_dp.likelihoods.window_trust import clt_ks, window_clt_trust, window_sum_law
from pymc_dp.model.noisy_suffstat import release_attrs
from pymc_dp.studies.designs import DESIGNS


def _ks_by_direct_sums(pmf_points, pmf, mean, sd, lower, beta, grid):
    """sup |F_exact - F_clt| of y on ``grid``, by direct sums (no FFT, no lattice noise)."""
    exact = np.array([np.sum(pmf * stats.laplace.cdf(t - pmf_points, scale=beta)) for t in grid])
    s = np.linspace(mean - 9 * sd, mean + 9 * sd, 4001)
    dens = stats.norm.pdf(s, mean, sd) * (s >= lower)
    dens /= dens.sum()
    clt = np.array([np.sum(dens * stats.laplace.cdf(t - s, scale=beta)) for t in grid])
    return float(np.max(np.abs(exact - clt)))


def test_clt_ks_of_counts_matches_direct_sums():
    """Five Poisson(0.5) records over [0, 10] with β = 0.3: clt_ks against an independent
    computation (the integer law convolved directly, the Laplace CDF summed term by term)."""
    fam, n, beta = Poisson(), 5, 0.3
    q = stats.poisson(0.5).pmf(np.arange(11))
    q[0] += stats.poisson(0.5).sf(10)
    law = np.ones(1)
    for _ in range(n):
        law = np.convolve(law, q)
    points = np.arange(law.size, dtype=float)
    mean = law @ points
    sd = np.sqrt(law @ (points - mean) ** 2)
    want = _ks_by_direct_sums(points, law, mean, sd, 0.0, beta, np.linspace(-3, 10, 2601))
    assert clt_ks(fam, 0.5, n, (0.0, 10.0), beta) == pytest.approx(want, abs=2e-3)


def test_clt_ks_of_continuous_records_matches_simulation():
    """Ten Exponential(0.3) records over [0.2, 1.5], β = 0.2: against 400 000 simulated sums."""
    rng = np.random.default_rng(0)
    x = rng.exponential(1 / 0.3, (400_000, 10))
    s = np.where((x >= 0.2) & (x <= 1.5), x, 0.0).sum(axis=1)
    y = s + rng.laplace(0.0, 0.2, s.size)
    points, pmf = window_sum_law(Exponential(), 0.3, (0.2, 1.5), 10)
    mean, sd = pmf @ points, np.sqrt(pmf @ (points - pmf @ points) ** 2)
    grid = np.linspace(-1.0, 8.0, 901)
    clt = np.array(
        [
            stats.norm.expect(
                lambda v, t=t: stats.laplace.cdf(t - v, scale=0.2),
                loc=mean,
                scale=sd,
                lb=0.0,
                ub=15.0,
                conditional=True,
            )
            for t in grid[::10]
        ]
    )
    empirical = np.searchsorted(np.sort(y), grid[::10], side="right") / y.size
    want = np.max(np.abs(empirical - clt))
    assert clt_ks(Exponential(), 0.3, 10, (0.2, 1.5), 0.2) == pytest.approx(want, abs=6e-3)


def test_rule_distrusts_small_n_and_little_noise_only():
    fam, bounds = Exponential(), (0.0, 1.5)
    assert not window_clt_trust(fam, 10, 3.0, 0.15, bounds)[0]
    assert window_clt_trust(fam, 10, 3.0, 15.0, bounds)[0]  # noise hides the shape
    assert window_clt_trust(fam, 1000, 300.0, 15.0, bounds)[0]
    trusted, reason = clt_trust(fam, 10, 3.0, 0.15, bounds=bounds)
    assert not trusted and "KS distance" in reason
    with pytest.raises(ValueError, match="bounds"):
        clt_trust(fam, 10, 3.0, 0.15)


def test_auto_takes_exact_for_continuous_records_where_the_clt_is_untrusted():
    fam, bounds = Exponential(), (0.0, 1.5)
    assert choose_likelihood(fam, 10, 3.0, 1.5, bounds=bounds).likelihood == "exact"
    assert choose_likelihood(fam, 1000, 300.0, 15.0, bounds=bounds).likelihood == "clt"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert choose_likelihood(fam, 1000, 300.0, 15.0, bounds=bounds).likelihood == "clt"
    # Untrusted and beyond the records budget: the CLT, with a warning naming the distance.
    with pytest.warns(CltWarning, match="KS distance"):
        choice = choose_likelihood(Normal(), 1000, [20.0, 50.0], 1.0, bounds=(1.0, 4.0))
    assert choice.likelihood == "clt"
    assert choose_likelihood(Normal(), 1000, [20.0, 50.0], 1.0, "exact", bounds=(1.0, 4.0))[0] == (
        "exact"
    )


def test_grouped_window_warning_names_the_measured_distance_not_counts():
    # Small groups of Normal records in a window: the CLT is untrusted by its KS distance. The
    # warning said "few expected counts", which is the rule for counts, not for windows.
    from pymc_dp.model.nodes.grouped import grouped_likelihood

    rng = np.random.default_rng(2)
    keys = ["a", "b"]
    x = rng.normal(0.0, 1.0, size=20)
    rs = pmdp.release_grouped(
        x, pm.Normal, by=np.repeat(keys, 10), groups=keys, sizes="public", bounds=(-4.0, 4.0),
        epsilon=1.0, rng=3,
    )  # fmt: skip
    with pytest.warns(CltWarning, match="KS distance") as caught:
        choices = grouped_likelihood(Normal(), rs, "auto")
    assert choices == ["clt", "clt"]
    assert all("expected counts" not in str(w.message) for w in caught)


def test_noisy_suffstat_auto_on_a_small_exponential_release():
    rel = pmdp.release(
        np.random.default_rng(0).exponential(0.5, 10),
        pm.Exponential,
        epsilon=1.0,
        bounds=(0.0, 1.5),
        rng=1,
    )
    with pm.Model() as model:
        lam = pm.Gamma("lam", 8.0, 2.0)
        pmdp.NoisySuffStat("y", pm.Exponential.dist(lam), release=rel)
    assert release_attrs(model)["pymc_dp_likelihood_y"] == "exact"


def test_engine_auto_uses_the_rule_on_the_paper_design():
    """The Figure 1 Exponential design: exact at n = 10, ε = 1; the CLT at n = 100, ε = 0.1."""
    design = DESIGNS["exponential"]
    rng = np.random.default_rng(0)
    for n, eps, want in [(10, 1.0, "exact"), (100, 0.1, "clt")]:
        sim = design.simulate(rng, trials=20, n=n, epsilon=eps)
        got = _engine_likelihood(
            design.family, n, sim.released, sim.scale, "auto", "auto", design.bounds
        )
        assert got == want


def test_exact_cost_of_continuous_records_needs_the_window_and_noise():
    from pymc_dp.likelihoods.choice import exact_cost

    assert exact_cost(Exponential(), 10, (0.0, 1.5), scale=1.5) == 1600  # 10 × 160 points
    assert exact_cost(Normal(), 10, (-3.0, 5.0), scale=30.0) == 10  # records
    with pytest.raises(ValueError, match="bounds and scale"):
        exact_cost(Exponential(), 10, (0.0, 1.5))


@pytest.mark.parametrize(
    ("family", "bounds"),
    [(Poisson(), (0.0, 40.0)), (Poisson(), (2.0, 10.0)), (Geometric(), (0.0, 20.0))],
)
@pytest.mark.parametrize("n", [10, 100])
def test_integer_cells_under_wide_noise_change_the_distance_little(monkeypatch, family, bounds, n):
    """From β = _COARSE_NOISE counts take integer cells: the KS table moves by under 10⁻⁴
    against the table on _FINE points per integer (the module docstring's measurement)."""
    beta = window_trust._COARSE_NOISE
    window_trust._clear_caches()
    coarse = window_trust._ks_core(family, n, bounds, beta)
    monkeypatch.setattr(window_trust, "_COARSE_NOISE", np.inf)
    window_trust._clear_caches()
    fine = window_trust._ks_core(family, n, bounds, beta)
    window_trust._clear_caches()
    assert np.max(np.abs(coarse[2] - fine[2])) < 1e-4
    np.testing.assert_allclose(coarse[0], fine[0], rtol=1e-9)
    np.testing.assert_allclose(coarse[1], fine[1], rtol=1e-6)


@pytest.mark.parametrize(
    ("family", "bounds"), [(Poisson(), (2.0, 10.0)), (Exponential(), (0.0, 1.5))]
)
def test_groups_below_the_direct_n_share_tables_and_stay_strict(monkeypatch, family, bounds):
    """n between _SMALL_N and _DIRECT_N is rounded to an eighth-octave grid: near the level the
    distance moves up (a stricter rule) or down by at most 1.5e-3, against the direct table."""
    for n in (23, 71):
        for beta in (0.5, 4.0):
            got = window_trust._ks_table(family, n, bounds, beta)[2]
            monkeypatch.setattr(window_trust, "_SMALL_N", 1000)
            want = window_trust._ks_table(family, n, bounds, beta)[2]
            monkeypatch.undo()
            near = (want > 0.003) & (want < 0.03)
            assert near.any()
            assert np.min(got[near] - want[near]) > -1.5e-3
            assert np.max(np.abs(got - want)) < 0.05


def _fft_ks_rows(points, pmf, region, scale):
    """The distance as computed until 2026-11-29: both laws convolved by FFT with the Laplace
    noise's cell masses cut at 12 scales each side (the reference for the linear-time form)."""
    step = points[1] - points[0]
    mean = pmf @ points
    var = np.maximum(np.einsum("ts,ts->t", pmf, (points - mean[:, None]) ** 2), 0.0)
    sd = np.sqrt(var)
    skip = (sd <= 0.0) | (scale > 50.0 * sd)
    ks = np.zeros(pmf.shape[0])
    if np.all(skip):
        return ks, mean, var
    rows = ~skip
    pmf, mean_r, sd_r = pmf[rows], mean[rows, None], sd[rows, None]
    edges = np.concatenate([points - step / 2, [points[-1] + step / 2]])
    cdf = special.ndtr((np.clip(edges, *region) - mean_r) / sd_r)
    clt = np.diff(cdf, axis=-1) / np.maximum(cdf[:, -1:] - cdf[:, :1], 1e-300)
    if scale > 0.0:
        half = math.ceil(12.0 * scale / step) + 1
        d = (step * np.arange(-half, half + 2) - step / 2) / scale
        noise = np.diff(np.where(d > 0, 1.0 - 0.5 * np.exp(-np.abs(d)), 0.5 * np.exp(-np.abs(d))))
        length = fft.next_fast_len(pmf.shape[-1] + noise.size, real=True)
        kernel = fft.rfft(noise, length)
        pmf, clt = (
            fft.irfft(fft.rfft(p, length, axis=-1) * kernel, length, axis=-1) for p in (pmf, clt)
        )
    gap = np.cumsum(pmf, axis=-1) - np.cumsum(clt, axis=-1)
    ks[rows] = np.max(np.abs(gap), axis=-1)
    return ks, mean, var


@pytest.mark.parametrize(
    ("family", "bounds", "n", "beta"),
    [
        (Normal(), (-12.0, 14.0), 58, 861.0),  # ε = 0.1 in benchmarks/grouped_speed.py
        (Normal(), (-1.0, 2.0), 30, 0.5),
        (Poisson(), (0.0, 40.0), 69, 16.0),
        (Poisson(), (2.0, 10.0), 10, 0.3),
        (Exponential(), (0.0, 1.5), 10, 0.15),
        (Poisson(), (0.0, 10.0), 5, 1e-9),  # noise far narrower than a lattice step
    ],
)
def test_linear_time_noise_is_never_below_the_fft_convolution(monkeypatch, family, bounds, n, beta):
    """The recursions give the FFT's distance plus at most twice the cut tail (e⁻¹²): never less
    (a rule at least as strict), and the means and variances unchanged."""
    window_trust._clear_caches()
    new = window_trust._ks_core(family, n, bounds, beta)
    monkeypatch.setattr(window_trust, "_ks_rows", _fft_ks_rows)
    window_trust._clear_caches()
    old = window_trust._ks_core(family, n, bounds, beta)
    window_trust._clear_caches()
    assert np.max(old[2]) > 0.005  # distances near the level or beyond it
    assert np.min(new[2] - old[2]) > -1e-12
    assert np.max(new[2] - old[2]) < 2.0 * math.exp(-12.0)
    np.testing.assert_array_equal(new[0], old[0])
    np.testing.assert_array_equal(new[1], old[1])


def _group_rows(rng, dist, settings, values, sizes, eps):
    """(family, n, y, noise scale, bounds) of each group of a grouped release of ``values``."""
    keys = [f"g{g}" for g in range(len(sizes))]
    rs = pmdp.release_grouped(values, dist, by=np.repeat(keys, sizes), groups=keys,
                              sizes="public", epsilon=eps, rng=rng, **settings)  # fmt: skip
    family, bounds = rs.first.get_family(), tuple(float(b) for b in rs.first.bounds)
    return [(family, int(n), value, float(rs.first.scale), bounds)
            for n, value in zip(rs.n, rs.value, strict=True)]  # fmt: skip


def test_grouped_choices_are_never_less_strict_than_the_fft_rule(monkeypatch):
    """Every group of grouped releases (Normal pair, Poisson and Exponential windows, 8–120
    records, ε = 0.3 and 3): a group the FFT rule distrusted stays distrusted."""
    rng = np.random.default_rng(31)
    cases = [
        (pm.Normal, {"bounds": (-3.0, 5.0)}, lambda size: rng.normal(1.0, 2.0, size)),
        (pm.Poisson, {"bounds": (0.0, 12.0)}, lambda size: rng.poisson(4.0, size)),
        (pm.Exponential, {"bounds": (0.0, 1.5)}, lambda size: rng.exponential(0.7, size)),
    ]
    rows = []
    for dist, settings, draw in cases:
        for eps in (0.3, 3.0):
            sizes = rng.integers(8, 121, size=10)
            rows += _group_rows(rng, dist, settings, draw(int(sizes.sum())), sizes, eps)

    def decide():
        window_trust._clear_caches()
        return [window_clt_trust(*row)[0] for row in rows]

    new = decide()
    monkeypatch.setattr(window_trust, "_ks_rows", _fft_ks_rows)
    old = decide()
    window_trust._clear_caches()
    assert 0 < sum(old) < len(old)  # both decisions occur
    assert not any(n and not o for n, o in zip(new, old, strict=True))
    assert new == old


def _full_table_trust(family, n, released, scale, bounds):
    """(trusted, distance) by the rule on the whole θ table: window_clt_trust until 2026-12-01
    (every row of :func:`window_trust._ks_core` convolved, then the sup over the rows near y)."""
    mean, var, table = window_trust._ks_table(family, n, bounds, scale)
    y = np.asarray(released, dtype=np.float64).reshape(-1)
    distance = np.max(np.abs(y - mean) / np.sqrt(var + 2.0 * scale**2), axis=-1)
    near = distance <= 3.0
    if not np.any(near):
        near = distance <= np.min(distance)
    ks = float(np.max(table[near]))
    return ks <= window_trust.WINDOW_KS_LEVEL, ks


@pytest.mark.slow
@pytest.mark.parametrize(
    ("dist", "settings", "draw"),
    [
        (pm.Normal, {"bounds": (-3.0, 5.0)}, lambda rng, size: rng.normal(1.0, 2.0, size)),
        (pm.Poisson, {"bounds": (0.0, 12.0)}, lambda rng, size: rng.poisson(4.0, size)),
        (pm.Exponential, {"bounds": (0.0, 1.5)}, lambda rng, size: rng.exponential(0.7, size)),
    ],
    ids=["normal-pair", "poisson", "exponential"],
)
def test_rows_that_decide_give_the_full_tables_choices(dist, settings, draw):
    """Grouped releases (G = 8 and 24, 5–400 records, ε = 0.1, 1 and 3): window_clt_trust,
    computing only the θ rows that can decide, makes every group's choice of the whole table;
    a trusted group's distance is the table's (to the 3 digits of the reason), an untrusted
    one's is at least the level and at most the table's; every row computed equals the full
    table's row (up to rounding); and the rows picked from one record's moments are within the
    slack."""
    rng = np.random.default_rng(131)
    rows = []
    for groups, eps in [(8, 0.1), (24, 1.0), (8, 3.0)]:
        sizes = rng.integers(5, 401, size=groups)
        rows += _group_rows(rng, dist, settings, draw(rng, int(sizes.sum())), sizes, eps)
    window_trust._clear_caches()
    new = [window_clt_trust(*row) for row in rows]
    early = 0
    for row, (trusted, reason) in zip(rows, new, strict=True):
        want, ks = _full_table_trust(*row)
        assert trusted == want
        if reason.split(" from its exact law ")[1].startswith("at least"):
            early += 1
            got = float(reason.split("at least ")[1].split(" ")[0])
            assert window_trust.WINDOW_KS_LEVEL < got <= float(f"{ks:.3g}")
        else:
            assert f"up to {ks:.3g} " in reason
        family, n, value, scale, bounds = row
        m, noise, _ = window_trust._reduced(n, scale)
        table = window_trust._row_table(family, m, bounds, noise)
        full = window_trust._ks_core(family, m, bounds, noise)
        done = table.done
        # Equal up to the FFT's rounding, which depends on how many rows go through it at once.
        np.testing.assert_allclose(table.ks[done], full[2][done], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(table.mean[done], full[0][done], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(table.var[done], full[1][done], rtol=1e-12, atol=1e-12)
        # One record's moments, times n, against the convolved law's: within half the slack.
        mean_1, var_1, _ = window_trust._record_moments(family, bounds)
        y = np.asarray(value, dtype=np.float64).reshape(-1)
        rough = window_trust._sd_distance(y, n * mean_1, n * var_1, scale)
        exact = window_trust._sd_distance(y, full[0] * n / m, full[1] * n / m, scale)
        assert np.max(np.abs(rough - exact)) < window_trust._ROW_MARGIN / 2
    window_trust._clear_caches()
    decided = [trusted for trusted, _ in new]
    assert 0 < sum(decided) < len(decided)  # both decisions occur
    assert early > 0  # and some groups stop early
