"""How far the Bethe approximation moves the noisy-marginals posterior, where exact sums exist.

For K ternary columns with all 2-way marginals (small enough to enumerate), n = 10⁴ records
from a log-linear model with θ ~ N(0, s²) on every term, released at ε = 1 (discrete Laplace):
the Laplace fit of the posterior (:func:`pymc_dp.kernels.loglinear_laplace.marginals_laplace`)
with exact full-domain moments and with the Bethe moments (loopy BP, linear response). Printed:
the mode's shift in units of the exact posterior sd (max and root mean square over θ), the
ratio of the sds, and the exact and Bethe fits' distance to the data-generating θ in sd units.

Run: ``PYTHONPATH=. python benchmarks/marginals_bethe_accuracy.py [K,...] [s,...] [seeds]``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import itertools
import sys

import numpy as np

import pymc_dp as pmdp
from pymc_dp.kernels.loglinear import LogLinearDomain
from pymc_dp.kernels.loglinear_laplace import marginals_laplace
from pymc_dp.kernels.loglinear_moments import sample_records
from pymc_dp.likelihoods.marginals import noise_variance


def one(k, scale, seed, n=10_000):
    names = [f"c{i}" for i in range(k)]
    pairs = list(itertools.combinations(range(k), 2))
    dom = LogLinearDomain((3,) * k, tuple(pairs))
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=dom.n_params) * scale
    codes = sample_records(dom, theta, n, rng)
    rel = pmdp.release_marginals(
        {c: codes[:, i] for i, c in enumerate(names)},
        columns=names,
        domains={c: [0, 1, 2] for c in names},
        marginals=[(names[a], names[b]) for a, b in pairs],
        epsilon=1.0,
        rng=seed + 1,
    )
    z = rel.y @ dom.projection
    fits = {
        m: marginals_laplace(
            dom, z, n=n, noise_variance=noise_variance(rel), prior_sigma=2.0, method=m
        )
        for m in ("enumerate", "bethe")
    }
    sd = np.sqrt(np.diag(fits["enumerate"].cov))
    shift = (fits["bethe"].mode - fits["enumerate"].mode) / sd
    ratio = np.sqrt(np.diag(fits["bethe"].cov)) / sd
    err = {m: np.sqrt(np.mean(((f.mode - theta) / sd) ** 2)) for m, f in fits.items()}
    return np.max(np.abs(shift)), np.sqrt(np.mean(shift**2)), ratio, err


def main(ks="6,8", scales="0.1,0.3", seeds=3):
    print(
        "| K ternary | θ sd | mode shift, max / rms (exact sd) | sd ratio range "
        "| rms error vs θ (exact / Bethe) |"
    )
    print("|---|---|---|---|---|")
    for k in (int(v) for v in ks.split(",")):
        for s in (float(v) for v in scales.split(",")):
            rows = [one(k, s, seed) for seed in range(seeds)]
            mx = max(r[0] for r in rows)
            rms = np.mean([r[1] for r in rows])
            lo = min(r[2].min() for r in rows)
            hi = max(r[2].max() for r in rows)
            e0 = np.mean([r[3]["enumerate"] for r in rows])
            e1 = np.mean([r[3]["bethe"] for r in rows])
            print(
                f"| {k} | {s} | {mx:.2f} / {rms:.2f} | {lo:.2f}–{hi:.2f} | {e0:.2f} / {e1:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0] if a else "6,8", a[1] if len(a) > 1 else "0.1,0.3", int(a[2]) if len(a) > 2 else 3)
