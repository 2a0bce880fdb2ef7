"""+KG, the prompt side (§3.1, R_kg): at most eight facts about the final candidates, kept only when their provenance
is already represented among the candidates (a fact about a species not passed on is not evidence for it), in a
deterministic order, serialised as the reader's context. With no reader model, they go to the audit trail."""

from __future__ import annotations

from itertools import chain, islice
from typing import Callable

import pandas as pd

from polarcatalog.kg.triples import entity_id

MAX_FACTS = 8


def facts_by_species(triples: pd.DataFrame, names: dict[str, str]) -> dict[str, list[str]]:
    """Each head's facts, relations then tails sorted: `Pikachu — has type — electric`. Computed once per stage."""
    label = lambda e: names.get(e, e.partition(":")[2].replace("-", " "))  # noqa: E731
    rows = triples.drop_duplicates(["head", "relation", "tail"]).sort_values(["head", "relation", "tail"], kind="stable")
    out: dict[str, list[str]] = {}
    for h, r, t in rows[["head", "relation", "tail"]].itertuples(index=False):
        out.setdefault(h, []).append(f"{label(h)} — {r.replace('_', ' ')} — {label(t)}")
    return out


def candidate_facts(facts: dict[str, list[str]], candidates: list[str], limit: int = MAX_FACTS) -> list[str]:
    """The facts of the candidates, in the candidates' (retrieval) order, at most `limit`."""
    return list(islice(chain.from_iterable(facts.get(c, []) for c in candidates), limit))


def reader_facts(triples: pd.DataFrame, species: pd.DataFrame) -> Callable[[list[int]], list[str]]:
    """+KG for the reader: species ids (retrieval order) -> at most eight facts about them."""
    names = {entity_id("species", int(s)): n for s, n in zip(species["species_id"], species["name"])}
    by_species = facts_by_species(triples, names)
    return lambda ids: candidate_facts(by_species, [entity_id("species", int(s)) for s in ids])
