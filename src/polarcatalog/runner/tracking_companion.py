"""The MLflow side of a stage run, in a process of its own beside the stage's kernel (`runner.tracking`).

Importing MLflow and opening its store (SQLAlchemy, alembic) costs a kernel seconds, and logging a child run
or an artifact blocks it on the store's commits. A stage computes on one thread (`polarcatalog.numerics`), so the
machine's other core is idle: this process pays those costs there while the stage computes. The kernel writes one
JSON line per call to this process's stdin and reads its replies (the run id; `done` or an error) on its stdout:

    {"op": "start", "uri": ..., "experiment": ..., "run_name": ..., "tags": {...}, "params": {...}}  -> {"run_id": ...}
    {"op": "metrics", "metrics": {...}} | {"op": "artifact", "path": ..., "artifact_path": ...}
    {"op": "text", "text": ..., "name": ...} | {"op": "child", "name": ..., "params": {...}, "metrics": {...}}
    {"op": "finish", "notebook": path | null}                                                  -> {"done": true}
    {"op": "fail", "status": "FAILED" | "KILLED", "error": ..., "traceback": ..., "notebook": ...} -> {"done": true}

A kernel that ends without `finish` or `fail` (SIGKILL, the OOM killer, `os._exit`) closes the pipe: the run ends
KILLED, saying so. Ctrl-C reaches the whole process group; this process ignores it, so the kernel's interrupt
handler can still end the run KILLED through it.

    python -m polarcatalog.runner.tracking_companion    (started by `tracking.start_stage`, never by hand)
"""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, TextIO

import mlflow
from mlflow.tracking.context import registry

from polarcatalog.runner.nbfile import import_nbformat
from polarcatalog.runner.tracking import EXPERIMENT_KIND, is_server, machine_tags

PARAMS_PER_CALL = 100  # MLflow's limit of params in one log_batch


def open_experiment(uri: str, name: str) -> Any:
    """The experiment `name` on the tracking store `uri`; an unreachable server named, with what to do. (The bounded
    HTTP retries are in the environment the kernel set, `tracking.bound_http_patience`, which this process inherits.)"""
    mlflow.set_tracking_uri(uri)
    try:
        experiment = mlflow.set_experiment(name)
    except Exception as err:  # MlflowException or a requests error, whichever the failure was
        if not is_server(uri):
            raise
        raise RuntimeError(f"the MLflow tracking server {uri} did not answer ({type(err).__name__}: {str(err)[:300]}). "
                           "Check that the server and its database are up (`make team-server`), or unset "
                           "MLFLOW_TRACKING_URI / tracking.uri to log to this checkout's own store") from err
    if experiment.tags.get(EXPERIMENT_KIND) != "custom_model_development":
        # MLflow 3's UI opens an experiment without a kind on its GenAI overview; this kind opens it on the runs list
        mlflow.MlflowClient().set_experiment_tag(experiment.experiment_id, EXPERIMENT_KIND, "custom_model_development")
    return experiment


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def close_orphans(experiment_id: str) -> list[str]:
    """End as KILLED every RUNNING run of this machine whose process is gone: a stage killed together with this
    process (SIGKILL of the process group, a power cut) never ended its run, which would show as RUNNING for ever. A
    run is this machine's when its machine id matches (not only its host name); its process is gone when its pid is
    dead in this boot, or it ran in an earlier boot. Runs without a machine id are left alone. Returns their ids."""
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


@functools.cache
def _html_exporter() -> Any:
    """nbconvert's HTML exporter, built once: `serve` builds it while the stage computes, so that `finish()`, which
    the kernel waits for, only renders."""
    import_nbformat()  # before nbconvert, which imports nbformat: without jsonschema's IRI grammar
    from nbconvert import HTMLExporter  # heavy: after import_nbformat, which must come first

    return HTMLExporter(template_name="lab")


def warm_up() -> None:
    """Import MLflow's SQLAlchemy store (and GitPython), and render a small notebook with every kind of output a stage notebook has (a
    highlighted code cell, a stream, a table as HTML, a figure, Markdown), so that templates, lexers and sanitiser are
    loaded and compiled: the warm process calls this before it forks any companion (`runner.warm_kernel`). MLflow
    imports its store on the first call to a sqlite or database URI, and that import (the ORM's models, their mappers
    configured) is most of what a companion's start would cost; a companion's first render, inside the `finish()` a
    stage waits for, costs only what the notebook's own size does. Imports and templates only: no store is opened (a
    database connection must not cross a fork)."""
    import mlflow.store.tracking.sqlalchemy_store  # noqa: F401  # heavy: the warm process's preload, not every companion's
    try:  # GitPython, which MLflow's git context imports as a companion resolves its run's tags (the source commit)
        import git  # noqa: F401  # heavy: likewise
    except ImportError:  # no git executable: MLflow's context then records no commit, and neither does this
        pass

    nbformat = import_nbformat()
    v4 = nbformat.v4
    outputs = [v4.new_output("stream", name="stderr", text="progress\n"),
               v4.new_output("execute_result", {"text/html": "<table><tr><th>a</th></tr><tr><td>1</td></tr></table>",
                                                "text/plain": "a\n1"}, execution_count=1),
               v4.new_output("display_data", {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}),
               v4.new_output("display_data", {"text/markdown": "# A\n\n| a | b |\n|---|---|\n| 1 | *2* |", "text/plain": "A"})]
    nb = v4.new_notebook(cells=[v4.new_markdown_cell("# Title\n\nText with `code` and a [link](https://example.org)."),
                                v4.new_code_cell("import os\nx = {'a': 1}  # comment\nprint(f'{x}')", outputs=outputs,
                                                 execution_count=1)],
                         metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                                   "language_info": {"name": "python", "pygments_lexer": "ipython3"}})
    _html_exporter().from_notebook_node(nb)


