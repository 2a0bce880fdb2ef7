"""`polarcatalog` command line. Stages run through `dvc repro`; the CLI is for checks and ad-hoc use."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from polarcatalog import __version__
from polarcatalog.config import ParamsError, load_params

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)


@app.command("check-params")
def check_params(params: Path = typer.Option(Path("params.yaml"), help="params file to validate")) -> None:
    """Validate a params file; print the resolved params as JSON, or each bad key and exit 2."""
    try:
        p = load_params(params)
    except ParamsError as err:
        typer.echo(str(err), err=True)
        raise typer.Exit(2) from None
    typer.echo(json.dumps(p.model_dump(), indent=2))


@app.command()
def version() -> None:
    """Print the package version."""
    typer.echo(__version__)


if __name__ == "__main__":
    app()
