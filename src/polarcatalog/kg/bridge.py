"""+KGret: entity-bridged candidate expansion, and the budget-matched control.

The paper's retrieval-stage augmentation (§3.1):

    R_kgret(q) = R_text(q) ∪ Top_B { c : π(c) ∈ pages(E(q)) \\ π(R_text(q)) }

transferred to species: after the base retriever's top-k species, add up to B species it did not return that share
an entity with a top-k species under a link rule (one hop; two hops also through the species one hop reaches),
ranked by the base scores (the paper ranks bridged chunks by the same retriever). Without a control, a gain from
+KGret cannot be told from a longer list: `budget_matched` is the base retriever's own top-(k+B).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse


@dataclass
class Bridged:
    """`candidates` [n, k+B]: the base top-k, then the bridged species (-1 where fewer than B were reachable);
    `via` [n, B]: for each bridged species, the best-ranked top-k species linked to it directly (-1 for padding, and
    for a species reached only through a second hop)."""

    candidates: np.ndarray
    via: np.ndarray
    k: int

    @property
    def added(self) -> np.ndarray:
        """[n] how many species the graph added per query."""
        return (self.candidates[:, self.k:] >= 0).sum(1)


def top_by_score(scores: np.ndarray, k: int) -> np.ndarray:
    """[n, k] column indices of the k highest scores per row, best first; ties by index; -1 where the score is -inf
    or NaN (no candidate)."""
    s = np.where(np.isfinite(scores), scores, -np.inf)
    order = _first_k_of_stable_sort(-s, k)
    return np.where(np.isfinite(np.take_along_axis(s, order, 1)), order, -1)


def _first_k_of_stable_sort(keys: np.ndarray, k: int) -> np.ndarray:
    """`np.argsort(keys, axis=1, kind="stable")[:, :k]` without sorting whole rows: the k-th smallest key per row
    (a partition), every key below it and, of the keys equal to it, the first ones by index until k are taken; then
    only those k are sorted, stably, so ties stay in index order. The same indices, in O(n S) instead of
    O(n S log S)."""
    n, width = keys.shape
    k = min(k, width)
    if k == 0 or 4 * k >= width:  # a sort of (nearly) whole rows costs about what the selection would
        return np.argsort(keys, axis=1, kind="stable")[:, :k]
    kth = np.partition(keys, k - 1, axis=1)[:, k - 1:k]
    below = keys < kth
    equal = keys == kth
    taken = below | (equal & (np.cumsum(equal, axis=1) <= k - below.sum(1, keepdims=True)))
    chosen = np.nonzero(taken)[1].reshape(n, k)  # each row's k indices, ascending
    return np.take_along_axis(chosen, np.argsort(np.take_along_axis(keys, chosen, 1), axis=1, kind="stable"), 1)


def budget_matched(scores: np.ndarray, k: int, budget: int) -> np.ndarray:
    """The control: the base retriever's top-(k+B), the same number of candidates +KGret can pass on."""
    return top_by_score(scores, k + budget)


def _reach(top: np.ndarray, links: sparse.csr_matrix) -> np.ndarray:
    """[n, S] bool: species linked to at least one of each row's top species (padding -1 ignored)."""
    n, k = top.shape
    rows = np.repeat(np.arange(n), k)
    valid = top.ravel() >= 0
    pick = sparse.csr_matrix((np.ones(valid.sum(), np.float32), (rows[valid], top.ravel()[valid])),
                             shape=(n, links.shape[0]))
    return np.asarray((pick @ links).todense()) > 0


def kgret(scores: np.ndarray, k: int, links: sparse.csr_matrix, budget: int, hops: int = 1,
          top: np.ndarray | None = None) -> Bridged:
    """`scores` [n, S]: the base retriever's score of every catalog species (-inf: not scored); `links` [S, S] from
    `KnowledgeGraph.links`. Bridged species are never already in the top-k, never repeated, at most `budget`. `top`:
    `top_by_score(scores, k)` when the caller has it (a sweep over budgets ranks the base scores once)."""
    if budget < 0 or hops not in (1, 2):
        raise ValueError(f"bridge budget {budget} (>= 0) and hops {hops} (1 or 2)")
    top = top_by_score(scores, k) if top is None else top
    reach = _reach(top, links)
    if hops == 2:
        reach |= _reach(top_by_score(np.where(reach, scores, -np.inf), reach.shape[1]), links)
    rows = np.arange(len(top))[:, None]
    valid = top >= 0
    reach[np.broadcast_to(rows, top.shape)[valid], top[valid]] = False  # never a species already returned
    s = np.where(np.isfinite(scores), scores, np.finfo(np.float64).min)  # reachable but unscored: after the scored
    bridged = top_by_score(np.where(reach, s, -np.inf), budget) if budget else np.zeros((len(top), 0), int)
    return Bridged(np.concatenate([top, bridged], axis=1), _via(top, bridged, links), k)


def _via(top: np.ndarray, bridged: np.ndarray, links: sparse.csr_matrix) -> np.ndarray:
    """For each bridged species, the best-ranked top species linked to it: provenance for the audit trail."""
    n, k = top.shape
    b = bridged.shape[1]
    if not b:
        return np.zeros((n, 0), int)
    t = np.repeat(top[:, None, :], b, axis=1)  # [n, B, k]
    c = np.repeat(bridged[:, :, None], k, axis=2)
    ok = (t >= 0) & (c >= 0)
    linked = np.zeros(t.shape, bool)
    if ok.any():  # scipy cannot index with two empty arrays (no query, or nothing bridged anywhere)
        linked[ok] = np.asarray(links[t[ok], c[ok]]).ravel() > 0
    first = linked.argmax(2)
    return np.where(linked.any(2), np.take_along_axis(t, first[:, :, None], 2)[:, :, 0], -1)
