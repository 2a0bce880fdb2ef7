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
# Words that open a clause of their own: after "without fire and", "has wings" is a new clause, not a listed exclusion
CLAUSE_VERBS = frozenset("has have having is are was were be being looks look lives live can could should must "
                         "would will does do did".split())


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
    # (negated, next) where a negation's reach is unclear: "not electric and yellow", "not a red fire type"
    ambiguous: tuple[tuple[str, str], ...] = ()


def parse_structured(query: Mapping[str, Sequence[str]], vocab: list[Concept]) -> ParsedQuery:
    known = {c.id for c in vocab}
    unknown = [c for c in [*query.get("has", []), *query.get("not_has", [])] if c not in known]
    if unknown:
        raise ValueError(f"unknown concept id(s) {unknown}; see the vocabulary (e.g. {sorted(known)[:3]})")
    return ParsedQuery(tuple(dict.fromkeys(query.get("has", []))), tuple(dict.fromkeys(query.get("not_has", []))))


def parse_text(text: str, vocab: list[Concept], coordinated: bool = False) -> ParsedQuery:
    """`coordinated` (a constraint a person typed, `parse_constraint`): a negation spans a coordinated list of concepts
    of one facet ("without fire and water", "excluding fire, water and grass types"), and a negated concept followed
    by a concept of another facet with no new clause between ("not electric and yellow", "not a red fire type") is
    reported as `ambiguous` for the caller to refuse. Off, "and" and "," end a negation (the chunk texts' reading)."""
    alias_to_id = {}
    for c in vocab:
        for a in c.aliases:
            alias_to_id.setdefault(normalise_text(a), c.id)
    group = {c.id: c.group for c in vocab}
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
        inside = any(a <= offset < b for a, b in covered)
        if tok in NEGATIONS:
            events.append((offset, "neg", tok))
        elif tok == "or":
            events.append((offset, "or", tok))
        elif tok in BOUNDARIES:
            events.append((offset, "reset", tok))
        elif coordinated and tok in CLAUSE_VERBS and not inside:
            events.append((offset, "verb", tok))  # "without fire and has wings": a new clause, not the list going on
        elif tok.strip(".'-") not in FILLER and not inside:
            unread[tok.strip(".'")] = None
        offset += len(tok)
    events += [(m.start(), "concept", alias_to_id[m.group(1)]) for m in mentions]
    events.sort(key=lambda e: (e[0], e[1] != "concept"))
    pos: dict[str, None] = {}
    neg: dict[str, None] = {}
    negated, last, either = False, None, False
    disjoined: list[tuple[str, str]] = []
    ambiguous: list[tuple[str, str]] = []
    listed: str | None = None  # coordinated: the negated concept whose list an "and" / "," may continue
    previous = ""  # the kind of the event before this one
    for i, (_, kind, value) in enumerate(events):
        if kind == "neg":
            negated, listed = True, None
        elif kind == "reset":
            if coordinated and negated and previous == "concept" and last is not None and last in neg and (
                    value == "and" or (value == "," and _list_ends_in_and(events, i))):
                listed = last  # the list may go on: decided by what comes next
            else:
                negated, either, listed = False, False, None
        elif kind == "verb":
            if listed is not None:
                negated, either, listed = False, False, None
        elif kind == "or":
            either = not negated  # "not yellow or electric" excludes both: only a wanted "or" is a disjunction
        else:
            if coordinated and negated and last is not None and last in neg and (
                    listed is not None or previous == "concept") and group[value] != group[last]:
                ambiguous.append((last, value))
            if either and last is not None:  # "fire or water"; also "fire or not water", which no conjunction says
                disjoined.append((last, value))
            (neg if negated else pos)[value] = None
            last, either, listed = value, False, None
        previous = kind
    both = set(pos) & set(neg)
    return ParsedQuery(tuple(c for c in pos if c not in both), tuple(neg), tuple(c for c in pos if c in both),
                       tuple(w for w in unread if w), tuple(disjoined), tuple(ambiguous))


def _list_ends_in_and(events: list[tuple[int, str, str]], comma: int) -> bool:
    """Whether the "," at `comma` is inside a list "A, B and C": concepts and commas up to an "and" / "or" before a
    concept ("excluding fire, water and grass types"), not a comma that ends the clause ("not yellow, electric")."""
    for _, kind, value in events[comma + 1:]:
        if kind == "concept" or (kind == "reset" and value == ","):
            continue
        return (kind == "reset" and value == "and") or kind == "or"
    return False


SHADES = ("dark", "light", "pale", "bright", "deep")  # "dark blue" is a blue, not the dark type
# A type name that is also an everyday word ("a normal-looking yellow one"): a type only when said as one ("normal
# type", "normal-type", "type normal", "normal Pokémon"); said alone it is reported as a word read as no concept.
EVERYDAY_TYPES = ("normal",)
# Words of a typed constraint that are neither concepts nor worth reporting: a plural of "type", and what "can't"
# and "won't" leave of "can" and "will" once "n't" is read as "not".
CONSTRAINT_FILLER = frozenset({"type", "types", "ca", "wo", "can", "must", "should", "could", "be", "being"})
# Words that say "not" in a way `parse_constraint` does not rewrite: left unread, the concept after them would be read
# as wanted, so a constraint holding one is refused instead.
UNREAD_NEGATIONS = frozenset("minus sans unlike barring bar besides excepting omitting omit lacked unless instead "
                             "isnot aint nope nothing none".split())


