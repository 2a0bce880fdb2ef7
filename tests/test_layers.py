"""The package's layers import only downward, with no cycle, and function-local imports only defer heavy
libraries. Reads the source (AST), runs nothing. The layers, lowest first (README, "Architecture"):

    base (paths, io, device, vectors, progress, numerics) -> content_cache -> data -> encoders -> curate | features -> index | eval -> retrieval
    -> memory -> kg | reader -> config -> app

A module may import its own package, and any package of a lower layer; never a higher layer, never a peer.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

from tests.conftest import ROOT

SRC = ROOT / "src"
LAYERS: list[list[str]] = [
    ["polarcatalog.parallel"],
    ["polarcatalog.paths", "polarcatalog.io", "polarcatalog.device", "polarcatalog.vectors", "polarcatalog.progress",
     "polarcatalog.numerics"],
    ["polarcatalog.content_cache"],
    ["polarcatalog"],
    ["polarcatalog.data"],
    ["polarcatalog.encoders"],
    ["polarcatalog.curate", "polarcatalog.features"],
    ["polarcatalog.index", "polarcatalog.eval"],
    ["polarcatalog.retrieval"],
    ["polarcatalog.memory"],
    ["polarcatalog.kg", "polarcatalog.reader"],
    ["polarcatalog.config"],
    ["polarcatalog.from_params"],
    ["polarcatalog.stages", "polarcatalog.runner"],
    ["polarcatalog.folder_eval"],
    ["polarcatalog.cli"],
]
# Function-local imports are allowed only to keep these out of `import polarcatalog...` (params validation, the CLI).
DEFERRED_OK = ("# heavy", "# optional")


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted((SRC / "polarcatalog").rglob("*.py"))}


def _unit(module: str) -> str:
    """The layer unit a module belongs to: the longest LAYERS entry that is the module or a package above it."""
    best = max((u for layer in LAYERS for u in layer if module == u or module.startswith(u + ".")), key=len)
    return best


def _layer(unit: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if unit in layer)


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """(imported polarcatalog module, line, inside a function) for every import statement of the file."""
    tree = ast.parse(path.read_text())
    out = []
    def visit(node: ast.AST, local: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                out.extend((a.name, child.lineno, local) for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module:
                for a in child.names:  # `from pkg import submodule` names the submodule
                    sub = f"{child.module}.{a.name}"
                    out.append((sub if sub in MODULES else child.module, child.lineno, local))
            visit(child, inner)
    visit(tree, False)
    return out


def _edges() -> list[tuple[str, str, int, bool]]:
    return [(mod, target, line, local) for mod, path in MODULES.items()
            for target, line, local in _imports(path) if target.split(".")[0] == "polarcatalog"]


def test_every_module_has_a_layer():
    assert "polarcatalog.cli.main" in MODULES and "polarcatalog.memory.constraints" in MODULES
    for module in MODULES:
        assert _unit(module), module


def upward_imports(edges: list[tuple[str, str, int, bool]]) -> list[str]:
    """Every import whose target's layer is not strictly below the importer's (same package excepted)."""
    bad = []
    for mod, target, line, _ in edges:
        a, b = _unit(mod), _unit(target)
        if a != b and _layer(b) >= _layer(a):
            bad.append(f"{mod}:{line} imports {target} ({b} is not below {a})")
    return bad


def test_no_import_runs_upward_or_across_peers():
    bad = upward_imports(_edges())
    assert not bad, "\n".join(bad)


def test_no_import_cycle_between_modules_or_packages():
    modules = nx.DiGraph((m, t) for m, t, _, _ in _edges() if m != t)
    assert nx.is_directed_acyclic_graph(modules), nx.find_cycle(modules)
    units = nx.DiGraph((_unit(m), _unit(t)) for m, t, _, _ in _edges() if _unit(m) != _unit(t))
    assert nx.is_directed_acyclic_graph(units), nx.find_cycle(units)


def test_function_local_imports_only_defer_heavy_libraries():
    bad = []
    for mod, path in MODULES.items():
        lines = path.read_text().splitlines()
        for target, line, local in _imports(path):
            if not local:
                continue
            block = [lines[line - 1]]  # the import line and the import lines right above it
            i = line - 2
            while i >= 0 and lines[i].strip().startswith(("import ", "from ")):
                block.append(lines[i])
                i -= 1
            if not any(mark in text for text in block for mark in DEFERRED_OK):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {target} inside a function without saying why")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("importer, target, allowed", [
    ("polarcatalog.stages.graph", "polarcatalog.memory.constraints", True),  # downward
    ("polarcatalog.memory.polar_graph", "polarcatalog.memory.propose", True),  # within a package
    ("polarcatalog.memory.constraints", "polarcatalog.stages.graph", False),  # upward
    ("polarcatalog.data.regions", "polarcatalog.curate.pipeline", False),
    ("polarcatalog.retrieval.vrrag", "polarcatalog.memory.polar_graph", False),
    ("polarcatalog.curate.pipeline", "polarcatalog.features.embedding", False),  # across peers
])
def test_the_rule_itself(importer, target, allowed):
    assert (not upward_imports([(importer, target, 1, False)])) == allowed
