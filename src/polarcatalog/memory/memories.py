"""The memories constrained retrieval can read, behind one question: for each query, each candidate species and each
of the query's concepts, does the memory hold a HAS edge, a NOT_HAS edge, or neither?

- `IncidenceMemory`: HAS / NOT_HAS per species, fixed before any query (the graph as proposed; the controls).
- `CompletedMemory`: critical-concept completion as PolarMem §4 describes it — the query's concepts join each
  candidate node's proposal set *before* partition, so τ*, δ are refitted on that set, per query.
- `oracle_memory` (edges = ground truth: the upper bound a perfect verifier reaches), `density_matched_random` (as
  dense as an evaluated memory where it is read, with no knowledge: the lower bound), and `degraded_memory` (the oracle with edges dropped
  and wrong ones added at given precision and recall: the memory-quality curve).

`edge_quality` measures any of them on exactly the (candidate, concept) pairs an evaluation reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import scipy.sparse as sp

from polarcatalog.memory.constraints import BLOCK, CONFLICT, ENTAILMENT, NEUTRAL
from polarcatalog.memory.partition import HAS, NOT_HAS, partition_rows


def pad_concepts(concepts: list[list[int]]) -> np.ndarray:
    """[Q, m] concept indices, -1 padding (m = the longest list, at least 1)."""
    m = max([len(c) for c in concepts] + [1])
    out = np.full((len(concepts), m), -1, np.int64)
    for q, cs in enumerate(concepts):
        out[q, : len(cs)] = cs
    return out


class Memory(Protocol):
    def edges(self, cand: np.ndarray, concepts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(has, not_has), bool [Q, L, m]: candidate cand[q, l] (species index, -1 = padding) and concept concepts[q, j]
        (-1 = padding; padded entries are False)."""
        ...


