import pytest
import yaml

from polarcatalog.config import ParamsError, apply_overrides, flatten, load_params, validate
from tests.conftest import ROOT


def test_repo_params_are_valid_and_match_paper_defaults():
    p = load_params(ROOT / "params.yaml")
    assert (p.retrieval.r, p.retrieval.k, p.retrieval.lam) == (100, 5, 0.7)  # VR-RAG §6.1
    assert p.curate.summary_max_words == 127
    assert p.ablations.lam[0] == 0.0 and p.ablations.lam[-1] == 1.0 and len(p.ablations.lam) == 11


@pytest.mark.parametrize(
    "override, key, hint",
    [
        ({"curate.chunk_wordz": 40}, "curate.chunk_wordz", "allowed keys here"),
        ({"datasett": {}}, "datasett", "allowed keys here: ablations, curate, dataset"),
        ({"curate.chunk_words": "forty"}, "curate.chunk_words", "valid integer"),
        ({"curate.chunk_words": 0}, "curate.chunk_words", "greater than or equal to 5"),
        ({"retrieval.lam": 1.5}, "retrieval.lam", "less than or equal to 1"),
        ({"curate.summarizer": "gpt4"}, "curate.summarizer", "'extractive' or 'llm'"),
        ({"curate.anchor_filter": "clip"}, "curate.anchor_filter", "'prototype', 'imagenet_bird' or 'vlm'"),
        ({"dataset.query_variants": ["regular", "gold"]}, "dataset.query_variants.1", "'regular' or 'shiny'"),
        ({"encoders.image": ["resnet9000"]}, "encoders.image", "allowed: efficientnet_lite0, efficientnet_lite2, open_clip:"),
        ({"retrieval.reranker": "open_clip:ViT-B-32:openai"}, "(top level)", "add them to encoders.image"),
        ({"retrieval.k": 200}, "retrieval", "cannot exceed r"),
        ({"encoders.anchor_scale": 3}, "encoders.anchor_scale", "[8, 4096]"),
        ({"ablations.lam": [0.2, 2.0]}, "ablations.lam", "[0, 1]"),
        ({"curate.size_bins_m": [1.0, 0.5, 2.0, 4.0]}, "curate.size_bins_m", "strictly increasing"),
        ({"curate.chunk_overlap": 40}, "curate", "chunk_overlap (40) must be smaller than chunk_words (40)"),
        ({"curate.summarizer": "llm"}, "curate", "needs llm_model"),
        ({"dataset.sprites_sha256": "abc"}, "dataset.sprites_sha256", "pattern"),
        ({"ablations.coverage": ["top_n:6", "multi_prompt"]}, "ablations.coverage", "multi_prompt:<N>, global_local:<N>"),
        ({"ablations.coverage": ["global_local:0"]}, "ablations.coverage", "N >= 1"),
        ({"graph.proposer": "crops"}, "graph.proposer", "'multi_prompt', 'global_local' or 'all'"),
        ({"encoders.local_grid": 1}, "encoders.local_grid", "use 0 (no local views) or 2-4"),
        ({"graph.verifier": "zero_shot"}, "(top level)", "needs graph.zero_shot_encoder set to one of encoders.image"),
        ({"graph.verifier": "zero_shot", "graph.zero_shot_encoder": "efficientnet_lite0"}, "(top level)", "has no text tower"),
        ({"encoders.local_grid": 0}, "(top level)", "ablations.coverage (global_local:6), ablations.coverage (global_local:12) propose"),
        ({"encoders.local_grid": 0, "graph.proposer": "global_local", "ablations.coverage": ["all"]}, "(top level)",
         "graph.proposer propose from local views but encoders.local_grid is 0"),
    ],
)
def test_bad_params_fail_naming_the_key(override, key, hint):
    with pytest.raises(ParamsError) as err:
        load_params(ROOT / "params.yaml", override)
    msg = str(err.value)
    assert f"- {key}:" in msg, msg
    assert hint in msg, msg


def test_several_errors_are_reported_together(tmp_path):
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["curate"]["chunk_words"] = -1
    raw["retrieval"]["k"] = 0
    raw["tracking"]["colour"] = "red"
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ParamsError) as err:
        load_params(path)
    msg = str(err.value)
    assert str(path) in msg
    for key in ("curate.chunk_words", "retrieval.k", "tracking.colour"):
        assert f"- {key}:" in msg


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ParamsError, match="params file not found"):
        load_params(tmp_path / "nope.yaml")
    bad = tmp_path / "p.yaml"
    bad.write_text("dataset: [unclosed")
    with pytest.raises(ParamsError, match="not valid YAML"):
        load_params(bad)
    with pytest.raises(ParamsError, match="expected a mapping"):
        validate(["not", "a", "dict"])


def test_overrides_and_flatten():
    raw = {"dataset": {"seed": 0, "domain": "pokemon"}}
    out = apply_overrides(raw, {"dataset.seed": 3, "curate": {"chunk_words": 20}})
    assert out == {"dataset": {"seed": 3, "domain": "pokemon"}, "curate": {"chunk_words": 20}}
    assert raw["dataset"]["seed"] == 0  # no mutation
    assert flatten({"a": {"b": 1, "c": {"d": 2}}}) == {"a.b": 1, "a.c.d": 2}


def test_cli_check_params(tmp_path):
    from typer.testing import CliRunner

    from polarcatalog.cli import app

    ok = CliRunner().invoke(app, ["check-params", "--params", str(ROOT / "params.yaml")])
    assert ok.exit_code == 0 and '"lam": 0.7' in ok.output
    bad = tmp_path / "p.yaml"
    bad.write_text("curate:\n  chunk_words: 2\n")
    res = CliRunner().invoke(app, ["check-params", "--params", str(bad)])
    assert res.exit_code == 2 and "curate.chunk_words" in res.output
