"""Real papermill executions against a real MLflow sqlite store."""

from __future__ import annotations

import shutil
from pathlib import Path

import mlflow
import nbformat
import papermill
import pytest
from mlflow import MlflowClient

from tests.conftest import ROOT

SETUP = """\
from polarcatalog.config import load_params
from polarcatalog.tracking import start_stage
params = load_params(params_file, overrides)
run = start_stage("probe", params, ["tracking", "retrieval"], executed_notebook)
run.log_metrics({"answer": {"value": 42, "mRR@1": 0.5, "name": "not a number", "Conflict@3 (memory, >= 3)": 0.0}})"""


def _notebook(path: Path, body: list[str]) -> Path:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('params_file = "params.yaml"\noverrides = {}\nexecuted_notebook = None')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(SETUP)] + [nbformat.v4.new_code_cell(c) for c in body]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """A folder that looks like the repo root (params.yaml + dvc.yaml) with its own sqlite store."""
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("POLARCATALOG_ROOT", str(tmp_path))
    mlflow.set_tracking_uri(uri)
    return tmp_path


def _run(workspace: Path, name: str, body: list[str], **params) -> Path:
    src = _notebook(workspace / f"{name}.ipynb", body)
    out = workspace / f"{name}.out.ipynb"
    papermill.execute_notebook(str(src), str(out), kernel_name="python3", cwd=str(workspace),
                               parameters={"executed_notebook": out.name, **params}, progress_bar=False)
    return out


def _only_run():
    runs = mlflow.search_runs(experiment_names=["polarcatalog"], output_format="list")
    assert len(runs) == 1
    return runs[0]


def test_finished_run_has_params_metrics_tags_and_notebook(workspace):
    _run(workspace, "ok", ["run.finish()"])
    run = _only_run()
    assert run.info.status == "FINISHED" and run.info.run_name == "probe"
    assert run.data.params["retrieval.lam"] == "0.7" and run.data.params["tracking.experiment"] == "polarcatalog"
    assert run.data.metrics["answer.value"] == 42 and run.data.metrics["answer.mRR_at_1"] == 0.5
    assert "answer.name" not in run.data.metrics and run.data.metrics["answer.Conflict_at_3 _memory_ ge 3_"] == 0.0
    assert run.data.tags["dvc_stage"] == "probe" and "git_commit" in run.data.tags and "git_dirty" in run.data.tags
    arts = [a.path for a in MlflowClient().list_artifacts(run.info.run_id, "notebook")]
    assert arts == ["notebook/ok.out.ipynb"]


def test_raising_notebook_leaves_failed_run_and_executed_copy_with_error(workspace):
    with pytest.raises(papermill.PapermillExecutionError, match="kaboom"):
        _run(workspace, "boom", ['raise RuntimeError("kaboom")', "run.finish()"])
    run = _only_run()
    assert run.info.status == "FAILED"
    assert run.data.tags["error"] == "RuntimeError: kaboom"
    client = MlflowClient()
    assert "kaboom" in Path(client.download_artifacts(run.info.run_id, "error.txt", str(workspace))).read_text()
    executed = nbformat.read(workspace / "boom.out.ipynb", as_version=4)
    errors = [o for c in executed.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert errors and errors[0].ename == "RuntimeError" and errors[0].evalue == "kaboom"
    # the cell after the error never ran
    assert executed.cells[-1].execution_count is None


def test_invalid_params_fail_before_any_run_is_opened(workspace):
    with pytest.raises(papermill.PapermillExecutionError, match="retrieval.lam"):
        _run(workspace, "bad", ["run.finish()"], overrides={"retrieval.lam": 7})
    assert mlflow.search_runs(experiment_names=["polarcatalog"], output_format="list") == []
