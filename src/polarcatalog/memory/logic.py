"""Lexicographic logic-aware retrieval (PolarMem Algorithm 1) over sparse HAS / NOT_HAS incidence matrices.

s_log = −1 (conflict) if Q+ ∩ C−(v) ≠ ∅ or Q− ∩ C+(v) ≠ ∅; else +1 (entailment) if Q+ ∩ C+(v) ≠ ∅; else 0.
Hard: sort by ⟨s_log, s_sem⟩ descending (lines 15-17). Soft: s_sem + penalty · s_log, the single weighted
score the paper contrasts with hard (penalty 0 = plain similarity; a penalty larger than the similarity range
reproduces the hard order). One sparse product per query: no per-node Python walk.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import scipy.sparse as sp

CONFLICT, NEUTRAL, ENTAILMENT = -1, 0, 1


def incidence(edges: Sequence[tuple[int, int]], n_nodes: int, n_concepts: int) -> sp.csr_matrix:
    """Boolean node x concept matrix from (node, concept) pairs."""
    if not len(edges):
        return sp.csr_matrix((n_nodes, n_concepts), dtype=bool)
    rows, cols = np.asarray(edges).T
    return sp.csr_matrix((np.ones(len(rows), bool), (rows, cols)), shape=(n_nodes, n_concepts))


def _hits(m: sp.csr_matrix, concepts: Sequence[int]) -> np.ndarray:
    if not len(concepts):
        return np.zeros(m.shape[0], bool)
    q = np.zeros(m.shape[1], np.int32)
    q[list(concepts)] = 1
    return (m.astype(np.int32) @ q) > 0


def logic_states(has: sp.csr_matrix, not_has: sp.csr_matrix, q_pos: Sequence[int], q_neg: Sequence[int]) -> np.ndarray:
    """Algorithm 1, lines 6-14, for every memory node at once."""
    conflict = _hits(not_has, q_pos) | _hits(has, q_neg)
    entail = _hits(has, q_pos)
    return np.where(conflict, CONFLICT, np.where(entail, ENTAILMENT, NEUTRAL)).astype(np.int8)


def hard_order(states: np.ndarray, sim: np.ndarray) -> np.ndarray:
    """Node indices sorted by ⟨s_log, s_sem⟩ descending (ties: lower index first)."""
    return np.lexsort((np.arange(len(sim)), -np.asarray(sim, np.float64), -np.asarray(states)))


def soft_scores(states: np.ndarray, sim: np.ndarray, penalty: float) -> np.ndarray:
    return np.asarray(sim, np.float64) + penalty * np.asarray(states, np.float64)


def soft_order(states: np.ndarray, sim: np.ndarray, penalty: float) -> np.ndarray:
    s = soft_scores(states, sim, penalty)
    return np.lexsort((np.arange(len(s)), -s))
