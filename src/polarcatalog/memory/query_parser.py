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


# Words a constraint in words is made of besides its concepts, cues and boundaries: not worth telling the user about.
FILLER = frozenset("a an the is are be it its it's has have having of in on one any some species pokemon bird birds "
                   "kind sort looks look like very mostly mainly also or".split())


@dataclass(frozen=True)
class ParsedQuery:
    q_pos: tuple[str, ...]
    q_neg: tuple[str, ...]
    contradicted: tuple[str, ...] = ()  # concepts both asked for and excluded ("yellow and not yellow"): kept in Q- only
    unread: tuple[str, ...] = ()  # words that are no concept, cue, boundary or filler ("dinosaur", "fly"): ignored


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
    mentions = list(pattern.finditer(s)) if pattern else []
    covered = [(m.start(), m.end()) for m in mentions]
    # positions (character offsets) of cues, boundaries and mentions, in order
    events: list[tuple[int, str, str]] = []
    unread: dict[str, None] = {}
    offset = 0
    for tok in tokens:
        offset = s.index(tok, offset)
        if tok in NEGATIONS:
            events.append((offset, "neg", tok))
        elif tok in BOUNDARIES:
            events.append((offset, "reset", tok))
        elif tok.strip(".'-") not in FILLER and not any(a <= offset < b for a, b in covered):
            unread[tok.strip(".'")] = None
        offset += len(tok)
    events += [(m.start(), "concept", alias_to_id[m.group(1)]) for m in mentions]
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
    return ParsedQuery(tuple(c for c in pos if c not in both), tuple(neg), tuple(c for c in pos if c in both),
                       tuple(w for w in unread if w))
