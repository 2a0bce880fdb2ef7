"""The graph stage (notebook 03): PolarMem's memory built from the verifier's scores, the edge quality of the memory
the constraint axis evaluates, and the stage's headline numbers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from polarcatalog.config import Params
from polarcatalog.from_params import catalog_lookalikes, constrained_sets
from polarcatalog.memory.inputs import GraphInputs
from polarcatalog.memory.memories import edge_quality, pad_concepts
from polarcatalog.memory.polar_graph import PolarGraph


def evaluated_edge_quality(inputs: GraphInputs, graph: PolarGraph, params: Params) -> pd.DataFrame:
    """Edge quality of the memory the constraint axis evaluates, with and without critical completion, on the pairs it
    reads: each primary constrained query's target and look-alike neighbourhood (graph.filter_pool species) × its
    constraint concepts. Needs no ranking, so the graph stage reports it."""
    gp = params.graph
    target = inputs.species_index(inputs.query_species)
    neighbours = catalog_lookalikes(inputs)
    cq, _ = constrained_sets(inputs, target, None, gp.seed, neighbours)
    t = target[cq.rows]
    cand = np.hstack([t[:, None], neighbours[t][:, : max(gp.filter_pool - 1, 0)]])
    concepts = pad_concepts([p + n for p, n in zip(cq.q_pos, cq.q_neg)])
    return pd.DataFrame({name: edge_quality(graph.memory(inputs.species_ids, gp.kappa, completion), cand, concepts, inputs.truth)
                         for name, completion in (("as proposed", False), ("with critical completion", True))}).T


def headline(d: dict[str, Any]) -> dict[str, Any]:
    """Edge quality over every edge of the graph as proposed (the memory as built, not the pairs completion verifies
    for a query, where it looks best), then on the pairs the constraint axis reads with completion, and Proposal
    Recall@K."""
    every, read = d["edges"], d["evaluated_edges"]["with critical completion"]
    keys = ("has_precision", "has_recall", "not_has_precision", "not_has_recall")
    return {**{k.replace("_", " "): round(float(every[k]), 4) for k in keys},
            **{f"{k.replace('_', ' ')} (read, completed)": round(float(read[k]), 4) for k in keys[2:]},
            "proposal recall": round(float(d["proposal_recall"]), 4)}
