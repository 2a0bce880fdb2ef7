"""The kg stage (notebook 07): the embedded catalog's knowledge graph, the +KG / +KGret experiment of the controlled
graph-RAG evaluation, its integrity checks and per-query audit trail, and the stage's headline numbers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from polarcatalog.data.near_duplicates import near_duplicates, parse_hashes
from polarcatalog.eval.protocol import headline_value, headline_with_ci
from polarcatalog.features.workspace import Workspace
from polarcatalog.kg.completeness import leakage
from polarcatalog.kg.facts import candidate_facts, facts_by_species
from polarcatalog.kg.triples import entity_id


def leakage_flags(ws: Workspace) -> dict[str, np.ndarray]:
    """The integrity checks on the workspace's queries against the catalog's anchor images: the label in the path and
    a byte copy (`kg.completeness.leakage`), and a near-duplicate (a resized, re-encoded or recoloured copy:
    `data.near_duplicates`), the check that a real leak would trip. Both compare what the curate stage recorded of each
    image as it loaded it (its bytes' sha256 and its hash, in the anchor and query tables), so this stage reads no
    image: its dependencies are the tables, not the image folders."""
    names = dict(zip(ws.species["species_id"], ws.species["name"]))
    anchor_sha = {s for s in ws.anchors["sha256"] if isinstance(s, str)}
    flags = leakage(ws.queries["path"].tolist(), [names.get(s, "") for s in ws.queries["species_id"]],
                    ws.queries["sha256"].tolist(), anchor_sha)
    near, _ = near_duplicates(parse_hashes(ws.queries["dhash"].tolist()), parse_hashes(ws.anchors["dhash"].tolist()))
    return flags | {"near-duplicate of a catalog image": near}


def shuffled_label_accuracy(answer: np.ndarray, gold: np.ndarray, seed: int) -> dict[str, float]:
    """The label-shuffle control: accuracy@1 of the answerer against the gold labels permuted across queries. Any
    leak through the evaluation itself (labels aligned by position, a label read from the query) would keep it above
    chance; the real accuracy beside it."""
    top = answer.argmax(1)
    shuffled = np.random.default_rng(seed).permutation(gold)
    ok = gold >= 0
    return {"accuracy": float((top == gold)[ok].mean()), "accuracy, labels shuffled": float((top == shuffled)[ok].mean()),
            "chance": 1.0 / answer.shape[1]}


def audit(ws: Workspace, ids: np.ndarray, candidates: np.ndarray, via: np.ndarray, k: int, triples: pd.DataFrame
          ) -> pd.DataFrame:
    """Per query: the base top-k, the bridged species and which top-k species linked each, and the +KG facts."""
    names = {entity_id("species", int(s)): n for s, n in zip(ws.species["species_id"], ws.species["name"])}
    as_ids = np.where(candidates >= 0, ids[np.maximum(candidates, 0)], -1)
    via_ids = np.where(via >= 0, ids[np.maximum(via, 0)], -1)
    by_species = facts_by_species(triples, names)
    facts = [candidate_facts(by_species, [entity_id("species", int(s)) for s in row[:k] if s >= 0])
             for row in as_ids]  # at most eight per query: the audit trail of +KG
    return pd.DataFrame({"query_id": ws.queries["query_id"], "gold": ws.queries["species_id"],
                         "top_k": [r[:k].tolist() for r in as_ids], "bridged": [r[k:][r[k:] >= 0].tolist() for r in as_ids],
                         "bridged_via": [r[r >= 0].tolist() for r in via_ids], "kg_facts": facts})


def headline(d: dict[str, Any]) -> dict[str, Any]:
    """Completeness at the configured B (all test queries), and +KGret minus the budget-matched control where it
    matters, the evidence-deficit stratum, with its CI."""
    t = d["test"]
    gain = d["kgret_minus_budget_matched_completeness"].get("evidence deficit")
    out = {"kg entities": d["graph"]["entities"],
           **{f"test completeness ({s})": headline_value(t[f"all queries/{s}/completeness"]) for s in ("baseline", "budget-matched", "+KGret")}}
    return out | (headline_with_ci("test +KGret - matched completeness (deficit)", gain) if gain else {})
