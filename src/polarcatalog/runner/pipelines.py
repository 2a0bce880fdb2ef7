"""dvc.yaml (and birds/dvc.yaml), read: which stage runs a notebook, and what each stage declares.

A `foreach` stage is one stage per item, named `<stage>@<item>` as DVC names it, with `${item}` substituted in
its `do` block. Tracking logs the params a stage declares (`tracking.declared_params`), and the read audit
(`app.audit`) checks what a stage actually read, against the same declarations.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml


# The pipelines: the embedded default (`dvc repro`), and the bird pipeline (`dvc repro birds/dvc.yaml`, run by
# `make repro PROFILE=birds-offline`), kept apart so the default run never needs the bird reference data.
PIPELINES = ("dvc.yaml", "birds/dvc.yaml", "selection/dvc.yaml")


@functools.lru_cache(maxsize=8)
def _read(path: Path, mtime_ns: int) -> dict[str, Any]:
    """A pipeline file, parsed once per version: a stage start asks for its declaration several times (the stage's
    name, its params, its outputs). libyaml's loader where PyYAML has it (about 10x the pure-Python one)."""
    return yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _stages(root: Path, pipelines: tuple[str, ...] = PIPELINES) -> dict[str, dict[str, Any]]:
    """Every stage of the pipelines, by name (stage names are unique across the pipelines)."""
    out: dict[str, dict[str, Any]] = {}
    for file in pipelines:
        path = root / file
        if not path.is_file():
            continue
        for name, stage in _read(path, path.stat().st_mtime_ns)["stages"].items():
            if name in out:
                raise ValueError(f"stage {name!r} is defined in two pipelines; stage names must be unique")
            out[name] = stage
    return out


def stage_names(root: Path, pipelines: tuple[str, ...] = PIPELINES) -> list[str]:
    """Every stage of the pipelines, `foreach` expanded: `ablate` -> `ablate@lam`, `ablate@top_k`."""
    return [f"{name}@{item}" if "foreach" in stage else name
            for name, stage in _stages(root, pipelines).items() for item in stage.get("foreach", [None])]


def dvc_stage(root: Path, notebook: str, item: str | None = None) -> str:
    """The DVC stage that runs `notebook` (with `item`, for a foreach stage): `03_graph.ipynb` -> `graph`."""
    found = []
    for name, stage in _stages(root).items():
        if f"notebooks/{notebook}" not in stage.get("do", stage)["cmd"]:
            continue
        if "foreach" in stage:
            found += [f"{name}@{item}"] if item in stage["foreach"] else []
        else:
            found.append(name)
    if len(found) != 1:
        raise ValueError(f"dvc.yaml has {len(found)} stages running notebooks/{notebook}" + (f" for {item!r}" if item else "")
                         + f": {found}; each notebook (and foreach item) must be exactly one stage")
    return found[0]


def _substitute(value: Any, item: str) -> Any:
    if isinstance(value, str):
        return value.replace("${item}", item)
    if isinstance(value, list):
        return [_substitute(v, item) for v in value]
    if isinstance(value, dict):
        return {_substitute(k, item): _substitute(v, item) for k, v in value.items()}
    return value


def declaration(root: Path, stage: str) -> dict[str, Any]:
    """The dvc.yaml entry of `stage` (`ablate@lam`: the `do` block with `${item}` = `lam`)."""
    name, _, item = stage.partition("@")
    entry = _stages(root)[name]
    return _substitute(entry["do"], item) if "foreach" in entry else entry


def stage_outputs(root: Path, stage: str) -> list[str]:
    """Every path `stage` writes (its outs, metrics and plots in dvc.yaml): DVC deletes them before the stage runs, so
    a git-tracked one is missing from the work tree while the stage runs. Empty for a stage dvc.yaml does not hold."""
    try:
        entry = declaration(root, stage)
    except (KeyError, FileNotFoundError):
        return []
    return [out if isinstance(out, str) else next(iter(out))
            for kind in ("outs", "metrics", "plots") for out in entry.get(kind) or []]
