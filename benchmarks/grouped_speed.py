"""Benchmark: grouped hierarchical models, pymc_dp's default node against a hand-written model.

Four families of grouped releases (``pmdp.release_grouped``, one release per group, records per
group drawn uniformly in 50–500), each fitted with the partially pooled, non-centred model of the
README ("Grouped releases") in two ways, in one process:

* **default**: ``pmdp.NoisySuffStat("y", dist, release=rs, dims="group")`` as a user writes it
  (``likelihood="auto"``), sampled by ``pm.sample()`` as it assigns steps;
* **hand**: the model a PyMC user writes without the plugin, with the same priors: a latent
  statistic s_g per group with the CLT mean and covariance of the released statistic, and
  ``pm.Laplace("y", s, Δ/ε, observed=...)`` (``pm.Normal`` for ``--mechanism gaussian``),
  sampled by NUTS. With ``--hierarchy fit`` the pymc_dp side is the model ``pymc-dp fit``
  builds, and the hand-written side takes its population priors (``--hand-priors``),
  non-centred, so that both fit one posterior. With ``--hierarchy centred`` both sides take
  the README's priors with each group's effect partially centred by
  ``pmdp.centring_weights(rs)`` (public values; the scale page's recipe), so that both fit
  one posterior again (the Categorical stays non-centred).

The families (θ_g the per-group parameter, ``mu``, ``tau`` the population ones):

=============  ======================================================  ========================
family         records, release                                        θ_g
=============  ======================================================  ========================
binomial       Binomial(3, p_g), Σx                                    logit p_g = mu + tau z_g
poisson        Poisson(λ_g) in the window (0, 40), Σx                  log λ_g = mu + tau z_g
normal         Normal(μ_g, σ) in a window of ±6 population sd, (Σx,    μ_g = mu + tau z_g; σ
               Σx²)                                                    shared (``--sigma``), or
                                                                       log σ_g = log_sigma +
                                                                       tau_sigma w_g
categorical    Categorical(p_g), K = 3 counts                          p_g = softmax(mu + tau z_g)
=============  ======================================================  ========================

The hand-written latent s uses the user's approximation: the untruncated moments of the record
(for the Normal family n·(μ, μ² + σ²) and n·Cov(x, x²); the windows are chosen wide, so
truncation is negligible), written as a chain of univariate normals (exactly the bivariate
normal, vectorised over groups), non-centred: s = mean + L·e with e ~ N(0, I), which mixed far
better than ``--latent centred`` (s ~ N(mean, LLᵀ) directly) in our runs at ε = 1.

``--count-share`` (``none`` by default, as ``pmdp.release_grouped``'s own default; ``auto`` is
the command line's default, 0.1 of ε) makes the Poisson releases also carry each group's noisy
in-window count, which the default node then uses with the sum (y = (window sum, window
count)). The hand-written model then gains the user's approximation of it: a latent count per
group, c_g ~ N(n·q_g, n·q_g(1 − q_g)) (non-centred like s, independent of s), with
q_g = P(lo ≤ x ≤ hi | λ_g) the window's mass under θ_g, and
``pm.Laplace("y_count", c_g, 1/ε_count, observed=...)``; the sum's ε is ε·(1 − share) on both
sides.

Two measurements:

1. **gradient**: seconds per logp + dlogp evaluation (``model.compile_logp`` and
   ``model.compile_dlogp``, called once each at ``model.initial_point()``, or with
   ``--gradient-call nuts`` the one function of both that NUTS calls, and with
   ``--gradient-point draws`` cycling over posterior draws of the model itself, from a short
   ``pm.sample`` of one chain, instead of its initial point; median over
   ``--repeats`` timings of a loop of at least 0.2 s) of the default node, of
   ``likelihood="clt"`` and of the hand-written model, at G ∈ ``--gradient-groups`` (one ε, the
   first of ``--epsilons``), with the ratios to the hand-written model, the time to build the
   model and to compile both functions. The ``likelihood`` column is what the node chose
   (``release_attrs``: ``pymc_dp_likelihood_y``).
2. **sampling**: min bulk ESS (ArviZ) over the population parameters and every θ_g, divided by
   the wall time of building the model and the whole ``pm.sample()`` call (compile, tuning and
   draws), for each family × G × ε and side, with the maximum R-hat over the same variables and
   the divergences after tuning. ``vs hand`` is default ESS/s over hand-written ESS/s.
   ``CPU s`` is the same span in the process's CPU time (every thread: with nutpie's chains in
   parallel it exceeds the wall time), and ``ESS/CPU s vs hand`` the ratio by it: on a machine
   shared with other jobs one side's wall time can grow by half while its CPU time does not.
   ``--nuts-sampler nutpie`` (or numpyro, blackjax) runs both sides through
   ``pm.sample(nuts_sampler=...)``; a side that fails records its one-line error in the table.
   With ``--split`` (nutpie only) each side calls ``nutpie.compile_pymc_model`` and
   ``nutpie.sample`` itself, and the table adds their seconds and the leapfrog steps per draw:
   at small G the compile is most of the call.

``--time-limit`` caps each measurement (one model's build, compile and timing, or one
``pm.sample`` call): a run that exceeds it becomes a row naming the phase it reached (with the
iterations done, for PyMC's sampler), so that one very slow model does not stall the grid.
Compile times depend on PyTensor's compile cache, which other processes may share and lock;
``PYTENSOR_FLAGS=base_compiledir=/tmp/some_dir`` gives the run a cache of its own.

The data are simulated from the hierarchical model itself at fixed population parameters
(``TRUTH``), with seeds fixed by ``--seed``, the family and G; releases are seeded studies
(``rng=``, floating-point Laplace noise). Gaussian-mechanism releases use OpenDP's discrete
Gaussian with ρ = ε²/2, which cannot be seeded. No timing is asserted: the script measures.

Usage::

    python benchmarks/grouped_speed.py                       # the full grid (hours)
    python benchmarks/grouped_speed.py --quick --epsilons 1  # a smoke run (G = 50, short chains)
    python benchmarks/grouped_speed.py --families binomial poisson --groups 50 --epsilons 0.1
    python benchmarks/grouped_speed.py --sections gradient --gradient-groups 1 50 500
    python benchmarks/grouped_speed.py --quick --nuts-sampler nutpie --output quick.md
    python benchmarks/grouped_speed.py --families poisson --count-share auto --groups 50
    python benchmarks/grouped_speed.py --quick --output quick.csv   # CSV, both tables
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import functools
import logging
import math
import platform
import signal
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import arviz as az
import numpy as np
import pymc as pm
import pytensor.tensor as pt

import pymc_dp as pmdp
from pymc_dp._compat import posterior_dataset
from pymc_dp.cli.sampling import jumping_nuts
from pymc_dp.model.nodes.info import LIKELIHOOD_ATTR_PREFIX, release_attrs

FAMILIES = ("binomial", "poisson", "normal", "categorical")
TRIALS = 3
CATEGORIES = 3
POISSON_WINDOW = (0.0, 40.0)
RECORDS = (50, 500)  # records per group, uniform on this range
# Population parameters the data are simulated from (the priors below cover them).
TRUTH = {
    "binomial": {"mu": -0.8, "tau": 0.5},
    "poisson": {"mu": math.log(5.0), "tau": 0.3},
    "normal": {"mu": 1.0, "tau": 1.0, "sigma": 2.0, "nu": math.log(2.0), "tau_sigma": 0.2},
    "categorical": {"mu": np.log([0.2, 0.5, 0.3]) - np.log([0.2, 0.5, 0.3]).mean(), "tau": 0.4},
}
# The Normal window: the population mean ± 6 sd of a record (√(tau² + σ²)), so that the
# hand-written model's untruncated moments are a fair approximation.
_HALF = 6 * math.hypot(TRUTH["normal"]["tau"], TRUTH["normal"]["sigma"])
NORMAL_WINDOW = (round(TRUTH["normal"]["mu"] - _HALF), round(TRUTH["normal"]["mu"] + _HALF))
QUICK_DRAWS = QUICK_TUNE = 300
QUICK_TIME_LIMIT = 300.0  # seconds per model and measurement under --quick
MIN_LOOP = 0.2  # seconds: each gradient timing runs the pair for at least this long
SIDES = ("default", "clt", "hand")


# ---- data and releases -------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Setting:
    """One grouped study: the family, the number of groups and the release's ε."""

    family: str
    groups: int
    epsilon: float
    mechanism: str = "laplace"
    sigma: str = "shared"  # the Normal family's σ: "shared" or "group"
    seed: int = 0
    count_share: float | str | None = None  # release_grouped's count_share (Poisson only)

    @property
    def keys(self) -> list[str]:
        return [f"g{g:03d}" for g in range(self.groups)]


