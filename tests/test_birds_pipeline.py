"""A real `dvc repro birds/dvc.yaml` (the bird pipeline, `make repro PROFILE=birds-offline`) on the first 800 AviList
species, in a temp copy, with the reference data: its report has CIs, it reads only what it declares, and a second
repro runs nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from polarcatalog.app import audit
from polarcatalog.app.stages import declaration, stage_names
from tests.conftest import ROOT, shared

pytestmark = pytest.mark.slow
LIMIT = 800  # 13 of CUB's species are among the first 800 AviList species


def _sh(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    reference = shared("cub").parent
    repo = tmp_path_factory.mktemp("birds") / "repo"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for rel in filter(None, tracked.split("\0")):
        if (ROOT / rel).is_file() and not rel.startswith(("reports/", "data/")):
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, repo / rel)
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["birds"]["species_limit"] = LIMIT
    params["birds"]["reference_dir"] = str(reference)
    params["eval"]["bootstrap"] = 200
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "MLFLOW_TRACKING_URI": f"sqlite:///{repo}/mlflow.db", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t", audit.ENV: str(repo.parent / "audit")}
    env.pop("POLARCATALOG_ROOT", None)
    _sh(["git", "init", "-q"], repo, env)
    _sh(["git", "add", "-A"], repo, env)
    _sh(["git", "commit", "-qm", "snapshot"], repo, env)
    proc = _sh(["dvc", "repro", "birds/dvc.yaml"], repo, env)
    return repo, env, proc.stdout + proc.stderr


def test_catalog_graph_and_vectors(repo):
    root, _, log = repo
    species = pd.read_parquet(root / "data/birds/species.parquet")
    assert species["species_id"].tolist() == list(range(LIMIT)) and species["name"].iloc[0] == "Somali Ostrich"
    assert species["summary"].iloc[0] == "Somali Ostrich (Struthio molybdophanes): a bird of the genus Struthio, family " \
                                         "Struthionidae, order Struthioniformes."
    stats = json.loads((root / "reports/birds/catalog.json").read_text())
    assert stats["species"] == LIMIT and stats["dim"] == 384
    assert stats["graph"]["entities per kind"]["species"] == LIMIT
    assert "executing notebooks/10_birds_catalog.ipynb" in log  # one line per cell reaches the terminal


def test_reference_report_has_cis_and_says_what_needs_photos(repo):
    root, _, _ = repo
    m = json.loads((root / "reports/birds/reference.json").read_text())
    assert len(m["cub_classes_not_in_catalog"]) == 200 - 13
    row = m["text_retrieval"]["CUB's species/descriptors joined/mRR@1"]
    assert 0 <= row["ci_low"] <= row["value"] <= row["ci_high"] <= 1 and row["n"] > 0
    f = m["anchor_filter"]
    assert f["filter"] == "imagenet_bird" and f["birds"] == 48 and 0.5 < f["auc"] <= 1
    assert f["recall_ci"][0] <= f["recall"] <= f["recall_ci"][1]
    cub = next(b for b in m["benchmarks"] if b["benchmark"] == "cub")
    assert (cub["classes"], cub["matched"], cub["misses"]) == (200, 199, "Sayornis")
    md = (root / "reports/birds/reference.md").read_text()
    for part in ("## Text query → species", "| chance", "## Anchor filter", "## What needs photos", "species-bootstrap CIs", "nabirds"):
        assert part in md
    headline = json.loads((root / "reports/metrics/birds.json").read_text())
    assert headline["bird species"] == LIMIT and "test text mRR@1 (all species) lo" in headline
    for fig in ("birds_text_retrieval", "birds_anchor_filter"):
        assert (root / f"reports/figures/{fig}.png").stat().st_size > 1000


def test_bird_stages_read_only_what_they_declare_and_rerun_nothing(repo):
    root, env, _ = repo
    for stage in stage_names(root, ("birds/dvc.yaml",)):
        assert "run-notebook" in declaration(root, stage)["cmd"]
        record = json.loads((Path(env[audit.ENV]) / f"{stage}.json").read_text())
        missing = {kind: keys for kind, keys in audit.undeclared(root, stage, record).items() if keys}
        assert not missing, f"{stage} reads what birds/dvc.yaml does not declare: {missing}"
        assert any(k.startswith("birds.") for k in record["params"])
    out = _sh(["dvc", "status", "birds/dvc.yaml"], root, env).stdout
    assert "changed" not in out and "modified" not in out, out
