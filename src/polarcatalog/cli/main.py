"""`polarcatalog` command line. Stages run through `dvc repro`; the CLI is for checks and ad-hoc use."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Optional

import typer

from polarcatalog import __version__
from polarcatalog.runner import code_deps
from polarcatalog.runner import experiments as experiments_table
from polarcatalog.runner import queue_recovery
from polarcatalog.runner import profiles
from polarcatalog.runner import verify as verification
from polarcatalog.folder_eval import (QUALITY_BAR, concept_table, configuration, configuration_text, evaluate_folder,
                                     unread_override)
from polarcatalog.paths import repo_root
from polarcatalog.config import Params, ParamsError, flatten, load_params, parse_overrides, read_params_yaml
from polarcatalog.features.cache import CacheError
from polarcatalog.memory.constraints import Strength
from polarcatalog.cli.run_notebook_command import run_notebook_command

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)


def _uncommitted_hint(params: Path) -> str:
    """A failed `dvc exp run -S key=value` leaves its value in params.yaml (DVC keeps the workspace as the run saw it):
    say so, and how to get the committed values back."""
    if not params.is_file():
        return ""
    try:  # tracked at HEAD: outside git (or for a file git does not know), `git diff` exits 1 as for a change
        tracked = subprocess.run(["git", "cat-file", "-e", f"HEAD:./{params.name}"], cwd=params.parent,
                                 capture_output=True, timeout=30).returncode == 0
        changed = tracked and subprocess.run(["git", "diff", "--quiet", "HEAD", "--", params.name], cwd=params.parent,
                                             capture_output=True, timeout=30).returncode == 1
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (f"\n{params.name} differs from the last commit (a failed `dvc exp run -S ...` leaves its value there): "
            f"`git diff {params.name}` shows it, `git checkout {params.name}` restores the committed values") if changed else ""


@app.command("check-params")
def check_params(
    params: Path = typer.Option(Path("params.yaml"), help="params file to validate"),
    stamp: Optional[Path] = typer.Option(None, help="on success write this file (always the same bytes) instead of "
                                         "printing: the `check` stage's output, which every other stage depends on"),
    profile: Optional[str] = typer.Option(None, help=f"validate params.yaml with a profile's overlay: {', '.join(profiles.PROFILES)}"),
    device: bool = typer.Option(True, "--device/--no-device", help="also check that this machine can run them (a "
                                "requested CUDA device is visible); --no-device checks a GPU profile's params on a laptop"),
    code_manifests: Optional[Path] = typer.Option(None, help="with --stamp: also write each notebook's code manifest "
                                                  "(its import closure within src/, hashed) into this folder: the "
                                                  "stages' code deps (runner/code_deps.py)"),
) -> None:
    """Validate a params file; print the resolved params as JSON, or each bad key and exit 2."""
    if code_manifests is not None and stamp is None:
        typer.echo("error: --code-manifests goes with --stamp (the check stage's two outputs)", err=True)
        raise typer.Exit(2)
    overlay = _overlay_of(params, repo_root(params.resolve().parent))
    if overlay and not profile:  # it validated against the built-in defaults and printed values no run would use
        typer.echo(f"error: --params {params} is the {overlay} profile's overlay (only the keys it changes, applied on "
                   f"top of params.yaml), not a params file; check it with --profile {overlay}", err=True)
        raise typer.Exit(2)
    try:
        p = profiles.resolve(profile, params.parent)[0] if profile else load_params(params)
    except ParamsError as err:
        typer.echo(str(err) + _uncommitted_hint(params), err=True)
        raise typer.Exit(2) from None
    if stamp is None:
        typer.echo(json.dumps(p.model_dump(mode="json"), indent=2))
        if profile:  # on stderr: stdout stays the params' JSON
            typer.echo(f"profile {profile} {profiles.knobs_text(profiles.paper_knobs(profile, p, params.parent))}", err=True)
    problem = profiles.machine_problem(p) if device else None
    if problem:
        typer.echo(f"{problem}\n(--no-device checks the params alone)", err=True)
        raise typer.Exit(2)
    if stamp is None:
        return
    try:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text("params.yaml validated\n")
    except OSError as err:
        typer.echo(f"error: --stamp {stamp}: {err.strerror or err}", err=True)
        raise typer.Exit(2) from None
    if code_manifests is not None:
        try:
            code_deps.write_manifests(repo_root(params.resolve().parent), code_manifests)
        except OSError as err:
            typer.echo(f"error: --code-manifests {code_manifests}: {err.strerror or err}", err=True)
            raise typer.Exit(2) from None


@app.command()
def verify() -> None:
    """After `make repro`: is every committed result (reports, metrics, plot data, dvc.lock) the commit's bytes? Where
    one differs, how many numbers and by how much against their 95 % CI's width. Exit 1 when not reproduced."""
    try:
        ok, text = verification.report(Path("."))
    except RuntimeError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    typer.echo(text)
    if not ok:
        raise typer.Exit(1)


