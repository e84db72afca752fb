"""The windowed Poisson's window sum as one fused operation: the same function and gradient as
the node's old graph (released_clt, then the normal–Laplace convolution) and as the graph of
its pieces, the Python mirror, finite differences, one kernel evaluation per logp-and-gradient
call, the grouped node, and the Numba and JAX backends."""

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
from pymc_dp.likelihoods.clt import grouped_released_clt
from pymc_dp.likelihoods.collapsed import normal_laplace_logp
from pymc_dp.likelihoods.counted_window import counted_window_spec
from pymc_dp.likelihoods.window_sum import (
    window_sum_graph,
    window_sum_logp,
    window_sum_model,
    window_sum_scalar,
)

C_MODE = get_default_mode().excluding("fusion")
# Windows (bounds): both edges cut, from 0 (the benchmarks'), narrow, and one so wide its upper
# edge hardly binds.
BOUNDS = ((3, 12), (0, 40), (1, 4), (2, 150))


def _spec(bounds):
    v, w = get_family("poisson").window_edges(bounds)
    return counted_window_spec(v + 1.0, w)


def _region(bounds, n):
    """ŝ's region [lower, upper] for n records (released_clt's, per record times n)."""
    _, _, lower, upper = get_family("poisson").released_clt(pt.dscalar(), 1, bounds)
    with np.errstate(invalid="ignore"):
        return (np.where(np.isinf(v), v, n * v) for v in (lower, upper))


def _grid(bounds, seed=1, size=400):
    """Rates inside, at and far beyond the window (q from 1 to below 1e-10), sums near their
    means and far from them, and noise from far narrower to far wider than ŝ."""
    rng = np.random.default_rng(seed)
    hi = bounds[1]
    n = rng.integers(5, 2000, size).astype(float)
    lam = np.exp(rng.uniform(np.log(0.05), np.log(6.0 * hi + 10.0), size))
    b = np.exp(rng.uniform(np.log(0.05), np.log(2000.0), size))
    inside = np.clip(lam, bounds[0], hi)
    y = n * inside + rng.normal(0.0, 2.0, size) * np.sqrt(n * lam) + rng.laplace(0.0, b)
    far = np.arange(size) % 5 == 0
    y[far] += rng.choice([-1.0, 1.0], far.sum()) * b[far] * rng.uniform(10.0, 250.0, far.sum())
    lower, upper = _region(bounds, n)
    return np.log(lam), n, y, b, lower, upper


def _old_graph(eta, n, y, b, lower, upper, bounds):
    """The node before the fused operation: released_clt per record times n, convolved."""
    family = get_family("poisson")
    mean, var, _, _ = grouped_released_clt(family, pt.exp(eta), np.ones(1), bounds)
    return [normal_laplace_logp(y, n * mean, n * var, lower, upper, b)]


def _function(build, bounds, mode):
    args = pt.dvectors("eta", "n", "y", "b", "lower", "upper")
    (out,) = build(*args, bounds) if build is _old_graph else [build(*args, _spec(bounds))]
    if build is window_sum_graph:
        (out,) = out
    return pytensor.function(list(args), [out, pt.grad(out.sum(), args[0])], mode=mode)


def _close(got, want, tol):
    """The log density to ``tol`` relative, its η-partial to ``tol`` relative or absolute."""
    np.testing.assert_allclose(got[0], want[0], rtol=tol, atol=tol, err_msg="lp")
    np.testing.assert_allclose(got[1], want[1], rtol=tol, atol=tol, err_msg="d lp/d eta")


class _Fused(dict):
    """The C kernel on each window's grid, compiled on first use."""

    def __missing__(self, bounds):
        args = _grid(bounds)
        self[bounds] = args, _function(window_sum_logp, bounds, C_MODE)(*args)
        return self[bounds]


@pytest.fixture(scope="module")
def fused():
    return _Fused()


