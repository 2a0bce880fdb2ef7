"""PolarMem constraints over VR-RAG candidates: states, orders per strength, Conflict@k and filter rate."""

import warnings

import numpy as np
import pytest

from polarcatalog.memory.constraints import (CONFLICT, ENTAILMENT, NEUTRAL, Strength, ambiguity, conflict_at_k,
                                             reorder)
from polarcatalog.memory.memories import IncidenceMemory, states
from tests.reference_algorithm1 import incidence, logic_state, memory_graph


def test_memory_states_equal_algorithm_1_per_query():
    rng = np.random.default_rng(0)
    S, C, Q, L = 30, 12, 15, 8
    has = incidence([(s, c) for s in range(S) for c in range(C) if rng.random() < 0.2], S, C)
    not_has = incidence([(s, c) for s in range(S) for c in range(C) if rng.random() < 0.2], S, C)
    cand = rng.integers(0, S, (Q, L))
    cand[0, -2:] = -1
    q_pos = [list(rng.choice(C, 2, replace=False)) for _ in range(Q)]
    q_neg = [list(rng.choice(C, 1)) for _ in range(Q)]
    got = states(IncidenceMemory.of(has, not_has), cand, q_pos, q_neg)
    g = memory_graph(has, not_has)
    for q in range(Q):
        valid = cand[q] >= 0
        ref = [logic_state(g, f"v{v}", {f"c{c}" for c in q_pos[q]}, {f"c{c}" for c in q_neg[q]}) for v in cand[q, valid]]
        assert got[q, valid].tolist() == ref
        assert (got[q, ~valid] == NEUTRAL).all()


def test_strengths_order_as_specified():
    rng = np.random.default_rng(1)
    s = np.sort(rng.uniform(0.2, 0.8, (40, 10)), axis=1)[:, ::-1].copy()
    s[0, -3:] = -np.inf  # padding
    states = rng.choice([CONFLICT, NEUTRAL, ENTAILMENT], size=s.shape).astype(np.int8)
    none = reorder(states, s, Strength("none"))
    assert (none == np.arange(10)).all()  # s already sorted: VR-RAG order kept
    hard = reorder(states, s, Strength("hard"))
    valid = np.isfinite(s)
    for q in range(40):
        st = states[q, hard[q]][valid[q, hard[q]]]
        assert (np.diff(st) <= 0).all()  # never a conflict above a compatible candidate
        assert not valid[q, hard[q]][: valid[q].sum()].tolist().count(False)  # padding last
    assert (reorder(states, s, Strength("soft", 0.0)) == none).all()
    assert (reorder(states, s, Strength("soft", 1e6)) == hard).all()
    # adaptive with zero ambiguity keeps the visual order; with a huge p_max and flat scores it is hard
    flat = np.zeros_like(s)
    assert (reorder(states, flat, Strength("adaptive", 1e6)) == reorder(states, flat, Strength("hard"))).all()


def test_ambiguity_bounds():
    confident = np.array([[0.9, 0.1, 0.1, 0.1]])
    flat = np.array([[0.5, 0.5, 0.5, 0.5]])
    assert ambiguity(confident, 0.02)[0] < 0.01 and ambiguity(flat, 0.02)[0] == pytest.approx(1.0)
    assert ambiguity(np.array([[0.5, -np.inf, -np.inf]]), 0.02)[0] == 0.0