def simulate(setting: Setting) -> tuple[np.ndarray, np.ndarray]:
    """Records and their group keys, drawn from the hierarchical model at ``TRUTH``."""
    rng = np.random.default_rng([setting.seed, FAMILIES.index(setting.family), setting.groups])
    size = setting.groups
    sizes = rng.integers(RECORDS[0], RECORDS[1] + 1, size=size)
    by = np.repeat(setting.keys, sizes)
    truth = TRUTH[setting.family]
    if setting.family == "categorical":
        z = rng.normal(size=(size, CATEGORIES))
        z -= z.mean(axis=1, keepdims=True)
        logits = truth["mu"] + truth["tau"] * z
        p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        x = np.concatenate([rng.choice(CATEGORIES, size=n, p=p_g) for n, p_g in zip(sizes, p)])
        return x, by
    theta = truth["mu"] + truth["tau"] * rng.normal(size=size)
    if setting.family == "binomial":
        x = rng.binomial(TRIALS, np.repeat(1 / (1 + np.exp(-theta)), sizes))
    elif setting.family == "poisson":
        x = rng.poisson(np.repeat(np.exp(theta), sizes))
    else:
        sigma = np.full(size, truth["sigma"])
        if setting.sigma == "group":
            sigma = np.exp(truth["nu"] + truth["tau_sigma"] * rng.normal(size=size))
        x = rng.normal(np.repeat(theta, sizes), np.repeat(sigma, sizes))
    return x, by


def make_release(setting: Setting) -> Any:
    """The grouped release (a ``pmdp.ReleaseSet``) of ``setting``'s simulated records."""
    x, by = simulate(setting)
    if setting.mechanism == "gaussian":
        noise = {"mechanism": "discrete-gaussian", "rho": setting.epsilon**2 / 2}
    else:
        noise_seed = [setting.seed, FAMILIES.index(setting.family), setting.groups, 1]
        noise = {"epsilon": setting.epsilon, "rng": np.random.default_rng(noise_seed)}
    family, settings = {
        "binomial": (pm.Binomial, {"trials": TRIALS}),
        "poisson": (pm.Poisson, {"bounds": POISSON_WINDOW, "count_share": setting.count_share}),
        "normal": (pm.Normal, {"bounds": NORMAL_WINDOW}),
        "categorical": (pm.Categorical, {"categories": CATEGORIES}),
    }[setting.family]
    return pmdp.release_grouped(
        x, family, by=by, groups=setting.keys, sizes="public", **noise, **settings
    )


# ---- the hierarchy, identical on both sides ----------------------------------------------
README_PRIORS: dict[str, dict[str, float]] = {
    "binomial": {"mu_mean": 0.0, "mu_sd": 1.5, "tau_sd": 1.0},
    "poisson": {"mu_mean": 1.5, "mu_sd": 1.0, "tau_sd": 0.5},
    "categorical": {"mu_sd": 1.5, "tau_sd": 1.0},
    "normal": {
        "mu_mean": 0.0,
        "mu_sd": 5.0,
        "tau_sd": 2.5,
        "log_sigma_mean": 0.5,
        "log_sigma_sd": 1.0,
        "tau_sigma_sd": 0.5,
    },
}
"""The README hierarchy's population priors, on the names of ``pmdp.build_grouped_model``."""


