"""`polarcatalog` command line. Stages run through `dvc repro`; the CLI is for checks and ad-hoc use."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
import yaml

from polarcatalog import __version__
from polarcatalog.app.evaluate import evaluate_folder
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
    typer.echo(json.dumps(p.model_dump(mode="json"), indent=2))


@app.command()
def evaluate(
    queries: Path = typer.Option(..., "--queries", help="folder of query images (species sub-folders = labels)"),
    labels: Optional[Path] = typer.Option(None, "--labels", help="CSV with columns image,species_id (image relative to --queries)"),
    params: Path = typer.Option(Path("params.yaml"), help="params file (retrieval and encoders sections are used)"),
    set_: list[str] = typer.Option([], "--set", help="override a param, e.g. --set retrieval.lam=0.5 (repeatable)"),
    out: Optional[Path] = typer.Option(None, help="folder for predictions.csv and metrics.json (default reports/evaluate/<folder name>)"),
    show: int = typer.Option(5, help="species printed per query"),
    where: Optional[str] = typer.Option(None, "--where", help="a constraint in words, e.g. 'a yellow Pokémon that is not an "
                                        "electric type': candidates re-ordered by the polarized memory (needs the graph stage)"),
    strength: Optional[str] = typer.Option(None, help="constraint strength for --where: none | soft:<p> | adaptive | hard "
                                           "(overrides graph.constraint)"),
    anchor_scale: str = typer.Option("auto", "--anchor-scale", help="scale the catalog anchors are seen at: auto (this "
                                     "folder's median subject size, measured without labels; anchors re-encoded once, then "
                                     "cached) | catalog (the embed stage's) | a size in px"),
) -> None:
    """Run the configured retriever on your own query images against the whole catalog and score it."""
    try:
        overrides = {k: yaml.safe_load(v) for k, v in (item.split("=", 1) for item in set_)}
        if strength is not None:  # parsed and checked with the params, before any encoding
            overrides["graph.constraint"] = strength
        p = load_params(params, overrides)
        if anchor_scale not in ("auto", "catalog") and not (anchor_scale.isdigit() and 8 <= int(anchor_scale) <= 4096):
            raise ValueError(f"--anchor-scale {anchor_scale!r}: use auto, catalog or a size in px (8-4096)")
    except ValueError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    root = params.resolve().parent
    out = out or root / "reports" / "evaluate" / queries.resolve().name
    try:
        scale = int(anchor_scale) if anchor_scale.isdigit() else anchor_scale
        result = evaluate_folder(p, root, queries, labels, out, where, scale)
    except (FileNotFoundError, ValueError) as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    typer.echo(result.render(show))
    typer.echo(f"wrote {out / 'predictions.csv'} and {out / 'metrics.json'}")


@app.command()
def version() -> None:
    """Print the package version."""
    typer.echo(__version__)


if __name__ == "__main__":
    app()
