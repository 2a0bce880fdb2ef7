import re
import subprocess
from pathlib import PurePosixPath

import pytest
import yaml

from polarcatalog.config import ParamsError, apply_overrides, flatten, load_params, validate
from tests.conftest import ROOT


def test_repo_params_are_valid_and_keep_what_the_papers_fix():
    """params.yaml validates, every key it sets is read back unchanged, and the values the papers fix hold: r and k
    (VR-RAG §6.1), a λ sweep that spans the whole [0, 1] range with the configured λ on its grid (Fig. 3)."""
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    p = load_params(ROOT / "params.yaml")
    dumped = flatten(p.model_dump(mode="json"))
    assert {k: v for k, v in flatten(raw).items() if k in dumped} == {k: dumped[k] for k in flatten(raw) if k in dumped}
    assert (p.retrieval.r, p.retrieval.k) == (100, 5)
    assert p.ablations.lam[0] == 0.0 and p.ablations.lam[-1] == 1.0 and p.retrieval.lam in p.ablations.lam


@pytest.mark.parametrize(
    "override, key, hint",
    [
        ({"curate.chunk_wordz": 40}, "curate.chunk_wordz", "allowed keys here"),
        ({"datasett": {}}, "datasett", "allowed keys here: ablations, birds, curate, dataset"),
        ({"curate.chunk_words": "forty"}, "curate.chunk_words", "valid integer"),
        ({"curate.chunk_words": 0}, "curate.chunk_words", "greater than or equal to 5"),
        ({"retrieval.lam": 1.5}, "retrieval.lam", "less than or equal to 1"),
        ({"curate.summarizer": "gpt4"}, "curate.summarizer", "'extractive' or 'llm'"),
        ({"curate.anchor_filter": "clip"}, "curate.anchor_filter", "'prototype', 'imagenet_bird' or 'vlm'"),
        ({"dataset.query_variants": ["regular", "gold"]}, "dataset.query_variants.1", "'regular' or 'shiny'"),
        ({"encoders.image": ["resnet9000"]}, "encoders.image.0", "allowed: efficientnet_lite0, efficientnet_lite1, efficientnet_lite2, <name>@<input px 32-1024>, open_clip:"),
        ({"encoders.image": ["efficientnet_lite0", "efficientnet_lite0"]}, "encoders.image", "each image encoder once"),
        ({"encoders.text": "efficientnet_lite0"}, "encoders.text", "unknown text encoder 'efficientnet_lite0'; allowed: minilm"),
        ({"encoders.image": ["open_clip:ViT-B-32:/nowhere/clip.safetensors"]}, "encoders.image.0", "checkpoint file"),
        ({"dataset.domain": "birds"}, "dataset.domain", "unknown domain 'birds'; allowed: pokemon"),
        ({"curate.pokeapi_dir": "/nowhere/pokeapi"}, "curate.pokeapi_dir", "/nowhere/pokeapi is not a folder"),
        ({"curate.filter_encoder": "open_clip:ViT-B-32-quickgelu:openai"}, "curate.filter_encoder", "allowed: efficientnet_lite0, efficientnet_lite1, efficientnet_lite2"),
        ({"graph.verifier": "oracle"}, "graph.verifier", "unknown verifier 'oracle'; allowed: probe, zero_shot, vlm"),
        ({"graph.constraint": "soft:-5"}, "graph.constraint", "allowed: none, hard, adaptive:<p_max > 0>, soft:<penalty >= 0>"),
        ({"ablations.constraint": ["hard", "medium"]}, "ablations.constraint.1", "allowed: none, hard, adaptive:<p_max > 0>, soft:"),
        ({"retrieval.reranker": "open_clip:ViT-B-32-quickgelu:openai"}, "(top level)", "add them to encoders.image"),
        ({"retrieval.k": 200}, "retrieval", "cannot exceed r"),
        ({"encoders.anchor_scale": 3}, "encoders.anchor_scale", "[8, 4096]"),
        ({"ablations.lam": [0.2, 2.0]}, "ablations.lam", "[0, 1]"),
        ({"curate.size_bins_m": [1.0, 0.5, 2.0, 4.0]}, "curate.size_bins_m", "strictly increasing"),
        ({"curate.chunk_overlap": 40}, "curate", "chunk_overlap (40) must be smaller than chunk_words (40)"),
        ({"curate.summarizer": "llm"}, "curate", "needs llm_model"),
        ({"dataset.sprites_sha256": "abc"}, "dataset.sprites_sha256", "pattern"),
        ({"ablations.coverage": ["top_n:6", "multi_prompt"]}, "ablations.coverage.1", "multi_prompt:<N>, global_local:<N>"),
        ({"ablations.coverage": ["global_local:0"]}, "ablations.coverage.0", "N >= 1"),
        ({"graph.proposer": "crops"}, "graph.proposer", "proposer 'crops'; allowed: all, top_n:<N>, multi_prompt:<N>, global_local:<N>, random_n:<N>"),
        ({"encoders.local_grid": 1}, "encoders.local_grid", "use 0 (no local views) or 2-4"),
        ({"graph.verifier": "zero_shot"}, "(top level)", "needs graph.zero_shot_encoder set to one of encoders.image"),
        ({"graph.verifier": "zero_shot", "graph.zero_shot_encoder": "efficientnet_lite0@192"}, "(top level)", "has no text tower"),
        ({"ablations.coverage": ["top_n:6", "global_local:6", "global_local:12"]}, "(top level)",
         "ablations.coverage (global_local:6), ablations.coverage (global_local:12) propose"),
        ({"encoders.local_grid": 2}, "(top level)", "encodes local views that no stage reads"),
        ({"retrieval.hubness": "mnn"}, "retrieval.hubness", "'none' or 'csls'"),
        ({"encoders.local_grid": 0, "graph.proposer": "global_local:12", "ablations.coverage": ["all"]}, "(top level)",
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
    with pytest.raises(ParamsError, match="not valid params YAML"):
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

    from polarcatalog.cli.main import app

    ok = CliRunner().invoke(app, ["check-params", "--params", str(ROOT / "params.yaml")])
    assert ok.exit_code == 0 and '"lam": 0.7' in ok.output
    bad = tmp_path / "p.yaml"
    bad.write_text("curate:\n  chunk_words: 2\n")
    res = CliRunner().invoke(app, ["check-params", "--params", str(bad)])
    assert res.exit_code == 2 and "curate.chunk_words" in res.output


def test_check_params_says_when_a_failed_experiment_left_its_value_in_params_yaml(tmp_path):
    """`dvc exp run -S retrieval.lam=2` fails in `check` and DVC leaves `lam: 2` in params.yaml: the message says the
    file differs from the commit and how to restore it; an invalid committed file gets no such hint."""
    from typer.testing import CliRunner

    from polarcatalog.cli.main import app

    git = lambda *a: subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)  # noqa: E731
    text = (ROOT / "params.yaml").read_text()
    (tmp_path / "params.yaml").write_text(text)
    git("init", "-q")
    git("add", "params.yaml")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "params")
    (tmp_path / "params.yaml").write_text(text.replace("  lam: 0.7", "  lam: 2", 1))
    res = CliRunner().invoke(app, ["check-params", "--params", str(tmp_path / "params.yaml")])
    assert res.exit_code == 2 and "retrieval.lam" in res.output
    assert "differs from the last commit" in res.output and "git checkout params.yaml" in res.output
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "an invalid value, committed")
    res = CliRunner().invoke(app, ["check-params", "--params", str(tmp_path / "params.yaml")])
    assert res.exit_code == 2 and "differs from the last commit" not in res.output
    # outside git (a copy in /tmp) there is no commit to restore from: `git diff` exits 1 there too, and the hint
    # sent the user to a `git checkout` that fails
    outside = tmp_path.parent / f"{tmp_path.name}_outside"
    outside.mkdir()
    (outside / "params.yaml").write_text(text.replace("  lam: 0.7", "  lam: 2", 1))
    res = CliRunner().invoke(app, ["check-params", "--params", str(outside / "params.yaml")])
    assert res.exit_code == 2 and "retrieval.lam" in res.output and "git checkout" not in res.output