def hierarchy(
    setting: Setting, values: dict[str, float] | None = None, weights: np.ndarray | None = None
) -> dict[str, Any]:
    """Add the priors and θ_g to the model on the context stack; return θ_g by name.

    Non-centred (``weights=None``), or each group's effect (the Normal's μ_g) centred by its
    weight in [0, 1] (``pmdp.centring_weights``, from public values), as the scale page
    shows a user: the same prior of θ_g, so the same posterior. ``values``: the population
    priors' hyperparameters (:data:`README_PRIORS` by default; ``pmdp``'s
    ``grouped_prior_hyperparameters`` for the hand-written twin of ``pymc-dp fit``'s model).
    The names returned, with the population parameters of :func:`monitored`, are the
    variables whose ESS and R-hat are reported.
    """
    family = setting.family
    v = README_PRIORS[family] if values is None else values
    if family == "categorical":
        mu = pm.ZeroSumNormal("mu", sigma=v["mu_sd"], dims="category")
        tau = pm.HalfNormal("tau", v["tau_sd"])
        z = pm.ZeroSumNormal("z", sigma=1.0, dims=("group", "category"))
        logits = pt.specify_shape(mu + tau * z, (setting.groups, CATEGORIES))
        return {
            "p": pm.Deterministic("p", pm.math.softmax(logits, axis=-1), dims=("group", "category"))
        }
    mu = pm.Normal("mu", v["mu_mean"], v["mu_sd"])
    tau = pm.HalfNormal("tau", v["tau_sd"])
    if weights is None:
        eta = mu + tau * pm.Normal("z", 0.0, 1.0, dims="group")
    else:  # z_g ~ N(w_g μ, τ^(2 w_g)), η_g = μ + τ^(1 − w_g)(z_g − w_g μ): η_g ~ N(μ, τ²)
        z = pm.Normal("z", weights * mu, tau**weights, dims="group")
        eta = mu + tau ** (1 - weights) * (z - weights * mu)
    if family == "normal":
        mu_g = pm.Deterministic("mu_g", eta, dims="group")
        if setting.sigma == "group":
            log_sigma = pm.Normal("log_sigma", v["log_sigma_mean"], v["log_sigma_sd"])
            tau_sigma = pm.HalfNormal("tau_sigma", v["tau_sigma_sd"])
            w = pm.Normal("w", 0.0, 1.0, dims="group")
            sigma = pm.Deterministic(
                "sigma_g", pm.math.exp(log_sigma + tau_sigma * w), dims="group"
            )
            return {"mu_g": mu_g, "sigma_g": sigma}
        return {"mu_g": mu_g, "sigma": pm.HalfNormal("sigma", 5.0)}
    if family == "binomial":
        return {"p": pm.Deterministic("p", pm.math.invlogit(eta), dims="group")}
    return {"lam": pm.Deterministic("lam", pm.math.exp(eta), dims="group")}


def readme_weights(setting: Setting, rs: Any, hierarchy: str) -> np.ndarray | None:
    """The centring weights of ``--hierarchy centred`` (``None``: non-centred).

    ``pmdp.centring_weights`` at the README prior's τ scale; the Categorical keeps its
    non-centred ``ZeroSumNormal`` (one weight per group cannot centre a vector effect).
    """
    if hierarchy != "centred" or setting.family == "categorical":
        return None
    return pmdp.centring_weights(rs, tau_sd=README_PRIORS[setting.family]["tau_sd"])


def monitored(setting: Setting, hierarchy: str = "readme") -> list[str]:
    """Population parameters and θ_g: the variables of the ESS and R-hat columns.

    ``hierarchy="fit"``: those of ``pmdp.build_grouped_model`` (the Normal's σ_g always per
    group, through ``log_sigma`` and ``tau_sigma``).
    """
    if setting.family == "normal" and hierarchy == "fit":
        return ["mu", "tau", "log_sigma", "tau_sigma", "mu_g", "sigma_g"]
    if setting.family == "normal":
        if setting.sigma == "group":
            return ["mu", "tau", "log_sigma", "tau_sigma", "mu_g", "sigma_g"]
        return ["mu", "tau", "sigma", "mu_g"]
    return ["mu", "tau", {"binomial": "p", "poisson": "lam", "categorical": "p"}[setting.family]]


def _coords(setting: Setting) -> dict[str, list]:
    coords = {"group": setting.keys}
    if setting.family == "categorical":
        coords["category"] = list(range(CATEGORIES))
    if setting.family == "normal":
        coords["stat"] = ["sum_x", "sum_x2"]
    return coords


def default_model(
    setting: Setting, rs: Any, likelihood: str = "auto", weights: np.ndarray | None = None
) -> pm.Model:
    """The model as the README writes it: θ_g and one ``NoisySuffStat`` node for the set."""
    with pm.Model(coords=_coords(setting)) as model:
        theta = hierarchy(setting, weights=weights)
        dist = {
            "binomial": lambda: pm.Binomial.dist(n=TRIALS, p=theta.get("p")),
            "poisson": lambda: pm.Poisson.dist(mu=theta.get("lam")),
            "categorical": lambda: pm.Categorical.dist(p=theta.get("p")),
            "normal": lambda: pm.Normal.dist(
                mu=theta["mu_g"], sigma=theta.get("sigma_g", theta.get("sigma"))
            ),
        }[setting.family]()
        pmdp.NoisySuffStat("y", dist, release=rs, dims="group", likelihood=likelihood)
    return model


