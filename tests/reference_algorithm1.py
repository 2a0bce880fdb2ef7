"""PolarMem's Algorithm 1 written line by line over a networkx graph, as the paper states it: the reference the
tests hold the production implementation (`polarcatalog.memory.constraints`, sparse products + one lexsort)
against, and the per-node walk `benchmarks/polar_scale.py` times it against. Slow on purpose: plain sets."""

from __future__ import annotations

from typing import Sequence

import networkx as nx
import numpy as np
import scipy.sparse as sp

CONFLICT, NEUTRAL, ENTAILMENT = -1, 0, 1


def incidence(edges: Sequence[tuple[int, int]], n_nodes: int, n_concepts: int) -> sp.csr_matrix:
    """Boolean node x concept matrix from (node, concept) pairs."""
    if not len(edges):
        return sp.csr_matrix((n_nodes, n_concepts), dtype=bool)
    rows, cols = np.asarray(edges).T
    return sp.csr_matrix((np.ones(len(rows), bool), (rows, cols)), shape=(n_nodes, n_concepts))


def memory_graph(has: sp.spmatrix, not_has: sp.spmatrix) -> nx.MultiDiGraph:
    """Memory nodes `v<i>` with HAS / NOT_HAS edges to concept nodes `c<j>`."""
    g = nx.MultiDiGraph()
    g.add_nodes_from(f"v{i}" for i in range(has.shape[0]))
    for relation, m in (("HAS", has), ("NOT_HAS", not_has)):
        rows, cols = sp.coo_matrix(m).nonzero()
        g.add_edges_from((f"v{a}", f"c{b}", {"relation": relation}) for a, b in zip(rows, cols))
    return g


def logic_state(g: nx.MultiDiGraph, v: str, q_pos: set[str], q_neg: set[str]) -> int:
    """Lines 6-14: C+ / C− from the node's edges, then conflict before entailment."""
    c_pos = {c for _, c, d in g.out_edges(v, data=True) if d["relation"] == "HAS"}
    c_neg = {c for _, c, d in g.out_edges(v, data=True) if d["relation"] == "NOT_HAS"}
    if (q_pos & c_neg) or (q_neg & c_pos):
        return CONFLICT
    if q_pos & c_pos:
        return ENTAILMENT
    return NEUTRAL


def walk(g: nx.MultiDiGraph, nodes: Sequence[str], sim: Sequence[float], q_pos: set[str], q_neg: set[str],
         penalty: float | None = None) -> list[int]:
    """Lines 15-17: positions of `nodes` sorted by ⟨s_log, sim⟩ descending (hard), or by sim + penalty · s_log
    (soft); ties keep the given order."""
    states = [logic_state(g, v, q_pos, q_neg) for v in nodes]
    key = [(s,) + (x,) if penalty is None else (x + penalty * s,) for s, x in zip(states, sim)]
    return sorted(range(len(nodes)), key=lambda i: tuple(-k for k in key[i]) + (i,))
