"""CLT moments of the regression statistic: closed forms of the paper, Monte Carlo, batching."""

import numpy as np
import pytest

from pymc_dp.curator.regression.statistics import released_pairs
from pymc_dp.regression.kernels.moments import (
    XMoments,
    empirical_x_moments,
    suffstat_moments,
    x_moments_from_monomial_means,
)


def _uniform_moments(lo, hi):
    """x ~ Uniform(lo, hi): E x^k for k = 0..4, the d = 1 monomial order."""
    k = np.arange(5)
    return (hi ** (k + 1) - lo ** (k + 1)) / ((k + 1) * (hi - lo))


# A discrete two-covariate population with correlated, skewed covariates.
_POINTS = np.array([[0.0, 1.0], [1.0, 2.0], [-1.0, 0.5], [2.0, -1.0], [0.5, 0.5], [1.5, 3.0]])
_WEIGHTS = np.array([0.25, 0.15, 0.2, 0.1, 0.2, 0.1])


def _cases():
    yield (
        "d1-uniform",
        np.array([0.4, -0.8]),
        0.3,
        (
            x_moments_from_monomial_means(_uniform_moments(-1.0, 2.0), d=1),
            lambda rng, size: rng.uniform(-1.0, 2.0, size=(size, 1)),
        ),
    )
    yield (
        "d2-discrete",
        np.array([0.3, -0.7, 1.2]),
        0.4,
        (
            empirical_x_moments(_POINTS, _WEIGHTS),
            lambda rng, size: _POINTS[rng.choice(len(_POINTS), size=size, p=_WEIGHTS)],
        ),
    )


@pytest.mark.parametrize("case", list(_cases()), ids=lambda c: c[0])
def test_moments_match_monte_carlo(case):
    """200 000 records: every mean and covariance entry within 5 standard errors."""
    _, theta, sigma2, (mom, draw_x) = case
    rng = np.random.default_rng(2024)
    n_mc = 200_000
    x = draw_x(rng, n_mc)
    y = theta[0] + x @ theta[1:] + np.sqrt(sigma2) * rng.standard_normal(n_mc)
    w = np.column_stack([np.ones(n_mc), x, y])
    rows, cols = released_pairs(x.shape[1])
    t = w[:, rows] * w[:, cols]

    mean, cov = suffstat_moments(theta, sigma2, mom)
    mc_mean = t.mean(axis=0)
    se_mean = t.std(axis=0) / np.sqrt(n_mc)
    assert np.all(np.abs(mc_mean - mean) < 5 * se_mean)

    c = t - mc_mean
    prod = c[:, :, None] * c[:, None, :]
    mc_cov = prod.mean(axis=0)
    se_cov = prod.std(axis=0) / np.sqrt(n_mc)
    assert np.all(np.abs(mc_cov - cov) < 5 * se_cov + 1e-12)


def test_moments_reproduce_the_papers_formulas():
    """d = 2: each block of the covariance equals the explicit formula of §3.4.1 (to rounding)."""
    mom = empirical_x_moments(_POINTS, _WEIGHTS)
    theta, s2 = np.array([0.3, -0.7, 1.2]), 0.4
    sig, phi = mom.second, mom.fourth_cov
    mean, cov = suffstat_moments(theta, s2, mom)
    rows, cols = released_pairs(2)
    pos = {(int(i), int(j)): r for r, (i, j) in enumerate(zip(rows, cols))}
    y = 3

    def at(i, j):
        return pos[(min(i, j), max(i, j))]

    # Means.
    assert np.isclose(mean[at(0, y)], sig[0] @ theta)
    assert np.isclose(mean[at(2, y)], sig[2] @ theta)
    assert np.isclose(mean[at(y, y)], s2 + theta @ sig @ theta)
    assert np.isclose(mean[at(1, 2)], sig[1, 2])
    xx = [(i, j) for i in range(3) for j in range(i, 3) if (i, j) != (0, 0)]
    for i, j in xx:
        for k, m in xx:  # Cov(x_i x_j, x_k x_m) = Φ
            assert np.isclose(cov[at(i, j), at(k, m)], phi[i, j, k, m])
        for k in range(3):  # Cov(x_i x_j, x_k y) = Σ_l θ_l Φ_ij,kl
            assert np.isclose(cov[at(i, j), at(k, y)], phi[i, j, k] @ theta)
        # Cov(x_i x_j, y²) = Σ θ_k θ_l Φ_ij,kl
        assert np.isclose(cov[at(i, j), at(y, y)], theta @ phi[i, j] @ theta)
    for i in range(3):
        for j in range(3):  # Cov(x_i y, x_j y) = σ² Σ_ij + Σ θ_k θ_l Φ_ik,jl
            expect = s2 * sig[i, j] + np.einsum("k,l,kl->", theta, theta, phi[i, :, j, :])
            assert np.isclose(cov[at(i, y), at(j, y)], expect)
        # Cov(x_i y, y²) = Σ θ_j θ_k θ_l Φ_ij,kl + 2σ² Σ_j θ_j Σ_ij
        expect = np.einsum("j,k,l,jkl->", theta, theta, theta, phi[i]) + 2 * s2 * sig[i] @ theta
        assert np.isclose(cov[at(i, y), at(y, y)], expect)
    expect = (
        2 * s2**2
        + np.einsum("i,j,k,l,ijkl->", theta, theta, theta, theta, phi)
        + 4 * s2 * theta @ sig @ theta
    )
    assert np.isclose(cov[at(y, y), at(y, y)], expect)