@pytest.mark.parametrize("sets, message", [
    (["retrieval.lam"], "--set 'retrieval.lam': expected <section>.<key>=<value>, e.g. --set retrieval.lam=0.5"),
    (["=0.5"], "--set '=0.5': expected <section>.<key>=<value>"),
    (["retrieval.lam=[0.5"], "--set 'retrieval.lam=[0.5': the value is not YAML"),
    (["retrieval.lam=0.5", "retrieval.k=zero"], "retrieval.k: Input should be a valid integer (got 'zero') [from the "
                                                "override retrieval.k]"),
])
def test_a_bad_set_is_named_as_the_set_not_blamed_on_the_params_file(tmp_path, sets, message):
    """`--set retrieval.lam` (no `=`) was 'not enough values to unpack'; a bad --set value read as a params.yaml error."""
    from typer.testing import CliRunner

    from polarcatalog.cli.main import app

    (tmp_path / "q").mkdir()
    args = [a for item in sets for a in ("--set", item)]
    res = CliRunner().invoke(app, ["evaluate", "--queries", str(tmp_path / "q"), "--params", str(ROOT / "params.yaml"), *args])
    assert res.exit_code == 2 and message in res.output, res.output
    assert "unpack" not in res.output and "Traceback" not in res.output


def test_compound_values_are_typed_once_and_written_back_as_text():
    from polarcatalog.encoders import EncoderSpec
    from polarcatalog.memory.constraints import Strength
    from polarcatalog.memory.propose import ProposerSpec

    p = load_params(ROOT / "params.yaml", {"graph.constraint": "soft:0.03", "graph.proposer": "top_n:12",
                                           "encoders.image": ["efficientnet_lite0", "open_clip:ViT-B-32-quickgelu:openai"],
                                           "retrieval.ensemble": ["efficientnet_lite0"], "retrieval.reranker": None, "retrieval.colour_invariant": []})
    assert p.graph.constraint == Strength("soft", 0.03)
    assert load_params(ROOT / "params.yaml", {"graph.constraint": "adaptive:0.5"}).graph.constraint == Strength("adaptive", 0.5)
    assert p.encoders.image[1] == EncoderSpec("open_clip", "ViT-B-32-quickgelu", "openai") and p.encoders.names[1] == "open_clip:ViT-B-32-quickgelu:openai"
    assert p.ablations.coverage[0] == ProposerSpec("random_n", 6) and p.graph.proposer == ProposerSpec("top_n", 12)
    dumped = p.model_dump(mode="json")
    assert dumped["graph"]["constraint"] == "soft:0.03" and dumped["ablations"]["coverage"][-1] == "all"
    assert validate(dumped) == p  # the text form parses back to the same typed values