# ---- the hand-written models ---------------------------------------------------------------
def hand_written_model(
    setting: Setting,
    rs: Any,
    latent: str = "noncentred",
    priors: str = "readme",
    weights: np.ndarray | None = None,
) -> pm.Model:
    """What a PyMC user writes without the plugin: θ_g, a latent CLT s_g, y ~ noise(s_g).

    ``priors="fit"``: the population priors ``pymc-dp fit`` takes from the release's public
    window and categories (``grouped_prior_hyperparameters``), so that both sides fit one
    posterior; the parametrisation stays non-centred, as a user writes it, unless
    ``weights`` centre it (:func:`hierarchy`).
    """
    n = np.asarray(rs.n, dtype=np.float64)
    y = np.asarray(rs.value, dtype=np.float64)
    scale = float(rs.first.scale)  # Δ/ε, or the Gaussian mechanism's sd
    noise = pm.Normal if setting.mechanism == "gaussian" else pm.Laplace
    values = None
    if priors == "fit":
        from pymc_dp.model.hierarchical import grouped_prior_hyperparameters

        values = grouped_prior_hyperparameters(rs)
    with pm.Model(coords=_coords(setting)) as model:
        theta = hierarchy(setting, values, weights)
        if setting.family in ("binomial", "poisson"):
            if setting.family == "binomial":
                p = theta["p"]
                mean, sd = n * TRIALS * p, pm.math.sqrt(n * TRIALS * p * (1 - p))
            else:
                mean = n * theta["lam"]
                sd = pm.math.sqrt(mean)
            s = _latent_normal("s", mean, sd, latent, dims="group")
            noise("y", s, scale, observed=y.reshape(-1), dims="group")
            if rs.window_count is not None:
                _latent_window_count(theta["lam"], n, rs, latent)
            return model
        if setting.family == "normal":
            mu = theta["mu_g"]
            sigma = theta.get("sigma_g", theta.get("sigma"))
            # Σx ~ N(nμ, nσ²); Σx² | Σx ~ N(n(μ² + σ²) + 2μ(Σx − nμ), 2nσ⁴): the bivariate
            # normal of n·(x, x²) (Cov(x, x²) = 2μσ², Var(x²) = 2σ⁴ + 4μ²σ²).
            mean1, sd1 = n * mu, pm.math.sqrt(n) * sigma
            mean2, slope, sd2 = n * (mu**2 + sigma**2), 2 * mu, pm.math.sqrt(2 * n) * sigma**2
        else:
            # Counts (s1, s2, n − s1 − s2): s1 ~ N(np1, np1(1 − p1)); s2 | s1 ~
            # N(np2 − p2/(1 − p1)·(s1 − np1), np2p3/(1 − p1)), the CLT of the multinomial.
            p = theta["p"]
            p1, p2, p3 = p[:, 0], p[:, 1], p[:, 2]
            mean1, sd1 = n * p1, pm.math.sqrt(n * p1 * (1 - p1))
            mean2, slope, sd2 = n * p2, -p2 / (1 - p1), pm.math.sqrt(n * p2 * p3 / (1 - p1))
        s1 = _latent_normal("s1", mean1, sd1, latent, dims="group")
        s2 = _latent_normal("s2", mean2 + slope * (s1 - mean1), sd2, latent, dims="group")
        if setting.family == "normal":
            s = pt.stack([s1, s2], axis=-1)
            noise("y", s, scale, observed=y, dims=("group", "stat"))
        else:
            s = pt.stack([s1, s2, n - s1 - s2], axis=-1)
            noise("y", s, scale, observed=y, dims=("group", "category"))
    return model


def _latent_window_count(lam: Any, n: np.ndarray, rs: Any, latent: str) -> None:
    """The released in-window counts: c_g ~ N(n·q, n·q(1 − q)), Laplace(c_g, 1/ε_count) noise.

    q = P(lo ≤ x ≤ hi | λ_g) of the Poisson window, from its two tails (regularised incomplete
    gamma functions), so that 1 − q keeps its digits where the window holds nearly all the mass.
    """
    lo, hi = POISSON_WINDOW
    below = pt.gammaincc(lo, lam) if lo > 0 else pt.zeros_like(lam)  # P(x < lo)
    above = pt.gammainc(hi + 1.0, lam)  # P(x > hi)
    q = 1.0 - below - above
    sd = pm.math.sqrt(n * q * (below + above))
    count = _latent_normal("c", n * q, sd, latent, dims="group")
    pm.Laplace("y_count", count, rs.first.count_scale, observed=rs.window_count, dims="group")


def _latent_normal(name: str, mean: Any, sd: Any, latent: str, *, dims: str) -> Any:
    """s ~ N(mean, sd²), centred, or non-centred as mean + sd·e (then a Deterministic)."""
    if latent == "centred":
        return pm.Normal(name, mean, sd, dims=dims)
    e = pm.Normal(f"{name}_e", 0.0, 1.0, dims=dims)
    return pm.Deterministic(name, mean + sd * e, dims=dims)


def build(
    setting: Setting,
    rs: Any,
    side: str,
    latent: str,
    hierarchy: str = "readme",
    hand_priors: str | None = None,
) -> pm.Model:
    weights = readme_weights(setting, rs, hierarchy)
    if side == "hand":
        return hand_written_model(setting, rs, latent, hand_priors or hierarchy, weights)
    likelihood = "clt" if side == "clt" else "auto"
    if hierarchy == "fit":  # the model `pymc-dp fit` builds (its own priors and parametrisation)
        from pymc_dp.model.hierarchical import build_grouped_model

        return build_grouped_model(rs, likelihood=likelihood)
    return default_model(setting, rs, likelihood, weights)


def likelihood_of(model: pm.Model) -> str:
    """The likelihood the ``NoisySuffStat`` node chose ("exact", "clt"), or "-" for none."""
    return release_attrs(model).get(f"{LIKELIHOOD_ATTR_PREFIX}y", "-")


def one_line(err: BaseException) -> str:
    # The time limit's SIGALRM handler runs when a compiled (Numba) call returns, and CPython
    # then reports "returned a result with an exception set", a SystemError caused by it.
    if isinstance(err, SystemError) and isinstance(err.__cause__, TimeLimit):
        err = err.__cause__
    text = " ".join(str(err).split()) or "(no message)"
    text = text if isinstance(err, TimeLimit) else f"{type(err).__name__}: {text}"
    return text if len(text) <= 160 else text[:157] + "..."


