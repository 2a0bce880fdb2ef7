"""Triples from the three kinds of source the paper's graph is built from: table rows (a species database), article
sentences (rule-based by default), and an extractor model's JSON (the GPU profile's LLM). An extractor's output is
untrusted text: anything malformed is counted and reported, never fatal.

Text triples follow the paper's matching rule (§3.3): an entity shorter than five characters is not used.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from polarcatalog.kg.triples import Entities, Triple, entity_id

MIN_ENTITY_CHARS = 5


def typing_id(types: Iterable[str]) -> str:
    """The type pair as one entity (`typing:grass-poison`): order-free, so Bulbasaur and a Poison/Grass species match."""
    return entity_id("typing", "-".join(sorted(t.strip().lower() for t in types if t)))


def species_row_triples(row: Mapping[str, Any], entities: Entities, source: str) -> list[Triple]:
    """One species record (`@pkmn/dex` layout: num, name, types, abilities, eggGroups, prevo, gen) → triples. Names in
    `prevo` resolve through `entities` (register every species first); an unresolvable one is skipped."""
    sid = entity_id("species", int(row["num"]))
    out = [Triple(sid, "has_type", entity_id("type", t), source) for t in row.get("types") or []]
    if row.get("types"):
        out.append(Triple(sid, "has_typing", typing_id(row["types"]), source))
    abilities = row.get("abilities") or {}
    for a in (abilities.values() if isinstance(abilities, Mapping) else abilities):
        out.append(Triple(sid, "has_ability", entity_id("ability", a), source))
    out += [Triple(sid, "in_egg_group", entity_id("egg_group", g), source) for g in row.get("eggGroups") or []]
    if row.get("gen"):
        out.append(Triple(sid, "in_generation", entity_id("generation", int(row["gen"])), source))
    prevo = row.get("prevo") and entities.resolve(str(row["prevo"]))
    if prevo:
        out.append(Triple(sid, "evolves_from", prevo, source))
    return out


def family_triples(triples: list[Triple]) -> list[Triple]:
    """`in_family family:<root>` for every species on an evolution line, the root being the species with no
    `evolves_from` (Pichu → Pikachu → Raichu: family:172). A species without relatives gets none: a family of one
    bridges nothing."""
    parent = {t.head: t.tail for t in triples if t.relation == "evolves_from"}
    members: dict[str, list[str]] = {}
    for s in set(parent) | set(parent.values()):
        root, seen = s, {s}
        while root in parent and parent[root] not in seen:
            root = parent[root]
            seen.add(root)
        members.setdefault(root, []).append(s)
    out = []
    for root, group in members.items():
        fam = "family:" + root.partition(":")[2]
        out += [Triple(s, "in_family", fam, "derived:evolves_from") for s in sorted(group)]
    return out


# "Pikachu evolves from Pichu." / "It evolves into Raichu." / "Bulbasaur is a Grass/Poison-type Pokémon."
_EVOLVES = re.compile(r"(?P<head>[A-Z][\w'.♀♂é -]*?|It) evolves (?P<dir>from|into) (?P<tail>[A-Z][\w'.♀♂é-]*(?: [A-Z][\w'.♀♂é-]*)?)")
_TYPED = re.compile(r"(?P<head>[A-Z][\w'.♀♂é -]*?) is an? (?P<types>[A-Z][a-z]+(?:/[A-Z][a-z]+)?)-type")


def _named(name: str, entities: Entities) -> str | None:
    return entities.resolve(name) if len(name.strip()) >= MIN_ENTITY_CHARS else None


def sentence_triples(text: str, subject: str, entities: Entities, source: str) -> list[Triple]:
    """Rule-based triples from an article about `subject` (a canonical species id): evolution links and types. `It`
    and the subject's own name refer to the subject; other names resolve through `entities` and must be at least
    `MIN_ENTITY_CHARS` long (the paper's rule), so a short or unknown name yields nothing rather than a guess."""
    out = []
    for sentence in re.split(r"(?<=[.!?])\s+", text):
        for m in _EVOLVES.finditer(sentence):
            head = subject if m["head"] == "It" else _named(m["head"], entities)
            tail = _named(m["tail"], entities)
            if head and tail and head != tail:
                out.append(Triple(head, "evolves_from", tail, source) if m["dir"] == "from"
                           else Triple(tail, "evolves_from", head, source))
        for m in _TYPED.finditer(sentence):
            if _named(m["head"], entities) == subject:
                head = subject
                types = m["types"].split("/")
                out += [Triple(head, "has_type", entity_id("type", t), source) for t in types]
                out.append(Triple(head, "has_typing", typing_id(types), source))
    return out


@dataclass
class Extraction:
    triples: list[Triple] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # one line per rejected output or item, for the audit


def parse_extractor_json(text: str, source: str, entities: Entities, extraction: Extraction | None = None) -> Extraction:
    """An extractor model's answer → triples. It should hold a JSON array of {"subject", "relation", "object"}
    (or head / tail); prose around the array is tolerated. A reply with no parsable array, an item of the wrong shape,
    a short or unresolvable entity: each is one line in `problems`, and the rest is kept."""
    out = extraction or Extraction()
    start, end = text.find("["), text.rfind("]")
    try:
        items = json.loads(text[start : end + 1]) if 0 <= start < end else None
    except json.JSONDecodeError as err:
        items, why = None, f"invalid JSON ({err.msg} at {err.pos})"
    else:
        why = "no JSON array"
    if not isinstance(items, list):
        out.problems.append(f"{source}: {why}")
        return out
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            out.problems.append(f"{source}[{i}]: not an object")
            continue
        head, rel, tail = item.get("subject", item.get("head")), item.get("relation"), item.get("object", item.get("tail"))
        if not all(isinstance(x, str) and x.strip() for x in (head, rel, tail)):
            out.problems.append(f"{source}[{i}]: needs string subject, relation and object")
            continue
        if min(len(head.strip()), len(tail.strip())) < MIN_ENTITY_CHARS:
            out.problems.append(f"{source}[{i}]: entity shorter than {MIN_ENTITY_CHARS} characters")
            continue
        h, t = entities.resolve(head, "entity"), entities.resolve(tail, "entity")
        out.triples.append(Triple(h, re.sub(r"[^a-z0-9]+", "_", rel.lower()).strip("_"), t, source))
    return out
