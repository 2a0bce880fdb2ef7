"""Parse a constrained query into target concepts Q+ and avoidance constraints Q− (Algorithm 1, line 1).

Structured queries name concept ids: `{"has": ["colour:yellow"], "not_has": ["type:electric"]}`.
Text queries are matched against the vocabulary's aliases (longest alias first) and each mention takes the
polarity of its clause: a negation cue ("not", "no", "without", "isn't", "never", "non", "lacking") makes the
following mentions negative until a clause boundary ("and", "but", "with", ",", ";", "that", "which") resets it.
"A yellow Pokémon that is not an electric type" -> Q+ {yellow}, Q− {electric}; "without wings" -> Q− {wings}.
A constraint is a conjunction (every Q+ concept present, every Q− concept absent): a wanted "fire or water" cannot be
expressed, and is reported (`disjoined`) for the caller to refuse. A constraint a person typed is read by
`typed_constraint.parse_constraint`, on top of `parse_text(coordinated=True)`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
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
    doubled: tuple[str, ...] = ()  # coordinated: negation cues in a row ("not not fire", "isn't without wings")
    dangling: tuple[str, ...] = ()  # coordinated: negation cues that reach no concept ("red, not, fire", "fire no")
    # coordinated: (excluded, next) where "not" after an exclusion may exempt rather than exclude ("exclude fire, not
    # water")
    exempted: tuple[tuple[str, str], ...] = ()


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
    reported as `ambiguous` for the caller to refuse, as is "not A and B" (both excluded, or only the pair?), which
    "without A and B" and "not A or B" say plainly; a clause verb ends a negation that has reached a concept ("not
    fire is blue" wants blue), negation cues in a row are reported as `doubled` and a cue that reaches no concept as
    `dangling`. Off, "and" and "," end a negation (the chunk texts' reading)."""
    alias_to_id = {}
    for c in vocab:
        for a in c.aliases:
            alias_to_id.setdefault(normalise_text(a), c.id)
    group = {c.id: c.group for c in vocab}
    aliases = sorted(alias_to_id, key=len, reverse=True)
    pattern = re.compile(r"\b(" + "|".join(re.escape(a) for a in aliases) + r")\b") if aliases else None
    s = normalise_text(text).replace("n't", " not")
    s = re.sub(r"\bnon-", "non ", s)
    # coordinated: any other symbol is a token too ("/", "=", "<"), so that it is reported as unread, not skipped
    tokens = re.findall(r"[\w\-'.]+|[,;]" + (r"|[^\w\s,;]+" if coordinated else ""), s)
    mentions = list(pattern.finditer(s)) if pattern else []
    covered = [(m.start(), m.end()) for m in mentions]
    # positions (character offsets) of cues, boundaries and mentions, in order
    events: list[tuple[int, str, str]] = []
    unread: dict[str, None] = {}
    offset = 0
    for tok in tokens:
        offset = s.index(tok, offset)
        inside = any(a < offset < b for a, b in covered)  # an alias's first word ("lives in the forest") still counts
        rest = "".join(ch for k, ch in enumerate(tok, offset) if not any(a <= k < b for a, b in covered))
        spans = sum(1 for a, b in covered if offset <= a < offset + len(tok))
        if coordinated and ((rest != tok and re.search(r"[^\W_]", rest)) or spans > 1):
            unread[tok] = None  # a concept glued to another word or concept: "fire-proof", "yellow-not", "blue-green"
        elif tok in NEGATIONS:
            events.append((offset, "neg", tok))
        elif tok == "or":
            events.append((offset, "or", tok))
        elif tok in BOUNDARIES or (coordinated and tok == "\u00a7"):  # § (parse_constraint's END)
            events.append((offset, "reset", tok))
        elif coordinated and tok in CLAUSE_VERBS and not inside:
            events.append((offset, "verb", tok))  # "without fire and has wings": a new clause, not the list going on
        elif tok.strip(".'-") not in FILLER and not inside and not any(a == offset for a, _ in covered):
            unread[tok.strip(".'")] = None
        offset += len(tok)
    events += [(m.start(), "concept", alias_to_id[m.group(1)]) for m in mentions]
    events.sort(key=lambda e: (e[0], {"verb": 0, "concept": 1}.get(e[1], 2)))
    pos: dict[str, None] = {}
    neg: dict[str, None] = {}
    negated, last, either = False, None, False
    disjoined: list[tuple[str, str]] = []
    ambiguous: list[tuple[str, str]] = []
    listed: str | None = None  # coordinated: the negated concept whose list an "and" / "," may continue
    loose = False  # coordinated: that list is "not A and B", which may exclude both or only the pair
    cue, reached = "", 0  # coordinated: the negation in force and how many concepts it has reached
    ended = ""  # coordinated: the cue of a negation a boundary has just ended (after it reached a concept)
    doubled: list[str] = []
    dangling: list[str] = []
    exempted: list[tuple[str, str]] = []
    pending: tuple[str, str] | None = None  # coordinated: (kind, concept) a next concept makes unclear
    previous = ""  # the kind of the event before this one
    for i, (_, kind, value) in enumerate(events):
        if kind == "neg":
            if coordinated and negated and not reached and previous != "or":
                doubled.append(value)  # "not not fire", "does not have no wings"
            if coordinated and value == "not" and previous == "reset" and ended == "without" and last in neg:
                pending = ("exempt", last)  # "exclude fire, not water": water excluded too, or exempted?
            if coordinated and negated and previous == "or":
                pending = ("or", last)  # "not fire or not water" rules out the pair, not each
            negated, listed, cue, reached = True, None, value, 0
        elif kind == "reset":
            joiner = value if value == "and" else _list_joiner(events, i) if value == "," else None
            if coordinated and negated and last is not None and last in neg and joiner and (
                    previous == "concept" or (previous == "reset" and value == "and" and listed and reached > 1)):
                listed = last  # the list may go on ("fire, water, and grass"; not "no water, and blue")
                loose = cue == "not" and joiner == "and"  # "without fire and water" is no pair
            else:
                if coordinated and negated and not reached:
                    dangling.append(cue)  # "red, not, fire"
                if (coordinated and negated and value in ",;" and previous == "concept" and i + 1 < len(events)
                        and events[i + 1][1] == "concept" and group[events[i + 1][2]] == group[last]):
                    ambiguous.append((last, events[i + 1][2]))  # "no fire, water": a list, or a new clause? ("no fire;
                    # water" too: only the clause ends `parse_constraint` writes (END) are certain)
                if negated:  # an exclusion a comma, "but" or a closed list ends ("exclude fire, not water", "fire
                    ended = cue if reached and value in (",", "but", "\u00a7") else ""  # excluded, not water")
                negated, listed = False, None
                either = either and coordinated and previous == "or"  # "fire or, water" is still an "or"
        elif kind == "verb":
            if coordinated and negated and previous == "or":
                pending = ("or", last)  # "not fire or has wings": a disjunction of clauses
            elif coordinated and negated and previous == "concept" and listed is None:
                pending = ("verb", last)  # "not a fire type living in the sea": which is excluded?
            if listed is not None or (negated and reached):  # "not fire and has wings"
                negated, either, listed = False, False, None
        elif kind == "or":
            either = not negated  # "not yellow or electric" excludes both: only a wanted "or" is a disjunction
        else:
            if coordinated and negated and last is not None and last in neg and (previous == "concept" or (
                    listed is not None and (group[value] != group[last] or loose))):
                ambiguous.append((last, value))  # "not electric yellow", "not a red fire type", "not red and blue"
            if pending is not None and pending[1] is not None and (pending[0] != "exempt" or
                                                                    group[pending[1]] == group[value]):
                {"exempt": exempted, "or": disjoined, "verb": ambiguous}[pending[0]].append((pending[1], value))
            if either and last is not None:  # "fire or water"; also "fire or not water", which no conjunction says
                disjoined.append((last, value))
            (neg if negated else pos)[value] = None
            last, either, listed, reached, pending = value, False, None, reached + negated, None
            ended = ended if negated else ""
        previous = kind
    if coordinated and negated and not reached:
        dangling.append(cue)  # "red, fire no"
    both = set(pos) & set(neg)
    return ParsedQuery(tuple(c for c in pos if c not in both), tuple(neg), tuple(c for c in pos if c in both),
                       tuple(w for w in unread if w), tuple(disjoined), tuple(ambiguous), tuple(doubled),
                       tuple(dangling), tuple(exempted))


def _list_joiner(events: list[tuple[int, str, str]], comma: int) -> str | None:
    """The word that ends the list the "," at `comma` is inside ("A, B and C": concepts and commas up to an "and" /
    "or" / "nor" before a concept: "excluding fire, water and grass types", "neither fire, water, nor grass"), or None
    for a comma that ends the clause ("not yellow, electric")."""
    for _, kind, value in events[comma + 1:]:
        if kind == "concept" or (kind == "reset" and value == ","):
            continue
        return value if (kind == "reset" and value == "and") or kind == "or" or (kind == "neg" and value == "nor") \
            else None
    return None
