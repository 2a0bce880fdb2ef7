"""The selection stage's rules on synthetic dev scores: ties keep the configured value, and the winner's curse is
measured, not assumed."""

from __future__ import annotations

import numpy as np

from polarcatalog.stages.select_retrieval import Trial, best, optimism


def test_a_tie_keeps_the_configured_value_and_a_strict_gain_wins():
    a, b = Trial("a", None, np.array([0.0, 1.0])), Trial("b", None, np.array([1.0, 0.0]))
    assert best([a, b], lambda t: t.label == "b") is b and best([a, b], lambda t: t.label == "a") is a
    c = Trial("c", None, np.array([1.0, 1.0]))
    assert best([a, b, c], lambda t: t.label == "a") is c


def test_the_winners_curse_is_large_among_equals_and_small_for_a_clear_winner():
    rng = np.random.default_rng(0)
    species = np.repeat(np.arange(200), 2)
    equals = [Trial(str(i), None, (rng.random(400) < 0.3).astype(float)) for i in range(40)]
    gap = optimism(equals, species, splits=30, seed=0)
    assert gap["mean"] > 0.03  # 40 equally good configurations: the best half-score is pure luck
    clear = [Trial("w", None, (rng.random(400) < 0.9).astype(float)),
             *[Trial(str(i), None, (rng.random(400) < 0.1).astype(float)) for i in range(5)]]
    assert abs(optimism(clear, species, splits=30, seed=0)["mean"]) < 0.02
