"""One MLflow run per stage run, opened the same way by every notebook.

`start_stage("05_ablate.ipynb", params, executed_notebook, item="lam")` finds the notebook's DVC stage in
`dvc.yaml` (here `ablate@lam`) and opens a run named after it in the experiment from params. It logs exactly the
params that stage declares in `dvc.yaml` (one record of what a stage reads) and provenance tags, and hooks IPython
so that a cell that raises ends the run as FAILED, with the traceback and the executed notebook so far.
`StageRun.finish()`, the notebook's last cell, logs the executed notebook (as .ipynb and as HTML) and ends the run
FINISHED.

Where runs go (`tracking_uri`): MLFLOW_TRACKING_URI if set, else `tracking.uri` from params (a team's tracking
server), else `sqlite:///<project>/mlflow.db`. The project is DVC_ROOT when DVC runs the stage: DVC sets it to the
main repository even for `dvc exp run --temp` and queued experiments, whose copies under `.dvc/tmp/exps/` are
deleted afterwards, with any store inside them.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import subprocess
import traceback
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd

from polarcatalog import __version__
from polarcatalog.runner.commands import venv_command
from polarcatalog.runner.pipelines import declaration, dvc_stage, stage_outputs
from polarcatalog.config import Params, flatten
from polarcatalog.paths import repo_root


_SPELLED = (("@", "_at_"), ("λ", "lam"), (">=", " ge "), ("<=", " le "), ("+", " plus "), ("%", " pct"), (",", " "))


def metric_name(key: str) -> str:
    """MLflow names allow only [A-Za-z0-9_-. :/]: symbols are spelled out and parentheses become a `/` level, so
    `Conflict@3 (ground truth)` is logged as `Conflict_at_3/ground truth` and `(memory, >= 3)` as `memory ge 3`."""
    for symbol, word in _SPELLED:
        key = key.replace(symbol, word)
    key = re.sub(r"\s*\(([^()]*)\)", lambda m: "/" + m.group(1).strip() if m.start() else m.group(1), key)
    key = re.sub(r"[^A-Za-z0-9_\-. :/]", "_", key)
    return re.sub(r" {2,}", " ", key).strip()


def numeric_metrics(metrics: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """The numbers of a metrics dict as MLflow metrics; a bootstrap interval's count (`.n`) is a sample size, not a
    metric, so it stays in the stage's JSON and out of MLflow's charts and compare view."""
    flat = flatten(metrics, prefix)
    return {metric_name(k): float(v) for k, v in flat.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k.rsplit(".", 1)[-1] != "n"}


def mlflow_bin() -> str:
    return venv_command("mlflow")


def project_root(root: Path | None = None) -> Path:
    """The repository whose store a run belongs to: DVC_ROOT under DVC (the main repository, also for experiments
    run in a temporary copy), else the repository holding the working directory."""
    dvc_root = os.environ.get("DVC_ROOT")
    return Path(dvc_root).resolve() if dvc_root else (root or repo_root()).resolve()


def tracking_uri(root: Path | None = None, configured: str | None = None) -> str:
    """MLFLOW_TRACKING_URI, else `tracking.uri` from params, else the project's sqlite store (absolute)."""
    return os.environ.get("MLFLOW_TRACKING_URI") or configured or f"sqlite:///{project_root(root)}/mlflow.db"


# A tracking server that stops answering (its database down, the machine gone) must stop a stage within about a minute,
# with a message: MLflow's own defaults (7 retries, backoff factor 2, 120 s per request) wait ten minutes in silence.
# Each is a default only: a variable the user set wins.
HTTP_PATIENCE = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "3", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                 "MLFLOW_HTTP_REQUEST_TIMEOUT": "15"}


def _is_server(uri: str) -> bool:
    return uri.startswith(("http://", "https://"))