def test_moments_are_batched():
    """A batch of (θ, σ²) and of x moments gives the same as one call per member."""
    rng = np.random.default_rng(3)
    moms = [
        empirical_x_moments(_POINTS, _WEIGHTS),
        empirical_x_moments(rng.normal(size=(50, 2))),
    ]
    theta = rng.normal(size=(2, 3))
    sigma2 = np.array([0.2, 1.5])
    mean, cov = suffstat_moments(theta, sigma2, XMoments.stack(moms))
    for b in range(2):
        m1, c1 = suffstat_moments(theta[b], sigma2[b], moms[b])
        np.testing.assert_allclose(mean[b], m1, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(cov[b], c1, rtol=1e-12, atol=1e-12)
    # One set of x moments broadcast over a batch of θ.
    mean, cov = suffstat_moments(theta, sigma2, moms[0])
    assert cov.shape == (2, 9, 9)
    assert np.all(np.linalg.eigvalsh(cov) > -1e-10)


def test_projection_of_noisy_moments_makes_them_valid():
    """Invalid means (variance < 0, Φ indefinite) become PSD; valid ones are left alone."""
    good = _uniform_moments(-1.0, 2.0)
    exact = x_moments_from_monomial_means(good, d=1)
    again = x_moments_from_monomial_means(good, d=1, project=True)
    np.testing.assert_allclose(again.second, exact.second, atol=1e-12)
    np.testing.assert_allclose(again.fourth_cov, exact.fourth_cov, atol=1e-12)

    bad = good.copy()
    bad[2] = bad[1] ** 2 - 0.1  # E x² < (E x)²
    bad[4] = 0.0  # E x⁴ far too small
    raw = x_moments_from_monomial_means(bad, d=1)
    assert np.linalg.eigvalsh(raw.second)[0] < 0
    fixed = x_moments_from_monomial_means(bad, d=1, project=True)
    assert np.linalg.eigvalsh(fixed.second)[0] >= -1e-12
    assert np.isclose(fixed.second[0, 1], good[1])  # the mean is kept
    assert np.linalg.eigvalsh(fixed.fourth_cov.reshape(4, 4))[0] >= -1e-12
    _, cov = suffstat_moments([0.5, 1.0], 0.3, fixed)
    assert np.linalg.eigvalsh(cov)[0] >= -1e-10


# ---- moments of x from a release -----------------------------------------------------------


def _release_d2(moments_share=0.2, seed=8):
    from pymc_dp.curator.regression.release import release_regression

    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, size=(400, 2))
    y = np.clip(x @ [0.5, -0.2] + 0.1 * rng.standard_normal(400), -1, 1)
    rel = release_regression(
        x, y, x_bounds=[(-1, 1)] * 2, y_bounds=(-1, 1), epsilon=1.0,
        moments_share=moments_share, rng=rng,
    )  # fmt: skip
    return x, y, rel


