"""Stage notebooks are committed clean and wired into dvc.yaml the same way."""

from __future__ import annotations

import nbformat
import pytest
import yaml

from polarcatalog.runner.pipelines import PIPELINES
from tests.conftest import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# foreach stages keep their definition under `do`; every pipeline (the default and the bird pipeline)
STAGES = {name: s.get("do", s) for file in PIPELINES if (ROOT / file).is_file()
          for name, s in yaml.safe_load((ROOT / file).read_text())["stages"].items()}


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
    # the last cell closes the MLflow run: run-notebook then stops the kernel at once (runner/run_notebook.py)
    assert "start_stage(" in "".join(c.source for c in code) and code[-1].source.strip() == "run.finish()"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_each_notebook_is_a_papermill_stage(path):
    stages = [s for s in STAGES.values() if f"notebooks/{path.name}" in s["cmd"]]
    assert stages, f"{path.name} is run by no stage"
    for stage in stages:
        cmd = stage["cmd"]
        executed = f"reports/notebooks/{path.stem}" + ("_${item}" if "${item}" in cmd else "") + ".ipynb"
        # runner/run_notebook.py: papermill with params_file and executed_notebook injected, the checkout's src/ imported
        assert cmd.startswith(f"polarcatalog run-notebook notebooks/{path.name} {executed}")
        assert f"notebooks/{path.name}" in stage["deps"]
    # executed notebooks change on every run: never a dependency of another stage
    assert all(executed not in s.get("deps", []) for s in STAGES.values())


@pytest.mark.slow  # a real papermill kernel
def test_run_notebook_imports_the_checkouts_src_and_reports_each_cell_quietly(tmp_path):
    """What every stage runs: the kernel imports from this checkout's src/ (an experiment's copy, not the editable
    install's workspace), parameters are injected, and the terminal gets one line per cell and no kernel warnings."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "src").mkdir()
    (tmp_path / "src/pc_checkout_probe.py").write_text("WHERE = 'this checkout'\n")
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('params_file = "x"\nexecuted_notebook = None\naxis = "none"')
    params.metadata["tags"] = ["parameters"]
    same = nbformat.v4.new_code_cell("x = 1")  # twice: a cell is numbered by its position, not found by its source
    nb.cells = [params, same, nbformat.v4.new_markdown_cell("a note"), nbformat.v4.new_code_cell(same.source),
                nbformat.v4.new_code_cell("import os, pc_checkout_probe\n"
                                        "print(pc_checkout_probe.WHERE, axis, os.environ['OPENBLAS_NUM_THREADS'])")]
    nbformat.write(nb, tmp_path / "probe.ipynb")
    cli = Path(sys.executable).parent / "polarcatalog"
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "8"}  # the shell's setting: a stage's kernel runs pinned anyway
    proc = subprocess.run([str(cli), "run-notebook", "probe.ipynb", "out/probe.ipynb", "-p", "axis=lam"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    out = nbformat.read(tmp_path / "out/probe.ipynb", as_version=4)
    assert out.cells[-1].outputs[0]["text"] == "this checkout lam 1\n"  # polarcatalog.numerics
    numbered = [line.split()[2] for line in proc.stderr.splitlines() if line.split()[1:2] == ["cell"]]
    assert numbered == ["1/4", "2/4", "3/4", "4/4"], proc.stderr  # the parameters cell is 1, the injected one unnumbered
    assert proc.stderr.splitlines()[-2].endswith("import os, pc_checkout_probe")
    assert "WARNING" not in proc.stderr and "Executing" not in proc.stderr, proc.stderr
    assert "IPKernelApp" not in proc.stderr, proc.stderr  # nor its shutdown-time "KeyboardInterrupt caught" (CI, once)