def bound_http_patience(uri: str) -> None:
    """For a server URI, MLflow's HTTP retries bounded by HTTP_PATIENCE (unless set), and one line saying so."""
    if not _is_server(uri):
        return
    for key, value in HTTP_PATIENCE.items():
        os.environ.setdefault(key, value)
    print(f"tracking: {uri} (an unanswered request is retried {os.environ['MLFLOW_HTTP_REQUEST_MAX_RETRIES']} times, "
          f"{os.environ['MLFLOW_HTTP_REQUEST_TIMEOUT']} s each; MLFLOW_HTTP_REQUEST_MAX_RETRIES / _TIMEOUT to wait longer)",
          file=sys.stderr, flush=True)


def _open_experiment(uri: str, name: str) -> Any:
    """The experiment `name` on the tracking store `uri`; an unreachable server named, with what to do."""
    bound_http_patience(uri)
    mlflow.set_tracking_uri(uri)
    try:
        return mlflow.set_experiment(name)
    except Exception as err:  # MlflowException or a requests error, whichever the failure was
        if not _is_server(uri):
            raise
        raise RuntimeError(f"the MLflow tracking server {uri} did not answer ({type(err).__name__}: {str(err)[:300]}). "
                           "Check that the server and its database are up (`make team-server`), or unset "
                           "MLFLOW_TRACKING_URI / tracking.uri to log to this checkout's own store") from err


def run_context() -> dict[str, str]:
    """What launched this run: a DVC stage (`pipeline`, with the experiment's name and baseline commit when it is a
    `dvc exp run`) or a person running the notebook (`interactive`)."""
    tags = {"run_kind": "pipeline" if os.environ.get("DVC_STAGE") else "interactive"}
    if os.environ.get("DVC_EXP_NAME"):
        tags["dvc_experiment"] = os.environ["DVC_EXP_NAME"]
    if os.environ.get("DVC_EXP_BASELINE_REV"):
        tags["dvc_baseline_rev"] = os.environ["DVC_EXP_BASELINE_REV"]
    return tags


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


EXPERIMENT_KIND = "mlflow.experimentKind"


def provenance_tags(root: Path, stage: str, notebook: str) -> dict[str, str]:
    commit = _git(root, "rev-parse", "HEAD")
    # Neither makes the checkout dirty: dvc.lock, rewritten by `dvc repro` itself between stages, and the stage's own
    # outputs, which DVC deletes before running it (git-tracked reports with `cache: false`).
    excluded = [f":(exclude){path}" for path in ["dvc.lock", *stage_outputs(root, stage)]]
    status = _git(root, "status", "--porcelain", "--untracked-files=no", "--", ".", *excluded)
    return {
        "git_commit": commit or "unknown",
        "git_dirty": "unknown" if status is None else str(bool(status)).lower(),
        "dvc_stage": stage,
        "polarcatalog_version": __version__,
        "mlflow.source.name": f"notebooks/{notebook}",
        **run_context(),
    }


