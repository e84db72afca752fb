"""The windowed Normal pair's fused operation: the same function and gradient as the graph of its
pieces (which the grouped node built before), the Python mirror, finite differences, one kernel
evaluation per logp-and-gradient call, and the Numba and JAX backends."""

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from conftest import scalar_op_names
from pytensor.compile.mode import get_default_mode
from pytensor.gradient import verify_grad

from pymc_dp.likelihoods.pair_window import (
    _window_moments_core,
    pair_window_graph,
    pair_window_logp,
    pair_window_scalar,
)
from tests.test_backends import grouped_normal  # the backends' windowed-Normal pair model

C_MODE = get_default_mode().excluding("fusion")
GRAPH_MODE = get_default_mode().including(
    "pmdp_pair_window_logp_as_graph", "pmdp_pair_window_grad_as_graph"
)
SPEC = (-11.0, 13.0, False, False)
OUTPUTS = ("lp_u", "lp_y", "du_u", "dloc_u", "dscale_u", "du_y", "dloc_y", "dscale_y")


def _grid(seed: int = 1, size: int = 3000) -> tuple:
    """Groups over the window and beyond its edges, narrow to wide records, and noise from far
    narrower to far wider than ŝ; y near its mean, and y₂ far from it (the convolution's linear
    path far in the tail, and its log-space path)."""
    rng = np.random.default_rng(seed)
    n = rng.integers(20, 600, size).astype(float)
    loc = rng.uniform(-16.0, 18.0, size)
    scale = np.exp(rng.uniform(np.log(0.05), np.log(20.0), size))
    u = rng.normal(0.0, 3.0, size)
    b = np.exp(rng.uniform(np.log(0.5), np.log(5000.0), size))
    y1 = n * loc + rng.normal(0.0, 1.0, size) * np.sqrt(n) * scale + rng.laplace(0.0, b)
    y2 = n * (loc**2 + scale**2) + rng.normal(0.0, 3.0, size) * np.sqrt(2 * n) * scale**2
    y2 = y2 + rng.laplace(0.0, b)
    far = np.arange(size) % 5 == 0
    y2[far] += rng.choice([-1.0, 1.0], far.sum()) * b[far] * rng.uniform(10.0, 250.0, far.sum())
    return u, loc, scale, n, y1, y2, b


def _function(build, mode) -> pytensor.compile.Function:
    u, loc, scale = pt.dvectors("u", "loc", "scale")
    n, y1, y2, b = pt.dvectors("n", "y1", "y2", "b")
    outs = build(u, loc, scale, n, y1, y2, b, b, SPEC)
    grads = [g for out in outs for g in pt.grad(out.sum(), [u, loc, scale])]
    return pytensor.function([u, loc, scale, n, y1, y2, b], [*outs, *grads], mode=mode)


@pytest.fixture(scope="module")
def evaluated():
    args = _grid()
    fused = _function(pair_window_logp, C_MODE)(*args)
    graph = _function(pair_window_graph, C_MODE)(*args)
    return args, fused, graph


def _edges(loc: np.ndarray, scale: np.ndarray) -> tuple:
    return (SPEC[0] - loc) / scale, (SPEC[1] - loc) / scale


@pytest.mark.slow  # compiling the graph's gradient: minutes under load
def test_values_and_gradients_match_the_graph(evaluated):
    """Both log densities to 1e-10 relative; each partial to 1e-9 of the group's largest
    partial (a partial that is a small difference of large terms keeps their absolute error).

    Where both edges lie 8 sd or more from the records' mean, the graph's log Z =
    log(e^(-a²) erfcx(a)/2) keeps the rounding of a² (up to 3e-14 above 0: a Z above 1), and
    the pair's conditional variance of ŝ₂, a difference of terms up to 10⁵ times larger,
    carries it into log p(y) at up to 1e-8; the kernel's Z = (erfc(a) - erfc(b))/2 is 1 to
    rounding there (``test_window_mass_is_at_most_one``), so those groups are held to 1e-8.
    """
    (_, loc, scale, *_), fused, graph = evaluated
    alpha, beta = _edges(loc, scale)
    far = np.minimum(-alpha, beta) >= 8.0
    for k in (0, 1):
        np.testing.assert_allclose(
            fused[k][~far], graph[k][~far], rtol=1e-10, atol=1e-12, err_msg=OUTPUTS[k]
        )
        np.testing.assert_allclose(fused[k][far], graph[k][far], rtol=1e-8, err_msg=OUTPUTS[k])
    size = np.max(np.abs(np.stack(graph[2:])), axis=0)
    for k in range(2, 8):
        err = np.abs(fused[k] - graph[k]) / (np.abs(graph[k]) + size)
        assert err.max() < 1e-9, (OUTPUTS[k], err.max())


