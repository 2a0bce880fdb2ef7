"""The polarized graph (PolarMem §3): visual, text and concept nodes; HAS / NOT_HAS edges from visual nodes,
ALIGN edges from text chunks to the concepts they mention; node embeddings Ω = ⟨z_vis, z_sem⟩.

Retrieval reads the sparse incidence matrices (`has`, `not_has`); `to_networkx()` / GraphML are for looking
at the graph (Gephi, Neo4j import) and for round-trip checks, never on the hot path.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import networkx as nx
import numpy as np
import scipy.sparse as sp

from polarcatalog.data.concepts import Concept
from polarcatalog.memory.inputs import GraphInputs
from polarcatalog.memory.memories import CompletedMemory, IncidenceMemory, Memory
from polarcatalog.memory.partition import HAS, NOT_HAS, UNCERTAIN, partition_rows
from polarcatalog.memory.propose import Proposer
from polarcatalog.memory.query_parser import parse_text
from polarcatalog.memory.verifiers.verifier_types import Scores
from polarcatalog.vectors import l2_normalise


@dataclass
class PolarGraph:
    vocab: list[Concept]
    visual_ids: list[str]  # one visual node per catalog image
    visual_species: np.ndarray  # species id of each visual node
    states: np.ndarray  # int8 [V, C]: HAS / NOT_HAS / UNCERTAIN for proposed concepts
    proposed: np.ndarray  # bool [V, C]
    scores: np.ndarray  # float [V, C] verifier scores s_c
    text_ids: list[str]
    text_species: np.ndarray
    align: sp.csr_matrix  # bool [T, C]
    tau: np.ndarray | None = None  # [V] each node's τ*
    delta: np.ndarray | None = None  # [V] each node's δ

    def add_text_nodes(self, ids: list[str], species: np.ndarray, texts: Sequence[str]) -> None:
        """Text nodes (the catalog's chunks) and their ALIGN edges to the concepts they mention."""
        self.text_ids, self.text_species, self.align = list(ids), np.asarray(species), align_edges(texts, self.vocab)

    def memory(self, species_ids: np.ndarray, kappa: float, completion: bool) -> Memory:
        """What constrained retrieval reads: per-species incidence of the edges as proposed or, with critical-concept
        completion, each query's concepts joining the proposal set before partition (PolarMem §4, Table 2)."""
        if completion:
            pos = {s: i for i, s in enumerate(species_ids)}
            return CompletedMemory(self.scores, self.proposed, np.array([pos.get(s, -1) for s in self.visual_species]),
                                   len(species_ids), kappa)
        return IncidenceMemory.of(*self.species_incidence(species_ids))

    @property
    def has(self) -> sp.csr_matrix:
        return sp.csr_matrix(self.proposed & (self.states == HAS))

    @property
    def not_has(self) -> sp.csr_matrix:
        return sp.csr_matrix(self.proposed & (self.states == NOT_HAS))

    def species_incidence(self, species_ids: np.ndarray) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        """HAS / NOT_HAS per species (rows in `species_ids` order): an edge of any of its visual nodes."""
        pos = {s: i for i, s in enumerate(species_ids)}
        rows = np.array([pos.get(s, -1) for s in self.visual_species])
        keep = rows >= 0
        agg = sp.csr_matrix((np.ones(keep.sum()), (rows[keep], np.flatnonzero(keep))), shape=(len(species_ids), len(self.visual_ids)))
        return (agg @ self.has.astype(np.float64)) > 0, (agg @ self.not_has.astype(np.float64)) > 0

    def serialise_state(self, v: int) -> str:
        """The polarized state of a visual node as text (what z_sem encodes)."""
        names = np.array([c.name for c in self.vocab])
        pos = names[self.proposed[v] & (self.states[v] == HAS)]
        neg = names[self.proposed[v] & (self.states[v] == NOT_HAS)]
        return f"has: {', '.join(pos) or 'nothing verified'}; does not have: {', '.join(neg) or 'nothing verified'}"

    def omega(self, z_vis: np.ndarray, z_sem: np.ndarray) -> np.ndarray:
        """Ω(v) = ⟨z_vis, z_sem⟩, each half l2-normalised, the whole scaled to unit norm."""
        return np.hstack([l2_normalise(z_vis), l2_normalise(z_sem)]) / np.sqrt(2.0)

    def to_networkx(self) -> nx.MultiDiGraph:
        g = nx.MultiDiGraph()
        for c in self.vocab:
            g.add_node(f"concept:{c.id}", kind="concept", label=c.name, group=c.group)
        for v, (vid, s) in enumerate(zip(self.visual_ids, self.visual_species)):
            g.add_node(f"visual:{vid}", kind="visual", species_id=int(s), state=self.serialise_state(v))
        for t, (tid, s) in enumerate(zip(self.text_ids, self.text_species)):
            g.add_node(f"text:{tid}", kind="text", species_id=int(s))
        V, C = np.nonzero(self.proposed & (self.states != UNCERTAIN))
        for v, c in zip(V, C):
            rel = "HAS" if self.states[v, c] == HAS else "NOT_HAS"
            g.add_edge(f"visual:{self.visual_ids[v]}", f"concept:{self.vocab[c].id}", key=rel, relation=rel,
                       score=float(self.scores[v, c]))
        T, C = self.align.nonzero()
        for t, c in zip(T, C):
            g.add_edge(f"text:{self.text_ids[t]}", f"concept:{self.vocab[c].id}", key="ALIGN", relation="ALIGN")
        return g

    def write_graphml(self, path: str | Path) -> None:
        nx.write_graphml(self.to_networkx(), str(path))


def read_graphml(path: str | Path) -> nx.MultiDiGraph:
    return nx.read_graphml(str(path), force_multigraph=True)


def build_graph(vocab: list[Concept], visual_ids: list[str], visual_species: np.ndarray, scores: np.ndarray,
                proposer: Proposer, kappa: float, local_scores: np.ndarray | None = None) -> PolarGraph:
    """PolarMem's write path: propose (from the global and, for global_local, the local-view scores) -> partition
    each image's proposed global-view scores (its own τ*, δ; Eqs. 2-3) -> HAS / NOT_HAS edges. No text nodes yet."""
    proposed = proposer(scores, local_scores)
    # each image its own Otsu split over its own proposed scores (NaN = not proposed), all images in one pass
    states, tau, delta = partition_rows(np.where(proposed, scores, np.nan), kappa)
    return PolarGraph(vocab, list(visual_ids), np.asarray(visual_species), states, proposed, scores, [], np.zeros(0),
                      align_edges([], vocab), tau, delta)


def align_edges(texts: Sequence[str], vocab: list[Concept]) -> sp.csr_matrix:
    """ALIGN: a text chunk mentions a concept (positively) — rule-based entity extraction with the query parser."""
    index = {c.id: j for j, c in enumerate(vocab)}
    rows, cols = [], []
    for t, text in enumerate(texts):
        for cid in parse_text(text, vocab).q_pos:
            rows.append(t)
            cols.append(index[cid])
    return sp.csr_matrix((np.ones(len(rows), bool), (rows, cols)), shape=(len(texts), len(vocab)))


def graph_stats(graph: PolarGraph) -> dict[str, float]:
    """Graph quality (PolarMem B.2): concepts per image, redundancy, how much of the vocabulary is ever HAS.
    (Usage in retrieval, concepts activated in the top-k, is measured on the constrained queries.)"""
    has, neg = graph.proposed & (graph.states == HAS), graph.proposed & (graph.states == NOT_HAS)
    unc = graph.proposed & (graph.states == UNCERTAIN)
    sets = has.astype(np.float64)
    inter = sets @ sets.T
    size = sets.sum(1)
    union = size[:, None] + size[None, :] - inter
    jacc = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
    off = ~np.eye(len(sets), dtype=bool)
    out = {
        "visual_nodes": len(graph.visual_ids), "text_nodes": len(graph.text_ids), "concept_nodes": len(graph.vocab),
        "has_edges": int(has.sum()), "not_has_edges": int(neg.sum()), "align_edges": int(graph.align.nnz),
        "proposed_per_image": float(graph.proposed.sum(1).mean()),
        "has_per_image": float(has.sum(1).mean()), "not_has_per_image": float(neg.sum(1).mean()),
        "uncertain_fraction": float(unc.sum() / max(graph.proposed.sum(), 1)),
        # redundancy: mean Jaccard overlap of two images' HAS sets (1 = every image says the same thing)
        "redundancy_has_jaccard": float(jacc[off].mean()) if off.any() else 0.0,
        "concepts_ever_has": float((has.sum(0) > 0).mean()),
    }
    return out


def edge_quality(graph: PolarGraph, truth: np.ndarray) -> dict[str, float]:
    """HAS / NOT_HAS edge precision and recall against ground-truth concept labels of each node's species."""
    has, neg = graph.proposed & (graph.states == HAS), graph.proposed & (graph.states == NOT_HAS)
    ratio = lambda a, b: float(a / b) if b else float("nan")  # noqa: E731
    return {
        "has_precision": ratio((has & truth).sum(), has.sum()),
        "has_recall": ratio((has & truth).sum(), truth.sum()),
        "not_has_precision": ratio((neg & ~truth).sum(), neg.sum()),
        "not_has_recall": ratio((neg & ~truth).sum(), (~truth).sum()),
    }


def species_memory(inputs: GraphInputs, anchor_ids: list[str], scores: Scores, proposer: Proposer, kappa: float,
                   completion: bool) -> Memory:
    """A memory (proposer, κ, critical-concept completion or not) of the catalog, species in `inputs.species_ids`
    order: what constrained retrieval reads."""
    g = build_graph(inputs.vocab, anchor_ids, inputs.anchor_species, scores.anchor, proposer, kappa, scores.anchor_local)
    return g.memory(inputs.species_ids, kappa, completion)
