"""Stage deps by one rule (tests/stage_deps.py): each stage's code deps in dvc.yaml and birds/dvc.yaml are exactly the
import closure, within src/, of its notebook and its stage module. Editing one stage's module then reruns that stage
and what reads its outputs, nothing upstream."""

from __future__ import annotations

import pytest

from tests.stage_deps import closure, declared_code_deps, expected_code_deps, stages

STAGES = stages()


@pytest.mark.parametrize("name", sorted(STAGES))
def test_code_deps_are_the_import_closure(name):
    stage = STAGES[name]
    expected, declared = expected_code_deps(stage), declared_code_deps(stage)
    assert declared == expected, (f"{stage['_file']} stage {name}: missing {sorted(set(expected) - set(declared))}, "
                                  f"not imported {sorted(set(declared) - set(expected))} (`python -m tests.stage_deps` prints the list)")


def test_a_stage_module_is_a_dep_of_its_own_stage_only():
    """A stage module is read by its own notebook alone: no other stage reruns when it changes."""
    for module in ("retrieve", "graph", "kg", "embed", "curate", "report"):
        path = f"src/polarcatalog/stages/{module}.py"
        owners = sorted(name for name, stage in STAGES.items() if path in declared_code_deps(stage))
        assert owners == [module], (path, owners)


def test_the_closure_follows_parents_and_local_imports():
    found = closure({"polarcatalog.retrieval.vrrag"})
    assert {"polarcatalog", "polarcatalog.retrieval", "polarcatalog.index.faiss_index"} <= found
    assert "polarcatalog.stages.retrieve" not in found and "polarcatalog.config" not in found


@pytest.mark.parametrize("name", sorted(n for n, s in STAGES.items() if "run-notebook" in s["cmd"]))
def test_a_notebook_imports_its_own_stage_module_and_no_other(name):
    """The notebook of stage X reads `polarcatalog.stages.X` and the library, never another stage's module."""
    from tests.stage_deps import ROOT, notebook_imports

    notebook = next(w for w in STAGES[name]["cmd"].split() if w.startswith("notebooks/"))
    own = {m for m in notebook_imports(ROOT / notebook) if m.startswith("polarcatalog.stages.")}
    module = "ablate" if name.startswith("ablate") else name  # ablate, ablate_polar, ablate_kg: one notebook, one module
    assert own == {f"polarcatalog.stages.{module}"}, (notebook, own)
