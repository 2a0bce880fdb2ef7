"""Team mode: one MLflow tracking server on PostgreSQL, with its artifacts on a shared path, for every machine.

On one machine, runs go to `sqlite:///<repo>/mlflow.db`. For a team, one host runs `make team-server`, which is
`mlflow server --backend-store-uri postgresql://... --artifacts-destination <shared path> --serve-artifacts`, and
every machine sets `tracking.uri: http://<host>:5000` in params.yaml (or MLFLOW_TRACKING_URI). Clients upload
artifacts through the server (proxied), so they need no access to the shared path.

`start_postgres` makes a PostgreSQL cluster in a folder, from the OS's PostgreSQL binaries (Debian: `apt-get install
postgresql`), listening on 127.0.0.1 only, every connection password-authenticated; its passwords live in pgpass files
(mode 0600) beside the folder, never on a command line or in output. `make team-db` uses it for a single-host team server; the tests use it
to run a stage against a real server. A team with a managed PostgreSQL passes its URI to `make team-server` instead.
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
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


ADMIN_USER = "polarcatalog_admin"  # the cluster's superuser: setup only, never the tracking server's login


def secrets_dir(data: Path) -> Path:
    """Where `start_postgres` keeps the cluster's passwords, beside its folder: pgpass files, mode 0600, owned by the
    user who ran it (`<data>-secrets/mlflow.pgpass` is what the tracking server reads, through PGPASSFILE)."""
    data = data.resolve()
    return data.parent / f"{data.name}-secrets"


def pgpass_file(data: Path, user: str = DB_USER) -> Path:
    return secrets_dir(data) / f"{user}.pgpass"


def _write_secret(path: Path, text: str) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def _initdb(data: Path, port: int) -> None:
    """A new cluster whose every connection needs a password (SCRAM): a superuser for setup, and the tracking server's
    own role, which owns its database and nothing else (no superuser, no CREATEROLE, no CREATEDB)."""
    if data.exists() and any(data.iterdir()):
        raise RuntimeError(f"{data} is not empty and holds no PostgreSQL cluster (no PG_VERSION): give an empty or "
                           "new folder (--dir); nothing in it was changed")
    data.mkdir(parents=True, exist_ok=True)
    admin_pw, mlflow_pw = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    pwdir = Path(tempfile.mkdtemp(prefix="polarcatalog-initdb-"))  # read by initdb (as the postgres user), then removed
    pwfile = pwdir / "password"
    _write_secret(pwfile, admin_pw + "\n")
    if os.geteuid() == 0:
        for path in (data, pwdir, pwfile):
            shutil.chown(path, "postgres", "postgres")
    try:
        init = subprocess.run(_as_db_owner([postgres_bin("initdb"), "-D", str(data), "-U", ADMIN_USER, "--pwfile", str(pwfile),
                                            "--auth-local=scram-sha-256", "--auth-host=scram-sha-256", "--encoding=UTF8",
                                            "--no-instructions"]), capture_output=True, text=True)
    finally:
        shutil.rmtree(pwdir, ignore_errors=True)
    if init.returncode != 0:
        raise RuntimeError(f"initdb failed for {data}: {(init.stderr or init.stdout).strip()[-2000:]}")
    _write_secret(pgpass_file(data, ADMIN_USER), f"127.0.0.1:{port}:*:{ADMIN_USER}:{admin_pw}\n")
    _write_secret(pgpass_file(data), f"127.0.0.1:{port}:{DB_NAME}:{DB_USER}:{mlflow_pw}\n")
    _start(data, port)
    sql = (f"CREATE ROLE {DB_USER} LOGIN PASSWORD '{mlflow_pw}' NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION;\n"
           f"CREATE DATABASE {DB_NAME} OWNER {DB_USER};\n"
           "REVOKE ALL ON DATABASE postgres FROM PUBLIC;\nREVOKE ALL ON DATABASE template1 FROM PUBLIC;\n")
    # the SQL (with the password) goes through stdin, the admin's password through a pgpass file: neither on a command line
    setup = subprocess.run([postgres_bin("psql"), "-h", "127.0.0.1", "-p", str(port), "-U", ADMIN_USER, "-d", "postgres",
                            "-v", "ON_ERROR_STOP=1", "-q"], input=sql, capture_output=True, text=True,
                           env={**os.environ, "PGPASSFILE": str(pgpass_file(data, ADMIN_USER))})
    if setup.returncode != 0:
        raise RuntimeError(f"creating the {DB_USER} role and database failed: {setup.stderr.strip()[-2000:]}")


def _start(data: Path, port: int) -> None:
    options = f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={data}"
    started = subprocess.run(_as_db_owner([postgres_bin("pg_ctl"), "-D", str(data), "-o", options, "-l",
                                           str(data / "server.log"), "-w", "start"]), capture_output=True, text=True)
    if started.returncode != 0:
        raise RuntimeError(f"PostgreSQL did not start from {data}: {(started.stderr or started.stdout).strip()[-2000:]} "
                           f"(its log: {data / 'server.log'})")


def start_postgres(data: Path, port: int) -> str:
    """Initialise `data` (once) and start PostgreSQL on 127.0.0.1:`port`; return the SQLAlchemy URI of its `mlflow`
    database, without a password: the tracking server reads it from `pgpass_file(data)` (PGPASSFILE). Every
    connection needs a password, so another local account cannot log in through the loopback interface, and the
    server's role is not a superuser (no `COPY ... TO PROGRAM`)."""
    data = data.resolve()
    if (data / "PG_VERSION").is_file():
        _start(data, port)
    else:
        _initdb(data, port)
    return f"postgresql://{DB_USER}@127.0.0.1:{port}/{DB_NAME}"


