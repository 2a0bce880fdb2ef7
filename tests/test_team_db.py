"""Team mode's database (`make team-db`): a real PostgreSQL cluster from the OS's binaries, as `polarcatalog-tools
team-db` starts it. Any local account can reach 127.0.0.1, so every connection must need a password, the tracking
server's role must not be a superuser (`COPY ... TO PROGRAM` runs shell commands as the `postgres` OS user), and no
password may appear on a command line or in output."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from polarcatalog_tools import team

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def cluster():
    try:
        team.postgres_bin("initdb")
    except FileNotFoundError as err:
        pytest.skip(str(err))
    data = Path(tempfile.mkdtemp(prefix="polarcatalog-pg-"))  # outside root's 0700 pytest folder: postgres must reach it
    port = _free_port()
    yield data, port, team.start_postgres(data, port)
    team.stop_postgres(data)
    shutil.rmtree(data, ignore_errors=True)
    shutil.rmtree(team.secrets_dir(data), ignore_errors=True)


def _psql(uri: str, sql: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("PGPASSWORD", "PGPASSFILE")}
    return subprocess.run([team.postgres_bin("psql"), uri, "-w", "-tAc", sql], capture_output=True, text=True,
                          env={**clean, "PGPASSFILE": "/nonexistent", **env}, timeout=60)


def test_the_team_database_needs_a_password_and_its_role_is_no_superuser(cluster):
    data, port, uri = cluster
    assert ":" not in uri.split("//")[1].split("@")[0]  # no password in the URI
    for user, db in (("mlflow", "mlflow"), (team.ADMIN_USER, "postgres"), ("postgres", "postgres")):
        refused = _psql(f"postgresql://{user}@127.0.0.1:{port}/{db}", "SELECT 1")
        assert refused.returncode != 0 and "password" in refused.stderr, (user, refused.stdout, refused.stderr)
    pgpass = team.pgpass_file(data)
    assert stat.S_IMODE(pgpass.stat().st_mode) == 0o600
    allowed = _psql(uri, "SELECT rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = current_user",
                    PGPASSFILE=str(pgpass))
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stdout.strip() == "f|f|f"
    program = _psql(uri, "COPY (SELECT 1) TO PROGRAM 'true'", PGPASSFILE=str(pgpass))
    assert program.returncode != 0 and "must be superuser" in program.stderr


def test_team_db_refuses_a_folder_that_is_not_a_cluster_and_team_server_a_password_on_its_command_line(tmp_path):
    tools = str(Path(sys.executable).parent / "polarcatalog-tools")
    (tmp_path / "keep.txt").write_text("mine")
    proc = subprocess.run([tools, "team-db", "--dir", str(tmp_path), "--port", str(_free_port())], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and "is not empty and holds no PostgreSQL cluster" in proc.stderr
    assert (tmp_path / "keep.txt").read_text() == "mine" and tmp_path.stat().st_uid == os.getuid()
    proc = subprocess.run([tools, "team-server", "--backend", "postgresql://mlflow:s3cret@127.0.0.1:5432/mlflow",
                           "--artifacts", str(tmp_path / "a")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "pgpass" in proc.stderr and "s3cret" not in proc.stdout + proc.stderr
