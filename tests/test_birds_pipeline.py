"""A real `dvc repro birds/dvc.yaml` (the bird pipeline, `make repro PROFILE=birds-offline`) on the first 800 AviList
species, in a temp copy, with the reference data: its report has CIs, it reads only what it declares, and a second
repro runs nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tests import read_audit as audit
from polarcatalog.runner.pipelines import declaration, stage_names
from tests.conftest import run_ok, shared, snapshot_repo

pytestmark = pytest.mark.slow
LIMIT = 800  # 13 of CUB's species are among the first 800 AviList species


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    reference = shared("cub").parent
    repo = tmp_path_factory.mktemp("birds") / "repo"

    def edit(params: dict) -> None:
        params["birds"]["species_limit"] = LIMIT
        params["birds"]["reference_dir"] = str(reference)
        params["eval"]["bootstrap"] = 200

    env = snapshot_repo(repo, edit, audit.kernel_env(repo.parent / "audit"), skip=("reports/", "data/"))
    proc = run_ok(["dvc", "repro", "birds/dvc.yaml"], repo, env)
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
    for gallery in ("all catalog species", "CUB's species", "CUB's species, text = CUB attributes"):
        row = m["text_retrieval"][f"{gallery}/descriptors joined/mRR@1"]
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
    assert headline["bird species"] == LIMIT and "test text mRR@1 (CUB attribute texts) lo" in headline
    assert 1 <= len(headline) <= 8
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
    out = run_ok(["dvc", "status", "birds/dvc.yaml"], root, env).stdout
    assert "changed" not in out and "modified" not in out, out
