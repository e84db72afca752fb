"""Unbounded univariate families released over a truncation window (paper §3.3).

The curator keeps only records with a ≤ x ≤ b and releases ŝ = Σ 1[a ≤ x_i ≤ b] t(x_i) with
Laplace noise. A family declares, once, its log-partition A(η) and its log CDF and log survival
function in terms of η, as PyTensor expressions; everything else is derived here:

* Lemma 1: the moments of t(x) on a window [v, w] are derivatives of the truncated
  log-partition Â(η) = A(η) + log(F(w; η) - F(v; η)), taken with ``pytensor.grad``.
* Proposition 1 (random-sum CLT): the statistic of the records that fall in a window is normal
  with mean n q μ̂ and covariance n q Σ̂ + n q (1 - q) μ̂ μ̂ᵀ.
* The joint CLT of (ŝ, s), the window statistic and the statistic of all records, which is
  what the Gibbs sampler needs. The paper's Algorithm 2 treats the three windows as independent;
  their counts are in fact multinomial, so window r and r' covary by -n q_r q_r' μ̂_r μ̂_r'ᵀ.
  With those terms the windows add up to exactly nμ and nΣ, the moments of s.

Log masses are computed so that they and their derivatives stay finite: structurally empty
windows (a = 0 for positive data) are left out of the graph, masses below e^-100 are clamped
with zero gradient, and the window's mass is taken from whichever tail keeps it accurate.
"""

from __future__ import annotations

import dataclasses
import math
from abc import abstractmethod
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pytensor.tensor as pt
from pytensor.gradient import grad
from pytensor.tensor.variable import TensorVariable

from pymc_dp._validation import OUT_OF_DOMAIN_ADVICE, check_finite_array, describe_records
from pymc_dp.families.base import ExponentialFamily
from pymc_dp.families.erfcx import erfcx

__all__ = [
    "LOG_TINY",
    "TruncatedFamily",
    "f64",
    "guarded_log",
    "log1mexp",
    "logaddexp",
    "normal_log_cdf",
]

LOG_TINY = -100.0
"""Windows with log mass below this (q < 4e-44) hold no records for any realistic n and are
left out; special functions lose their relative accuracy (and their derivatives overflow) in
such far tails."""


def f64(value: float) -> TensorVariable:
    """A float64 constant.

    PyTensor stores a Python float that float32 holds exactly (2.5, 7.0) as float32, and the
    gradients of gammainc/gammaincc then evaluate gammaln in float32.
    """
    return pt.constant(value, dtype="float64")


def guarded_log(p: TensorVariable) -> TensorVariable:
    """Log p, clamped at :data:`LOG_TINY` with zero gradient where p underflows (no NaN)."""
    ok = p > math.exp(LOG_TINY)
    return pt.switch(ok, pt.log(pt.switch(ok, p, 1.0)), LOG_TINY)


def log1mexp(x: TensorVariable) -> TensorVariable:
    """log(1 - e^x) for x < 0, with finite derivatives of every order for very negative x.

    PyTensor's ``log1mexp`` has a NaN second derivative below about x = -700 (inf/inf); there
    log(1 - e^x) = -e^x to double precision, so that branch is used from x = -30 on.
    """
    far = x < -30.0
    return pt.switch(far, -pt.exp(pt.switch(far, x, -31.0)), pt.log1mexp(pt.switch(far, -1.0, x)))


def logaddexp(a: TensorVariable, b: TensorVariable) -> TensorVariable:
    """log(e^a + e^b), with finite second derivatives (PyTensor's is NaN for very negative a, b)."""
    # Not max(a, b) + log1p(exp(-|a - b|)): the gradient of max counts a tie twice.
    return a + pt.softplus(b - a)


def normal_log_cdf(z: TensorVariable) -> TensorVariable:
    """Log Φ(z), with finite derivatives of every order for every z.

    One expression, log(erfcx(-z/√2)/2) - z²/2, which is exact in the lower tail (where the
    plain form underflows) and loses only about 1e-16·z² absolutely for large z. z is capped at
    30, beyond which Φ(z) = 1 in double precision, and at -38, far below the masses kept. A
    single branch keeps the autodiff graphs (and their compile time) small.
    """
    z = pt.clip(z, -38.0, 30.0)  # log Φ(-38) < -700: far below LOG_TINY either way
    return pt.log(erfcx(-z / np.sqrt(2.0)) / 2.0) - z**2 / 2.0


