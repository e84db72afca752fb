"""The package's layout holds: layers and no cycles (import-linter), no private name borrowed
across modules, a small root, and the old module paths still served for one release."""

import ast
import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pymc_dp"


def test_import_linter_contracts_are_kept():
    # Layers, "the curator imports no inference", pure-NumPy kernels, no cycles (.importlinter).
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from importlinter.cli import lint_imports_command; lint_imports_command()",
            "--no-cache",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def test_no_private_name_is_imported_from_another_module():
    # A helper two modules need is public in the module that owns it.
    borrowed = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pymc_dp")):
                continue
            for alias in node.names:
                name = alias.name
                is_module = (PACKAGE.parent / node.module.replace(".", "/") / f"{name}.py").exists()
                if name.startswith("_") and not name.startswith("__") and not is_module:
                    borrowed.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.module}.{name}")
    assert borrowed == []


def test_the_package_root_holds_few_modules():
    modules = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(modules) <= 12, modules


@pytest.mark.parametrize(
    ("old", "name", "new"),
    [
        ("pymc_dp.priors", "prior_spec", "pymc_dp.model.priors"),
        ("pymc_dp.collapsed", "sample_collapsed", "pymc_dp.engine.collapsed"),
        ("pymc_dp.distributions", "CollapsedLaplace", "pymc_dp.likelihoods.collapsed"),
        ("pymc_dp.distributions", "SuffStatNormal", "pymc_dp.model.distributions.suffstat"),
        ("pymc_dp.io", "read_release", "pymc_dp.curator.release_file"),
        ("pymc_dp.io", "read_column", "pymc_dp.curator.data_files"),
        ("pymc_dp.regression.sampler", "sample_gibbs_ss", "pymc_dp.regression.engine.gibbs_ss"),
        ("pymc_dp.step_methods", "GridStep", "pymc_dp.model.step_methods.grid"),
    ],
)
def test_old_module_paths_still_import_with_a_warning(old, name, new):
    # Run in a fresh interpreter: the old path must warn the first time it is imported.
    code = (
        "import importlib, warnings, sys\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        f"    module = importlib.import_module({old!r})\n"
        f"    value = getattr(module, {name!r})\n"
        f"assert value is getattr(importlib.import_module({new!r}), {name!r})\n"
        "assert any(issubclass(w.category, FutureWarning) and 'moved to' in str(w.message)"
        " for w in caught), [str(w.message) for w in caught]\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_old_release_module_still_calls_release_and_holds_release_class():
    code = (
        "import warnings\n"
        "warnings.simplefilter('ignore', FutureWarning)\n"
        "import numpy as np, pymc as pm, pymc_dp as pmdp\n"
        "from pymc_dp.release import Release\n"
        "assert Release is pmdp.Release\n"
        "rel = pmdp.release(np.ones(10), pm.Bernoulli, epsilon=1.0, rng=0)\n"
        "assert isinstance(rel, Release) and rel.n == 10\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_models_is_the_documented_path_of_the_ready_made_models():
    import pymc_dp as pmdp
    from pymc_dp.model.ready_made import build_model

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pmdp.models.build_model is build_model
        assert importlib.import_module("pymc_dp.models").build_model is build_model


def test_every_public_name_loads():
    import pymc_dp as pmdp

    for name in pmdp.__all__:
        assert getattr(pmdp, name) is not None, name
