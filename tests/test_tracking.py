"""Real papermill executions against a real MLflow sqlite store."""

from __future__ import annotations

import shutil
from pathlib import Path

import mlflow
import nbformat
import papermill
import pytest
import yaml
from mlflow import MlflowClient

from tests.conftest import ROOT

SETUP = """\
from polarcatalog.app.tracking import start_stage
from polarcatalog.config import load_params
params = load_params(params_file, overrides)
run = start_stage("probe.ipynb", params, executed_notebook)
run.log_metrics({"answer": {"value": 42, "mRR@1": 0.5, "name": "not a number", "Conflict@3 (memory, >= 3)": 0.0}})"""


DVC_YAML = """\
stages:
  probe:
    cmd: papermill notebooks/probe.ipynb out.ipynb -k python3
    params: [retrieval.lam, dataset.seed, tracking]
  sweep:
    foreach: [lam, top_k]
    do:
      cmd: papermill notebooks/sweep.ipynb out_${item}.ipynb -k python3 -p axis ${item}
      params:
        - ablations.${item}
        - graph
"""


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
    (tmp_path / "dvc.yaml").write_text(DVC_YAML)
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
    # exactly the params the stage declares in dvc.yaml, under their own keys
    lam = yaml.safe_load((ROOT / "params.yaml").read_text())["retrieval"]["lam"]
    assert run.data.params == {"retrieval.lam": str(lam), "dataset.seed": "0", "tracking.experiment": "polarcatalog",
                               "tracking.log_notebook": "True"}
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


def test_stage_of_a_notebook_and_its_declared_params_come_from_dvc_yaml(workspace):
    from polarcatalog.app.tracking import declared_params, dvc_stage
    from polarcatalog.config import load_params

    params = load_params(workspace / "params.yaml")
    assert dvc_stage(workspace, "probe.ipynb") == "probe" and dvc_stage(workspace, "sweep.ipynb", "top_k") == "sweep@top_k"
    with pytest.raises(ValueError, match="0 stages running notebooks/sweep.ipynb for 'depth'"):
        dvc_stage(workspace, "sweep.ipynb", "depth")
    got = declared_params(workspace, "sweep@top_k", params)
    assert got["ablations.top_k"] == [1, 3, 5, 10, 15] and got["graph.constraint"] == "hard" and "ablations.lam" not in got


def test_every_stage_of_the_pipeline_logs_what_it_declares():
    """Each notebook resolves to its dvc.yaml stage, and every declared key exists in the validated params."""
    import yaml

    from polarcatalog.app.tracking import declared_params, dvc_stage
    from polarcatalog.config import load_params

    params = load_params(ROOT / "params.yaml")
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    for name, stage in stages.items():
        items = stage.get("foreach", [None])
        notebook = stage.get("do", stage)["cmd"].split()[1].removeprefix("notebooks/")
        for item in items:
            resolved = dvc_stage(ROOT, notebook, item)
            assert resolved == (f"{name}@{item}" if item else name)
            logged = declared_params(ROOT, resolved, params)
            assert logged and "seed" not in logged and any(k.startswith("tracking.") for k in logged)
