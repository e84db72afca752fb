"""The compiled normal–Laplace convolution: its C code against an independent graph, quadrature
and finite differences, its Numba build against the C, and the graph on the JAX backend."""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from conftest import scalar_op_names
from pytensor.compile.mode import Mode
from scipy import integrate, stats

from pymc_dp.likelihoods import normal_laplace as normal_laplace_module
from pymc_dp.likelihoods.normal_laplace import (
    normal_laplace,
    normal_laplace_graph,
    normal_laplace_scalar,
)

NAMES = ("value", "mean", "var", "lower", "upper", "scale")
C_MODE = Mode(linker="cvm", optimizer="fast_run")  # PyTensor 3 defaults to Numba


def _cases(size: int, seed: int) -> list[np.ndarray]:
    """Inputs over every regime: the mean anywhere in the region, sd/b from 1e-6 to 1e6, y far
    outside the region."""
    rng = np.random.default_rng(seed)
    upper = rng.uniform(10, 3000, size)
    mean = upper * rng.uniform(0, 1, size) ** rng.choice([0.2, 1, 5], size)
    sd = np.exp(rng.uniform(np.log(1e-3), np.log(upper / 2)))
    scale = np.exp(rng.uniform(-6, 7, size))
    spread = rng.standard_t(2, size) * (sd + scale) * rng.choice([0.3, 1, 10, 100], size)
    return [mean + spread, mean, sd**2, np.zeros(size), upper, scale]


def _compiled(fun):
    inputs = [pt.dvector(name) for name in NAMES]
    out = fun(*inputs)
    return pytensor.function(inputs, [out, *pt.grad(out.sum(), inputs)], mode=C_MODE)


@pytest.fixture(scope="module")
def c_function():
    return _compiled(normal_laplace)


@pytest.fixture(scope="module")
def evaluated(c_function):
    args = _cases(20_000, seed=11)
    return args, c_function(*args), _compiled(normal_laplace_graph)(*args)


