"""Every tutorial notebook in ``notebooks/`` executes from top to bottom without error.

The notebooks are collected by glob, so a new notebook is tested without editing this file.
They run in a fresh kernel of the interpreter running the tests (jupyter_client replaces the
kernel spec's ``python`` with ``sys.executable``), with ``notebooks/`` as working directory.
"""

from __future__ import annotations

from pathlib import Path

import nbclient
import nbformat
import pytest

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
# Generous: each notebook takes well under a minute on one idle core, but CI runs the
# notebooks in parallel with the rest of the suite.
CELL_TIMEOUT_S = 600


def test_notebooks_found():
    # Guards the glob: an empty list would silently parametrize nothing below.
    assert len(NOTEBOOKS) >= 5, f"expected the tutorial notebooks in {NOTEBOOK_DIR}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_committed_without_outputs(path: Path):
    # Outputs bloat diffs and go stale; the docs build and this test execute the notebooks.
    nb = nbformat.read(path, as_version=4)
    dirty = [
        i
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and (cell.outputs or cell.execution_count is not None)
    ]
    assert not dirty, f"{path.name}: strip the outputs of cells {dirty}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path: Path):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK_DIR)}},
    )
    client.execute()  # raises CellExecutionError, with the cell and traceback, on failure
    errors = [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.outputs
        if out.output_type == "error"
    ]
    assert not errors
    # Each tutorial's point is a figure: check that at least one was rendered.
    images = [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.outputs
        if out.output_type == "display_data" and "image/png" in out.get("data", {})
    ]
    assert images, f"{path.name} rendered no figure"
