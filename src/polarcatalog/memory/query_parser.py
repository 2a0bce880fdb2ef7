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

import difflib
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
    doubled: tuple[str, ...] = ()  # coordinated: negation cues in a row ("not not fire", "isn't without wings")
    dangling: tuple[str, ...] = ()  # coordinated: negation cues that reach no concept ("red, not, fire", "fire no")


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
    tokens = re.findall(r"[\w\-'.]+|[,;]", s)
    mentions = list(pattern.finditer(s)) if pattern else []
    covered = [(m.start(), m.end()) for m in mentions]
    # positions (character offsets) of cues, boundaries and mentions, in order
    events: list[tuple[int, str, str]] = []
    unread: dict[str, None] = {}
    offset = 0
    for tok in tokens:
        offset = s.index(tok, offset)
        inside = any(a < offset < b for a, b in covered)  # an alias's first word ("lives in the forest") still counts
        if tok in NEGATIONS:
            events.append((offset, "neg", tok))
        elif tok == "or":
            events.append((offset, "or", tok))
        elif tok in BOUNDARIES:
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
    doubled: list[str] = []
    dangling: list[str] = []
    previous = ""  # the kind of the event before this one
    for i, (_, kind, value) in enumerate(events):
        if kind == "neg":
            if coordinated and previous == "neg":
                doubled.append(value)
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
                negated, either, listed = False, False, None
        elif kind == "verb":
            if listed is not None or (negated and reached):  # "not fire and has wings", "not fire is blue"
                negated, either, listed = False, False, None
        elif kind == "or":
            either = not negated  # "not yellow or electric" excludes both: only a wanted "or" is a disjunction
        else:
            if coordinated and negated and last is not None and last in neg and (
                    listed is not None or previous == "concept") and (group[value] != group[last] or (
                    listed is not None and loose)):
                ambiguous.append((last, value))
            if either and last is not None:  # "fire or water"; also "fire or not water", which no conjunction says
                disjoined.append((last, value))
            (neg if negated else pos)[value] = None
            last, either, listed, reached = value, False, None, reached + negated
        previous = kind
    if coordinated and negated and not reached:
        dangling.append(cue)  # "red, fire no"
    both = set(pos) & set(neg)
    return ParsedQuery(tuple(c for c in pos if c not in both), tuple(neg), tuple(c for c in pos if c in both),
                       tuple(w for w in unread if w), tuple(disjoined), tuple(ambiguous), tuple(doubled),
                       tuple(dangling))


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


SHADES = ("dark", "light", "pale", "bright", "deep")  # "dark blue" is a blue, not the dark type
# A type name that is also an everyday word ("a normal-looking yellow one"): a type only when said as one ("normal
# type", "normal-type", "type normal", "normal Pokémon"); said alone it is a word the constraint does not read.
EVERYDAY_TYPES = ("normal",)
# Words of a typed constraint that carry no concept and cannot change what is excluded: a plural of "type", what
# "can't" and "won't" leave of "can" and "will" once "n't" is read as "not", and the words a request is framed in.
CONSTRAINT_FILLER = frozenset("type types ca wo can must should could be being i me my we us want looking for find "
                              "show give something anything everything ones pokemons creature creatures colour color "
                              "coloured colored please to at all sized those these ones".split())
# Words that say "not" in a way `parse_constraint` does not rewrite: refused with a message of their own.
UNREAD_NEGATIONS = frozenset("minus sans unlike barring bar besides excepting omitting omit lacked unless instead "
                             "isnot aint nope nothing none".split())
# "doesnt", "dont", …: a contraction typed without its apostrophe
APOSTROPHELESS = ("doesnt", "dont", "didnt", "isnt", "arent", "wasnt", "werent", "cant", "couldnt", "wont", "wouldnt",
                  "shouldnt", "hasnt", "havent", "hadnt", "mustnt", "neednt")
# A list's exclusion said after it: "fire types excluded", "red isn't allowed", "electric: no", "fire = never"
EXCLUDED = (r"(?:excluded|forbidden|banned|prohibited|disallowed|unwanted|"
            r"not (?:allowed|wanted|included|permitted|welcome|ok|okay))")
