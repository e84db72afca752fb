"""Every code block of README.md, and of the docs pages its examples moved to, runs as written.

The pages are README.md, docs/guide.md (the Python examples of both roles) and docs/cli.md (the
command line's). Each ``python`` block runs alone in a fresh interpreter and an empty directory
(so it must import what it uses); each ``bash`` block that calls ``pymc-dp release`` or
``pymc-dp fit`` runs in ``bash -e``, with ``pymc-dp`` and ``python`` meaning this checkout and
this interpreter. A block that reads a file runs after the earlier blocks of its page that write
it. The setup, test, documentation and ``reproduce`` commands are run by CI itself and skipped
here; a block repeated on a later page runs once. Blocks that sample for long are ``slow``;
every block runs in one of the two tiers.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("README.md", "docs/guide.md", "docs/cli.md")
_FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
_HEADING = re.compile(r"^#{2,3} (.+)$", re.M)
# What a block writes that a later block may read: a release (--output, write_release) or data.
_WRITES = (
    re.compile(r"--output\s+(\S+)"),
    re.compile(r"write_release\([^)]*?[\"']([^\"']+)[\"']\)"),
    re.compile(r"savetxt\([\"']([^\"']+)[\"']"),
)
# Commands CI runs by itself (environment set-up, the tests, the docs, the paper's study).
_NOT_RUN = ("python3 -m venv", "-m pytest", "-m sphinx", "pymc-dp reproduce")
# Blocks that call pm.sample() or pymc-dp fit (by id): from half a minute to several minutes
# each on two busy cores, so they run with -m slow; the default run keeps the releases.
SLOW = {
    "python-in-analyst-fit-the-noise-aware-posterior",
    "bash-in-command-line-2",
    "guide-python-in-unbounded-records-release-over-a-window",
    "guide-python-in-grouped-releases-one-per-site-pooled-hierarchically",
    "guide-python-in-private-linear-regression-bernstein-sheldon-2019",
    "cli-bash-in-one-column-curator-and-analyst-2",
    "cli-python-in-one-column-curator-and-analyst",
    "cli-bash-in-grouped-releases-2",
    "cli-bash-in-category-labels",
    "cli-bash-in-regression",
    "cli-bash-in-marginal-tables",
}


def _blocks() -> list[tuple[str, str, str, str]]:
    """``(id, page, language, code)`` of every fenced block, in page order.

    The id is the language and the section heading (``python-in-use``), numbered from the
    second block of a section on; blocks of a docs page start with the page's name (``guide-``).
    """
    blocks = []
    for page in PAGES:
        text = (ROOT / page).read_text(encoding="utf-8")
        prefix = "" if page == "README.md" else f"{Path(page).stem}-"
        seen: dict[str, int] = {}
        for match in _FENCE.finditer(text):
            headings = _HEADING.findall(text, 0, match.start()) or [""]
            section = re.sub(r"[^a-z0-9]+", "-", headings[-1].lower()).strip("-")
            base = f"{prefix}{match.group(1)}-in-{section}"
            seen[base] = seen.get(base, 0) + 1
            name = base if seen[base] == 1 else f"{base}-{seen[base]}"
            blocks.append((name, page, *match.groups()))
    return blocks


BLOCKS = _blocks()


def _runs(language: str, code: str) -> bool:
    if language == "python":
        return True
    return language == "bash" and ("pymc-dp release" in code or "pymc-dp fit" in code)


def _first_occurrences() -> list[int]:
    seen, indices = set(), []
    for i, (_, _, language, code) in enumerate(BLOCKS):
        if _runs(language, code) and (language, code) not in seen:
            seen.add((language, code))
            indices.append(i)
    return indices


CASES = [
    pytest.param(i, id=BLOCKS[i][0], marks=[pytest.mark.slow] if BLOCKS[i][0] in SLOW else [])
    for i in _first_occurrences()
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


def _written(code: str) -> list[str]:
    return [name for pattern in _WRITES for name in pattern.findall(code)]


def test_every_block_is_run_or_left_to_ci():
    for name, _, language, code in BLOCKS:
        assert language in ("python", "bash"), name
        if not _runs(language, code):
            assert any(command in code for command in _NOT_RUN), f"{name} is never run"
    assert {name for name, *_ in BLOCKS} >= SLOW


def test_readme_keeps_the_setup_command_ci_runs():
    # .ci/run runs README's setup command character for character (the demo is the main job).
    setup = (
        'python3 -m venv .venv && .venv/bin/pip install -e ".[test]" && '
        ".venv/bin/python -m pymc_dp.demo --output-dir demo_output"
    )
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert f"```bash\n{setup}\n```" in readme
    assert f'"$python" -m venv .venv && {setup.removeprefix("python3 -m venv .venv && ")}' in ci


@pytest.mark.parametrize("index", CASES)
def test_readme_block_runs_as_written(index, tmp_path, env):
    _, page, language, code = BLOCKS[index]
    for _, earlier_page, earlier_language, earlier in BLOCKS[:index]:
        # A block that reads a file runs after the blocks of its page that write it.
        if earlier_page == page and _runs(earlier_language, earlier):
            if any(name in code for name in _written(earlier)):
                _run(earlier_language, earlier, tmp_path, env)
    _run(language, code, tmp_path, env)
