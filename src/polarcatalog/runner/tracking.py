"""One MLflow run per stage run, opened the same way by every notebook.

`start_stage("05_ablate.ipynb", params, executed_notebook, item="lam")` finds the notebook's DVC stage in
`dvc.yaml` (here `ablate@lam`) and opens a run named after it in the experiment from params. It logs exactly the
params that stage declares in `dvc.yaml` (one record of what a stage reads) and provenance tags, and hooks IPython
so that a cell that raises ends the run as FAILED, with the traceback and the executed notebook so far.
`StageRun.finish()`, the notebook's last cell, logs the executed notebook (as .ipynb and as HTML) and ends the run
FINISHED.

The MLflow calls run in a companion process (`runner.tracking_companion`), not in the kernel: importing MLflow and
opening its store costs seconds, which the companion spends on the core a single-threaded stage leaves idle. The
kernel sends it one line per call and waits only for the run id when asked, and in `finish()` / `fail()`, so the run
is complete when the stage ends; a kernel that dies without either closes the pipe, and the run ends KILLED.

Where runs go (`tracking_uri`): MLFLOW_TRACKING_URI if set, else `tracking.uri` from params (a team's tracking
server), else `sqlite:///<project>/mlflow.db`. The project is DVC_ROOT when DVC runs the stage: DVC sets it to the
main repository even for `dvc exp run --temp` and queued experiments, whose copies under `.dvc/tmp/exps/` are
deleted afterwards, with any store inside them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import socket
import sys
import subprocess
import time
import traceback
from pathlib import Path
from typing import Any, IO

from polarcatalog import __version__
from polarcatalog.runner import warm_kernel
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


def is_server(uri: str) -> bool:
    return uri.startswith(("http://", "https://"))


def bound_http_patience(uri: str) -> None:
    """For a server URI, MLflow's HTTP retries bounded by HTTP_PATIENCE (unless set), and one line saying so."""
    if not is_server(uri):
        return
    for key, value in HTTP_PATIENCE.items():
        os.environ.setdefault(key, value)
    print(f"tracking: {uri} (an unanswered request is retried {os.environ['MLFLOW_HTTP_REQUEST_MAX_RETRIES']} times, "
          f"{os.environ['MLFLOW_HTTP_REQUEST_TIMEOUT']} s each; MLFLOW_HTTP_REQUEST_MAX_RETRIES / _TIMEOUT to wait longer)",
          file=sys.stderr, flush=True)


def run_context() -> dict[str, str]:
    """What launched this run: a DVC stage (`pipeline`, with the experiment's name and baseline commit when it is a
    `dvc exp run`) or a person running the notebook (`interactive`)."""
    tags = {"run_kind": "pipeline" if os.environ.get("DVC_STAGE") else "interactive"}
    if os.environ.get("DVC_EXP_NAME"):
        tags["dvc_experiment"] = os.environ["DVC_EXP_NAME"]
    if os.environ.get("DVC_EXP_BASELINE_REV"):
        tags["dvc_baseline_rev"] = os.environ["DVC_EXP_BASELINE_REV"]
    return tags


def git_output(root: Path, *args: str) -> str | None:
    """`git <args>`'s output in `root`, or None outside git (or when git fails): provenance never stops a run."""
    try:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


EXPERIMENT_KIND = "mlflow.experimentKind"


def provenance_tags(root: Path, stage: str, notebook: str) -> dict[str, str]:
    commit = git_output(root, "rev-parse", "HEAD")
    # Neither makes the checkout dirty: dvc.lock, rewritten by `dvc repro` itself between stages, and the stage's own
    # outputs, which DVC deletes before running it (git-tracked reports with `cache: false`).
    excluded = [f":(exclude){path}" for path in ["dvc.lock", *stage_outputs(root, stage)]]
    status = git_output(root, "status", "--porcelain", "--untracked-files=no", "--", ".", *excluded)
    return {
        "git_commit": commit or "unknown",
        "git_dirty": "unknown" if status is None else str(bool(status)).lower(),
        "dvc_stage": stage,
        "polarcatalog_version": __version__,
        "mlflow.source.name": f"notebooks/{notebook}",
        **run_context(),
    }


PIPE_BYTES = 1 << 20


