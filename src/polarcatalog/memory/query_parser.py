"""Parse a constrained query into target concepts Q+ and avoidance constraints Q− (Algorithm 1, line 1).

Structured queries name concept ids: `{"has": ["colour:yellow"], "not_has": ["type:electric"]}`.
Text queries are matched against the vocabulary's aliases (longest alias first) and each mention takes the
polarity of its clause: a negation cue ("not", "no", "without", "isn't", "never", "non", "lacking") makes the
following mentions negative until a clause boundary ("and", "but", "with", ",", ";", "that", "which") resets it.
"A yellow Pokémon that is not an electric type" -> Q+ {yellow}, Q− {electric}; "without wings" -> Q− {wings}.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from polarcatalog.data.concepts import Concept, normalise_text

NEGATIONS = ("not", "no", "without", "isnt", "never", "non", "lacking", "neither", "nor")
BOUNDARIES = ("and", "but", "with", ",", ";", "that", "which", "while", "yet")


@dataclass(frozen=True)
class ParsedQuery:
    q_pos: tuple[str, ...]
    q_neg: tuple[str, ...]


def parse_structured(query: Mapping[str, Sequence[str]], vocab: list[Concept]) -> ParsedQuery:
    known = {c.id for c in vocab}
    unknown = [c for c in [*query.get("has", []), *query.get("not_has", [])] if c not in known]
    if unknown:
        raise ValueError(f"unknown concept id(s) {unknown}; see the vocabulary (e.g. {sorted(known)[:3]})")
    return ParsedQuery(tuple(dict.fromkeys(query.get("has", []))), tuple(dict.fromkeys(query.get("not_has", []))))


def parse_text(text: str, vocab: list[Concept]) -> ParsedQuery:
    alias_to_id = {}
    for c in vocab:
        for a in c.aliases:
            alias_to_id.setdefault(normalise_text(a), c.id)
    aliases = sorted(alias_to_id, key=len, reverse=True)
    pattern = re.compile(r"\b(" + "|".join(re.escape(a) for a in aliases) + r")\b") if aliases else None
    s = normalise_text(text).replace("n't", " not")
    s = re.sub(r"\bnon-", "non ", s)
    tokens = re.findall(r"[\w\-'.]+|[,;]", s)
    # positions (character offsets) of cues, boundaries and mentions, in order
    events: list[tuple[int, str, str]] = []
    offset = 0
    for tok in tokens:
        offset = s.index(tok, offset)
        if tok in NEGATIONS:
            events.append((offset, "neg", tok))
        elif tok in BOUNDARIES:
            events.append((offset, "reset", tok))
        offset += len(tok)
    if pattern:
        events += [(m.start(), "concept", alias_to_id[m.group(1)]) for m in pattern.finditer(s)]
    events.sort(key=lambda e: (e[0], e[1] != "concept"))
    pos: dict[str, None] = {}
    neg: dict[str, None] = {}
    negated = False
    for _, kind, value in events:
        if kind == "neg":
            negated = True
        elif kind == "reset":
            negated = False
        else:
            (neg if negated else pos)[value] = None
    both = set(pos) & set(neg)
    return ParsedQuery(tuple(c for c in pos if c not in both), tuple(neg))
