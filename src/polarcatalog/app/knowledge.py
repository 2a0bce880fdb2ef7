"""The kg stage's orchestration: the embedded catalog's triples (fetched species table + article sentences), the
species-level scores the bridging experiment needs, and the per-query audit trail (bridged species, their links,
the +KG facts)."""

from __future__ import annotations

import json
from typing import Callable
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import sparse

from polarcatalog.config import Params
from polarcatalog.features.workspace import Workspace
from polarcatalog.app.workflows import QuerySide, catalog_for, query_side, retriever
from polarcatalog.kg.extract import family_triples, sentence_triples, species_row_triples
from polarcatalog.io import sha256_file
from polarcatalog.kg.evaluate import leakage
from polarcatalog.kg.facts import candidate_facts, facts_by_species
from polarcatalog.kg.graph import KnowledgeGraph, LinkRule
from polarcatalog.kg.llm_extract import LLMExtractor
from polarcatalog.data.pokemon import load_pokeapi
from polarcatalog.kg.triples import Entities, Triple, entity_id, table
from polarcatalog.retrieval.vrrag import VRRAG, Candidates, query_encoders


def catalog_entities(species: pd.DataFrame) -> Entities:
    ents = Entities()
    for sid, name in zip(species["species_id"], species["name"]):
        ents.add(entity_id("species", int(sid)), name, str(int(sid)))
    return ents


def pokemon_triples(dex_json: Path, species: pd.DataFrame, package: str, pokeapi_dir: str | Path | None = None,
                    extractor: LLMExtractor | None = None) -> tuple[pd.DataFrame, list[str]]:
    """(triples, extraction problems) for the catalog's species only: their rows of the fetched table (source
    `<package>#<num>`), their evolution families, their curated articles (source `article:<id>`: rule-based sentences,
    or an extractor model's JSON) and, with `curate.pokeapi_dir`, PokeAPI's evolves-from, genus, shape and habitat
    (source `pokeapi#<id>`)."""
    ents = catalog_entities(species)
    ids = set(int(s) for s in species["species_id"])
    rows = [r for r in json.loads(dex_json.read_text()) if int(r["num"]) in ids]
    triples = [t for r in rows for t in species_row_triples(r, ents, f"{package}#{r['num']}")]
    sources = [f"article:{int(sid)}" for sid in species["species_id"]]
    problems: list[str] = []
    if extractor is None:
        for sid, text, src in zip(species["species_id"], species["article"], sources):
            triples += sentence_triples(text, entity_id("species", int(sid)), ents, src)
    else:
        found = extractor.extract(species["name"].tolist(), species["article"].tolist(), sources, ents)
        triples += found.triples
        problems = found.problems
    if pokeapi_dir:
        triples += pokeapi_triples(Path(pokeapi_dir), ids)
    return table(triples + family_triples(triples)), problems


def pokeapi_triples(folder: Path, ids: set[int]) -> list[Triple]:
    """PokeAPI's species facts as triples: `evolves_from` (its evolves_from_species_id), `has_genus` ("Mouse
    Pokémon"), `has_shape`, `lives_in` (habitat). A link to a species outside the catalog is dropped."""
    facts = load_pokeapi(folder).set_index("species_id")
    parents = pd.read_csv(folder / "pokemon_species.csv", usecols=["id", "evolves_from_species_id"]).set_index("id")
    out = []
    for sid in sorted(ids & set(int(i) for i in facts.index)):
        head, src = entity_id("species", sid), f"pokeapi#{sid}"
        parent = parents["evolves_from_species_id"].get(sid)
        if parent == parent and parent is not None and int(parent) in ids:  # NaN: no pre-evolution
            out.append(Triple(head, "evolves_from", entity_id("species", int(parent)), src))
        for relation, kind, value in (("has_genus", "genus", facts.at[sid, "genus"]), ("has_shape", "shape", facts.at[sid, "shape"]),
                                      ("lives_in", "habitat", facts.at[sid, "habitat"])):
            if isinstance(value, str) and value.strip():
                out.append(Triple(head, relation, entity_id(kind, value), src))
    return out


def link_rules(specs: list[str]) -> list[LinkRule]:
    return [LinkRule(tuple(spec.split("+"))) for spec in specs]


def score_matrices(cands: Candidates, n_species: int, lam: float, rerank: bool) -> tuple[np.ndarray, np.ndarray]:
    """(base [Q, S], answer [Q, S]) from candidates searched to full depth: every species' first-stage score s_m (the
    base retriever) and fused re-rank score (VR-RAG Eq. 2, the answerer); -inf for a species not scored."""
    rows = np.broadcast_to(np.arange(cands.species_idx.shape[0])[:, None], cands.species_idx.shape)
    ok = cands.species_idx >= 0
    base = np.full((cands.species_idx.shape[0], n_species), -np.inf)
    answer = np.full_like(base, -np.inf)
    base[rows[ok], cands.species_idx[ok]] = cands.s_m[ok]
    fused = lam * cands.s_m + (1 - lam) * cands.s_i if rerank else cands.s_m
    answer[rows[ok], cands.species_idx[ok]] = fused[ok]
    return base, answer


def full_depth_candidates(vr: VRRAG, side: QuerySide) -> Candidates:
    """Candidates searched over every chunk, so that a bridged species always has its scores."""
    vr.r = len(vr.m)
    return side.candidates(vr)


def species_scores(ws: Workspace, params: Params) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(base [Q, S], answer [Q, S], catalog species ids [S]) for the workspace's queries."""
    rp = params.retrieval
    catalog = catalog_for(ws, rp)
    vr = retriever(catalog, rp)
    cands = full_depth_candidates(vr, query_side({n: ws.query_f[n] for n in query_encoders(rp.ensemble, rp.reranker)},
                                                 catalog, rp, ws))
    base, answer = score_matrices(cands, len(catalog.species_ids), rp.lam, rp.reranker is not None)
    return base, answer, np.asarray(catalog.species_ids)


def leakage_flags(ws: Workspace) -> dict[str, np.ndarray]:
    """The integrity checks of `kg.evaluate.leakage` on the workspace's queries against the catalog's anchor images."""
    names = dict(zip(ws.species["species_id"], ws.species["name"]))
    catalog = {sha256_file(p) for p in ws.anchors["path"]}
    return leakage(ws.queries["path"].tolist(), [names.get(s, "") for s in ws.queries["species_id"]],
                   ws.queries["sha256"].tolist(), catalog)


def species_links(triples: pd.DataFrame, ids: np.ndarray, rules: list[str]) -> sparse.csr_matrix:
    """[S, S] links between the catalog's species (in catalog order) under the configured rules."""
    return KnowledgeGraph(triples).links([entity_id("species", int(s)) for s in ids], link_rules(rules))


def reader_facts(triples: pd.DataFrame, species: pd.DataFrame) -> Callable[[list[int]], list[str]]:
    """+KG for the reader: species ids (retrieval order) -> at most eight facts about them (`kg.facts`)."""
    names = {entity_id("species", int(s)): n for s, n in zip(species["species_id"], species["name"])}
    by_species = facts_by_species(triples, names)
    return lambda ids: candidate_facts(by_species, [entity_id("species", int(s)) for s in ids])


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