def states(memory: Memory, cand: np.ndarray, q_pos: list[list[int]], q_neg: list[list[int]]) -> np.ndarray:
    """Algorithm 1's s_log [Q, L] from the memory's edges: CONFLICT if a Q+ concept is NOT_HAS or a Q− concept HAS,
    else ENTAILMENT if a Q+ concept is HAS, else NEUTRAL."""
    concepts = pad_concepts([list(p) + list(n) for p, n in zip(q_pos, q_neg)])
    is_pos = np.zeros(concepts.shape, bool)
    for q, p in enumerate(q_pos):
        is_pos[q, : len(p)] = True
    is_neg = (concepts >= 0) & ~is_pos
    out = np.full(cand.shape, NEUTRAL, np.int8)
    per_query = max(cand.shape[1], memory.has.shape[0] if isinstance(memory, IncidenceMemory) else 0) * concepts.shape[1]
    step = max(1, BLOCK // max(1, per_query))  # queries per block: its temporaries stay in cache
    for lo in range(0, len(cand), step):
        sl = slice(lo, lo + step)
        if isinstance(memory, IncidenceMemory):
            out[sl] = np.take_along_axis(memory.species_states(concepts[sl], is_pos[sl], is_neg[sl]), np.maximum(cand[sl], 0), 1)
            continue
        has, not_has = memory.edges(cand[sl], concepts[sl])
        conflict, entail = np.zeros(has.shape[:2], bool), np.zeros(has.shape[:2], bool)
        for j in range(concepts.shape[1]):  # the query's concept slots (a handful): numpy's any() over so short an axis is slow
            pos, neg = is_pos[sl, j, None], is_neg[sl, j, None]
            conflict |= (not_has[:, :, j] & pos) | (has[:, :, j] & neg)
            entail |= has[:, :, j] & pos
        out[sl] = np.where(conflict, CONFLICT, np.where(entail, ENTAILMENT, NEUTRAL))
    return np.where(cand >= 0, out, NEUTRAL).astype(np.int8)


def _gather(table: np.ndarray, cand: np.ndarray, concepts: np.ndarray) -> np.ndarray:
    ok = (cand >= 0)[:, :, None] & (concepts >= 0)[:, None, :]
    return table[np.maximum(cand, 0)[:, :, None], np.maximum(concepts, 0)[:, None, :]] & ok


@dataclass
class IncidenceMemory:
    has: np.ndarray  # bool [S, C]
    not_has: np.ndarray  # bool [S, C]

    def __post_init__(self) -> None:
        # Both polarities as bits of one byte, one row per concept: a query reads a few concepts for many candidates,
        # and reading along a concept's row touches only those bytes (along a species' row, a cache line per candidate).
        self._codes = np.ascontiguousarray((np.asarray(self.has, np.uint8) | (np.asarray(self.not_has, np.uint8) << 1)).T)

    @classmethod
    def of(cls, has: sp.spmatrix | np.ndarray, not_has: sp.spmatrix | np.ndarray) -> "IncidenceMemory":
        dense = lambda m: np.asarray(m.toarray() if hasattr(m, "toarray") else m, bool)  # noqa: E731
        return cls(dense(has), dense(not_has))

    def edges(self, cand: np.ndarray, concepts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return _gather(self.has, cand, concepts), _gather(self.not_has, cand, concepts)

    def species_states(self, concepts: np.ndarray, is_pos: np.ndarray, is_neg: np.ndarray) -> np.ndarray:
        """Algorithm 1's s_log of every species [Q, S] for each query's concepts (`states`' rule): a species' state
        does not depend on which candidate list it sits in, so a long list is then one gather, not one per concept."""
        code = self._codes[np.maximum(concepts, 0)]  # [Q, m, S]
        has, not_has = (code & 1).astype(bool), (code & 2).astype(bool)
        pos, neg = is_pos[:, :, None], is_neg[:, :, None]
        conflict = ((not_has & pos) | (has & neg)).any(1)
        entail = (has & pos).any(1)
        return np.where(conflict, CONFLICT, np.where(entail, ENTAILMENT, NEUTRAL)).astype(np.int8)


def oracle_memory(truth: np.ndarray) -> IncidenceMemory:
    """Edges = ground truth: every concept of every species is HAS or NOT_HAS, correctly."""
    return IncidenceMemory(truth.astype(bool), ~truth.astype(bool))


def _unique(keys: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(keys, return_inverse=True)` for integer keys in [0, size): a table instead of a sort where the table
    is not much larger than the keys."""
    if size > 4 * len(keys) + (1 << 20):
        unique, inverse = np.unique(keys, return_inverse=True)
        return unique, inverse.ravel()
    seen = np.zeros(size, bool)
    seen[keys] = True
    return np.flatnonzero(seen), (np.cumsum(seen) - 1)[keys]


def _unique_rows(rows: np.ndarray, n_concepts: int) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(rows, axis=0, return_inverse=True)` for sorted rows of concept indices in [-1, n_concepts), without
    its sort of whole rows (about 20x slower than sorting integers): each row read as one integer (base
    n_concepts + 1, its padding columns left out) where that fits in 62 bits, else a lexsort of the columns."""
    used = rows[:, (rows >= 0).any(0)] if len(rows) else rows  # sorted: padding (-1) first, so these are the last ones
    if used.shape[1] * np.log2(n_concepts + 1) < 62:
        code = np.zeros(len(rows), np.int64)
        for j in range(used.shape[1]):
            code = code * (n_concepts + 1) + (used[:, j] + 1)
        _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
        return rows[first], inverse.ravel()
    order = np.lexsort(rows.T[::-1])
    ordered = rows[order]
    new = np.r_[True, (ordered[1:] != ordered[:-1]).any(1)]
    inverse = np.empty(len(rows), np.int64)
    inverse[order] = np.cumsum(new) - 1
    return ordered[new], inverse


@dataclass
class CompletedMemory:
    """Per query: each candidate's visual nodes re-partitioned over their proposal set ∪ the query's concepts."""

    scores: np.ndarray  # [V, C] verifier scores of the catalog's visual nodes
    proposed: np.ndarray  # bool [V, C]
    node_species: np.ndarray  # [V] species index of each node
    n_species: int
    kappa: float
    block: int = 50_000  # distinct (node, proposal set) rows partitioned per batch

    def edges(self, cand: np.ndarray, concepts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        Q, L = cand.shape
        m = concepts.shape[1]
        order = np.argsort(self.node_species, kind="stable")
        starts = np.searchsorted(self.node_species[order], np.arange(self.n_species + 1))
        count = np.where(cand >= 0, np.diff(starts)[np.maximum(cand, 0)], 0).ravel()
        pair = np.repeat(np.arange(Q * L), count)  # one row per (query, candidate, node of that candidate)
        first = np.repeat(starts[np.maximum(cand.ravel(), 0)], count)
        node = order[first + (np.arange(len(pair)) - np.repeat(np.cumsum(count) - count, count))]
        # A row's partition depends only on its node and on which of the query's concepts that node lacks (those join
        # its proposal set): rows alike in both (a species in many candidate lists, queries asking the same concepts or
        # concepts the node already has) are partitioned once. Each row's partition is computed on its own
        # (`partition_rows`), so this changes no bit of any state.
        C = self.scores.shape[1]
        sets, set_of = _unique_rows(np.sort(concepts, 1), C)
        V = len(self.node_species)
        by_set, row_of = _unique(node.astype(np.int64) * len(sets) + set_of[pair // L], V * len(sets))
        v, qc = by_set // len(sets), sets[by_set % len(sets)]
        lacking = np.where((qc >= 0) & ~self.proposed[v[:, None], np.maximum(qc, 0)], qc, -1)
        extras, extra_of = _unique_rows(np.sort(lacking, 1), C)
        unique, part_of = _unique(v * len(extras) + extra_of, V * len(extras))
        partitions = np.empty((len(unique), C), np.int8)  # HAS / UNCERTAIN / NOT_HAS per distinct row
        for lo in range(0, len(unique), self.block):
            sl = slice(lo, lo + self.block)
            v, extra = unique[sl] // len(extras), extras[unique[sl] % len(extras)]  # [R], [R, m]
            member = self.proposed[v].copy()
            rows = np.repeat(np.arange(len(v)), m)
            ok = extra.ravel() >= 0
            member[rows[ok], extra.ravel()[ok]] = True  # the query's concepts join the proposal set
            partitions[sl] = partition_rows(np.where(member, self.scores[v], np.nan), self.kappa)[0]
        row_of = part_of[row_of]
        qc = concepts[pair // L]  # [rows, m]
        picked = np.where(qc >= 0, partitions[row_of[:, None], np.maximum(qc, 0)], 0)
        flat = (pair[:, None] * m + np.arange(m)[None, :]).ravel()
        # a species holds an edge if any of its nodes does
        has = np.bincount(flat, (picked == HAS).ravel(), minlength=Q * L * m) > 0
        not_has = np.bincount(flat, (picked == NOT_HAS).ravel(), minlength=Q * L * m) > 0
        return has.reshape(Q, L, m), not_has.reshape(Q, L, m)


def edge_quality(memory: Memory, cand: np.ndarray, concepts: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """HAS / NOT_HAS precision and recall against ground truth over exactly the (candidate, concept) pairs read."""
    has, not_has = memory.edges(cand, concepts)
    asked = (cand >= 0)[:, :, None] & (concepts >= 0)[:, None, :]
    t = _gather(truth.astype(bool), cand, concepts)
    ratio = lambda a, b: float(a / b) if b else float("nan")  # noqa: E731
    return {"has_precision": ratio((has & t).sum(), has.sum()), "has_recall": ratio((has & t).sum(), t.sum()),
            "not_has_precision": ratio((not_has & ~t & asked).sum(), not_has.sum()),
            "not_has_recall": ratio((not_has & ~t & asked).sum(), (~t & asked).sum()),
            "pairs": int(asked.sum())}


QUALITY = ("has_precision", "has_recall", "not_has_precision", "not_has_recall")


def degraded_memory(truth: np.ndarray, quality: dict[str, float], seed: int = 0) -> IncidenceMemory:
    """The oracle memory made as good as `quality` says (`QUALITY` keys, each in (0, 1]), in expectation over all
    (species, concept) pairs: each true edge kept with probability = its polarity's recall, then wrong edges of that
    polarity added at random (on pairs holding no edge) until its precision is reached. Errors fall uniformly, with
    no knowledge of which species look alike: the memory-quality curve's model of an imperfect verifier."""
    rng = np.random.default_rng(seed)
    t = truth.astype(bool)
    has = t & (rng.random(t.shape) < quality["has_recall"])
    not_has = ~t & (rng.random(t.shape) < quality["not_has_recall"])

    def wrong(correct: np.ndarray, free: np.ndarray, precision: float) -> np.ndarray:
        pool = np.flatnonzero(free)
        n = min(len(pool), int(round(correct.sum() * (1 - precision) / max(precision, 1e-9))))
        out = np.zeros(t.size, bool)
        out[rng.choice(pool, size=n, replace=False)] = True
        return out.reshape(t.shape)

    false_has = wrong(has, ~t & ~not_has, quality["has_precision"])
    false_not_has = wrong(not_has, t & ~has, quality["not_has_precision"])
    return IncidenceMemory(has | false_has, not_has | false_not_has)


def density_matched_random(memory: Memory, cand: np.ndarray, concepts: np.ndarray, n_species: int, n_concepts: int,
                           seed: int = 0) -> IncidenceMemory:
    """A memory with no knowledge, as dense as `memory` is where an evaluation reads it: per concept, the share of
    HAS and of NOT_HAS edges `memory` holds on the (candidate, concept) pairs asked, drawn independently per species."""
    has, not_has = memory.edges(cand, concepts)
    asked = (cand >= 0)[:, :, None] & (concepts >= 0)[:, None, :]
    concept = np.broadcast_to(concepts[:, None, :], asked.shape)[asked]
    count = np.bincount(concept, minlength=n_concepts).astype(np.float64)
    rate = lambda edges: np.divide(np.bincount(concept, edges[asked], minlength=n_concepts), count,  # noqa: E731
                                   out=np.zeros(n_concepts), where=count > 0)
    p_has, p_not = rate(has), rate(not_has)
    rng = np.random.default_rng(seed)
    u = rng.random((n_species, n_concepts))
    return IncidenceMemory(u < p_has, (u >= p_has) & (u < p_has + p_not))
