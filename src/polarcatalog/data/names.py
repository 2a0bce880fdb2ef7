"""How a name is spelled for matching: one rule shared by a user's folder labels (`data.query_folder`) and the
knowledge graph's entity ids (`kg.triples`), so `Mr. Mime`, `MR_MIME` and the sprite slug `mr-mime` are one name
everywhere."""

from __future__ import annotations

import re
import unicodedata


def name_key(text: str) -> str:
    """Lower case, accents and apostrophes and dots dropped, ♀/♂ as -f/-m, every other run of non-alphanumerics one
    hyphen. `Mr. Mime`, `MR_MIME` and `mr-mime` give `mr-mime`; `Nidoran♀` gives `nidoran-f`, `Farfetch'd`
    `farfetchd`, `Flabébé` `flabebe`."""
    t = str(text).strip().lower().replace("♀", "-f").replace("♂", "-m")
    t = "".join(c for c in unicodedata.normalize("NFKD", t) if not unicodedata.combining(c))
    t = re.sub(r"['’.]", "", t)
    return re.sub(r"[^a-z0-9]+", "-", t).strip("-")