def _compiling() -> bool:
    """Whether PyTensor holds, or is acquiring, its compile-directory lock in this thread.

    An exception raised inside ``lock_ctx`` while it acquires the lock would leave its
    bookkeeping claiming the lock, and later compilations would then skip locking a directory
    that other processes share; so the time limit waits until the lock is released.
    """
    from pytensor.compile import compilelock

    return bool(getattr(getattr(compilelock, "local_mem", None), "_locks", None))


class TimeLimit(BaseException):
    """``--time-limit`` ran out (a BaseException, so that no library handler swallows it)."""


@contextlib.contextmanager
def time_limit(seconds: float | None, progress: dict[str, Any]) -> Iterator[None]:
    """Raise :class:`TimeLimit` after ``seconds`` of wall time, naming ``progress["phase"]``.

    SIGALRM is handled between Python bytecodes, so a long C call (one logp evaluation, a C
    compiler run) finishes first; the main thread only (the script runs there).
    """
    if not seconds:
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        if _compiling():  # never leave PyTensor's shared compile cache half written
            signal.setitimer(signal.ITIMER_REAL, 0.5)
            return
        raise TimeLimit(f"time limit {seconds:g} s reached while {progress['phase']}")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# ---- 1. per-gradient cost ----------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class GradientRow:
    """Cost of one logp + dlogp evaluation of one model."""

    family: str
    groups: int
    epsilon: float
    side: str
    likelihood: str = "-"
    build_s: float = math.nan
    compile_s: float = math.nan
    eval_us: float = math.nan  # microseconds per logp + dlogp, median of the repeats
    point: str = "initial"  # where: the initial point, or posterior draws
    vs_hand: float = math.nan
    error: str = ""


def per_evaluation(func: Callable[[], Any], repeats: int) -> float:
    """Median over ``repeats`` of the seconds per call, each timed over a loop ≥ MIN_LOOP s."""
    func()
    loops, elapsed = 1, 0.0
    while True:  # timeit's autorange: grow the loop until it runs long enough
        start = time.perf_counter()
        for _ in range(loops):
            func()
        elapsed = time.perf_counter() - start
        if elapsed >= MIN_LOOP:
            break
        loops *= 2 if elapsed > MIN_LOOP / 10 else 10
    times = [elapsed / loops]
    for _ in range(repeats - 1):
        start = time.perf_counter()
        for _ in range(loops):
            func()
        times.append((time.perf_counter() - start) / loops)
    return statistics.median(times)


def jax_logp_gradient(model: pm.Model) -> Callable[[], Any]:
    """The function NumPyro and BlackJAX call: JAX's value and gradient of the jaxified log
    density, jitted, at the initial point (each call waits for its result)."""
    import jax
    from pymc.sampling.jax import get_jaxified_logp

    jax.config.update("jax_enable_x64", True)
    value_and_grad = jax.jit(jax.value_and_grad(get_jaxified_logp(model)))
    point = model.initial_point()
    x = [point[v.name] for v in model.value_vars]
    return lambda: jax.block_until_ready(value_and_grad(x))


def gradient_cost(setting: Setting, rs: Any, side: str, args: argparse.Namespace) -> GradientRow:
    base = {"family": setting.family, "groups": setting.groups, "epsilon": setting.epsilon}
    progress = {"phase": "building the model"}
    likelihood = "-"
    try:
        with warnings.catch_warnings(), time_limit(args.time_limit, progress):
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            model = build(setting, rs, side, args.latent, args.hierarchy, args.hand_priors)
            built = time.perf_counter() - start
            if side != "hand":
                likelihood = likelihood_of(model)
            progress["phase"] = f"compiling logp and dlogp (build {built:.0f} s)"
            evaluations = 1  # per timed call
            if args.gradient_mode == "JAX":
                call = jax_logp_gradient(model)
            elif args.gradient_call == "nuts":  # the one function of both that NUTS calls
                func = model.logp_dlogp_function(ravel_inputs=True, mode=args.gradient_mode)
                func.set_extra_values({})
                x = np.concatenate([np.ravel(v) for v in model.initial_point().values()])
                call = functools.partial(func, x)
            else:
                logp, dlogp = model.compile_logp(), model.compile_dlogp()
                point = model.initial_point()
                call = lambda: (logp(point), dlogp(point))  # noqa: E731
            call()  # compiled: the C backend compiles at the first call
            compiled = time.perf_counter() - start - built
            if args.gradient_call == "nuts" and args.gradient_point == "draws":
                progress["phase"] = "drawing posterior points"
                points = posterior_points(model, args.seed)
                call = functools.partial(_cycle, func, points)
                evaluations = len(points)
            progress["phase"] = f"timing logp + dlogp (compile {compiled:.0f} s)"
            seconds = per_evaluation(call, args.repeats) / evaluations
    except (Exception, TimeLimit) as err:  # record the failure and go on
        return GradientRow(**base, side=side, likelihood=likelihood, error=one_line(err))
    return GradientRow(
        **base,
        side=side,
        likelihood=likelihood,
        build_s=built,
        compile_s=compiled,
        eval_us=seconds * 1e6,
        point=args.gradient_point if args.gradient_call == "nuts" else "initial",
    )


DRAW_POINTS = 20  # posterior draws the ``--gradient-point draws`` timing cycles over


def posterior_points(model: pm.Model, seed: int) -> list[np.ndarray]:
    """Raveled unconstrained points of a short NUTS run (one chain, 300 tuning steps)."""
    with model:
        trace = pm.sample(
            draws=DRAW_POINTS,
            tune=300,
            chains=1,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
            idata_kwargs={"include_transformed": True},  # the value variables, as NUTS sees them
        )
    post = trace.posterior.isel(chain=0)
    names = list(model.initial_point())
    return [
        np.concatenate([np.ravel(post[name].values[i]) for name in names])
        for i in range(post.sizes["draw"])
    ]