@dataclasses.dataclass(frozen=True)
class TruncatedFamily(ExponentialFamily):
    """A univariate exponential family whose statistic t(x) is unbounded.

    Releases need a window ``bounds = (a, b)``; the sensitivity, the valid region and the CLT of
    the released statistic all depend on it. Subclasses declare t(x), A(η), η(θ), the log CDF
    and log survival function in η, the conjugate prior and the range of t over an interval.
    """

    needs_bounds: ClassVar[bool] = True
    discrete: ClassVar[bool] = False
    """Whether records are integers (windows then hold whole numbers a ≤ x ≤ b)."""
    log_scale: ClassVar[bool] = False
    """Whether the family applies to z = log x (:meth:`to_latent`): records must be > 0."""
    stat_names: ClassVar[tuple[str, ...]] = ("sum_x",)
    """Names of the components of t(x), used as coordinates of the trace."""

    # ---- curator side -------------------------------------------------------------------
    @property
    def stat_shape(self) -> tuple[int, ...]:  # noqa: D102
        return () if len(self.stat_names) == 1 else (len(self.stat_names),)

    @property
    def stat_size(self) -> int:
        """Number k of components of t(x)."""
        return len(self.stat_names)

    @property
    def sensitivity(self) -> float:
        """Not defined without a window: use :meth:`release_sensitivity`."""
        raise TypeError(
            f"the {self.name} family has unbounded statistics; its sensitivity depends on the "
            "truncation bounds: use release_sensitivity(bounds)"
        )

    def to_latent(self, x: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """The variable z on which the family is an exponential family.

        The identity, or log for LogNormal; applies to records and to bounds.
        """
        return np.asarray(x, dtype=np.float64)

    @abstractmethod
    def statistic(self, z: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """t(z) per record: shape ``(n, k)`` for ``n`` latent values ``z``."""

    @abstractmethod
    def statistic_range(
        self, lower: float, upper: float
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Smallest and largest value of each t_j(z) over z in ``[lower, upper]``.

        Bounds are on the latent scale, ``±inf`` allowed; results have shape ``(k,)`` each.
        """

    def check_bounds(self, bounds: Any) -> tuple[float, float]:
        """Check a truncation window ``(a, b)`` on the data scale and return it as floats.

        Raises
        ------
        ValueError
            If the bounds are not two finite numbers with a < b inside the family's domain,
            hold no possible record (no whole number for a count family, or a single point of
            the domain), or are so wide that t(x) overflows a float.
        """
        if bounds is None:
            raise ValueError(
                f"bounds are required for the {self.name} family, whose statistics are "
                "unbounded: pass bounds=(a, b) (records outside are dropped) or bounds='private'"
            )
        try:
            a, b = (float(v) for v in bounds)
        except OverflowError:
            raise ValueError(
                "bounds must be finite with a < b (got an integer too large for a float)"
            ) from None
        except (TypeError, ValueError):
            raise ValueError(f"bounds must be a pair (a, b) of numbers (got {bounds!r})") from None
        if not (np.isfinite(a) and np.isfinite(b)) or a >= b:
            raise ValueError(f"bounds must be finite with a < b (got {bounds!r})")
        lo, hi = self.domain
        if b < lo or a > hi:
            raise ValueError(
                f"bounds {bounds!r} miss the {self.name} domain [{lo}, {hi}]: no record could "
                "fall inside"
            )
        latent = self.latent_window((a, b))
        if not np.all(np.isfinite(latent)):
            raise ValueError(
                f"bounds {bounds!r} must keep the {self.name} statistic bounded: t(x) uses "
                f"log x, so the lower bound must be > 0"
            )
        if self.discrete and latent[0] > latent[1]:
            raise ValueError(
                f"bounds {bounds!r} hold no whole number, so no {self.name} record could fall "
                "inside: choose a window that contains at least one count"
            )
        if not self.discrete and latent[0] >= latent[1]:
            raise ValueError(
                f"bounds {bounds!r} meet the {self.name} domain [{lo}, {hi}] in a single point: "
                "choose a window with a < b inside the domain"
            )
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                tmin, tmax = self.statistic_range(*latent)
                appendix_c = np.sum(np.maximum(np.maximum(np.abs(tmin), np.abs(tmax)), tmax - tmin))
        except OverflowError:  # Python floats raise where NumPy's give inf
            appendix_c = np.inf
        if not np.isfinite(appendix_c):
            raise ValueError(
                f"bounds {bounds!r} are too wide for the {self.name} family: its statistic "
                "t(x) (with x² for Normal and LogNormal) overflows a float there; choose a "
                "narrower window (in other units if need be)"
            )
        return a, b

    def latent_window(self, bounds: tuple[float, float]) -> tuple[float, float]:
        """The window on the latent scale, clipped to the domain (and to integers if discrete)."""
        dom_lo, dom_hi = self.domain
        clipped = np.clip(np.asarray(bounds, dtype=np.float64), dom_lo, dom_hi)
        with np.errstate(divide="ignore"):
            a, b = (float(v) for v in self.to_latent(clipped))
        lo, hi = self._latent_domain()
        a, b = max(a, lo), min(b, hi)
        if self.discrete:
            a, b = float(math.ceil(a)), float(math.floor(b))
        return a, b

    def release_sensitivity(self, bounds: tuple[float, float]) -> float:
        """L1 sensitivity of ŝ = Σ 1[a ≤ x ≤ b] t(x) under replacing one record (Appendix C).

        ``Δ = Σ_j max{max |t_j|, max t_j - min t_j}`` over the window: a record can also move
        from inside the window (t̂ = t) to outside it (t̂ = 0), so the bound is never just the
        range of t.
        """
        a, b = self.latent_window(self.check_bounds(bounds))
        tmin, tmax = self.statistic_range(a, b)
        return float(np.sum(np.maximum(np.maximum(np.abs(tmin), np.abs(tmax)), tmax - tmin)))

    def release_sensitivity_l2(self, bounds: tuple[float, float]) -> float:
        """L2 sensitivity of ŝ = Σ 1[a ≤ x ≤ b] t(x) under replacing one record.

        ``Δ₂ = √(Σ_j max{max |t_j|, max t_j - min t_j}²)``, the L2 norm of the per-component
        bounds of Appendix C; exact for one component.
        """
        a, b = self.latent_window(self.check_bounds(bounds))
        tmin, tmax = self.statistic_range(a, b)
        per_component = np.maximum(np.maximum(np.abs(tmin), np.abs(tmax)), tmax - tmin)
        return float(np.sqrt(np.sum(per_component**2)))

    @abstractmethod
    def window_theta_grid(self, bounds: tuple[float, float], nodes: int) -> npt.NDArray[np.float64]:
        """θ values spanning every regime of a window sum: records below, inside, beyond it.

        The CLT's trust rule (:mod:`pymc_dp.likelihoods.window_trust`) measures the CLT at
        these θ. ``nodes`` points along a scalar θ; a vector θ has a grid of its own, with
        θ on the last axis.
        """

    def window_statistic(
        self, x: npt.NDArray, bounds: tuple[float, float]
    ) -> npt.NDArray[np.float64]:
        """ŝ = Σ_i 1[a ≤ x_i ≤ b] t(x_i), shape :attr:`stat_shape`."""
        a, b = bounds
        inside = np.asarray(x)[(x >= a) & (x <= b)]
        if inside.size == 0:
            return np.zeros(self.stat_shape)
        return np.sum(self.statistic(self.to_latent(inside)), axis=0).reshape(self.stat_shape)

    def sufficient_statistic(self, x: npt.NDArray) -> npt.NDArray[np.float64]:  # noqa: D102
        return np.sum(self.statistic(self.to_latent(x)), axis=0).reshape(self.stat_shape)

    def _check_real_records(self, x: npt.ArrayLike) -> npt.NDArray:
        """Records as a finite 1-D array inside the domain (shared by the families' checks)."""
        arr = check_finite_array(x, "x", ndim=1)
        if arr.dtype == np.bool_:
            raise TypeError(f"x must be numeric for {self.name} data (got booleans)")
        lo, hi = self.domain
        outside = (arr < lo) | (arr > hi)
        if self.log_scale and np.any(arr <= 0):
            outside |= arr <= 0
        if np.any(outside):
            rule = f"({lo:g}, {hi:g})" if self.log_scale else f"[{lo}, {hi}]"
            raise ValueError(
                f"x must lie in the {self.name} domain {rule}: {describe_records(outside)} "
                f"lie outside; {OUT_OF_DOMAIN_ADVICE}"
            )
        if self.discrete:
            fractional = arr != np.round(arr)
            if np.any(fractional):
                raise ValueError(
                    f"x must hold whole numbers for {self.name} data: "
                    f"{describe_records(fractional)} are not; the release was stopped (records "
                    "are never rounded): fix those records"
                )
            if np.any(np.abs(arr) > 2.0**53):
                # Counts beyond 2^53 are not exact integers in int64 casts; they stay floats.
                return arr.astype(np.float64)
            return arr.astype(np.int64)
        return arr.astype(np.float64)

    def validate_data(self, x: npt.ArrayLike) -> npt.NDArray:  # noqa: D102
        return self._check_real_records(x)

    def valid_region(self, n: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Box that s, the statistic of all ``n`` records, lies in."""
        tmin, tmax = self.statistic_range(*self._latent_domain())
        return n * tmin, n * tmax

    def window_region(
        self, n: int, bounds: tuple[float, float]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray, npt.NDArray]:
        """The region the sampler keeps the stacked (ŝ, s) of ``n`` records in.

        Only s, whose conjugate update must be proper, is kept in its valid region. ŝ and
        s - ŝ are left to their normal approximation: when few records are expected outside
        the window (n·q small), s - ŝ is far from normal, and cutting its normal at 0 raises
        its mean and biases θ (measured: a calibration KS p-value of 1e-9 for Exponential with
        n = 100, ε = 0.1 and the window (0, 1.5) under a Gamma(8, 2) prior; 0.38 without the cut).

        Returns
        -------
        lower, upper
            Box of the stacked vector, shape ``(2k,)``.
        out_lower, out_upper
            Box of s - ŝ, shape ``(k,)`` (unbounded).
        """
        k = self.stat_size
        all_lower, all_upper = self.valid_region(n)
        free = np.full(k, np.inf)
        return (
            np.concatenate([-free, all_lower]),
            np.concatenate([free, all_upper]),
            -free,
            free,
        )

    def record_region(
        self, n: int, bounds: tuple[float, float]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray, npt.NDArray]:
        """Where the stacked (ŝ, s) of ``n`` actual records lies.

        The box of each block and the box of s - ŝ, for checks of released values and of
        simulated data.

        Returns
        -------
        lower, upper
            Box of the stacked vector, shape ``(2k,)``.
        out_lower, out_upper
            Box of s - ŝ, the statistic of the records outside the window, shape ``(k,)``.
        """
        a, b = self.latent_window(bounds)
        zlo, zhi = self._latent_domain()
        win_min, win_max = self.statistic_range(a, b)
        all_lower, all_upper = self.valid_region(n)
        # Closed outside pieces [zlo, a] and [b, zhi]: a slight superset of the open ones.
        pieces = [(lo, hi) for lo, hi in ((zlo, a), (b, zhi)) if hi > lo]
        if pieces:
            ranges = [self.statistic_range(lo, hi) for lo, hi in pieces]
            out_min = np.min([r[0] for r in ranges], axis=0)
            out_max = np.max([r[1] for r in ranges], axis=0)
        else:
            out_min = out_max = np.zeros(self.stat_size)
        # Each block sums at most n records, so it lies in [n·min(t, 0), n·max(t, 0)].
        win_lower, win_upper = n * np.minimum(win_min, 0), n * np.maximum(win_max, 0)
        out_lower, out_upper = n * np.minimum(out_min, 0), n * np.maximum(out_max, 0)
        return (
            np.concatenate([win_lower, all_lower]),
            np.concatenate([win_upper, all_upper]),
            out_lower,
            out_upper,
        )

    def _latent_domain(self) -> tuple[float, float]:
        with np.errstate(divide="ignore"):
            lo, hi = self.to_latent(np.asarray(self.domain, dtype=np.float64))
        return float(lo), float(hi)

    # ---- analyst side: Lemma 1 and Proposition 1 ----------------------------------------
    @abstractmethod
    def log_cdf(self, z: float, eta: TensorVariable) -> TensorVariable:
        """Log P(Z ≤ z) as a PyTensor function of η, finite with finite gradients."""

    @abstractmethod
    def log_sf(self, z: float, eta: TensorVariable) -> TensorVariable:
        """Log P(Z > z) as a PyTensor function of η, finite with finite gradients."""

    def window_edges(self, bounds: tuple[float, float]) -> tuple[float, float]:
        """Latent (v, w) with lower window {z ≤ v}, centre {v < z ≤ w}, upper {z > w}."""
        a, b = self.latent_window(bounds)
        return (a - 1.0 if self.discrete else a), b

    def window_log_masses(
        self, eta: TensorVariable, bounds: tuple[float, float]
    ) -> tuple[TensorVariable, TensorVariable, TensorVariable]:
        """Log q for the lower, centre and upper windows, finite with finite gradients."""
        v, w = self.window_edges(bounds)
        zlo, zhi = self._latent_domain()
        # No record lies beyond the domain: such a window is empty, not tiny, and is left out.
        lower_empty = v < zlo or (v == zlo and not self.discrete)
        upper_empty = w >= zhi
        neg_inf = f64(-np.inf)
        log_l = neg_inf if lower_empty else self.log_cdf(v, eta)
        log_u = neg_inf if upper_empty else self.log_sf(w, eta)
        # q_centre = 1 - q_lower - q_upper: one expression keeps the autodiff graphs, and their
        # compile time, small. It is accurate while the window holds more than a sliver of the
        # mass (relative error about 1e-16 / q_centre); a window the data almost never reach
        # contributes n·q·μ̂ ≈ 0 anyway, so below q = 1e-10 it is clamped to e^-100 with zero
        # gradient (and left out by truncated_moments).
        if lower_empty and upper_empty:
            return log_l, f64(0.0), log_u
        if lower_empty or upper_empty:
            outside = log_u if lower_empty else log_l
        else:
            outside = logaddexp(log_l, log_u)
        held = outside < -1e-10
        log_c = pt.switch(held, log1mexp(pt.switch(held, outside, -1.0)), LOG_TINY)
        return log_l, log_c, log_u

    def truncated_moments(
        self,
        theta: TensorVariable,
        bounds: tuple[float, float],
        windows: tuple[str, ...] = ("lower", "centre", "upper"),
    ) -> list[tuple[TensorVariable, TensorVariable, TensorVariable]]:
        """(log q, μ̂, Σ̂) of t on the lower, centre and upper windows (Lemma 1).

        μ̂ and Σ̂ are the gradient and Hessian in η of Â(η) = A(η) + log q(η). A window whose
        mass is below e^-100 gets μ̂ = 0, Σ̂ = 0 (it contributes nothing).
        """
        eta = self.natural_parameters(theta)
        a_eta = self.log_partition(eta)
        k = self.stat_size
        masses = dict(zip(("lower", "centre", "upper"), self.window_log_masses(eta, bounds)))
        out = []
        for log_q in (masses[name] for name in windows):
            if log_q.owner is None and np.isneginf(log_q.data):
                out.append((log_q, pt.zeros(k), pt.zeros((k, k))))
                continue
            a_hat = a_eta + log_q
            mu = grad(a_hat, eta)
            # Row by row rather than pytensor's scan-based jacobian: k is static and small, and
            # a scan does not vectorise over a batch of θ.
            sigma = pt.stack([grad(mu[i], eta) for i in range(k)]) if eta.ndim else grad(mu, eta)
            empty = log_q <= LOG_TINY
            mu = pt.switch(empty, 0.0, pt.reshape(mu, (k,)))
            sigma = pt.switch(empty, 0.0, pt.reshape(sigma, (k, k)))
            out.append((log_q, mu, sigma))
        return out

    def rs_clt_moments(
        self, theta: TensorVariable, n: int, bounds: tuple[float, float]
    ) -> list[tuple[TensorVariable, TensorVariable]]:
        """(m, V) of the statistic of the lower, centre and upper windows (Proposition 1).

        m = n q μ̂ and V = n q Σ̂ + n q(1-q) μ̂μ̂ᵀ.
        """
        out = []
        for log_q, mu, sigma in self.truncated_moments(theta, bounds):
            q = pt.exp(log_q)
            out.append((n * q * mu, n * q * sigma + n * q * (1 - q) * pt.outer(mu, mu)))
        return out

    def released_clt(
        self, theta: TensorVariable, n: int, bounds: tuple[float, float] | None = None
    ) -> tuple[TensorVariable, TensorVariable, float, float]:
        """Mean, variance and range of the released window statistic ŝ (Proposition 1).

        Per record t·1[a ≤ x ≤ b] has mean e = q μ̂ and second moment q(Σ̂ + μ̂²), so ŝ has
        mean n e and variance n(q(Σ̂ + μ̂²) - e²); it lies in the range that n records in the
        window can sum to (:meth:`record_region`).
        """
        if self.stat_size != 1:
            raise TypeError(f"{self!r} releases a vector statistic, not one number")
        ((log_q, mu, sigma),) = self.truncated_moments(theta, bounds, windows=("centre",))
        q = pt.exp(log_q)
        mean = q * mu[0]
        var = n * (q * (sigma[0, 0] + pt.sqr(mu[0])) - pt.sqr(mean))
        lower, upper, _, _ = self.record_region(n, bounds)
        return n * mean, pt.maximum(var, 0.0), float(lower[0]), float(upper[0])

    def counted_clt(
        self, theta: TensorVariable, n: int, bounds: tuple[float, float]
    ) -> tuple[TensorVariable, TensorVariable]:
        """CLT mean ``(2,)`` and covariance ``(2, 2)`` of the window sum and the window count.

        Per record t̃(x) = (t(x)·1[a ≤ x ≤ b], 1[a ≤ x ≤ b]), with q the window's mass and μ̂,
        Σ̂ the moments of t on it (Lemma 1): E t̃ = (q μ̂, q), Var t̃₁ = q(Σ̂ + μ̂²) - q²μ̂²,
        Cov(t̃₁, t̃₂) = q(1 - q) μ̂ and Var t̃₂ = q(1 - q); n records multiply both by n. Only for
        a one-number statistic t.
        """
        if self.stat_size != 1:
            raise TypeError(f"{self!r} releases a vector statistic; a count goes with one number")
        ((log_q, mu, sigma),) = self.truncated_moments(theta, bounds, windows=("centre",))
        q = pt.exp(log_q)
        out = -pt.expm1(log_q)  # 1 - q, accurate when the window holds nearly every record
        m1 = mu[0]
        var_sum = q * (sigma[0, 0] + pt.sqr(m1)) - pt.sqr(q * m1)
        cov = q * out * m1
        var_count = q * out
        mean = pt.stack([n * q * m1, n * q])
        covariance = n * pt.stack([pt.stack([var_sum, cov]), pt.stack([cov, var_count])])
        return mean, covariance

    def joint_clt(
        self, theta: TensorVariable, n: int, bounds: tuple[float, float]
    ) -> tuple[TensorVariable, TensorVariable]:
        """Mean ``(2k,)`` and covariance ``(2k, 2k)`` of the stacked (ŝ, s) of ``n`` records.

        Per record, the window statistic t·1_r has mean e_r = q_r μ̂_r and second moment
        M_r = q_r(Σ̂_r + μ̂_r μ̂_rᵀ), and t·1_r · t·1_r' = 0 for r ≠ r'. Hence, with e_c and M_c
        for the centre window and e_o = μ - e_c for the rest,
        Cov(ŝ) = n(M_c - e_c e_cᵀ) (Proposition 1), Cov(ŝ, s) = Cov(ŝ) - n e_c e_oᵀ and
        Cov(s) = nΣ. This is the three-window sum of :meth:`rs_clt_moments` with the multinomial
        cross-covariances -n e_r e_r'ᵀ, written so that only the centre window is
        differentiated (a third of the graph).
        """
        (log_q, mu_c, sigma_c) = self.truncated_moments(theta, bounds, windows=("centre",))[0]
        mu, sigma = self.moments(theta)
        q = pt.exp(log_q)
        e_c = q * mu_c
        cov_c = n * (q * (sigma_c + pt.outer(mu_c, mu_c)) - pt.outer(e_c, e_c))
        cov_cs = cov_c - n * pt.outer(e_c, mu - e_c)
        mean = pt.concatenate([n * e_c, n * mu])
        cov = pt.concatenate(
            [
                pt.concatenate([cov_c, cov_cs], axis=1),
                pt.concatenate([cov_cs.T, n * sigma], axis=1),
            ],
            axis=0,
        )
        return mean, cov

    def moments(self, theta: TensorVariable) -> tuple[TensorVariable, TensorVariable]:
        """Mean and covariance of t(x) (Eq. 1), shaped ``(k,)`` and ``(k, k)``."""
        mu, sigma = super().moments(theta)
        k = self.stat_size
        return pt.reshape(mu, (k,)), pt.reshape(sigma, (k, k))

    def naive_statistic(self, y: npt.ArrayLike, n: int) -> npt.NDArray[np.float64]:  # noqa: D102
        lower, upper = self.valid_region(n)
        value = np.clip(np.asarray(y, dtype=np.float64).reshape(-1), lower, upper)
        return value.reshape(self.stat_shape)
