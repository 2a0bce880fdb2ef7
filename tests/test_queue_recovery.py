"""A `dvc queue` worker killed mid-stage (SIGKILL, the OOM killer) leaves an experiment DVC shows "Running" forever,
an orphaned executor still running its stages, and its temporary workspace: `polarcatalog experiments` must say so
and `polarcatalog queue-recover` must close it. A real DVC queue with a real celery worker, on a one-stage repo."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import repo_env, run_ok

pytestmark = pytest.mark.slow  # a real queue worker: about a minute


def _pids_with(text: str) -> list[int]:
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if text in (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    out.append(int(proc.name))
            except OSError:
                continue
    return out


def _wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _status_line(repo: Path, env: dict[str, str], name: str) -> str:
    status = run_ok(["dvc", "queue", "status"], repo, env).stdout
    return next(line for line in status.splitlines() if f" {name} " in line)


def test_a_queue_worker_killed_mid_stage_is_reported_and_recovered(tmp_path):
    marker = f"stage-{uuid.uuid4().hex}"  # names the stage's process, so the test finds it (and kills it at the end)
    repo = tmp_path / "repo"
    repo.mkdir()
    env = repo_env(repo, {})
    (repo / "params.yaml").write_text("x: 1\n")
    (repo / "dvc.yaml").write_text(
        "stages:\n  slow:\n"
        f"    cmd: python -c \"import time; time.sleep(900)\" {marker} ${{x}}\n"
        "    params: [x]\n    outs:\n      - out.txt:\n          cache: false\n")
    for cmd in (["git", "init", "-q"], ["dvc", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "init"],
                ["dvc", "exp", "run", "--queue", "-S", "x=2", "--name", "stranded"]):
        run_ok(cmd, repo, env)
    try:
        subprocess.run(["dvc", "queue", "start", "-j", "1"], cwd=repo, env=env, check=True, timeout=120,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # the worker must not hold our pipes
        _wait_for(lambda: _pids_with(marker), 240, "the queued stage to start")
        run = next((repo / ".dvc/tmp/exps/run").iterdir())
        executor = json.loads((run / f"{run.name}.json").read_text())["pid"]
        info = json.loads((run / f"{run.name}.run").read_text())
        workspace = Path(info["root_dir"])
        worker = int(Path(f"/proc/{executor}/stat").read_text().rsplit(")", 1)[1].split()[1])
        assert "queue-worker" in Path(f"/proc/{worker}/cmdline").read_bytes().decode(errors="replace")
        os.kill(worker, signal.SIGKILL)
        _wait_for(lambda: not Path(f"/proc/{worker}/cmdline").exists() or not Path(f"/proc/{worker}/cmdline").read_bytes(),
                  30, "the worker to die")

        # what the user met: DVC still shows it running, and the orphaned stage goes on
        assert "Running" in _status_line(repo, env, "stranded") and _pids_with(marker)
        polarcatalog = [str(Path(sys.executable).parent / "polarcatalog")]
        listed = run_ok([*polarcatalog, "queue-recover", "--dry-run"], repo, env).stdout
        assert "stranded" in listed and "queue worker is dead" in listed and f"pid {executor}" in listed
        shown = subprocess.run([*polarcatalog, "experiments"], cwd=repo, env=env, capture_output=True, text=True)
        assert "polarcatalog queue-recover" in shown.stderr

        done = run_ok([*polarcatalog, "queue-recover"], repo, env).stdout
        assert "stopped its executor" in done and "marked Failed" in done, done
        _wait_for(lambda: not _pids_with(marker), 30, "the orphaned stage to stop")
        assert "Failed" in _status_line(repo, env, "stranded")
        assert not workspace.exists()
        assert "no stranded experiments" in run_ok([*polarcatalog, "queue-recover"], repo, env).stdout
    finally:
        for pid in _pids_with(marker) + _pids_with(str(repo)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        subprocess.run(["dvc", "queue", "stop", "--kill"], cwd=repo, env=env, capture_output=True, timeout=120)


def test_a_finished_workspace_experiment_is_not_reported_stranded(tmp_path):
    """`dvc exp run -S ...` in the workspace (the README's first example) leaves its run record `status: 1` with no
    executor: `experiments` warned after every such run that its queue worker was dead, and `queue-recover` looped
    on "run again". Only queued and temporary runs have a worker to lose."""
    from polarcatalog.runner.queue_recovery import find_stranded

    repo = tmp_path / "repo"
    repo.mkdir()
    env = repo_env(repo, {})
    (repo / "params.yaml").write_text("x: 1\n")
    (repo / "dvc.yaml").write_text("stages:\n  quick:\n    cmd: python -c \"open('out.txt', 'w').write('${x}')\"\n"
                                   "    params: [x]\n    outs:\n      - out.txt:\n          cache: false\n")
    for cmd in (["git", "init", "-q"], ["dvc", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "init"],
                ["dvc", "exp", "run", "-S", "x=2", "--name", "in-workspace"]):
        run_ok(cmd, repo, env)
    records = [json.loads(f.read_text()) for f in (repo / ".dvc/tmp/exps/run").glob("*/*.run")]
    assert [(r["location"], r["status"]) for r in records] == [("workspace", 1)]  # what DVC leaves behind
    assert find_stranded(repo) == []
    polarcatalog = [str(Path(sys.executable).parent / "polarcatalog")]
    assert "queue worker is dead" not in run_ok([*polarcatalog, "experiments"], repo, env).stderr
    assert "no stranded experiments" in run_ok([*polarcatalog, "queue-recover"], repo, env).stdout