@app.command()
def experiments(width: int = typer.Option(160, min=40, help="table width in columns (at least 40)")) -> None:
    """The DVC experiments as one short table: name, what each changed against its baseline commit, test mRR@1 [95%
    CI] (and the reader's accuracy when a reader ran). `dvc exp show` has every param and metric."""
    try:
        typer.echo(experiments_table.show(Path("."), width))
    except RuntimeError as err:
        typer.echo(str(err), err=True)
        raise typer.Exit(2) from None
    for entry in queue_recovery.find_stranded(Path(".")):
        typer.echo(f"warning: {entry.describe()}: `polarcatalog queue-recover` closes it", err=True)


@app.command("queue-recover")
def queue_recover(dry_run: bool = typer.Option(False, "--dry-run", help="list the stranded experiments, change nothing")) -> None:
    """Queued DVC experiments whose worker died (shown "Running" forever): stop the orphaned executor, mark the
    experiment Failed, remove its temporary workspace. Its log stays: `dvc queue logs <name>`."""
    stranded = queue_recovery.find_stranded(Path("."))
    if not stranded:
        typer.echo("no stranded experiments: every experiment DVC shows running has a live queue worker")
        return
    if dry_run:
        typer.echo("\n".join(s.describe() for s in stranded))
        return
    typer.echo("\n".join(queue_recovery.recover(Path("."))))


