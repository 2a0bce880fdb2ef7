"""`make team-server` beyond loopback answers the names a team reaches it by (MLflow 3 refuses any other Host header
with "Invalid Host header"): this machine's names by default, a DNS alias through `--allowed-hosts`."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from polarcatalog_tools import team

pytestmark = pytest.mark.slow  # a real `mlflow server`


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _status(port: int, host_header: str) -> int:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/2.0/mlflow/experiments/search?max_results=1", headers={"Host": host_header})
    try:
        return urllib.request.urlopen(request, timeout=10).status
    except urllib.error.HTTPError as err:
        return err.code


def test_the_team_server_answers_its_machines_name_and_a_named_alias_and_nothing_else(tmp_path):
    port = _free_port()
    mlflow = str(Path(sys.executable).parent / "mlflow")
    cmd = team.mlflow_server_command(mlflow, f"sqlite:///{tmp_path}/runs.db", tmp_path / "artifacts", "0.0.0.0", port,
                                     "mlflow.team.lan")
    server = subprocess.Popen(cmd, env={**os.environ, **team.SERVER_ENV}, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        team.wait_for_server(f"http://127.0.0.1:{port}", process=server)
        assert _status(port, f"{socket.gethostname()}:{port}") == 200
        assert _status(port, f"mlflow.team.lan:{port}") == 200
        assert _status(port, f"attacker.example:{port}") != 200
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    assert team.allowed_hosts("127.0.0.1", port) is None  # loopback: MLflow's own default
