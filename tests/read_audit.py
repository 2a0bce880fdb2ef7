"""What a stage actually read, checked against what dvc.yaml declares for it.

DVC reruns a stage only when something it declares changes, so a read that is not declared is a stale result
waiting to happen. A test helper, outside the library: `kernel_env(folder)` is the environment under which every
stage kernel of a `dvc repro` (or the warm process the kernels are forked from, whose install they inherit) loads
`tests/audit_site/sitecustomize.py`, which calls `install()`. From the end of
`tracking.start_stage` on, the kernel records what it reads, and `StageRun.finish()` writes
`<folder>/<stage>.json` = `{"stage", "files", "params"}`:

- files: every path the stage's process opened for reading inside the repository (an `open` audit event, so
  Python's `open`, `os.open` and everything built on them; `io.read_table` routes parquet reads through `open`);
- params: every `section.field` of the validated params read as an attribute (`params.retrieval.lam`).

`undeclared(root, stage, record)` returns what was read but not declared. The record can only under-count:
reads in C or C++ code that bypass Python's `open` (pyarrow given a path, FAISS, safetensors), reads before
`start_stage` or in child processes, files outside the repository (e.g. a folder named by a param), and params
consumed whole (`model_dump`, `==` on a section) are not seen.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Mapping

from polarcatalog import config
from polarcatalog.runner.pipelines import PIPELINES, declaration
from polarcatalog.io import write_json

ENV = "POLARCATALOG_AUDIT"
# Not stage inputs: code (its deps are a separate matter), the tools' own state, params.yaml (params are checked by
# key instead), tracking stores, executed notebooks, and the content-addressed feature cache, which changes how
# fast a stage runs, never what it computes.
IGNORED = ("src", ".venv", ".git", ".dvc", *PIPELINES, *(p.replace("dvc.yaml", "dvc.lock") for p in PIPELINES), "params.yaml",
           "mlflow.db", "mlruns", "mlartifacts", "reports/notebooks", "data/cache")
# The key of each params section in params.yaml: Retrieval -> "retrieval".
SECTION_KEYS: dict[type, str] = {f.annotation: name for name, f in config.Params.model_fields.items()}


@dataclass
class Recorder:
    """The repo-relative files and the `section.field` params read since `start`."""

    root: Path
    files: set[str] = field(default_factory=set)
    params: set[str] = field(default_factory=set)

    def opened(self, path: Any, mode: str | None, flags: int) -> None:
        reading = not set(mode) & set("wax+") if isinstance(mode, str) else flags & os.O_ACCMODE == os.O_RDONLY
        if not reading or not isinstance(path, (str, bytes, os.PathLike)):
            return  # writes, and `open(fd)`
        full = os.path.abspath(os.fsdecode(path))
        try:
            rel = Path(full).relative_to(self.root).as_posix()
        except ValueError:
            return  # outside the repository
        if not _covered(rel, IGNORED, "/") and os.path.isfile(full):  # not a folder opened to walk or remove it
            self.files.add(rel)

    def field_read(self, section: type, name: str) -> None:
        if section in SECTION_KEYS:  # not Params itself: reading a whole section is not reading its keys
            self.params.add(f"{SECTION_KEYS[section]}.{name}")

    def report(self, stage: str) -> dict[str, Any]:
        return {"stage": stage, "files": sorted(self.files), "params": sorted(self.params)}


_active: Recorder | None = None
_hooked = False


def _on_audit_event(event: str, args: tuple[Any, ...]) -> None:
    # Audit hooks cannot be removed: this stays installed for the life of the process, a no-op when not recording.
    if _active is not None and event == "open":
        _active.opened(*args[:3])


def start(root: Path) -> Recorder:
    """Record from now on what this process reads under `root`, until `stop`."""
    global _active, _hooked
    if not _hooked:
        sys.addaudithook(_on_audit_event)
        _record_field_reads()
        _hooked = True
    _active = Recorder(Path(root).resolve())
    return _active


def stop() -> Recorder | None:
    """Stop recording; the recorder that was active, if any."""
    global _active
    recorder, _active = _active, None
    return recorder


def finish(stage: str) -> Path | None:
    """Stop recording and write the stage's record to `$POLARCATALOG_AUDIT/<stage>.json` (if recording)."""
    recorder, folder = stop(), os.environ.get(ENV)
    if recorder is None or not folder:
        return None
    path = Path(folder) / f"{stage}.json"  # `ablate@lam.json`: DVC stage names hold no path separator
    write_json(recorder.report(stage), path)
    return path


def _covered(key: str, declared: Iterable[str], sep: str) -> bool:
    """A declared key covers itself and everything below it: `retrieval` covers `retrieval.lam`, `data/raw` covers
    `data/raw/x.png`; `curate.size_bins_m` covers only itself."""
    return any(key == d or key.startswith(d + sep) for d in declared)


def _paths(entries: list[Any]) -> list[str]:
    """deps / outs / metrics / plots entries: a path, or `{path: {cache: false}}`."""
    return [str(PurePosixPath(p)) for e in entries for p in (e if isinstance(e, dict) else [e])]


def undeclared(root: Path, stage: str, record: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    """What `record` (a stage's report) read that dvc.yaml does not declare for `stage`: params not under a declared
    params key, files not under a declared dep or output (a stage may re-read what it wrote)."""
    entry = declaration(root, stage)
    keys = [k for k in entry.get("params", []) if isinstance(k, str)]
    paths = _paths([e for kind in ("deps", "outs", "metrics", "plots") for e in entry.get(kind, [])])
    return {"params": sorted(k for k in record["params"] if not _covered(k, keys, ".")),
            "files": sorted(f for f in record["files"] if not _covered(f, paths, "/"))}


SITE = Path(__file__).resolve().parent / "audit_site"


def kernel_env(folder: Path) -> dict[str, str]:
    """What to add to a `dvc repro`'s environment so that every stage kernel records its reads into `folder`."""
    path = [str(SITE), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    return {ENV: str(folder), "PYTHONPATH": os.pathsep.join(path)}


def _record_field_reads() -> None:
    """Every `params.<section>.<field>` read goes to the active recorder (whole-section reads, `model_dump` and `==`,
    do not pass through attribute access: the audit can under-count, never over-count)."""
    original = config._Section.__getattribute__

    def recording(self: Any, name: str) -> Any:
        if _active is not None and name in type(self).model_fields:
            _active.field_read(type(self), name)
        return original(self, name)

    config._Section.__getattribute__ = recording  # type: ignore[method-assign]


def install() -> None:
    """In a stage kernel (from sitecustomize): record from the end of `start_stage` until `finish()` or `fail()`."""
    from polarcatalog.runner import tracking

    start_stage, finish_run, fail_run = tracking.start_stage, tracking.StageRun.finish, tracking.StageRun.fail

    def started(*args: Any, **kwargs: Any) -> Any:
        run = start_stage(*args, **kwargs)
        start(run.root)  # after start_stage's own reads of dvc.yaml and params
        return run

    def finished(self: Any) -> None:
        if not self.closed:
            finish(self.stage)
        finish_run(self)

    def failed(self: Any, error: BaseException) -> None:
        stop()
        fail_run(self, error)

    tracking.start_stage = started
    tracking.StageRun.finish = finished  # type: ignore[method-assign]
    tracking.StageRun.fail = failed  # type: ignore[method-assign]