def test_zero_shot_on_an_encoder_without_a_text_tower_fails_at_check_params(tmp_path):
    """A DINOv2 (image-only) transformers model as the zero-shot space: rejected before any compute, by the same
    text-tower check the verifier makes at runtime (the model's own config.json)."""
    from typer.testing import CliRunner
    from transformers import Dinov2Config, Dinov2Model

    from polarcatalog.cli.main import app

    folder = tmp_path / "dinov2"
    Dinov2Model(Dinov2Config(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, mlp_ratio=2, image_size=28)).save_pretrained(folder)
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["encoders"]["image"] = [*raw["encoders"]["image"], f"hf:{folder}"]
    raw["graph"] |= {"verifier": "zero_shot", "zero_shot_encoder": f"hf:{folder}"}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw))
    res = CliRunner().invoke(app, ["check-params", "--params", str(path)])
    assert res.exit_code == 2 and f"graph.zero_shot_encoder 'hf:{folder}' has no text tower" in res.output


def test_cli_rejects_a_negative_soft_penalty_like_params_do(tmp_path):
    """`--strength soft:-5` fails in the CLI before any encoding, with the same message params.yaml gets."""
    from typer.testing import CliRunner

    from polarcatalog.cli.main import app

    (tmp_path / "q").mkdir()
    res = CliRunner().invoke(app, ["evaluate", "--queries", str(tmp_path / "q"), "--params", str(ROOT / "params.yaml"),
                                   "--where", "a red Pokémon", "--strength", "soft:-5"])
    with pytest.raises(ParamsError) as in_params:
        load_params(ROOT / "params.yaml", {"graph.constraint": "soft:-5"})
    assert res.exit_code == 2
    message = str(in_params.value).splitlines()[-1].strip()
    assert "graph.constraint: constraint strength 'soft:-5'; allowed:" in message
    # the check params.yaml gets, named as the option the user typed
    assert "error: --strength: " + message.split("graph.constraint: ", 1)[1].split(" [from")[0].split(" (got ")[0] in res.output


