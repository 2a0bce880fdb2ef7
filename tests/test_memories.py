"""The memories constrained retrieval reads: completion as the paper defines it (the query's concepts join the
proposal set before partition), the oracle, random and degraded memories, and the per-query constrained metrics."""

from __future__ import annotations

import numpy as np
import pytest

from polarcatalog.data.concepts import Concept
from polarcatalog.memory.constraints import CONFLICT, Strength
from polarcatalog.memory.constrained import ConstrainedQueries, catalog_neighbours, evaluate_strengths, make_constrained_queries
from polarcatalog.memory.memories import (CompletedMemory, IncidenceMemory, degraded_memory, density_matched_random, edge_quality,
                                          oracle_memory, pad_concepts, states)
from polarcatalog.memory.partition import HAS, NOT_HAS, partition


def test_completion_adds_the_query_concepts_to_the_partition_input():
    # one node, proposed {0, 1, 2}; concept 3 (score 0.55) is unproposed. Alone, the proposed scores split at
    # τ* = 0.45 with HAS {0.8, 0.9}, NOT_HAS {0.1}; with the query's concept 3 joining, τ* moves and 3 gets a state.
    scores = np.array([[0.8, 0.9, 0.1, 0.55]])
    proposed = np.array([[True, True, True, False]])
    mem = CompletedMemory(scores, proposed, np.array([0]), 1, kappa=0.0)
    cand = np.array([[0]])
    before = partition(scores[0, :3], 0.0)
    after = partition(scores[0, [0, 1, 2, 3]], 0.0)
    assert before.tau_star != after.tau_star  # the input of the partition changed
    has, not_has = mem.edges(cand, pad_concepts([[3]]))
    assert has[0, 0, 0] == (after.states[3] == HAS) and not_has[0, 0, 0] == (after.states[3] == NOT_HAS)
    assert has[0, 0, 0] or not_has[0, 0, 0]  # verified now; as proposed it has no edge at all
    plain = IncidenceMemory(np.array([[True, True, False, False]]), np.array([[False, False, True, False]]))
    assert not plain.edges(cand, pad_concepts([[3]]))[0].any() and not plain.edges(cand, pad_concepts([[3]]))[1].any()


@pytest.mark.parametrize("Q, shared", [(6, False), (40, True)])
def test_completed_memory_equals_a_line_by_line_reference(Q, shared):
    """`shared`: queries ask one of three concept sets (in any order), so many (node, concept set) rows repeat and
    are partitioned once, over several blocks."""
    rng = np.random.default_rng(1)
    V, C, S, L = 14, 9, 10, 5
    scores, proposed = rng.random((V, C)), rng.random((V, C)) < 0.4
    node_species = np.r_[np.arange(S), rng.integers(0, S, V - S)]  # some species own two nodes
    cand = rng.integers(-1, S, (Q, L))
    concepts = [list(rng.choice(C, rng.integers(1, 4), replace=False)) for _ in range(3 if shared else Q)]
    if shared:
        concepts = [list(rng.permutation(concepts[i])) for i in rng.integers(0, 3, Q)]
    has, not_has = CompletedMemory(scores, proposed, node_species, S, 0.5, block=4).edges(cand, pad_concepts(concepts))
    for q in range(Q):
        for l in range(L):
            for j, c in enumerate(concepts[q]):
                want_has = want_not = False
                for v in np.flatnonzero(node_species == cand[q, l]) if cand[q, l] >= 0 else []:
                    members = sorted(set(np.flatnonzero(proposed[v])) | set(concepts[q]))
                    st = dict(zip(members, partition(scores[v, members], 0.5).states))
                    want_has |= st[c] == HAS
                    want_not |= st[c] == NOT_HAS
                assert has[q, l, j] == want_has and not_has[q, l, j] == want_not


def test_density_matched_random_has_the_evaluated_memorys_density_where_it_is_read_and_no_knowledge():
    rng = np.random.default_rng(0)
    S, C = 400, 6
    truth = rng.random((S, C)) < 0.3
    memory = oracle_memory(truth)  # reads HAS on 30 % of the pairs, NOT_HAS on the rest
    cand = rng.integers(0, S, (300, 8))
    concepts = pad_concepts([[int(c)] for c in rng.integers(0, C, 300)])
    rand = density_matched_random(memory, cand, concepts, S, C, seed=3)
    has, not_has = rand.edges(cand, concepts)
    want_has, _ = memory.edges(cand, concepts)
    assert abs(has.mean() - want_has.mean()) < 0.03 and not (rand.has & rand.not_has).any()
    assert abs(edge_quality(rand, cand, concepts, truth)["has_precision"] - truth.mean()) < 0.05  # chance: no knowledge
    assert (density_matched_random(memory, cand, concepts, S, C, seed=3).has == rand.has).all()  # seeded


@pytest.mark.parametrize("quality", [{"has_precision": 0.6, "has_recall": 0.4, "not_has_precision": 0.8, "not_has_recall": 0.25},
                                     {"has_precision": 1.0, "has_recall": 1.0, "not_has_precision": 1.0, "not_has_recall": 1.0}])
