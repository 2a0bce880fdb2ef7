"""`polarcatalog queue-recover`: queued DVC experiments whose worker died, found and closed.

When a `dvc queue` worker is killed (SIGKILL, the OOM killer, a closed SSH session), DVC loses track of the experiment
it was running: `dvc queue status` shows it "Running" forever, `dvc queue start` never picks it up again, its
temporary workspace stays under `.dvc/tmp/exps/`, and its executor, orphaned, keeps running stages (and logging
MLflow runs) that no experiment will record. DVC's own `dvc queue kill <name>` recovers it in two calls: the first
interrupts the executor (a notebook stage then closes its MLflow run as KILLED), the second, once no process is
left, marks the task failed. This module finds such experiments from DVC's own records (`.dvc/tmp/exps/run/<rev>/`:
`<rev>.run`, the executor's status and workspace; `<rev>.json`, its process) and runs those two calls for each.

An experiment is stranded when DVC records it as preparing or running and either its executor process is gone or the
executor's parent is no longer a `dvc exp queue-worker`. Linux: processes are read from /proc.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from polarcatalog.runner.commands import venv_command

EXPS_TMP = Path(".dvc/tmp/exps")  # DVC's experiment copies, and under run/ one folder of records per experiment
ACTIVE = {1, 2}  # dvc.repo.experiments.executor.base.TaskStatus: PREPARING, RUNNING


@dataclass(frozen=True)
class Stranded:
    rev: str
    name: str
    pid: int | None  # the executor (`dvc exp exec-run`), when still alive: orphaned
    workspace: Path | None  # its temporary copy under .dvc/tmp/exps/, when there is one

    def describe(self) -> str:
        where = f"executor pid {self.pid} still running without its worker" if self.pid else "executor gone"
        return f"{self.name} ({self.rev[:7]}): DVC shows it running, but its queue worker is dead; {where}"


def _cmdline(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state; the name may hold spaces


def _alive_executor(pid: int | None) -> bool:
    return pid is not None and "exec-run" in (_cmdline(pid) or "")


def _worker_alive(pid: int) -> bool:
    parent = _parent(pid)
    return parent is not None and "queue-worker" in (_cmdline(parent) or "")


def _gone(pid: int, wait_s: float) -> bool:
    """Whether process `pid` has left the process table (reaped, not a zombie) within `wait_s` seconds."""
    deadline = time.monotonic() + wait_s
    while Path(f"/proc/{pid}").exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _shown_failed(root: Path, dvc: str, rev: str) -> bool:
    status = _dvc(root, dvc, "queue", "status").stdout
    return any(line.startswith(rev[:7]) and "Failed" in line for line in status.splitlines())


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def find_stranded(root: Path) -> list[Stranded]:
    """Experiments DVC records as running whose worker is dead, oldest first."""
    runs = root / EXPS_TMP / "run"
    found = []
    for folder in sorted(runs.iterdir(), key=lambda p: p.stat().st_mtime) if runs.is_dir() else []:
        info = _read_json(folder / f"{folder.name}.run")
        # a workspace run (`dvc exp run` in the foreground) has no worker to lose, and DVC leaves its record at
        # status 1 (PREPARING) when it finishes: only queued and temporary runs can be stranded
        if info.get("status") not in ACTIVE or info.get("location") == "workspace":
            continue
        pid = _read_json(folder / f"{folder.name}.json").get("pid")
        alive = _alive_executor(pid)
        if alive and _worker_alive(pid):
            continue  # a healthy running experiment
        workspace = Path(info["root_dir"]) if info.get("root_dir") else None
        inside = workspace is not None and (root / EXPS_TMP).resolve() in workspace.resolve().parents
        found.append(Stranded(folder.name, info.get("name") or folder.name, pid if alive else None,
                              workspace if inside and workspace.is_dir() else None))
    return found


def _dvc(root: Path, dvc: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([dvc, *args], cwd=root, capture_output=True, text=True)


def recover(root: Path, dvc: str | None = None, wait_s: float = 30.0) -> list[str]:
    """Close every stranded experiment: interrupt its orphaned executor (forced after `wait_s`), mark the task failed,
    remove its temporary workspace. Returns one line per experiment saying what was done. Its log stays
    (`dvc queue logs <name>`), and `dvc queue status` / `dvc exp show` show it as Failed."""
    dvc, lines = dvc or venv_command("dvc"), []
    for entry in find_stranded(root):
        done = []
        if entry.pid is not None:
            _dvc(root, dvc, "queue", "kill", entry.rev)  # SIGINT: a notebook stage closes its MLflow run as KILLED
            if not _gone(entry.pid, wait_s):
                _dvc(root, dvc, "queue", "kill", "--force", entry.rev)
                _gone(entry.pid, wait_s)
            done.append(f"stopped its executor (pid {entry.pid})")
        for _ in range(3):  # with no process left (not even a zombie), DVC marks the task failed
            _dvc(root, dvc, "queue", "kill", entry.rev)
            if failed := _shown_failed(root, dvc, entry.rev):
                break
        if entry.workspace is not None:
            shutil.rmtree(entry.workspace, ignore_errors=True)
            done.append(f"removed its workspace {os.path.relpath(entry.workspace, root)}")
        done.append("marked Failed" if failed else "not yet marked failed: run `polarcatalog queue-recover` again")
        lines.append(f"{entry.name} ({entry.rev[:7]}): " + ", ".join(done))
    return lines
