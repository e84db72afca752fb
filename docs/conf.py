"""Sphinx configuration of the pymc_dp documentation.

Build (from the repository root, with the ``docs`` extra installed)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

Nothing is downloaded at build time: no intersphinx, and the tutorials are the notebooks in
``notebooks/``, copied into ``docs/tutorials/`` and executed by myst-nb.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
from pathlib import Path

import pymc_dp

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent

project = "pymc_dp"
author = "pymc_dp developers"
copyright = "2026, pymc_dp developers"
version = release = pymc_dp.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_nb",
    "sphinx_design",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "**.ipynb_checkpoints", "figures/regression/*.md"]

# ---- tutorials: the notebooks of notebooks/ -------------------------------------------------
# Sphinx only reads sources below docs/, so the notebooks are copied (not symlinked: symlinks
# need privileges on Windows and are easy to break) on every build. The copy is generated and
# git-ignored; edit the notebooks in notebooks/.
_TUTORIALS = DOCS / "tutorials"
shutil.rmtree(_TUTORIALS, ignore_errors=True)
_TUTORIALS.mkdir()
for _nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
    shutil.copy2(_nb, _TUTORIALS / _nb.name)

# Reading order of the tutorials; notebooks not named here follow in alphabetical order.
TUTORIAL_ORDER = ["quickstart", "categorical", "truncated", "regression", "calibration"]


def _tutorial_entries() -> list[str]:
    names = sorted(p.stem for p in _TUTORIALS.glob("*.ipynb"))
    ordered = [n for n in TUTORIAL_ORDER if n in names]
    return [f"tutorials/{n}" for n in ordered + [n for n in names if n not in ordered]]


def _fill_toctrees(app, docname: str, source: list[str]) -> None:
    """Expand the toctree placeholder of ``tutorials.md``.

    The entries are listed from the notebooks that exist at build time, in reading order.
    """
    if docname == "tutorials":
        source[0] = source[0].replace(
            "\ntutorials/*\n", "\n" + "\n".join(_tutorial_entries()) + "\n"
        )


def _always_reread(app, env, added, changed, removed) -> list[str]:
    # Their toctrees depend on files that are not their sources, which Sphinx cannot track.
    return ["tutorials"]


def setup(app):  # noqa: D103 (Sphinx's extension hook)
    app.connect("source-read", _fill_toctrees)
    app.connect("env-get-outdated", _always_reread)


# ---- MyST and notebook execution ---------------------------------------------------------
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
# Notebooks are committed without outputs and executed here. "cache" re-runs a notebook only
# when its code changed (jupyter-cache, under docs/_build/.jupyter_cache), so a clean build
# (as in CI) executes every notebook once and a local rebuild is quick.
nb_execution_mode = "cache"
# The kernels inherit this process's environment. PyTensor installed from PyPI warns on every
# first compilation that it found no BLAS library; that is about the build machine, not the
# tutorial, so keep it out of the rendered pages (the notebooks themselves are unchanged).
os.environ["PYTHONWARNINGS"] = "ignore:PyTensor could not link to a BLAS:UserWarning"
nb_execution_cache_path = str(DOCS / "_build" / ".jupyter_cache")
nb_execution_timeout = 600
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True

# ---- API reference -----------------------------------------------------------------------
autosummary_generate = True
# Document exactly what each module's __all__ exports, including names it re-exports. The lazy
# packages (pymc_dp and pymc_dp.families, which load names on first use through lazy_loader) do
# not list "__all__" itself in dir(), so autosummary would take their exports for imported names
# and skip them: document imported members everywhere. Every module api.md lists has an __all__
# (checked below), so this adds nothing that a module does not export.
autosummary_ignore_module_all = False
autosummary_imported_members = True


def _api_modules() -> list[str]:
    """The modules listed in api.md's autosummary blocks, in page order."""
    text = (DOCS / "api.md").read_text(encoding="utf-8")
    return re.findall(r"^ {3}(pymc_dp(?:\.\w+)*)\s*$", text, re.M)


def _unindexed_class_pages() -> set[str]:
    """``module.Class`` of the class pages to render with ``:no-index:``.

    A class exported by several listed modules (``pmdp.Release`` is also ``pymc_dp.curator.Release``
    and ``pymc_dp.curator.record.Release``) gets a page under each, and autodoc gives each page
    the class's canonical name, which Sphinx would see described twice. Only the page under the
    shortest path is indexed (the top level first; among paths as short, the package that
    defines the class, then api.md's order), so a cross-reference has one target.
    """
    pages: dict[int, list[tuple[int, bool, int, str]]] = {}
    for order, name in enumerate(_api_modules()):
        module = importlib.import_module(name)
        if getattr(module, "__all__", None) is None:
            raise RuntimeError(f"docs/api.md lists {name}, which has no __all__")
        for attr in module.__all__:
            obj = getattr(module, attr)
            if isinstance(obj, type):
                elsewhere = not f"{obj.__module__}.".startswith(f"{name}.")
                page = (name.count("."), elsewhere, order, f"{name}.{attr}")
                pages.setdefault(id(obj), []).append(page)
    return {page for found in pages.values() for *_, page in sorted(found)[1:]}


autosummary_context = {"unindexed": _unindexed_class_pages()}
autodoc_typehints = "none"  # numpydoc's Parameters sections already say what each type is
autodoc_member_order = "bysource"
numpydoc_show_class_members = False  # the class template lists them with autosummary
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# ---- HTML --------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"pymc_dp {version}"
html_static_path = ["_static"]
html_css_files = ["custom.css"]
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version", "theme-version"],
    # The landing page is short: give it the full width, without the two sidebars.
    "secondary_sidebar_items": {"**": ["page-toc"], "index": []},
}
html_sidebars = {"index": []}
html_show_sourcelink = False
