"""Feature moments without enumeration: junction tree (exact), Bethe (approximate), the choice."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pymc_dp.kernels.loglinear import LogLinearDomain
from pymc_dp.kernels.loglinear_bethe import BetheDidNotConverge, BetheMoments
from pymc_dp.kernels.loglinear_bethe_jit import bp_sweeps, bp_sweeps_numpy
from pymc_dp.kernels.loglinear_junction import JunctionTree, min_fill_cliques
from pymc_dp.kernels.loglinear_laplace import marginals_clt_fixed_logp_grad, marginals_laplace
from pymc_dp.kernels.loglinear_moments import (
    clt_covariance,
    clt_fixed_logp_grad,
    feature_method,
    feature_moments,
    sample_records,
)

SHAPES = {
    "chain": ((0, 1), (1, 2), (2, 3), (3, 4)),
    "star": ((0, 1), (0, 2), (0, 3), (0, 4)),
    "tree": ((0, 1), (1, 2), (1, 3), (3, 4), (2,)),
    "cycle": ((0, 1), (1, 2), (2, 3), (3, 4), (4, 0)),
    "three-way": ((0, 1, 2), (2, 3), (3, 4), (4, 0)),
    "disconnected": ((0, 1), (2,), (3, 4)),
}
SIZES = {"binary": (2,) * 5, "ternary": (3,) * 5, "mixed": (2, 3, 2, 3, 3)}


@pytest.mark.parametrize("sizes", SIZES.values(), ids=SIZES.keys())
@pytest.mark.parametrize("marginals", SHAPES.values(), ids=SHAPES.keys())
def test_junction_tree_equals_the_full_domain(sizes, marginals):
    dom = LogLinearDomain(sizes, marginals)
    jt = JunctionTree(dom)
    rng = np.random.default_rng(3)
    theta = rng.normal(size=dom.n_params)
    mean, cov = dom.moments(theta)
    jt_mean, jt_cov = jt.moments(theta)
    np.testing.assert_allclose(jt_mean, mean, atol=1e-13)
    np.testing.assert_allclose(jt_cov, cov, atol=1e-13)
    np.testing.assert_allclose(jt.log_partition(theta), dom.log_partition(theta), rtol=1e-13)
    # a batch of θ in one pass
    batch = rng.normal(size=(2, 3, dom.n_params))
    np.testing.assert_allclose(jt.mean(batch), np.exp(dom.log_probs(batch)) @ dom.basis, atol=1e-13)
    assert jt.clique_cells < dom.n_cells or marginals == SHAPES["three-way"]


def test_min_fill_cliques():
    assert min_fill_cliques((2,) * 4, ((0, 1), (1, 2), (2, 3))) == [(0, 1), (1, 2), (2, 3)]
    cycle = min_fill_cliques((2,) * 6, [(k, (k + 1) % 6) for k in range(6)])
    assert max(len(c) for c in cycle) == 3  # a cycle has treewidth 2
    complete = min_fill_cliques((3,) * 6, list(itertools.combinations(range(6), 2)))
    assert complete == [tuple(range(6))]
    assert min_fill_cliques((2, 2, 2), ((0,), (2,))) == [(0,), (1,), (2,)]


def test_junction_tree_samples_the_law():
    dom = LogLinearDomain((3, 2, 3, 2), ((0, 1), (1, 2), (2, 3), (3, 0)))
    theta = np.random.default_rng(4).normal(size=dom.n_params)
    codes = JunctionTree(dom).sample(theta, 100_000, np.random.default_rng(5))
    freq = np.bincount(dom.cell_index(codes), minlength=dom.n_cells) / len(codes)
    prob = np.exp(dom.log_probs(theta))
    # each cell's frequency within 5 binomial sd of its probability
    assert np.all(np.abs(freq - prob) <= 5 * np.sqrt(prob * (1 - prob) / len(codes)) + 1e-9)


def test_table_map_and_projection_without_enumeration():
    dom = LogLinearDomain((2, 3, 3, 2), ((0, 1, 2), (2, 3), (1,)))
    c, m = dom.table_map
    np.testing.assert_allclose(dom.table_features, c + dom.basis @ m.T, atol=1e-12)
    big = LogLinearDomain((2, 3, 3, 2), ((0, 1, 2), (2, 3), (1,)))
    q, _ = np.linalg.qr(m)
    # the QR basis spans the SVD basis' subspace (the projection of a large domain)
    np.testing.assert_allclose(q @ (q.T @ big.projection), big.projection, atol=1e-12)


def test_bethe_is_exact_on_a_tree_and_inverts_its_entropy_gradient():
    tree = LogLinearDomain((2, 3, 2, 3, 3), SHAPES["tree"][:4])
    bethe = BetheMoments(tree)
    theta = np.random.default_rng(6).normal(size=tree.n_params)
    mean, cov = tree.moments(theta)
    b_mean, b_cov = bethe.moments(theta)
    np.testing.assert_allclose(b_mean, mean, atol=1e-9)
    np.testing.assert_allclose(b_cov, cov, atol=1e-8)
    np.testing.assert_allclose(bethe.log_partition(theta), tree.log_partition(theta), atol=1e-9)
    # on a loopy, dense graph the fixed point still satisfies θ = ∇Φ(μ)
    dense = LogLinearDomain((3,) * 6, tuple(itertools.combinations(range(6), 2)))
    theta = np.random.default_rng(7).normal(size=dense.n_params) * 0.3
    loopy = BetheMoments(dense)
    np.testing.assert_allclose(loopy.bethe_theta(loopy.mean(theta)), theta, atol=1e-8)


@pytest.mark.parametrize(("scale", "bound"), [(0.05, 5e-4), (0.3, 2e-2)])
def test_bethe_error_on_a_dense_graph(scale, bound):
    """The approximation's error against full-domain sums, all 2-way tables of 6 ternary columns.

    Measured: max error of a mean 2.2e-4 at θ sd 0.05, 8e-3 at sd 0.3 (the benchmark's scale).
    """
    dom = LogLinearDomain((3,) * 6, tuple(itertools.combinations(range(6), 2)))
    theta = np.random.default_rng(8).normal(size=dom.n_params) * scale
    mean, _ = dom.moments(theta)
    err = np.max(np.abs(BetheMoments(dom).mean(theta) - mean))
    assert 0 < err < bound


@pytest.mark.parametrize(
    ("sizes", "scale", "max_iter"), [((3,) * 6, 0.3, 500), ((2, 3, 3, 2, 3), 1.0, 7)]
)
def test_compiled_bp_sweeps_equal_numpy(sizes, scale, max_iter):
    dom = LogLinearDomain(sizes, tuple(itertools.combinations(range(len(sizes)), 2)))
    bethe = BetheMoments(dom)
    rng = np.random.default_rng(10)
    single, pair = bethe._potentials(rng.normal(size=dom.n_params) * scale)
    oriented = np.concatenate([pair, np.swapaxes(pair, 1, 2)])
    start = rng.normal(size=bethe.messages.shape)
    args = (single, oriented, bethe.src, bethe.dst, bethe.rev, start, 0.3, 1e-10, max_iter)
    got, ref = bp_sweeps(*args), bp_sweeps_numpy(*args)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-12, atol=1e-12)
    assert got[1] == ref[1] and np.isclose(got[2], ref[2], rtol=1e-9)
    np.testing.assert_array_equal(start, args[5])  # the start is not overwritten


def test_bethe_hessian_equals_the_sparse_product():
    dom = LogLinearDomain((2, 3, 3, 2), tuple(itertools.combinations(range(4), 2)))
    bethe = BetheMoments(dom)
    mean = bethe.mean(np.random.default_rng(12).normal(size=dom.n_params) * 0.3)
    m = bethe.region_matrix
    tau = bethe.region_const + m @ mean
    dense = m.T.toarray() @ np.diag(bethe.region_weight / tau) @ m.toarray()
    np.testing.assert_allclose(bethe.hessian(mean).toarray(), dense, rtol=1e-12, atol=1e-12)


def test_bethe_mean_at_the_same_theta_runs_no_second_bp():
    dom = LogLinearDomain((3,) * 5, tuple(itertools.combinations(range(5), 2)))
    bethe = BetheMoments(dom)
    theta = np.random.default_rng(11).normal(size=dom.n_params) * 0.3
    first = bethe.mean(theta)
    bethe.messages[:] = np.nan  # a second BP run would give NaN
    mean, jvp = bethe.mean_and_jvp(theta, np.ones(dom.n_params))
    np.testing.assert_array_equal(mean, first)
    assert np.all(np.isfinite(jvp))


def test_loopy_bp_that_does_not_converge_says_so():
    dom = LogLinearDomain((2,) * 5, tuple(itertools.combinations(range(5), 2)))
    theta = np.random.default_rng(9).normal(size=dom.n_params) * 8.0
    with pytest.raises(BetheDidNotConverge, match="did not converge"):
        BetheMoments(dom, max_iter=5, damping=0.0).mean(theta)
    with pytest.raises(ValueError, match="at most two columns"):
        BetheMoments(LogLinearDomain((2,) * 3, ((0, 1, 2),)))


@pytest.mark.parametrize("method", ["enumerate", "junction", "split"])
def test_fixed_covariance_law_through_an_engine(method):
    """The collapsed normal law with Σ fixed, and its gradient, equal the enumerated ones."""
    dom = LogLinearDomain((3, 2, 3, 2, 3), SHAPES["cycle"])
    rng = np.random.default_rng(10)
    theta = rng.normal(size=dom.n_params) * 0.5
    engine = feature_moments(dom, method)
    n, var = 500, 4.0
    sigma = clt_covariance(theta, dom, engine, n=n, noise_variance=var)
    g = dom.projected_features
    prob = np.exp(dom.log_probs(theta))
    gc = g - prob @ g
    np.testing.assert_allclose(sigma, n * (gc.T * prob) @ gc + var * np.eye(dom.n_params))
    z = n * (prob @ g) + rng.normal(size=dom.n_params) * 5
    chol = np.linalg.cholesky(sigma)
    logp, grad = clt_fixed_logp_grad(theta * 0.9, dom, engine, z, n=n, chol=chol)
    ref_logp, ref_grad = marginals_clt_fixed_logp_grad(theta * 0.9, dom, z, n=n, chol=chol)
    assert logp == pytest.approx(ref_logp, rel=1e-12)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-9, atol=1e-9)


def test_feature_method_choice():
    assert feature_method(LogLinearDomain((3,) * 5, SHAPES["cycle"])) == "enumerate"
    chain = LogLinearDomain((3,) * 14, tuple((k, k + 1) for k in range(13)))
    assert feature_method(chain) == "junction"
    dense = LogLinearDomain((3,) * 15, tuple(itertools.combinations(range(15), 2)))
    assert feature_method(dense) == "bethe"
    triples = LogLinearDomain((3,) * 15, tuple(itertools.combinations(range(15), 3)))
    with pytest.raises(ValueError, match="more than two columns"):
        feature_method(triples)
    with pytest.raises(ValueError, match="method must be"):
        feature_moments(chain, "magic")


@pytest.mark.parametrize("method", ["junction", "bethe"])
def test_sample_records_without_enumeration(method):
    """The junction tree's forward sampler and the Bethe case's full-domain draw are exact."""
    dom = LogLinearDomain((3, 2, 3), ((0, 1), (1, 2)))
    theta = np.random.default_rng(11).normal(size=dom.n_params)
    codes = sample_records(dom, theta, 50_000, np.random.default_rng(12), method=method)
    freq = np.bincount(dom.cell_index(codes), minlength=dom.n_cells) / len(codes)
    prob = np.exp(dom.log_probs(theta))
    assert np.all(np.abs(freq - prob) <= 5 * np.sqrt(prob * (1 - prob) / len(codes)) + 1e-9)


def test_large_chain_against_a_smaller_twin():
    """A 14-column ternary chain (4.8·10⁶ cells): each pair marginal equals a 2-column sum.

    With θ on one edge only and zero elsewhere, the edge's pair law is its own 2-column
    log-linear law and every other column is uniform.
    """
    k = 14
    chain = LogLinearDomain((3,) * k, tuple((i, i + 1) for i in range(k - 1)))
    pair = LogLinearDomain((3, 3), ((0, 1),))
    theta_pair = np.random.default_rng(13).normal(size=pair.n_params)
    theta = np.zeros(chain.n_params)
    where = {t: j for j, t in enumerate(chain.basis_terms)}
    for j, (s, lv) in enumerate(pair.basis_terms):
        theta[where[(tuple(c + 5 for c in s), lv)]] = theta_pair[j]
    mean = JunctionTree(chain).mean(theta)
    pair_mean = np.exp(pair.log_probs(theta_pair)) @ pair.basis
    for j, (s, lv) in enumerate(pair.basis_terms):
        assert mean[where[(tuple(c + 5 for c in s), lv)]] == pytest.approx(pair_mean[j], 1e-12)
    assert mean[where[((0,), (1,))]] == pytest.approx(1 / 3, 1e-12)
    log_z = JunctionTree(chain).log_partition(theta)
    assert log_z == pytest.approx(pair.log_partition(theta_pair) + (k - 2) * np.log(3), 1e-12)


def test_laplace_fit_by_junction_tree_equals_the_enumerated_one():
    dom = LogLinearDomain((3, 2, 3, 2, 3), SHAPES["cycle"])
    rng = np.random.default_rng(14)
    theta = rng.normal(size=dom.n_params) * 0.5
    prob = np.exp(dom.log_probs(theta))
    z = (
        rng.multinomial(2000, prob) @ dom.table_features
        + rng.normal(size=dom.table_features.shape[1]) * 3
    ) @ (dom.projection)
    fits = {
        m: marginals_laplace(dom, z, n=2000, noise_variance=9.0, prior_sigma=2.0, method=m)
        for m in ("enumerate", "junction")
    }
    sd = np.sqrt(np.diag(fits["enumerate"].cov))
    np.testing.assert_allclose(fits["junction"].mode, fits["enumerate"].mode, atol=1e-3 * sd.min())
    np.testing.assert_allclose(fits["junction"].cov, fits["enumerate"].cov, rtol=1e-6, atol=1e-9)


def _chain_release(k, n, seed):
    import pymc_dp as pmdp

    dom = LogLinearDomain((3,) * k, tuple((i, i + 1) for i in range(k - 1)))
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=dom.n_params) * 0.5
    codes = sample_records(dom, theta, n, rng)
    names = [f"c{i}" for i in range(k)]
    rel = pmdp.release_marginals(
        {c: np.array(["a", "b", "c"])[codes[:, i]] for i, c in enumerate(names)},
        columns=names,
        domains={c: ["a", "b", "c"] for c in names},
        marginals=[(names[i], names[i + 1]) for i in range(k - 1)],
        epsilon=1.0,
        rng=seed + 1,
    )
    return rel, theta


@pytest.mark.slow
def test_model_on_a_domain_too_large_to_enumerate():
    """12 ternary columns in a chain (531441 cells): junction tree, fixed covariance, end to end.

    The Laplace fit's mode lies within its own sd of the data-generating θ (root mean square
    of the z-scores over the 68 parameters between 0.6 and 1.5), the node's log-density and
    gradient are the kernel's, and synthetic records carry the labels.
    """
    import pymc_dp as pmdp
    from pymc_dp.likelihoods.marginals import noise_variance
    from pymc_dp.model.nodes.marginals import choose_likelihood

    rel, theta = _chain_release(12, 5000, 15)
    dom = rel.domain
    assert feature_method(dom) == "junction"
    assert choose_likelihood(rel) == "clt-fixed"
    with pytest.raises(ValueError, match="clt-fixed"):
        choose_likelihood(rel, "clt")
    z = rel.y @ dom.projection
    fit = marginals_laplace(dom, z, n=rel.n, noise_variance=noise_variance(rel), prior_sigma=2.0)
    zscore = (fit.mode - theta) / np.sqrt(np.diag(fit.cov))
    assert 0.6 < np.sqrt(np.mean(zscore**2)) < 1.5
    model = pmdp.marginals_model(rel, whiten=False)
    point = {"theta": fit.mode + 0.01}
    logp = model.compile_logp(vars=[model["y"]], jacobian=False)(point)
    engine = feature_moments(dom)
    sigma = clt_covariance(fit.mode, dom, engine, n=rel.n, noise_variance=noise_variance(rel))
    ref, ref_grad = clt_fixed_logp_grad(
        fit.mode + 0.01, dom, engine, z, n=rel.n, chol=np.linalg.cholesky(sigma)
    )
    assert logp == pytest.approx(ref, rel=1e-9)
    grad = model.compile_dlogp(vars=[model["theta"]], jacobian=False)(point)
    prior = -(fit.mode + 0.01) / 4.0
    np.testing.assert_allclose(grad, ref_grad + prior, rtol=1e-7, atol=1e-6)
    idata = {"posterior": {"theta": (fit.mode + np.zeros((1, 3, 1)))}}
    frames = pmdp.synthetic_datasets(idata, rel, m=2, n=50, rng=16)
    assert frames[0].shape == (50, 12) and set(frames[0]["c0"]) <= {"a", "b", "c"}


@pytest.mark.parametrize("method", ["enumerate", "junction", "bethe"])
def test_feature_mean_op_gradient(method):
    import pytensor
    import pytensor.tensor as pt

    from pymc_dp.likelihoods.marginals import FeatureMean

    dom = LogLinearDomain((3, 2, 3, 2), ((0, 1), (1, 2), (2, 3)))
    rng = np.random.default_rng(17)
    theta0 = rng.normal(size=dom.n_params) * 0.5
    w = rng.normal(size=dom.n_params)
    theta = pt.dvector("theta")
    out = pt.dot(FeatureMean(dom, method)(theta), w)
    f = pytensor.function([theta], [out, pytensor.grad(out, theta)])
    value, grad = f(theta0)
    mean, cov = dom.moments(theta0)  # a tree: Bethe is exact too
    assert value == pytest.approx(mean @ w, rel=1e-9)
    np.testing.assert_allclose(grad, cov @ w, rtol=1e-7, atol=1e-9)