def stop_postgres(data: Path) -> None:
    subprocess.run(_as_db_owner([postgres_bin("pg_ctl"), "-D", str(data.resolve()), "-m", "fast", "-w", "stop"]),
                   check=False, capture_output=True)


# MLflow's server otherwise starts a job runner (huey consumers, five processes) for GenAI jobs this workspace never
# submits: without it a tracking server starts in a fraction of the time and memory
SERVER_ENV = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


def allowed_hosts(host: str, port: int, extra: str | None = None) -> str | None:
    """The Host headers the server answers (MLflow refuses any other, against DNS rebinding). MLflow's default is
    localhost and private IPs, so a team that reaches the server by this machine's name got "Invalid Host header".
    Listening beyond loopback, the default adds this machine's names (with and without the port) to MLflow's own
    list; `extra` (comma-separated, wildcards allowed) adds the names a team uses behind a proxy or DNS alias."""
    if host in ("127.0.0.1", "localhost") and not extra:
        return None  # MLflow's default: loopback only
    names = {socket.gethostname(), socket.getfqdn(), "localhost", "127.0.0.1"}
    if host not in ("0.0.0.0", "::"):
        names.add(host)
    names |= {h.strip() for h in (extra or "").split(",") if h.strip()}
    # MLflow compares the whole header, port included: each name without a port is listed with this server's too
    listed = sorted({n for n in names} | {f"{n}:{port}" for n in names if ":" not in n})
    private = ["10.*", *(f"172.{b}.*" for b in range(16, 32)), "192.168.*"]  # RFC 1918, as MLflow's default
    return ",".join([*listed, *private])


def mlflow_server_command(mlflow: str, backend_uri: str, artifacts: Path, host: str = "127.0.0.1",
                          port: int = 5000, hosts: str | None = None) -> list[str]:
    """The tracking server: runs in `backend_uri`, artifacts under `artifacts`, served through the server itself;
    `hosts` the extra Host headers it answers (`allowed_hosts`)."""
    allowed = allowed_hosts(host, port, hosts)
    return [mlflow, "server", "--backend-store-uri", backend_uri, "--artifacts-destination", str(artifacts),
            "--serve-artifacts", "--host", host, "--port", str(port), "--workers", "2",
            *(["--allowed-hosts", allowed] if allowed else [])]


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
