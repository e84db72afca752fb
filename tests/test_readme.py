"""Every code block of README.md runs as written.

Each ``python`` block runs alone in a fresh interpreter and an empty directory (so it must
import what it uses); each ``bash`` block that calls ``pymc-dp release`` or ``pymc-dp fit`` runs
in ``bash -e`` after the README's earlier blocks that write a file it reads, with
``pymc-dp`` and ``python`` meaning this checkout and this interpreter. The setup, test,
documentation and ``reproduce`` commands are run by CI itself and skipped here. Blocks that
sample for long are ``slow``; every block runs in one of the two tiers.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
_HEADING = re.compile(r"^#{2,3} (.+)$", re.M)
# Commands CI runs by itself (environment set-up, the tests, the docs, the paper's study).
_NOT_RUN = ("python3 -m venv", "-m pytest", "-m sphinx", "pymc-dp reproduce")
# Blocks that call pm.sample() or pymc-dp fit (by id): from half a minute to several minutes
# each on two busy cores, so they run with -m slow; the default run keeps the release block.
SLOW = {
    "python-in-use",
    "python-in-unbounded-records-release-over-a-window",
    "python-in-private-linear-regression-bernstein-sheldon-2019",
    "bash-in-command-line-curator-and-analyst-2",
    "python-in-command-line-curator-and-analyst",
    "python-in-grouped-releases-one-per-site-pooled-hierarchically",
    "bash-in-grouped-releases-one-per-site-pooled-hierarchically",
    "bash-in-command-line-several-columns-category-labels-regression-2",
}


def _blocks() -> list[tuple[str, str, str]]:
    """``(id, language, code)`` of every fenced block, in README order."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks, seen = [], {}
    for match in _FENCE.finditer(text):
        headings = _HEADING.findall(text, 0, match.start())
        section = re.sub(r"[^a-z0-9]+", "-", headings[-1].lower()).strip("-") if headings else ""
        base = f"{match.group(1)}-in-{section}"
        seen[base] = seen.get(base, 0) + 1
        blocks.append((base if seen[base] == 1 else f"{base}-{seen[base]}", *match.groups()))
    return blocks


BLOCKS = _blocks()


def _runs(language: str, code: str) -> bool:
    if language == "python":
        return True
    return language == "bash" and ("pymc-dp release" in code or "pymc-dp fit" in code)


CASES = [
    pytest.param(i, id=name, marks=[pytest.mark.slow] if name in SLOW else [])
    for i, (name, language, code) in enumerate(BLOCKS)
    if _runs(language, code)
]


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    """``pymc-dp`` and ``python`` on PATH as this checkout and interpreter; no display."""
    bin_dir = tmp_path_factory.mktemp("bin")
    for name, command in (
        ("pymc-dp", f"{sys.executable} -m pymc_dp.cli"),
        ("python", sys.executable),
    ):
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\nexec {command} "$@"\n')
        script.chmod(0o755)
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": path,
        "MPLBACKEND": "Agg",
    }


def _run(language: str, code: str, cwd: Path, env: dict[str, str]) -> None:
    argv = [sys.executable, "-c", code] if language == "python" else ["bash", "-e", "-c", code]
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, f"{language} block failed:\n{code}\n{proc.stdout}\n{proc.stderr}"


def test_every_block_is_run_or_left_to_ci():
    for name, language, code in BLOCKS:
        assert language in ("python", "bash"), name
        if not _runs(language, code):
            assert any(command in code for command in _NOT_RUN), f"{name} is never run"
    assert {name for name, *_ in BLOCKS} >= SLOW


@pytest.mark.parametrize("index", CASES)
def test_readme_block_runs_as_written(index, tmp_path, env):
    _, language, code = BLOCKS[index]
    for _, earlier_language, earlier in BLOCKS[:index]:
        # A block that reads a release file runs after the blocks that write it.
        written = re.findall(r"--output\s+(\S+)", earlier)
        if earlier_language == "bash" and any(name in code for name in written):
            _run("bash", earlier, tmp_path, env)
    _run(language, code, tmp_path, env)
