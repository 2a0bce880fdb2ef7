"""Run profiles: a named params overlay (`params.<name>.yaml`, only the keys that differ from params.yaml) and the
pipeline it runs. `make repro PROFILE=<name>` calls `polarcatalog profile <name>`, which validates params.yaml with
the overlay before any compute, then runs

- `dvc repro <pipeline>` when the overlay changes nothing (birds-offline: the bird pipeline as configured), or
- `dvc exp run <pipeline> -n <name> -S key=value ...` otherwise: a DVC experiment, so the profile's params, metrics
  and plots sit beside the default's in `dvc exp show` and in MLflow (each stage run is tagged with the experiment).
  As with any `dvc exp run`, params.yaml in the workspace then holds the profile's values; `git checkout params.yaml`
  returns to the default. A rerun on the same commit is named `<name>-2`, `<name>-3`, ... (`experiment_name`).
"""

from __future__ import annotations

import itertools
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polarcatalog.config import Params, ParamsError, load_params, read_params_yaml
from polarcatalog.data import bird_reference


@dataclass(frozen=True)
class Profile:
    pipeline: str  # the dvc.yaml it runs
    overlay: str  # the params overlay file
    about: str


PROFILES: dict[str, Profile] = {
    "birds-offline": Profile("birds/dvc.yaml", "params.birds-offline.yaml",
                             "the bird pipeline without photos or network (runs on a laptop in minutes)"),
    "gpu-pokemon": Profile("dvc.yaml", "params.gpu-pokemon.yaml",
                           "the papers' models on the Pokémon catalog (CUDA GPU, model weights from the hub or local paths)"),
    "gpu-birds": Profile("birds/dvc.yaml", "params.gpu-birds.yaml",
                         "the bird pipeline with Wikipedia articles, the LLM summarizer and the VLM filter (GPU, network)"),
}


def get(name: str) -> Profile:
    if name not in PROFILES:
        raise ParamsError(f"unknown profile {name!r}; allowed: {', '.join(PROFILES)}")
    return PROFILES[name]


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """`{"retrieval": {"lam": 0.7}}` -> `{"retrieval.lam": 0.7}` (lists are values)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out |= flatten(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out


def overlay(name: str, root: Path = Path(".")) -> dict[str, Any]:
    """The profile's keys, dotted."""
    return flatten(read_params_yaml(root / get(name).overlay))


def resolve(name: str, root: Path = Path(".")) -> tuple[Params, dict[str, Any]]:
    """params.yaml with the overlay, validated (a bad key fails here, naming the profile file), the input data the
    profile's pipeline reads present; and the keys whose value differs from params.yaml."""
    keys = overlay(name, root)
    try:
        params = load_params(root / "params.yaml", keys)
    except ParamsError as err:
        raise ParamsError(f"profile {name} ({get(name).overlay}): {err}") from None
    if get(name).pipeline == "birds/dvc.yaml":  # its reference data, checked before DVC deletes any output to rerun
        reference = Path(params.birds.reference_dir)
        absent = bird_reference.missing(reference if reference.is_absolute() else root / reference)
        if absent:
            raise ParamsError(f"profile {name} ({get(name).overlay}): {bird_reference.explain(params.birds.reference_dir, absent)}")
    base = flatten(load_params(root / "params.yaml").model_dump(mode="json"))
    mine = flatten(params.model_dump(mode="json"))
    return params, {k: mine[k] for k in keys if mine[k] != base.get(k)}


def hydra_value(value: Any) -> str:
    """A value in the override grammar `dvc exp run -S` parses (Hydra's): strings double-quoted, lists bracketed."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    text = str(value)
    if '"' in text or "\\" in text:
        raise ParamsError(f"profile value {text!r}: quotes and backslashes cannot pass through `dvc exp run -S`")
    return f'"{text}"'


def command(name: str, root: Path = Path(".")) -> list[str]:
    """The DVC command the profile runs (validated first)."""
    prof = get(name)
    _, changed = resolve(name, root)
    if not changed:
        return ["dvc", "repro", prof.pipeline]
    sets = [a for k, v in changed.items() for a in ("-S", f"{k}={hydra_value(v)}")]
    return ["dvc", "exp", "run", prof.pipeline, "-n", experiment_name(name, root), *sets]


def experiment_name(name: str, root: Path = Path(".")) -> str:
    """`name`, or for a rerun on the same commit the next free `name-2`, `name-3`, ...: DVC refuses a second
    experiment of one name on one commit, and its `-f` would also force every stage to rerun (hours on the GPU
    profile), where a rerun under a new name reruns only what changed. Outside a git repository: `name`."""
    git = lambda *args: subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout  # noqa: E731
    try:
        head = git("rev-parse", "HEAD").strip()
        taken = {ref.rsplit("/", 1)[-1] for ref in git("for-each-ref", "--format=%(refname)", f"refs/exps/{head[:2]}/{head[2:]}/").split()}
    except (OSError, subprocess.CalledProcessError):
        return name
    return next(n for n in itertools.chain([name], (f"{name}-{i}" for i in itertools.count(2))) if n not in taken)
