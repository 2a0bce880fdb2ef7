"""Constrained-query evaluation of PolarMem on top of VR-RAG (Conflict@3, Filter Rate, accuracy; Tables 2-3, Fig. 3).

A constrained query = a sprite of species t + Q+ (a concept t truly has) + Q− (a concept t truly lacks but a
*similar* species does: the first VR-RAG candidate d ≠ t that has a concept t lacks). So each query carries a
"similar but contradictory" distractor, which is what the constraints are for.

Two notions of contradiction are reported: by the memory's own states (s_log = −1: what hard retrieval
guarantees to keep out) and by ground truth (a candidate that truly has a Q− concept or truly lacks a Q+
concept: what a user cares about, bounded by the graph's edge quality).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from polarcatalog.data.concepts import Concept
from polarcatalog.eval.metrics import gold_ranks, summarize
from polarcatalog.memory.constraints import (CONFLICT, NEUTRAL, Strength, candidate_states, conflict_at_k, filter_rate,
                                             query_matrix, reorder)
from polarcatalog.memory.partition import partition
from polarcatalog.memory.propose import Proposer

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


def gt_conflicts(cand: np.ndarray, truth: np.ndarray, q_pos: list[list[int]], q_neg: list[list[int]]) -> np.ndarray:
    """[Q, L]: the candidate truly has a Q− concept or truly lacks a Q+ concept."""
    c = np.maximum(cand, 0)
    out = np.zeros(cand.shape, bool)
    for q in range(len(cand)):  # Q x (|Q+|+|Q−|) gathers; the candidate axis is vectorised
        t = truth[c[q]]
        out[q] = t[:, q_neg[q]].any(1) | (~t[:, q_pos[q]]).any(1)
    return out & (cand >= 0)


def evaluate_strengths(cand: np.ndarray, s: np.ndarray, target: np.ndarray, cq: ConstrainedQueries, has, not_has,
                       truth: np.ndarray, strengths: list[Strength], k: int = 3, temperature: float = 0.02,
                       extra: tuple[list[list[int]], list[list[int]]] | None = None) -> pd.DataFrame:
    """One row per constraint strength. cand/s: the VR-RAG candidates (species indices, fused scores) of cq.rows.
    `extra` = (Q+, Q−) per query added to the memory check only (the query image's verified concepts); ground-truth
    conflicts stay defined by the user's constraints."""
    c, sc, tg = cand[cq.rows], s[cq.rows], target[cq.rows]
    q_pos, q_neg = cq.q_pos, cq.q_neg
    if extra is not None:
        q_pos = [sorted(set(p) | set(extra[0][r])) for p, r in zip(q_pos, cq.rows)]
        q_neg = [sorted(set(n) | set(extra[1][r])) for n, r in zip(q_neg, cq.rows)]
    states = candidate_states(c, has, not_has, q_pos, q_neg)
    dense = lambda m: m.toarray() if hasattr(m, "toarray") else np.asarray(m)  # noqa: E731
    edges = dense(has).astype(bool) | dense(not_has).astype(bool)  # [S, C]: the memory states something
    asked = (query_matrix(q_pos, edges.shape[1]) + query_matrix(q_neg, edges.shape[1])).toarray() > 0  # [Q, C]
    valid = c >= 0
    mem_conflict = (states == CONFLICT) & valid
    gt_conflict = gt_conflicts(c, truth, cq.q_pos, cq.q_neg)
    enough = ((~mem_conflict) & valid).sum(1) >= k
    rows = []
    for st in strengths:
        order = reorder(states, sc, st, temperature)
        ranked = np.take_along_axis(c, order, 1)
        top, top_ok = ranked[:, :k], ranked[:, :k] >= 0
        top_states = np.take_along_axis(states, order, 1)[:, :k]
        m = summarize(gold_ranks(ranked, tg), mrr_ks=(1, 5), recall_ks=(1, k))
        rows.append({
            "strength": st.label(),
            f"Conflict@{k} (memory)": conflict_at_k(mem_conflict, order, valid, k),
            f"Conflict@{k} (memory, >= {k} compatible)": conflict_at_k(mem_conflict[enough], order[enough], valid[enough], k),
            f"Conflict@{k} (ground truth)": conflict_at_k(gt_conflict, order, valid, k),
            "Filter rate (memory)": filter_rate(mem_conflict, order, valid, k),
            "Filter rate (ground truth)": filter_rate(gt_conflict, order, valid, k),
            "target mRR@1": m["mRR@1"], f"target R@{k}": m[f"R@{k}"],
            # PolarMem B.2 usage: share of the vocabulary whose edge on a retrieved top-k node decided some query's
            # state (the concept was one of that query's constraints), and per query the share of top-k candidates
            # whose state the memory decided (not NEUTRAL: an edge on one of the query's concepts exists)
            f"concepts activated in top-{k}": float(((edges[np.maximum(top, 0)] & top_ok[..., None]).any(1) & asked).any(0).mean()),
            f"constraint activation@{k}": float(((top_states != NEUTRAL) & top_ok).sum(1).astype(float).sum()
                                                / max(int(top_ok.sum()), 1)),
            "queries": int(len(c)),
        })
    return pd.DataFrame(rows)


def covered(cq: ConstrainedQueries, proposed: np.ndarray, target: np.ndarray, species_nodes: dict[int, list[int]]) -> np.ndarray:
    """A query is covered when its Q+ was proposed for some node of the target species and its Q− for some node
    of the distractor (the edges that would let the graph tell them apart exist)."""
    out = np.zeros(len(cq.rows), bool)
    for i, (q, p, n, d) in enumerate(zip(cq.rows, cq.q_pos, cq.q_neg, cq.distractor)):
        tn, dn = species_nodes.get(int(target[q]), []), species_nodes.get(int(d), [])
        out[i] = bool(tn) and bool(dn) and proposed[tn][:, p].any() and proposed[dn][:, n].any()
    return out


def query_image_concepts(query_scores: np.ndarray, proposer: Proposer, kappa: float) -> tuple[list[list[int]], list[list[int]]]:
    """The query image's own verified concepts (proposed, then partitioned like a catalog image): HAS -> Q+, NOT_HAS -> Q−.
    Queries have no local views (the embed stage encodes those for catalog images only), so `global_local`
    proposes from the query's global view: top_n with the same N."""
    if proposer.strategy == "global_local":
        proposer = replace(proposer, strategy="top_n")
    proposed = proposer(query_scores)
    pos, neg = [], []
    for q in range(len(query_scores)):
        idx = np.flatnonzero(proposed[q])
        st = partition(query_scores[q, idx], kappa).states
        pos.append(idx[st == 1].tolist())
        neg.append(idx[st == -1].tolist())
    return pos, neg
