"""A released pair of statistics with s integrated out: the bivariate normal–Laplace convolution.

For a statistic of two components (the window sums (Σz, Σz²) of Normal and LogNormal records
with unknown σ), s ~ N(m, V) by the CLT and each released component carries its own Laplace
noise, y_j = s_j + Laplace(b_j). The likelihood of θ with s integrated out,

    p(y | θ) = ∫∫ N(s; m, V) L(y₁ - s₁; b₁) L(y₂ - s₂; b₂) ds,

has no closed form as a whole, but its inner integral does. Given s₁, s₂ is normal with mean
a(s₁) = m₂ + (c/v₁)(s₁ - m₁) and variance w = v₂ - c²/v₁, so the s₂ integral is the scalar
normal–Laplace convolution NL(y₂ - a(s₁); w, b₂) (:func:`normal_laplace_log_density`). What
is left is one integral over s₁, split at the kink s₁ = y₁. On each side the integrand is
log-concave (a normal, a linear exponent and the log-concave NL of an affine function of s₁), so
its mode is found by a safeguarded Newton iteration, the points where it has fallen by
:data:`DROP` nats by Newton steps from outside (monotone for a concave function), and
Gauss–Legendre rules on either side of the mode integrate it to double precision. Everything is
computed in log space: tails of thousands of nats stay finite and accurate.

The same nodes give the posterior moments of s | θ, y, hence the gradient of log p in (m, V)
(d log p / dm = V⁻¹ E[s - m | y], d log p / dV = ½ (V⁻¹ E[(s - m)(s - m)ᵀ | y] V⁻¹ - V⁻¹)),
and the tangents of the concave log integrand at the nodes bound it from above, which gives
exact draws of s | θ, y by rejection (:func:`draw_pair_suffstat`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy.special import erfcx, log_ndtr

from pymc_dp.kernels.collapsed import draw_collapsed_suffstat
from pymc_dp.kernels.collapsed_gaussian import gaussian_pair_moments

__all__ = [
    "DROP",
    "PairLikelihood",
    "draw_pair_suffstat",
    "normal_laplace_log_density",
    "pair_log_likelihood",
]

DROP = 45.0
"""Each side's integrand is integrated where it lies within e^-45 of its peak: the rest holds
less than about 1e-19 of the side's mass (the integrand falls at least as fast as a normal of unit
variance in standard units beyond those points)."""
_FLOOR = 1e-6  # as in pymc_dp.kernels.collapsed: each variance floored at (1e-6·b)²


_NODES = 40
_GL_X, _GL_W = np.polynomial.legendre.leggauss(_NODES)
_NEWTON = 100  # iterations of the safeguarded Newton searches (they stop early when converged)
_LOG_SQRT_2PI = 0.5 * np.log(2 * np.pi)
_SQRT_HALF = np.sqrt(0.5)
_ASYMPTOTIC = 1e4  # beyond this |z|, erfcx's ratio is its asymptotic one to 1e-16


class _NormalLaplace(NamedTuple):
    """log NL(r; w, b) with its first two derivatives in r."""

    log_density: npt.NDArray[np.float64]
    slope: npt.NDArray[np.float64]
    curvature: npt.NDArray[np.float64]


def _normal_laplace(r: npt.NDArray, w: npt.NDArray, b: npt.NDArray) -> _NormalLaplace:
    """Log ∫ N(e; 0, w) Laplace(r - e; b) de and its derivatives in r, stable in every tail.

    With A = e^{w/2b² - r/b} Φ(z_A), z_A = r/√w - √w/b, and B the same with -r, NL = (A + B)/2b.
    Both are e^{-r²/2w} e^{g(z)} with g(z) = log Φ(z) + z²/2 = log(erfcx(-z/√2)/2), so their
    ratio, and their sum's ratio to P = φ(r/√w)/√w, need no large exponents; log NL itself is
    computed from the form that has none (e^{-r²/2w} e^g where z < 0, the definition where
    z ≥ 0). d log NL / dr = tanh((g_B - g_A)/2)/b, and
    d² log NL / dr² = sech²((g_B - g_A)/2)/b² - 2P/(b(A + B)).
    """
    r, w, b = np.broadcast_arrays(r, w, b)
    sw = np.sqrt(w)
    logs, gs = [], []
    for sign in (1.0, -1.0):
        rr = sign * r
        z = rr / sw - sw / b
        log_term = np.empty_like(z)
        g = np.empty_like(z)
        tail = z < 0
        bulk = ~tail
        # Each branch only where it is used: erfcx and log_ndtr are most of the cost.
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            g[tail] = np.log(0.5 * erfcx(-z[tail] * _SQRT_HALF))
            log_term[tail] = -0.5 * np.square(rr[tail] / sw[tail]) + g[tail]
            log_phi = log_ndtr(z[bulk])
            g[bulk] = 0.5 * np.square(z[bulk]) + log_phi
            log_term[bulk] = w[bulk] / (2 * b[bulk] ** 2) - rr[bulk] / b[bulk] + log_phi
        logs.append(log_term)
        gs.append(g)
    half = 0.5 * (gs[1] - gs[0])
    # Far into both tails (noise far below √w) g(z) = -log(-z√(2π)) + O(z⁻²): the difference of
    # the two g's, of order rb/w, is then lost to rounding unless taken as a log-ratio.
    far = np.maximum(-r / sw, r / sw) - sw / b < -_ASYMPTOTIC
    if far.any():
        u_a = sw[far] / b[far] - r[far] / sw[far]  # -z_A
        half[far] = -0.5 * np.log1p(2 * r[far] / sw[far] / u_a)
    slope = np.tanh(half) / b
    with np.errstate(over="ignore"):
        sech2 = 1.0 / np.square(np.cosh(half))
    ratio = np.exp(-_LOG_SQRT_2PI - np.log(sw) - np.logaddexp(gs[0], gs[1]))
    curvature = sech2 / (b * b) - 2.0 * ratio / b
    return _NormalLaplace(np.logaddexp(logs[0], logs[1]) - np.log(2 * b), slope, curvature)


def normal_laplace_log_density(
    residual: npt.ArrayLike, var: npt.ArrayLike, scale: npt.ArrayLike
) -> npt.NDArray[np.float64]:
    """Log of the density at y of s + Laplace(scale) with s ~ N(a, var), where residual = y - a.

    Parameters
    ----------
    residual
        y - a.
    var
        Variance of the normal (floored at (1e-6·scale)²).
    scale
        Laplace scale b.

    Returns
    -------
    numpy.ndarray
        The log density, finite far into both tails.

    Examples
    --------
    >>> from scipy import integrate, stats
    >>> ref = integrate.quad(lambda s: stats.norm.pdf(s, 0, 2) * stats.laplace.pdf(1.5 - s, 0, 0.5),
    ...                      -30, 30, points=[1.5])[0]
    >>> bool(np.isclose(normal_laplace_log_density(1.5, 4.0, 0.5), np.log(ref)))
    True
    >>> float(normal_laplace_log_density(1e4, 1.0, 1.0)) > -1e4 - 10   # far tail: Laplace
    True
    """
    r, w, b = np.broadcast_arrays(
        *(np.asarray(a, dtype=np.float64) for a in (residual, var, scale))
    )
    return _normal_laplace(r, w + (_FLOOR * b) ** 2, b).log_density


class PairLikelihood(NamedTuple):
    """log p(y | m, V) of a released pair, with its gradient in (m, V); batch-shaped fields."""

    log_likelihood: npt.NDArray[np.float64]
    """log p(y | m, V), shape ``batch``."""
    grad_mean: npt.NDArray[np.float64]
    """d log p / dm, shape ``batch + (2,)``."""
    grad_cov: npt.NDArray[np.float64]
    """d log p / dV, shape ``batch + (2, 2)`` (symmetric; each off-diagonal entry gets half of
    the derivative in the shared covariance)."""


class _Problem(NamedTuple):
    """The one-dimensional integral over x = (s₁ - m₁)/√v₁, flattened over the batch."""

    kink: npt.NDArray  # x₀, where s₁ = y₁
    kappa: npt.NDArray  # √v₁ / b₁
    gamma: npt.NDArray  # d a(s₁)/dx = (c/v₁)√v₁
    rest: npt.NDArray  # y₂ - m₂: the residual of s₂'s mean at x = 0
    w: npt.NDArray  # Var(s₂ | s₁)
    b1: npt.NDArray
    b2: npt.NDArray
    sd1: npt.NDArray  # √v₁


def _problem(
    released: npt.ArrayLike, mean: npt.ArrayLike, cov: npt.ArrayLike, scale: npt.ArrayLike
) -> tuple[_Problem, tuple[int, ...], npt.NDArray, npt.NDArray, npt.NDArray]:
    y = np.asarray(released, dtype=np.float64)
    m = np.asarray(mean, dtype=np.float64)
    v = np.asarray(cov, dtype=np.float64)
    b = np.asarray(scale, dtype=np.float64)
    if b.ndim == 0:
        b = np.broadcast_to(b, (2,))
    batch = np.broadcast_shapes(y.shape[:-1], m.shape[:-1], v.shape[:-2], b.shape[:-1])
    y = np.broadcast_to(y, (*batch, 2)).reshape(-1, 2)
    m = np.broadcast_to(m, (*batch, 2)).reshape(-1, 2)
    v = np.broadcast_to(v, (*batch, 2, 2)).reshape(-1, 2, 2)
    b = np.broadcast_to(b, (*batch, 2)).reshape(-1, 2)
    v1 = v[:, 0, 0] + (_FLOOR * b[:, 0]) ** 2
    c = 0.5 * (v[:, 0, 1] + v[:, 1, 0])
    sd1 = np.sqrt(v1)
    w = np.maximum(v[:, 1, 1] - c * c / v1, 0.0) + (_FLOOR * b[:, 1]) ** 2
    problem = _Problem(
        kink=(y[:, 0] - m[:, 0]) / sd1,
        kappa=sd1 / b[:, 0],
        gamma=c / sd1,
        rest=y[:, 1] - m[:, 1],
        w=w,
        b1=b[:, 0],
        b2=b[:, 1],
        sd1=sd1,
    )
    cov_used = np.stack(
        [np.stack([v1, c], -1), np.stack([c, w + c * c / v1], -1)], -2
    )  # the covariance the integral actually uses (floors included)
    return problem, batch, y, m, cov_used


def _side_log_density(p: _Problem, x: npt.NDArray, side: float, col: slice | None = None):
    """Log integrand on one side, its slope and curvature (floored at -1) at ``x``, and NL.

    On the side ``side`` (-1: s₁ ≤ y₁, +1: s₁ ≥ y₁) the integrand is the standard normal density
    of x (up to its constant) times the Laplace factor e^{-κ|x - x₀|}, times NL of s₂'s residual.
    """
    sel = (lambda a: a) if col is None else (lambda a: a[:, None])
    kappa = sel(p.kappa)
    nl = _normal_laplace(sel(p.rest) - sel(p.gamma) * x, sel(p.w), sel(p.b2))
    g = sel(p.gamma)
    value = -0.5 * x * x - side * kappa * (x - sel(p.kink)) + nl.log_density
    slope = -x - side * kappa - g * nl.slope
    curvature = -1.0 + g * g * nl.curvature
    return value, slope, np.minimum(curvature, -1.0), nl


def _side_interval(p: _Problem, side: float) -> tuple[npt.NDArray, ...]:
    """(lower end, mode, upper end, log peak) of the part of one side where it matters."""
    kink = p.kink
    # The mode solves x = -side·κ - γ·D(r) with |D| ≤ 1/b₂: it lies within |γ|/b₂ of -side·κ.
    reach = np.abs(p.gamma) / p.b2
    centre = -side * p.kappa
    lo, hi = centre - reach, centre + reach
    if side < 0:
        hi = np.minimum(hi, kink)
        lo = np.minimum(lo, kink)
    else:
        lo = np.maximum(lo, kink)
        hi = np.maximum(hi, kink)
    # Where the integrand still rises towards the kink, its mode on this side is the kink.
    at_kink = _side_log_density(p, kink, side)[1]
    pinned = at_kink * side <= 0
    lo, hi = np.where(pinned, kink, lo), np.where(pinned, kink, hi)
    mode = _concave_mode(p, side, lo, hi)
    peak = _side_log_density(p, mode, side)[0]
    # Beyond the mode the integrand falls at least like exp(-t²/2): √(2·DROP) bounds each reach.
    width = np.sqrt(2 * DROP)
    left = _drop_point(p, side, mode, peak, -1.0, width)
    right = _drop_point(p, side, mode, peak, 1.0, width)
    if side < 0:
        right = np.minimum(right, kink)
        mode = np.minimum(mode, kink)
    else:
        left = np.maximum(left, kink)
        mode = np.maximum(mode, kink)
    return left, mode, right, peak


def _subset(p: _Problem, rows: npt.NDArray) -> _Problem:
    return _Problem(*(field[rows] for field in p))


def _concave_mode(p: _Problem, side: float, lo: npt.NDArray, hi: npt.NDArray) -> npt.NDArray:
    """Root of the decreasing slope in [lo, hi] (or the end it tends to), by safeguarded Newton.

    A Newton step that would leave the bracket, or that is not under half the step before it,
    is replaced by bisection (Numerical Recipes' rtsafe), so a curvature that rounding has made
    far too large cannot stall the search; rows stop once converged.
    """
    x = 0.5 * (lo + hi)
    lo, hi = lo.copy(), hi.copy()
    previous = hi - lo
    rows = np.arange(x.size)
    for _ in range(_NEWTON):
        sub = _subset(p, rows)
        xr, lr, hr = x[rows], lo[rows], hi[rows]
        _, slope, curvature, _ = _side_log_density(sub, xr, side)
        lr = np.where(slope > 0, xr, lr)
        hr = np.where(slope <= 0, xr, hr)
        step = xr - slope / curvature
        newton = (step > lr) & (step < hr) & (np.abs(step - xr) < 0.5 * previous[rows])
        new = np.where(newton, step, 0.5 * (lr + hr))
        previous[rows] = np.abs(new - xr)
        x[rows], lo[rows], hi[rows] = new, lr, hr
        moving = (np.abs(new - xr) > 1e-10 * (1.0 + np.abs(xr))) & (hr - lr > 0)
        rows = rows[moving]
        if rows.size == 0:
            break
    return x


def _drop_point(
    p: _Problem, side: float, mode: npt.NDArray, peak: npt.NDArray, direction: float, width: float
) -> npt.NDArray:
    """The point beyond ``mode`` (in ``direction``) where the log integrand is peak - DROP.

    Newton steps from outside the root stay outside for a concave function, so the result never
    cuts off mass that matters; the search starts at the bound mode ± √(2·DROP) and stops within
    0.1% of the root.
    """
    target = peak - DROP
    x = mode + direction * width
    rows = np.arange(x.size)
    for _ in range(_NEWTON):
        sub = _subset(p, rows)
        xr, mr = x[rows], mode[rows]
        value, slope, _, _ = _side_log_density(sub, xr, side)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = xr - (value - target[rows]) / slope
        # Outside the root (value ≤ target) a Newton step moves towards it and stays outside.
        ok = np.isfinite(step) & (value < target[rows]) & ((step - mr) * direction > 0)
        new = np.where(ok, step, xr)
        new = mr + direction * np.minimum(direction * (new - mr), width)
        x[rows] = new
        rows = rows[np.abs(new - xr) > 1e-3 * np.abs(xr - mr) + 1e-12]
        if rows.size == 0:
            break
    return x


_NEGLIGIBLE = 100.0
"""A side whose integrand peaks this many nats below the other side's, times its length, is
left out: it changes log p by less than e^-75."""


_SHARP = 1e8
"""Where κ = √v₁/b₁ exceeds this the Laplace factor e^{-κ|x - x₀|} is narrower than x's
rounding near x₀ can resolve; it integrates to 2/κ times the rest at x₀, to a relative
O(1/κ²)."""


def _nodes(p: _Problem) -> tuple[npt.NDArray, npt.NDArray, _NormalLaplace]:
    """Quadrature nodes x, log weights (integrand included) and NL at the nodes, per batch row.

    A row whose Laplace factor on s₁ is sharper than :data:`_SHARP` has one node, at the kink.
    """
    count = p.kink.size
    x_all = np.zeros((count, 6 * _GL_X.size))
    log_w_all = np.full(x_all.shape, -np.inf)
    nl_all = _NormalLaplace(*(np.zeros(x_all.shape) for _ in range(3)))
    sharp = p.kappa > _SHARP
    for rows, fill in ((np.flatnonzero(sharp), _kink_node), (np.flatnonzero(~sharp), _side_nodes)):
        if rows.size:
            x, log_w, nl = fill(_subset(p, rows))
            cols = slice(0, x.shape[1])
            x_all[rows, cols], log_w_all[rows, cols] = x, log_w
            for field, part in zip(nl_all, nl):
                field[rows, cols] = part
    return x_all, log_w_all, nl_all


def _kink_node(p: _Problem) -> tuple[npt.NDArray, npt.NDArray, _NormalLaplace]:
    """One node at x₀ carrying ∫ e^{-κ|x - x₀|} dx = 2/κ times the rest of the integrand."""
    x = p.kink[:, None]
    value, _, _, nl = _side_log_density(p, x, 1.0, col=slice(None))
    return x, value + np.log(2.0 / p.kappa)[:, None], nl


def _side_nodes(p: _Problem) -> tuple[npt.NDArray, npt.NDArray, _NormalLaplace]:
    """Quadrature nodes x, log weights (integrand included) and NL at the nodes, per batch row.

    Each side is cut at its mode and at the corner of NL, where s₂'s residual r is 0 (rounded
    over δ = √w/|γ| in x). Every piece is integrated by Gauss–Legendre after the map
    x = anchor ± δ(eˢ - 1) away from the cut it touches: the nodes then crowd geometrically
    towards the cut, so a feature of width δ there is resolved however long the piece is, and a
    piece no longer than δ keeps evenly spread nodes.
    """
    count = p.kink.size
    nodes = _GL_X.size
    size = 6 * nodes
    x_all = np.zeros((count, size))
    log_w_all = np.full((count, size), -np.inf)
    nl_all = _NormalLaplace(*(np.zeros((count, size)) for _ in range(3)))
    gamma = np.abs(p.gamma)
    with np.errstate(divide="ignore", invalid="ignore"):
        corner = np.where(gamma > 0, p.rest / p.gamma, np.nan)
        corner_width = np.where(gamma > 0, np.sqrt(p.w) / gamma, np.inf)
    sides = {}
    for side in (-1.0, 1.0):
        left, mode, right, peak = _side_interval(p, side)
        sides[side] = (left, mode, right, peak)
    top = np.maximum(sides[-1.0][3], sides[1.0][3])
    column = 0
    for side, (left, mode, right, peak) in sides.items():
        with np.errstate(divide="ignore"):
            bound = peak + np.log(np.maximum(right - left, 0.0))
        rows = np.flatnonzero(bound > top - _NEGLIGIBLE)
        sub = _subset(p, rows)
        left, mode, right = left[rows], mode[rows], right[rows]
        # The integrand's scale at the mode: its curvature there, or, at the kink where the
        # mode may sit with a slope, the length over which that slope drops it by one nat.
        _, slope, curvature, _ = _side_log_density(sub, mode, side)
        mode_width = 1.0 / (np.abs(slope) + np.sqrt(-curvature))
        inside = (corner[rows] > left) & (corner[rows] < right)
        cut = np.where(inside, corner[rows], mode)
        cut_width = np.where(inside, corner_width[rows], mode_width)
        lower_is_mode = mode <= cut
        p1 = np.where(lower_is_mode, mode, cut)
        p2 = np.where(lower_is_mode, cut, mode)
        w1 = np.where(lower_is_mode, mode_width, cut_width)
        w2 = np.where(lower_is_mode, cut_width, mode_width)
        narrow_first = w1 <= w2
        # (anchor, far end, width at the anchor) of each piece.
        pieces = (
            (p1, left, w1),
            (np.where(narrow_first, p1, p2), np.where(narrow_first, p2, p1), np.minimum(w1, w2)),
            (p2, right, w2),
        )
        for anchor, end, width in pieces:
            length = np.abs(end - anchor)
            keep = length > 0
            at = rows[keep]
            anchor, length, width = anchor[keep], length[keep], width[keep]
            direction = np.sign(end[keep] - anchor)
            delta = np.minimum(np.maximum(width, 1e-300), length)
            span = np.log1p(length / delta)
            u = 0.5 * span[:, None] * (_GL_X + 1.0)
            x = anchor[:, None] + (direction * delta)[:, None] * np.expm1(u)
            value, _, _, nl = _side_log_density(_subset(p, at), x, side, col=slice(None))
            log_w = np.log(_GL_W * 0.5) + np.log(span * delta)[:, None] + u
            cols = slice(column, column + nodes)
            x_all[at, cols] = x
            log_w_all[at, cols] = value + log_w
            for field, part in zip(nl_all, nl):
                field[at, cols] = part
            column += nodes
    return x_all, log_w_all, nl_all


def _log_sum_exp(a: npt.NDArray) -> npt.NDArray:
    top = np.max(a, axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.sum(np.exp(a - top), axis=-1)) + top[..., 0]


def pair_log_likelihood(
    *,
    released: npt.ArrayLike,
    mean: npt.ArrayLike,
    cov: npt.ArrayLike,
    scale: npt.ArrayLike,
) -> PairLikelihood:
    """Log p(y | θ) of a released pair with s ~ N(m, V) integrated out, and its gradient.

    Parameters
    ----------
    released
        The released y, shape ``(..., 2)``.
    mean, cov
        Mean ``(..., 2)`` and covariance ``(..., 2, 2)`` of the CLT normal of s.
    scale
        Laplace scales b = Δ/ε of the two components, ``(..., 2)`` (or a scalar).

    Returns
    -------
    PairLikelihood

    Notes
    -----
    Each variance is floored at (1e-6·b)², as in the scalar collapsed likelihood, so a degenerate
    normal gives the Laplace density rather than a division by zero.

    Examples
    --------
    With V diagonal the pair is two independent scalar convolutions:

    >>> y, m, b = np.array([1.0, -2.0]), np.zeros(2), np.array([0.5, 2.0])
    >>> out = pair_log_likelihood(released=y, mean=m, cov=np.diag([4.0, 1.0]), scale=b)
    >>> ref = normal_laplace_log_density(y, np.array([4.0, 1.0]), b).sum()
    >>> bool(np.isclose(out.log_likelihood, ref))
    True
    """
    p, batch, _, _, cov_used = _problem(released, mean, cov, scale)
    x, log_w, nl = _nodes(p)
    # Normal density of x and the Laplace factor's normalisation 1/2b₁ (NL carries 1/2b₂).
    log_norm = -_LOG_SQRT_2PI - np.log(2 * p.b1)
    total = _log_sum_exp(log_w)
    log_lik = total + log_norm
    weight = np.exp(log_w - total[:, None])
    # E[s - m | y] and E[(s - m)(s - m)ᵀ | y] from the nodes: d₁ = √v₁ x, d₂ = γx + e.
    d1 = p.sd1[:, None] * x
    # Tweedie: E[e | r] = -w·NL'/NL and Var[e | r] = w + w²·(log NL)'' for s₂ = a(s₁) + e.
    w = p.w[:, None]
    e_mean = -w * nl.slope
    e_var = np.maximum(w + w * w * nl.curvature, 0.0)
    d2 = p.gamma[:, None] * x + e_mean
    m1 = np.sum(weight * d1, -1)
    m2 = np.sum(weight * d2, -1)
    s11 = np.sum(weight * d1 * d1, -1)
    s12 = np.sum(weight * d1 * d2, -1)
    s22 = np.sum(weight * (d2 * d2 + e_var), -1)
    first = np.stack([m1, m2], -1)
    second = np.stack([np.stack([s11, s12], -1), np.stack([s12, s22], -1)], -2)
    prec = np.linalg.inv(cov_used)
    grad_mean = np.einsum("...ij,...j->...i", prec, first)
    grad_cov = 0.5 * (prec @ second @ prec - prec)
    return PairLikelihood(
        log_lik.reshape(batch),
        grad_mean.reshape(*batch, 2),
        grad_cov.reshape(*batch, 2, 2),
    )


def _hull_segments(
    t: npt.NDArray, f: npt.NDArray, g: npt.NDArray, lo: npt.NDArray, hi: npt.NDArray
) -> tuple[npt.NDArray, npt.NDArray]:
    """Ends of the pieces of the upper hull min_k f_k + g_k (x - t_k) of a concave function.

    ``t`` holds each row's tangent points in increasing order (NaN-padded at the end); the hull
    is cut to [lo, hi]. Returns the pieces' lower and upper ends, one piece per tangent point.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        # Adjacent tangents meet where f_k + g_k (z - t_k) = f_k+1 + g_k+1 (z - t_k+1).
        num = f[:, 1:] - f[:, :-1] - t[:, 1:] * g[:, 1:] + t[:, :-1] * g[:, :-1]
        z = num / (g[:, :-1] - g[:, 1:])
    mid = 0.5 * (t[:, 1:] + t[:, :-1])
    z = np.where(np.isfinite(z) & (z >= t[:, :-1]) & (z <= t[:, 1:]), z, mid)
    start = np.concatenate([lo[:, None], z], 1)
    end = np.concatenate([z, hi[:, None]], 1)
    start = np.clip(start, lo[:, None], hi[:, None])
    end = np.clip(end, lo[:, None], hi[:, None])
    return start, end