def test_moments_release_holds_degree_3_4_with_the_whole_share():
    """d = 2, box [−1, 1], ε = 1, share 0.2 (issue 17): the degree 3-4 sums get ε 0.2 (Laplace
    scale 15 / 0.2 = 75, was 150 at ε 0.1); no degree 1-2 release (was scale 8 / 0.1 = 80):
    those come from the statistic, scale 9.375 / 0.8 = 11.72 with the exact Δ."""
    from pymc_dp.curator.regression.statistics import covariate_powers

    _, _, rel = _release_d2()
    assert rel.second_moments is None
    np.testing.assert_array_equal(rel.fourth_moments.powers, covariate_powers(2, (3, 4)))
    assert rel.fourth_moments.epsilon == pytest.approx(0.2)
    assert rel.fourth_moments.scale == pytest.approx(75.0)
    assert rel.scale == pytest.approx(9.375 / 0.8)
    assert rel.total_epsilon == pytest.approx(1.0) and rel.total_epsilon <= 1.0


def test_moments_from_release_take_degree_1_2_from_the_statistic():
    """With the exact sums put in place of the noisy ones, the moments are the empirical ones:
    Σ x_j and Σ x_i x_j are read from the statistic, the rest from the moments release."""
    import dataclasses

    from pymc_dp.curator.regression.statistics import (
        covariate_powers,
        monomial_sums,
        regression_statistic,
    )
    from pymc_dp.regression.kernels.moments import x_moments_from_release

    x, y, rel = _release_d2()
    fourth = dataclasses.replace(
        rel.fourth_moments, value=monomial_sums(x, covariate_powers(2, (3, 4)))
    )
    exact = dataclasses.replace(rel, value=regression_statistic(x, y), fourth_moments=fourth)
    mom = x_moments_from_release(exact)
    ref = empirical_x_moments(x)
    np.testing.assert_allclose(mom.second, ref.second, atol=1e-12)
    np.testing.assert_allclose(mom.fourth_cov, ref.fourth_cov, atol=1e-12)
    with pytest.raises(ValueError, match="carries no moments"):
        x_moments_from_release(dataclasses.replace(rel, fourth_moments=None))


def _format2_doc(rel, second_value):
    """A format 2 file as the previous release code wrote it: degree 1-2 sums at half the share."""
    from pymc_dp.curator.regression.sensitivity import sum_of_ranges
    from pymc_dp.curator.regression.statistics import covariate_powers

    doc = rel.to_dict()
    doc["format_version"] = 2
    del doc["sensitivity_bound"]
    doc["sensitivity"] = 15.0  # the sum of ranges it used
    doc["fourth_moments"]["epsilon"] = 0.1
    doc["fourth_moments"]["sensitivity"] = 15.0
    powers = covariate_powers(2, (1, 2))
    doc["second_moments"] = {
        "value": list(map(float, second_value)),
        "powers": powers.tolist(),
        "epsilon": 0.1,
        "sensitivity": sum_of_ranges(powers, [-1.0, -1.0], [1.0, 1.0]),
        "quantum": None,
    }
    return doc


def test_format_2_files_still_load_and_combine_both_degree_1_2_estimates():
    """A format 2 file (with second_moments) loads unchanged; its degree 1-2 means are the
    inverse-variance average of the statistic's entries (scale 18.75) and its own (scale 80)."""
    import json

    from pymc_dp.curator.regression.release import RegressionRelease
    from pymc_dp.regression.kernels.moments import x_moments_from_release

    _, _, rel = _release_d2()
    own = rel.value[[0, 1, 2, 3, 4]] + np.array([40.0, -40.0, 20.0, 10.0, -10.0])
    old = RegressionRelease.from_json(json.dumps(_format2_doc(rel, own)))
    assert old.sensitivity_bound is None and old.second_moments.scale == pytest.approx(80.0)
    assert old.total_epsilon == pytest.approx(1.0)
    w_stat, w_own = 1 / old.scale**2, 1 / 80.0**2
    expect = (w_stat * rel.value[:5] + w_own * own) / (w_stat + w_own) / rel.n
    mom = x_moments_from_release(old)
    np.testing.assert_allclose(mom.second[0, 1:], expect[:2], rtol=1e-12)
    # Re-saved, it keeps its second moments (format 3 reads them too).
    again = RegressionRelease.from_json(old.to_json())
    np.testing.assert_array_equal(again.second_moments.value, old.second_moments.value)


def test_an_unknown_format_is_refused_by_name():
    from pymc_dp.curator.regression.release import RegressionRelease

    doc = _release_d2()[2].to_dict()
    doc["format_version"] = 6
    with pytest.raises(
        ValueError, match="format_version 6: this version of pymc_dp reads formats 1 to 5"
    ):
        RegressionRelease.from_dict(doc)