class Companion:
    """The kernel's end of the pipe to `runner.tracking_companion`."""

    def __init__(self, start: dict[str, Any]):
        # forked from the stage runner's warm process, which has imported MLflow (runner/warm_kernel.py), if any
        self.proc = subprocess.Popen(warm_kernel.command([sys.executable, "-m", "polarcatalog.runner.tracking_companion"]),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8")
        # A pipe holds 64 KiB; an ablation's child runs (each with the stage's full params) fill it while MLflow is
        # still writing the first ones, and the kernel would wait on the companion, mid-computation. With 1 MiB (the
        # largest an unprivileged process may ask for) it keeps computing; `close` waits for the backlog.
        with contextlib.suppress(OSError, AttributeError):
            fcntl.fcntl(self.proc.stdin.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)  # type: ignore[union-attr]
        self._run_id: str | None = None
        self.send("start", **start)

    def send(self, op: str, **payload: Any) -> None:
        try:
            self.proc.stdin.write(json.dumps({"op": op, **payload}) + "\n")  # type: ignore[union-attr]
            self.proc.stdin.flush()  # type: ignore[union-attr]
        except (BrokenPipeError, ValueError):  # the companion ended: it said why, before it went
            raise RuntimeError(self._reason()) from None

    def _reply(self) -> dict[str, Any]:
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise RuntimeError(self._reason())
        message = json.loads(line)
        if "error" in message:
            raise RuntimeError(message["error"])
        return message

    def _reason(self) -> str:
        rest = _read_all(self.proc.stdout)
        for line in rest.splitlines():
            if '"error"' in line:
                return json.loads(line)["error"]
        return f"the MLflow companion process ended (exit code {self.proc.wait()}); its messages are above"

    @property
    def run_id(self) -> str:
        if self._run_id is None:
            self._run_id = self._reply()["run_id"]
        return self._run_id

    def close(self, op: str, **payload: Any) -> None:
        """The last call (`finish` or `fail`); returns when the run is complete in the store."""
        try:
            self.run_id  # the start's reply first: a store that never opened is the error to report
            self.send(op, **payload)
            self._reply()
        finally:
            self.proc.stdin.close()  # type: ignore[union-attr]
            self.proc.wait()


def _read_all(stream: IO[str] | None) -> str:
    try:
        return stream.read() if stream else ""
    except (OSError, ValueError):
        return ""


class StageRun:
    """The open MLflow run of one stage; every logging call of a notebook goes through it."""

    def __init__(self, stage: str, companion: Companion, root: Path, executed_notebook: str | None, log_notebook: bool,
                 params: dict[str, Any]):
        self.stage, self.companion, self.root, self.params = stage, companion, root, params
        self.executed_notebook = executed_notebook
        self.log_notebook_enabled = log_notebook
        self.closed = False

    @property
    def run_id(self) -> str:
        """The run's MLflow id: the companion's first reply (waited for here, and only here)."""
        return self.companion.run_id

    # -- logging -------------------------------------------------------------------------------
    def log_metrics(self, metrics: dict[str, Any], prefix: str = "") -> None:
        self.companion.send("metrics", metrics=numeric_metrics(metrics, prefix))

    def log_figure(self, fig: Any, path: str | Path) -> Path:
        """Save under reports/figures (the DVC output), attach to the run, and show it in the notebook: the saved PNG
        itself, so the executed notebook holds the same bytes as the file (the stage modules draw with matplotlib's
        Agg backend, which leaves no inline figure of its own)."""
        path = self.root / path
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120, bbox_inches="tight")
        self.companion.send("artifact", path=str(path), artifact_path="figures")
        _show_png(path)
        return path

    def log_table(self, df: Any, name: str) -> None:
        self.companion.send("text", text=df.to_markdown(index=False), name=f"tables/{name}.md")

    def log_child(self, name: str, point: dict[str, Any], metrics: dict[str, Any]) -> None:
        """One nested run under this stage's run (an ablation value under its axis), same provenance tags, with the
        full effective configuration of its point: the stage's params with `point`'s dotted keys put in, so MLflow's
        compare view lines children up by any param."""
        self.companion.send("child", name=name, params={**self.params, **flatten(point)},
                            metrics=numeric_metrics(metrics))

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        self.companion.send("artifact", path=str(self.root / path), artifact_path=artifact_path)

    def _notebook(self) -> str | None:
        """The executed notebook as papermill has written it so far (the companion logs it, and its HTML)."""
        if self.log_notebook_enabled and self.executed_notebook:
            return str(self.root / self.executed_notebook)
        return None

    # -- ending --------------------------------------------------------------------------------
    def finish(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.companion.close("finish", notebook=self._notebook())

    def fail(self, error: BaseException | None, status: str | None = None) -> None:
        """End this stage's run as FAILED (KILLED for an interrupt), with the error and the executed notebook so far."""
        if self.closed:
            return
        self.closed = True
        text = None if error is None else "".join(traceback.format_exception(type(error), error, error.__traceback__))
        self.companion.close("fail", status=status or ("KILLED" if isinstance(error, KeyboardInterrupt) else "FAILED"),
                             error=None if error is None else f"{type(error).__name__}: {error}", traceback=text,
                             notebook=self._notebook())


def _show_png(path: Path) -> None:
    try:
        from IPython import get_ipython  # optional: only inside a notebook kernel
        from IPython.display import Image, display
    except ImportError:
        return
    if get_ipython() is not None:
        display(Image(filename=str(path)))


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


_current: StageRun | None = None  # the kernel's open run: a notebook run again from the top ends it first


def start_stage(notebook: str, params: Params, executed_notebook: str | None = None, item: str | None = None) -> StageRun:
    """Open the MLflow run of the notebook's DVC stage, log its declared params and provenance, arm
    FAILED-on-exception."""
    global _current
    root = repo_root()
    stage = dvc_stage(root, notebook, item)
    if _current is not None and not _current.closed:  # re-running the notebook top to bottom in JupyterLab
        _current.fail(None, status="KILLED")
    tags = provenance_tags(root, stage, notebook) | machine_tags()
    # the experiment first: the runs list cuts long names, and the experiment is what differs between two runs of a stage
    name = f"{tags['dvc_experiment']} · {stage}" if "dvc_experiment" in tags else stage
    uri = tracking_uri(root, params.tracking.uri)
    bound_http_patience(uri)  # in this process's environment, which the companion inherits
    declared = declared_params(root, stage, params)
    companion = Companion({"uri": uri, "experiment": params.tracking.experiment, "run_name": name, "tags": tags,
                           "params": declared, "start_time": int(time.time() * 1000)})
    stage_run = StageRun(stage, companion, root, executed_notebook, params.tracking.log_notebook, declared)
    if is_server(uri):  # a team server: an unreachable one stops the stage here, not at its first log call
        stage_run.run_id  # noqa: B018
    _current = stage_run
    _arm_ipython(stage_run)
    return stage_run


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
