"""Stage deps by one rule (runner/code_deps.py): a stage's code is its notebook and the notebook's import closure
within src/, which `check` writes as the notebook's code manifest; every stage depends on its own manifest and on no
src/ file directly. Editing one stage's module then reruns `check` and that stage (and what reads its outputs), nothing
upstream. The real pipeline's reruns are in tests/test_pipeline.py."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys

import pytest

from polarcatalog.runner import code_deps
from polarcatalog.runner.pipelines import PIPELINES, declaration, stage_names
from tests.conftest import ROOT

STAGES = stage_names(ROOT)
MODULES = code_deps.module_files(ROOT / "src")


def _notebook(stage: str) -> str | None:
    return next((w for w in declaration(ROOT, stage)["cmd"].split() if w.startswith("notebooks/")), None)


@pytest.mark.parametrize("name", sorted(s for s in STAGES if s != "check"))
def test_a_stage_depends_on_its_notebooks_manifest_and_on_no_source_file(name):
    deps = [d for d in declaration(ROOT, name)["deps"] if isinstance(d, str)]
    notebook = _notebook(name)
    assert notebook in deps
    assert [d for d in deps if d.startswith(("src/", "data/interim/code"))] == [str(code_deps.manifest_path(notebook))]


def test_check_writes_the_manifests_from_all_code_and_notebooks():
    check = declaration(ROOT, "check")
    assert check["deps"] == ["src/polarcatalog", "notebooks", "params.yaml"]
    assert str(code_deps.CODE_DIR) in check["outs"] and f"--code-manifests {code_deps.CODE_DIR}" in check["cmd"]


def test_every_manifest_a_stage_reads_is_a_notebook_check_writes():
    notebooks = {str(code_deps.manifest_path(p)) for p in (ROOT / "notebooks").glob("*.ipynb")}
    read = {d for s in STAGES for d in declaration(ROOT, s)["deps"] if str(d).startswith("data/interim/code/")}
    assert read == notebooks


def test_the_closure_follows_parents_and_local_imports():
    found = code_deps.closure({"polarcatalog.retrieval.vrrag"}, MODULES)
    assert {"polarcatalog", "polarcatalog.retrieval", "polarcatalog.index.faiss_index"} <= found
    assert "polarcatalog.stages.retrieve" not in found and "polarcatalog.config" not in found


def test_a_stage_module_is_in_its_own_notebooks_code_only():
    """A stage module is read by its own notebook alone: no other stage reruns when it changes."""
    for module in ("retrieve", "graph", "kg", "embed", "curate", "report", "ablate"):  # report reads memory_quality
        path = f"src/polarcatalog/stages/{module}.py"
        owners = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb") if path in code_deps.notebook_code(ROOT, p))
        assert len(owners) == 1 and owners[0].endswith(module), (path, owners)


@pytest.mark.parametrize("name", sorted(n for n in STAGES if "run-notebook" in declaration(ROOT, n)["cmd"]))
def test_a_notebook_imports_its_own_stage_module_and_no_other(name):
    """The notebook of stage X reads `polarcatalog.stages.X` and the library, never another stage's module."""
    own = {m for m in code_deps.notebook_imports(ROOT / _notebook(name), MODULES) if m.startswith("polarcatalog.stages.")}
    module = "ablate" if name.startswith("ablate") else name  # ablate, ablate_polar, ablate_kg: one notebook, one module
    assert own == {f"polarcatalog.stages.{module}"}, (name, own)


@pytest.fixture
def checkout(tmp_path):
    """src/ and notebooks/ of this checkout, copied: what `check` reads to write the manifests."""
    for folder in ("src", "notebooks"):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("params.yaml", *PIPELINES):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def _manifests(root):
    return {p.name: p.read_text() for p in sorted((root / code_deps.CODE_DIR).glob("*.txt"))}


def test_check_params_writes_a_manifest_per_notebook_and_an_edit_changes_only_those_that_run_it(checkout):
    cmd = [sys.executable, "-m", "polarcatalog.cli.main", "check-params", "--no-device", "--stamp",
           "data/interim/params_valid.txt", "--code-manifests", str(code_deps.CODE_DIR)]
    subprocess.run(cmd, cwd=checkout, check=True, capture_output=True)
    before = _manifests(checkout)
    assert sorted(before) == sorted(f"{p.stem}.txt" for p in (checkout / "notebooks").glob("*.ipynb"))
    graph = before["03_graph.txt"].splitlines()
    line = next(x for x in graph if x.endswith("  src/polarcatalog/stages/graph.py"))  # `sha256sum` format
    assert line.split()[0] == hashlib.sha256((checkout / "src/polarcatalog/stages/graph.py").read_bytes()).hexdigest()
    assert all(x.split("  ")[1].startswith("src/polarcatalog/") for x in graph)
    assert code_deps.manifest_files(before["03_graph.txt"]) == code_deps.notebook_code(checkout, checkout / "notebooks/03_graph.ipynb")

    with open(checkout / "src/polarcatalog/stages/graph.py", "a") as f:
        f.write("# an edit\n")
    (checkout / code_deps.CODE_DIR / "stale.txt").write_text("from a notebook since deleted\n")
    subprocess.run(cmd, cwd=checkout, check=True, capture_output=True)
    after = _manifests(checkout)
    assert sorted(n for n in before if before[n] != after.get(n)) == ["03_graph.txt"] and "stale.txt" not in after


def test_code_manifests_without_a_stamp_is_refused_before_any_work(tmp_path):
    out = subprocess.run([sys.executable, "-m", "polarcatalog.cli.main", "check-params", "--no-device",
                          "--code-manifests", str(tmp_path / "code")], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 2 and "--code-manifests goes with --stamp" in out.stderr and not (tmp_path / "code").exists()


def test_a_files_imports_are_kept_by_its_content_and_an_edit_is_parsed_again(tmp_path):
    """The `check` stage forked from the warm process reads the imports of unchanged modules from the parse the warm
    process did (`code_deps.warm_up`); an edited file has other bytes, so it is parsed again, never served stale."""
    import ast

    src = tmp_path / "src"
    (src / "polarcatalog" / "sub").mkdir(parents=True)
    for name in ("__init__.py", "sub/__init__.py", "sub/a.py", "sub/b.py"):
        (src / "polarcatalog" / name).write_text("")
    mod = src / "polarcatalog" / "sub" / "a.py"
    mod.write_text("import os\nfrom polarcatalog.sub import b\n\ndef f():\n    import polarcatalog.sub  # local\n")
    modules = code_deps.module_files(src)
    assert code_deps.file_imports(mod, modules) == code_deps.imported(ast.parse(mod.read_bytes()), modules) == {
        "polarcatalog.sub.b", "polarcatalog.sub"}
    mod.write_text("from polarcatalog import sub\n")
    assert code_deps.file_imports(mod, modules) == {"polarcatalog.sub"}


def test_the_warm_up_parses_every_module_of_the_package():
    code_deps.warm_up()
    modules = code_deps.module_files(ROOT / "src")
    digests = {hashlib.sha256(p.read_bytes()).hexdigest() for p in modules.values()}
    assert digests <= code_deps._PARSED.keys()
