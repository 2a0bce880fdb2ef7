"""The rule for a stage's code deps in dvc.yaml: exactly the import closure, within src/, of the stage's notebook
(whose imports include its `polarcatalog.stages` module). A module's closure includes the `__init__.py` of every
package above it (importing `a.b.c` runs `a/__init__.py` and `a/b/__init__.py`) and function-local imports (a
deferred import is still a dependency). A stage without a notebook (`check`) runs the `polarcatalog` command:
its closure is that of `polarcatalog.cli.main`.

    .venv/bin/python -m tests.stage_deps        # prints each stage's expected code deps
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PIPELINES = ("dvc.yaml", "birds/dvc.yaml", "selection/dvc.yaml")


def _module_files() -> dict[str, Path]:
    out = {}
    for path in sorted((SRC / "polarcatalog").rglob("*.py")):
        rel = path.relative_to(SRC).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        out[".".join(parts)] = path
    return out


MODULES = _module_files()


def _imported(tree: ast.AST) -> set[str]:
    """polarcatalog modules named by the import statements of `tree` (anywhere in it)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:  # `from pkg import submodule` names the submodule
                sub = f"{node.module}.{a.name}"
                out.add(sub if sub in MODULES else node.module)
    return {m for m in out if m.split(".")[0] == "polarcatalog"}


def _with_parents(module: str) -> set[str]:
    parts = module.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts) + 1)} & MODULES.keys()


def closure(roots: set[str]) -> set[str]:
    """Every polarcatalog module that importing `roots` loads."""
    seen: set[str] = set()
    todo = set().union(*(_with_parents(r) for r in roots)) if roots else set()
    while todo:
        mod = todo.pop()
        if mod in seen:
            continue
        seen.add(mod)
        for target in _imported(ast.parse(MODULES[mod].read_text())):
            todo |= _with_parents(target) - seen
    return seen


def notebook_imports(path: Path) -> set[str]:
    nb = json.loads(path.read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    code = "\n".join(line for line in code.splitlines() if not line.lstrip().startswith(("%", "!")))
    return _imported(ast.parse(code))


def stages() -> dict[str, dict]:
    """Every stage of the pipelines, by name, with the pipeline file it is declared in."""
    out = {}
    for file in PIPELINES:
        for name, stage in yaml.safe_load((ROOT / file).read_text())["stages"].items():
            out[name] = stage.get("do", stage) | {"_file": file}
    return out


def _collapse(files: set[Path], folder: Path) -> list[Path]:
    """`files` under `folder`, with every package folder whose modules are all in `files` named as the folder."""
    own = sorted(folder.glob("*.py"))
    subs = sorted(p for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").is_file())
    parts = [f for f in own if f in files] + [x for s in subs for x in _collapse(files, s)]
    if folder != SRC / "polarcatalog" and all(f in files for f in own) and parts == [*own, *subs]:
        return [folder]
    return parts


def expected_code_deps(stage: dict) -> list[str]:
    """The src/ paths a stage's code deps must be, sorted: the closure's files, a package folder when all of its
    modules are in the closure (DVC hashes the folder; .dvcignore leaves out __pycache__)."""
    cmd = stage["cmd"]
    notebook = next((w for w in cmd.split() if w.startswith("notebooks/") and w.endswith(".ipynb")), None)
    roots = notebook_imports(ROOT / notebook) if notebook else {"polarcatalog.cli.main"}
    files = {MODULES[m] for m in closure(roots)}
    return sorted(str(p.relative_to(ROOT)) for p in _collapse(files, SRC / "polarcatalog"))


def declared_code_deps(stage: dict) -> list[str]:
    return sorted(d for d in stage.get("deps", []) if isinstance(d, str) and d.startswith("src/"))


if __name__ == "__main__":
    for name, stage in stages().items():
        print(f"{name}:")
        for path in expected_code_deps(stage):
            print(f"  - {path}")