@pytest.mark.parametrize("args, message", [
    (["--strength", "hard"], "--strength applies to a --where constraint; give --where too"),
    (["--set", "dataset.species_limit=20"], "--set dataset.species_limit: evaluate does not read it"),
    (["--set", "tracking.experiment=x"], "--set tracking.experiment: evaluate does not read it"),
    # a typo is an unknown key, not a catalog setting to change with `dvc exp run` (that advice failed)
    (["--set", "foo.bar=1"], "unknown"),
    (["--set", "Retrieval.lam=0.5"], "unknown"),
    (["--set", "reader.model=x"], "reader is for the pipeline's stages"),
    (["--set", "graph.constraint=hard"], "--set graph.constraint: the graph's settings apply with --where only"),
    (["--set", "kg.hops=2"], "--set kg.hops: the knowledge graph's settings apply with --kgret only"),
    (["--set", "encoders.anchor_scale=null"], "evaluate sees the catalog anchors at --anchor-scale"),
    (["--set", "encoders.flips=false"], "--set encoders.flips: evaluate does not read it (the embed stage decided"),
    (["--set", "eval.dev_fraction=0.9"], "--set eval.dev_fraction: evaluate does not read it"),
    (["--set", "retrieval.reference_folds=3"], "--set retrieval.reference_folds: evaluate does not read it"),
    # an empty value is YAML's null: `reranker=` (an unset shell variable) turned the re-ranker off without a word
    (["--set", "retrieval.reranker="], "the value is empty; give one, or `retrieval.reranker=null` to unset it"),
    # B = 0 bridges nothing; its list was the first-stage top-k, not what a plain run prints
    (["--kgret", "0"], "--kgret 0 adds no species"),
    (["--kgret", "51"], "--kgret 51: B is from 1 to 50"),
    (["--kgret", "-1"], "--kgret -1: B is from 1 to 50"),
    # a profile's overlay named as one, not validated as a params file ("unknown key" for its departures)
    (["--params", str(ROOT / "params.gpu-pokemon.yaml")], "is the gpu-pokemon profile's overlay"),
    (["--set", "encoders.device=cuda"], "encoders.device = cuda, but torch sees no GPU on this machine"),
    (["--anchor-scale", "²"], "--anchor-scale '²': use auto, catalog or a size in px"),
    (["--show", "0"], "Invalid value for '--show'"),
    (["--params", str(ROOT / "params.birds-offline.yaml")], "is the birds-offline profile's overlay"),
])
def test_an_option_evaluate_would_ignore_or_misread_is_refused_before_any_work(tmp_path, args, message):
    """Each was accepted: --strength without --where and pipeline keys were validated then unused, --show -1 printed
    nine names, '²' raised int()'s error, a profile overlay was read as a whole params file (its defaults filled in)."""
    from typer.testing import CliRunner

    from polarcatalog.cli.main import app

    if "encoders.device=cuda" in args:
        import torch

        if torch.cuda.is_available():
            pytest.skip("a GPU is visible: encoders.device=cuda is valid here")
    (tmp_path / "q").mkdir()
    params = [] if "--params" in args else ["--params", str(ROOT / "params.yaml")]
    res = CliRunner().invoke(app, ["evaluate", "--queries", str(tmp_path / "q"), "--out", str(tmp_path / "o"), *params, *args])
    assert res.exit_code == 2 and message in " ".join(res.output.split()), res.output
    assert not (tmp_path / "o").exists() and "Traceback" not in res.output


def test_a_params_copy_outside_the_project_scores_against_the_project_it_is_run_in(tmp_path, monkeypatch):
    """The project was taken to be the params file's folder: a copy in /tmp sent the user to `dvc repro embed`."""
    from polarcatalog.cli.main import _project_root

    (tmp_path / "mine.yaml").write_text((ROOT / "params.yaml").read_text())
    monkeypatch.delenv("POLARCATALOG_ROOT", raising=False)
    monkeypatch.chdir(ROOT / "docs")
    assert _project_root(tmp_path / "mine.yaml") == ROOT and _project_root(ROOT / "params.yaml") == ROOT
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="nor the working folder is inside a PolarCatalog project"):
        _project_root(tmp_path / "mine.yaml")


def test_dvc_exp_run_set_param_changes_only_that_line_of_params_yaml(tmp_path):
    """`dvc exp run -S` rewrites params.yaml with DVC's own YAML writer (the function below is what it calls): the
    committed layout is that writer's, so an experiment's diff is the one value it sets."""
    from dvc.utils.hydra import apply_overrides

    path = tmp_path / "params.yaml"
    path.write_text((ROOT / "params.yaml").read_text())
    apply_overrides(path, ["retrieval.lam=0.123", "ablations.top_k=[1,2]"])
    import difflib

    before, after = (ROOT / "params.yaml").read_text().splitlines(), path.read_text().splitlines()
    diff = [line for line in difflib.unified_diff(before, after, lineterm="", n=0) if line[:1] in "+-"][2:]
    lam = next(line for line in before if line.startswith("  lam: "))
    assert diff[0] == f"-{lam}" and diff[1].startswith("+  lam: 0.123 ") and diff[1].split("#")[1:] == lam.split("#")[1:]
    assert sorted(diff[2:]) == sorted(["-  - 3", "-  - 5", "-  - 10", "-  - 15", "+  - 2"])  # top_k: [1, 2]


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)) + "dataset: *i\n"