def _cycle(func: Callable[[np.ndarray], Any], points: Sequence[np.ndarray]) -> None:
    """One evaluation at each point: a timed call of it costs len(points) evaluations."""
    for x in points:
        func(x)


# ---- 2. effective samples per second -----------------------------------------------------
@dataclasses.dataclass(frozen=True)
class SampleRow:
    """One ``pm.sample`` call: wall time, min bulk ESS, max R-hat and divergences."""

    family: str
    groups: int
    epsilon: float
    side: str
    sampler: str
    likelihood: str = "-"
    seconds: float = math.nan  # build + pm.sample (compile, tuning, draws)
    # The same span in this process's CPU time (all its threads): on a shared machine the
    # wall time of a side grows with other jobs' load, its CPU time much less.
    cpu_seconds: float = math.nan
    ess_bulk: float = math.nan  # min over the monitored variables
    rhat: float = math.nan  # max over the monitored variables
    divergences: int | None = None
    # With --split (nutpie): the call's parts, and leapfrog steps per draw after tuning.
    compile_seconds: float = math.nan
    sampling_seconds: float = math.nan
    steps_per_draw: float = math.nan
    vs_hand: float = math.nan
    cpu_vs_hand: float = math.nan
    error: str = ""

    @property
    def ess_per_s(self) -> float:
        return self.ess_bulk / self.seconds

    @property
    def ess_per_cpu_s(self) -> float:
        return self.ess_bulk / self.cpu_seconds


def sample_side(setting: Setting, rs: Any, side: str, args: argparse.Namespace) -> SampleRow:
    base = {
        "family": setting.family,
        "groups": setting.groups,
        "epsilon": setting.epsilon,
        "side": side,
        "sampler": args.nuts_sampler,
    }
    likelihood = "-"
    total = (args.draws + args.tune) * args.chains
    progress: dict[str, Any] = {"phase": "building the model", "done": 0}

    def count(trace: Any, draw: Any) -> None:
        progress["done"] += 1
        progress["phase"] = f"sampling ({progress['done']}/{total} iterations done)"

    extra = {"callback": count} if args.nuts_sampler == "pymc" else {}
    try:
        with warnings.catch_warnings(), time_limit(args.time_limit, progress):
            warnings.simplefilter("ignore")
            start, cpu_start = time.perf_counter(), time.process_time()
            model = build(setting, rs, side, args.latent, args.hierarchy, args.hand_priors)
            if side != "hand":
                likelihood = likelihood_of(model)
            progress["phase"] = "compiling or starting to sample"
            seed: Any = args.seed
            if side != "hand" and args.hierarchy == "fit" and args.nuts_sampler == "pymc":
                # As `pymc-dp fit` samples: NUTS, then group jumps where the family has a window.
                seed = np.random.default_rng(args.seed).integers(2**30, size=args.chains).tolist()
                extra.update(jumping_nuts(args, model, seed))
            parts: dict[str, float] = {}
            if args.split:
                idata, parts = nutpie_split(model, args)
            else:
                with model:
                    idata = pm.sample(
                        draws=args.draws,
                        tune=args.tune,
                        chains=args.chains,
                        cores=args.cores,
                        random_seed=seed,
                        nuts_sampler=args.nuts_sampler,
                        progressbar=False,
                        compute_convergence_checks=False,
                        **extra,
                    )
            seconds = time.perf_counter() - start
            cpu_seconds = time.process_time() - cpu_start
            if args.save_traces is not None:  # for a look at the chains afterwards
                args.save_traces.mkdir(parents=True, exist_ok=True)
                label = f"{setting.family}_G{setting.groups}_eps{setting.epsilon:g}_{side}"
                idata.to_netcdf(args.save_traces / f"{label}.nc")
            # The hand-written model names its variables as the README hierarchy does (the
            # same names as fit's where σ_g is per group; σ shared has no log_sigma).
            names = monitored(setting, "readme" if side == "hand" else args.hierarchy)
            post = posterior_dataset(idata)[names]
            ess = az.ess(post, method="bulk")
            rhat = az.rhat(post)
    except (Exception, TimeLimit) as err:  # a side that fails is a row, not a crash
        return SampleRow(**base, likelihood=likelihood, error=one_line(err))
    stats = idata["sample_stats"] if not hasattr(idata, "sample_stats") else idata.sample_stats
    diverging = stats["diverging"] if "diverging" in stats else None
    return SampleRow(
        **base,
        likelihood=likelihood,
        seconds=seconds,
        cpu_seconds=cpu_seconds,
        ess_bulk=min(float(np.min(ess[v].values)) for v in ess.data_vars),
        rhat=max(float(np.max(rhat[v].values)) for v in rhat.data_vars),
        divergences=None if diverging is None else int(np.asarray(diverging).sum()),
        **parts,
    )


def nutpie_split(model: pm.Model, args: argparse.Namespace) -> tuple[Any, dict[str, float]]:
    """``--split``: the trace, and nutpie's compile and sampling seconds and steps per draw.

    What ``pm.sample(nuts_sampler="nutpie")`` does in one call, as two: where a side's wall
    time goes (at small G the compile is most of it).
    """
    import nutpie

    start = time.perf_counter()
    compiled = nutpie.compile_pymc_model(model)
    compile_seconds = time.perf_counter() - start
    start = time.perf_counter()
    idata = nutpie.sample(
        compiled,
        draws=args.draws,
        tune=args.tune,
        chains=args.chains,
        seed=args.seed,
        progress_bar=False,
    )
    return idata, {
        "compile_seconds": compile_seconds,
        "sampling_seconds": time.perf_counter() - start,
        "steps_per_draw": float(np.mean(idata.sample_stats["n_steps"].values)),
    }


