"""Real papermill executions against a real MLflow sqlite store."""

from __future__ import annotations

import os
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
from polarcatalog.runner.tracking import start_stage
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


@pytest.mark.slow  # a real papermill kernel
def test_finished_run_has_params_metrics_tags_and_notebook(workspace):
    # the kernel never imports MLflow: the companion process does the logging (about 2.7 s of imports and store)
    _run(workspace, "ok", ["import sys\nassert not {'mlflow', 'sqlalchemy'} & set(sys.modules), 'MLflow in the kernel'",
                           "run.finish()"])
    run = _only_run()
    assert run.info.status == "FINISHED" and run.info.run_name == "probe"
    # exactly the params the stage declares in dvc.yaml, under their own keys
    lam = yaml.safe_load((ROOT / "params.yaml").read_text())["retrieval"]["lam"]
    assert run.data.params == {"retrieval.lam": str(lam), "dataset.seed": "0", "tracking.experiment": "polarcatalog",
                               "tracking.uri": "None", "tracking.log_notebook": "True"}
    assert run.data.metrics["answer.value"] == 42 and run.data.metrics["answer.mRR_at_1"] == 0.5
    assert "answer.name" not in run.data.metrics and run.data.metrics["answer.Conflict_at_3/memory ge 3"] == 0.0
    assert run.data.tags["dvc_stage"] == "probe" and "git_commit" in run.data.tags and "git_dirty" in run.data.tags
    assert run.data.tags["run_kind"] == "interactive" and "dvc_experiment" not in run.data.tags  # not started by DVC
    client = MlflowClient()
    arts = [a.path for a in client.list_artifacts(run.info.run_id, "notebook")]
    assert arts == ["notebook/ok.out.html", "notebook/ok.out.ipynb"]
    html = Path(client.download_artifacts(run.info.run_id, "notebook/ok.out.html", str(workspace))).read_text()
    assert html.lstrip().lower().startswith("<!doctype html>") and "start_stage" in html
    # MLflow 3's UI opens an experiment of this kind on its runs, not on the GenAI overview
    assert client.get_experiment_by_name("polarcatalog").tags["mlflow.experimentKind"] == "custom_model_development"


@pytest.mark.slow  # a real papermill kernel
def test_a_dvc_experiment_run_reaches_the_main_store_with_its_name(workspace, tmp_path_factory, monkeypatch):
    """What DVC sets for a stage of `dvc exp run --temp` or a queued experiment: the run must land in DVC_ROOT's
    store (the temporary copy's own would be deleted with it), named and tagged with the experiment."""
    main = tmp_path_factory.mktemp("main_repo")
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    for key, value in {"DVC_ROOT": str(main), "DVC_STAGE": "probe", "DVC_EXP_NAME": "bushy-lamb",
                       "DVC_EXP_BASELINE_REV": "a" * 40}.items():
        monkeypatch.setenv(key, value)
    _run(workspace, "exp", ["run.finish()"])
    assert not (workspace / "mlflow.db").exists()
    mlflow.set_tracking_uri(f"sqlite:///{main}/mlflow.db")
    run = _only_run()
    assert run.info.run_name == "bushy-lamb · probe"
    assert {k: run.data.tags[k] for k in ("run_kind", "dvc_experiment", "dvc_baseline_rev")} == {
        "run_kind": "pipeline", "dvc_experiment": "bushy-lamb", "dvc_baseline_rev": "a" * 40}


@pytest.mark.slow  # a real papermill kernel
def test_child_runs_carry_their_points_whole_configuration(workspace):
    _run(workspace, "sweep", ['run.log_child("lam=0.3", {"ablation.axis": "lam", "retrieval.lam": 0.3}, {"mRR@1": 0.25})',
                              "run.finish()"])
    runs = mlflow.search_runs(experiment_names=["polarcatalog"], output_format="list")
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    (child,) = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert child.data.params == {**parent.data.params, "retrieval.lam": "0.3", "ablation.axis": "lam"}
    assert child.data.metrics == {"mRR_at_1": 0.25} and child.data.tags["dvc_stage"] == "probe"


