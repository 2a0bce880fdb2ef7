"""PolarMem pieces: the Otsu partition against brute force and on degenerate inputs; Algorithm 1 on a hand-built graph."""

import numpy as np
import pytest

from polarcatalog.memory.logic import (CONFLICT, ENTAILMENT, NEUTRAL, hard_order, incidence, logic_states, soft_order)
from polarcatalog.memory.partition import HAS, NOT_HAS, UNCERTAIN, between_class_variance, otsu, partition


@pytest.mark.parametrize("seed", range(20))
def test_otsu_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    scores = np.round(rng.beta(0.6, 0.6, n), 3) if seed % 2 else rng.random(n)
    values = np.r_[scores, 0.0, 1.0]
    tau, sigma_w = otsu(scores)
    grid = np.unique(np.r_[np.linspace(0, 1, 2001), values])
    best = max(between_class_variance(values, t) for t in grid)
    assert between_class_variance(values, tau) == pytest.approx(best, rel=1e-9, abs=1e-12)
    val, rej = values[values > tau], values[values <= tau]
    assert sigma_w == pytest.approx(np.sqrt((len(val) * val.var() + len(rej) * rej.var()) / len(values)))


def test_partition_states_and_margin():
    scores = [0.02, 0.05, 0.1, 0.48, 0.52, 0.9, 0.95]
    p = partition(scores, kappa=0.5)
    assert 0.1 < p.tau_star < 0.9 and p.delta == pytest.approx(0.5 * p.sigma_w)
    s = np.asarray(scores)
    assert (p.states[s > p.tau_star + p.delta] == HAS).all() and (p.states[s < p.tau_star - p.delta] == NOT_HAS).all()
    assert p.states.tolist()[:3] == [NOT_HAS] * 3 and p.states.tolist()[-2:] == [HAS] * 2
    assert (partition(scores, kappa=0.0).states != UNCERTAIN).all()  # no margin: nothing is uncertain
    assert (partition(scores, kappa=100.0).states == UNCERTAIN).all()


def test_degenerate_inputs_are_defined():
    empty = partition([])
    assert empty.states.shape == (0,) and empty.tau_star == 0.5 and empty.delta == 0.0
    assert partition([0.97]).states.tolist() == [HAS]
    assert partition([0.03]).states.tolist() == [NOT_HAS]
    same = partition([0.4] * 5, kappa=0.0)
    assert len(set(same.states.tolist())) == 1  # identical scores always share one state
    with pytest.raises(ValueError, match="probabilities"):
        partition([0.5, 1.2])
    assert otsu([], priors=()) == (0.5, 0.0)


def _graph():
    # concepts: 0 red, 1 wings, 2 electric, 3 blue
    has = incidence([(0, 0), (0, 1), (1, 0), (2, 2), (3, 3)], 5, 4)
    not_has = incidence([(1, 1), (2, 0), (4, 2)], 5, 4)
    return has, not_has


def test_algorithm_1_states_on_a_hand_built_graph():
    has, not_has = _graph()
    # query: red, with wings, not electric
    states = logic_states(has, not_has, q_pos=[0, 1], q_neg=[2])
    # v0 has red+wings -> +1; v1 red but NOT wings -> conflict; v2 electric & not red -> conflict;
    # v3 blue only -> neutral; v4 NOT electric, no positive evidence -> neutral
    assert states.tolist() == [ENTAILMENT, CONFLICT, CONFLICT, NEUTRAL, NEUTRAL]
    assert logic_states(has, not_has, [], []).tolist() == [NEUTRAL] * 5


def test_hard_never_ranks_a_conflict_above_a_compatible_node():
    rng = np.random.default_rng(0)
    for _ in range(50):
        states = rng.choice([CONFLICT, NEUTRAL, ENTAILMENT], size=30)
        sim = rng.random(30)
        order = hard_order(states, sim)
        ranked = states[order]
        assert (np.diff(ranked) <= 0).all()  # +1 block, then 0, then -1
        for block in (CONFLICT, NEUTRAL, ENTAILMENT):  # similarity decides within a block
            s = sim[order][ranked == block]
            assert (np.diff(s) <= 0).all()