# ---- tables ------------------------------------------------------------------------------
GRADIENT_COLUMNS = {
    "family": "family",
    "groups": "G",
    "epsilon": "ε",
    "side": "side",
    "likelihood": "likelihood",
    "build_s": "build s",
    "compile_s": "compile s",
    "eval_us": "logp+dlogp µs",
    "point": "at",
    "vs_hand": "vs hand",
    "error": "error",
}
SAMPLE_COLUMNS = {
    "family": "family",
    "groups": "G",
    "epsilon": "ε",
    "side": "side",
    "sampler": "sampler",
    "likelihood": "likelihood",
    "seconds": "wall s",
    "ess_bulk": "min ESS bulk",
    "ess_per_s": "ESS/s",
    "rhat": "max R-hat",
    "divergences": "div.",
    "compile_seconds": "compile s",
    "sampling_seconds": "sampling s",
    "steps_per_draw": "steps/draw",
    "vs_hand": "ESS/s vs hand",
    "cpu_seconds": "CPU s",
    "cpu_vs_hand": "ESS/CPU s vs hand",
    "error": "error",
}


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        if abs(value) >= 100:
            return f"{value:.0f}"
        return f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"
    return str(value).replace("|", "/")


def markdown(rows: Sequence[Any], columns: dict[str, str]) -> str:
    lines = [
        "| " + " | ".join(columns.values()) + " |",
        "|" + "|".join("---" for _ in columns) + "|",
    ]
    for row in rows:
        lines.append("| " + " | ".join(_cell(getattr(row, key)) for key in columns) + " |")
    return "\n".join(lines)


def with_ratios(
    rows: list[Any], measure: Callable[[Any], float], field: str = "vs_hand"
) -> list[Any]:
    """Fill ``field``: each row's ``measure`` over the hand-written model's, same setting."""
    hand = {(r.family, r.groups, r.epsilon): measure(r) for r in rows if r.side == "hand"}
    out = []
    for r in rows:
        ref = hand.get((r.family, r.groups, r.epsilon), math.nan)
        out.append(dataclasses.replace(r, **{field: measure(r) / ref if ref else math.nan}))
    return out


def write_output(path: Path, gradient: list[GradientRow], sampling: list[SampleRow]) -> None:
    if path.suffix.lower() == ".csv":
        fields = ["table", *dict.fromkeys([*GRADIENT_COLUMNS, *SAMPLE_COLUMNS])]
        with path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=fields)
            writer.writeheader()
            for table, rows, columns in (
                ("gradient", gradient, GRADIENT_COLUMNS),
                ("sampling", sampling, SAMPLE_COLUMNS),
            ):
                for row in rows:
                    writer.writerow({"table": table, **{k: getattr(row, k) for k in columns}})
        return
    parts = []
    if gradient:
        parts += ["## logp + dlogp per evaluation", "", markdown(gradient, GRADIENT_COLUMNS), ""]
    if sampling:
        parts += ["## ESS per second of pm.sample", "", markdown(sampling, SAMPLE_COLUMNS), ""]
    path.write_text("\n".join(parts))