def test_window_mass_is_at_most_one():
    """The kernel's window mass Z and its moments over standardised windows from empty to all
    of the line: Z in [0, 1] (the erfcx form's log Z rounds above 0 at an edge 7-20 sd out),
    and the moments of N(0, 1) where both edges lie 9 sd or more out."""
    rng = np.random.default_rng(4)
    lo = rng.uniform(-30.0, 30.0, 4000)
    hi = np.minimum(lo + np.exp(rng.uniform(np.log(1e-3), np.log(60.0), 4000)), 30.0)
    z = np.array([_window_moments_core(a, b)[0] for a, b in zip(lo, hi, strict=True)])
    assert np.all((z >= 0.0) & (z <= 1.0))
    wide = (lo <= -9.0) & (hi >= 9.0)
    assert wide.sum() > 100
    for a, b in zip(lo[wide], hi[wide], strict=True):
        np.testing.assert_allclose(_window_moments_core(a, b)[:5], [1, 0, 1, 0, 3], atol=1e-14)


@pytest.mark.slow  # compiling the graph's gradient: minutes under load
def test_grid_reaches_the_linear_tail_and_the_truncated_windows(evaluated):
    """The grid exercises what it claims: y₂ dozens of sd from ŝ₂'s mean, and windows that cut."""
    (_, loc, scale, n, _, y2, b), _, _ = evaluated
    assert np.mean(np.abs(loc - 1.0) / scale > 12.0) > 0.05  # mostly outside: q ≪ 1
    assert np.mean(np.abs(y2 - n * (loc**2 + scale**2)) / b > 30.0) > 0.1


@pytest.mark.slow  # compiling the graph's gradient: minutes under load
def test_python_mirror_matches_the_c(evaluated):
    """The mirror (Numba's source) is the C's algorithm, equal to rounding (it fuses a few of
    the C's dual operations, and its window duals carry two partials where the C's carry three).
    """
    args, fused, _ = evaluated
    rows = np.arange(0, len(args[0]), 7)
    got = np.array(
        [pair_window_scalar(*(a[i] for a in args), args[-1][i], *SPEC, grad=True) for i in rows]
    )
    want = np.stack([fused[k][rows] for k in (2, 3, 4, 5, 6, 7, 0, 1)], axis=1)
    size = np.max(np.abs(want[:, :6]), axis=1, keepdims=True)
    err = np.abs(got - want) / (np.abs(want) + np.concatenate([size] * 6 + [1 + 0 * size] * 2, 1))
    assert np.quantile(err, 0.99) < 1e-12 and err.max() < 1e-10


@pytest.mark.slow  # compiling the graph's gradient: minutes under load
@pytest.mark.parametrize("row", [0, 3, 10])
def test_gradient_matches_finite_differences(evaluated, row):
    (u, loc, scale, n, y1, y2, b), _, _ = evaluated
    rest = [np.array([x[row]]) for x in (n, y1, y2, b, b)]

    def total(u_, loc_, scale_):
        lp_u, lp_y = pair_window_logp(u_, loc_, scale_, *rest, SPEC)
        return lp_u.sum() + 0.5 * lp_y.sum()

    point = [np.array([x[row]]) for x in (u, loc, scale)]
    verify_grad(total, point, rng=np.random.default_rng(row), eps=1e-7, mode=C_MODE)


