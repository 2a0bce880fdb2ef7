"""A taxonomy as triples: species → genus → family → order, from the AviList 2025 checklist that the PyPI package
`birdnames` ships (11,131 species). The bird catalog's look-alikes are congeners and confamilials, so the link rules
for birds are `genus` and `family`; a species' family is two hops up, which `KnowledgeGraph.attributes` follows.

The rows are `data.birds.read_avilist()`. Species ids are the scientific name (`species:passer-domesticus`); the common name is an alias."""

from __future__ import annotations

import pandas as pd

from polarcatalog.kg.triples import Entities, Triple, entity_id


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