def test_a_degraded_memory_has_the_asked_for_edge_quality(quality):
    truth = np.random.default_rng(1).random((500, 40)) < 0.25
    mem = degraded_memory(truth, quality, seed=2)
    S, C = truth.shape
    everything = edge_quality(mem, np.arange(S)[None, :], pad_concepts([list(range(C))]), truth)
    for key, want in quality.items():
        assert abs(everything[key] - want) < 0.02, (key, everything[key], want)
    assert not (mem.has & mem.not_has).any()


def _toy():
    vocab = [Concept(f"colour:{c}", "colour", c, (c,)) for c in ("red", "blue", "green", "yellow")]
    truth = np.array([[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 0, 1], [0, 0, 1, 0], [1, 0, 1, 0], [0, 1, 1, 0], [1, 0, 0, 0]], bool)
    return vocab, truth


def test_oracle_memory_has_zero_ground_truth_conflicts_under_hard_when_three_candidates_are_compatible():
    vocab, truth = _toy()
    rng = np.random.default_rng(0)
    Q = 40
    target = rng.integers(0, len(truth), Q)
    cand = np.array([rng.permutation(len(truth)) for _ in range(Q)])
    s = np.sort(rng.random(cand.shape), axis=1)[:, ::-1].copy()
    cq = make_constrained_queries(target, cand, truth, vocab, seed=0)
    (_, none), (_, hard) = evaluate_strengths(cand, s, target, cq, oracle_memory(truth), truth,
                                              [Strength("none"), Strength("hard")], k=3, pool=5)
    compatible = (~(states(oracle_memory(truth), cand[cq.rows], cq.q_pos, cq.q_neg) == CONFLICT)).sum(1) >= 3
    assert compatible.any() and (~compatible).any()
    assert (hard["Conflict@3 (ground truth)"][compatible] == 0).all()
    assert np.nanmean(hard["Conflict@3 (memory, >= 3 compatible)"]) == 0.0
    assert np.nanmean(none["Conflict@3 (ground truth)"]) > 0  # the unconstrained context does hold conflicts
    assert (hard["target mRR@1"] >= none["target mRR@1"]).all()  # the gold is never a conflict under the oracle


def test_filter_rate_is_per_query_over_the_unconstrained_pool():
    vocab, truth = _toy()
    # gold 0 (red only); query "red, not blue": species 1 and 5 are blue (conflicts), 3 lacks red (conflict)
    cand = np.array([[1, 0, 3, 2, 5, 6, 4]])
    s = np.array([[0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3]])
    cq = ConstrainedQueries(np.array([0]), [[0]], [[1]], np.array([1]), ["red, not blue"])
    (_, none), (_, hard) = evaluate_strengths(cand, s, np.array([0]), cq, oracle_memory(truth), truth,
                                              [Strength("none"), Strength("hard")], k=3, pool=5)
    # pool = first 5: conflicts 1, 3, 5. none keeps 1 and 3 in the top 3: 1 of 3 filtered
    assert none["Filter rate (ground truth)"][0] == pytest.approx(1 / 3)
    assert none["Conflict@3 (ground truth)"][0] == pytest.approx(2 / 3)
    assert hard["Filter rate (ground truth)"][0] == 1.0 and hard["Conflict@3 (ground truth)"][0] == 0.0
    assert hard["target mRR@1"][0] == 1.0 and none["target mRR@1"][0] == 0.0


def test_edge_quality_of_the_evaluated_pairs_and_catalog_neighbours():
    vocab, truth = _toy()
    cand, concepts = np.array([[0, 1, -1]]), pad_concepts([[0, 1]])
    q = edge_quality(oracle_memory(truth), cand, concepts, truth)
    assert q["has_precision"] == q["has_recall"] == q["not_has_precision"] == q["not_has_recall"] == 1.0 and q["pairs"] == 4
    x = np.array([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9]])
    nb = catalog_neighbours(x, np.arange(4), 4, n=2)
    assert nb[:, 0].tolist() == [1, 0, 3, 2]  # each species' nearest other species by artwork features


@pytest.mark.parametrize("size", [10, 1000, 10**8])  # the table, and a sort where the table would be too large
def test_unique_keys_match_numpys(size):
    from polarcatalog.memory.memories import _unique

    keys = np.random.default_rng(0).integers(0, size, 5000)
    unique, inverse = _unique(keys, size)
    want_unique, want_inverse = np.unique(keys, return_inverse=True)
    assert (unique == want_unique).all() and (inverse == want_inverse).all() and (unique[inverse] == keys).all()


@pytest.mark.parametrize("n_concepts, m, padding", [(9, 3, 0.2), (34, 13, 0.8), (300, 12, 0.2), (300, 12, 1.0)])
def test_unique_concept_rows_match_numpys(n_concepts, m, padding):
    """Rows read as integers (with padding columns left out where they are padding in every row) and rows too wide
    for one integer (a lexsort); all padding."""
    from polarcatalog.memory.memories import _unique_rows

    rng = np.random.default_rng(1)
    rows = np.sort(np.where(rng.random((4000, m)) < padding, -1, rng.integers(0, n_concepts, (4000, m))), 1)
    rows[1::2] = rows[::2]  # repeats
    unique, inverse = _unique_rows(rows, n_concepts)
    want_unique, want_inverse = np.unique(rows, axis=0, return_inverse=True)
    assert (unique == want_unique).all() and (inverse == want_inverse.ravel()).all()
