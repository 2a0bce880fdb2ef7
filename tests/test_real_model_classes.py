"""The GPU-profile code paths (LLM summarizer, VLM anchor filter) run on tiny random models of the real
classes, loaded from disk the way a hub checkpoint is. Plumbing only: the numbers mean nothing."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from tests.tiny_models import save_tiny_causal_lm, save_tiny_qwen25_vl


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)  # 2 threads next to a busy process made these tiny forwards 30x slower
    yield
    torch.set_num_threads(n)


def test_llm_summarizer_batched_equals_one_by_one(tmp_path):
    from polarcatalog.curate.summarize import LLMSummarizer, create_summarizer

    folder = save_tiny_causal_lm(tmp_path / "lm")
    batched = LLMSummarizer(str(folder), "pokemon", max_new_tokens=6, device="cpu", batch_size=3)
    single = LLMSummarizer(str(folder), "pokemon", max_new_tokens=6, device="cpu", batch_size=1)
    names = ["Bulbasaur", "Pikachu", "Mew"]
    articles = ["A small green Pokémon.", "A yellow electric mouse with a long tail and red cheeks.", "Pink."]
    out = batched.summarize(names, articles)
    assert out == single.summarize(names, articles)
    assert len(out) == 3 and all(isinstance(s, str) for s in out)
    prompt = batched.prompt("Pikachu", articles[1])
    assert 'about the Pokémon species "Pikachu" into a concise paragraph' in prompt and articles[1] in prompt
    assert prompt.startswith("<|im_start|>user\n") and prompt.endswith("<|im_start|>assistant\n")
    assert isinstance(create_summarizer("llm", model=str(folder), device="cpu"), LLMSummarizer)
    with pytest.raises(ValueError, match="llm_model"):
        create_summarizer("llm", model=None)


def test_vlm_filter_p_yes_batched_equals_one_by_one(tmp_path):
    from polarcatalog.curate.anchors import VLMFilter, create_anchor_filter

    folder = save_tiny_qwen25_vl(tmp_path / "vlm")
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)) for h, w in ((56, 56), (84, 56), (56, 112))]
    batched = VLMFilter(str(folder), "birds", threshold=0.5, device="cpu", batch_size=3)
    single = VLMFilter(str(folder), "birds", threshold=0.5, device="cpu", batch_size=1)
    assert batched.question == "Is there a bird present in the Image? Reply only with Yes or No"
    p = batched.p_yes(images)
    assert p.shape == (3,) and ((p > 0) & (p < 1)).all()
    np.testing.assert_allclose(p, single.p_yes(images), atol=1e-5)
    assert np.ptp(p) > 1e-4  # different images, different scores: the image reaches the answer
    res = create_anchor_filter("vlm", vlm_model=str(folder), vlm_threshold=float(np.median(p)), domain="birds", device="cpu")(images)
    assert res.keep.sum() >= 1 and (res.keep == (res.scores >= res.threshold)).all()


def test_vlm_verifier_prefix_reuse_equals_one_by_one(tmp_path):
    """All concepts x templates of an image in one batch on a shared image prefix == full prompts one by one."""
    from polarcatalog.memory.verifiers import VLMVerifier

    folder = save_tiny_qwen25_vl(tmp_path / "vlm")
    v = VLMVerifier(str(folder), "cpu", templates=("Is there {concept}? Reply Yes or No", "Can you see {concept}?"))
    image = Image.fromarray(np.random.default_rng(1).integers(0, 255, (56, 84, 3), dtype=np.uint8))
    concepts = ["red wings", "a long tail", "fire", "a very long and detailed striped pattern"]
    calls = v.calls
    fast = v.scores(image, concepts)
    assert v.calls - calls == 2  # one prefix pass + one batched suffix pass
    slow = np.array([[v.p_yes_one(image, t.format(concept=c)) for t in v.templates] for c in concepts]).mean(1)
    np.testing.assert_allclose(fast, slow, atol=1e-5)
    assert np.ptp(fast) > 1e-4


def test_vlm_verifier_scores_catalog_queries_and_local_views(tmp_path):
    """The graph stage's VLM path: global views of catalog and query images, plus grid² local views of catalog images."""
    import pandas as pd

    from polarcatalog.data.pokemon import pokemon_vocabulary
    from polarcatalog.features.workspace import Workspace
    from polarcatalog.memory.inputs import GraphInputs
    from polarcatalog.memory.verifiers import VLMVerifier, create_verifier

    folder = save_tiny_qwen25_vl(tmp_path / "vlm")
    rng = np.random.default_rng(2)
    paths = []
    for i in range(3):
        a = np.full((64, 64, 3), 255, np.uint8)
        a[8:56, 8:56] = rng.integers(0, 255, (48, 48, 3))
        Image.fromarray(a).save(tmp_path / f"{i}.png")
        paths.append(str(tmp_path / f"{i}.png"))
    ws = Workspace(None, pd.DataFrame({"path": paths[:2]}), pd.DataFrame({"path": paths[2:]}), None, {}, {}, {}, {}, None)
    vocab = pokemon_vocabulary()[:5]
    inputs = GraphInputs(vocab, np.arange(2), np.zeros((2, 5), bool), np.zeros((2, 4)), np.arange(2), np.zeros((1, 4)),
                         np.arange(1), workspace=ws)
    verifier = create_verifier("vlm", model=str(folder), device="cpu", templates=2, local_grid=2)
    got = verifier.score(inputs)
    assert got.anchor.shape == (2, 5) and got.query.shape == (1, 5) and got.anchor_local.shape == (2, 4, 5)
    assert ((got.anchor_local > 0) & (got.anchor_local < 1)).all()
    assert not np.allclose(got.anchor_local[0, 0], got.anchor[0])  # a local view is another input, not the global one
    assert VLMVerifier(str(folder), "cpu", templates=2).score(inputs).anchor_local is None  # no local views unless asked
    assert verifier.calls_per_image(5) == 2 * (1 + 4)  # prefix + suffix batch, for the global view and 4 local views