@pytest.mark.slow  # a real papermill kernel
def test_a_burst_of_child_runs_fits_the_pipe_to_the_companion_and_every_one_lands(workspace):
    """The kernel's pipe to its MLflow companion holds 1 MiB, so that an ablation's child runs (about 20 KiB each
    here: the stage's whole params) queue there while the kernel computes on; `finish` waits until all are in."""
    out = _run(workspace, "sweep", ["import fcntl; print('pipe', fcntl.fcntl(run.companion.proc.stdin, fcntl.F_GETPIPE_SZ))",
                                    "for i in range(40):\n    run.log_child(f'lam={i}', {'retrieval.lam': i / 40}, {'mRR@1': i / 40})",
                                    "run.finish()"])
    assert "pipe 1048576" in out.read_text()
    runs = mlflow.search_runs(experiment_names=["polarcatalog"], output_format="list")
    children = sorted(r.data.params["retrieval.lam"] for r in runs if "mlflow.parentRunId" in r.data.tags)
    assert children == sorted(str(i / 40) for i in range(40))
    assert all(r.info.status == "FINISHED" for r in runs)


@pytest.mark.slow  # a real papermill kernel
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


@pytest.mark.slow  # a real papermill kernel
def test_invalid_params_fail_before_any_run_is_opened(workspace):
    with pytest.raises(papermill.PapermillExecutionError, match="retrieval.lam"):
        _run(workspace, "bad", ["run.finish()"], overrides={"retrieval.lam": 7})
    assert mlflow.search_runs(experiment_names=["polarcatalog"], output_format="list") == []


def test_stage_of_a_notebook_and_its_declared_params_come_from_dvc_yaml(workspace):
    from polarcatalog.runner.tracking import declared_params, dvc_stage
    from polarcatalog.config import load_params

    params = load_params(workspace / "params.yaml")
    assert dvc_stage(workspace, "probe.ipynb") == "probe" and dvc_stage(workspace, "sweep.ipynb", "top_k") == "sweep@top_k"
    with pytest.raises(ValueError, match="0 stages running notebooks/sweep.ipynb for 'depth'"):
        dvc_stage(workspace, "sweep.ipynb", "depth")
    got = declared_params(workspace, "sweep@top_k", params)
    # the declared keys, with the validated values in their text form; an undeclared key is not logged
    assert got["ablations.top_k"] == params.ablations.top_k and got["graph.constraint"] == str(params.graph.constraint)
    assert "ablations.lam" not in got


def test_every_stage_of_the_pipeline_logs_what_it_declares():
    """Each notebook resolves to its dvc.yaml stage, and every declared key exists in the validated params."""
    import yaml

    from polarcatalog.runner.tracking import declared_params, dvc_stage
    from polarcatalog.config import load_params

    params = load_params(ROOT / "params.yaml")
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    for name, stage in stages.items():
        items = stage.get("foreach", [None])
        words = stage.get("do", stage)["cmd"].split()
        if "run-notebook" not in words:
            continue  # `check`: no notebook, no MLflow run
        notebook = next(w for w in words if w.startswith("notebooks/")).removeprefix("notebooks/")
        for item in items:
            resolved = dvc_stage(ROOT, notebook, item)
            assert resolved == (f"{name}@{item}" if item else name)
            logged = declared_params(ROOT, resolved, params)
            assert logged and "seed" not in logged and not any(k.startswith("tracking.") for k in logged)  # not a stage param


def test_each_swept_value_names_the_params_it_stands_for():
    """A child run logs its point's params: for every axis, a value as the sweep names it (a table label such as
    `soft (p=0.1)`) must map back to a spec that params accept and that the sweep would name the same way."""
    from polarcatalog.stages.ablate import AXES
    from polarcatalog.config import load_params
    from polarcatalog.memory.constraints import Strength

    point = {name: axis.point for name, axis in AXES.items()}
    assert point["lam"](0.3) == {"retrieval.lam": 0.3} and point["top_k"](10) == {"retrieval.k": 10}
    assert point["constraint"]("soft (p=0.1)") == {"graph.constraint": "soft:0.1"}
    assert point["constraint"]("adaptive (p_max=1)") == {"graph.constraint": "adaptive:1"}
    assert point["constraint"]("hard + query-image concepts") == {"graph.constraint": "hard",
                                                                  "ablation.variant": "query-image concepts"}
    assert point["coverage"]("multi_prompt:6") == {"graph.proposer": "multi_prompt:6", "graph.critical_completion": False}
    assert point["coverage"]("top_n:12 + critical completion") == {
        "graph.proposer": "top_n:12", "graph.critical_completion": True}
    assert point["coverage"]("all") == {"graph.proposer": "all", "graph.critical_completion": False}
    params = load_params(ROOT / "params.yaml")
    for spec in params.ablations.constraint:
        label = Strength.parse(spec).label()
        pp = point["constraint"](label)
        assert Strength.parse(pp["graph.constraint"]).label() == label
        assert str(load_params(ROOT / "params.yaml", pp).graph.constraint) == pp["graph.constraint"]


