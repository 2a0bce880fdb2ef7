"""PolarMem's ablation axes on the constrained queries: constraint strength (Fig. 3 / Table 3) and proposer coverage
(Table 2). Both read one `PolarSetup`: verifier scores and VR-RAG candidates computed once, each value a re-sort
(strength) or a re-built memory (coverage), never a re-encoding."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from polarcatalog.eval.metrics import gold_ranks
from polarcatalog.memory.constraints import Strength, candidate_states, reorder
from polarcatalog.memory.evaluate import ConstrainedQueries, covered, evaluate_strengths, query_image_concepts
from polarcatalog.memory.graph import PolarGraph, build_graph, edge_quality, species_memory
from polarcatalog.memory.inputs import GraphInputs
from polarcatalog.memory.propose import Proposer, ProposerSpec, create_proposer, proposal_recall
from polarcatalog.memory.verifiers import Scores


@dataclass
class PolarSetup:
    """What both axes share: graph inputs, verifier scores, VR-RAG candidates, and the configured memory."""

    inputs: GraphInputs
    anchor_ids: list[str]
    scores: Scores  # verifier scores of catalog images, their local views and query images
    cand: np.ndarray  # [Q, L] species index of each VR-RAG candidate (-1 = none)
    s: np.ndarray  # [Q, L] fused VR-RAG score
    target: np.ndarray  # [Q] species index of each query
    queries: ConstrainedQueries
    proposer: Proposer  # graph.proposer / proposer_n
    kappa: float
    completion: bool  # graph.critical_completion
    strength: Strength  # graph.constraint, adaptive p_max bound
    adaptive_max: float
    k: int  # graph.constraint_k: the Conflict@k context
    temperature: float  # graph.adaptive_temperature

    def memory(self) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        """The configured memory's HAS / NOT_HAS incidence per species."""
        return species_memory(self.inputs, self.anchor_ids, self.scores, self.proposer, self.kappa, self.completion)

    def graph(self, proposer: Proposer) -> PolarGraph:
        return build_graph(self.inputs.vocab, self.anchor_ids, self.inputs.anchor_species, self.scores.anchor, proposer,
                           self.kappa, self.scores.anchor_local)


def constraint_axis(setup: PolarSetup, strengths: list[Strength]) -> pd.DataFrame:
    """One row per strength on the configured memory, then the configured strength again with the query image's own
    verified concepts as extra constraints."""
    has, not_has = setup.memory()

    def table(sts: list[Strength], extra: tuple[list[list[int]], list[list[int]]] | None = None) -> pd.DataFrame:
        return evaluate_strengths(setup.cand, setup.s, setup.target, setup.queries, has, not_has, setup.inputs.truth,
                                  sts, setup.k, setup.temperature, extra=extra)

    df = table([st.with_adaptive_max(setup.adaptive_max) for st in strengths])
    df.insert(0, "spec", [str(st) for st in strengths])
    row = table([setup.strength], query_image_concepts(setup.scores.query, setup.proposer, setup.kappa))
    row.insert(0, "spec", f"{setup.strength} + query-image concepts")
    row["strength"] = row["strength"] + " + query-image concepts"
    return pd.concat([df, row], ignore_index=True)


def coverage_axis(setup: PolarSetup, specs: list[ProposerSpec]) -> pd.DataFrame:
    """Table 2 layout: Proposal Recall@K, score on covered vs missed queries, overall; score = target accuracy@1
    under the configured constraint strength, without completion (so that coverage is what varies), plus a final
    row with critical-concept completion on the configured proposer."""
    inputs, cq = setup.inputs, setup.queries
    truth_nodes = inputs.truth_rows(inputs.anchor_species)
    nodes: dict[int, list[int]] = {}
    for v, row in enumerate(inputs.species_index(inputs.anchor_species)):
        nodes.setdefault(int(row), []).append(v)
    c, sc, tg = setup.cand[cq.rows], setup.s[cq.rows], setup.target[cq.rows]
    configured = ProposerSpec(setup.proposer.strategy, setup.proposer.n)
    settings = [(str(spec), create_proposer(spec, setup.proposer.seed, inputs.groups), False) for spec in specs]
    settings.append((f"{configured} + critical completion", setup.proposer, True))
    rows = []
    for label, proposer, completion in settings:
        g = setup.graph(proposer)
        if completion:
            g = g.completed()
        has, not_has = g.species_incidence(inputs.species_ids)
        states = candidate_states(c, has, not_has, cq.q_pos, cq.q_neg)
        ranks = gold_ranks(np.take_along_axis(c, reorder(states, sc, setup.strength, setup.temperature), 1), tg)
        hit = ranks <= 1
        cov = covered(cq, g.proposed, setup.target, nodes)
        eq = edge_quality(g, truth_nodes)
        rows.append({"setting": label, "concepts proposed per image": float(g.proposed.sum(1).mean()),
                     "Proposal Recall@K": proposal_recall(g.proposed, truth_nodes),
                     "score (covered)": float(hit[cov].mean()) if cov.any() else float("nan"),
                     "score (missed)": float(hit[~cov].mean()) if (~cov).any() else float("nan"),
                     "overall score": float(hit.mean()), "covered queries": float(cov.mean()),
                     "HAS precision": eq["has_precision"], "HAS recall": eq["has_recall"],
                     "NOT_HAS precision": eq["not_has_precision"], "NOT_HAS recall": eq["not_has_recall"]})
    return pd.DataFrame(rows)
