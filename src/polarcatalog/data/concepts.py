"""A verifiable visual concept (PolarMem's concept node), shared by the domains that define vocabularies and
the memory that verifies them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Concept:
    id: str  # "group:name", stable across runs
    group: str  # the facet: type, colour, size, shape, habitat, ...
    name: str  # readable, used in prompts
    aliases: tuple[str, ...] = field(default_factory=tuple)  # what the text query parser matches


def normalise_text(text: str) -> str:
    """Lower case, é -> e, single spaces: how aliases and queries are compared."""
    return re.sub(r"\s+", " ", text.lower().replace("é", "e")).strip()
