"""The tiny pipeline the slow tests share: the whole `dvc repro` on the first 12 species, with every opt-in path on,
in a temp git repository with its own MLflow sqlite store. Built once per session (the `tiny_pipeline` fixture in
conftest.py); each test module works on its own copy, so one module's reruns and commits never reach another's."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from tests import read_audit as audit
from tests.conftest import SHARED_DATA, repo_env, run_ok, snapshot_repo

N_SPECIES = 12


def _edit(params: dict) -> None:
    params["dataset"]["species_limit"] = N_SPECIES
    params["curate"]["distractor_fraction"] = 0.25
    params["retrieval"]["r"] = 20
    params["retrieval"]["min_center_batch"] = 8
    params["ablations"]["lam"] = [0.0, 0.5, 1.0]
    # the opt-in local views, end to end: embedded as cells of every anchor, read by the global_local proposer
    params["encoders"]["local_grid"] = 2
    params["ablations"]["coverage"] += ["global_local:6", "global_local:12"]
    pokeapi, birds = SHARED_DATA / "pokeapi", SHARED_DATA / "openclipart_birds"
    params["curate"]["pokeapi_dir"] = str(pokeapi) if pokeapi.is_dir() else None
    params["curate"]["bird_eval_dir"] = str(birds) if birds.is_dir() else None


def build(folder: Path) -> None:
    """`folder/repo`: the checkout's tracked files with the tiny params, committed, then `dvc repro`; `folder/audit`:
    what each stage's kernel read (tests/read_audit.py)."""
    repo = folder / "repo"
    env = snapshot_repo(repo, _edit, audit.kernel_env(folder / "audit"))
    run_ok(["dvc", "repro"], repo, env)


# MLflow's sqlite store keeps absolute artifact locations: a copy points its own at its own mlruns/
_ARTIFACT_COLUMNS = (("experiments", "artifact_location"), ("runs", "artifact_uri"), ("logged_models", "artifact_location"))


def checkout(built: Path, dest: Path) -> tuple[Path, dict[str, str]]:
    """A copy of the built pipeline at `dest` (repository, DVC cache, MLflow store, audit records): (repo, env)."""
    shutil.copytree(built, dest, symlinks=True)
    old, repo = str(built / "repo"), dest / "repo"
    with sqlite3.connect(repo / "mlflow.db") as db:
        for table, column in _ARTIFACT_COLUMNS:
            db.execute(f"UPDATE {table} SET {column} = ? || substr({column}, ?) WHERE substr({column}, 1, ?) = ?",
                       (str(repo), len(old) + 1, len(old), old))
    db.close()
    return repo, repo_env(repo, audit.kernel_env(dest / "audit"))
