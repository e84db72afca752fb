"""Benchmark: the CLT trust check of grouped windowed releases, before and after a change.

Building a default grouped windowed node runs :func:`pymc_dp.likelihoods.window_trust.
window_clt_trust` for every group (``grouped_likelihood``): its KS tables were the largest fixed
cost of the build. This script times, in one process, the trust check of the current code
against that of the module as it stood at ``--reference`` (a git revision, read with
``git show``; by default the commit before the check computed only the θ rows that decide), on
the grouped releases of ``benchmarks/grouped_speed.py`` (Normal pair and Poisson window, records
per group uniform in 50–500), every cache of both modules emptied before each timing:

* ``check``: CPU seconds of ``grouped_likelihood`` alone (every group's choice);
* ``build``: CPU seconds of building the whole default model (``grouped_speed.default_model``),
  after one unmeasured build of each family (PyTensor's one-time loading).

Both sides must make the same choice, and the check the same answer, in every group (the
script stops otherwise). CPU time,
not wall time: the machine may be shared. Usage::

    python benchmarks/trust_build.py                   # G = 50, 500; ε = 0.1, 1
    python benchmarks/trust_build.py --families normal --groups 50 --epsilons 0.1
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import types
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pymc as pm
import pytensor.tensor as pt

sys.path.insert(0, str(Path(__file__).resolve().parent))
import grouped_speed as gs

from pymc_dp.families import family_from_dist
from pymc_dp.likelihoods import choice, window_trust
from pymc_dp.model.nodes.grouped import grouped_likelihood

MODULE = "pymc_dp/likelihoods/window_trust.py"
REFERENCE = "e974b49"  # main before the check computed only the rows that decide


def reference_module(revision: str) -> types.ModuleType:
    """``window_trust`` as it stood at ``revision`` (a module of its own)."""
    root = Path(__file__).resolve().parent.parent
    source = subprocess.run(
        ["git", "show", f"{revision}:{MODULE}"],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    module = types.ModuleType("window_trust_reference")
    exec(compile(source, f"{revision}:{MODULE}", "exec"), module.__dict__)
    return module


def clear(module: types.ModuleType) -> None:
    """Empty every cache of a ``window_trust`` module (old or new)."""
    for value in vars(module).values():
        if callable(getattr(value, "cache_clear", None)):
            value.cache_clear()


def family_of(name: str) -> Any:
    """The family the default node reads from the README's distribution."""
    if name == "normal":
        return family_from_dist(pm.Normal.dist(0.0, pt.dscalar("sigma")))
    return family_from_dist(pm.Poisson.dist(1.0))


def cpu(func: Callable[[], Any]) -> tuple[float, Any]:
    """(CPU seconds, result) of one call."""
    start = time.process_time()
    out = func()
    return time.process_time() - start, out


def main(argv: Sequence[str] | None = None) -> int:
    """Run the grid and print a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", default=["normal", "poisson"])
    parser.add_argument("--groups", nargs="+", type=int, default=[50, 500])
    parser.add_argument("--epsilons", nargs="+", type=float, default=[0.1, 1.0])
    parser.add_argument("--reference", default=REFERENCE, help="git revision of the old module")
    parser.add_argument("--no-build", action="store_true", help="time the check alone")
    args = parser.parse_args(argv)
    old = reference_module(args.reference)
    sides = {
        "before": (old, old.window_clt_trust),
        "after": (window_trust, choice.window_clt_trust),
    }
    warnings.simplefilter("ignore")
    if not args.no_build:
        for name in args.families:  # PyTensor's one-time loading, outside the timings
            setting = gs.Setting(name, 8, 1.0)
            gs.default_model(setting, gs.make_release(setting))
    print("| release | G | ε | check before | check after | build before | build after |")
    print("|---|---|---|---|---|---|---|")
    for name in args.families:
        family = family_of(name)
        for groups in args.groups:
            for eps in args.epsilons:
                setting = gs.Setting(name, groups, eps)
                rs = gs.make_release(setting)
                rows = list(zip(rs.n, rs.value, strict=True))
                bounds = tuple(float(b) for b in rs.first.bounds)
                times: dict[str, list[float]] = {}
                choices = {}
                for side, (module, rule) in sides.items():
                    choice.window_clt_trust = rule  # what grouped_likelihood's rules call
                    clear(module)
                    check, choices[side] = cpu(lambda: grouped_likelihood(family, rs, "auto"))
                    build = float("nan")
                    if not args.no_build:
                        clear(module)
                        build, _ = cpu(lambda: gs.default_model(setting, rs))
                    times[side] = [check, build]
                    # The check's own answer per group (for the Normal pair the node takes the
                    # CLT either way, and the check decides the warning).
                    choices[side] = (
                        choices[side],
                        [rule(family, int(n), v, rs.first.scale, bounds)[0] for n, v in rows],
                    )
                choice.window_clt_trust = sides["after"][1]
                if choices["before"] != choices["after"]:
                    raise SystemExit(f"{name} G={groups} ε={eps}: the choices differ")
                b, a = times["before"], times["after"]
                build = "– | –" if args.no_build else f"{b[1]:.2f} s | {a[1]:.2f} s"
                print(
                    f"| {name} | {groups} | {eps:g} | {b[0]:.2f} s | {a[0]:.2f} s "
                    f"({b[0] / a[0]:.1f}×) | {build} |",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
