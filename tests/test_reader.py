"""The MLLM reader (VR-RAG's recognition step): answers parsed and matched to species on canned outputs, the prompt's
content and order, and a tiny random Qwen2.5-VL through the real reader path (batched equals one by one)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from polarcatalog.eval.protocol import Protocol
from polarcatalog.reader.accuracy import reader_correct, reader_rows, top_k_prompts
from polarcatalog.reader.answers import SpeciesMatcher, parse_answer
from polarcatalog.reader.prompt import reader_prompt
from tests.tiny_models import save_tiny_qwen25_vl

NAMES = {0: "Laysan Albatross", 1: "Black-footed Albatross", 2: "Mr. Mime", 3: "Nidoran♀", 4: "Western Cattle Egret"}
ALIASES = {4: ["Cattle Egret"], 1: ["Phoebastria nigripes"]}


@pytest.mark.parametrize("answer,species,how", [
    ("Laysan Albatross", 0, "exact"),
    ("laysan_albatross.", 0, "exact"),
    ("The species is **Black-footed Albatross**.", 1, "exact"),
    ("Answer: 2. Mr Mime", 2, "exact"),  # a candidate's number kept with its name, dot dropped
    ("It is a Nidoran-F (the female one)", 3, "exact"),
    ("This appears to be the Laysan Albatross, judging by the white head.\nMore text.", 0, "exact"),
    ("Cattle egret", 4, "alias"),
    ("phoebastria nigripes", 1, "alias"),
    ("Laysan Albatros", 0, "fuzzy"),  # one letter off
    ("Black footed Albatros", 1, "fuzzy"),
    ("I cannot tell from this image.", None, "none"),
    ("", None, "none"),
    ("Albatross", None, "none"),  # a family, not a species: below the threshold
    ("Pikachu", None, "none"),  # a real name outside the catalog
])
def test_answers_match_exact_alias_fuzzy_and_garbage_is_wrong(answer, species, how):
    m = SpeciesMatcher(NAMES, ALIASES, threshold=0.85).match(answer)
    assert (m.species_id, m.how) == (species, how)
    assert (m.score == 1.0) == (how in ("exact", "alias"))
    if how == "fuzzy":
        assert 0.85 <= m.score < 1.0


def test_parse_and_threshold_bounds():
    assert parse_answer("**1. Laysan Albatross** (white head)") == "Laysan Albatross"
    assert parse_answer("Final answer: \"Mr. Mime\" - a psychic type") == "Mr. Mime"
    strict = SpeciesMatcher(NAMES, threshold=1.0)
    assert strict.match("Laysan Albatros").species_id is None
    with pytest.raises(ValueError, match="fuzzy threshold"):
        SpeciesMatcher(NAMES, threshold=0.0)


def test_prompt_keeps_retrieval_order_and_carries_facts():
    p = reader_prompt([("Laysan Albatross", "White  head,\n dark wings."), ("Black-footed Albatross", "Dark brown.")],
                      "birds", ["Laysan Albatross — in genus — Phoebastria"])
    lines = p.splitlines()
    assert lines[0] == "Here are descriptions of 2 bird species that may match the bird in the image:"
    assert lines[1] == "1. Laysan Albatross: White head, dark wings." and lines[2].startswith("2. Black-footed")
    assert "- Laysan Albatross — in genus — Phoebastria" in lines
    assert lines[-1].endswith("Reply only with the species name.")
    assert "Pokémon species" in reader_prompt([("Mew", "Pink.")], "pokemon")
    assert "Known facts" not in reader_prompt([("Mew", "Pink.")], "pokemon")
    with pytest.raises(ValueError, match="unknown reader domain 'fish'"):
        reader_prompt([], "fish")


def test_top_k_prompts_and_accuracy_rows_from_canned_answers():
    species = pd.DataFrame({"species_id": [10, 11, 12], "name": ["Aa", "Bb", "Cc"], "summary": ["a.", "b.", "c."]})
    ranked = np.array([[11, 10, -1], [12, 11, 10], [10, 12, 11], [11, 12, 10]])
    prompts = top_k_prompts(ranked, species, 2, "pokemon", facts=lambda ids: [f"fact {i}" for i in ids])
    assert "1. Bb: b.\n2. Aa: a." in prompts[0] and "- fact 11\n- fact 10" in prompts[0]
    assert "3." not in prompts[1]  # k = 2 only
    # a canned reader: names the first candidate, garbles one answer, says nothing once
    canned = {0: "Bb", 1: "Cc!", 2: "no idea", 3: ""}
    read = lambda ims, ps: [canned[i] for i in range(len(ps))]  # noqa: E731
    gold = np.array([11, 11, 10, 11])
    matcher = SpeciesMatcher(dict(zip(species["species_id"], species["name"])))
    correct, audit = reader_correct(read, [None] * 4, prompts, gold, matcher)
    assert correct.tolist() == [1.0, 0.0, 0.0, 0.0] and audit["how"].tolist() == ["exact", "exact", "none", "none"]
    protocol = Protocol.of([11, 11, 10, 11], ["test"] * 4, ["regular"] * 4, resamples=50)
    rows = reader_rows(read, [None] * 4, ranked, species, gold, matcher, protocol, [1, 2], "pokemon")
    test_all = rows[(rows["split"] == "test") & (rows["queries"] == "all")]
    assert test_all["metric"].unique().tolist() == ["reader accuracy"] and test_all["k"].tolist() == [1, 2]
    assert np.allclose(test_all["value"], 0.25) and (test_all["ci_low"] <= 0.25).all()


@pytest.fixture
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_tiny_qwen25_vl_reader_batched_equals_one_by_one(tmp_path, _one_thread):
    from polarcatalog.reader.mllm import MLLMReader

    folder = save_tiny_qwen25_vl(tmp_path / "vlm")
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)) for h, w in ((56, 56), (84, 56), (56, 112))]
    prompts = [reader_prompt([("Laysan Albatross", "White head."), ("Black-footed Albatross", "Dark brown.")]),
               reader_prompt([("Mew", "Pink.")], "pokemon"),
               reader_prompt([("Laysan Albatross", "White head.")], "birds", ["Laysan Albatross — in genus — Phoebastria"])]
    batched = MLLMReader(str(folder), "cpu", batch_size=3, max_new_tokens=5)
    single = MLLMReader(str(folder), "cpu", batch_size=1, max_new_tokens=5)
    out = batched.read(images, prompts)
    assert out == single.read(images, prompts)
    assert len(out) == 3 and all(isinstance(a, str) for a in out)
    assert batched.chat(prompts[0]).startswith("<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Here are")
    # the real path end to end: random weights answer garbage, which must count as wrong, never crash
    matcher = SpeciesMatcher(NAMES)
    correct, audit = reader_correct(batched.read, images, prompts, np.array([0, 2, 0]), matcher)
    assert correct.shape == (3,) and set(audit["how"]) <= {"exact", "alias", "fuzzy", "none"}
    with pytest.raises(ValueError, match="3 images for 2 prompts"):
        batched.read(images, prompts[:2])