# ---- driver ------------------------------------------------------------------------------
def _count_share(text: str) -> float | str | None:
    """``--count-share``: ``none``, ``auto`` or a share in (0, 1)."""
    if text in ("none", "auto"):
        return None if text == "none" else text
    share = float(text)
    if not 0 < share < 1:
        raise argparse.ArgumentTypeError(f"a share lies in (0, 1) (got {text})")
    return share


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    parser.add_argument(
        "--groups", type=int, nargs="+", default=None, help="G of the sampling runs (50 500)"
    )
    parser.add_argument(
        "--gradient-groups",
        type=int,
        nargs="+",
        default=None,
        help="G of the gradient timings (1 50 500)",
    )
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.1, 1.0])
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument(
        "--cores", type=int, default=1, help="pm.sample's cores (1: chains in this process)"
    )
    parser.add_argument(
        "--nuts-sampler", default="pymc", choices=("pymc", "nutpie", "numpyro", "blackjax")
    )
    parser.add_argument("--mechanism", choices=("laplace", "gaussian"), default="laplace")
    parser.add_argument(
        "--count-share",
        type=_count_share,
        default=None,
        help="pmdp.release_grouped's count_share for the Poisson releases: none (the Python "
        "API's default: sums alone), auto (the command line's default: 0.1 of ε on each "
        "group's in-window count), or a share in (0, 1)",
    )
    parser.add_argument(
        "--sigma",
        choices=("shared", "group"),
        default="shared",
        help="the Normal family's σ: one shared σ, or a hierarchical σ_g",
    )
    parser.add_argument(
        "--latent",
        choices=("centred", "noncentred"),
        default="noncentred",
        help="parametrisation of the hand-written model's latent s",
    )
    parser.add_argument(
        "--sections", nargs="+", choices=("gradient", "sampling"), default=["gradient", "sampling"]
    )
    parser.add_argument(
        "--hierarchy",
        choices=("readme", "centred", "fit"),
        default="readme",
        help="the pymc_dp sides' population model: the README's non-centred one, the same "
        "partially centred by pmdp.centring_weights on both sides (not the Categorical), or "
        "pmdp.build_grouped_model's (what `pymc-dp fit` samples, partially centred, with its own "
        "priors; for the Normal family, with σ_g per group, pair it with --sigma group)",
    )
    parser.add_argument(
        "--hand-priors",
        choices=("readme", "fit"),
        default=None,
        help="the hand-written model's population priors: the README's, or those "
        "`pymc-dp fit` takes from the public window (default: --hierarchy's, so that both "
        "sides fit one posterior; --hand-priors readme with --hierarchy fit gives the runs "
        "before 2026-12-01, whose hand-written side had the README's narrower priors)",
    )
    parser.add_argument(
        "--sampling-sides",
        nargs="+",
        choices=SIDES,
        default=["default", "hand"],
        help="models of the sampling runs (clt: the default node with likelihood='clt')",
    )
    parser.add_argument("--repeats", type=int, default=7, help="gradient timings (median)")
    parser.add_argument(
        "--gradient-call",
        choices=("pair", "nuts"),
        default="pair",
        help="time PyMC's separately compiled logp and dlogp (pair), or the one function of "
        "both that NUTS calls (nuts: model.logp_dlogp_function, without the pair's Python "
        "overhead of about 80 µs)",
    )
    parser.add_argument(
        "--gradient-mode",
        choices=("FAST_RUN", "NUMBA", "JAX"),
        default=None,
        help="with --gradient-call nuts: the PyTensor mode of the compiled function (FAST_RUN: "
        "the C backend; NUMBA: nutpie's; default: PyMC's); JAX: the jitted value and gradient "
        "NumPyro and BlackJAX call (JAX's autodiff of the jaxified log density)",
    )
    parser.add_argument(
        "--gradient-point",
        choices=("initial", "draws"),
        default="initial",
        help="with --gradient-call nuts: time at the model's initial point, or cycling over "
        f"{DRAW_POINTS} posterior draws of a short one-chain pm.sample of the model itself "
        "(where the data, not the initial point, set the likelihood's branches)",
    )
    parser.add_argument(
        "--time-limit",
        type=float,
        default=None,
        help="seconds of wall time per model and measurement (build, compile and timing, or "
        "the whole pm.sample call); a run that exceeds it is a row with the phase it reached "
        "(default: none; 300 with --quick)",
    )
    parser.add_argument(
        "--split",
        action="store_true",
        help="with --nuts-sampler nutpie: call nutpie.compile_pymc_model and nutpie.sample "
        "instead of pm.sample, and report their seconds apart, with leapfrog steps per draw",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, help="also write the tables (.md or .csv)")
    parser.add_argument(
        "--save-traces", type=Path, help="write each pm.sample's InferenceData (netCDF) here"
    )
    parser.add_argument(
        "--quick", action="store_true", help="G = 50 only and short chains: a smoke run"
    )
    args = parser.parse_args(argv)
    if args.split and args.nuts_sampler != "nutpie":
        parser.error("--split times nutpie's compile and sampling: give --nuts-sampler nutpie")
    if args.quick:
        args.draws, args.tune = QUICK_DRAWS, QUICK_TUNE
        args.time_limit = args.time_limit or QUICK_TIME_LIMIT
    default_groups = [50] if args.quick else None
    args.groups = args.groups or default_groups or [50, 500]
    args.gradient_groups = args.gradient_groups or default_groups or [1, 50, 500]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.getLogger("pymc").setLevel(logging.ERROR)
    logging.getLogger("pytensor").setLevel(logging.ERROR)
    print(
        f"Grouped hierarchical models: pymc_dp default vs hand-written latent model; "
        f"{args.mechanism} noise, Normal σ {args.sigma}, hand-written s {args.latent}, "
        f"Poisson count_share {args.count_share}\n"
        f"sampling: {args.chains} chains, cores={args.cores}, tune={args.tune}, "
        f"draws={args.draws}, nuts_sampler={args.nuts_sampler}\n"
        f"Python {platform.python_version()}, PyMC {pm.__version__}, ArviZ {az.__version__}\n",
        flush=True,
    )
    common = {
        "mechanism": args.mechanism,
        "sigma": args.sigma,
        "seed": args.seed,
        "count_share": args.count_share,
    }
    # PyTensor loads its compiled-module cache, and Numba its compiled functions, once per
    # process (seconds): pay that here, on both sides and with the sampler timed, rather than in
    # whichever model is timed first.
    warm = Setting("binomial", 3, 1.0, **{**common, "count_share": None})
    warm_rs = make_release(warm)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for warm_model in (default_model(warm, warm_rs), hand_written_model(warm, warm_rs)):
            with warm_model:
                pm.sample(
                    draws=10,
                    tune=10,
                    chains=1,
                    progressbar=False,
                    random_seed=0,
                    nuts_sampler=args.nuts_sampler,
                )

    gradient: list[GradientRow] = []
    if "gradient" in args.sections:
        eps = args.epsilons[0]
        for family in args.families:
            for size in args.gradient_groups:
                setting = Setting(family, size, eps, **common)
                rs = make_release(setting)
                for side in SIDES:
                    gradient.append(gradient_cost(setting, rs, side, args))
                    print(f"  gradient {family} G={size} {side}: done", file=sys.stderr, flush=True)
        gradient = with_ratios(gradient, lambda r: r.eval_us)
        print(f"## logp + dlogp per evaluation (ε = {eps:g}; vs hand = time / hand-written's)\n")
        print(markdown(gradient, GRADIENT_COLUMNS) + "\n", flush=True)

    sampling: list[SampleRow] = []
    if "sampling" in args.sections:
        for family in args.families:
            for size in args.groups:
                for eps in args.epsilons:
                    setting = Setting(family, size, eps, **common)
                    rs = make_release(setting)
                    for side in args.sampling_sides:
                        row = sample_side(setting, rs, side, args)
                        sampling.append(row)
                        print(
                            f"  sample {family} G={size} ε={eps:g} {side}: "
                            f"{row.error or f'{row.seconds:.1f} s, ESS {row.ess_bulk:.0f}'}",
                            file=sys.stderr,
                            flush=True,
                        )
        sampling = with_ratios(sampling, lambda r: r.ess_per_s)
        sampling = with_ratios(sampling, lambda r: r.ess_per_cpu_s, "cpu_vs_hand")
        print("## ESS per second of build + pm.sample (vs hand = ESS/s / hand-written's)\n")
        print(markdown(sampling, SAMPLE_COLUMNS) + "\n", flush=True)
    print(
        "min ESS bulk: smallest ArviZ bulk ESS over the population parameters and every θ_g; "
        "max R-hat: over the same variables; div.: divergent transitions after tuning, all "
        "chains.\nlogp+dlogp µs: median over repeats of one logp and one dlogp call (or of the "
        "one function NUTS calls) at the initial point, or averaged over posterior draws "
        "(column at); compile s includes the first call of each."
    )
    if args.output:
        write_output(args.output, gradient, sampling)
        print(f"tables written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