def parse_constraint(text: str, vocab: list[Concept]) -> ParsedQuery:
    """A constraint a person typed (`polarcatalog evaluate --where`): `parse_text` (coordinated lists) after the
    spellings people use that chunk texts do not — a typographic apostrophe ("isn’t") or none ("doesnt"), "except" /
    "excluding" / "other than" / "all but" / "rather than" as negations, "fire-free", "non-electric" and a search box's
    "-electric" as one-word exclusions, a post-positive exclusion ("fire and water excluded", "electric: no"), and a
    shade word before a colour — each of which otherwise turned an exclusion into a requirement — and "normal" as an
    everyday word (EVERYDAY_TYPES), which otherwise added the normal type to the constraint. A negation whose reach is
    unclear ("not electric and yellow") is refused, naming both words."""
    s = normalise_text(text).replace("\u2019", "'").replace("\u2018", "'")
    s = re.sub(r"\b(?:" + "|".join(APOSTROPHELESS) + r")\b", " not ", s)
    s = re.sub(r"\b(?:other than|apart from|except for|except|excluding|excludes|exclude|anything but|everything but|"
               r"rather than|instead of|cannot|can not|avoiding|avoids|avoid|never)\b", " not ", s)
    # "all but yellow", "every colour but yellow" (not "all yellow but not electric": a "but" before a negation)
    s = re.sub(r"\b(?:all|every(?:one)?|any(?:one)?)(?:\s+(?!but\b)\w+)?\s+but\b(?!\s+(?:not|no)\b)", " not ", s)
    s = re.sub(r"(?<![\w/])w/o\b|\b(?:free of|lacks|lack)\b", " without ", s)
    s = re.sub(r"\bzero\b", " no ", s)
    # one-word exclusions, each its own clause: "not-yellow", "non-electric yellow" (yellow wanted), "-electric"
    s = re.sub(r"(?:\b(?:not|non)-|(?:(?<=\s)|^)[-!])(\w+)((?:[ -]types?)?)", r" not \1\2 ,", s)
    s = _post_positive(s)
    s = re.sub(r"\b([\w]+)-(?:free|less)\b", r"without \1 ,", s)  # its own clause: "fire-free red" wants red
    colours = sorted({normalise_text(a) for c in vocab if c.group == "colour" for a in c.aliases}, key=len, reverse=True)
    if colours:
        s = re.sub(r"\b(?:" + "|".join(SHADES) + r")[ -](?=(?:" + "|".join(map(re.escape, colours)) + r")\b)", "", s)
    s = re.sub(r"(?<!\btype )\b(" + "|".join(EVERYDAY_TYPES) + r")\b(?![ -](?:types?|pokemon)\b)", r"\1_", s)
    q = parse_text(s, vocab, coordinated=True)
    cues = [w for w in q.unread if w in UNREAD_NEGATIONS]
    if cues:  # an exclusion this parser cannot place: read as a wanted concept, it would flip the constraint
        raise ValueError(f"--where {text!r}: {', '.join(repr(w) for w in cues)} reads like an exclusion, which this "
                         "parser does not know how to apply; say it with 'not' or 'without' (e.g. 'a yellow Pokémon "
                         "that is not an electric type')")
    if q.ambiguous:
        names = {c.id: c.name for c in vocab}
        a, b = (names[c] for c in q.ambiguous[0])
        raise ValueError(f"--where {text!r}: it is unclear whether {b!r} is excluded along with {a!r}; say 'not {a} "
                         f"and not {b}' to exclude both, or give {b!r} a clause of its own ('{b}, not {a}')")
    return replace(q, unread=tuple(dict.fromkeys(re.sub(r"\b(" + "|".join(EVERYDAY_TYPES) + r")_", r"\1", w)
                                                 for w in q.unread if w not in CONSTRAINT_FILLER)))


# "doesnt", "dont", …: a contraction typed without its apostrophe ("isnt" is a negation cue of `parse_text`)
APOSTROPHELESS = ("doesnt", "dont", "didnt", "arent", "wasnt", "werent", "cant", "couldnt", "wont", "wouldnt",
                  "shouldnt", "hasnt", "havent", "hadnt", "mustnt", "neednt")
POST_POSITIVE = re.compile(r"\s*(?:\b(?:excluded|not allowed|not wanted|not included)\b|[:?]\s*no\b)")


def _post_positive(s: str) -> str:
    """'fire types excluded', 'yellow and electric excluded', 'red, blue and green excluded', 'electric: no': every
    item of the list before the word is excluded ("not fire types", "not yellow and not electric"); a list "A, B and
    C" reaches back over its short items, not over a clause ("a yellow one, electric excluded" wants yellow)."""
    while m := POST_POSITIVE.search(s):
        head, tail = s[:m.start()], s[m.end():]
        cut = head.rfind(";") + 1
        segments = head[cut:].split(",")
        items = [segments.pop()]
        if re.search(r"\b(?:and|or)\b", items[0]):
            while segments and 0 < len(segments[-1].split()) <= 2:
                items.insert(0, segments.pop())
        negated = " , ".join(" not " + re.sub(r"\b(and|or)\b", r"\1 not", item) for item in items)
        s = head[:cut] + "".join(seg + "," for seg in segments) + negated + " ," + tail
    return s