def notebook_html(path: Path) -> str:
    html, _ = _html_exporter().from_notebook_node(import_nbformat().read(path, as_version=4))
    return html


def _log_params(client: Any, run_id: str, params: dict[str, Any]) -> None:
    items = [mlflow.entities.Param(k, str(v)) for k, v in params.items()]
    for i in range(0, len(items), PARAMS_PER_CALL):
        client.log_batch(run_id, params=items[i:i + PARAMS_PER_CALL])


class RunLog:
    """The stage's run: every call names it by id (no fluent state that a failure could leave half-ended)."""

    def __init__(self, start: dict[str, Any]):
        experiment = open_experiment(start["uri"], start["experiment"])
        close_orphans(experiment.experiment_id)
        self.client = mlflow.MlflowClient()
        self.tags = start["tags"]
        self.params = start["params"]
        self.run_id = self.client.create_run(experiment.experiment_id, start["start_time"], _resolved(self.tags),
                                             start["run_name"]).info.run_id
        self.experiment_id = experiment.experiment_id
        _log_params(self.client, self.run_id, self.params)

    def metrics(self, metrics: dict[str, float]) -> None:
        self.client.log_batch(self.run_id, metrics=[mlflow.entities.Metric(k, v, _now(), 0) for k, v in metrics.items()])

    def artifact(self, path: str, artifact_path: str | None = None) -> None:
        self.client.log_artifact(self.run_id, path, artifact_path)

    def text(self, text: str, name: str) -> None:
        self.client.log_text(self.run_id, text, name)

    def child(self, name: str, params: dict[str, Any], metrics: dict[str, float]) -> None:
        """One nested run under the stage's run, with the parent's tags (not MLflow's own) and its full params."""
        tags = {k: v for k, v in self.tags.items() if not k.startswith("mlflow.")} | {"mlflow.parentRunId": self.run_id}
        child = self.client.create_run(self.experiment_id, tags=_resolved(tags), run_name=name).info.run_id
        _log_params(self.client, child, params)
        self.client.log_batch(child, metrics=[mlflow.entities.Metric(k, v, _now(), 0) for k, v in metrics.items()])
        self.client.set_terminated(child, "FINISHED")

    def notebook(self, path: str | None) -> None:
        """The executed notebook as papermill has written it so far, and as HTML, which MLflow's artifact view shows
        as a page (the .ipynb shows there as raw JSON)."""
        if path and Path(path).is_file():
            self.client.log_artifact(self.run_id, path, "notebook")
            self.client.log_text(self.run_id, notebook_html(Path(path)), f"notebook/{Path(path).stem}.html")

    def finish(self, notebook: str | None) -> None:
        self.notebook(notebook)
        self.client.set_terminated(self.run_id, "FINISHED")

    def fail(self, status: str, error: str | None, traceback: str | None, notebook: str | None,
             ended_by: str | None = None) -> None:
        """The status first of all, whatever else fails: a run left RUNNING is what the user would see."""
        try:
            if error:
                self.client.set_tag(self.run_id, "error", error[:5000])
            if ended_by:
                self.client.set_tag(self.run_id, "ended_by", ended_by)
            if traceback:
                self.client.log_text(self.run_id, traceback, "error.txt")
            self.notebook(notebook)
        finally:
            self.client.set_terminated(self.run_id, status)


def _resolved(tags: dict[str, str]) -> dict[str, str]:
    """The tags with MLflow's own defaults beside them (user, source type), as `mlflow.start_run` adds them; the
    stage's tags win."""
    return registry.resolve_tags(tags)


def _now() -> int:
    return int(time.time() * 1000)


def serve(commands: TextIO, replies: TextIO) -> int:
    """Open the run from the first line, apply each following line, end it on `finish` / `fail` / end of input."""
    def reply(message: dict[str, Any]) -> None:
        replies.write(json.dumps(message) + "\n")
        replies.flush()

    first = commands.readline()
    if not first:
        return 0  # the kernel went before it asked for anything
    try:
        run = RunLog(json.loads(first))
    except Exception as err:  # an unreachable server, a store it cannot open: the kernel raises this
        reply({"error": f"{type(err).__name__}: {err}"})
        return 1
    reply({"run_id": run.run_id})
    _html_exporter()  # now, on the core the stage leaves idle, not in the `finish()` the kernel waits for
    for line in commands:
        message = json.loads(line)
        op = message.pop("op")
        try:
            if op == "finish":
                run.finish(message.get("notebook"))
            elif op == "fail":
                run.fail(**message)
            else:
                {"metrics": run.metrics, "artifact": run.artifact, "text": run.text, "child": run.child}[op](**message)
        except Exception as err:  # the store failed mid-run: end the run FAILED and tell the kernel why
            text = f"{type(err).__name__}: {err}"
            try:
                run.fail("FAILED", f"MLflow logging failed ({op}): {text}", None, None)
            finally:
                reply({"error": f"MLflow logging ({op}) failed: {text}"})
            return 1
        if op in ("finish", "fail"):
            reply({"done": True})
            return 0
    run.fail("KILLED", None, None, None, ended_by="the stage's kernel ended without finishing its run (killed, or the "
                                                  "process exited)")
    return 0


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the kernel, which then ends the run through here
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # whatever MLflow prints goes to stderr, never into the reply channel
    sys.exit(serve(sys.stdin, replies))


if __name__ == "__main__":
    main()
