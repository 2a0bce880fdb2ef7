"""`polarcatalog-tools`: developer tooling that is not part of the research library: the team-mode tracking server
and its PostgreSQL, and the offline page for `dvc plots show/diff`. Nothing in `polarcatalog` imports this package."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from polarcatalog.data.packages import FetchError
from polarcatalog.runner.tracking import mlflow_bin
from polarcatalog_tools import team
from polarcatalog_tools.plots_page import write_template

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)


@app.command("team-db")
def team_db(
    data: Path = typer.Option(Path("/srv/polarcatalog/postgres"), "--dir", help="the cluster's folder (created once)"),
    port: int = typer.Option(5432, help="TCP port on 127.0.0.1"),
    stop: bool = typer.Option(False, help="stop the cluster instead"),
) -> None:
    """Start a local PostgreSQL cluster for the team tracking server (PostgreSQL from the OS); print its URI (no
    password: the server's is in a pgpass file, whose path is printed too)."""
    if stop:
        team.stop_postgres(data)
        return
    try:
        uri = team.start_postgres(data, port)
    except (RuntimeError, FileNotFoundError) as err:
        typer.echo(str(err), err=True)
        raise typer.Exit(2) from None
    typer.echo(f"{uri}\npassword file (PGPASSFILE for team-server): {team.pgpass_file(data)}")


@app.command("team-server")
def team_server(
    backend: str = typer.Option(..., help="the runs' database, e.g. postgresql://mlflow@127.0.0.1:5432/mlflow"),
    artifacts: Path = typer.Option(..., help="shared folder for every run's artifacts (served through the server)"),
    host: str = typer.Option("127.0.0.1", help="interface to listen on (0.0.0.0 for a team's network)"),
    port: int = typer.Option(5000),
    pgpass: Optional[Path] = typer.Option(None, help="pgpass file with the database password (team-db writes one); "
                                           "default: PGPASSFILE, else ~/.pgpass"),
    allowed_hosts: Optional[str] = typer.Option(None, help="extra Host headers the server answers, comma-separated, "
                                                "wildcards allowed (e.g. mlflow.team.lan); beyond loopback this "
                                                "machine's names and private IPs are always allowed"),
) -> None:
    """Run the team's MLflow tracking server; clients set tracking.uri (or MLFLOW_TRACKING_URI) to its URL."""
    from urllib.parse import urlsplit

    if urlsplit(backend).password:
        typer.echo("--backend carries a password, which every local account would see on the command line (ps): put "
                   "it in a pgpass file (`--pgpass`, mode 0600) and give the URI without it", err=True)
        raise typer.Exit(2)
    env = {**os.environ, **team.SERVER_ENV, **({"PGPASSFILE": str(pgpass.resolve())} if pgpass else {})}
    cmd = team.mlflow_server_command(mlflow_bin(), backend, artifacts, host, port, allowed_hosts)
    typer.echo(f"runs and artifacts at http://{host}:{port} ({backend}; {artifacts})")
    os.execve(cmd[0], cmd, env)


@app.command("plots-template")
def plots_template(
    dest: Path = typer.Option(Path(".dvc/plots_template.html"), help="where .dvc/config's plots.html_template points"),
    cache: Path = typer.Option(Path("data/cache/npm"), help="folder for the checked npm tarballs"),
) -> None:
    """Write the offline page for `dvc plots show/diff` (vega inlined; DVC's default loads it from a CDN)."""
    try:
        typer.echo(f"wrote {write_template(dest, cache)}")
    except FetchError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None


if __name__ == "__main__":
    app()
