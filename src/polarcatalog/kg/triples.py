"""Triples (head, relation, tail) with provenance, and entity canonicalisation.

Every entity has one id, `<kind>:<key>` (`species:25`, `type:electric`, `genus:passer`), whatever surface form a
source used: the paper names surface-form mismatch as the main residual limit of entity bridging (§4, Table 4
discussion), so names are folded by `data.names.name_key` and aliases resolve through `Entities`. A triple keeps its
source (a table and row, or a chunk id) so that a fact in a prompt or a bridged candidate can be traced back."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import pandas as pd

from polarcatalog.data.names import name_key

COLUMNS = ("head", "relation", "tail", "source")


def entity_id(kind: str, name: str | int) -> str:
    """`entity_id("type", "Electric")` → `type:electric`; a numeric key stays a number (`species:25`)."""
    key = str(name).strip()
    key = str(int(key)) if key.isdigit() else name_key(key)
    if not key:
        raise ValueError(f"an empty {kind} name cannot be an entity")
    return f"{kind}:{key}"


def kind_of(entity: str) -> str:
    return entity.partition(":")[0]


@dataclass(frozen=True)
class Triple:
    head: str
    relation: str
    tail: str
    source: str  # provenance: `<table>#<row>` or `chunk:<id>`


@dataclass
class Entities:
    """Surface forms → canonical ids. Species are registered by id and name; any other name resolves to a registered
    alias first, then to `entity_id(kind, name)`."""

    aliases: dict[str, str] = field(default_factory=dict)

    def add(self, canonical: str, *names: str) -> None:
        for name in names:
            key = name_key(name)
            if key:
                self.aliases.setdefault(key, canonical)

    def resolve(self, name: str, kind: str | None = None) -> str | None:
        """The canonical id of a surface form, or None when it names nothing known and no kind is given."""
        found = self.aliases.get(name_key(name))
        if found is not None or kind is None:
            return found
        return entity_id(kind, name)


def table(triples: Iterable[Triple]) -> pd.DataFrame:
    """Triples as a DataFrame, deduplicated on (head, relation, tail, source) and sorted: the on-disk form."""
    df = pd.DataFrame([(t.head, t.relation, t.tail, t.source) for t in triples], columns=list(COLUMNS))
    return df.drop_duplicates().sort_values(list(COLUMNS), kind="stable").reset_index(drop=True)


def write_triples(df: pd.DataFrame, path: Path) -> None:
    """Parquet, never pickle: the graph is rebuilt from this file (`graph.KnowledgeGraph.from_table`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    df[list(COLUMNS)].to_parquet(path, index=False)


def read_triples(path: Path) -> pd.DataFrame:
    df = pd.read_parquet(path)
    missing = set(COLUMNS) - set(df.columns)
    if missing:
        raise ValueError(f"{path}: not a triples table (missing {sorted(missing)}); rerun the kg stage")
    return df
