"""From a reader's free-text answer to a catalog species: parse, then match exact -> alias -> fuzzy. An answer that
matches nothing counts as wrong (VR-RAG reports accuracy over all queries, so an unparseable answer is a miss, not a
dropped query)."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Iterable, Mapping

from polarcatalog.data.names import name_key

# Lead-ins models put before a name ("The species is ...", "Answer: ..."), stripped before matching.
_LEAD = re.compile(r"^(?:(?:the\s+)?(?:final\s+)?answer\s*(?:is)?\s*[:\-]?|(?:the\s+)?(?:species|bird|pokémon|pokemon)"
                   r"(?:\s+(?:shown|in the image|pictured))?\s+(?:is|appears to be|looks like)\s*:?|(?:this|it)\s+"
                   r"(?:is|appears to be|looks like)\s*(?:an?\s+|the\s+)?|i\s+think\s+(?:it\s+is\s+)?)\s*", re.I)


def parse_answer(text: str) -> str:
    """The name part of an answer: first non-empty line, lead-ins, list numbers, markdown and quotes, a trailing
    explanation after a comma/dash/parenthesis, and end punctuation dropped. `**1. Laysan Albatross** (white head)`
    -> `Laysan Albatross`."""
    line = next((x for x in str(text).splitlines() if x.strip()), "")
    line = re.sub(r"[*`\"“”]", "", line).strip()  # markdown and quotes (an `_` italic folds away in name_key)
    for _ in range(2):
        line = _LEAD.sub("", line).strip()
    line = re.sub(r"^\d+\s*[.):]\s*", "", line)  # "3. Name" (a candidate's number kept with its name)
    line = re.split(r"\s+[-–—]\s+|\s*[(,;]", line, maxsplit=1)[0]
    return line.strip().rstrip(".!?:").strip()


@dataclass(frozen=True)
class Match:
    answer: str  # the parsed name
    species_id: int | None
    how: str  # exact | alias | fuzzy | none
    score: float  # 1 for exact/alias, the similarity ratio for fuzzy, 0 for none


class SpeciesMatcher:
    """Names and aliases of the catalog's species, compared by `names.name_key`; fuzzy = difflib's closest key
    (`get_close_matches`), its ratio at or above `threshold` (0.85: one or two letters off in a typical name, not a different congener)."""

    def __init__(self, names: Mapping[int, str], aliases: Mapping[int, Iterable[str]] | None = None, threshold: float = 0.85):
        if not 0 < threshold <= 1:
            raise ValueError(f"fuzzy threshold must be in (0, 1], got {threshold}")
        self.threshold = threshold
        self.exact = {name_key(n): int(i) for i, n in names.items()}
        self.alias: dict[str, int] = {}
        for i, al in (aliases or {}).items():
            for a in al:
                self.alias.setdefault(name_key(a), int(i))
        self._keys = {**self.alias, **self.exact}  # every spelling -> species; exact names win a clash

    def match(self, text: str) -> Match:
        answer = parse_answer(text)
        key = name_key(answer)
        if not key:
            return Match(answer, None, "none", 0.0)
        if key in self.exact:
            return Match(answer, self.exact[key], "exact", 1.0)
        if key in self.alias:
            return Match(answer, self.alias[key], "alias", 1.0)
        close = difflib.get_close_matches(key, self._keys, n=1, cutoff=self.threshold)
        if close:
            return Match(answer, self._keys[close[0]], "fuzzy", difflib.SequenceMatcher(None, key, close[0]).ratio())
        return Match(answer, None, "none", 0.0)