def _axis_rows(axis, values: dict, split: str = "test"):
    import pandas as pd

    return pd.DataFrame([{axis.key: k, "split": split, "queries": "all", "metric": axis.metric, "value": v,
                          "ci_low": v - 0.05, "ci_high": v + 0.05, "n": 100} for k, v in values.items()])


def test_an_ablation_headline_reports_the_configured_setting_and_its_reference_never_a_best_on_test():
    """`dvc exp show` compares headlines: a maximum over test values would be a choice made on test. The coverage
    axis chooses its proposer on dev, and its headline is that choice's test number, whichever setting is best on test;
    a variant row (` + critical completion`) is no value of `graph.proposer` and is never chosen."""
    import pandas as pd

    from polarcatalog.stages.ablate import AXES, headline, summary
    from polarcatalog.config import load_params

    params = load_params(ROOT / "params.yaml", {"graph.proposer": "top_n:6",
                                                "graph.critical_completion": False})
    axis = AXES["coverage"]
    df = pd.concat([_axis_rows(axis, {"random_n:6": 0.09, "top_n:6": 0.14, "multi_prompt:12": 0.31, "all": 0.15}),
                    _axis_rows(axis, {"random_n:6": 0.10, "top_n:6": 0.22, "multi_prompt:12": 0.20, "all": 0.21,
                                      "top_n:6 + critical completion": 0.5}, split="dev")])
    out = headline(df, axis, summary(df, axis, configured="top_n:6"), params)
    assert out == {"test overall score at chosen setting": 0.14,
                   "test overall score at chosen setting lo": 0.09, "test overall score at chosen setting hi": 0.19}

    lam = AXES["lam"]  # a choice: made on dev, its test number reported with the CI
    df = pd.concat([_axis_rows(lam, {0.3: 0.20, 0.5: 0.25, 0.7: 0.30}),
                    _axis_rows(lam, {0.3: 0.40, 0.5: 0.30, 0.7: 0.10}, split="dev")]).assign(chunks="image")
    out = headline(df, lam, summary(df, lam, configured=0.5), params)
    assert out == {"chosen lam (dev)": 0.3, "test mRR@1 at chosen lam": 0.2, "test mRR@1 at chosen lam lo": 0.15,
                   "test mRR@1 at chosen lam hi": 0.25}

    top_k = AXES["top_k"]  # the configured k and twice it; a mark outside the sweep is left out, not invented
    df = _axis_rows(top_k, {1: 0.2, 5: 0.5, 10: 0.6})
    assert headline(df, top_k, {}, load_params(ROOT / "params.yaml", {"retrieval.k": 5})) == {
        "test R@k (5)": 0.5, "test R@k (5) lo": 0.45, "test R@k (5) hi": 0.55, "test R@k (10)": 0.6}
    assert headline(df, top_k, {}, load_params(ROOT / "params.yaml", {"retrieval.k": 10})) == {
        "test R@k (10)": 0.6, "test R@k (10) lo": 0.55, "test R@k (10) hi": 0.65}


@pytest.mark.slow  # a real papermill kernel
def test_a_run_whose_process_died_is_closed_when_the_next_stage_starts(workspace):
    """SIGKILL mid-stage leaves no FAILED hook to run: the next stage run on this host ends it as KILLED."""
    import socket
    import subprocess

    from polarcatalog.runner.tracking import machine_tags

    dead = subprocess.Popen(["true"])
    dead.wait()
    client = MlflowClient()
    experiment = mlflow.set_experiment("polarcatalog").experiment_id
    me = machine_tags()
    if not me["machine_id"]:
        pytest.skip("this machine has no /etc/machine-id: orphan cleanup leaves every run alone here")
    orphan = client.create_run(experiment, tags={**me, "pid": str(dead.pid), "mlflow.runName": "curate"}).info.run_id
    alive = client.create_run(experiment, tags={**me, "pid": str(os.getpid())}).info.run_id
    # another machine with the same host name (a cloned container): its pid means nothing here
    other = client.create_run(experiment, tags={**me, "machine_id": "0" * 32, "pid": str(dead.pid)}).info.run_id
    earlier_boot = client.create_run(experiment, tags={**me, "boot_id": "an-earlier-boot", "pid": str(os.getpid())}).info.run_id
    _run(workspace, "ok", ["run.finish()"])
    assert client.get_run(orphan).info.status == "KILLED"
    assert "orphan cleanup" in client.get_run(orphan).data.tags["ended_by"]
    assert client.get_run(alive).info.status == "RUNNING"  # a live process's run is left alone
    assert client.get_run(other).info.status == "RUNNING"  # so is another machine's
    assert client.get_run(earlier_boot).info.status == "KILLED"  # its pid is alive now, but in another boot
    for run in (alive, other):
        client.set_terminated(run)


