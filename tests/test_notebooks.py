"""Stage notebooks are committed clean and wired into dvc.yaml the same way."""

from __future__ import annotations

import nbformat
import pytest
import yaml

from tests.conftest import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# foreach stages keep their definition under `do`
STAGES = {name: s.get("do", s) for name, s in yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"].items()}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_clean_and_has_the_agreed_shape(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code), "commit notebooks without outputs"
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1
    for name in ("params_file", "overrides", "executed_notebook"):
        assert f"{name} =" in params[0].source
    assert "start_stage(" in "".join(c.source for c in code) and code[-1].source.strip() == "run.finish()"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_each_notebook_is_a_papermill_stage(path):
    stages = [s for s in STAGES.values() if f"notebooks/{path.name}" in s["cmd"]]
    assert stages, f"{path.name} is run by no stage"
    for stage in stages:
        cmd = stage["cmd"]
        executed = f"reports/notebooks/{path.stem}" + ("_${item}" if "${item}" in cmd else "") + ".ipynb"
        assert cmd.startswith("papermill ") and " -k python3" in cmd and f"-p executed_notebook {executed}" in cmd
        assert f"notebooks/{path.name}" in stage["deps"]
    # executed notebooks change on every run: never a dependency of another stage
    assert all(executed not in s.get("deps", []) for s in STAGES.values())
