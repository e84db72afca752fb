"""``pymc-dp --help`` and argument errors import neither PyMC nor NumPy nor pymc_dp's inference.

Start-up is measured, not asserted (a timed test is flaky on a shared machine): the test checks
what start-up imports, which is what makes it slow (PyMC and PyTensor take seconds).
"""

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from pymc_dp.cli.texts import FIT_PRIORS, describe_prior, fit_epilog, plain_text
from pymc_dp.model.ready_made import PRIORS

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("pymc", "pytensor", "arviz", "numpy", "pandas")
# What the parser may load of pymc_dp: the lazy packages, the light modules of its CLI, and the
# families' declarations and their registry (which import nothing heavy; the families' classes,
# which import PyTensor, are named by path and never loaded).
BUILTIN = (ROOT / "pymc_dp" / "families" / "builtin").glob("*.py")
LIGHT = {
    "pymc_dp",
    "pymc_dp._legacy",
    "pymc_dp.cli",
    "pymc_dp.cli.messages",
    "pymc_dp.cli.parser",
    "pymc_dp.cli.plans",
    "pymc_dp.cli.texts",
    "pymc_dp.families",
    "pymc_dp.families.builtin",
    "pymc_dp.families.declaration",
    "pymc_dp.families.registry",
    *(f"pymc_dp.families.builtin.{p.stem}" for p in BUILTIN if p.stem != "__init__"),
}

_PROBE = """
import json, sys
from pymc_dp.cli import main
try:
    status = main(sys.argv[1:])
except SystemExit as exit:
    status = exit.code
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(json.loads(sys.stdin.read())))
ours = sorted(m for m in sys.modules if m == "pymc_dp" or m.startswith("pymc_dp."))
print(json.dumps({"status": status, "heavy": heavy, "ours": ours}))
"""


def _probe(*argv: str) -> dict:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv],
        input=json.dumps(HEAVY),
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["release", "--help"],
        ["fit", "--help"],
        ["reproduce", "--help"],
        ["release", "data.csv", "--family", "nope"],  # argparse: not a family
        ["fit"],  # argparse: RELEASE missing
        ["release", "d.csv", "--column", "v", "--family", "poisson", "--epsilon", "1", "-o", "o"],
        ["release", "--dry-run", "--family", "poisson", "--bounds", "0", "9", "--epsilon", "1"],
    ],
    ids=[
        "help",
        "release-help",
        "fit-help",
        "reproduce-help",
        "bad-family",
        "no-release",
        "no-window",
        "dry-run-without-n",
    ],
)
def test_help_and_argument_errors_import_nothing_heavy(argv):
    result = _probe(*argv)
    assert result["status"] in (0, 2)
    assert result["heavy"] == [], f"{' '.join(argv)} imported {result['heavy']}"
    assert set(result["ours"]) <= LIGHT, f"{' '.join(argv)} imported {result['ours']}"


def test_a_release_imports_neither_pymc_nor_arviz(tmp_path):
    """The curator's side: a real release reads the family's statistics and noise without
    PyMC and ArviZ (about 4 s of its 10 before the families imported PyMC lazily)."""
    data = tmp_path / "b.csv"
    data.write_text("b\n1\n0\n1\n1\n0\n")
    out = tmp_path / "r.json"
    argv = ["release", str(data), "--column", "b", "--family", "bernoulli", "--epsilon", "0.3"]
    result = _probe(*argv, "-o", str(out))
    assert result["status"] == 0 and out.exists()
    assert {"pymc", "arviz"}.isdisjoint(result["heavy"]), result["heavy"]


def test_the_console_script_is_the_light_entry_point():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["pymc-dp"] == "pymc_dp.cli:main"
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert any(Path("pymc_dp.cli").match(p) for p in packages["packages"]["find"]["include"])


def test_the_help_prior_table_is_the_one_build_model_uses():
    assert set(FIT_PRIORS) == set(PRIORS)
    epilog = fit_epilog()
    for family, spec in PRIORS.items():
        variables, distribution, parameters, _ = FIT_PRIORS[family]
        assert variables == ", ".join(spec.variables), family
        assert distribution == spec.distribution, family
        assert parameters == spec.parameters, family
        assert describe_prior(family) == spec.describe_rule()
        assert spec.describe_rule() in epilog


def test_reproduce_help_shows_no_restructured_text(capsys):
    from pymc_dp.cli import main

    with pytest.raises(SystemExit):
        main(["reproduce", "--help"])
    out = capsys.readouterr().out
    assert "``" not in out and ":func:" not in out and ":mod:" not in out
    assert "--quick runs a small grid" in " ".join(out.split())


def test_plain_text_strips_roles_and_literals():
    assert plain_text(":func:`pymc_dp.release` and :class:`~pymc_dp.Release`") == (
        "pymc_dp.release and pymc_dp.Release"
    )
    assert plain_text(":ref:`the method <method>`, ``--seed``") == "the method, --seed"
