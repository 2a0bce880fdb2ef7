"""Parse a constrained query into target concepts Q+ and avoidance constraints Q− (Algorithm 1, line 1).

Structured queries name concept ids: `{"has": ["colour:yellow"], "not_has": ["type:electric"]}`.
Text queries are matched against the vocabulary's aliases (longest alias first) and each mention takes the
polarity of its clause: a negation cue ("not", "no", "without", "isn't", "never", "non", "lacking") makes the
following mentions negative until a clause boundary ("and", "but", "with", ",", ";", "that", "which") resets it.
"A yellow Pokémon that is not an electric type" -> Q+ {yellow}, Q− {electric}; "without wings" -> Q− {wings}.
A constraint is a conjunction (every Q+ concept present, every Q− concept absent): a wanted "fire or water" cannot be
expressed, and is reported (`disjoined`) for the caller to refuse. `parse_constraint` reads a constraint a person typed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
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
    disjoined: tuple[tuple[str, str], ...] = ()  # wanted concepts joined by "or" ("fire or water"): read as "and"


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
        elif tok == "or":
            events.append((offset, "or", tok))
        elif tok in BOUNDARIES:
            events.append((offset, "reset", tok))
        elif tok.strip(".'-") not in FILLER and not any(a <= offset < b for a, b in covered):
            unread[tok.strip(".'")] = None
        offset += len(tok)
    events += [(m.start(), "concept", alias_to_id[m.group(1)]) for m in mentions]
    events.sort(key=lambda e: (e[0], e[1] != "concept"))
    pos: dict[str, None] = {}
    neg: dict[str, None] = {}
    negated, last, either = False, None, False
    disjoined: list[tuple[str, str]] = []
    for _, kind, value in events:
        if kind == "neg":
            negated = True
        elif kind == "reset":
            negated, either = False, False
        elif kind == "or":
            either = not negated  # "not yellow or electric" excludes both: only a wanted "or" is a disjunction
        else:
            if either and last is not None and not negated:
                disjoined.append((last, value))
            (neg if negated else pos)[value] = None
            last, either = value, False
    both = set(pos) & set(neg)
    return ParsedQuery(tuple(c for c in pos if c not in both), tuple(neg), tuple(c for c in pos if c in both),
                       tuple(w for w in unread if w), tuple(disjoined))


SHADES = ("dark", "light", "pale", "bright", "deep")  # "dark blue" is a blue, not the dark type
# A type name that is also an everyday word ("a normal-looking yellow one"): a type only when said as one ("normal
# type", "normal-type", "type normal", "normal Pokémon"); said alone it is reported as a word read as no concept.
EVERYDAY_TYPES = ("normal",)
# Words of a typed constraint that are neither concepts nor worth reporting: a plural of "type", and what "can't"
# leaves of "can" once "n't" is read as "not".
CONSTRAINT_FILLER = frozenset({"types", "ca", "can", "must", "should", "could", "be", "being"})
# Words that say "not" in a way `parse_constraint` does not rewrite: left unread, the concept after them would be read
# as wanted, so a constraint holding one is refused instead.
UNREAD_NEGATIONS = frozenset("minus sans unlike barring bar besides excepting omitting omit lacked unless instead "
                             "isnot aint nope nothing none".split())


def parse_constraint(text: str, vocab: list[Concept]) -> ParsedQuery:
    """A constraint a person typed (`polarcatalog evaluate --where`): `parse_text` after the spellings people use that
    chunk texts do not — a typographic apostrophe ("isn’t"), "except"/"excluding"/"other than" as negations,
    "fire-free", and a shade word before a colour — each of which otherwise turned an exclusion into a requirement —
    and "normal" as an everyday word (EVERYDAY_TYPES), which otherwise added the normal type to the constraint."""
    s = normalise_text(text).replace("\u2019", "'").replace("\u2018", "'")
    s = re.sub(r"\b(?:other than|apart from|except for|except|excluding|excludes|exclude|anything but|everything but|"
               r"cannot|can not|avoiding|avoids|avoid|never)\b", " not ", s)
    s = re.sub(r"(?<![\w/])w/o\b|\b(?:free of|lacks|lack)\b", " without ", s)
    s = re.sub(r"\bnot-", "not ", s)  # "not-yellow": the alias inside the hyphenated word would be read as wanted
    # a post-positive exclusion ("fire types excluded", "a pokemon, fire excluded") negates its own clause
    s = re.sub(r"(^|[,;])([^,;]*?)\s+(?:excluded|not allowed|not wanted)\b", r"\1 not \2 ,", s)
    s = re.sub(r"\b([\w]+)-(?:free|less)\b", r"without \1 ,", s)  # its own clause: "fire-free red" wants red
    colours = sorted({normalise_text(a) for c in vocab if c.group == "colour" for a in c.aliases}, key=len, reverse=True)
    if colours:
        s = re.sub(r"\b(?:" + "|".join(SHADES) + r")[ -](?=(?:" + "|".join(map(re.escape, colours)) + r")\b)", "", s)
    s = re.sub(r"(?<!\btype )\b(" + "|".join(EVERYDAY_TYPES) + r")\b(?![ -](?:types?|pokemon)\b)", r"\1_", s)
    q = parse_text(s, vocab)
    cues = [w for w in q.unread if w in UNREAD_NEGATIONS]
    if cues:  # an exclusion this parser cannot place: read as a wanted concept, it would flip the constraint
        raise ValueError(f"--where {text!r}: {', '.join(repr(w) for w in cues)} reads like an exclusion, which this "
                         "parser does not know how to apply; say it with 'not' or 'without' (e.g. 'a yellow Pokémon "
                         "that is not an electric type')")
    return replace(q, unread=tuple(dict.fromkeys(re.sub(r"\b(" + "|".join(EVERYDAY_TYPES) + r")_", r"\1", w)
                                                 for w in q.unread if w not in CONSTRAINT_FILLER)))