def test_an_alias_bomb_fails_fast_within_a_memory_limit(tmp_path):
    """Nine levels of nine aliases: ~1 KB that expands to 9^9 items. Refused at the first alias, in a process
    limited to 1 GiB and 60 s (the expanded value once exhausted memory in the error message)."""
    import resource
    import subprocess
    import sys

    bomb = tmp_path / "params.yaml"
    bomb.write_text(BOMB)
    assert len(BOMB) < 1024

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    proc = subprocess.run([sys.executable, "-m", "polarcatalog.cli", "check-params", "--params", str(bomb)],
                          capture_output=True, text=True, timeout=60, preexec_fn=limit)
    assert proc.returncode == 2 and "aliases (*a) are not allowed" in proc.stderr and len(proc.stderr) < 1000


def test_duplicate_keys_and_empty_files_are_refused(tmp_path):
    p = tmp_path / "params.yaml"
    p.write_text("retrieval:\n  k: 5\n  lam: 0.5\nretrieval:\n  lam: 0.7\n")
    with pytest.raises(ParamsError, match=r"line 4: key 'retrieval' appears twice .*first on line 1"):
        load_params(p)
    p.write_text("# only a comment\n")
    with pytest.raises(ParamsError, match="no params in it"):
        load_params(p)
    p.write_bytes(b"dataset:\n  domain: pok\xe9mon\n")
    with pytest.raises(ParamsError, match="not UTF-8"):
        load_params(p)


@pytest.mark.parametrize("override, key", [({"retrieval.k": True}, "retrieval.k"), ({"retrieval.r": "100"}, "retrieval.r"),
                                           ({"encoders.content_box": "yes"}, "encoders.content_box"),
                                           ({"dataset.sprites_sha256": 0}, "dataset.sprites_sha256")])
def test_values_of_the_wrong_type_are_refused_not_coerced(override, key):
    with pytest.raises(ParamsError, match=rf"- {key}: "):
        load_params(ROOT / "params.yaml", override)
    assert load_params(ROOT / "params.yaml", {"retrieval.lam": 1}).retrieval.lam == 1.0  # an int is a float


def test_an_error_message_shows_a_bounded_value():
    with pytest.raises(ParamsError) as err:
        load_params(ROOT / "params.yaml", {"retrieval.k": list(range(100_000))})
    assert len(str(err.value)) < 500


def test_the_check_stage_is_upstream_of_every_stage_and_stamps_only_valid_params(tmp_path):
    """A bad value must fail before DVC deletes any stage's outputs to rerun it: every stage depends on an output of
    `check` (its notebook's code manifest), and the stamp does not change with the params, so it reruns nothing by
    itself."""
    from typer.testing import CliRunner

    from polarcatalog.cli.main import app

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    check_outs = stages["check"]["outs"]
    downstream = {name: any(PurePosixPath(d).is_relative_to(o) for d in s.get("do", s)["deps"] for o in check_outs)
                  for name, s in stages.items() if name != "check"}
    assert downstream and all(downstream.values()), downstream
    bad = tmp_path / "params.yaml"
    bad.write_text((ROOT / "params.yaml").read_text().replace("sprites_sha256: \n", "sprites_sha256: 0\n#"))
    out = tmp_path / "stamp.txt"
    result = CliRunner().invoke(app, ["check-params", "--params", str(bad), "--stamp", str(out)])
    assert result.exit_code == 2 and "dataset.sprites_sha256" in result.output and not out.exists()
    for _ in range(2):
        assert CliRunner().invoke(app, ["check-params", "--stamp", str(out)]).exit_code == 0
    assert out.read_text() == "params.yaml validated\n"
    (tmp_path / "a_file").write_text("")
    impossible = CliRunner().invoke(app, ["check-params", "--stamp", str(tmp_path / "a_file" / "stamp.txt")])
    assert impossible.exit_code == 2 and "error: --stamp" in impossible.output  # a message, not a traceback


