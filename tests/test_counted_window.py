"""The counted Poisson window's fused operation: the same function and gradient as the graph of
its pieces and as the node's old graph (the counted CLT vectorised over the groups), the Python
mirror, finite differences, one kernel evaluation per logp-and-gradient call, and the Numba and
JAX backends."""

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from conftest import scalar_op_names
from pytensor.compile.mode import get_default_mode
from pytensor.gradient import verify_grad
from scipy import stats

from pymc_dp.families import get_family
from pymc_dp.likelihoods.collapsed_pair import (
    conditional_second,
    first_statistic_logp,
    first_statistic_map,
    given_first_logp,
)
from pymc_dp.likelihoods.counted_window import (
    counted_poisson_graph,
    counted_poisson_logp,
    counted_poisson_scalar,
    counted_window_spec,
)
from pymc_dp.model.nodes.counted import grouped_counted_clt
from tests.test_backends import grouped_poisson_count

C_MODE = get_default_mode().excluding("fusion")
GRAPH_MODE = get_default_mode().including(
    "pmdp_counted_poisson_logp_as_graph", "pmdp_counted_poisson_grad_as_graph"
)
# Windows (bounds) of the grid: both edges cut (the default run's), from 0, narrow, and
# one so wide that its upper edge hardly binds. Each compiles a C module of its own.
BOUNDS = ((3, 12), (0, 30), (1, 4), (2, 150))
OUTPUTS = ("lp_u", "lp_y", "du_u", "deta_u", "du_y", "deta_y")


def _spec(bounds):
    v, w = get_family("poisson").window_edges(bounds)
    return counted_window_spec(v + 1.0, w)


def _grid(bounds, seed=1, size=400):
    """Rates inside, at and far beyond the window (q from 1 to below 1e-10), sums and counts
    near their means and far from them, and noise from far narrower to far wider than ŝ."""
    rng = np.random.default_rng(seed)
    hi = bounds[1]
    n = rng.integers(5, 2000, size).astype(float)
    lam = np.exp(rng.uniform(np.log(0.05), np.log(6.0 * hi + 10.0), size))
    u = rng.normal(0.0, 3.0, size)
    b1 = np.exp(rng.uniform(np.log(0.05), np.log(2000.0), size))
    b2 = np.exp(rng.uniform(np.log(0.05), np.log(200.0), size))
    inside = np.clip(lam, bounds[0], hi)
    y1 = n * inside + rng.normal(0.0, 2.0, size) * np.sqrt(n * lam) + rng.laplace(0.0, b1)
    y2 = n * rng.uniform(0.0, 1.0, size) + rng.laplace(0.0, b2)
    far = np.arange(size) % 5 == 0
    y2[far] += rng.choice([-1.0, 1.0], far.sum()) * b2[far] * rng.uniform(10.0, 250.0, far.sum())
    return u, np.log(lam), n, y1, y2, b1, b2


def _old_graph(u, eta, n, y1, y2, b1, b2, bounds):
    """The node before the fused operation: grouped_counted_clt, then the pair given ŝ₁."""
    mean, cov = grouped_counted_clt(get_family("poisson"), pt.exp(eta), np.ones(1), bounds)
    mean, cov = n[:, None] * mean, n[:, None, None] * cov
    m1, m2, v11, v12, v22 = mean[:, 0], mean[:, 1], cov[:, 0, 0], cov[:, 0, 1], cov[:, 1, 1]
    c, d, var = first_statistic_map(y1, m1, v11, b1)
    lp_u = first_statistic_logp(u, c, d, m1, var)
    first = c + d * u
    centre, var2 = conditional_second(first, m1, m2, v11, v12, v22)
    lp_y = given_first_logp(pt.stack([y1, y2], -1), first, centre, var2, pt.stack([b1, b2], -1))
    return [lp_u, lp_y]