def test_grid_reaches_the_cut_windows_and_the_far_tails():
    eta, n, _, b, lower, upper = _grid((3, 12))
    lam = np.exp(eta)
    assert np.mean(lam > 50.0) > 0.02 and np.mean(lam < 1.0) > 0.1
    assert b.min() < 0.1 and b.max() > 1000.0
    assert np.all(lower == 0.0) and np.all(upper == 12.0 * n)


@pytest.mark.parametrize("bounds", BOUNDS)
def test_python_mirror_matches_the_c(fused, bounds):
    """The mirror (Numba's source) is the C's algorithm, to rounding."""
    args, want = fused[bounds]
    spec = _spec(bounds)
    got = np.array([window_sum_scalar(*(a[i] for a in args), *spec, grad=True) for i in range(80)])
    _close([got[:, 1], got[:, 0]], [w[:80] for w in want], 1e-10)


@pytest.mark.parametrize("bounds", BOUNDS)
def test_values_and_gradients_match_the_old_graph(fused, bounds):
    """The node's graph before the fused operation (released_clt and CollapsedLaplace's
    convolution), and the graph form JAX gets."""
    args, got = fused[bounds]
    _close(got, _function(_old_graph, bounds, C_MODE)(*args), 1e-9)
    _close(got, _function(window_sum_graph, bounds, C_MODE)(*args), 1e-9)


@pytest.mark.parametrize("row", [0, 3, 10, 25])
def test_gradient_matches_finite_differences(fused, row):
    bounds = (3, 12)
    (eta, *rest), _ = fused[bounds]
    rest = [np.array([x[row]]) for x in rest]

    def total(eta_):
        return window_sum_logp(eta_, *rest, _spec(bounds)).sum()

    verify_grad(total, [np.array([eta[row]])], rng=np.random.default_rng(row), mode=C_MODE)


def test_logp_and_gradient_share_one_evaluation():
    """Compiled together (as NUTS does), the log density comes from the gradient operation."""
    names = _op_names(_function(window_sum_logp, BOUNDS[0], get_default_mode()))
    assert names.count("WindowSumGrad") == 1 and "WindowSumLogp" not in names


def _op_names(fn):
    return [
        type(getattr(node.op, "scalar_op", node.op)).__name__
        for node in fn.maker.fgraph.apply_nodes
    ]


def _grouped_model(likelihood="auto", seed=0):
    """The README's hierarchy over a grouped Poisson window release of sums alone."""
    import pymc_dp as pmdp

    rng = np.random.default_rng(seed)
    sizes = rng.integers(30, 300, 12)
    x = np.concatenate([rng.poisson(np.exp(rng.normal(1.5, 0.4)), s) for s in sizes])
    by = np.repeat([f"g{i}" for i in range(12)], sizes)
    keys = [f"g{i}" for i in range(12)]
    rs = pmdp.release_grouped(
        x, pm.Poisson, by=by, groups=keys, sizes="public", bounds=(0, 40), epsilon=0.5, rng=seed
    )
    with pm.Model(coords={"group": keys}) as model:
        mu = pm.Normal("mu", 1.5, 1.0)
        tau = pm.HalfNormal("tau", 0.5)
        z = pm.Normal("z", 0.0, 1.0, dims="group")
        lam = pm.math.exp(mu + tau * z)
        pmdp.NoisySuffStat(
            "y", pm.Poisson.dist(mu=lam), release=rs, dims="group", likelihood=likelihood
        )
    return model, rs


