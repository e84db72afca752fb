"""Markdown tables of a ``pymc-dp reproduce`` run, for ``docs/reproduce.md``.

Reads the ``report.json`` that :func:`pymc_dp.studies.reproduce` writes and prints the Figure 1a
calibration table, the Figure 1c utility table, the OPS table and the named checks, so the
documentation is regenerated from a run rather than typed in.

Usage::

    python benchmarks/reproduce_tables.py reproduce_output/report.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

_ORDER = {"binomial": 0, "multinomial": 1, "exponential": 2}


def _points(report: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted(report["points"], key=lambda p: (_ORDER[p["model"]], p["epsilon"], p["n"]))


def _fmt(x: float | None, spec: str = ".3f") -> str:
    return "—" if x is None else format(x, spec)


def calibration_table(report: dict[str, Any]) -> str:
    """Figure 1a: KS of every method, the DP sampler's 90 % coverage and median ESS."""
    lines = [
        "| model | ε | n | Gibbs (auto) | Non-private | Naive | OPS | Gibbs 90% cov. | "
        "Gibbs median ESS |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p in _points(report):
        s = p["scores"]
        ops = s.get("ops", {}).get("ks")
        lines.append(
            f"| {p['model']} | {p['epsilon']:g} | {p['n']} | {s['gibbs']['ks']:.3f} | "
            f"{s['nonprivate']['ks']:.3f} | {s['naive']['ks']:.3f} | {_fmt(ops)} | "
            f"{s['gibbs']['coverage']['0.9']:.3f} | {p['gibbs_median_ess']:.0f} |"
        )
    return "\n".join(lines)


def utility_table(report: dict[str, Any]) -> str:
    """Figure 1c: MMD² of the DP sampler and of naive, and their paired difference."""
    lines = [
        "| model | ε | n | Gibbs MMD² | Naive MMD² | Gibbs − naive (± se) |",
        "|---|---|---|---|---|---|",
    ]
    for p in _points(report):
        s = p["scores"]
        diff = p.get("mmd2_gibbs_minus_naive")
        if diff is None or s["gibbs"]["mmd2"] is None:
            continue
        lines.append(
            f"| {p['model']} | {p['epsilon']:g} | {p['n']} | {s['gibbs']['mmd2']:.2e} | "
            f"{s['naive']['mmd2']:.2e} | {diff[0]:.1e} ± {diff[1]:.1e} |"
        )
    return "\n".join(lines)


def ops_table(report: dict[str, Any]) -> str:
    """OPS against the posterior: its spread, its KS and its 50 % coverage."""
    lines = [
        "| n | ε | OPS sd / non-private sd | OPS sd / Gibbs sd | OPS KS | OPS 50% coverage |",
        "|---|---|---|---|---|---|",
    ]
    for p in _points(report):
        s = p["scores"]
        ops = s.get("ops")
        if not ops or ops.get("ks") is None:
            continue
        lines.append(
            f"| {p['n']} | {p['epsilon']:g} | {ops['sd_ratio']:.1f} | "
            f"{ops['sd_ratio'] / s['gibbs']['sd_ratio']:.1f} | {ops['ks']:.3f} | "
            f"{ops['coverage']['0.5']:.3f} |"
        )
    return "\n".join(lines)


def checks_list(report: dict[str, Any]) -> str:
    """The named checks, PASS or FAIL, with their claims."""
    return "\n".join(
        f"- **{'PASS' if c['passed'] else 'FAIL'}** `{c['name']}`: {c['claim']}"
        for c in report["checks"]
    )


def main(argv: list[str] | None = None) -> None:
    """Print every table of ``docs/reproduce.md`` from one report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="report.json of a reproduce run")
    args = parser.parse_args(argv)
    report = json.loads(args.report.read_text())
    env = report.get("environment", {})
    print(
        f"<!-- seed {report['seed']}, jobs {report['jobs']}, "
        f"{report['wall_seconds'] / 60:.1f} min, {env} -->\n"
    )
    for title, table in (
        ("Figure 1a", calibration_table(report)),
        ("Figure 1c", utility_table(report)),
        ("OPS", ops_table(report)),
        ("Checks", checks_list(report)),
    ):
        print(f"### {title}\n\n{table}\n")


if __name__ == "__main__":
    main()