def _function(build, bounds, mode):
    u, eta, n, y1, y2, b1, b2 = pt.dvectors("u", "eta", "n", "y1", "y2", "b1", "b2")
    args = (u, eta, n, y1, y2, b1, b2)
    outs = build(*args, bounds) if build is _old_graph else build(*args, _spec(bounds))
    grads = [g for out in outs for g in pt.grad(out.sum(), [u, eta])]
    return pytensor.function(list(args), [*outs, *grads], mode=mode)


def _close(got, want, tol):
    """Log densities to ``tol`` relative; each partial to ``tol`` of the group's largest partial
    (a partial that is a small difference of large terms keeps their absolute error)."""
    for k in (0, 1):
        np.testing.assert_allclose(got[k], want[k], rtol=tol, atol=tol, err_msg=OUTPUTS[k])
    size = np.max(np.abs(np.stack(want[2:])), axis=0) + 1e-300
    for k in range(2, 6):
        err = np.abs(got[k] - want[k]) / (np.abs(want[k]) + size)
        assert err.max() < tol, (OUTPUTS[k], err.max())


class _Fused(dict):
    """The C kernel on each window's grid, compiled on first use."""

    def __missing__(self, bounds):
        args = _grid(bounds)
        self[bounds] = args, _function(counted_poisson_logp, bounds, C_MODE)(*args)
        return self[bounds]


@pytest.fixture(scope="module")
def fused():
    return _Fused()


def test_grid_reaches_the_cut_windows_and_the_far_tails():
    """The grid exercises what it claims: empty (λ > 50: q < 1e-10), cut and full windows, y₂
    far from its mean."""
    _, eta, n, _, y2, b1, b2 = _grid((3, 12))
    lam = np.exp(eta)
    assert np.mean(lam > 30.0) > 0.1 and np.mean(lam < 1.0) > 0.1 and np.mean(lam > 50.0) > 0.02
    assert np.mean(np.abs(y2 - n * 0.5) / b2 > 30.0) > 0.1
    assert b1.min() < 0.1 and b1.max() > 1000.0


@pytest.mark.parametrize(
    "bounds", [BOUNDS[0], *(pytest.param(b, marks=pytest.mark.slow) for b in BOUNDS[1:])]
)
def test_python_mirror_matches_the_c(fused, bounds):
    """The mirror (Numba's source) is the C's algorithm (to rounding: C's and Python's erfc
    and exp differ in the last bits, which a partial of cancelling terms can magnify)."""
    args, want = fused[bounds]
    spec = _spec(bounds)
    got = np.array(
        [counted_poisson_scalar(*(a[i] for a in args), *spec, grad=True) for i in range(80)]
    )
    got = [got[:, k] for k in (4, 5, 0, 1, 2, 3)]
    _close(got, [w[:80] for w in want], 1e-10)


@pytest.mark.slow  # compiling the graphs' gradients: minutes under load
@pytest.mark.parametrize("bounds", BOUNDS)
def test_values_and_gradients_match_the_old_graph(fused, bounds):
    """The node's graph before the fused operation, and the graph form JAX gets."""
    args, got = fused[bounds]
    _close(got, _function(_old_graph, bounds, C_MODE)(*args), 1e-9)
    _close(got, _function(counted_poisson_graph, bounds, C_MODE)(*args), 1e-9)


@pytest.mark.parametrize("row", [0, 3, 10])
def test_gradient_matches_finite_differences(fused, row):
    bounds = (3, 12)
    (u, eta, n, y1, y2, b1, b2), _ = fused[bounds]
    rest = [np.array([x[row]]) for x in (n, y1, y2, b1, b2)]

    def total(u_, eta_):
        lp_u, lp_y = counted_poisson_logp(u_, eta_, *rest, _spec(bounds))
        return lp_u.sum() + 0.5 * lp_y.sum()

    point = [np.array([x[row]]) for x in (u, eta)]
    verify_grad(total, point, rng=np.random.default_rng(row), eps=1e-7, mode=C_MODE)


def test_logp_and_gradient_share_one_evaluation():
    """Compiled together (as NUTS does), both log densities come from the gradient operation."""
    fn = _function(counted_poisson_logp, BOUNDS[0], get_default_mode())
    names = [
        type(getattr(node.op, "scalar_op", node.op)).__name__
        for node in fn.maker.fgraph.apply_nodes
    ]
    assert names.count("CountedPoissonGrad") == 1 and "CountedPoissonLogp" not in names


