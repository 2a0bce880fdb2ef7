"""The triples as a directed NetworkX multigraph (the paper caches its extracted triples "in a directed NetworkX
graph", §3.3), its statistics, its GraphML export, and the species-level views bridging needs.

A species' *attributes* are the entities reachable from its node along outgoing edges: `species:25 -has_type->
type:electric`, and for a taxonomy `species:x -in_genus-> genus:y -in_family-> family:z`, so a bird's attributes
include its family without a separate rule."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import networkx as nx
import numpy as np
import pandas as pd
from scipy import sparse

from polarcatalog.kg.triples import entity_id, kind_of


@dataclass(frozen=True)
class LinkRule:
    """Two species are linked when they share an entity of every kind named (`("typing", "ability")`: the same type
    pair and at least one ability). A rule with one kind is plain sharing (`("family",)`)."""

    kinds: tuple[str, ...]

    def __str__(self) -> str:
        return "+".join(self.kinds)


class KnowledgeGraph:
    def __init__(self, triples: pd.DataFrame):
        self.triples = triples.reset_index(drop=True)
        self.graph = nx.MultiDiGraph()
        for i, (h, r, t, s) in enumerate(self.triples[["head", "relation", "tail", "source"]].itertuples(index=False)):
            self.graph.add_edge(h, t, key=i, relation=r, source=s)

    def stats(self) -> dict[str, object]:
        """Entities per kind, triples per relation, weakly connected components, and the mean size of an evolution
        family (species per `family:` entity) where there are any."""
        nodes = pd.Series([kind_of(n) for n in self.graph.nodes], dtype=object)
        out: dict[str, object] = {
            "entities": int(self.graph.number_of_nodes()), "triples": int(len(self.triples)),
            "entities per kind": {k: int(v) for k, v in nodes.value_counts().sort_index().items()},
            "triples per relation": {k: int(v) for k, v in self.triples["relation"].value_counts().sort_index().items()},
            "components": int(nx.number_weakly_connected_components(self.graph)) if len(self.graph) else 0,
        }
        families = self.triples[self.triples["tail"].str.startswith("family:") & self.triples["head"].str.startswith("species:")]
        if len(families):
            out["mean species per family"] = round(float(families.groupby("tail")["head"].nunique().mean()), 4)
        return out

    def write_graphml(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        nx.write_graphml(self.graph, path)

    def attributes(self, species: Sequence[str], hops: int = 3) -> dict[str, set[str]]:
        """species id → entities reachable along outgoing edges within `hops` (species themselves excluded)."""
        out = {}
        for s in species:
            reach = nx.single_source_shortest_path_length(self.graph, s, cutoff=hops) if s in self.graph else {}
            out[s] = {e for e in reach if e != s and kind_of(e) != "species"}
        return out

    def incidence(self, species: Sequence[str], kinds: Sequence[str] | None = None,
                  attrs: dict[str, set[str]] | None = None) -> tuple[sparse.csr_matrix, list[str]]:
        """[S, E] 0/1 matrix of each species' attributes (of the given kinds), and the entity of each column."""
        attrs = attrs if attrs is not None else self.attributes(species)  # the graph walk, once per caller
        entities = sorted({e for a in attrs.values() for e in a if kinds is None or kind_of(e) in kinds})
        col = {e: j for j, e in enumerate(entities)}
        rows, cols = [], []
        for i, s in enumerate(species):
            for e in attrs[s]:
                if e in col:
                    rows.append(i)
                    cols.append(col[e])
        m = sparse.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(len(species), len(entities)))
        return m, entities

    def links(self, species: Sequence[str], rules: Sequence[LinkRule]) -> sparse.csr_matrix:
        """[S, S] 0/1: species i and j (i != j) satisfy at least one rule."""
        total = sparse.csr_matrix((len(species), len(species)), dtype=np.float32)
        attrs = self.attributes(species)
        for rule in rules:
            both = None
            for kind in rule.kinds:
                m, _ = self.incidence(species, [kind], attrs)
                shared = ((m @ m.T) > 0).astype(np.float32)
                both = shared if both is None else both.multiply(shared)
            total = total + both
        total = (total > 0).astype(np.float32).tolil()
        total.setdiag(0)
        return total.tocsr()


def link_rules(specs: list[str]) -> list[LinkRule]:
    """`kg.links` entries (`typing+ability`, `family`) as rules."""
    return [LinkRule(tuple(spec.split("+"))) for spec in specs]


def species_links(triples: pd.DataFrame, ids: np.ndarray, rules: list[str]) -> sparse.csr_matrix:
    """[S, S] links between the catalog's species (in catalog order) under the configured rules."""
    return KnowledgeGraph(triples).links([entity_id("species", int(s)) for s in ids], link_rules(rules))