def test_logp_and_gradient_share_one_evaluation():
    """Compiled together (as NUTS does), both log densities come from the gradient operation."""
    fn = _function(pair_window_logp, get_default_mode())
    names = [
        type(getattr(node.op, "scalar_op", node.op)).__name__
        for node in fn.maker.fgraph.apply_nodes
    ]
    assert names.count("PairWindowGrad") == 1 and "PairWindowLogp" not in names


def test_grouped_model_evaluates_one_kernel_with_the_old_graphs_values():
    """The default grouped node's NUTS function holds one kernel for both variables' densities;
    its log density equals the graph of the pieces (the node before the fused operation) and its
    gradient the central differences of it. (The graph's own gradient takes minutes to compile:
    the slow grid tests above compare it.)"""
    model = grouped_normal()
    assert {"y_s1_std", "y_s1"} <= {v.name for v in model.free_RVs + model.deterministics}
    fused = model.logp_dlogp_function(ravel_inputs=True)
    fused.set_extra_values({})
    graph = model.compile_logp(mode=GRAPH_MODE)
    nodes = fused._pytensor_function.maker.fgraph.apply_nodes
    names = [type(getattr(node.op, "scalar_op", node.op)).__name__ for node in nodes]
    # The node count is the C backend's; Numba (PyTensor 3's default) wraps the loop in its own
    # operations, and tests/test_backends.py checks its values against the C.
    if "Numba" not in type(get_default_mode().linker).__name__:
        assert names.count("PairWindowGrad") == 1 and "PairWindowLogp" not in names
    point = model.initial_point()
    rng = np.random.default_rng(3)
    x0 = np.concatenate([np.ravel(v) for v in point.values()])
    shapes = [(k, np.shape(v), np.size(v)) for k, v in point.items()]

    def unravel(x):
        cuts = np.cumsum([size for *_, size in shapes])[:-1]
        return {k: p.reshape(shape) for (k, shape, _), p in zip(shapes, np.split(x, cuts))}

    h = 1e-5
    for x in [x0, *(x0 + rng.normal(0.0, 0.5, x0.shape) for _ in range(2))]:
        lf, gf = fused(x)
        assert lf == pytest.approx(graph(unravel(x)), rel=1e-12)
        fd = [
            (graph(unravel(x + h * e)) - graph(unravel(x - h * e))) / (2 * h)
            for e in np.eye(x.size)
        ]
        np.testing.assert_allclose(gf, fd, rtol=1e-5, atol=1e-6 * np.abs(gf).max())


@pytest.mark.slow
def test_numba_compiles_the_same_algorithm(evaluated):
    """Numba (nutpie, PyTensor 3's default) keeps the operation, compiled from the mirror."""
    pytest.importorskip("numba")
    args, fused, _ = evaluated
    fn = _function(pair_window_logp, "NUMBA")
    assert "PairWindowGrad" in scalar_op_names(fn)
    got = fn(*args)
    size = np.max(np.abs(np.stack(fused[2:])), axis=0)
    for k in range(8):
        err = np.abs(got[k] - fused[k]) / (np.abs(fused[k]) + (size if k > 1 else 1.0))
        assert np.quantile(err, 0.99) < 1e-11 and err.max() < 1e-8, (OUTPUTS[k], err.max())


@pytest.mark.slow
def test_jax_gets_the_graph_without_the_custom_call(evaluated, graph_forms_on_jax):
    """Where the XLA custom call cannot be built (test_xla_kernels.py), JAX has no compiled
    kernel: the operation and its gradient become the graph there."""
    pytest.importorskip("jax")
    from pymc_dp.model.backends import register_jax

    register_jax()
    args, fused, _ = evaluated
    rows = slice(0, 300)
    fn = _function(pair_window_logp, "JAX")
    names = {type(getattr(n.op, "scalar_op", n.op)).__name__ for n in fn.maker.fgraph.apply_nodes}
    assert not names & {"PairWindowLogp", "PairWindowGrad"}
    got = fn(*(a[rows] for a in args))
    size = np.max(np.abs(np.stack([f[rows] for f in fused[2:]])), axis=0)
    for k in range(8):
        err = np.abs(got[k] - fused[k][rows]) / (np.abs(fused[k][rows]) + (size if k > 1 else 1.0))
        assert err.max() < 1e-8, (OUTPUTS[k], err.max())