def test_values_match_the_graph_and_the_python_code(evaluated):
    """C against the autodiff graph (written without the C's cancellations, and taking the
    noise-free limit below b/sd = 1e-5) and against the Python mirror of the C, on 20 000 random
    inputs."""
    args, op, graph = evaluated
    assert np.all(np.isfinite(op[0])) and np.all(np.isfinite(graph[0]))
    exact = np.sqrt(args[2]) / args[5] < 1e4  # where the graph is not the limit
    np.testing.assert_allclose(op[0][exact], graph[0][exact], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(op[0], graph[0], rtol=1e-7)
    # The partial derivatives in the mean, where NUTS spends its time.
    rel = np.abs(op[2] - graph[2]) / (np.abs(graph[2]) + 1e-12)
    assert np.quantile(rel[exact], 0.9999) < 1e-6
    assert np.quantile(rel, 0.9999) < 1e-4
    pick = np.random.default_rng(0).choice(len(args[0]), 300, replace=False)
    python = np.array([normal_laplace_scalar(*(a[j] for a in args), grad=True) for j in pick])
    np.testing.assert_allclose(python[:, 6], op[0][pick], rtol=1e-12, atol=1e-10)
    for k in range(6):
        # The same algorithm; libm and compiler flags (PyTensor compiles with -march=native, so
        # FMA or not by machine) differ in the last bits, which the cancelling terms of the
        # variance and scale partials amplify at sd/b ≈ 1e5, and the scale partial's at sd/b ≈
        # 25 too (99% quantile 1.1e-8 there on one machine, 2026-11-29).
        rel = np.abs(python[:, k] - op[k + 1][pick]) / (np.abs(op[k + 1][pick]) + 1e-12)
        assert np.quantile(rel, 0.99) < 1e-7 and rel.max() < 1e-2


def _far_under_wide_noise(size: int, seed: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Inputs where y is far from m against the normal's sd but r|z| < 330, y deep inside the
    region: a Σz² given Σz under wide noise at posterior draws (|z| about 40, r about 0.02)."""
    rng = np.random.default_rng(seed)
    r = np.exp(rng.uniform(np.log(1e-3), np.log(5.0), size))
    scale = np.exp(rng.uniform(-3, 8, size))
    sd = r * scale
    far = np.exp(rng.uniform(np.log(r + 5.0), np.log(np.minimum(330.0 / r, 1e5))))
    mean = rng.normal(0.0, 100.0, size)
    wide = (40.0 * np.hypot(sd, scale) + 2.0 * far * sd) * rng.uniform(1.0, 3.0, size)
    value = mean + rng.choice([-1.0, 1.0], size) * far * sd
    return [value, mean, sd**2, mean - wide, mean + wide, scale], far / r


def test_linear_path_far_from_the_mean_matches_the_log_space_path(c_function, monkeypatch):
    """Where |z| - r > 9 and r|z| < 300 the C takes the linear-space path (before 2026-11-29
    only |z| + r < 30 did, so at posterior draws of the grouped Normal pair at ε = 0.1 over half
    of the groups took the log-space path); there it agrees with the log-space path of the
    Python mirror to 1e-12, and its variance partial is the closed form 1/(2b²) (the density
    depends on v through r²/2 alone once y is that far out), where the log-space path's sum of
    terms |z|/r times larger loses up to 1e-16·|z|/r of it. Since 2026-12-03 these inputs take
    the linear path's shortcut without special functions (the smaller piece dropped, below
    3e-19 of the larger), so this is also that shortcut's test."""
    args, ratio = _far_under_wide_noise(1000, seed=5)
    c = np.array(c_function(*args))
    monkeypatch.setattr(normal_laplace_module, "_plain", lambda *a: False)
    log_space = np.array([normal_laplace_scalar(*row, grad=True) for row in zip(*args)]).T
    log_space = np.vstack([log_space[6], log_space[:6]])  # value first, as the C outputs
    sd, scale = np.sqrt(args[2] + 1e-12 * args[5] ** 2), args[5]
    z = (args[0] - args[1]) / sd
    linear = (np.abs(z) - sd / scale > 9.0) & (np.abs(z) * sd / scale < 300.0)
    assert linear.mean() > 0.8  # most of the inputs take the new path
    for k in (0, 1, 2, 4, 5, 6):  # value; y, m, L, U, b partials
        np.testing.assert_allclose(c[k], log_space[k], rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(c[3][linear], 1.0 / (2.0 * scale[linear] ** 2), rtol=1e-13)
    rel = np.abs(c[3] - log_space[3]) / np.abs(log_space[3])
    assert np.all(rel <= 1e-15 * (1.0 + ratio))


def test_shortcut_is_continuous_where_it_starts(c_function):
    """At |z| - r = 9, where the linear path drops its smaller piece, the value and every
    partial are the same on both sides to rounding: the value moves by its y partial times the
    step, each partial by its own derivative times the step (under 1e-6 relative here); the
    dropped piece is below 3e-19 of the sum."""
    r = np.array([1e-3, 0.02, 0.3, 1.0, 4.0])
    scale = np.array([7.0, 400.0, 0.5, 30.0, 2.0])
    sd = r * scale
    rows = []
    for sign in (-1.0, 1.0):
        for u in (9.0 - 1e-7, 9.0 + 1e-7):
            y = sign * (u + r) * sd
            rows.append(
                np.array(c_function(y, np.zeros(5), sd**2, -2000.0 * sd, 2000.0 * sd, scale))
            )
    for inside, outside, sign in ((rows[0], rows[1], -1.0), (rows[2], rows[3], 1.0)):
        step = sign * 2e-7 * sd
        np.testing.assert_allclose(outside[0] - inside[0], inside[1] * step, rtol=1e-6, atol=1e-15)
        for k in range(1, 7):
            np.testing.assert_allclose(outside[k], inside[k], rtol=1e-6, atol=1e-300)


@pytest.mark.parametrize("k", [1, 2, 5])  # mean, var, scale
def test_gradient_matches_finite_differences(evaluated, k):
    """Central differences of the value, at moderate sd/b (0.01 to 100) where they are accurate."""
    args, op, _ = evaluated
    ratio = np.sqrt(args[2]) / args[5]
    pick = np.flatnonzero((ratio > 1e-2) & (ratio < 1e2))[:300]
    # Steps on each input's own scale: the sd for the mean, a relative step for var and scale.
    step = 1e-5 * np.sqrt(args[2][pick]) if k == 1 else 1e-6 * args[k][pick]

    def at(sign):
        moved = [a[pick].copy() for a in args]
        moved[k] += sign * step
        return np.array([normal_laplace_scalar(*row) for row in zip(*moved, strict=True)])

    numeric = (at(1) - at(-1)) / (2 * step)
    np.testing.assert_allclose(op[k + 1][pick], numeric, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(
    ("y", "m", "v", "b"),
    [(5.0, 3.0, 4.0, 1.5), (-3.0, 2.0, 1.0, 0.5), (45.0, 30.0, 25.0, 8.0), (2.0, 1.0, 0.04, 3.0)],
)
def test_value_matches_quadrature(y, m, v, b):
    """The truncated convolution on [0, 40] by numerical integration."""
    sd = np.sqrt(v)
    mass = stats.norm.cdf(40, m, sd) - stats.norm.cdf(0, m, sd)
    integral = integrate.quad(
        lambda s: stats.norm.pdf(s, m, sd) * stats.laplace.pdf(y, s, b),
        0,
        40,
        points=[min(max(y, 0.0), 40.0)],
        epsabs=0,
        epsrel=1e-12,
    )[0]
    got = normal_laplace(y, m, v, 0.0, 40.0, b).eval(mode=C_MODE)
    assert got == pytest.approx(np.log(integral / mass), rel=1e-9)


def test_logp_and_gradient_share_one_evaluation():
    """Compiled together (as NUTS does), the value comes from the gradient operation."""
    mean = pt.dvector("mean")
    out = normal_laplace(np.ones(3), mean, 2.0, 0.0, 10.0, 1.0).sum()
    fn = pytensor.function([mean], [out, pt.grad(out, mean)], mode=C_MODE)
    ops = [
        type(node.op.scalar_op).__name__
        for node in fn.maker.fgraph.apply_nodes
        if hasattr(node.op, "scalar_op")
    ]
    assert ops.count("NormalLaplaceGrad") == 1 and "NormalLaplaceLogp" not in ops


def test_numba_compiles_the_same_algorithm(evaluated):
    """Numba (nutpie, PyTensor 3's default) keeps the operations, compiled from the Python
    mirror: the same values and partials as the C on the 20 000 inputs, in a fused function."""
    pytest.importorskip("numba")
    args, op, _ = evaluated
    inputs = [pt.dvector(name) for name in NAMES]
    out = normal_laplace(*inputs)
    fn = pytensor.function(inputs, [out, *pt.grad(out.sum(), inputs)], mode="NUMBA")
    assert "NormalLaplaceGrad" in scalar_op_names(fn)
    got = fn(*args)
    np.testing.assert_allclose(got[0], op[0], rtol=1e-12, atol=1e-10)
    for k in range(1, 7):
        # As for the Python mirror: libm differs from the C's in the last bits.
        rel = np.abs(got[k] - op[k]) / (np.abs(op[k]) + 1e-12)
        assert np.quantile(rel, 0.99) < 1e-8 and rel.max() < 1e-2


def test_numba_drops_the_partials_nothing_reads(evaluated):
    """A gradient in (m, v) alone, as the grouped CLT node takes, evaluates the operation that
    returns only those and the value (NormalLaplacePartials): the same numbers as the full one."""
    pytest.importorskip("numba")
    args = evaluated[0]
    inputs = [pt.dvector(name) for name in NAMES]
    out = normal_laplace(*inputs)
    wrt = [inputs[1], inputs[2]]
    fn = pytensor.function(inputs, [out, *pt.grad(out.sum(), wrt)], mode="NUMBA")
    names = scalar_op_names(fn)
    assert "NormalLaplacePartials" in names and "NormalLaplaceGrad" not in names
    got = fn(*args)
    full = pytensor.function(inputs, [out, *pt.grad(out.sum(), inputs)], mode="NUMBA")(*args)
    for k, want in zip((0, 2, 3), got):
        np.testing.assert_array_equal(want, full[k])


def test_partials_operation_in_python_and_c():
    """The operation the rewrite puts in returns the kept outputs of the full one: its C those of
    the full C, its Python those of the Python code."""
    from pytensor.tensor.elemwise import Elemwise

    args = _cases(200, seed=5)
    keep = (1, 2, 6)
    op = normal_laplace_module.NormalLaplacePartials(keep, name="partials")
    full = Elemwise(normal_laplace_module.normal_laplace_grad_scalar)
    inputs = [pt.dvector(name) for name in NAMES]
    for mode in (C_MODE, Mode(linker="py", optimizer="fast_run")):
        got = pytensor.function(inputs, Elemwise(op)(*inputs), mode=mode)(*args)
        want = pytensor.function(inputs, full(*inputs), mode=mode)(*args)
        for k, g in zip(keep, got):
            np.testing.assert_array_equal(g, want[k])
    assert op == normal_laplace_module.NormalLaplacePartials(keep)
    assert op != normal_laplace_module.NormalLaplacePartials((1, 6))


def test_jax_erfcx_is_right_where_jax_own_returns_zero():
    """JAX 0.10's erfcx is 0 on about [26.54, 26.64]; the registered one is right everywhere."""
    jax = pytest.importorskip("jax")
    from scipy import special

    from pymc_dp.model.backends import ERFCX_SERIES_FROM, jax_erfcx

    jax.config.update("jax_enable_x64", True)
    x = np.concatenate(
        [np.linspace(-25.0, 40.0, 130_001), [ERFCX_SERIES_FROM, 1e3, 1e8, 1e200, 1e300]]
    )
    want = special.erfcx(x)
    got = np.asarray(jax_erfcx(x))
    # Below 0 erfcx is 2 exp(x²) - erfcx(-x): a last-bit change of x moves it by 2x² ulps, and
    # JAX's own branch there differs by version (5.7e-14 at x = -25 with jax 0.12).
    rtol = 1e-14 * np.maximum(1.0, 2.0 * np.minimum(x, 0.0) ** 2)
    assert np.all(np.abs(got - want) <= rtol * np.abs(want))
    slope = np.asarray(jax.vmap(jax.grad(jax_erfcx))(x))
    # d erfcx / dx = 2x erfcx(x) - 2/√π, which cancels at large x: there -1/(√π x²) (1 - 3/(2x²)).
    near = x <= 40.0
    np.testing.assert_allclose(
        slope[near], 2.0 * x[near] * want[near] - 2.0 / np.sqrt(np.pi), rtol=1e-9
    )
    far = x[~near]
    np.testing.assert_allclose(
        slope[~near], -(1.0 - 1.5 / far**2) / (np.sqrt(np.pi) * far**2), rtol=1e-9
    )


def test_jax_gets_the_graph_without_the_custom_call(graph_forms_on_jax):
    """Where the XLA custom call cannot be built (test_xla_kernels.py), JAX has no compiled
    kernel: the operation and its gradient become the graph there."""
    pytest.importorskip("jax")
    from pymc_dp.model.backends import register_jax

    register_jax()  # erfcx, as pm.sample(nuts_sampler="numpyro") registers it
    mode = "JAX"
    mean = pt.dvector("mean")
    out = normal_laplace(np.array([1.0, 5.0, 30.0]), mean, 4.0, 0.0, 40.0, 2.0).sum()
    outputs = [out, pt.grad(out, mean)]
    point = np.array([2.0, 5.0, 20.0])
    fn = pytensor.function([mean], outputs, mode=mode)
    names = {type(getattr(n.op, "scalar_op", n.op)).__name__ for n in fn.maker.fgraph.apply_nodes}
    assert not names & {"NormalLaplaceLogp", "NormalLaplaceGrad"}
    expected = pytensor.function([mean], outputs, mode=C_MODE)(point)
    for got, want in zip(fn(point), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-9)