def test_soft_interpolates_between_similarity_and_hard():
    rng = np.random.default_rng(1)
    states = rng.choice([CONFLICT, NEUTRAL, ENTAILMENT], size=40)
    sim = rng.uniform(-1, 1, 40)
    assert soft_order(states, sim, 0.0).tolist() == np.argsort(-sim, kind="stable").tolist()
    assert soft_order(states, sim, 1e6).tolist() == hard_order(states, sim).tolist()
    mid = soft_order(states, sim, 0.3)
    # a moderate penalty is neither: some conflicts are demoted, not all below every compatible node
    assert not np.array_equal(mid, hard_order(states, sim)) and not np.array_equal(mid, np.argsort(-sim, kind="stable"))


from polarcatalog.memory.concepts import cub_labels, cub_vocabulary, pokemon_labels, pokemon_vocabulary  # noqa: E402
from polarcatalog.memory.query_parser import parse_structured, parse_text  # noqa: E402
from tests.conftest import shared  # noqa: E402

VOCAB = pokemon_vocabulary(with_pokeapi=True)


@pytest.mark.parametrize("text, pos, neg", [
    ("a yellow Pokémon that is not an electric type", ["colour:yellow"], ["type:electric"]),
    ("a red Pokémon without wings", ["colour:red"], ["shape:wings"]),
    ("blue water-type, not fire", ["colour:blue", "type:water"], ["type:fire"]),
    ("small green grass type but not poison", ["size:small", "colour:green", "type:grass"], ["type:poison"]),
    ("It isn't a ghost type and it is purple", ["colour:purple"], ["type:ghost"]),
    ("neither red nor blue", [], ["colour:red", "colour:blue"]),
    ("a non-flying bird that lives in the forest", ["habitat:forest"], ["type:flying"]),
    ("a huge grey Pokémon with four legs", ["size:huge", "colour:gray", "shape:quadruped"], []),
    ("a fire pokemon with no yellow markings", ["type:fire"], ["colour:yellow"]),
    ("something completely unrelated", [], []),
])
def test_text_parser_phrasings(text, pos, neg):
    q = parse_text(text, VOCAB)
    assert list(q.q_pos) == pos and list(q.q_neg) == neg


def test_structured_queries_are_checked():
    q = parse_structured({"has": ["colour:yellow", "colour:yellow"], "not_has": ["type:electric"]}, VOCAB)
    assert q.q_pos == ("colour:yellow",) and q.q_neg == ("type:electric",)
    with pytest.raises(ValueError, match="unknown concept"):
        parse_structured({"has": ["colour:turquoise"]}, VOCAB)


def test_pokemon_vocabulary_and_ground_truth():
    import pandas as pd

    base = pokemon_vocabulary()
    assert sum(c.group == "type" for c in base) == 18 and not any(c.group == "shape" for c in base)
    assert len({c.id for c in VOCAB}) == len(VOCAB) == 18 + 11 + 5 + 14 + 9
    sp = pd.DataFrame({"types": [["grass", "poison"]], "height_m": [0.7], "pokedex_colour": ["green"],
                       "shape": ["quadruped"], "habitat": ["grassland"]})
    y = pokemon_labels(sp, VOCAB, [0.5, 1.0, 2.0, 4.0])
    on = sorted(c.id for c, v in zip(VOCAB, y[0]) if v)
    assert on == ["colour:green", "habitat:grassland", "shape:quadruped", "size:small", "type:grass", "type:poison"]


def test_cub_vocabulary_is_readable():
    vocab = cub_vocabulary(shared("cub") / "attributes.txt")
    assert len(vocab) == 312 and vocab[0].id == "cub:1"
    assert vocab[0].name == "curved (up or down) bill shape"
    y = cub_labels(shared("cub") / "class_attribute_labels_continuous.txt")
    assert y.shape == (200, 312) and 0 < y.mean() < 0.5
