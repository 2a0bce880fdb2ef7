"""`polarcatalog run-notebook`: the command every dvc.yaml stage runs, kept apart from the rest of the command line.

A stage start pays for whatever the CLI imports before dispatching; the full CLI loads the params schema, pandas and
the folder evaluation (about a second), none of which running a notebook needs. `polarcatalog.cli.main()` sends this
one command here directly; `cli.main` registers the same function, so `polarcatalog --help` lists it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer


CHECK_STAMP = Path("data/interim/params_valid.txt")  # the `check` stage's output (dvc.yaml)


def params_problem(root: Path) -> str | None:
    """What is wrong with params.yaml, when the `check` stage has not validated this version of it: `dvc repro -s`,
    `dvc exp run -s` and a stage run by hand skip `check`. A stamp newer than the file means `check` passed it."""
    params, stamp = root / "params.yaml", root / CHECK_STAMP
    if not params.exists() or (stamp.exists() and stamp.stat().st_mtime_ns >= params.stat().st_mtime_ns):
        return None  # no params file: a notebook that needs one says so itself
    from polarcatalog.config import ParamsError, load_params  # heavy: the params schema, only when check was skipped

    try:
        load_params(params)
    except ParamsError as err:
        return f"{err}\n(nothing was run; the stage's committed results are as they were)"
    return None


def run_notebook_command(
    notebook: Path = typer.Argument(..., help="the stage notebook, e.g. notebooks/01_curate.ipynb"),
    output: Path = typer.Argument(..., help="where the executed copy goes, e.g. reports/notebooks/01_curate.ipynb"),
    parameter: list[str] = typer.Option([], "-p", "--parameter", help="NAME=VALUE for the parameters cell (repeatable), "
                                        "e.g. -p axis=lam"),
) -> None:
    """Execute a stage notebook with papermill (what every dvc.yaml stage runs); params come from params.yaml."""
    from polarcatalog.runner.run_notebook import run_notebook  # heavy: papermill and Jupyter's client, for this command only

    try:
        parameters = dict(item.split("=", 1) for item in parameter)
    except ValueError:
        typer.echo(f"error: -p takes NAME=VALUE, got {parameter}", err=True)
        raise typer.Exit(2) from None
    problem = params_problem(Path.cwd())
    if problem:
        typer.echo(problem, err=True)
        raise typer.Exit(2)
    run_notebook(notebook, output, parameters)


def run(args: list[str]) -> None:
    """`polarcatalog run-notebook ARGS...` as a one-command app (typer makes a lone command the app itself)."""
    app = typer.Typer(add_completion=False)
    app.command("run-notebook")(run_notebook_command)
    app(args=args, prog_name="polarcatalog run-notebook")


if __name__ == "__main__":  # the runner forked from the warm process (`runner.run_notebook.run_forked`)
    run(sys.argv[1:])