POST_POSITIVE = re.compile(r"\s*(?:\b(?:(?:is|are|be)\s+)?\b" + EXCLUDED + r"\b"
                           r"|[:?=]\s*(?:no|not)\b(?=\s*(?:[,;.)]|$|and\b|but\b)))")
# Words that open a clause of their own, so a post-positive exclusion does not reach back over them ("yellow but
# electric excluded" wants yellow)
CLAUSE_OPENERS = re.compile(r"[;]|\b(?:but|with|that|which|while|yet|although|though|because|whereas)\b")


def parse_constraint(text: str, vocab: list[Concept]) -> ParsedQuery:
    """A constraint a person typed (`polarcatalog evaluate --where`), read strictly: every word must be a concept, a
    negation cue, a list or clause word or filler, or the constraint is refused naming the word — a word the parser
    cannot read ("forbidden", "only", "necessarily", "wingless" once) may turn an exclusion into a requirement, and a
    wrong constraint costs more than a rephrasing. Before `parse_text` (coordinated lists), the spellings people use
    that chunk texts do not: a typographic apostrophe ("isn’t") or none ("doesnt"), "except" / "excluding" / "other
    than" / "all but" / "rather than" as negations, "fire-free", "wingless", "non-electric", "no-fire" and a search
    box's "-electric" as one-word exclusions, a post-positive exclusion ("fire and water excluded", "red isn't allowed",
    "electric: no"), sentence punctuation and "although" / "because" as clause ends, a shade word before a colour, and
    "normal" said alone (an everyday word, EVERYDAY_TYPES). Refused as well: a negation whose reach is unclear ("not
    electric and yellow", "red and wings excluded"), and a negated negation ("not not fire", "fire not excluded")."""
    s = normalise_text(text).replace("\u2019", "'").replace("\u2018", "'").replace("n't", " not")
    s = re.sub(r"\b(that|it|what|which|who)'s\b", r"\1 is", s).replace("i'd", "i would")
    s = re.sub(r"\b(?:live|living) in the\b", "lives in the", s)  # the habitat aliases' one spelling
    s = re.sub(r"\b(?:" + "|".join(APOSTROPHELESS) + r")\b", " not ", s)
    # set exclusions read as "without" (a list after one is excluded item by item); a verb's negation as "not"
    s = re.sub(r"\b(?:other than|apart from|except for|except|excluding|excludes|exclude|anything but|everything but|"
               r"rather than|instead of|avoiding|avoids|avoid)\b", " without ", s)
    s = re.sub(r"\b(?:cannot|can not|never)\b", " not ", s)
    # "all but yellow", "every colour but yellow" (not "all yellow but not electric": a "but" before a negation)
    s = re.sub(r"\b(?:all|every(?:one)?|any(?:one)?)(?:\s+(?!but\b)\w+)?\s+but\b(?!\s+(?:not|no)\b)", " without ", s)
    s = re.sub(r"(?<![\w/])w/o\b|\b(?:free of|lacks|lack)\b", " without ", s)
    s = re.sub(r"\bzero\b", " no ", s)
    s = re.sub(r"\b" + EXCLUDED + r"\s*[:=]", " not ", s)  # "excluded: fire, red" names the list after it
    # one-word exclusions, each its own clause: "not-yellow", "non-electric yellow" (yellow wanted), "-electric"
    s = re.sub(r"(?:\b(?:not|non|no)-|(?:(?<=\s)|^)[-!~])(\w+)((?:[ -]types?)?)", r" not \1\2 ,", s)
    s = re.sub(r"&&?", " and ", s)
    words = {normalise_text(a) for c in vocab for a in c.aliases if " " not in a}
    s = re.sub(r"\b(\w+?)(?:-free|-less|less)\b",  # "fire-free red" and "wingless" want red and exclude wings
               lambda m: f"without {m.group(1)} ," if m.group(1) in words or m.group(1) + "s" in words or "-" in
               m.group(0) else m.group(0), s)
    s = re.sub(r"\bnon(\w+)\b", lambda m: f" not {m.group(1)} ," if m.group(1) in words else m.group(0), s)
    s = re.sub(r"\bwithout (\w+) ,", lambda m: f"without {m.group(1)}s ," if m.group(1) + "s" in words and
               m.group(1) not in words else m.group(0), s)
    s = _post_positive(s, text)
    s = re.sub(r"\b(not|no|without)\s*:", r"\1 ", s)  # "red, not: fire"
    s = re.sub(r"[(\[]", " ", re.sub(r"[)\]]", " , ", s))  # "not (red or fire), blue"; "a blue (not water) one"
    s = re.sub(r"[.!?:]|\b(?:although|though|because|whereas)\b", " ; ", s)
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
    if q.dangling:
        raise ValueError(f"--where {text!r}: {q.dangling[0]!r} negates no concept; put it before what is excluded "
                         "(e.g. 'red, not fire')")
    if q.doubled:
        raise ValueError(f"--where {text!r} negates a negation; say once what is excluded (e.g. 'not fire') and what "
                         "is wanted (e.g. 'fire')")
    if q.ambiguous:
        names = {c.id: c.name for c in vocab}
        a, b = (names[c] for c in q.ambiguous[0])
        raise ValueError(f"--where {text!r}: it is unclear whether {b!r} is excluded along with {a!r}; say 'not {a} "
                         f"and not {b}' to exclude both, or give {b!r} a clause of its own ('{b}, not {a}')")
    unread = [re.sub(r"\b(" + "|".join(EVERYDAY_TYPES) + r")_", r"\1", w) for w in q.unread
              if w not in CONSTRAINT_FILLER]
    if unread:
        raise ValueError(_unread_message(text, unread, vocab))
    return replace(q, unread=())


