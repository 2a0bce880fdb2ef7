"""The GPU profiles rehearsed on the CPU, as a user would before renting a GPU: each profile's own overlay, every model
replaced by a tiny random model of the same class saved as local weights (tests/rehearsal_models.py), run through
`polarcatalog profile <name>` (`dvc exp run`) on a few species. Every stage runs, the VLM verifier, the VLM anchor
filter, the LLM summarizer and extractor and the reader are the paths taken, and the reports name the profile's models
and the reader's accuracy."""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
import yaml

from polarcatalog.runner.pipelines import stage_names
from tests.conftest import ROOT, run_ok, shared, snapshot_repo
from tests.rehearsal_models import rehearsal_overlay, save_rehearsal_models

pytestmark = pytest.mark.slow
CLI = str(Path(sys.executable).parent / "polarcatalog")


def _prepare(tmp: Path, name: str, edit_params, skip: tuple[str, ...] = ()) -> tuple[Path, dict[str, str], dict[str, str]]:
    """A snapshot repository whose profile overlay names the tiny models; (repo, env, models)."""
    repo = tmp / "repo"
    repo.mkdir(parents=True)
    models = save_rehearsal_models(tmp / "models", repo)  # writes the repository's models/open_clip_configs/ too
    env = snapshot_repo(repo, edit_params, {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}, skip=skip)
    overlay = repo / f"params.{name}.yaml"
    overlay.write_text(yaml.safe_dump(rehearsal_overlay(yaml.safe_load(overlay.read_text()), models), sort_keys=False))
    return repo, env, models


def _ran(output: str, repo: Path, pipeline: str) -> tuple[set[str], set[str]]:
    """(the pipeline's stages, those DVC says it ran)."""
    names = set(stage_names(repo, (pipeline,)))
    prefix = "" if pipeline == "dvc.yaml" else f"{pipeline}:"
    return names, {s for s in names if f"Running stage '{prefix}{s}'" in output}


@pytest.fixture(scope="module")
def pokemon(tmp_path_factory):
    def edit(params: dict) -> None:
        params["dataset"]["species_limit"] = 6
        params["tracking"]["log_notebook"] = False  # the tracking tests cover the notebook artifacts
        params["retrieval"]["r"] = 20
        params["retrieval"]["min_center_batch"] = 8
        params["ablations"]["lam"] = [0.0, 0.7, 1.0]
        params["ablations"]["top_k"] = [1, 3, 5]
        params["eval"]["bootstrap"] = 200

    repo, env, models = _prepare(tmp_path_factory.mktemp("gpu-pokemon"), "gpu-pokemon", edit)
    proc = run_ok([CLI, "profile", "gpu-pokemon"], repo, env, timeout=1500)
    return repo, models, proc.stdout + proc.stderr


def test_gpu_pokemon_runs_every_stage_on_its_models_with_the_reader_and_the_vlm_verifier(pokemon):
    repo, models, out = pokemon
    assert "$ dvc exp run dvc.yaml -n gpu-pokemon" in out
    stages, ran = _ran(out, repo, "dvc.yaml")
    assert ran == stages, (stages - ran, out[-3000:])
    readme = (repo / "reports" / "README.md").read_text()
    assert "Produced by DVC experiment `gpu-pokemon` (`dvc exp run`)" in readme and "`encoders.flips=false`" in readme
    for role in ("clip", "openclip", "siglip", "dinov2", "vlm", "llm"):
        assert models[role] in readme, role  # "This run's models" and the header name each one
    top_k = json.loads((repo / "reports" / "ablate_top_k.json").read_text())["test"]
    assert set(top_k["reader accuracy"]) == {"1", "3", "5"}
    assert f"Reader `{models['vlm']}`" in readme and "test accuracy **" in readme
    assert "there is no reader model" not in readme and "both terms are image similarities" not in readme
    assert f"Verifier: VLM `{models['vlm']}`, P(Yes)" in (repo / "reports" / "graph.md").read_text()
    curation = json.loads((repo / "reports" / "curation.json").read_text())
    assert curation["anchor_filter"]["name"] == "vlm"
    assert "an extractor model's JSON answers" in (repo / "reports" / "kg.md").read_text()


@pytest.fixture(scope="module")
def birds(tmp_path_factory):
    reference = shared("cub").parent
    pages: list[str] = []

    class MediaWiki(BaseHTTPRequestHandler):
        """A stand-in MediaWiki API: every title has a short article that says what the bird looks like."""

        def do_GET(self):  # noqa: N802 (http.server's name)
            title = parse_qs(urlparse(self.path).query)["titles"][0]
            pages.append(title)
            body = {"batchcomplete": True, "query": {"pages": [{"pageid": len(pages), "ns": 0, "title": title, "images": [],
                    "extract": f"The {title} is a small bird with red wings, a long tail and a short bill."}]}}
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(json.dumps(body).encode())

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), MediaWiki)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()

    def edit(params: dict) -> None:
        params["birds"]["species_limit"] = 30
        params["birds"]["reference_dir"] = str(reference)
        params["birds"]["wikipedia_api"] = f"http://127.0.0.1:{httpd.server_address[1]}/w/api.php"
        params["birds"]["wikipedia_interval_s"] = 0.0
        params["eval"]["bootstrap"] = 200

    try:
        repo, env, models = _prepare(tmp_path_factory.mktemp("gpu-birds"), "gpu-birds", edit, skip=("reports/", "data/"))
        proc = run_ok([CLI, "profile", "gpu-birds"], repo, env, timeout=1500)
    finally:
        httpd.shutdown()
        httpd.server_close()
    return repo, models, proc.stdout + proc.stderr, pages


def test_gpu_birds_runs_every_stage_with_wikipedia_the_llm_summarizer_and_the_vlm_filter(birds):
    repo, models, out, pages = birds
    assert "$ dvc exp run birds/dvc.yaml -n gpu-birds" in out
    stages, ran = _ran(out, repo, "birds/dvc.yaml")
    assert ran == stages, (stages - ran, out[-3000:])
    assert len(pages) >= 30  # every species' article came from the API
    reference = (repo / "reports" / "birds" / "reference.md").read_text()
    assert f"The VLM {models['vlm']}'s P(Yes)" in reference and "ImageNet classifier" not in reference
    assert "no CUB class in the catalog" in reference  # 30 species: the small-run message, not a crash
