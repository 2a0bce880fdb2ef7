"""Constrained-query evaluation of PolarMem on top of VR-RAG (Conflict@3, Filter Rate, accuracy; Tables 2-3, Fig. 3).

A constrained query = a sprite of species t + Q+ (a concept t truly has) + Q− (a concept t truly lacks but a
*similar* species d does). So each query carries a "similar but contradictory" distractor, which is what the
constraints are for. Two sets, by where d comes from:

- primary: d is the first of t's nearest *catalog* neighbours (artwork ↔ artwork) with a concept t lacks, so the
  constraints are drawn independently of the ranking being scored;
- secondary (labelled): d is the first VR-RAG candidate ≠ t with such a concept — tailored to the ranking.

Either way Q+ is a true concept of the target: constraints carry information about the answer, which is why
the axes also report an oracle memory (the most that information can give) and a random memory.

Two notions of contradiction are reported: by the memory's own states (s_log = −1: what hard retrieval
guarantees to keep out) and by ground truth (a candidate that truly has a Q− concept or truly lacks a Q+
concept: what a user cares about, bounded by the graph's edge quality).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from polarcatalog.data.concepts import Concept
from polarcatalog.eval.metrics import gold_ranks
from polarcatalog.memory.constraints import CONFLICT, NEUTRAL, Strength, reorder, sort_keys
from polarcatalog.memory.memories import Memory, oracle_memory, states
from polarcatalog.memory.partition import HAS, NOT_HAS, partition_rows
from polarcatalog.memory.propose import Proposer
from polarcatalog.vectors import group_sums, l2_normalise

CONSTRAINT_GROUPS = ("type", "colour", "shape")


@dataclass
class ConstrainedQueries:
    rows: np.ndarray  # index into the query table
    q_pos: list[list[int]]
    q_neg: list[list[int]]
    distractor: np.ndarray  # species index of the contradicting look-alike
    text: list[str]


def make_constrained_queries(target: np.ndarray, cand: np.ndarray, truth: np.ndarray, vocab: list[Concept],
                             seed: int = 0) -> ConstrainedQueries:
    """target [Q] and cand [Q, L]: species *indices*; truth [S, C]. Queries without a usable pair are skipped."""
    rng = np.random.default_rng(seed)
    allowed = np.array([c.group in CONSTRAINT_GROUPS for c in vocab])
    rows, pos, neg, dis, text = [], [], [], [], []
    for q, t in enumerate(target):
        has_t = np.flatnonzero(truth[t] & allowed)
        if not len(has_t):
            continue
        for d in cand[q]:
            if d < 0 or d == t:
                continue
            options = np.flatnonzero(truth[d] & ~truth[t] & allowed)
            if len(options):
                p, n = int(rng.choice(has_t)), int(rng.choice(options))
                rows.append(q)
                pos.append([p])
                neg.append([n])
                dis.append(d)
                text.append(f"a Pokémon with {vocab[p].name} that is not {vocab[n].name}")
                break
    return ConstrainedQueries(np.array(rows, int), pos, neg, np.array(dis, int), text)


def catalog_neighbours(anchor_x: np.ndarray, anchor_species: np.ndarray, n_species: int, n: int = 10) -> np.ndarray:
    """[S, n] each catalog species' nearest other species by artwork similarity (cosine of the species' mean anchor
    features): the look-alikes a constrained query's Q− is drawn from, without looking at any ranking that is scored."""
    sums = group_sums(anchor_x, anchor_species, n_species)
    means = l2_normalise(sums - sums.mean(0))
    sim = means @ means.T
    np.fill_diagonal(sim, -np.inf)
    return np.argsort(-sim, axis=1, kind="stable")[:, : min(n, max(n_species - 1, 0))]


def gt_conflicts(cand: np.ndarray, truth: np.ndarray, q_pos: list[list[int]], q_neg: list[list[int]]) -> np.ndarray:
    """[Q, L]: the candidate truly has a Q− concept or truly lacks a Q+ concept (ground truth as a memory)."""
    return states(oracle_memory(truth), cand, q_pos, q_neg) == CONFLICT


def _per_query_share(flags: np.ndarray, valid: np.ndarray) -> np.ndarray:
    n = valid.sum(1)
    return np.divide((flags & valid).sum(1), n, out=np.full(len(n), np.nan), where=n > 0)