class StageRun:
    """The open MLflow run of one stage; every logging call of a notebook goes through it."""

    def __init__(self, stage: str, run: mlflow.ActiveRun, root: Path, executed_notebook: str | None, log_notebook: bool,
                 params: dict[str, Any]):
        self.stage, self.run, self.root, self.params = stage, run, root, params
        self.executed_notebook = executed_notebook
        self.log_notebook_enabled = log_notebook
        self.run_id = run.info.run_id
        self.closed = False

    # -- logging -------------------------------------------------------------------------------
    def log_metrics(self, metrics: dict[str, Any], prefix: str = "") -> None:
        mlflow.log_metrics(numeric_metrics(metrics, prefix), run_id=self.run_id)

    def log_figure(self, fig: Any, path: str | Path) -> Path:
        """Save under reports/figures (the DVC output), attach to the run, and show it in the notebook: the saved PNG
        itself, so the executed notebook holds the same bytes as the file (the stage modules draw with matplotlib's
        Agg backend, which leaves no inline figure of its own)."""
        path = self.root / path
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120, bbox_inches="tight")
        mlflow.log_artifact(str(path), artifact_path="figures", run_id=self.run_id)
        _show_png(path)
        return path

    def log_table(self, df: pd.DataFrame, name: str) -> None:
        mlflow.log_text(df.to_markdown(index=False), f"tables/{name}.md", run_id=self.run_id)

    def log_child(self, name: str, point: dict[str, Any], metrics: dict[str, Any]) -> str:
        """One nested run under this stage's run (an ablation value under its axis), same provenance tags, with the
        full effective configuration of its point: the stage's params with `point`'s dotted keys put in, so MLflow's
        compare view lines children up by any param."""
        parent = mlflow.get_run(self.run_id)
        tags = {k: v for k, v in parent.data.tags.items() if not k.startswith("mlflow.")} | {"mlflow.parentRunId": self.run_id}
        with mlflow.start_run(run_name=name, nested=True, tags=tags) as child:
            mlflow.log_params({**self.params, **flatten(point)})
            mlflow.log_metrics(numeric_metrics(metrics))
            return child.info.run_id

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        mlflow.log_artifact(str(self.root / path), artifact_path=artifact_path, run_id=self.run_id)

    def _log_notebook(self) -> None:
        """The executed notebook as papermill has written it so far, and as HTML, which MLflow's artifact view shows
        as a page (the .ipynb shows there as raw JSON)."""
        if self.log_notebook_enabled and self.executed_notebook:
            nb = self.root / self.executed_notebook
            if nb.is_file():
                mlflow.log_artifact(str(nb), artifact_path="notebook", run_id=self.run_id)
                mlflow.log_text(notebook_html(nb), f"notebook/{nb.stem}.html", run_id=self.run_id)

    # -- ending --------------------------------------------------------------------------------
    def finish(self) -> None:
        if self.closed:
            return
        self._log_notebook()
        mlflow.end_run("FINISHED")
        self.closed = True

    def fail(self, error: BaseException) -> None:
        """End this stage's run as FAILED (KILLED for an interrupt), whatever state the fluent API is in: every call
        names the run, so a failure inside `finish()` (after MLflow already ended the active run) cannot open a stray
        auto-named run instead of closing this one."""
        if self.closed:
            return
        client = mlflow.MlflowClient()
        text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        try:
            client.set_tag(self.run_id, "error", f"{type(error).__name__}: {error}"[:5000])
            mlflow.log_text(text, "error.txt", run_id=self.run_id)
            self._log_notebook()
        finally:  # the status first of all: a run left RUNNING is what the user would see
            client.set_terminated(self.run_id, "KILLED" if isinstance(error, KeyboardInterrupt) else "FAILED")
            active = mlflow.active_run()
            if active is not None and active.info.run_id == self.run_id:
                mlflow.end_run("KILLED" if isinstance(error, KeyboardInterrupt) else "FAILED")
            self.closed = True


def _show_png(path: Path) -> None:
    try:
        from IPython import get_ipython  # optional: only inside a notebook kernel
        from IPython.display import Image, display
    except ImportError:
        return
    if get_ipython() is not None:
        display(Image(filename=str(path)))


def notebook_html(path: Path) -> str:
    from polarcatalog.runner.nbfile import import_nbformat  # heavy: jsonschema; only finish() needs it

    nbformat = import_nbformat()  # before nbconvert, which imports nbformat: without jsonschema's IRI grammar
    from nbconvert import HTMLExporter  # heavy: ~0.5 s, paid by every stage's kernel if imported at the top
    html, _ = HTMLExporter(template_name="lab").from_notebook_node(nbformat.read(path, as_version=4))
    return html


def declared_params(root: Path, stage: str, params: Params) -> dict[str, Any]:
    """The params `stage` declares in dvc.yaml (a section, or a dotted key), flattened, with their validated values."""
    values = params.model_dump(mode="json")
    out: dict[str, Any] = {}
    for key in declaration(root, stage).get("params", []):
        if not isinstance(key, str):
            raise ValueError(f"dvc.yaml stage {stage.partition('@')[0]}: params must be keys of params.yaml, got {key!r}")
        value: Any = values
        for part in key.split("."):
            value = value[part]
        out |= flatten(value, key + ".") if isinstance(value, dict) else {key: value}
    return out


