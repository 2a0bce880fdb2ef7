"""The polarized graph: construction, GraphML round-trip, incidence, completion, quality; proposer; probe honesty."""

import numpy as np
import pytest

from polarcatalog.data.concepts import Concept
from polarcatalog.memory.polar_graph import PolarGraph, align_edges, edge_quality, graph_stats, read_graphml
from polarcatalog.memory.partition import HAS, NOT_HAS, UNCERTAIN
from polarcatalog.memory.propose import ProposerSpec, create_proposer, proposal_recall
from polarcatalog.memory.verifiers import ProbeVerifier


def propose(scores, spec, groups=(), local=None, seed=0):
    return create_proposer(spec, seed, groups)(scores, local)

VOCAB = [Concept("colour:red", "colour", "red", ("red",)), Concept("shape:wings", "shape", "wings", ("wings",)),
         Concept("type:fire", "type", "fire type", ("fire type", "fire"))]


def _graph():
    states = np.array([[HAS, NOT_HAS, UNCERTAIN], [NOT_HAS, HAS, HAS], [HAS, HAS, NOT_HAS]], np.int8)
    proposed = np.array([[1, 1, 1], [1, 1, 0], [1, 1, 1]], bool)  # node 1 never proposed "fire"
    scores = np.array([[0.9, 0.1, 0.5], [0.2, 0.8, 0.9], [0.7, 0.9, 0.1]])
    texts = ["A red Pokémon without wings.", "A fire type with wings."]
    return PolarGraph(VOCAB, ["a", "b", "c"], np.array([10, 11, 11]), states, proposed, scores, ["t0", "t1"],
                      np.array([10, 11]), align_edges(texts, VOCAB), np.array([0.5, 0.5, 0.5]), np.array([0.1, 0.1, 0.1]))


def test_graphml_round_trip(tmp_path):
    g = _graph()
    g.write_graphml(tmp_path / "g.graphml")
    back = read_graphml(tmp_path / "g.graphml")
    nx_g = g.to_networkx()
    assert set(back.nodes) == set(nx_g.nodes) and back.number_of_edges() == nx_g.number_of_edges() == 7 + 3
    rel = sorted((u, v, d["relation"]) for u, v, d in back.edges(data=True))
    assert ("visual:a", "concept:colour:red", "HAS") in rel and ("visual:a", "concept:shape:wings", "NOT_HAS") in rel
    assert ("visual:b", "concept:type:fire", "HAS") not in rel  # not proposed: no edge, whatever its state
    assert ("text:t0", "concept:colour:red", "ALIGN") in rel and ("text:t0", "concept:shape:wings", "ALIGN") not in rel
    assert back.nodes["visual:a"]["kind"] == "visual" and back.nodes["visual:a"]["species_id"] == 10


def test_species_incidence_and_completion():
    g = _graph()
    has, not_has = g.species_incidence(np.array([11, 10]))
    assert has.toarray().tolist() == [[True, True, False], [True, False, False]]  # species 11: any of nodes b, c
    assert not_has.toarray().tolist() == [[True, False, True], [False, True, False]]
    as_proposed = g.memory(np.array([11, 10]), kappa=0.5, completion=False)
    assert (as_proposed.has == has.toarray()).all() and (as_proposed.not_has == not_has.toarray()).all()


def test_quality_and_stats_hand_computed():
    g = _graph()
    truth = np.array([[1, 0, 0], [0, 1, 1], [1, 1, 0]], bool)
    q = edge_quality(g, truth)
    assert q["has_precision"] == 1.0 and q["has_recall"] == pytest.approx(4 / 5)
    assert q["not_has_precision"] == 1.0 and q["not_has_recall"] == pytest.approx(3 / 4)
    s = graph_stats(g)
    assert s["has_edges"] == 4 and s["not_has_edges"] == 3 and s["align_edges"] == 3
    assert s["uncertain_fraction"] == pytest.approx(1 / 8) and s["concepts_ever_has"] == pytest.approx(2 / 3)  # fire: never a proposed HAS


