"""The read audit's parts, without a pipeline: what the recorder sees, and the coverage rules that compare it with
dvc.yaml. The real check, every stage of a real `dvc repro`, is in tests/test_pipeline.py."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest

from tests import read_audit as audit
from polarcatalog.runner.pipelines import declaration, stage_names
from polarcatalog.config import load_params
from polarcatalog.io import read_table
from tests.conftest import ROOT

DVC_YAML = """\
stages:
  curate:
    cmd: papermill notebooks/01_curate.ipynb out.ipynb
    deps: [notebooks/01_curate.ipynb, data/raw/pokemon/]
    params: [dataset.seed, curate.size_bins_m]
    outs: [data/processed/species.parquet]
    metrics:
      - reports/curation.json:
          cache: false
  ablate:
    foreach: [lam, top_k]
    do:
      cmd: papermill notebooks/05_ablate.ipynb out_${item}.ipynb -p axis ${item}
      deps: [data/features]
      params:
        - ablations.${item}
        - retrieval
      plots:
        - reports/figures/ablate_${item}.png:
            cache: false
"""


@pytest.fixture
def root(tmp_path):
    (tmp_path / "dvc.yaml").write_text(DVC_YAML)
    return tmp_path.resolve()


@pytest.fixture
def recording(root):
    recorder = audit.start(root)
    yield recorder
    audit.stop()


def _write(path, text="x"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_foreach_stages_are_expanded_with_their_item(root):
    assert stage_names(root) == ["curate", "ablate@lam", "ablate@top_k"]
    lam = declaration(root, "ablate@lam")
    assert lam["params"] == ["ablations.lam", "retrieval"]
    assert lam["plots"] == [{"reports/figures/ablate_lam.png": {"cache": False}}]


def test_a_declared_key_covers_itself_and_what_is_below_it(root):
    record = {"params": ["retrieval.lam", "retrieval.k", "ablations.lam", "ablations.top_k", "graph.kappa"], "files": []}
    assert audit.undeclared(root, "ablate@lam", record)["params"] == ["ablations.top_k", "graph.kappa"]
    record = {"params": ["curate.size_bins_m", "curate.chunk_words", "dataset.seed"], "files": []}
    assert audit.undeclared(root, "curate", record)["params"] == ["curate.chunk_words"]


def test_a_declared_path_covers_itself_and_what_is_below_it_outputs_included(root):
    record = {"params": [], "files": ["notebooks/01_curate.ipynb", "data/raw/pokemon/pokemon.json", "data/raw/pokemonx/a.png",
                                      "data/processed/species.parquet", "reports/curation.json", "data/processed/chunks.parquet"]}
    assert audit.undeclared(root, "curate", record) == {"params": [], "files": ["data/processed/chunks.parquet",
                                                                                "data/raw/pokemonx/a.png"]}
    record = {"params": [], "files": ["data/features/manifest.json", "reports/figures/ablate_lam.png", "reports/figures/ablate_top_k.png"]}
    assert audit.undeclared(root, "ablate@lam", record)["files"] == ["reports/figures/ablate_top_k.png"]


def test_the_recorder_sees_field_reads_not_whole_sections(root):
    params = load_params(ROOT / "params.yaml")  # as a stage does, before start_stage starts recording
    recording = audit.start(root)
    params.retrieval.lam, params.encoders.names  # noqa: B018 (names reads encoders.image)
    section = params.graph
    assert section == params.graph and section.model_dump()
    assert recording.params == {"retrieval.lam", "encoders.image"}
    audit.stop()
    params.dataset.seed  # noqa: B018
    assert recording.params == {"retrieval.lam", "encoders.image"}


def test_the_recorder_sees_reads_inside_the_repository_only(root, recording, tmp_path_factory):
    data = _write(root / "data/raw/a.txt")
    _write(root / "data/cache/features/x/index.parquet")
    _write(root / "src/polarcatalog/x.py")
    outside = _write(tmp_path_factory.mktemp("elsewhere") / "b.txt")
    for path in (data, root / "data/cache/features/x/index.parquet", root / "src/polarcatalog/x.py", outside):
        path.read_text()
    (root / "reports").mkdir()
    (root / "reports/out.json").write_text("{}")  # a write
    with open(root / "reports/log.txt", "a") as f:  # an append
        f.write("x")
    os.close(os.open(root / "data/raw/os_open.bin", os.O_WRONLY | os.O_CREAT))
    fd = os.open(_write(root / "data/raw/read_by_fd.bin"), os.O_RDONLY)
    os.close(fd)
    pd.DataFrame({"a": [1]}).to_parquet(root / "data/raw/t.parquet")
    assert read_table(root / "data/raw/t.parquet")["a"].tolist() == [1]
    assert recording.files == {"data/raw/a.txt", "data/raw/read_by_fd.bin", "data/raw/t.parquet"}


def test_finish_writes_the_stage_record_where_asked(root, tmp_path, monkeypatch):
    monkeypatch.setenv(audit.ENV, str(tmp_path / "audit"))
    params = load_params(ROOT / "params.yaml")
    audit.start(root)
    _write(root / "data/raw/a.txt").read_text()
    params.retrieval.lam  # noqa: B018
    path = audit.finish("ablate@lam")
    assert path == tmp_path / "audit" / "ablate@lam.json"
    record = json.loads(path.read_text())
    assert record == {"stage": "ablate@lam", "files": ["data/raw/a.txt"], "params": ["retrieval.lam"]}
    assert audit.undeclared(root, "ablate@lam", record) == {"params": [], "files": ["data/raw/a.txt"]}
    assert audit.finish("ablate@lam") is None  # no longer recording


def test_nothing_is_written_unless_asked(root, tmp_path, monkeypatch):
    monkeypatch.delenv(audit.ENV, raising=False)
    audit.start(root)
    _write(root / "data/raw/a.txt").read_text()
    assert audit.finish("ablate@lam") is None and not list(tmp_path.rglob("*.json"))


@pytest.mark.slow  # a real Jupyter kernel
def test_a_kernel_started_with_the_audit_env_installs_it(tmp_path):
    """sitecustomize.py runs in a Jupyter kernel (and only there): the stage's tracking functions are wrapped."""
    import subprocess
    import sys

    env = {**os.environ, **audit.kernel_env(tmp_path)}
    probe = "from polarcatalog.runner import tracking; print(tracking.start_stage.__name__)"
    plain = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert plain.stdout.strip() == "start_stage"  # not a kernel: nothing installed
    script = tmp_path / "ipykernel_launcher.py"  # stands for the kernel's command line, which sitecustomize reads
    script.write_text(probe)
    kernel = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, check=True)
    assert kernel.stdout.strip() == "started"