def _log_segment_mass(f, g, t, a, c):
    """Log ∫_a^c exp(f + g (x - t)) dx, for a ≤ c (either may be infinite where g allows)."""
    # Integrate from the end where the line is highest, so the exponent never overflows.
    top = np.where(g > 0, c, a)
    width = c - a
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        at_top = f + g * (top - t)
        scaled = np.abs(g) * width
        log_len = np.where(
            scaled < 1e-8,
            np.log(width),
            np.log(-np.expm1(-scaled)) - np.log(np.abs(g)),
        )
    out = at_top + log_len
    return np.where(width > 0, out, -np.inf)


def draw_pair_suffstat(
    rng: np.random.Generator,
    *,
    released: npt.ArrayLike,
    mean: npt.ArrayLike,
    cov: npt.ArrayLike,
    scale: npt.ArrayLike,
    max_rounds: int = 200,
    gaussian: bool = False,
) -> npt.NDArray[np.float64]:
    """Draw s | θ, y for a released pair (see the module docstring), exactly.

    s₁ is drawn from its marginal by rejection from the upper hull of tangents to its
    log-concave density at the quadrature nodes (adaptive-rejection style, accepting almost
    every proposal), then s₂ | s₁, y₂ from its mixture of two truncated normals
    (:func:`~pymc_dp.kernels.collapsed.draw_collapsed_suffstat`).

    Parameters
    ----------
    rng
        Source of randomness.
    released, mean, cov, scale
        As for :func:`pair_log_likelihood`.
    max_rounds
        Rounds of rejection before giving up (each row is accepted with probability near 1 per
        round, so this bounds the run time, not the law).
    gaussian
        Whether the noise is Gaussian of sd ``scale`` (one for both components): s | θ, y is
        then the bivariate normal product
        (:func:`~pymc_dp.kernels.collapsed_gaussian.gaussian_pair_moments`), drawn directly.

    Returns
    -------
    numpy.ndarray
        Draws of s, shape ``batch + (2,)``.

    Raises
    ------
    RuntimeError
        If some row is still rejected after ``max_rounds`` rounds (a defect, not a property of
        the input: the hull is within a factor near 1 of the density).

    Examples
    --------
    With V diagonal the components are independent scalar convolutions:

    >>> rng = np.random.default_rng(0)
    >>> s = draw_pair_suffstat(rng, released=np.array([3.0, 0.0]), mean=np.zeros((20000, 2)),
    ...                        cov=np.eye(2), scale=1.0)
    >>> np.round(s.mean(0), 1)   # s₁ pulled towards y₁ = 3 by about 1; s₂ stays at 0
    array([ 1., -0.])
    >>> s = draw_pair_suffstat(rng, released=np.array([2.0, 0.0]), mean=np.zeros((20000, 2)),
    ...                        cov=np.eye(2), scale=1.0, gaussian=True)
    >>> np.round(s.mean(0), 1)   # the normal product: halfway to y
    array([ 1., -0.])
    """
    if gaussian:
        loc, cov3 = gaussian_pair_moments(released=released, mean=mean, cov=cov, scale=scale)
        # eigh rather than Cholesky: cov3 may be singular to rounding (a statistic without
        # spread).
        w, u = np.linalg.eigh(cov3)
        root = u * np.sqrt(np.clip(w, 0.0, None))[..., None, :]
        z = rng.standard_normal(loc.shape)
        return loc + (root @ z[..., None])[..., 0]
    p, batch, y, m, _cov_used = _problem(released, mean, cov, scale)
    x, log_w, _ = _nodes(p)
    count = x.shape[0]
    side_of = np.repeat([-1.0, 1.0], x.shape[1] // 2)
    used = np.isfinite(log_w)
    # Tangents at the used nodes of each side, sorted; unused nodes are NaN at the end.
    segments = []
    for side in (-1.0, 1.0):
        cols = side_of == side
        t = np.where(used[:, cols], x[:, cols], np.nan)
        t = np.sort(t, axis=1)
        value, slope, _, _ = _side_log_density(p, np.nan_to_num(t), side, col=slice(None))
        f = value
        valid = np.isfinite(t)
        # Pad with the last valid tangent so the hull is unchanged by the padding.
        last = np.maximum(valid.sum(1) - 1, 0)
        pick = np.where(valid, np.arange(t.shape[1]), last[:, None])
        t, f, slope = (np.take_along_axis(a, pick, 1) for a in (t, f, slope))
        lo = np.where(side < 0, -np.inf, p.kink)
        hi = np.where(side < 0, p.kink, np.inf)
        start, end = _hull_segments(
            t, f, slope, np.broadcast_to(lo, (count,)), np.broadcast_to(hi, (count,))
        )
        mass = _log_segment_mass(f, slope, t, start, end)
        mass = np.where(valid, mass, -np.inf)
        segments.append((side, t, f, slope, start, end, mass))
    masses = np.concatenate([s[-1] for s in segments], 1)
    top = np.max(masses, 1, keepdims=True)
    prob = np.exp(masses - top)
    cdf = np.cumsum(prob, 1)
    cdf /= cdf[:, -1:]
    stacked = [np.concatenate([s[i] for s in segments], 1) for i in range(1, 6)]
    sides = np.concatenate([np.full(s[1].shape, s[0]) for s in segments], 1)
    # A Laplace factor sharper than x's rounding puts s₁ at y₁ (see _SHARP).
    sharp = p.kappa > _SHARP
    draws = np.where(sharp, p.kink, np.nan)
    rows = np.flatnonzero(~sharp)
    for _ in range(max_rounds):
        if rows.size == 0:
            break
        k = (rng.uniform(size=rows.size)[:, None] > cdf[rows]).sum(1)
        k = np.minimum(k, cdf.shape[1] - 1)
        t, f, g, a, c = (arr[rows, k] for arr in stacked)
        side = sides[rows, k]
        # Inverse CDF of exp(g x) on [a, c], from the end where the line is highest.
        u = rng.uniform(size=rows.size)
        width = c - a
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            scaled = np.abs(g) * width
            offset = np.where(
                scaled < 1e-8,
                u * width,
                -np.log1p(u * np.expm1(-scaled)) / np.abs(g),
            )
        proposal = np.where(g > 0, c - offset, a + offset)
        envelope = f + g * (proposal - t)
        density = np.empty(rows.size)
        for s_val in (-1.0, 1.0):
            on = side == s_val
            sub = _subset(p, rows[on])
            value = _side_log_density(sub, proposal[on], s_val)[0]
            density[on] = value
        accept = np.log(rng.uniform(size=rows.size)) < density - envelope
        draws[rows[accept]] = proposal[accept]
        rows = rows[~accept]
    if rows.size:
        raise RuntimeError(f"draw_pair_suffstat: {rows.size} rows still rejected")
    s1 = m[:, 0] + p.sd1 * draws
    s2 = draw_collapsed_suffstat(
        rng,
        released=y[:, 1],
        mean=m[:, 1] + p.gamma * draws,
        var=p.w,
        lower=-np.inf,
        upper=np.inf,
        scale=p.b2,
    )
    return np.stack([s1, s2], -1).reshape(*batch, 2)