def test_proposer_and_proposal_recall():
    scores = np.array([[0.1, 0.9, 0.5, 0.3], [0.8, 0.1, 0.2, 0.7]])
    assert propose(scores, "top_n:2").tolist() == [[False, True, True, False], [True, False, False, True]]
    assert propose(scores, "all").all() and propose(scores, "random_n:2", seed=1).sum(1).tolist() == [2, 2]
    truth = np.array([[1, 1, 0, 0], [0, 0, 0, 0]], bool)
    assert proposal_recall(propose(scores, "top_n:2"), truth) == 0.5  # the second image has no truth: skipped
    assert propose(scores, "top_n:9").all()  # a budget beyond the vocabulary proposes everything


@pytest.mark.parametrize("spec", ["psychic:2", "top_n", "top_n:0", "all:3", "top_n:-1"])
def test_proposer_spec_rejects_unknown_strategies_and_budgets(spec):
    with pytest.raises(ValueError, match="allowed: all, top_n:<N>, multi_prompt:<N>, global_local:<N>, random_n:<N>"):
        ProposerSpec.parse(spec)


def test_proposer_spec_round_trips():
    for spec in ("top_n:6", "multi_prompt:12", "global_local:3", "random_n:1", "all"):
        assert str(ProposerSpec.parse(spec)) == spec


def test_multi_prompt_proposer_merges_facet_rankings_round_robin():
    # facets: type (cols 0-2), colour (3-4), size (5); type scores run high, size low
    scores = np.array([[0.9, 0.8, 0.7, 0.2, 0.1, 0.05]])
    groups = ["type", "type", "type", "colour", "colour", "size"]
    assert propose(scores, "top_n:3").tolist() == [[True, True, True, False, False, False]]  # one facet fills the budget
    # round 0: each facet's best (0, 3, 5); round 1: the higher-scored of type#2 (0.8) and colour#2 (0.1) first
    assert np.flatnonzero(propose(scores, "multi_prompt:3", groups)[0]).tolist() == [0, 3, 5]
    assert np.flatnonzero(propose(scores, "multi_prompt:4", groups)[0]).tolist() == [0, 1, 3, 5]
    assert np.flatnonzero(propose(scores, "multi_prompt:5", groups)[0]).tolist() == [0, 1, 3, 4, 5]
    truth = np.array([[True, False, False, True, False, True]])  # one true concept per facet
    assert proposal_recall(propose(scores, "multi_prompt:3", groups), truth) == 1.0
    assert proposal_recall(propose(scores, "top_n:3"), truth) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="one facet per concept"):
        propose(scores, "multi_prompt:3", ["type"])


def test_global_local_proposer_adds_what_a_local_view_sees():
    scores = np.array([[0.9, 0.8, 0.7, 0.1, 0.05], [0.1, 0.2, 0.3, 0.4, 0.5]])
    local = np.zeros((2, 2, 5))
    local[0, 0, 4] = 1.0  # view 1 of image 0 sees concept 4 (the global view ranks it last)
    local[0, 1, 3] = 1.0  # view 2 sees concept 3
    local[1] = scores[1]  # image 1: the local views agree with the global view
    got = propose(scores, "global_local:3", local=local)
    assert np.flatnonzero(got[0]).tolist() == [0, 3, 4]  # round 0: global best, view-1 best, view-2 best
    np.testing.assert_array_equal(got[1], propose(scores, "top_n:3")[1])  # nothing new locally: the same as top_n
    assert (got.sum(1) == 3).all()  # budget-matched: exactly N per image
    assert np.flatnonzero(propose(scores, "global_local:2", local=local)[0]).tolist() == [0, 4]  # global first
    with pytest.raises(ValueError, match="encoders.local_grid"):
        propose(scores, "global_local:3")


