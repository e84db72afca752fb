"""The split-sum moments engine: exact against enumeration and the junction tree, and its choice."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pymc_dp.kernels.loglinear import LogLinearDomain
from pymc_dp.kernels.loglinear_junction import JunctionTree
from pymc_dp.kernels.loglinear_moments import (
    clt_covariance,
    clt_fixed_logp_grad,
    feature_method,
    feature_moments,
    fixed_law_method,
    likelihood_method,
    sample_records,
)
from pymc_dp.kernels.loglinear_split import SplitMoments, split_point
from pymc_dp.likelihoods.marginals import CLTLogp

SHAPES = {
    "chain": ((0, 1), (1, 2), (2, 3), (3, 4)),
    "all-pairs": tuple(itertools.combinations(range(5), 2)),
    "three-way": ((0, 1, 2), (2, 3), (3, 4), (4, 0)),
    "four-way-across": ((1, 2, 3, 4), (0,)),
    "one-way": ((0,), (1,), (4,)),
}
SIZES = {"binary": (2,) * 5, "ternary": (3,) * 5, "mixed": (2, 3, 2, 4, 3)}


def _brute_force(dom: LogLinearDomain, theta: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """log Z, E[a], Cov[a] by a loop over every cell and every term (no shared code)."""
    logits, feats = [], []
    for cell in itertools.product(*(range(s) for s in dom.sizes)):
        a = np.array(
            [all(cell[k] == v for k, v in zip(s, lv, strict=True)) for s, lv in dom.basis_terms],
            dtype=float,
        )
        feats.append(a)
        logits.append(a @ theta)
    logits, feats = np.array(logits), np.array(feats)
    log_z = np.log(np.sum(np.exp(logits)))
    prob = np.exp(logits - log_z)
    mean = prob @ feats
    centred = feats - mean
    return log_z, mean, (centred.T * prob) @ centred


@pytest.mark.parametrize("sizes", SIZES.values(), ids=SIZES.keys())
@pytest.mark.parametrize("marginals", SHAPES.values(), ids=SHAPES.keys())
def test_split_equals_brute_force_enumeration(sizes, marginals):
    dom = LogLinearDomain(sizes, marginals)
    engine = SplitMoments(dom)
    rng = np.random.default_rng(1)
    theta = rng.normal(size=dom.n_params)
    log_z, mean, cov = _brute_force(dom, theta)
    got_mean, got_cov = engine.moments(theta)
    np.testing.assert_allclose(got_mean, mean, atol=1e-13)
    np.testing.assert_allclose(got_cov, cov, atol=1e-13)
    assert engine.log_partition(theta) == pytest.approx(log_z, rel=1e-13)
    np.testing.assert_allclose(
        np.exp(engine.log_probs(theta)).reshape(-1), np.exp(dom.log_probs(theta)), atol=1e-14
    )
    v = rng.normal(size=dom.n_params)
    jvp_mean, jvp = engine.mean_and_jvp(theta, v)
    np.testing.assert_allclose(jvp_mean, mean, atol=1e-13)
    np.testing.assert_allclose(jvp, cov @ v, atol=1e-12)
    # batches of θ (and of directions) in one call
    batch = rng.normal(size=(2, 3, dom.n_params))
    np.testing.assert_allclose(
        engine.mean(batch), np.exp(dom.log_probs(batch)) @ dom.basis, atol=1e-13
    )
    directions = rng.normal(size=(4, dom.n_params))
    _, jvps = engine.mean_and_jvp(np.broadcast_to(theta, directions.shape), directions)
    np.testing.assert_allclose(jvps, directions @ cov, atol=1e-12)


def test_split_derivatives_are_those_of_the_log_partition():
    """E[a] = ∇ log Z and Cov[a] = ∇ E[a], by central differences (step 1e-5)."""
    dom = LogLinearDomain((2, 3, 2, 3), ((0, 1), (1, 2), (2, 3), (0, 3)))
    engine = SplitMoments(dom)
    theta = np.random.default_rng(2).normal(size=dom.n_params)
    h = 1e-5
    eye = np.eye(dom.n_params)
    grad = [
        (engine.log_partition(theta + h * e) - engine.log_partition(theta - h * e)) / (2 * h)
        for e in eye
    ]
    jac = np.array(
        [(engine.mean(theta + h * e) - engine.mean(theta - h * e)) / (2 * h) for e in eye]
    )
    mean, cov = engine.moments(theta)
    np.testing.assert_allclose(grad, mean, atol=1e-9)
    np.testing.assert_allclose(jac, cov, atol=1e-9)


def test_split_equals_the_junction_tree_on_eight_ternary_columns():
    """All 2-way tables of 8 ternary columns (6561 cells, 128 parameters, one clique)."""
    dom = LogLinearDomain((3,) * 8, tuple(itertools.combinations(range(8), 2)))
    split, junction = SplitMoments(dom), JunctionTree(dom)
    assert junction.cliques == [tuple(range(8))]
    rng = np.random.default_rng(3)
    theta = rng.normal(size=dom.n_params) * 0.3
    mean, cov = split.moments(theta)
    jt_mean, jt_cov = junction.moments(theta)
    np.testing.assert_allclose(mean, jt_mean, atol=1e-13)
    np.testing.assert_allclose(cov, jt_cov, atol=1e-13)
    assert split.log_partition(theta) == pytest.approx(junction.log_partition(theta), rel=1e-13)
    v = rng.normal(size=dom.n_params)
    np.testing.assert_allclose(
        split.mean_and_jvp(theta, v)[1], junction.mean_and_jvp(theta, v)[1], atol=1e-12
    )


def test_split_samples_the_law():
    dom = LogLinearDomain((3, 2, 3, 2), tuple(itertools.combinations(range(4), 2)))
    theta = np.random.default_rng(5).normal(size=dom.n_params)
    codes = sample_records(dom, theta, 100_000, np.random.default_rng(6), method="split")
    freq = np.bincount(dom.cell_index(codes), minlength=dom.n_cells) / len(codes)
    prob = np.exp(dom.log_probs(theta))
    # each cell's frequency within 5 binomial sd of its probability
    assert np.all(np.abs(freq - prob) <= 5 * np.sqrt(prob * (1 - prob) / len(codes)) + 1e-9)


def test_fixed_law_takes_the_split_sums_where_the_dense_sums_cost_more():
    def pairs(sizes):
        return LogLinearDomain(sizes, tuple(itertools.combinations(range(len(sizes)), 2)))

    # enumerated by feature_method, split for the fixed law: ternary (table sums) at any size,
    # binary above FIXED_ENUMERATE_CELLS
    for sizes in [(3,) * 3, (3,) * 5, (3,) * 10, (2,) * 11, (2,) * 15, (2, 3, 2, 4, 3)]:
        assert feature_method(pairs(sizes)) == "enumerate"
        assert fixed_law_method(pairs(sizes)) == "split"
    for sizes in [(2,) * 3, (2,) * 10]:
        assert fixed_law_method(pairs(sizes)) == "enumerate"
    one = LogLinearDomain((5,), ((0,),))
    assert fixed_law_method(one) == feature_method(one) == "enumerate"  # nothing to split
    chain = LogLinearDomain((3,) * 12, tuple((k, k + 1) for k in range(11)))
    assert fixed_law_method(chain) == feature_method(chain) == "junction"
    # the likelihood's rule: the full law enumerates, the fixed law splits, and CLTLogp follows
    ternary = pairs((3,) * 5)
    assert likelihood_method(ternary, "clt") == "enumerate"
    assert likelihood_method(ternary, "clt-fixed") == "split"
    z = np.zeros(ternary.n_params)
    assert CLTLogp(ternary, z, 100, 1.0).engine is None
    fixed = CLTLogp(ternary, z, 100, 1.0, chol=np.eye(ternary.n_params))
    assert isinstance(fixed.engine, SplitMoments)
    with pytest.raises(ValueError, match="kind must be 'clt' or 'clt-fixed'"):
        likelihood_method(ternary, "exact")


def test_split_point_balances_the_halves_and_the_choice_of_engine():
    assert split_point((3,) * 12) == 6
    assert split_point((2, 2, 2, 8)) == 3
    pairs = LogLinearDomain((3,) * 12, tuple(itertools.combinations(range(12), 2)))
    assert feature_method(pairs) == "split"
    chain = LogLinearDomain((3,) * 12, tuple((k, k + 1) for k in range(11)))
    assert feature_method(chain) == "junction"
    # above MAX_SPLIT_CELLS (15 ternary columns: 1.4·10⁷ cells) the dense pairwise set stays Bethe
    dense = LogLinearDomain((3,) * 15, tuple(itertools.combinations(range(15), 2)))
    assert feature_method(dense) == "bethe"
    with pytest.raises(ValueError, match="above max_cells = 10000000"):
        SplitMoments(dense)
    with pytest.raises(ValueError, match="at least two columns"):
        SplitMoments(LogLinearDomain((3,), ((0,),)))
    with pytest.raises(ValueError, match="theta must be a vector"):
        SplitMoments(chain).moments(np.zeros(3))


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["FAST_RUN", "NUMBA", "JAX"])
def test_split_graph_law_and_gradient_on_every_backend(mode):
    """The plain PyTensor graph's log-density and autodiff gradient equal the NumPy engine's.

    Slow: 10-25 s of compilation per backend.
    """
    import pytensor
    import pytensor.tensor as pt

    from pymc_dp.likelihoods.marginals import marginals_clt_fixed_split_graph

    if mode == "JAX":
        pytest.importorskip("jax")
    dom = LogLinearDomain((3, 2, 3, 2), tuple(itertools.combinations(range(4), 2)))
    rng = np.random.default_rng(7)
    theta0 = rng.normal(size=dom.n_params) * 0.5
    engine = SplitMoments(dom)
    n = 1000
    sigma = clt_covariance(theta0, dom, engine, n=n, noise_variance=4.0)
    z = n * (dom.projected_table_map[0] + dom.projected_table_map[1] @ engine.mean(theta0))
    z = z + rng.normal(size=dom.n_params) * 3
    theta = pt.dvector("theta")
    logp = marginals_clt_fixed_split_graph(theta, dom, z, n=n, cov=sigma)
    f = pytensor.function([theta], [logp, pytensor.grad(logp, theta)], mode=mode)
    value, grad = f(theta0 * 0.9)
    ref, ref_grad = clt_fixed_logp_grad(
        theta0 * 0.9, dom, engine, z, n=n, chol=np.linalg.cholesky(sigma)
    )
    assert float(value) == pytest.approx(ref, rel=1e-12)
    np.testing.assert_allclose(np.asarray(grad), ref_grad, rtol=1e-9, atol=1e-9)


@pytest.mark.slow
def test_model_with_all_two_way_tables_by_split_sums():
    """11 ternary columns, all 2-way tables (177 147 cells, 1 clique): split sums end to end.

    The default engine is the split one; the model's log-density and gradient are the
    kernel's, the Laplace fit's mode lies within its own sd of the data-generating θ (root mean
    square of the z-scores over the 242 parameters between 0.6 and 1.5), and synthetic records
    carry the labels.
    """
    import pymc_dp as pmdp
    from pymc_dp.kernels.loglinear_laplace import marginals_laplace
    from pymc_dp.likelihoods.marginals import noise_variance

    k, n = 11, 5000
    names = [f"c{i}" for i in range(k)]
    pairs = list(itertools.combinations(range(k), 2))
    dom = LogLinearDomain((3,) * k, tuple(pairs))
    assert feature_method(dom) == "split"
    rng = np.random.default_rng(18)
    theta = rng.normal(size=dom.n_params) * 0.3
    codes = sample_records(dom, theta, n, rng)
    rel = pmdp.release_marginals(
        {c: np.array(["a", "b", "c"])[codes[:, i]] for i, c in enumerate(names)},
        columns=names,
        domains={c: ["a", "b", "c"] for c in names},
        marginals=[(names[i], names[j]) for i, j in pairs],
        epsilon=1.0,
        rng=19,
    )
    dom = rel.domain
    z = rel.y @ dom.projection
    var = noise_variance(rel)
    fit = marginals_laplace(dom, z, n=rel.n, noise_variance=var, prior_sigma=2.0)
    zscore = (fit.mode - theta) / np.sqrt(np.diag(fit.cov))
    assert 0.6 < np.sqrt(np.mean(zscore**2)) < 1.5
    model = pmdp.marginals_model(rel, whiten=False)
    point = {"theta": fit.mode + 0.01}
    logp = model.compile_logp(vars=[model["y"]], jacobian=False)(point)
    engine = feature_moments(dom)
    sigma = clt_covariance(fit.mode, dom, engine, n=rel.n, noise_variance=var)
    ref, ref_grad = clt_fixed_logp_grad(
        fit.mode + 0.01, dom, engine, z, n=rel.n, chol=np.linalg.cholesky(sigma)
    )
    assert logp == pytest.approx(ref, rel=1e-9)
    grad = model.compile_dlogp(vars=[model["theta"]], jacobian=False)(point)
    prior = -(fit.mode + 0.01) / 4.0
    np.testing.assert_allclose(grad, ref_grad + prior, rtol=1e-7, atol=1e-6)
    idata = {"posterior": {"theta": (fit.mode + np.zeros((1, 3, 1)))}}
    frames = pmdp.synthetic_datasets(idata, rel, m=2, n=50, rng=20)
    assert frames[0].shape == (50, k) and set(frames[0]["c0"]) <= {"a", "b", "c"}
