"""Benchmark: two kernels of the batched regression engines against the code they replaced.

In one process, on the batches of ``tests/test_regression_cell_model.py``'s Geweke test of the
cube (3 000 chains, d = 3):

* **factoring by halves**: :func:`~pymc_dp.regression.kernels.psd.batched_cholesky`'s fallback,
  reached when a batch holds members that LAPACK cannot factor but the vectorised pass did not
  flag (a pivot at rounding level), against one LAPACK call per member, on ``--size`` 5 × 5
  matrices of which ``--failing`` are singular;
* **cell moments**: :func:`~pymc_dp.regression.kernels.cell_model.cell_record_moments` (the
  covariance within a cell from y alone) against the mixture of
  :func:`~pymc_dp.regression.kernels.normal_model.record_moments` over the cells, with its
  ``(..., C, m, m)`` temporaries.

Each row: median seconds over ``--repeats``, both sides, and the ratio. The two give the same
numbers (factors to the bit, moments to 10⁻¹⁵ relative; the script checks both).

Usage::

    python benchmarks/batched_kernels.py --size 3000 --failing 10 --repeats 5
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pymc_dp.regression.kernels.cell_model import (
    CellParameters,
    cell_layout,
    cell_record_moments,
)
from pymc_dp.regression.kernels.normal_model import record_moments
from pymc_dp.regression.kernels.psd import _factor_by_halves


def per_member(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The baseline: one LAPACK call per member (the identity where it fails)."""
    out = np.broadcast_to(np.eye(flat.shape[-1]), flat.shape).copy()
    ok = np.zeros(flat.shape[0], dtype=bool)
    for i, mat in enumerate(flat):
        try:
            out[i] = np.linalg.cholesky(mat)
            ok[i] = True
        except np.linalg.LinAlgError:
            pass
    return out, ok


def by_halves(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    out = np.broadcast_to(np.eye(flat.shape[-1]), flat.shape).copy()
    ok = np.zeros(flat.shape[0], dtype=bool)
    _factor_by_halves(flat, out, ok)
    return out, ok


def mixture_moments(par: CellParameters, layout) -> tuple[np.ndarray, np.ndarray]:
    """The baseline: every cell's full moments, then the mixture."""
    cells, d = layout.corners.shape
    means, covs = record_moments(par.theta[..., None, :], np.asarray(par.sigma2)[..., None],
                                 layout.corners, np.zeros((cells, d, d)))  # fmt: skip
    mean = np.sum(par.probs[..., None] * means, axis=-2)
    second = np.sum(par.probs[..., None, None] * (covs + means[..., :, None] * means[..., None, :]),
                    axis=-3)  # fmt: skip
    return mean, second - mean[..., :, None] * mean[..., None, :]


def timed(fn, *args, repeats: int) -> tuple[float, object]:
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn(*args)
        seconds.append(time.perf_counter() - start)
    return float(np.median(seconds)), out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=3000, help="batch members")
    parser.add_argument("--failing", type=int, default=10, help="singular members of the batch")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)

    k = 5
    x = rng.standard_normal((args.size, k, k + 1))
    a = x @ x.swapaxes(-1, -2)
    bad = rng.choice(args.size, size=min(args.failing, args.size), replace=False)
    low = rng.standard_normal((bad.size, k, k - 1))
    a[bad] = low @ low.swapaxes(-1, -2)  # singular: rank k - 1
    base_s, (base_chol, base_ok) = timed(per_member, a, repeats=args.repeats)
    new_s, (chol, ok) = timed(by_halves, a, repeats=args.repeats)
    assert np.array_equal(ok, base_ok) and np.array_equal(chol, base_chol)
    print(f"factoring {args.size} members, {int(np.sum(~ok))} without a factor: "
          f"per member {base_s * 1e3:.1f} ms, by halves {new_s * 1e3:.1f} ms, "
          f"{base_s / new_s:.1f}x")  # fmt: skip

    layout = cell_layout(3, "cube")
    par = CellParameters(rng.normal(size=(args.size, 4)), rng.uniform(0.1, 2.0, size=args.size),
                         rng.dirichlet(np.ones(8), size=args.size))  # fmt: skip
    base_s, base = timed(mixture_moments, par, layout, repeats=args.repeats)
    new_s, new = timed(cell_record_moments, par, layout, repeats=args.repeats)
    for b, n in zip(base, new):
        np.testing.assert_allclose(n, b, rtol=1e-12, atol=1e-12 * np.max(np.abs(b)))
    print(
        f"cube's record moments over {args.size} chains: mixture of full moments "
        f"{base_s * 1e3:.1f} ms, within-cell y alone {new_s * 1e3:.1f} ms, {base_s / new_s:.1f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
