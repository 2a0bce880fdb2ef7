"""Team mode: one MLflow tracking server on PostgreSQL, with its artifacts on a shared path, for every machine.

On one machine, runs go to `sqlite:///<repo>/mlflow.db`. For a team, one host runs `make team-server`, which is
`mlflow server --backend-store-uri postgresql://... --artifacts-destination <shared path> --serve-artifacts`, and
every machine sets `tracking.uri: http://<host>:5000` in params.yaml (or MLFLOW_TRACKING_URI). Clients upload
artifacts through the server (proxied), so they need no access to the shared path.

`local_postgres` makes a PostgreSQL cluster in a folder, from the OS's PostgreSQL binaries (Debian: `apt-get install
postgresql`), listening on 127.0.0.1 only. `make team-db` uses it for a single-host team server; the tests use it
to run a stage against a real server. A team with a managed PostgreSQL passes its URI to `make team-server` instead.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path


DB_USER = "mlflow"
DB_NAME = "mlflow"


def postgres_bin(name: str) -> str:
    """A PostgreSQL server binary: on PATH, or in Debian's versioned folder (not on PATH there)."""
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), None)
    if not found:
        raise FileNotFoundError(f"PostgreSQL's `{name}` is not installed: `apt-get install postgresql` (Debian/Ubuntu)")
    return found


def _as_db_owner(cmd: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run its binaries as the OS's `postgres` user."""
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def start_postgres(data: Path, port: int) -> str:
    """Initialise `data` (once) and start PostgreSQL on 127.0.0.1:`port`; return the SQLAlchemy URI of its `mlflow`
    database. Local trust authentication: the cluster only listens on the loopback interface."""
    data = data.resolve()
    if not (data / "PG_VERSION").is_file():
        data.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(data, "postgres", "postgres")
        subprocess.run(_as_db_owner([postgres_bin("initdb"), "-D", str(data), "-U", DB_USER, "--auth=trust",
                                     "--encoding=UTF8", "--no-instructions"]), check=True, capture_output=True)
    options = f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={data}"
    subprocess.run(_as_db_owner([postgres_bin("pg_ctl"), "-D", str(data), "-o", options, "-l", str(data / "server.log"),
                                 "-w", "start"]), check=True, capture_output=True)
    exists = subprocess.run([postgres_bin("psql"), "-h", "127.0.0.1", "-p", str(port), "-U", DB_USER, "-d", "postgres",
                             "-tAc", f"SELECT 1 FROM pg_database WHERE datname = '{DB_NAME}'"],
                            check=True, capture_output=True, text=True).stdout.strip()
    if exists != "1":
        subprocess.run([postgres_bin("createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", DB_USER, DB_NAME],
                       check=True, capture_output=True)
    return f"postgresql://{DB_USER}@127.0.0.1:{port}/{DB_NAME}"


def stop_postgres(data: Path) -> None:
    subprocess.run(_as_db_owner([postgres_bin("pg_ctl"), "-D", str(data.resolve()), "-m", "fast", "-w", "stop"]),
                   check=False, capture_output=True)


# MLflow's server otherwise starts a job runner (huey consumers, five processes) for GenAI jobs this workspace never
# submits: without it a tracking server starts in a fraction of the time and memory
SERVER_ENV = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


def mlflow_server_command(mlflow: str, backend_uri: str, artifacts: Path, host: str = "127.0.0.1",
                          port: int = 5000) -> list[str]:
    """The tracking server: runs in `backend_uri`, artifacts under `artifacts`, served through the server itself."""
    return [mlflow, "server", "--backend-store-uri", backend_uri, "--artifacts-destination", str(artifacts),
            "--serve-artifacts", "--host", host, "--port", str(port), "--workers", "2"]


def wait_for_server(url: str, timeout: float = 120.0, process: subprocess.Popen | None = None) -> None:
    """Block until the MLflow server answers its health check, or fail (with the server's own exit if it died)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the MLflow server at {url} exited with {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"no MLflow server answered at {url} within {timeout:.0f} s")