@pytest.mark.parametrize("key, value", [
    ("graph.kappa", float("inf")), ("retrieval.bridge_alpha", float("inf")), ("retrieval.lam", float("nan")),
    ("ablations.kappa_sensitivity", [0.5, float("inf")]), ("graph.seed", 4294967296), ("eval.bootstrap", 10**9),
])
def test_infinite_nan_and_unbounded_values_fail_validation_naming_the_key(key, value):
    """`.inf` and `.nan` are YAML floats and a seed past 2**32 - 1 an int, but none is a value any knob means: they
    passed check-params and crashed a stage (or wrote NaN into a metrics file) after DVC deleted its outputs."""
    with pytest.raises(ParamsError, match=key.split(".")[-1]):
        load_params(ROOT / "params.yaml", {key: value})


def test_every_numeric_knob_has_an_upper_bound():
    """A typo in an int or float (a missing decimal point, a seed of 2**40) fails validation, not the stage."""
    import annotated_types

    from polarcatalog.config import Params

    unbounded = []
    for section, field in Params.model_fields.items():
        model = field.annotation
        for name, f in getattr(model, "model_fields", {}).items():
            if f.annotation in (int, float, int | None, float | None):
                if not any(isinstance(m, (annotated_types.Le, annotated_types.Lt)) for m in f.metadata):
                    unbounded.append(f"{section}.{name}")
    assert not unbounded, unbounded


def test_a_partial_params_file_is_refused_naming_the_keys_it_lacks(tmp_path, monkeypatch):
    """A file holding only `retrieval.lam` validated (every field has a default) and scored with built-in defaults in
    place of the catalog's values: the encoders it named were not the catalog's, and the error sent the user to
    `dvc repro embed`. Keys evaluate does not read (curate, tracking) may be left out."""
    import yaml
    from typer.testing import CliRunner

    from polarcatalog.cli.main import app

    monkeypatch.delenv("POLARCATALOG_ROOT", raising=False)
    monkeypatch.chdir(ROOT)
    (tmp_path / "q").mkdir()
    (tmp_path / "mine.yaml").write_text("retrieval:\n  lam: 0.3\n")
    args = ["evaluate", "--queries", str(tmp_path / "q"), "--out", str(tmp_path / "o"), "--params", str(tmp_path / "mine.yaml")]
    res = CliRunner().invoke(app, args)
    said = " ".join(res.output.split())
    assert res.exit_code == 2 and "is not a full params file: it lacks" in said, res.output
    assert re.search(r"encoders.image, .* and \d+ more, which evaluate reads", said) and "dvc repro embed" not in said
    assert "retrieval.lam" not in said.split("it lacks")[1].split("which evaluate")[0]
    assert not (tmp_path / "o").exists()
    full = yaml.safe_load((ROOT / "params.yaml").read_text())
    del full["curate"], full["tracking"]  # the catalog's shaping and the store: not read by evaluate
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(full))
    res = CliRunner().invoke(app, args)
    assert "not a full params file" not in res.output


def test_check_params_refuses_a_profile_overlay_as_a_params_file():
    """It exited 0 and printed the built-in defaults filled in around the overlay's keys: values no run would use."""
    from typer.testing import CliRunner

    from polarcatalog.cli.main import app

    res = CliRunner().invoke(app, ["check-params", "--params", str(ROOT / "params.birds-offline.yaml")])
    assert res.exit_code == 2 and "is the birds-offline profile's overlay" in res.output
    assert "check it with --profile birds-offline" in " ".join(res.output.split())


def test_a_check_across_keys_names_the_values_without_dumping_every_param():
    """`--set retrieval.reranker=None` printed several hundred characters of the whole params dict after the reason."""
    from polarcatalog.config import ParamsError, load_params

    with pytest.raises(ParamsError) as err:
        load_params(ROOT / "params.yaml", {"retrieval.reranker": "None"})
    text = str(err.value)
    assert "retrieval uses ['None']" in text and "YAML's empty value is null" in text
    assert "ablations" not in text and len(text) < 600, text


def test_experiments_refuses_a_table_width_no_table_fits():
    """`experiments --width 0` and `--width -5` were accepted silently."""
    from typer.testing import CliRunner

    from polarcatalog.cli.main import app

    for width in ("0", "-5", "39"):
        res = CliRunner().invoke(app, ["experiments", "--width", width])
        assert res.exit_code == 2 and "--width" in res.output