def test_grouped_node_is_the_old_collapsed_model():
    """The default grouped node holds one kernel and its log density and gradient equal those of
    the model with CollapsedLaplace of the groups' released_clt (the node before)."""
    from pymc_dp.model.nodes.collapsed import collapsed_y

    model, rs = _grouped_model()
    fn = model.logp_dlogp_function(ravel_inputs=True)
    fn.set_extra_values({})
    names = _op_names(fn._pytensor_function)
    if "Numba" not in type(get_default_mode().linker).__name__:
        assert names.count("WindowSumGrad") == 1 and "WindowSumLogp" not in names
    with pm.Model(coords=model.coords) as old:
        mu = pm.Normal("mu", 1.5, 1.0)
        tau = pm.HalfNormal("tau", 0.5)
        z = pm.Normal("z", 0.0, 1.0, dims="group")
        lam = pm.math.exp(mu + tau * z)
        moments = grouped_released_clt(get_family("poisson"), lam, rs.n, rs.first.bounds)
        value = np.asarray(rs.value, dtype=np.float64).reshape(-1)
        collapsed_y("y", moments, gaussian=False, scale=rs.first.scale, observed=value)
    ref = old.logp_dlogp_function(ravel_inputs=True)
    ref.set_extra_values({})
    rng = np.random.default_rng(3)
    x0 = np.concatenate([np.ravel(v) for v in model.initial_point().values()])
    for x in [x0, *(x0 + rng.normal(0.0, 0.7, x0.shape) for _ in range(6))]:
        (lf, gf), (lr, gr) = fn(x), ref(x)
        assert lf == pytest.approx(lr, rel=1e-12)
        np.testing.assert_allclose(gf, gr, rtol=1e-9, atol=1e-10 * np.abs(gr).max())


def test_grouped_node_draws_y():
    """Prior predictive draws of y (ŝ from its truncated CLT plus Laplace noise) have the
    release's shape and lie around n·λ (the window (0, 40) holds nearly all the mass)."""
    model, rs = _grouped_model()
    with model:
        prior = pm.sample_prior_predictive(draws=200, random_seed=1)
    y = prior.prior_predictive["y"].values.reshape(200, -1)
    assert y.shape == (200, 12) and np.all(np.isfinite(y))
    lam = np.exp(prior.prior["mu"].values.reshape(-1, 1) + 0.0)
    assert np.median(y / rs.n) == pytest.approx(np.median(lam), rel=0.5)


def test_window_sum_model_refuses_a_bad_region():
    with pm.Model(), pytest.raises(ValueError, match="lower < upper"):
        window_sum_model(
            "y", eta=pt.zeros(2), n=[10, 10], value=np.zeros(2), scale=1.0, spec=(0, 40),
            moments=(pt.zeros(2), pt.ones(2), np.array([0.0, 5.0]), np.array([40.0, 5.0])),
            dims=None,
        )  # fmt: skip


@pytest.mark.slow
def test_numba_compiles_the_same_algorithm(fused):
    """Numba (nutpie, PyTensor 3's default) keeps the operation, compiled from the mirror."""
    pytest.importorskip("numba")
    for bounds in BOUNDS:
        args, want = fused[bounds]
        fn = _function(window_sum_logp, bounds, "NUMBA")
        assert "WindowSumGrad" in scalar_op_names(fn)
        # Where λ is far above the window (q near 1e-10, summed term by term) the η-partial is
        # ill-conditioned: the C, whose compiler contracts products and sums into FMAs, and
        # the mirror, which Numba compiles without, differ by up to 1.6e-10 relative there
        # (8.9e-11 when q came back through log q); the C matches the old graph to 1e-14.
        _close(fn(*args), want, 3e-10)


@pytest.mark.slow
def test_jax_gets_the_graph_without_the_custom_call(fused, graph_forms_on_jax):
    """Where the XLA custom call cannot be built (test_xla_kernels.py), JAX has no compiled
    kernel: the operation and its gradient become the graph there."""
    pytest.importorskip("jax")
    from pymc_dp.model.backends import register_jax

    register_jax()
    for bounds in BOUNDS:
        args, want = fused[bounds]
        fn = _function(window_sum_logp, bounds, "JAX")
        names = set(scalar_op_names(fn))
        assert not names & {"WindowSumLogp", "WindowSumGrad"}
        # JAX's incomplete gamma loses digits where the window holds little mass (as the
        # counted window's test measures): compare where it holds more than 1e-6.
        got = fn(*args)
        lam, (lo, hi) = np.exp(args[0]), bounds
        held = stats.poisson.cdf(hi, lam) - stats.poisson.cdf(lo - 1, lam) > 1e-6
        _close([g[held] for g in got], [w[held] for w in want], 2e-7)