@app.command()
def profile(
    name: str = typer.Argument(..., help=f"one of: {', '.join(profiles.PROFILES)}"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the DVC command instead of running it"),
) -> None:
    """Run a profile (what `make repro PROFILE=<name>` calls): validate params.yaml with the profile's overlay
    (params.<name>.yaml) before any compute, then `dvc repro` or `dvc exp run -S ...` of its pipeline."""
    try:
        cmd = profiles.command(name)
        problem = profiles.machine_problem(profiles.resolve(name)[0])
        if problem and not dry_run:
            raise ParamsError(f"profile {name}: {problem}")
    except ParamsError as err:
        typer.echo(str(err), err=True)
        raise typer.Exit(2) from None
    typer.echo(f"profile {name}: {profiles.get(name).about}\n$ " + " ".join(_quoted(a) for a in cmd))
    if not dry_run:
        os.execvp(cmd[0], cmd)  # the DVC process takes over this one: its progress and exit code are the user's


def _quoted(arg: str) -> str:
    return shlex.quote(arg)


@app.command()
def evaluate(
    queries: Path = typer.Option(..., "--queries", help="folder of query images (species sub-folders = labels)"),
    labels: Optional[Path] = typer.Option(None, "--labels", help="CSV with columns image,species_id (image relative to --queries)"),
    params: Path = typer.Option(Path("params.yaml"), help="a full params file (evaluate reads retrieval, encoders, eval "
                                "and dataset.seed; graph with --where, kg with --kgret)"),
    set_: list[str] = typer.Option([], "--set", help="override a param, e.g. --set retrieval.lam=0.5 (repeatable)"),
    out: Optional[Path] = typer.Option(None, help="folder for predictions.csv and metrics.json (default reports/evaluate/<folder name>)"),
    show: int = typer.Option(5, min=1, help="species printed per query (each list holds max(retrieval.k, 10))"),
    where: Optional[str] = typer.Option(None, "--where", help="a constraint in words, e.g. 'a yellow Pokémon that is not an "
                                        "electric type', or by concept ids, '+colour:yellow -type:electric' (read exactly): candidates re-ordered by "
                                        "the polarized memory (needs the graph stage)"),
    strength: Optional[str] = typer.Option(None, help="constraint strength for --where: none | soft:<p> | adaptive | hard "
                                           "(overrides graph.constraint)"),
    kgret: Optional[int] = typer.Option(None, "--kgret", help="B, from 1 to 50: the kg stage's experiment on this folder, "
                                        "the first-stage top-k plus up to B species bridged by the knowledge graph "
                                        "(needs `dvc repro kg`), with the budget-matched top-(k+B) beside it"),
    anchor_scale: str = typer.Option("auto", "--anchor-scale", help="scale the catalog anchors are seen at: auto (this "
                                     "folder's median subject size, measured without labels; anchors re-encoded once, then "
                                     "cached) | catalog (the embed stage's) | a size in px"),
) -> None:
    """Run the configured retriever on your own query images against the whole catalog and score it."""
    try:
        overrides = parse_overrides(set_)
        if strength is not None and "graph.constraint" in overrides:
            raise ValueError("--strength and --set graph.constraint both set the constraint strength: give one")
        unread = [why for key in overrides if (why := unread_override(key, where is not None, kgret is not None))]
        if unread:
            raise ValueError("\n".join(unread))
        if kgret == 0:  # B = 0 bridges nothing, and its list is the first-stage top-k, not the configured ranking
            raise ValueError("--kgret 0 adds no species: its evidence set would be the first-stage top-k before the "
                             "re-ranker, not the configured ranking a plain run prints; give B >= 1 (the kg stage's "
                             "experiment with B bridged species), or leave --kgret out")
        if kgret is not None and not 1 <= kgret <= 50:
            raise ValueError(f"--kgret {kgret}: B is from 1 to 50 (species the knowledge graph may add per query)")
        if strength is not None and where is None:
            raise ValueError("--strength applies to a --where constraint; give --where too, or leave --strength out")
        root = _project_root(params)  # first: a profile's overlay is named as one, not validated as a params file
        # --strength is parsed and checked like graph.constraint, before any encoding
        p = _with_strength(params, overrides, strength) if strength is not None else load_params(params, overrides)
        lacking = _keys_lacking(params, root, where is not None, kgret is not None)
        if lacking:
            shown = ", ".join(lacking[:6]) + (f" and {len(lacking) - 6} more" if len(lacking) > 6 else "")
            raise ValueError(f"--params {params} is not a full params file: it lacks {shown}, which evaluate reads (it "
                             "would fill them with built-in defaults, not the values this project's catalog was built "
                             "with); copy params.yaml and edit the copy, or give --params params.yaml with --set "
                             "key=value for each change")
        if where is not None and not where.strip():  # an unset shell variable, say: not a run without a constraint
            raise ValueError("--where is empty: give a constraint in words, e.g. 'a yellow Pokémon that is not an "
                             "electric type', or leave --where out for no constraint")
        if p.encoders.device == "cuda":  # asked for a GPU: say so now, not in a traceback after the folder is read
            from polarcatalog.device import cuda_problem  # heavy: torch

            if cuda_problem():
                raise ValueError("encoders.device = cuda, but torch sees no GPU on this machine: evaluate with "
                                 "encoders.device auto (the CPU here), or run it where a GPU is")
        if anchor_scale not in ("auto", "catalog") and not (_px(anchor_scale) and 8 <= int(anchor_scale) <= 4096):
            raise ValueError(f"--anchor-scale {anchor_scale!r}: use auto, catalog or a size in px (8-4096)")
    except ValueError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    if strength is not None:
        overrides["graph.constraint"] = strength
    out = out or root / "reports" / "evaluate" / queries.resolve().name
    try:
        scale = int(anchor_scale) if _px(anchor_scale) else anchor_scale
        config = configuration(p, params, overrides, constraint=where is not None, anchor_scale=scale)
        result = evaluate_folder(p, root, queries, labels, out, where, scale, kgret, config)
    except (FileNotFoundError, ValueError, CacheError) as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    except OSError as err:  # the results could not be written (full disk, read-only folder): nothing half-written
        named = f"{err.filename}: " if err.filename and str(err.filename) not in str(err.strerror) else ""
        typer.echo(f"error: {named}{err.strerror or err}", err=True)
        raise typer.Exit(1) from None
    typer.echo(configuration_text(config))
    typer.echo(result.render(show))
    listed_ = max(p.retrieval.k, 10)
    if show > listed_:
        typer.echo(f"(--show {show}: each list holds max(retrieval.k, 10) = {listed_} species)")
    typer.echo(f"wrote {out / 'predictions.csv'} and {out / 'metrics.json'}"
               + (" (replacing the previous run's results there)" if result.replaced else ""))


@app.command()
def concepts(
    params: Path = typer.Option(Path("params.yaml"), help="params file (dataset.domain, graph.*: the memory's build)"),
) -> None:
    """The concepts `evaluate --where` reads, by id (`--where "+colour:yellow -type:electric"`), each with the share
    of the catalog species a hard constraint on it keeps and excludes as it should (needs the graph stage)."""
    try:
        root = _project_root(params)
        table = concept_table(load_params(params), root)
    except (FileNotFoundError, ValueError, CacheError) as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    shares = [c for c in table if c.startswith(("+", "-"))]
    typer.echo(table.to_string(index=False, formatters={c: (lambda x: "-" if x != x else f"{100 * x:.0f} %")
                                                        for c in shares}))
    typer.echo(f"\n+id keeps / excludes: the share of the catalog species that have it kept, and of those that lack "
               "it excluded; -id the other way round; against the domain's ground truth. Weak under hard: a side "
               f"whose keep, exclude or exclusion-precision share is below {100 * QUALITY_BAR:.0f} %, where --strength soft "
               "reads more safely.")


def _px(text: str) -> bool:
    """A size in pixels as a person types it: ASCII digits (`²` is a digit to `str.isdigit`, not to `int`)."""
    return text.isascii() and text.isdigit()


def _project_root(params: Path) -> Path:
    """The project whose catalog evaluate reads: the one holding --params, or else the one around the working folder
    (a copy of params.yaml kept elsewhere still scores against this project's features). A profile overlay is not a
    params file: it holds only the keys a profile changes."""
    for start in (params.resolve().parent, Path.cwd()):
        root = repo_root(start)
        if (root / "dvc.yaml").is_file():
            break
    else:
        raise ValueError(f"--params {params}: neither it nor the working folder is inside a PolarCatalog project (a folder "
                         "with dvc.yaml and params.yaml); run evaluate from the project")
    name = _overlay_of(params, root)
    if name:
        raise ValueError(f"--params {params} is the {name} profile's overlay (only the keys it changes, applied on top "
                         "of params.yaml), not a params file; give --params params.yaml, with --set for a value to change")
    return root


def _keys_lacking(params: Path, root: Path, constraint: bool, kg: bool) -> list[str]:
    """The keys evaluate reads that the project's params.yaml sets and another --params file leaves out. A file
    holding only the keys a user changed validates (each field has a default), but the defaults are not the values
    the catalog was built with: its encoders may not be the catalog's, and every other knob moves silently."""
    project = root / "params.yaml"
    if params.resolve() == project.resolve() or not project.is_file():
        return []
    given = flatten(read_params_yaml(params))
    return [key for key in flatten(read_params_yaml(project))
            if key not in given and not any(key.startswith(f"{g}.") for g in given)
            and unread_override(key, constraint, kg) is None]


def _overlay_of(params: Path, root: Path) -> str | None:
    """The profile whose overlay `params` is (a file of only the keys the profile changes), or None."""
    overlays = {(root / prof.overlay).resolve(): name for name, prof in profiles.PROFILES.items()}
    return overlays.get(params.resolve())


def _with_strength(params: Path, overrides: dict, strength: str) -> Params:
    """The params with `--strength` as graph.constraint. The value is parsed first by the parser the params field
    uses (`Strength.parse`), so a bad one is named as the option the user typed, not as a params key."""
    try:
        Strength.parse(strength)
    except ValueError as err:
        raise ValueError(f"--strength: {err}") from None
    return load_params(params, {**overrides, "graph.constraint": strength})


app.command("run-notebook")(run_notebook_command)


@app.command()
def ui(
    port: int = typer.Option(5000),
    host: str = typer.Option("127.0.0.1", help="interface to listen on"),
    params: Path = typer.Option(Path("params.yaml"), help="params file (tracking.experiment, tracking.uri)"),
) -> None:
    """MLflow UI on the project's store; prints the URL of the experiment's runs list (MLflow 3 otherwise opens an
    experiment on its GenAI overview). With a tracking server configured, prints that server's runs URL instead."""
    import mlflow  # heavy: mlflow, for this command only

    from polarcatalog.runner.tracking import mlflow_bin, tracking_uri  # heavy: mlflow and nbconvert

    try:
        p = load_params(params)
    except (ValueError, OSError) as err:  # a missing or invalid file: one line, like every other command
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    uri = tracking_uri(params.resolve().parent, p.tracking.uri)
    mlflow.set_tracking_uri(uri)
    experiment = mlflow.MlflowClient().get_experiment_by_name(p.tracking.experiment)
    base = uri.rstrip("/") if uri.startswith("http") else f"http://{host}:{port}"
    runs = f"{base}/#/experiments/{experiment.experiment_id}/runs" if experiment else f"{base}/ (no runs yet: `make repro`)"
    typer.echo(f"MLflow runs of '{p.tracking.experiment}': {runs}", err=True)
    if uri.startswith("http"):
        return
    binary = mlflow_bin()
    os.environ["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"  # no background job runner for a local viewer
    os.execv(binary, [binary, "ui", "--backend-store-uri", uri, "--host", host, "--port", str(port), "--workers", "1"])


@app.command()
def version() -> None:
    """Print the package version."""
    typer.echo(__version__)


def run_app() -> None:
    """The command line, with warnings printed as one line."""
    warnings.showwarning = _one_line
    app()


def _one_line(message: Warning | str, category: type[Warning], filename: str, lineno: int, file=None, line=None) -> None:
    """A warning as the commands print their other messages ("warning: ..."), not Python's file, line and source."""
    print(f"warning: {message}", file=sys.stderr if file is None else file, flush=True)


if __name__ == "__main__":  # a command forked from the warm process (`polarcatalog.cli.main` as __main__)
    run_app()
