"""PolarMem's ablation axes on the constrained queries: constraint strength (Fig. 3 / Table 3) and proposer coverage
(Table 2). Both read one `PolarSetup`: verifier scores and VR-RAG candidates computed once, each value a re-sort
(strength) or a re-built memory (coverage), never a re-encoding. Both return the protocol's tidy rows (dev / test,
per query group, with CIs)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd

from polarcatalog.eval.protocol import Protocol, difference_rows, fixed_rows, long_rows
from polarcatalog.memory import memories
from polarcatalog.memory.constraints import Strength
from polarcatalog.memory.constrained import ConstrainedQueries, covered, critical_recall, evaluate_strengths, query_image_concepts
from polarcatalog.memory.polar_graph import PolarGraph, build_graph
from polarcatalog.memory.inputs import GraphInputs
from polarcatalog.memory.memories import Memory, density_matched_random, oracle_memory, pad_concepts
from polarcatalog.memory.propose import Proposer, ProposerSpec, create_proposer, proposal_recall
from polarcatalog.memory.verifiers import Scores
from polarcatalog.parallel import fork_calls


@dataclass
class PolarSetup:
    """What both axes share: graph inputs, verifier scores, VR-RAG candidates, the constrained query sets and the
    configured memory."""

    inputs: GraphInputs
    anchor_ids: list[str]
    scores: Scores  # verifier scores of catalog images, their local views and query images
    cand: np.ndarray  # [Q, L] species index of each VR-RAG candidate (-1 = none), in VR-RAG order
    s: np.ndarray  # [Q, L] fused VR-RAG score
    target: np.ndarray  # [Q] species index of each query
    queries: ConstrainedQueries  # primary: Q− from the target's catalog look-alikes
    secondary: ConstrainedQueries  # Q− from the ranking's look-alikes (labelled, tailored to the ranking)
    proposer: Proposer  # graph.proposer
    kappa: float
    completion: bool  # graph.critical_completion
    strength: Strength  # graph.constraint
    k: int  # graph.constraint_k: the Conflict@k context
    pool: int  # graph.filter_pool: the filter rate's pre-context pool
    temperature: float  # graph.adaptive_temperature
    seed: int

    def graph(self, proposer: Proposer) -> PolarGraph:
        return build_graph(self.inputs.vocab, self.anchor_ids, self.inputs.anchor_species, self.scores.anchor, proposer,
                           self.kappa, self.scores.anchor_local)

    def configured_memory(self) -> tuple[str, Memory]:
        """(its name, the memory the configured graph stage builds, with critical completion when configured)."""
        name = "configured" + (" (critical completion)" if self.completion else "")
        return name, self.graph(self.proposer).memory(self.inputs.species_ids, self.kappa, self.completion)

    def controls(self) -> dict[str, Memory]:
        """The configured memory and its bounds: oracle (edges = ground truth) and random (per concept as dense as the
        configured memory is on the pairs the primary constrained set reads, with no knowledge of which species)."""
        name, configured = self.configured_memory()
        cand, concepts = self.asked(self.queries)
        random = density_matched_random(configured, cand, concepts, len(self.inputs.species_ids), len(self.inputs.vocab),
                                        self.seed)
        return {name: configured, "oracle (ground truth)": oracle_memory(self.inputs.truth), "random (same density)": random}

    def evaluate(self, cq: ConstrainedQueries, memory: Memory, strengths: list[Strength], extra=None):
        return evaluate_strengths(self.cand, self.s, self.target, cq, memory, self.inputs.truth, strengths, self.k,
                                  self.temperature, self.pool, extra)

    def asked(self, cq: ConstrainedQueries) -> tuple[np.ndarray, np.ndarray]:
        """(candidates in the pool, concepts) of the constrained queries: the pairs an edge-quality check reads."""
        return self.cand[cq.rows][:, : self.pool], pad_concepts([p + n for p, n in zip(cq.q_pos, cq.q_neg)])


def constraint_axis(setup: PolarSetup, strengths: list[Strength], protocol: Protocol) -> pd.DataFrame:
    """Rows per (constrained set, memory, strength): the primary and secondary sets, the configured memory beside the
    oracle and random controls, every strength, each beside the do-nothing baseline (`none`) as a paired test
    difference (`Δ <metric> vs none`); then the configured strength with the query image's own verified concepts as
    extra constraints."""
    controls = setup.controls()
    none = Strength.parse("none")

    def memory_rows(set_name: str, cq: ConstrainedQueries, mem_name: str, memory: Memory) -> list[dict]:
        pq = protocol.take(cq.rows)
        rows = []
        results = setup.evaluate(cq, memory, [none, *[s for s in strengths if s != none]])
        baseline = results[0][1]
        for label, values in results:
            if label == none.label() and none not in strengths:
                continue
            rows += long_rows(pq, values, set=set_name, memory=mem_name, strength=label)
            for metric in (m for m in values if m.endswith("(ground truth)") or m == "target mRR@1"):
                rows += difference_rows(pq, values[metric], baseline[metric], f"Δ {metric} vs none", groups=("all",), set=set_name,
                                        memory=mem_name, strength=label)
        return rows

    configured = next(iter(controls))

    def query_image_rows() -> list[dict]:
        extra = query_image_concepts(setup.scores.query, setup.proposer, setup.kappa)
        return [row for label, values in setup.evaluate(setup.queries, controls[configured], [setup.strength], extra)
                for row in long_rows(protocol.take(setup.queries.rows), values, set="primary: catalog look-alikes",
                                     memory=configured, strength=f"{label} + query-image concepts")]

    sets = (("primary: catalog look-alikes", setup.queries), ("secondary: ranking look-alikes", setup.secondary))
    calls = [partial(memory_rows, set_name, cq, mem_name, memory) for set_name, cq in sets for mem_name, memory in controls.items()]
    # each (set, memory) is scored on its own: the machine's other core takes every other one (`fork_calls`)
    return pd.DataFrame([row for rows in fork_calls(*calls, query_image_rows) for row in rows])


def coverage_axis(setup: PolarSetup, specs: list[ProposerSpec], protocol: Protocol) -> pd.DataFrame:
    """Table 2 layout on the primary constrained set: Proposal Recall@K, score on covered vs missed queries, overall;
    score = target accuracy@1 under the configured constraint strength, without completion (so that coverage is what
    varies), plus a final row with critical-concept completion on the configured proposer. Edge quality is measured
    on the pairs the queries read (pool candidates × constraint concepts)."""
    inputs, cq = setup.inputs, setup.queries
    truth_nodes = inputs.truth_rows(inputs.anchor_species)
    nodes: dict[int, list[int]] = {}
    for v, row in enumerate(inputs.species_index(inputs.anchor_species)):
        nodes.setdefault(int(row), []).append(v)
    configured = ProposerSpec(setup.proposer.strategy, setup.proposer.n)
    settings = [(str(spec), create_proposer(spec, setup.proposer.seed, inputs.groups), False) for spec in specs]
    settings.append((f"{configured} + critical completion", setup.proposer, True))
    pq = protocol.take(cq.rows)
    cand, concepts = setup.asked(cq)

    def setting_rows(label: str, proposer: Proposer, completion: bool) -> list[dict]:
        rows = []
        g = setup.graph(proposer)
        memory = g.memory(inputs.species_ids, setup.kappa, completion)
        (_, values), = setup.evaluate(cq, memory, [setup.strength])
        hit = values["target mRR@1"]
        cov = covered(cq, g.proposed, setup.target, nodes)
        rows += long_rows(pq, {"overall score": hit, "score (covered)": np.where(cov, hit, np.nan),
                               "score (missed)": np.where(cov, np.nan, hit), "covered queries": cov.astype(np.float64),
                               "Proposal Recall@K (query-critical)": critical_recall(cq, g.proposed, setup.target, nodes)},
                          setting=label)
        eq = memories.edge_quality(memory, cand, concepts, inputs.truth)
        rows += fixed_rows({"concepts proposed per image": float(g.proposed.sum(1).mean()),
                            "Proposal Recall@K": proposal_recall(g.proposed, truth_nodes),
                            "HAS precision": eq["has_precision"], "HAS recall": eq["has_recall"],
                            "NOT_HAS precision": eq["not_has_precision"], "NOT_HAS recall": eq["not_has_recall"]},
                           len(g.proposed), setting=label)
        return rows

    # each setting builds and scores its own memory: the machine's other core takes half of them (`fork_calls`)
    return pd.DataFrame([row for rows in fork_calls(*(partial(setting_rows, *s) for s in settings)) for row in rows])
