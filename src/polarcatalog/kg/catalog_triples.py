"""The embedded catalog's knowledge-graph triples: the fetched species table (`@pkmn/dex`), the evolution families,
the curated articles (rule-based sentences or an extractor model) and, when given, PokeAPI's species facts."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from polarcatalog.data.pokemon import load_pokeapi
from polarcatalog.kg.extract import family_triples, sentence_triples, species_row_triples
from polarcatalog.kg.llm_extract import LLMExtractor
from polarcatalog.kg.triples import Entities, Triple, entity_id, table


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
