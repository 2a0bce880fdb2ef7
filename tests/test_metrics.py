"""Metric functions against hand-computed values (VR-RAG §6.1 definitions)."""

import numpy as np
import pytest

from polarcatalog.eval.metrics import gold_ranks, mrr_at_k, recall_at_k, summarize


def test_gold_ranks_positions_absence_and_padding():
    ranked = np.array([[7, 3, 5], [3, 7, 5], [1, 2, -1], [-1, -1, -1]])
    gold = np.array([5, 3, 9, 4])
    assert gold_ranks(ranked, gold).tolist() == [3.0, 1.0, np.inf, np.inf]


def test_mrr_and_recall_with_cutoffs_hand_computed():
    ranks = np.array([1, 2, 4, 11, np.inf])
    assert mrr_at_k(ranks, 1) == pytest.approx(1 / 5)
    assert mrr_at_k(ranks, 5) == pytest.approx((1 + 1 / 2 + 1 / 4) / 5)
    assert mrr_at_k(ranks, 10) == pytest.approx((1 + 1 / 2 + 1 / 4) / 5)  # rank 11 is beyond k: 0, not 1/11
    assert mrr_at_k(ranks, 20) == pytest.approx((1 + 1 / 2 + 1 / 4 + 1 / 11) / 5)
    assert recall_at_k(ranks, 1) == pytest.approx(0.2)
    assert recall_at_k(ranks, 4) == pytest.approx(0.6)
    s = summarize(ranks)
    assert s["acc@1"] == s["mRR@1"] == s["R@1"] == pytest.approx(0.2) and s["n"] == 5
    assert np.isnan(mrr_at_k(np.array([]), 5))


def test_ties_count_against_the_retriever_by_default():
    scores = np.array([[0.5, 0.9, 0.5, 0.5],   # gold 0 ties with columns 2, 3; column 1 beats it
                       [1.0, 1.0, 1.0, 1.0]])  # a constant scorer
    gold = np.array([0, 3])
    order = np.argsort(-scores, axis=1, kind="stable")  # gold sorts ahead of its ties by position
    ranked, keys = order, np.take_along_axis(scores, order, 1)
    assert gold_ranks(ranked, gold, keys).tolist() == [4.0, 4.0]
    assert gold_ranks(ranked, gold).tolist() == [2.0, 4.0]  # by position: the first row's tie order helps the gold
    assert mrr_at_k(gold_ranks(ranked, gold, keys), 1) == 0.0  # a constant model cannot score by accident


def test_pessimistic_ranks_equal_positions_without_ties():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(50, 30))
    gold = rng.integers(0, 30, 50)
    order = np.argsort(-scores, axis=1)
    assert np.array_equal(gold_ranks(order, gold, np.take_along_axis(scores, order, 1)), gold_ranks(order, gold))
