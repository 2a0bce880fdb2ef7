"""A constraint a person typed (`polarcatalog evaluate --where`), read strictly (PolarMem, Algorithm 1, line 1).

Two forms: concept ids, "+colour:yellow -type:electric" (has / lacks), read exactly; or words, "a yellow Pokémon that
is not an electric type", read by the rules below.

Chunk texts are written by a template and read by `query_parser.parse_text`; people type anything. This module turns
the spellings people use into the words `parse_text(coordinated=True)` reads, and refuses, naming the word and a
phrasing that parses back, whatever it cannot read whole: a wrong constraint silently reorders every ranking, a
refusal costs one rephrasing.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from dataclasses import replace
from typing import Callable

from polarcatalog.data.concepts import Concept, normalise_text
from polarcatalog.memory.query_parser import ParsedQuery, parse_structured, parse_text


SHADES = ("dark", "light", "pale", "bright", "deep")  # "dark blue" is a blue, not the dark type
# A type name that is also an everyday word ("a normal-looking yellow one"): a type only when said as one ("normal
# type", "normal-type", "type normal", "normal Pokémon"); said alone it is a word the constraint does not read.
EVERYDAY_TYPES = ("normal",)
# Words of a typed constraint that carry no concept and cannot change what is excluded: a plural of "type", what
# "can't" and "won't" leave of "can" and "will" once "n't" is read as "not", and the words a request is framed in.
CONSTRAINT_FILLER = frozenset("type types must should shall will would be being i me my we us you am want looking for "
                              "find show give list search get display return something anything everything ones "
                              "pokemons creature creatures colour color coloured colored colours colors shapes sizes "
                              "please to at all every sized size those these what who whose there got definitely "
                              "then".split())
# Words that say "not" in a way `parse_constraint` does not rewrite: refused with a message of their own.
UNREAD_NEGATIONS = frozenset("minus sans unlike barring bar besides excepting omitting omit lacked unless instead "
                             "isnot aint nope nothing none free less missing devoid exception save aside outside skip "
                             "drop remove ignore reject ban false 0 un anti".split())
# "doesnt", "dont", …: a contraction typed without its apostrophe
APOSTROPHELESS = ("doesnt", "dont", "didnt", "isnt", "arent", "wasnt", "werent", "cant", "couldnt", "wont", "wouldnt",
                  "shouldnt", "hasnt", "havent", "hadnt", "mustnt", "neednt")
# A list's exclusion said after it: "fire types excluded", "red isn't allowed", "electric: no", "fire = never"
EXCLUDED = (r"(?:excluded|forbidden|banned|prohibited|disallowed|unwanted|"
            r"not (?:allowed|wanted|included|permitted|welcome|ok|okay))")
POST_POSITIVE = re.compile(r"\s*(?:\b(?:(?:is|are|be)\s+)?\b" + EXCLUDED + r"\b"
                           r"|[:?=]\s*(?:no|not)\b(?=\s*(?:[,;.)]|$|and\b|but\b)))")
# The same words, and a plain negation, before a colon: "excluded: fire, water", "no: fire", "banned types: fire"
FACETS = r"(?:types?|colou?rs?|shapes?|sizes?|habitats?)"
PREFIXED = re.compile(r"\b(?:" + EXCLUDED + r"|without|not|no)(?:\s+" + FACETS + r")?\s*[:=]\s*([^;.!?]*)")
# Words that open a clause of their own, so a post-positive exclusion does not reach back over them ("yellow but
# electric excluded" wants yellow, "yellow. electric excluded" too)
CLAUSE_OPENERS = re.compile(r"[;.!?:(\[\u00a7]|\s-+\s"
                            r"|\b(?:but|with|that|which|while|yet|although|though|because|whereas)\b")
END = "\u00a7"  # a clause end the rewrites put in (a full stop, a closed list): unlike a typed ";", no list goes on
MAX_CHARS = 300
DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe63\uff0d"  # hyphens, en and em dashes, minus signs


def parse_constraint(text: str, vocab: list[Concept]) -> ParsedQuery:
    """A constraint a person typed (`polarcatalog evaluate --where`), read strictly: every word must be a concept, a
    negation cue, a list or clause word or filler, or the constraint is refused naming the word — a word the parser
    cannot read ("forbidden", "only", "necessarily", "wingless" once) may turn an exclusion into a requirement, and a
    wrong constraint costs more than a rephrasing. Before `parse_text` (coordinated lists), the spellings people use
    that chunk texts do not: a typographic apostrophe ("isn’t") or none ("doesnt"), "except" / "excluding" / "other
    than" / "all but" / "rather than" as negations, "fire-free", "wingless", "non-electric", "no-fire" and a search
    box's "-electric" / "!electric" / "type != fire" as one-word exclusions, an exclusion said after its list ("fire and
    water excluded", "red isn't allowed", "electric: no") or before a colon ("excluded: fire, water"), sentence
    punctuation and "although" / "because" as clause ends, a shade word before a colour, and "normal" said alone (an
    everyday word, EVERYDAY_TYPES). Refused as well (`parse_text`'s reports): a negation whose reach is unclear ("not
    electric and yellow", "no fire, water", "red and wings excluded"), a negated negation ("not not fire", "fire not
    excluded"), a negation of nothing ("red, fire no"), and "not" after an exclusion ("exclude fire, not water")."""
    if ids := _by_id(text, vocab):
        return ids
    kind = {normalise_text(a): c.group for c in vocab for a in c.aliases}  # every alias and its concept's kind
    words = {a for a in kind if " " not in a}
    aliases = sorted(kind, key=len, reverse=True)
    concept = r"(?:(?:a|an|the)\s+)?(?:" + "|".join(map(re.escape, aliases)) + r")\b"
    s = text
    for quote in "\u2019\u2018`\u00b4":
        s = s.replace(quote, "'")
    s = normalise_text(unicodedata.normalize("NFKC", s))  # full-width "！", "，" as their ASCII forms
    if len(s) > MAX_CHARS:  # a constraint is a sentence; the rewrites below are not built for pages
        raise ValueError(f"--where is {len(s)} characters long; a constraint is one sentence of at most {MAX_CHARS}")
    if re.search(r"[!~]{2,}", s):
        raise ValueError(f"--where {text!r} negates a negation ('!!'); say once what is excluded (e.g. '!electric')")
    if re.search(r"(?:^|\s)!\s", s):
        raise ValueError(f"--where {text!r}: a lone '!' may be an exclamation or a 'not'; write '!electric' or 'not "
                         "electric' to exclude, or leave it out")
    if re.search(r"\b(?:not|no)\s+(?:all|every)\b", s):
        raise ValueError(f"--where {text!r}: 'not all' (some, but not every) is no constraint on one species; say "
                         "what is excluded with 'not' (e.g. 'not fire')")
    if re.search(r"\b(?:excluded|exclude|excluding|without|no|not|never)\b[^.;]*,\s*(?:except|apart from|other "
                 r"than)\b", s):  # "fire types excluded, except water": water excluded too, or exempted?
        raise ValueError(f"--where {text!r}: it is unclear whether what follows 'except' is excluded as well or "
                         "exempted from the exclusion; name each excluded concept after 'not', and leave out the others")
    s = re.sub(r"\bwon't\b", "will not", re.sub(r"\bcan't\b", "can not", re.sub(r"\bshan't\b", "shall not", s)))
    s = s.replace("n't", " not").replace("\u00ac", " not ")  # NFKC made "！" a "!"; "∧" is read below with "&&"
    s = re.sub(r"(?<!\w)'|'(?!\w)|\"|[\u201c\u201d]", " ", s)  # quotes around a word: "not 'fire'"
    s = re.sub(r"\b(that|it|what|which|who)'s\b", r"\1 is", s).replace("i'd", "i would").replace("i'm", "i am")
    # dashes: before a word, a one-word exclusion ("–electric"), unless the word is a negation ("—not water"); between
    # spaces, an en or em dash ends a clause and a hyphen or minus is left to be refused ("yellow - electric": minus?)
    s = re.sub(r"\s*[\u2013\u2014\u2015]\s*(?=(?:not|no|without)\b)", f" {END} ", s)
    s = re.sub(r"\s[\u2014\u2015]\s", f" {END} ", s)  # an en dash between spaces is autocorrect's " - ": refused
    s = re.sub("[" + DASHES + "]", "-", s)
    s = re.sub(r"!=|\u2260|<>", " not ", s)  # "type != fire"
    s = re.sub(r"[!~](\w+)", rf" not \1 {END}", s)  # "!electric", "yellow&&!electric": one word, its own clause
    s = re.sub(r"[!~](?=\()", " not ", s)  # "~(electric)"
    s = re.sub(r"/(?=\s*(?:no|not|without)\b)", f" {END} ", s)  # "yellow/not electric"
    s = re.sub(r"&&?|\u2227", " and ", s)
    s = re.sub(r"\|\|?|\u2228", " or ", s)
    s = re.sub(r"(?<!\S)\+(?=\w)", "", s)  # a search box's "+blue"
    # the habitat aliases' one spelling ("lives in the sea"), and a hyphenated alias said with a space ("fish shaped")
    habitats = {m.group(1) for a in aliases if (m := re.fullmatch(r"lives in the (.+)", a))}
    s = re.sub(r"\b(?:lives?|living) in (?:the |an? )?([\w ]+?)s?\b",
               lambda m: f"lives in the {m.group(1)}" if m.group(1) in habitats else m.group(0), s)
    for a in aliases:
        if "-" in a:
            s = re.sub(r"\b" + re.escape(a.replace("-", " ")) + r"\b", a, s)
    s = re.sub(r"\b(?:" + "|".join(APOSTROPHELESS) + r")\b", " not ", s)
    s = re.sub(r"\bnever\b", " not ", s)
    s = re.sub(r"\b(?:can|could|may|might|must|should|will|would|shall)\s+not\b", " not ", s)  # "may not be electric"
    s = re.sub(r"\bno\b((?:\s+(?!(?:but|yet|with)\b)[\w-]+){1,4})\s+allowed\b", r"no\1", s)  # "no fire allowed"
    s = re.sub(r"\bdefinitely\s+not\b", " not ", s)
    _refuse_permissions_and_sets(s, text, habitats, concept, vocab)
    s = re.sub(r"\b(\w+)-types\b", r"\1 types", s)  # "electric-types"
    s = re.sub(r"\b(\w+)-(sized|size|coloured|colored)\b", lambda m: m.group(1) if kind.get(m.group(1)) == (
        "size" if m.group(2).startswith("size") else "colour") else m.group(0), s)  # "small-sized", "yellow-coloured"
    s = re.sub(r"(?:^|(?<=[,;]))\s*(?:rather than|instead of)\b([^,;]*),", _instead_of, s)  # "instead of fire, water"
    # set exclusions read as "without" (a list after one is excluded item by item); a verb's negation as "not"
    s = re.sub(r"\b(?:other than|apart from|except for|except|excluding|excludes|exclude|anything but|everything but|"
               r"rather than|instead of|avoiding|avoids|avoid)\b", " without ", s)
    s = re.sub(r"\b(?:cannot|can not)\b", " not ", s)  # "never" became "not" above
    s = re.sub(r"(?<!\bat )\b(?:all|any|every|everything|anything|everyone|anyone)\b((?:\s+[\w-]+){0,3}?)\s+but\s+(?="
               + concept + ")", _all_but, s)  # "all but yellow", "every colour but yellow", "all yellow ones but …"
    s = re.sub(r"(?<![\w/])w/o\b|\b(?:free of|lacks|lack)\b", " without ", s)
    s = re.sub(r"\bzero\b", " no ", s)
    s = PREFIXED.sub(_prefixed_list, s)  # "excluded: fire, water": each item
    s = re.sub(r"\b" + FACETS + r"\s*:(?=\s*(?:[^\s:]|$))(?!\s*(?:no|not)\b)", " ", s)  # "colour: yellow"
    # one-word exclusions, each its own clause: "not-yellow", "non-electric yellow" (yellow wanted), "-electric"
    s = re.sub(r"(?:\b(?:not|non|no)-|(?:(?<=[\s,;(:])|^)[-!~])(\w+)((?:[ -]types?)?)", rf" not \1\2 {END}", s)
    s = re.sub(r"\bnon (\w+)", lambda m: f" not {m.group(1)} {END}" if m.group(1) in words else m.group(0), s)
    s = re.sub(r"\b(\w+?)(?:-free|-less|less| free)\b",  # "fire-free red" and "wingless" want red and exclude wings
               lambda m: f"without {m.group(1)} {END}" if m.group(1) in words or m.group(1) + "s" in words or (
                   "-" in m.group(0)) else m.group(0), s)
    s = re.sub(r"\bnon(\w+)\b", lambda m: f" not {m.group(1)} {END}" if m.group(1) in words else m.group(0), s)
    s = re.sub(r"\bwithout (\w+) " + END, lambda m: f"without {m.group(1)}s {END}" if m.group(1) + "s" in words and
               m.group(1) not in words else m.group(0), s)
    mention = re.compile(r"\b(" + "|".join(map(re.escape, aliases)) + r")\b")
    s = _post_positive(s, text, lambda piece: {kind[m.group(1)] for m in mention.finditer(piece)})
    # a bracket is a clause of its own ("a blue (not water) one"), except after a negation ("not (red or fire), blue")
    s = re.sub(r"(\w+\s*)?[(\[]", lambda m: f"{m.group(1) or ''} " + (
        "" if (m.group(1) or "").strip() in ("not", "no", "without", "or", "and", "nor", "") else ", "),
               re.sub(r"[)\]]", " , ", s))
    s = re.sub(r"[.!?:]|\b(?:although|though|because|whereas)\b", f" {END} ", s)
    s = s.replace("=", " ")  # "colour = yellow"
    colours = [a for a in aliases if kind[a] == "colour"]  # longest first, as `aliases`
    if colours:
        s = re.sub(r"\b(?:" + "|".join(SHADES) + r")[ -](?=(?:" + "|".join(map(re.escape, colours)) + r")\b)", "", s)
    s = re.sub(r"(?<!\btype )\b(" + "|".join(EVERYDAY_TYPES) + r")\b(?![ -](?:types?|pokemon)\b)", r"\1_", s)
    if any(re.search(r"\bnor\b", c) and not re.search(r"\b(?:neither|not|no|without)\b.*\bnor\b", c)
           for c in re.split(r"[;" + END + r"]|\bbut\b|\band\b", s)):
        raise ValueError(f"--where {text!r}: 'nor' has no 'neither' or 'not' before it; say 'neither fire nor water' "
                         "to exclude both")
    q = parse_text(s, vocab, coordinated=True)
    cues = [w for w in q.unread if w in UNREAD_NEGATIONS or re.fullmatch(r"(?:not|no|non|un|anti)-?\w+", w) and (
        re.sub(r"^(?:not|no|non|un|anti)-?", "", w) in words)]
    if cues:  # an exclusion this parser cannot place: read as a wanted concept, it would flip the constraint
        raise ValueError(f"--where {text!r}: {', '.join(repr(w) for w in cues)} reads like an exclusion, which this "
                         "parser does not know how to apply; say it with 'not' or 'without' before the concept (e.g. "
                         "'a yellow Pokémon that is not an electric type')")
    unread = [re.sub(r"\b(" + "|".join(EVERYDAY_TYPES) + r")_", r"\1", w) for w in q.unread
              if w not in CONSTRAINT_FILLER]
    if unread:
        raise ValueError(_unread_message(text, unread, vocab))
    if q.doubled:
        raise ValueError(f"--where {text!r} negates a negation; say once what is excluded (e.g. 'not fire') and what "
                         "is wanted (e.g. 'fire')")
    if q.dangling:
        raise ValueError(f"--where {text!r}: a negation there reaches no concept; put 'not' right before what is "
                         "excluded (e.g. 'red, not fire')")
    names = {c.id: normalise_text(c.aliases[0]) for c in vocab}  # what the messages suggest must parse back
    if q.ambiguous:
        a, b = (names[c] for c in q.ambiguous[0])
        raise ValueError(f"--where {text!r}: it is unclear which of {a!r} and {b!r} are excluded; say 'not {a} and "
                         f"not {b}' to exclude both, or '{a}, not {b}' or '{b}, not {a}' to exclude one")
    if q.exempted:
        a, b = (names[c] for c in q.exempted[0])
        raise ValueError(f"--where {text!r}: it is unclear whether 'not {b}' excludes {b!r} as well or exempts it "
                         f"from the exclusion of {a!r}; say 'not {a} and not {b}' to exclude both, or leave {b!r} "
                         f"out to exclude {a!r} only")
    return replace(q, unread=())


BY_ID = re.compile(r"[+-][a-z]+:[\w-]+")  # "+colour:yellow -type:electric": the form that cannot be misread


def _by_id(text: str, vocab: list[Concept]) -> ParsedQuery | None:
    """A constraint given as concept ids, each after "+" (has) or "-" (lacks): read exactly, with no words to guess
    at; an unknown id is refused naming the vocabulary's. None when the text is not in that form."""
    tokens = text.replace(",", " ").split()
    if not tokens or not all(BY_ID.fullmatch(t) for t in tokens):
        return None
    try:
        q = parse_structured({"has": [t[1:] for t in tokens if t[0] == "+"],
                              "not_has": [t[1:] for t in tokens if t[0] == "-"]}, vocab)
    except ValueError as err:
        raise ValueError(f"--where {text!r}: {err}") from None
    both = set(q.q_pos) & set(q.q_neg)
    return ParsedQuery(tuple(c for c in q.q_pos if c not in both), q.q_neg, tuple(both))


def _instead_of(m: re.Match[str]) -> str:
    """'instead of fire, water': fire excluded, water wanted; 'instead of fire, water and grass, …' is refused (a list
    of three, or a wanted pair?)."""
    if re.match(r"[^,;.]*\b(?:and|or)\b", m.string[m.end():]):
        raise ValueError(f"--where: it is unclear what 'instead of {m.group(1).strip()}' reaches; say 'not "
                         f"{m.group(1).strip()}' and name the wanted concepts apart")
    return f" without {m.group(1)} {END}"


def _prefixed_list(m: re.Match[str]) -> str:
    """'excluded: fire, water' excludes each item, up to a clause of its own ('no: fire, has wings' wants wings)."""
    items = re.split(r"(,|\band\b|\bor\b)", m.group(1))
    out = []
    for k, item in enumerate(items[::2]):
        if re.search(r"\b(?:has|have|having|is|are|looks?|must|should|with|but|that|which|lives|it|its|they)\b", item):
            return " ".join(out) + f" {END} " + "".join(items[2 * k:])
        if item.strip():
            out.append(f"without {item} {END}")
    return " ".join(out) + f" {END}"


def _all_but(m: re.Match[str]) -> str:
    """"all but yellow", "every colour but yellow", "all yellow ones but the electric ones": the "but" excludes what
    follows; not under a negation ("doesn't have any wings but arms" wants arms) and not across a comma."""
    clause = re.split(r"[,;.]|\bbut\b|\band\b", m.string[:m.start()])[-1]
    if re.search(r"\b(?:not|no|never|without)\b", clause + m.group(1)):
        return m.group(0)
    return m.group(0)[:m.group(0).rindex("but")] + " without "


PLACE = r"(?:\s+(?!(?:and|but|or|not|no|is|are|that|which|with)\b)\w+){0,4}"  # "in the water", not what follows


def _refuse_permissions_and_sets(s: str, text: str, habitats: set[str], concept: str, vocab: list[Concept]) -> None:
    """Phrasings that say something a conjunction of HAS / NOT_HAS cannot: a permission ("can be electric", "electric
    allowed"), an option ("doesn't have to be electric", "with or without wings"), a choice or a range ("type in
    (electric, fire)", "one of fire, water", "small to medium"), a place that is no habitat of the vocabulary ("lives in
    the water", "on ice": not the water or ice type), a likeness ("dragon like"), a colour named after a type or a shade
    ("electric blue", "dark coloured"), an addition said with an exclusion's words ("apart from yellow, it must also
    have wings")."""
    def of(group: str, but: tuple[str, ...] = ()) -> str:
        return "|".join(re.escape(normalise_text(a)) for c in vocab if c.group == group for a in c.aliases
                        if normalise_text(a) not in but) or "(?!)"

    types, colours = of("type"), of("colour")
    named = of("type", SHADES + EVERYDAY_TYPES)  # types that also name colours' shades ("electric blue"); not "dark"
    plain = re.sub(r"\s+", " ", s)
    checks = [
        (r"\bnot (?:\w+ )?(?:have|has|need|needs|required) to\b|\bwith(?:out)? (?:or|and) (?:with(?:out)?|w/o|no|lacking)\b"
         r"|\b(\w+) or (?:not |no )?\1\b(?: not)?|\ba must\b|\bnot definitely\b",
         "{!r} makes a concept optional, and a constraint says only what each species has or lacks; leave the concept "
         "out"),
        (r"(?<!\bnot )(?<!\bnot be )\b(?:allowed|optional|optionally|maybe|perhaps|possibly)\b|\b(?:can|could|may|might)"
         r"\b(?=(?:\s+\w+){0,2}?\s+" + concept + ")",
         "{!r} allows a concept rather than requiring it, and a constraint says only what each species has or lacks; "
         "name what it must have ('electric') or lack ('not electric')"),
        (r"\bin\s*[(\[{]|(?<!\bnot )\b(?:one|any|either|some) of\b|\bsome\b.*\bsome\b|:\s*any\b"
         r"|\b(?:types?|colou?rs?|shapes?|sizes?) (?:in|among)\b|" + concept
         + r"\s+(?:to|through)\s+" + concept,
         "{!r} asks for one of several, and a constraint is a conjunction; run evaluate once per alternative"),
        (r"\b(?:in|on|at|near|by|under)\s+(?:(?:the|a|an)\s+)?(?:" + types + r")\b",
         "{!r} names a place, not the type; a place is a habitat ('lives in the sea'), where the vocabulary has them"),
        (r"(?<!-)\blike\b(?<!\bwould like)(?<!\bi like)(?<!\bwe like)|\b(?:" + types + r")\s+like\b",
         "{!r} names a likeness, not a concept; name the concept itself"),
        (r"\b(?:dark|light)[ -]colou?red\b|(?<![-!~])(?<!\bnot )(?<!\bnon )(?<!\bno )\b(?:" + named + r")[ -](?:" + colours
         + r")\b",
         "{!r} names a shade, not a colour and a type; name the colour"),
        (r"\b(?:apart from|other than|aside from|besides)\b(?:.*\b(?:also|too|as well)\b| being\b)",
         "{!r} adds to what it names rather than excluding it; name every wanted concept, and put 'not' before an "
         "excluded one"),
    ]
    for pattern, said in checks:
        if m := re.search(pattern, plain):
            raise ValueError(f"--where {text!r}: " + said.format(m.group(0).strip()))
    if m := re.search(r"\b(?:lives?|living)\b" + (r"(?! in the (?:" + "|".join(map(re.escape, habitats)) + r")\b)"
                                                   if habitats else "") + PLACE, plain):
        known = (", ".join(f"'lives in the {h}'" for h in sorted(habitats))
                 or "none: this memory has no habitat concepts")
        raise ValueError(f"--where {text!r}: {m.group(0).strip()!r} names no habitat of the vocabulary (habitats: "
                         f"{known})")


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


def _post_positive(s: str, text: str, groups: Callable[[str], set[str]]) -> str:
    """'fire types excluded', 'red, blue and green excluded', 'electric: no': the list before the word is excluded,
    rewritten as a negated list ("without red, blue and green") for `parse_text`'s list rule, so a list of two kinds
    ("red and wings excluded") is refused like its pre-positive form; the list reaches back over its short items when
    it ends in "and" / "or", never over a clause ("a yellow one, electric excluded", "yellow but electric excluded"
    and "yellow. electric excluded" want yellow; so does "yellow, electric excluded": a short item of another kind of
    concept). Refused: a negated exclusion ("fire not excluded"), and a short item of the same kind before the list
    with no "and" ("fire, water, grass excluded": one list, or wanted concepts and an excluded one?). `groups`: the
    kinds of concept a piece of text names."""
    while m := POST_POSITIVE.search(s):
        head, tail = s[:m.start()], s[m.end():]
        if re.search(r"\b(?:not|no|without)\s*$", head):
            raise ValueError(f"--where {text!r} negates an exclusion; say once what is excluded (e.g. 'fire "
                             "excluded') and what is wanted (e.g. 'fire')")
        head = re.sub(r"\s*[:=(\[]\s*$", "", head)  # "fire: excluded", "yellow, electric (excluded)"
        cut = max((o.end() for o in CLAUSE_OPENERS.finditer(head)), default=0)
        lead_word = re.match(r"\s*(?:and|or|but)\b", head[cut:])  # "…, and water excluded"
        cut += len(lead_word.group(0)) if lead_word else 0
        segments = head[cut:].split(",")
        items = [segments.pop()]
        if not items[0].strip() and segments:  # "red, blue, excluded": a trailing comma
            items = [segments.pop()]

        def short(seg: str) -> bool:  # a list item: one or two words, not a negated clause of its own
            return 0 < len(seg.split()) <= 2 and not re.match(r"\s*(?:without|not|no)\b", seg)

        joined = ""
        lead = re.match(r"\s*(?:and|or)\b", items[0])
        if lead and not (len(segments) > 1 and short(segments[-1]) and short(segments[-2])):
            joined, items[0] = lead.group(0), items[0][lead.end():]  # "yellow, and electric excluded": no list
        if re.search(r"\b(?:and|or)\b", items[0]):
            while segments and short(segments[-1]):
                items.insert(0, segments.pop())
        elif segments and short(segments[-1]) and groups(segments[-1]) and (groups(segments[-1]) & groups(items[0]) or (
                len(segments) > 1 and short(segments[-2]) and groups(segments[-2]))):  # "fire, water, wings excluded"
            raise ValueError(f"--where {text!r}: it is unclear whether {segments[-1].strip()!r} is excluded along "
                             f"with {items[0].strip()!r}; say 'not {segments[-1].strip()} and not {items[0].strip()}' "
                             f"to exclude both, or '{segments[-1].strip()}, not {items[0].strip()}' to exclude "
                             f"{items[0].strip()!r} only")
        s = (head[:cut] + "".join(seg + "," for seg in segments) + joined + " without " + ",".join(items) + f" {END}"
             + tail)
    return s
