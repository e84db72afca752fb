"""Vague priors and parameters at the edge of their support (issue 18, item 4).

Beta(0.01, 0.01) and Dirichlet(0.01) put most of their mass within a float's resolution of the
edges, so prior draws and conjugate draws round to exactly 0 or 1. Every fit below runs 20
chains (20 seeds: one per chain, each from its own prior draw) of 50 + 50 iterations and must
end without an exception and with finite draws, for the default sampler and for Algorithm 1.
"""

import numpy as np
import pytest
from conftest import binomial_model, categorical_model, sample

from pymc_dp.cli import main
from pymc_dp.curator.release_file import write_release
from pymc_dp.kernels import draw_beta, draw_dirichlet, draw_gamma, draw_suffstat
from pymc_dp.kernels.conjugate import open_positive, open_simplex, open_unit_interval

CHAINS = 20


def _finite_fit(model, seed, chains=CHAINS, iterations=50):
    with model:
        idata = sample(tune=iterations, draws=iterations, chains=chains, cores=1, random_seed=seed)
    posterior = idata.posterior
    for name in posterior.data_vars:
        assert np.all(np.isfinite(posterior[name].values)), name
    assert posterior.sizes["chain"] == chains and posterior.sizes["draw"] == iterations
    return posterior


@pytest.mark.parametrize("method", ["auto", "augmented"])
def test_beta_001_binomial_over_20_seeds(binomial_release, method):
    p = _finite_fit(binomial_model(binomial_release, 0.01, 0.01, method=method), 18)["p"].values
    assert np.all((p > 0) & (p < 1))


@pytest.mark.parametrize(
    ("method", "chains", "iterations"),
    [
        ("augmented", CHAINS, 50),
        # The default (NUTS within partially collapsed Gibbs) takes ~3 s a chain here: 4 chains
        # in the default suite, the 20 seeds in the slow one.
        ("auto", 4, 20),
        pytest.param("auto", CHAINS, 50, marks=pytest.mark.slow),
    ],
)
def test_dirichlet_001_categorical_over_20_seeds(categorical_release, method, chains, iterations):
    model = categorical_model(categorical_release, alpha=(0.01, 0.01, 0.01), method=method)
    p = _finite_fit(model, 18, chains, iterations)["p"].values
    assert np.all(p > 0)
    np.testing.assert_allclose(p.sum(-1), 1.0)


def test_conjugate_draws_stay_inside_the_support():
    rng = np.random.default_rng(0)
    p = draw_beta(rng, alpha=np.full(10_000, 1e-3), beta=1e-3)
    assert np.all((p > 0) & (p < 1)) and np.any(p < 1e-300) and np.any(p > 1 - 1e-15)
    theta = draw_dirichlet(rng, alpha=np.full((10_000, 3), 1e-3))
    assert np.all(theta > 0) and np.allclose(theta.sum(-1), 1.0)
    lam = draw_gamma(rng, shape=np.full(10_000, 1e-3), rate=1.0)
    assert np.all((lam > 0) & np.isfinite(lam))


def test_moving_inside_changes_only_values_on_the_edge():
    x = np.array([0.0, 1e-200, 0.5, 1.0])
    inside = open_unit_interval(x)
    assert inside[0] > 0 and inside[3] < 1 and np.array_equal(inside[1:3], x[1:3])
    np.testing.assert_array_equal(open_positive([3.0, 0.0])[:1], [3.0])
    p = open_simplex([[0.2, 0.8, 0.0]])
    assert p[0, 2] > 0 and np.array_equal(p[0, :2], [0.2, 0.8])


def test_latent_counts_stay_where_the_scaled_simplex_is_finite():
    """A count rounded to the smallest subnormal would give log(s / n) = -inf."""
    out = draw_suffstat(
        np.random.default_rng(1),
        clt_mean=[800.0, 0.0, 0.0],
        clt_cov=np.zeros((3, 3)),
        released=[790.0, 5.0, 5.0],
        noise_variance=[1.0, 1.0, 1.0],
        lower=0.0,
        upper=800.0,
        current=[798.0, 1.0, 1.0],
        total=800.0,
    ).value
    assert np.all(np.isfinite(np.log(out / 800.0))) and np.isclose(out.sum(), 800.0)


@pytest.fixture(scope="module")
def release_file(tmp_path_factory, binomial_release):
    return write_release(binomial_release, tmp_path_factory.mktemp("rel") / "release.json")


@pytest.mark.parametrize(
    "prior", [["alpha=1e300"], ["beta=1e-300"], ["alpha=1e11", "beta=2"], ["alpha=inf"]]
)
def test_cli_refuses_extreme_priors_in_one_line(release_file, tmp_path, capsys, prior):
    argv = ["fit", str(release_file), "--prior", *prior, "--output-dir", str(tmp_path / "o")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("pymc-dp fit: error: --prior") and ("alpha" in err or "beta" in err)
    assert not (tmp_path / "o" / "posterior.nc").exists()


def test_cli_fits_a_vague_prior(release_file, tmp_path, capsys):
    out = tmp_path / "o"
    argv = ["fit", str(release_file), "--prior", "alpha=0.01", "beta=0.01", "--draws", "30"]
    argv += ["--tune", "20", "--chains", "2", "--no-progress", "--seed", "3"]
    assert main([*argv, "--output-dir", str(out)]) == 0
    assert (out / "posterior.nc").exists()