def evaluate_strengths(cand: np.ndarray, s: np.ndarray, target: np.ndarray, cq: ConstrainedQueries, memory: Memory,
                       truth: np.ndarray, strengths: list[Strength], k: int = 3, temperature: float = 0.02, pool: int = 10,
                       extra: tuple[list[list[int]], list[list[int]]] | None = None) -> list[tuple[str, dict[str, np.ndarray]]]:
    """Per strength, per-query values of every constrained-retrieval metric (rows of `cq`), ready for the protocol's
    bootstrap. cand / s: the VR-RAG candidates (species indices, fused scores, in VR-RAG order) of every query.

    - Conflict@k: share of contradictory candidates in the final top-k context (by the memory's own states: what
      hard retrieval guarantees; by ground truth: what a user gets).
    - Filter rate: of the contradictory candidates in the pre-context pool (the unconstrained top-`pool`), the share
      kept out of the final top-k (PolarMem: "contradictory candidates excluded from the final context"); per query,
      NaN when the pool holds none. Both use the same context, per query.
    - target mRR@1 / R@k: the gold's rank after re-ordering, ties pessimistic on the order's own keys.
    `extra` = (Q+, Q−) per query added to the memory check only (the query image's own verified concepts);
    ground-truth conflicts stay defined by the user's constraints."""
    c, sc, tg = cand[cq.rows], s[cq.rows], target[cq.rows]
    q_pos, q_neg = cq.q_pos, cq.q_neg
    if extra is not None:
        q_pos = [sorted(set(p) | set(extra[0][r])) for p, r in zip(q_pos, cq.rows)]
        q_neg = [sorted(set(n) | set(extra[1][r])) for n, r in zip(q_neg, cq.rows)]
    st = states(memory, c, q_pos, q_neg)
    valid = c >= 0
    mem_conflict = (st == CONFLICT) & valid
    gt_conflict = gt_conflicts(c, truth, cq.q_pos, cq.q_neg) & valid
    enough = ((~mem_conflict) & valid).sum(1) >= k
    in_pool = valid & (np.arange(c.shape[1])[None, :] < pool)  # columns are in VR-RAG order
    out = []
    for strength in strengths:
        order = reorder(st, sc, strength, temperature)
        position = np.argsort(order, axis=1)  # where each candidate ends up
        in_context = position < k
        take = lambda a: np.take_along_axis(a, order, 1)  # noqa: E731
        ranked = take(c)
        ranks = gold_ranks(ranked, tg, tuple(take(key) for key in sort_keys(st, sc, strength, temperature)))
        top_valid = take(valid)[:, :k]

        def filtered(conflict: np.ndarray) -> np.ndarray:
            pooled = conflict & in_pool
            return 1.0 - _per_query_share(pooled & in_context, pooled)

        values = {
            f"Conflict@{k} (memory)": _per_query_share(take(mem_conflict)[:, :k], top_valid),
            f"Conflict@{k} (memory, >= {k} compatible)": np.where(enough, _per_query_share(take(mem_conflict)[:, :k], top_valid), np.nan),
            f"Conflict@{k} (ground truth)": _per_query_share(take(gt_conflict)[:, :k], top_valid),
            "Filter rate (memory)": filtered(mem_conflict),
            "Filter rate (ground truth)": filtered(gt_conflict),
            "target mRR@1": (ranks <= 1).astype(np.float64),
            f"target R@{k}": (ranks <= k).astype(np.float64),
            # PolarMem B.2 usage: per query, the share of the top-k context whose state the memory decided
            f"constraint activation@{k}": _per_query_share(take(st != NEUTRAL)[:, :k], top_valid),
        }
        out.append((strength.label(), values))
    return out


def covered(cq: ConstrainedQueries, proposed: np.ndarray, target: np.ndarray, species_nodes: dict[int, list[int]]) -> np.ndarray:
    """A query is covered when its Q+ was proposed for some node of the target species and its Q− for some node
    of the distractor (the edges that would let the graph tell them apart exist)."""
    out = np.zeros(len(cq.rows), bool)
    for i, (q, p, n, d) in enumerate(zip(cq.rows, cq.q_pos, cq.q_neg, cq.distractor)):
        tn, dn = species_nodes.get(int(target[q]), []), species_nodes.get(int(d), [])
        out[i] = bool(tn) and bool(dn) and proposed[tn][:, p].any() and proposed[dn][:, n].any()
    return out


def critical_recall(cq: ConstrainedQueries, proposed: np.ndarray, target: np.ndarray,
                    species_nodes: dict[int, list[int]]) -> np.ndarray:
    """Proposal Recall@K on the query-critical concepts (PolarMem Table 2's sense), per query: the share of its
    constraint concepts proposed where they decide the query, Q+ on some node of the target and Q− on some node of the
    distractor."""
    out = np.zeros(len(cq.rows))
    for i, (q, p, n, d) in enumerate(zip(cq.rows, cq.q_pos, cq.q_neg, cq.distractor)):
        tn, dn = species_nodes.get(int(target[q]), []), species_nodes.get(int(d), [])
        found = [bool(tn) and bool(proposed[tn][:, c].any()) for c in p] + [bool(dn) and bool(proposed[dn][:, c].any()) for c in n]
        out[i] = np.mean(found) if found else np.nan
    return out


def query_image_concepts(query_scores: np.ndarray, proposer: Proposer, kappa: float) -> tuple[list[list[int]], list[list[int]]]:
    """The query image's own verified concepts (proposed, then partitioned like a catalog image): HAS -> Q+, NOT_HAS -> Q−.
    Queries have no local views (the embed stage encodes those for catalog images only), so `global_local`
    proposes from the query's global view: top_n with the same N."""
    if proposer.strategy == "global_local":
        proposer = replace(proposer, strategy="top_n")
    proposed = proposer(query_scores)
    # every query at once, NaN outside its proposal set: each row's split is the one `partition` finds on that row's
    # proposed scores alone (the sort puts NaN last, and no boundary is evaluated past the row's own scores)
    verified, _, _ = partition_rows(np.where(proposed, query_scores, np.nan), kappa)
    pos = [np.flatnonzero(row == HAS).tolist() for row in verified]
    neg = [np.flatnonzero(row == NOT_HAS).tolist() for row in verified]
    return pos, neg
