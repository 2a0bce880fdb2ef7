"""A stage's code: the import closure, within src/, of its notebook, written as one manifest file per notebook.

A stage must rerun when, and only when, code it runs changes. Its code is the closure of its notebook's imports (which
include its `polarcatalog.stages` module): every module that importing them loads, the `__init__.py` of each package
above a module (importing `a.b.c` runs `a/__init__.py` and `a/b/__init__.py`) and function-local imports (a deferred
import is still a dependency). The `check` stage writes each notebook's closure as `data/interim/code/<notebook>.txt`
(one `sha256  path` line per file) and each stage depends on that one file, not on each of its dozens of modules:
DVC re-reads and re-writes the whole dvc.lock around every stage it runs, so the lock's length is most of DVC's own
time per stage.
A code edit reruns `check` (it depends on all of src/ and notebooks/), which rewrites the manifests; a stage reruns
only if its own manifest changed. As for any generated dependency, `dvc repro -s <stage>` alone does not rerun `check`:
`dvc repro` (or `dvc repro -s check <stage>`) sees a code edit.
"""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path

from polarcatalog.runner.pipelines import declaration

PACKAGE = "polarcatalog"
CODE_DIR = Path("data/interim/code")
NOTEBOOKS = Path("notebooks")


def module_files(src: Path) -> dict[str, Path]:
    """Every module of the package under `src`, by dotted name (a package by its `__init__.py`)."""
    out = {}
    for path in sorted((src / PACKAGE).rglob("*.py")):
        rel = path.relative_to(src).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        out[".".join(parts)] = path
    return out


def imported(tree: ast.AST, modules: dict[str, Path]) -> set[str]:
    """The package's modules named by the import statements of `tree`, anywhere in it."""
    return _resolved(_import_names(tree), modules)


def _import_names(tree: ast.AST) -> list[tuple[str, tuple[str, ...]]]:
    """Each import statement of `tree` as (module, names): `import a.b` -> ("a.b", ()); `from a import b, c` ->
    ("a", ("b", "c")). Absolute imports only."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, ()) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module, tuple(a.name for a in node.names)))
    return out


def _resolved(names: list[tuple[str, tuple[str, ...]]], modules: dict[str, Path]) -> set[str]:
    out = set()
    for module, subs in names:
        out |= {f"{module}.{a}" if f"{module}.{a}" in modules else module for a in subs} if subs else {module}
    return {m for m in out if m.split(".")[0] == PACKAGE}  # `from pkg import submodule` names the submodule


_PARSED: dict[str, list[tuple[str, tuple[str, ...]]]] = {}  # a source file's import statements, by its bytes' sha256


def file_imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """`imported` of a source file, its parse kept by the file's content: the warm process parses the package once
    (`warm_up`), and the `check` stage forked from it reads every unchanged module's imports from there."""
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest not in _PARSED:
        _PARSED[digest] = _import_names(ast.parse(data))
    return _resolved(_PARSED[digest], modules)


def warm_up() -> None:
    """Parse every module of the package this process imported (the checkout's src/, in the warm process)."""
    modules = module_files(Path(__file__).resolve().parents[2])  # src/polarcatalog/runner/code_deps.py -> src
    for path in modules.values():
        file_imports(path, modules)


def _with_parents(module: str, modules: dict[str, Path]) -> set[str]:
    parts = module.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts) + 1)} & modules.keys()


def closure(roots: set[str], modules: dict[str, Path], parsed: dict[str, set[str]] | None = None) -> set[str]:
    """Every module of the package that importing `roots` loads. `parsed` keeps each module's imports across calls
    (one parse per module for all the notebooks)."""
    parsed = {} if parsed is None else parsed
    seen: set[str] = set()
    todo = set().union(*(_with_parents(r, modules) for r in roots)) if roots else set()
    while todo:
        mod = todo.pop()
        if mod in seen:
            continue
        seen.add(mod)
        if mod not in parsed:
            parsed[mod] = file_imports(modules[mod], modules)
        for target in parsed[mod]:
            todo |= _with_parents(target, modules) - seen
    return seen


def notebook_imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules a notebook's code cells import (IPython magics and shell lines left out)."""
    nb = json.loads(path.read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    code = "\n".join(line for line in code.splitlines() if not line.lstrip().startswith(("%", "!")))
    return imported(ast.parse(code), modules)


def notebook_code(root: Path, notebook: Path, modules: dict[str, Path] | None = None,
                  parsed: dict[str, set[str]] | None = None) -> list[str]:
    """The src/ files a notebook runs, relative to `root`, sorted."""
    modules = module_files(root / "src") if modules is None else modules
    found = closure(notebook_imports(notebook, modules), modules, parsed)
    return sorted(str(modules[m].relative_to(root)) for m in found)


def manifest_path(notebook: str | Path) -> Path:
    """Where the check stage writes a notebook's code manifest: `notebooks/04_retrieve.ipynb` ->
    `data/interim/code/04_retrieve.txt` (relative to the repository root; a stage's dep in dvc.yaml)."""
    return CODE_DIR / f"{Path(notebook).stem}.txt"


def manifest_text(root: Path, files: list[str]) -> str:
    """`sha256  path` per file, in `sha256sum`'s format (`sha256sum -c` checks a manifest from the repository root)."""
    return "".join(f"{hashlib.sha256((root / f).read_bytes()).hexdigest()}  {f}\n" for f in files)


def manifest_files(text: str) -> list[str]:
    """The paths a manifest lists."""
    return [line.split("  ", 1)[1] for line in text.splitlines() if line]


def write_manifests(root: Path, dest: Path | None = None) -> list[Path]:
    """One manifest per notebook of `notebooks/`, into `dest` (default: `root / CODE_DIR`), replacing what was there
    (a deleted notebook's manifest goes with it). Returns the files written."""
    dest = root / CODE_DIR if dest is None else dest
    dest.mkdir(parents=True, exist_ok=True)
    modules, parsed = module_files(root / "src"), {}
    written = []
    for notebook in sorted((root / NOTEBOOKS).glob("*.ipynb")):
        path = dest / manifest_path(notebook).name
        path.write_text(manifest_text(root, notebook_code(root, notebook, modules, parsed)))
        written.append(path)
    for stale in set(dest.glob("*.txt")) - set(written):
        stale.unlink()
    return written


def stage_code(root: Path, stage: str) -> list[str]:
    """What reruns `stage` when it changes, relative to `root`, sorted: its notebook and the files its code manifest
    lists (as the check stage last wrote it)."""
    deps = [d for d in declaration(root, stage)["deps"] if isinstance(d, str)]
    files = [d for d in deps if d.startswith(f"{NOTEBOOKS}/")]
    for dep in deps:
        if dep.startswith(f"{CODE_DIR}/"):
            files += manifest_files((root / dep).read_text())
    return sorted(files)