def _unread_message(text: str, unread: list[str], vocab: list[Concept]) -> str:
    """Why a word outside the parser's reach refuses the constraint, and what the user may have meant."""
    names = sorted({normalise_text(a) for c in vocab for a in c.aliases})
    hints = []
    for w in unread:
        close = [n for n in names if n.startswith(w) and len(w) >= 3] or difflib.get_close_matches(w, names, 2, 0.7)
        if w.split("-")[0] in EVERYDAY_TYPES:  # "normal", "normal-looking"
            close = [f"{w.split('-')[0]} type"]
        if close:
            hints.append(f"{w!r} → {' or '.join(repr(c) for c in dict.fromkeys(close[:2]))}?")
    groups = ", ".join(dict.fromkeys(c.group for c in vocab))
    verb = "is no concept, negation or list word" if len(unread) == 1 else "are no concepts, negations or list words"
    return (f"--where {text!r}: {', '.join(repr(w) for w in unread)} {verb} this parser reads, and an unread word "
            "can reverse what a sentence excludes ('forbidden', 'only', 'necessarily'), so nothing is guessed; drop it "
            f"or name a concept ({groups})" + (f" — {'; '.join(hints)}" if hints else ""))


def _post_positive(s: str, text: str) -> str:
    """'fire types excluded', 'red, blue and green excluded', 'electric: no': the list before the word is excluded,
    rewritten as a negated list ("without red, blue and green") for `parse_text`'s list rule, so a list of two kinds
    ("red and wings excluded") is refused like its pre-positive form; the list reaches back over its short items, not
    over a clause ("a yellow one, electric excluded" and "yellow but electric excluded" want yellow). A negated
    exclusion ("fire not excluded") is refused."""
    while m := POST_POSITIVE.search(s):
        head, tail = s[:m.start()], s[m.end():]
        if re.search(r"\b(?:not|no|without)\s*$", head):
            raise ValueError(f"--where {text!r} negates an exclusion; say once what is excluded (e.g. 'fire "
                             "excluded') and what is wanted (e.g. 'fire')")
        cut = max((o.end() for o in CLAUSE_OPENERS.finditer(head)), default=0)
        segments = head[cut:].split(",")
        items = [segments.pop()]
        if re.search(r"\b(?:and|or)\b", items[0]):
            while segments and 0 < len(segments[-1].split()) <= 2:
                items.insert(0, segments.pop())
        s = head[:cut] + "".join(seg + "," for seg in segments) + " without " + ",".join(items) + " ;" + tail
    return s