@pytest.mark.slow  # compiling the graph form of the model's gradient: minutes under load
def test_grouped_model_evaluates_one_kernel_with_the_graphs_values():
    """The default grouped node's NUTS function holds one kernel for both variables' densities
    and equals the graph of the pieces; the latent sums keep their names."""
    model = grouped_poisson_count()
    assert {"y_s1_std", "y_s1"} <= {v.name for v in model.free_RVs + model.deterministics}
    assert model.named_vars_to_dims["y"] == ("group", "y_stat")
    fused = model.logp_dlogp_function(ravel_inputs=True)
    fused.set_extra_values({})
    names = [
        type(getattr(node.op, "scalar_op", node.op)).__name__
        for node in fused._pytensor_function.maker.fgraph.apply_nodes
    ]
    if "Numba" not in type(get_default_mode().linker).__name__:
        assert names.count("CountedPoissonGrad") == 1 and "CountedPoissonLogp" not in names
    graph = model.logp_dlogp_function(ravel_inputs=True, mode=GRAPH_MODE)
    graph.set_extra_values({})
    rng = np.random.default_rng(3)
    x0 = np.concatenate([np.ravel(v) for v in model.initial_point().values()])
    for x in [x0, *(x0 + rng.normal(0.0, 0.5, x0.shape) for _ in range(4))]:
        (lf, gf), (lg, gg) = fused(x), graph(x)
        assert lf == pytest.approx(lg, rel=1e-12)
        np.testing.assert_allclose(gf, gg, rtol=1e-9, atol=1e-10 * np.abs(gg).max())


@pytest.mark.slow  # compiles the CLT entries' graph for the draws
def test_prior_predictive_draws_the_pair():
    model = grouped_poisson_count()
    with model:
        draws = pm.sample_prior_predictive(draws=5, random_seed=1)
    assert draws.prior_predictive["y"].shape == (1, 5, 4, 2)
    assert np.all(np.isfinite(draws.prior["y_s1"]))


@pytest.mark.slow
def test_numba_compiles_the_same_algorithm(fused):
    """Numba (nutpie, PyTensor 3's default) keeps the operation, compiled from the mirror."""
    pytest.importorskip("numba")
    for bounds in BOUNDS:
        args, want = fused[bounds]
        fn = _function(counted_poisson_logp, bounds, "NUMBA")
        assert "CountedPoissonGrad" in scalar_op_names(fn)
        _close(fn(*args), want, 1e-10)


@pytest.mark.slow
def test_jax_gets_the_graph_without_the_custom_call(fused, graph_forms_on_jax):
    """Where the XLA custom call cannot be built (test_xla_kernels.py), JAX has no compiled
    kernel: the operation and its gradient become the graph there."""
    pytest.importorskip("jax")
    from pymc_dp.model.backends import register_jax

    register_jax()
    for bounds in BOUNDS:
        args, want = fused[bounds]
        fn = _function(counted_poisson_logp, bounds, "JAX")
        nodes = fn.maker.fgraph.apply_nodes
        names = {type(getattr(n.op, "scalar_op", n.op)).__name__ for n in nodes}
        assert not names & {"CountedPoissonLogp", "CountedPoissonGrad"}
        # The same graph compiled in C agrees with the kernel to 1e-12
        # (test_values_and_gradients_match_the_old_graph); JAX's evaluation of it loses digits
        # where the window holds little mass (measured on this grid: 4e-8 where it holds more
        # than 1e-6, 1.5e-4 in the far tail).
        got = fn(*args)
        lam, (lo, hi) = np.exp(args[1]), bounds
        held = stats.poisson.cdf(hi, lam) - stats.poisson.cdf(lo - 1, lam) > 1e-6
        _close([g[held] for g in got], [w[held] for w in want], 2e-7)
        _close(got, want, 1e-3)