def test_probe_scores_never_depend_on_the_scored_species_labels():
    rng = np.random.default_rng(0)
    species = np.repeat(np.arange(40), 3)
    x = rng.normal(size=(120, 16))
    y = (x[:, :2] > 0).astype(bool)
    v = ProbeVerifier(folds=2, seed=0, dim=None)
    a = v.cross_fit(x, y, species, x, species)
    flipped = y.copy()
    flipped[species == 7] = ~flipped[species == 7]
    b = v.cross_fit(x, flipped, species, x, species)
    np.testing.assert_allclose(a[species == 7], b[species == 7])  # species 7's own labels never reach its probe
    assert not np.allclose(a, b)
    from sklearn.metrics import roc_auc_score

    assert roc_auc_score(y[:, 0], a[:, 0]) > 0.9  # a linearly decodable concept is recovered


def test_probe_scores_kept_by_content_are_the_fitted_ones_and_a_change_refits(tmp_path, monkeypatch):
    """The memory-quality levers keep their probe scores by content: read back, they are the fit's bytes; a changed
    knob or label is a new fit, and a damaged file is refitted, never read."""
    rng = np.random.default_rng(0)
    species = np.repeat(np.arange(40), 3)
    x = rng.normal(size=(120, 16))
    y = (x[:, :2] > 0).astype(bool)
    fresh = ProbeVerifier(folds=2, seed=0, dim=None).cross_fit(x, y, species, x, species)
    cached = ProbeVerifier(folds=2, seed=0, dim=None, cache=tmp_path)
    assert cached.cross_fit(x, y, species, x, species).tobytes() == fresh.tobytes()
    fits = []
    real_fit = ProbeVerifier._fit
    monkeypatch.setattr(ProbeVerifier, "_fit", lambda self, *a: fits.append(1) or real_fit(self, *a))
    assert cached.cross_fit(x, y, species, x, species).tobytes() == fresh.tobytes() and fits == []  # read back
    ProbeVerifier(folds=2, c=0.5, seed=0, dim=None, cache=tmp_path).cross_fit(x, y, species, x, species)
    flipped = y.copy()
    flipped[0, 0] = ~flipped[0, 0]
    cached.cross_fit(x, flipped, species, x, species)
    assert fits == [1, 1]  # another C, another label: each fitted
    files = sorted(tmp_path.glob("*.npz"), key=lambda f: f.stat().st_mtime_ns)
    assert len(files) == 3  # one per fit, named by content
    files[0].write_bytes(b"damaged")  # the first fit's: the one read back above
    assert cached.cross_fit(x, y, species, x, species).tobytes() == fresh.tobytes() and fits == [1, 1, 1]


def test_zero_shot_verifier_is_the_yes_no_softmax_of_prompt_cosines(tiny_clip_name, tmp_path):
    from polarcatalog.encoders import create_encoder
    from polarcatalog.features.encode import encode_texts
    from polarcatalog.memory.verifiers.zero_shot import ZERO_SHOT_TEMPLATES, prompt_scores

    # hand-built space: "yes" prompts point at e0 / e1, the neutral prompt at e2
    table = {"red": np.array([1.0, 0, 0]), "blue": np.array([0, 1.0, 0]), "none": np.array([0, 0, 1.0])}
    encode = lambda texts: np.stack([table["none"] if t == "a" else table[t.split()[-1]] for t in texts])  # noqa: E731
    x = np.array([[1.0, 0, 0], [0, 0, 1.0]])
    s = prompt_scores(x, ["red", "blue"], encode, templates=[("a {concept}", "a")], scale=10.0)
    sig = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
    np.testing.assert_allclose(s, [[sig(10), sig(0)], [sig(-10), sig(-10)]])
    local = prompt_scores(np.stack([x, x]), ["red", "blue"], encode, templates=[("a {concept}", "a")], scale=10.0)
    assert local.shape == (2, 2, 2)  # local views: [images, views, concepts]
    # the real class: a tiny random open_clip text tower through the feature cache
    import torch

    torch.manual_seed(0)
    enc = create_encoder(f"open_clip:{tiny_clip_name}:random", "text", "cpu")
    img = np.random.default_rng(0).normal(size=(4, enc.dim))
    img /= np.linalg.norm(img, axis=1, keepdims=True)
    got = prompt_scores(img, ["red", "fire type"], lambda texts: encode_texts(enc, texts, tmp_path / "cache"))
    assert got.shape == (4, 2) and ((got > 0) & (got < 1)).all()
    by_hand = [sig(100 * (img @ enc.encode_texts([yes.format(concept="red")])[0] - img @ enc.encode_texts([no])[0]))
               for yes, no in ZERO_SHOT_TEMPLATES]
    np.testing.assert_allclose(got[:, 0], np.mean(by_hand, axis=0), atol=1e-5)


