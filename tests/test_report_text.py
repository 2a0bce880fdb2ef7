"""The results page describes the run it came from: the command and experiment, every params value that is not the
committed file's, the chunks the λ sentence speaks of, the models of each role, and the reader's accuracy."""

from __future__ import annotations

import subprocess

import yaml

from polarcatalog.config import load_params
from polarcatalog.runner import profiles
from polarcatalog.stages import report
from tests.conftest import ROOT


def test_the_first_line_names_the_experiment_and_each_value_that_is_not_the_committed_one(tmp_path):
    git = lambda *a: subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)  # noqa: E731
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    git("init", "-q")
    git("add", "params.yaml")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "p")
    assert report.params_overrides(tmp_path) == {}
    assert report.run_text("abc", {}, "") == "Produced by `make repro` (`dvc repro`) at code commit `abc`, with `params.yaml` as committed"
    data = yaml.safe_load((tmp_path / "params.yaml").read_text())
    data["retrieval"]["lam"], data["encoders"]["flips"] = 0.5, False
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    overrides = report.params_overrides(tmp_path)
    assert overrides == {"encoders.flips": False, "retrieval.lam": 0.5}
    assert report.run_text("abc", overrides, "gpu-pokemon") == (
        "Produced by DVC experiment `gpu-pokemon` (`dvc exp run`) at code commit `abc`, with `params.yaml` as committed "
        "except `encoders.flips=false`, `retrieval.lam=0.5`")


def test_the_lam_sentence_speaks_of_the_configured_chunks():
    assert "both terms are image similarities" in report._lam_text("anchors", ["anchors", "multimodal"])
    text = report._lam_text("multimodal", ["multimodal", "anchors"])
    assert "`multimodal` chunks" in text and "Eq. 1" in text and "`anchors`" in text and "both terms are image" not in text


def test_the_models_section_names_the_gpu_profiles_models_and_the_cpu_default_keeps_its_caveats():
    default = load_params(ROOT / "params.yaml")
    cpu = "\n".join(report.models_section(default))
    assert "there is no reader model" in cpu and "linear probe" in cpu
    gpu = profiles.resolve("gpu-pokemon", ROOT)[0]
    text = "\n".join(report.models_section(gpu))
    for model in (*gpu.retrieval.ensemble, gpu.retrieval.reranker, gpu.graph.vlm_model, gpu.reader.model, gpu.curate.llm_model):
        assert f"`{model}`" in text, model
    assert "no reader" not in text and "every member's own text tower" in text and "linear probe" not in text


def test_the_reader_accuracy_leads_the_recognition_section_when_a_reader_ran():
    gpu = profiles.resolve("gpu-pokemon", ROOT)[0]
    acc = {str(k): {"value": 0.5 + k / 100, "ci_low": 0.4, "ci_high": 0.6, "n": 40} for k in (1, 3, 5, 10)}
    text = report._reader_text(gpu, {"R@k": {}, "reader accuracy": acc})
    assert f"Reader `{gpu.reader.model}`" in text and "top-5 summaries" in text and "**55.0 [40.0, 60.0]**" in text
    assert report._reader_text(load_params(ROOT / "params.yaml"), {"R@k": {}}) == ""


def test_failure_cases_show_distinct_species_first_and_the_absent_share_is_counted():
    import numpy as np
    import pandas as pd

    audit = pd.DataFrame({"query_id": [f"q{i:02d}" for i in range(8)], "split": ["test"] * 7 + ["dev"],
                          "gold_species_id": [1, 1, 1, 2, 3, 4, 5, 6],
                          "gold_rank": [np.inf, np.inf, np.inf, np.inf, 7.0, 2.0, 1.0, np.inf],
                          "ranked_species_ids": [[9]] * 8})
    cases = report.failure_cases(audit, n=4)
    assert list(cases["gold_species_id"]) == [1, 2, 3, 4]  # species 1's three absent queries count once before 2
    assert "split" in cases and "tie" not in cases and (cases["split"] == "test").all()
    assert list(report.failure_cases(audit, n=7)["gold_species_id"])[-2:] == [1, 1]  # then the repeats
    assert report.absent_text(audit, 20).startswith("4 of 7 test queries (57.1 %) never reach the top-20 candidates")


def test_the_failure_figure_shows_each_case_from_the_image_pack(tmp_path):
    """Query, gold and top-3 panels are decoded from the pack by the sha256 the tables record (the report stage reads no
    image file); an image the pack lacks, or that does not decode, is a blank panel, not an error."""
    import numpy as np
    import pandas as pd
    from PIL import Image

    from polarcatalog.data.images import image_pack, load_rgb
    from polarcatalog.io import sha256_file

    paths = []
    for i, colour in enumerate([(250, 0, 0), (0, 250, 0), (0, 0, 250)]):
        Image.new("RGB", (10 + i, 9), colour).save(tmp_path / f"{i}.png")
        paths.append(tmp_path / f"{i}.png")
    sha = [sha256_file(p) for p in paths]
    species = pd.DataFrame({"species_id": [1, 2, 3], "name": ["A", "B", "C"]})
    anchors = pd.DataFrame({"species_id": [1, 2, 3], "path": [str(p) for p in paths], "sha256": sha})
    images = dict(image_pack(anchors).itertuples(index=False))
    images[sha256_file(paths[2])] = b"not an image"
    queries = pd.DataFrame({"query_id": ["q"], "path": [str(paths[1])], "sha256": [sha[1]]})
    cases = pd.DataFrame({"query_id": ["q"], "gold_species_id": [1], "gold_rank": [np.inf], "ranked_species_ids": [[2, 3, 4]]})
    fig = report.failure_figure(cases, species, anchors, queries, images)
    shown = [ax.get_images()[0].get_array() for ax in fig.axes]
    expected = [load_rgb(paths[1]), load_rgb(paths[0]), load_rgb(paths[1])]
    assert all(np.array_equal(np.asarray(a), np.asarray(e)) for a, e in zip(shown[:3], expected))
    assert all(np.asarray(a).shape == (8, 8, 3) for a in shown[3:])  # undecodable, and a species without an anchor
    assert [ax.get_title().split("\n")[0] for ax in fig.axes] == ["query", "gold: A", "#1 B", "#2 C", "#3 ?"]
