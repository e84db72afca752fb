"""Speed of the noisy-marginals model: fit and synthetic data against domain size.

For K binary or ternary columns with all 2-way marginals and n = 10⁴ records (a log-linear model
with random 2-way terms, released at ε = 1 with seeded float Laplace noise, so that every run
fits the same release), in one process:

* pymc_dp: the wall time of ``pmdp.marginals_model`` (including its Laplace fit, used to whiten
  θ) plus ``pm.sample`` (NUTS, ``chains`` chains on as many cores, ``draws`` tune + ``draws``
  draws), and of drawing 20 synthetic data sets of n records;
* the hand-written baseline, where asked for (``--baseline``): θ ~ Normal(0, 2) and the same
  collapsed normal density written as a plain PyTensor graph (``marginals_clt_logp_graph``,
  gradient by PyTensor, diagonal mass-matrix adaptation), sampled the same way; the ratio is
  baseline time over pymc_dp time. Its effective sample sizes are printed next to ours.
  Wherever the domain is enumerated, the cost of one gradient of each model is printed too
  (``gradient_ms``, in this process), also where sampling the baseline is out of reach.

On a shared machine the wall time follows the load; the CPU seconds of the fit (this process
and the chains' processes, ``getrusage``) do not: on two idle cores the wall time is about half
of them.

BLAS is held to one thread per process (set before NumPy loads): the two cores go to the two
chains, and a multi-threaded BLAS on small matrices on a shared machine is many times slower.

Run: ``PYTHONPATH=. python benchmarks/marginals_speed.py [draws] [cases] [baseline cases]
[likelihood] [interaction sd] [chains]`` with cases like ``5x2,5x3,10x2`` (columns x levels; a
trailing ``c``, e.g. ``30x3c``, releases the 2-way marginals of neighbouring columns only, a
chain). An interaction sd fits ``marginals_model(rel, interaction_sigma=...)`` (default, or
``""``: the Normal(0, 2) prior on every term); the printed R-hat is the largest over θ, with its
location and scale (folded) parts. Chains (default 2) run on at most two cores.

Which feature method each case uses is printed (``enumerate``, ``split``, ``junction`` or
``bethe``, see :func:`pymc_dp.kernels.loglinear_moments.feature_method` and, for the
fixed-covariance law, :func:`~pymc_dp.kernels.loglinear_moments.fixed_law_method`); 15 ternary
columns with all 2-way marginals use the Bethe approximation.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import itertools
import resource
import sys
import time

import arviz as az
import numpy as np
import pymc as pm

import pymc_dp as pmdp
from pymc_dp._compat import posterior_dataset
from pymc_dp.kernels.loglinear import LogLinearDomain
from pymc_dp.kernels.loglinear_moments import feature_method, likelihood_method, sample_records
from pymc_dp.likelihoods.marginals import (
    marginals_clt_logp_graph,
    noise_variance,
)
from pymc_dp.model.nodes.marginals import choose_likelihood

CORES = 2


def release(k, levels, n, seed, chain=False):
    names = [f"c{i}" for i in range(k)]
    if chain:
        pairs = [(i, i + 1) for i in range(k - 1)]
    else:
        pairs = list(itertools.combinations(range(k), 2))
    dom = LogLinearDomain((levels,) * k, tuple(pairs))
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=dom.n_params) * 0.3
    codes = sample_records(dom, theta, n, rng)
    return pmdp.release_marginals(
        {c: codes[:, i] for i, c in enumerate(names)},
        columns=names,
        domains={c: list(range(levels)) for c in names},
        marginals=[(names[a], names[b]) for a, b in pairs],
        epsilon=1.0,
        rng=seed + 1,
    )


def baseline_model(rel):
    dom = rel.domain
    z = rel.y @ dom.projection
    with pm.Model() as model:
        theta = pm.Normal("theta", 0.0, 2.0, shape=dom.n_params)
        pm.Potential(
            "y",
            marginals_clt_logp_graph(theta, dom, z, n=rel.n, noise_variance=noise_variance(rel)),
        )
    return model


def gradient_ms(model, reps):
    """Milliseconds per log-density gradient at ``reps`` points near the initial point."""
    dlogp = model.compile_dlogp()
    rng = np.random.default_rng(0)
    start = model.initial_point()
    points = [
        {k: v + 0.01 * rng.standard_normal(np.shape(v)) for k, v in start.items()}
        for _ in range(reps + 1)
    ]
    dlogp(points[0])  # the first call pays for lazy set-up
    begin = time.perf_counter()
    for point in points[1:]:
        dlogp(point)
    return 1000 * (time.perf_counter() - begin) / reps


def cpu_seconds():
    """CPU seconds of this process and of its finished children (the chains' processes)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def rhat_text(data):
    """The largest rank-normalised R-hat over θ, and its location and scale (folded) parts.

    ArviZ's R-hat is the larger of the two; the folded one compares the spread of the split
    chains and is the noisier under NUTS, whose half-orbit trajectories leave |θ - median|
    correlated from draw to draw (``benchmarks/nuts_rhat_control.py``).
    """
    whole = float(np.max(np.asarray(az.rhat(data)["x"])))
    location = float(np.max(np.asarray(az.rhat(data, method="z_scale")["x"])))
    scale = float(np.max(np.asarray(az.rhat(data, method="folded")["x"])))
    return f"{whole:.3f} (location {location:.3f}, scale {scale:.3f})"


def fit(build, draws, chains):
    start = time.perf_counter()
    cpu = cpu_seconds()
    model = build()
    idata = pm.sample(
        draws,
        tune=draws,
        chains=chains,
        cores=min(chains, CORES),
        random_seed=1,
        progressbar=False,
        model=model,
        compute_convergence_checks=False,
    )
    seconds = time.perf_counter() - start
    cpu = cpu_seconds() - cpu
    draws_ = np.asarray(posterior_dataset(idata)["theta"])
    data = az.convert_to_dataset({"x": draws_})
    e = np.asarray(az.ess(data, method="bulk")["x"])
    rhat = rhat_text(data)
    steps = float(np.mean(np.asarray(idata.sample_stats["n_steps"])))
    return idata, seconds, float(e.min()), steps, model, cpu, rhat


def case(k, levels, draws, chains, baseline, likelihood, n=10_000, chain=False, inter=None):
    rel = release(k, levels, n, seed=0, chain=chain)
    dom = rel.domain
    kind = choose_likelihood(rel, likelihood)
    idata, t_fit, ess_min, steps, model, cpu_fit, rhat = fit(
        lambda: pmdp.marginals_model(rel, likelihood=likelihood, interaction_sigma=inter),
        draws,
        chains,
    )
    start = time.perf_counter()
    pmdp.synthetic_datasets(idata, rel, m=20, rng=2)
    t_syn = time.perf_counter() - start
    base = "not run"
    ours_ms = gradient_ms(model, 20)
    if feature_method(dom) == "enumerate":
        # one gradient of each, in this process (where sampling the baseline is out of reach)
        base_ms = gradient_ms(baseline_model(rel), 3)
        base = f"gradient {base_ms:.1f} ms ({base_ms / ours_ms:.1f}x ours)"
    if baseline:
        _, t_base, ess_base, steps_base, _, cpu_base, _ = fit(
            lambda: baseline_model(rel), draws, chains
        )
        base = (
            f"{base}; {t_base:.0f} s ({cpu_base:.0f} CPU s), min ESS {ess_base:.0f}, "
            f"{steps_base:.0f} steps/draw "
            f"({t_base / t_fit:.1f}x our time, {(ess_min / t_fit) / (ess_base / t_base):.1f}x "
            "our ESS/s)"
        )
    print(
        f"| {k} x {levels}{' chain' if chain else ''} | {dom.n_cells} cells, "
        f"p = {dom.n_params}, {kind}, "
        f"{likelihood_method(dom, kind)} | "
        f"{t_fit:.0f} s ({cpu_fit:.0f} CPU s), "
        f"min ESS {ess_min:.0f}, R-hat {rhat}, {steps:.0f} steps/draw, gradient "
        f"{ours_ms:.1f} ms{'' if inter is None else f', interaction sd {inter}'} | "
        f"{t_syn:.1f} s | "
        f"{t_fit + t_syn:.0f} s | {base} |",
        flush=True,
    )


def main(
    draws=300,
    cases="5x2,5x3,10x2,10x3,15x2,15x3",
    baseline="5x2,5x3",
    likelihood="auto",
    inter=None,
    chains=2,
):
    print(
        f"n = 10^4, all 2-way marginals, NUTS {chains} chains x ({draws} tune + {draws} draws) "
        f"on {min(chains, CORES)} cores, likelihood={likelihood!r}"
    )
    print(
        "| columns x levels | domain | pymc_dp fit | 20 synthetic sets | total "
        "| hand-written NUTS |"
    )
    print("|---|---|---|---|---|---|")
    base = set(baseline.split(",")) if baseline else set()
    # PyTensor's compile cache is loaded once per process (measured 16 s here): pay it first
    warm = release(3, 2, 500, seed=5)
    fit(lambda: pmdp.marginals_model(warm), 20, 1)
    fit(lambda: baseline_model(warm), 20, 1)
    for spec in cases.split(","):
        chain = spec.endswith("c")
        k, levels = (int(v) for v in spec.rstrip("c").split("x"))
        case(k, levels, draws, chains, spec in base, likelihood, chain=chain, inter=inter)


if __name__ == "__main__":
    args = sys.argv[1:]
    main(
        int(args[0]) if args else 300,
        args[1] if len(args) > 1 else "5x2,5x3,10x2,10x3,15x2,15x3",
        args[2] if len(args) > 2 else "5x2,5x3",
        args[3] if len(args) > 3 else "auto",
        float(args[4]) if len(args) > 4 and args[4] else None,
        int(args[5]) if len(args) > 5 else 2,
    )