def start_stage(notebook: str, params: Params, executed_notebook: str | None = None, item: str | None = None) -> StageRun:
    """Open the MLflow run of the notebook's DVC stage, log its declared params and provenance, arm
    FAILED-on-exception."""
    root = repo_root()
    stage = dvc_stage(root, notebook, item)
    experiment = _open_experiment(tracking_uri(root, params.tracking.uri), params.tracking.experiment)
    if experiment.tags.get(EXPERIMENT_KIND) != "custom_model_development":
        # MLflow 3's UI opens an experiment without a kind on its GenAI overview; this kind opens it on the runs list
        mlflow.set_experiment_tag(EXPERIMENT_KIND, "custom_model_development")
    if mlflow.active_run() is not None:  # re-running the notebook top to bottom in JupyterLab
        mlflow.end_run("KILLED")
    close_orphans(experiment.experiment_id)
    tags = provenance_tags(root, stage, notebook) | machine_tags()
    # the experiment first: the runs list cuts long names, and the experiment is what differs between two runs of a stage
    name = f"{tags['dvc_experiment']} · {stage}" if "dvc_experiment" in tags else stage
    run = mlflow.start_run(run_name=name, tags=tags)
    declared = declared_params(root, stage, params)
    mlflow.log_params(declared)
    stage_run = StageRun(stage, run, root, executed_notebook, params.tracking.log_notebook, declared)
    _arm_ipython(stage_run)
    return stage_run


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _read_id(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def machine_tags() -> dict[str, str]:
    """Which machine and which boot of it a run's process lives on: a host name is not unique (two machines, or a
    container image's clones, can share one), and a pid means something only within one boot."""
    return {"host": socket.gethostname(), "machine_id": _read_id("/etc/machine-id") or _read_id("/var/lib/dbus/machine-id"),
            "boot_id": _read_id("/proc/sys/kernel/random/boot_id"), "pid": str(os.getpid())}


def close_orphans(experiment_id: str) -> list[str]:
    """End as KILLED every RUNNING run of this machine whose process is gone: a stage killed by SIGKILL, the OOM killer
    or a power cut never reaches its FAILED hook, and its run would show as RUNNING for ever. A run is this machine's
    when its machine id matches (not only its host name); its process is gone when its pid is dead in this boot, or it
    ran in an earlier boot. Runs without a machine id are left alone. Returns their ids."""
    client = mlflow.MlflowClient()
    me = machine_tags()
    runs = client.search_runs([experiment_id], f"attributes.status = 'RUNNING' and tags.host = '{me['host']}'", max_results=1000)
    closed = []
    for run in runs:
        tags = run.data.tags
        pid = tags.get("pid", "")
        if not me["machine_id"] or tags.get("machine_id") != me["machine_id"] or not pid.isdigit():
            continue
        if tags.get("boot_id") == me["boot_id"] and _alive(int(pid)):
            continue
        why = f"process {pid} was gone" if tags.get("boot_id") == me["boot_id"] else "it ran before this machine's last boot"
        client.set_tag(run.info.run_id, "ended_by", f"orphan cleanup: {why} on {me['host']}")
        client.set_terminated(run.info.run_id, "KILLED")
        closed.append(run.info.run_id)
    return closed


def _arm_ipython(stage_run: StageRun) -> None:
    try:
        from IPython import get_ipython  # optional: only inside a notebook kernel
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return

    def on_error(self: Any, etype: type, value: BaseException, tb: Any, tb_offset: int | None = None) -> list[str]:
        # IPython's run_code calls this and discards the return value: show the traceback ourselves (with the
        # hook disarmed, so the normal path runs) so papermill records the error output and stops.
        self.set_custom_exc((), None)
        self.showtraceback((etype, value, tb), tb_offset=tb_offset)
        stage_run.fail(value)
        return []

    shell.set_custom_exc((Exception, KeyboardInterrupt), on_error)  # an interrupted stage ends KILLED, not RUNNING