def test_bootstrap_counts_stay_out_of_the_mlflow_metrics():
    from polarcatalog.runner.tracking import numeric_metrics

    interval = {"value": 0.31, "ci_low": 0.28, "ci_high": 0.35, "n": 1248, "split": "test"}
    assert numeric_metrics({"test": {"mRR@1": interval}}) == {"test.mRR_at_1.value": 0.31, "test.mRR_at_1.ci_low": 0.28,
                                                               "test.mRR_at_1.ci_high": 0.35}


@pytest.mark.parametrize("warm", [False, True], ids=["fresh companion", "forked companion"])
def test_a_kernel_that_dies_without_finishing_leaves_its_run_killed_not_running(workspace, warm):
    """The companion holds the run: a kernel gone without `finish()` or `fail()` (SIGKILL, `os._exit`) closes its
    pipe, and the run ends KILLED, saying so, with what was logged before; also when the companion was forked from a
    stage runner's warm process (runner/warm_kernel.py), whose client dies with the kernel."""
    import os
    import subprocess
    import sys
    import time

    from polarcatalog.runner import warm_kernel

    env = dict(os.environ)
    if warm:
        if not warm_kernel.enabled():
            pytest.skip("fork and Unix sockets: Linux")
        path = warm_kernel.ensure(Path(workspace))
        deadline = time.monotonic() + 120
        while not warm_kernel.listening(path) and time.monotonic() < deadline:  # its imports done: a forked companion
            time.sleep(0.2)
        assert warm_kernel.listening(path)
        env[warm_kernel.SOCKET_VAR] = str(path)

    code = ("import os\nfrom polarcatalog.config import load_params\nfrom polarcatalog.runner.tracking import start_stage\n"
            "run = start_stage('probe.ipynb', load_params('params.yaml'))\nrun.log_metrics({'before': 1.0})\n"
            "print(run.run_id, flush=True)\nos._exit(3)")
    done = subprocess.run([sys.executable, "-c", code], cwd=workspace, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 3, done.stderr
    run_id = done.stdout.strip()
    client = MlflowClient()
    for _ in range(100):  # the companion ends the run as soon as it reads the end of its input
        run = client.get_run(run_id)
        if run.info.status != "RUNNING":
            break
        time.sleep(0.1)
    assert run.info.status == "KILLED" and "ended without finishing its run" in run.data.tags["ended_by"]
    assert run.data.metrics == {"before": 1.0}


def test_a_logging_failure_ends_the_stage_run_failed_and_opens_no_other(workspace, monkeypatch):
    """An artifact the store cannot take (here: a file that is not there) fails the stage with MLflow's reason, the
    stage's run ends FAILED with it, and no stray run is opened."""
    from polarcatalog.config import load_params
    from polarcatalog.runner.tracking import start_stage

    monkeypatch.chdir(workspace)
    run = start_stage("probe.ipynb", load_params(workspace / "params.yaml"))
    run.log_artifact("no-such-file.md")
    with pytest.raises(RuntimeError, match="MLflow logging \\(artifact\\) failed"):
        run.finish()
    (only,) = mlflow.search_runs(experiment_names=["polarcatalog"], output_format="list")
    assert only.info.run_id == run.run_id and only.info.status == "FAILED"
    assert "no-such-file.md" in only.data.tags["error"]


@pytest.mark.slow  # up to a minute of MLflow's own retries
def test_an_unreachable_tracking_server_stops_the_stage_within_a_minute_and_names_the_server(tmp_path):
    """MLflow's defaults retry a silent server for ten minutes without a word (a team server whose database is down);
    the stage must give up well inside two minutes, saying which server and what to do."""
    import socket
    import subprocess
    import sys

    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / "dvc.yaml").write_text(DVC_YAML)
    with socket.socket() as s:  # a port nothing listens on: every request is refused, and retried
        s.bind(("127.0.0.1", 0))
        uri = f"http://127.0.0.1:{s.getsockname()[1]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_HTTP_")}
    env |= {"MLFLOW_TRACKING_URI": uri, "POLARCATALOG_ROOT": str(tmp_path)}
    code = ("from polarcatalog.config import load_params\nfrom polarcatalog.runner.tracking import start_stage\n"
            "start_stage('probe.ipynb', load_params('params.yaml'))")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=110)
    assert done.returncode != 0
    assert f"tracking: {uri}" in done.stderr and "MLFLOW_HTTP_REQUEST_MAX_RETRIES" in done.stderr
    assert f"the MLflow tracking server {uri} did not answer" in done.stderr and "make team-server" in done.stderr