def test_a_row_without_any_finite_score_has_zero_ambiguity_and_no_warning():
    """A query whose every candidate the hard constraint removed: 0, without numpy's 'invalid value' warning."""
    s = np.array([[-np.inf, -np.inf, -np.inf], [0.9, 0.1, -np.inf]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = ambiguity(s, 0.02)
    assert a[0] == 0.0 and 0.0 < a[1] < 1e-6  # the second row: one confident candidate of two


def test_conflict_at_k_hand_computed():
    conflicting = np.array([[True, False, True, False], [False, False, False, True]])
    valid = np.ones_like(conflicting)
    order = np.array([[0, 1, 2, 3], [0, 1, 2, 3]])
    assert conflict_at_k(conflicting, order, valid, k=3) == pytest.approx((2 / 3 + 0) / 2)
    moved = np.array([[1, 3, 0, 2], [0, 1, 2, 3]])
    assert conflict_at_k(conflicting, moved, valid, k=2) == 0.0


def test_strength_parsing():
    assert Strength.parse("soft:0.05") == Strength("soft", 0.05) and str(Strength.parse("soft:0.05")) == "soft:0.05"
    assert Strength.parse("adaptive:2") == Strength("adaptive", 2.0) and str(Strength.parse("adaptive:2")) == "adaptive:2"
    assert Strength.parse("adaptive") == Strength.parse("adaptive:1")  # the bare name is p_max 1
    assert Strength.parse(str(Strength("adaptive", 0.5))) == Strength("adaptive", 0.5)  # the text form round-trips
    for bad in ("medium", "soft:-5", "soft:", "soft:abc", "soft:nan", "soft:inf", "hard:1", "adaptive:0", "adaptive:-1"):
        with pytest.raises(ValueError, match=r"allowed: none, hard, adaptive:<p_max > 0>, soft:<penalty >= 0>"):
            Strength.parse(bad)
    with pytest.raises(ValueError, match="p_max"):  # an adaptive strength must know its maximum penalty
        Strength("adaptive")
    with pytest.raises(ValueError, match="takes no"):
        Strength("hard", 1.0)


def test_constrained_queries_and_strength_table_on_a_toy_catalog():
    from polarcatalog.data.concepts import Concept
    from polarcatalog.memory.constrained import evaluate_strengths, make_constrained_queries, query_image_concepts
    from polarcatalog.memory.memories import IncidenceMemory, oracle_memory
    from polarcatalog.memory.propose import create_proposer

    vocab = [Concept(f"colour:{c}", "colour", c, (c,)) for c in ("red", "blue", "green", "yellow")]
    truth = np.array([[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [1, 0, 0, 1], [0, 1, 1, 0]], bool)
    cand = np.array([[1, 0, 2, 3, 4, 5], [0, 4, 1, 2, 3, 5]])  # query 0 (gold 0) sees look-alike 1 first
    s = np.sort(np.random.default_rng(0).uniform(0.3, 0.6, (2, 6)), axis=1)[:, ::-1].copy()
    target = np.array([0, 0])
    cq = make_constrained_queries(target, cand, truth, vocab, seed=0)
    assert cq.rows.tolist() == [0, 1] and cq.q_pos == [[0], [0]]
    assert cq.distractor[0] == 1 and cq.q_neg[0] == [1]  # species 1 is red AND blue: "red, not blue"
    assert cq.text[0] == "a Pokémon with red that is not blue"
    mean = lambda v: float(np.nanmean(v))  # noqa: E731
    (_, none), (_, hard) = evaluate_strengths(cand, s, target, cq, oracle_memory(truth), truth,
                                              [Strength("none"), Strength("hard")], k=3)
    # only species 0 and 4 are red and not blue: hard puts both first, the third slot must hold a conflict
    assert mean(hard["Conflict@3 (memory)"]) == pytest.approx(1 / 3) == mean(hard["Conflict@3 (ground truth)"])
    assert np.isnan(hard["Conflict@3 (memory, >= 3 compatible)"]).all()  # no query has 3 compatible candidates
    assert mean(none["Conflict@3 (ground truth)"]) > mean(hard["Conflict@3 (ground truth)"]) and mean(hard["target mRR@1"]) == 1.0
    # usage (B.2): a perfect memory decides every candidate
    assert mean(hard["constraint activation@3"]) == 1.0
    sparse_mem = np.zeros_like(truth)
    sparse_mem[0] = True  # only species 0 was ever verified
    (_, part), = evaluate_strengths(cand, s, target, cq, IncidenceMemory(sparse_mem & truth, sparse_mem & ~truth), truth,
                                    [Strength("none")], k=3)
    assert mean(part["constraint activation@3"]) == pytest.approx(1 / 3)  # species 0 is one of each query's top 3
    # extra (query-image) constraints only change the memory check: forbidding "red" makes the gold conflict
    extra = ([[], []], [[0], [0]])
    (_, with_extra), = evaluate_strengths(cand, s, target, cq, oracle_memory(truth), truth, [Strength("hard")], k=3, extra=extra)
    assert mean(with_extra["target mRR@1"]) < 1.0
    pos, neg = query_image_concepts(np.array([[0.95, 0.9, 0.05, 0.02]]), create_proposer("all"), 0.0)
    assert pos == [[0, 1]] and neg == [[2, 3]]


def test_query_image_concepts_partition_each_querys_proposed_scores_alone():
    """All queries in one call: each query's Q+ / Q− are those Eq. 3 gives on its own proposed scores (ties, a query
    whose scores are all equal, a proposer that picks a different set per query)."""
    from polarcatalog.memory.constrained import query_image_concepts
    from polarcatalog.memory.partition import partition
    from polarcatalog.memory.propose import create_proposer

    rng = np.random.default_rng(3)
    scores = np.round(rng.random((40, 12)), 1).astype(np.float32)  # one decimal: many ties
    scores[5] = 0.5
    proposer = create_proposer("top_n:5")
    proposed = proposer(scores)
    pos, neg = query_image_concepts(scores, proposer, 0.5)
    for q in range(len(scores)):
        idx = np.flatnonzero(proposed[q])
        st = partition(scores[q, idx], 0.5).states
        assert (pos[q], neg[q]) == (idx[st == 1].tolist(), idx[st == -1].tolist())
    assert any(pos) and any(neg)

@pytest.mark.parametrize("strength", ["none", "hard", "soft:0.05", "adaptive:1"])
def test_top_k_by_selection_is_the_head_of_the_full_order(strength):
    """`reorder(k=...)` selects instead of sorting; on ties (a few distinct scores), padding and rows shorter than k
    it must return exactly the first k columns of the full order."""
    rng = np.random.default_rng(3)
    st = Strength.parse(strength)
    for trial in range(60):
        Q, L = int(rng.integers(1, 5)), int(rng.integers(1, 120))
        s = rng.choice([0.1, 0.2, 0.3, -np.inf], size=(Q, L)) if trial % 2 else rng.uniform(-1, 1, (Q, L))
        states = rng.choice([CONFLICT, NEUTRAL, ENTAILMENT], size=(Q, L)).astype(np.int8)
        full = reorder(states, s, st)
        for k in (1, 3, 16, L):
            assert np.array_equal(reorder(states, s, st, k=k), full[:, :k]), (trial, k)


def test_incidence_states_per_species_equal_the_edge_gathers():
    """The incidence memory's per-species states (one gather per candidate) give what the generic path gives
    (one gather per candidate and concept)."""
    rng = np.random.default_rng(4)
    S, C, Q, L = 40, 9, 12, 25
    memory = IncidenceMemory(rng.random((S, C)) < 0.3, rng.random((S, C)) < 0.3)  # overlapping polarities too

    class Generic:  # the same edges, without the fast path
        edges = memory.edges

    cand = rng.integers(-1, S, (Q, L))
    q_pos = [list(rng.choice(C, int(rng.integers(0, 3)), replace=False)) for _ in range(Q)]
    q_neg = [list(rng.choice(C, int(rng.integers(0, 3)), replace=False)) for _ in range(Q)]
    assert np.array_equal(states(memory, cand, q_pos, q_neg), states(Generic(), cand, q_pos, q_neg))