def test_zero_shot_scores_cover_catalog_queries_and_local_views(tiny_clip_name, tmp_path):
    import torch

    from polarcatalog.data.pokemon import pokemon_vocabulary
    from polarcatalog.features.workspace import Workspace
    from polarcatalog.memory.inputs import GraphInputs
    from polarcatalog.memory.verifiers import ZeroShotVerifier, create_verifier

    torch.manual_seed(0)
    name = f"open_clip:{tiny_clip_name}:random"
    rng = np.random.default_rng(0)
    unit = lambda *shape: (lambda x: x / np.linalg.norm(x, axis=-1, keepdims=True))(rng.normal(size=(*shape, 16)))  # noqa: E731
    ws = Workspace(None, None, None, None, {}, {name: unit(3)}, {name: unit(5)}, {}, None, {name: unit(3, 4)})
    vocab = pokemon_vocabulary()
    inputs = GraphInputs(vocab, np.arange(3), np.zeros((3, len(vocab)), bool), unit(3), np.arange(3), unit(5), np.arange(5),
                         workspace=ws)
    verifier = create_verifier("zero_shot", encoder=name, device="cpu", cache_root=tmp_path / "cache")
    assert isinstance(verifier, ZeroShotVerifier)
    got = verifier.score(inputs)
    assert got.anchor.shape == (3, len(vocab)) and got.query.shape == (5, len(vocab)) and got.anchor_local.shape == (3, 4, len(vocab))
    with pytest.raises(ValueError, match="has no features"):
        ZeroShotVerifier("open_clip:ViT-B-32-quickgelu:openai", "cpu", tmp_path / "cache").score(inputs)
    ws.anchor_f["efficientnet_lite0"] = unit(3)
    with pytest.raises(ValueError, match="no text tower"):
        ZeroShotVerifier("efficientnet_lite0", "cpu", tmp_path / "cache").score(inputs)


def test_cost_table_peak_memory_is_each_steps_own_high_water_mark():
    """The Table 7 cost rows read the process's peak resident memory, reset at each step: a step that allocates
    200 MB shows it, the next step (which allocates nothing) does not inherit it, and the total row takes the max."""
    import sys

    from polarcatalog.memory import polar_report as report

    if not sys.platform.startswith("linux"):
        pytest.skip("peak resident memory is read from /proc")
    costs: list[dict] = []
    with report.measured(costs, "allocates", 10, calls=2):
        block = np.ones(200 * 2**20 // 8)  # 200 MB, touched
        del block
    with report.measured(costs, "idle", 10):
        pass
    big, idle = (c["peak memory (MB)"] for c in costs)
    assert big - idle > 150, (big, idle)
    table = report.cost_table(costs)
    assert table.iloc[-1]["peak memory (MB)"] == round(big, 3) and table.iloc[-1]["backend calls per episode"] == 2
    assert costs[0]["time per episode (ms)"] == 1000 * costs[0]["total (s)"] / 10
