"""The results protocol: the dev/test split by species and the paired species bootstrap behind every CI."""

from __future__ import annotations

import numpy as np
import pytest

from polarcatalog.eval.bootstrap import Bootstrap
from polarcatalog.eval.metrics import chance, gold_ranks, per_query
from polarcatalog.eval.splits import dev_test_split


def test_split_is_species_disjoint_and_keeps_each_species_side_when_species_are_added():
    species = np.repeat(np.arange(1, 301), 2)  # a regular and a shiny query per species
    split = dev_test_split(species, 0.3, seed=0)
    assert set(split) == {"dev", "test"}
    per_species = {s: set(split[species == s]) for s in np.unique(species)}
    assert all(len(sides) == 1 for sides in per_species.values())  # both queries of a species on one side
    assert 0.2 < np.mean(split == "dev") < 0.4
    more = np.arange(1, 1001)
    bigger = dict(zip(more, dev_test_split(more, 0.3, seed=0)))
    assert all(bigger[s] == sides.pop() for s, sides in per_species.items())  # adding species moves none
    assert (dev_test_split(more, 0.3, seed=1) != dev_test_split(more, 0.3, seed=0)).any()  # the seed matters


def test_split_of_a_tiny_catalog_has_both_sides():
    for n in (2, 3, 5):
        assert set(dev_test_split(np.arange(n), 0.3)) == {"dev", "test"}


def test_bootstrap_means_by_hand():
    # clusters A = {0, 0} and B = {1}: a resample drawing A twice has mean 0; A and B once, 1/3; B twice, 1
    boot = Bootstrap(np.array([0, 0, 1]), np.array([[2, 0], [1, 1], [0, 2]]))
    np.testing.assert_allclose(boot.means(np.array([0.0, 0.0, 1.0])), [0.0, 1 / 3, 1.0])


def test_bootstrap_ci_on_two_equal_clusters():
    # two species, each with two queries scoring 0 and 1: a resample draws {A, A} (mean 0) or {B, B} (mean 1) with
    # probability 1/4 each, so the 2.5 % and 97.5 % quantiles are exactly 0 and 1
    boot = Bootstrap.over(np.array([7, 7, 9, 9]), resamples=4000, seed=3)
    ci = boot.interval(np.array([0.0, 0.0, 1.0, 1.0]))
    assert ci.value == 0.5 and ci.ci_low == 0.0 and ci.ci_high == 1.0 and ci.n == 4


def test_paired_constant_shift_gives_exactly_that_shift():
    rng = np.random.default_rng(0)
    a = rng.random(200)
    boot = Bootstrap.over(rng.integers(0, 60, 200), resamples=500, seed=0)
    d = boot.difference(a + 0.125, a)
    assert d.value == pytest.approx(0.125) and d.ci_low == pytest.approx(0.125) and d.ci_high == pytest.approx(0.125)
    assert d.excludes_zero()
    unpaired = boot.interval(a + 0.125)
    assert unpaired.ci_high - unpaired.ci_low > 0.05  # the same data unpaired: a wide interval


def test_bootstrap_subset_and_nan_values_are_left_out():
    boot = Bootstrap.over(np.array([0, 0, 1, 1, 2]), resamples=200, seed=0)
    v = np.array([1.0, np.nan, 0.0, 0.0, 5.0])
    sub = boot.subset(np.array([True, True, True, True, False]))
    ci = sub.interval(v)
    assert ci.n == 3 and ci.value == pytest.approx(1 / 3)
    assert 0.0 <= ci.ci_low <= ci.ci_high <= 1.0


def test_pessimistic_ties_rank_gold_after_every_equal_score():
    ranked = np.array([[4, 2, 3, -1], [2, 4, 3, -1]])
    s = np.array([[0.9, 0.5, 0.5, -np.inf], [0.5, 0.5, 0.5, -np.inf]])
    assert gold_ranks(ranked, np.array([2, 2]), s).tolist() == [3.0, 3.0]
    assert gold_ranks(ranked, np.array([2, 2])).tolist() == [2.0, 1.0]  # by position
    # a lexicographic key: only items equal on both keys tie
    states = np.array([[1, 1, 0, 0], [1, 0, 0, 0]])
    assert gold_ranks(ranked, np.array([2, 2]), (states, s)).tolist() == [2.0, 1.0]


def test_per_query_values_average_to_the_metrics_and_chance():
    ranks = np.array([1.0, 2.0, 11.0, np.inf])
    v = per_query(ranks)
    np.testing.assert_allclose(v.mean(0), [0.25, (1 + 0.5) / 4, (1 + 0.5) / 4, 0.5])
    c = chance(4)
    assert c["mRR@1"] == 0.25 and c["R@10"] == 1.0 and c["mRR@5"] == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4)


def _means_by_add_at(b, values: np.ndarray) -> np.ndarray:
    """The resampled means as np.add.at and the int-weights matmul compute them."""
    v = values[:, None] if values.ndim == 1 else values
    keep = (b.clusters >= 0)[:, None] & np.isfinite(v)
    sums, counts = np.zeros((b.weights.shape[1], v.shape[1])), np.zeros((b.weights.shape[1], v.shape[1]))
    np.add.at(sums, np.maximum(b.clusters, 0), np.where(keep, v, 0.0))
    np.add.at(counts, np.maximum(b.clusters, 0), keep.astype(np.float64))
    num, den = b.weights @ sums, b.weights @ counts
    out = np.divide(num, den, out=np.full(num.shape, np.nan), where=den > 0)
    return out[:, 0] if values.ndim == 1 else out


def test_resampled_means_are_the_per_cluster_sums_in_query_order_to_the_bit():
    """`Bootstrap.means` sums each cluster's values in query order (np.bincount) with the weights cast once: the
    bits of np.add.at's sums and of the int-weights matmul, which every committed interval was computed with."""
    rng = np.random.default_rng(3)
    boot = Bootstrap.over(rng.integers(0, 300, 700), resamples=200, seed=1)
    values = rng.random((700, 3))
    values[rng.random((700, 3)) < 0.1] = np.nan
    for b in (boot, boot.subset(rng.random(700) < 0.6)):
        for v in (values, values[:, 1].copy(), rng.random(700)):
            assert b.means(v).tobytes() == _means_by_add_at(b, v).tobytes()


def test_the_resampled_counts_are_kept_per_pattern_and_give_a_fresh_bootstraps_bits():
    """Every metric of one split and query group draws the same counts: their product with the weights is kept by
    the counts' bytes and shared by every subset and take of one bootstrap; an interval is the same to the bit as
    from a bootstrap that never saw another metric, NaN patterns included."""
    rng = np.random.default_rng(3)
    clusters = rng.integers(0, 90, 600)
    boot = Bootstrap.over(clusters, resamples=300, seed=1)
    values = [rng.random(600) for _ in range(6)] + [np.where(rng.random(600) < 0.2, np.nan, rng.random(600))]
    mask = rng.random(600) < 0.5
    for v in values:
        fresh = Bootstrap.over(clusters, resamples=300, seed=1)
        assert boot.subset(mask).interval(v) == fresh.subset(mask).interval(v)
        assert boot.take(np.flatnonzero(mask)).interval(v[mask]) == fresh.subset(mask).interval(v)
    cache = boot.__dict__["_counts_cache"]
    assert boot.subset(~mask).__dict__["_counts_cache"] is cache and boot.take(np.arange(5)).__dict__["_counts_cache"] is cache
    assert len(cache) == 2  # the complete values' counts (subset and take alike), the NaN values' counts
