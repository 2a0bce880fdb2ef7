"""What the graph stage reads: the domain's concept vocabulary and ground truth, and the catalog and query images'
features (every embedded image encoder, each l2-normalised, concatenated) in workspace row order."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from polarcatalog.data.concepts import Concept
from polarcatalog.data.domain import Domain
from polarcatalog.features.workspace import Workspace
from polarcatalog.vectors import l2_normalise


@dataclass
class GraphInputs:
    vocab: list[Concept]
    species_ids: np.ndarray
    truth: np.ndarray  # [S, C] ground truth per species
    anchor_x: np.ndarray
    anchor_species: np.ndarray
    query_x: np.ndarray
    query_species: np.ndarray
    truth_notes: dict[str, str] = field(default_factory=dict)  # where the truth comes from (the domain says)
    anchor_local_x: np.ndarray | None = None  # [anchors, views, dim] local views of the catalog images, or None
    workspace: Workspace | None = None  # per-encoder features and image paths (zero-shot and VLM verifiers)

    @property
    def groups(self) -> list[str]:
        """The facet of each concept: the multi_prompt proposer's prompts."""
        return [c.group for c in self.vocab]

    def species_index(self, species: np.ndarray) -> np.ndarray:
        """Row of `species_ids` for each species id (-1 for ids outside the catalog or padding), vectorised."""
        lookup = np.full(int(max(self.species_ids.max(), np.max(species, initial=0))) + 1, -1)
        lookup[self.species_ids] = np.arange(len(self.species_ids))
        species = np.asarray(species)
        return np.where(species >= 0, lookup[np.maximum(species, 0)], -1)

    def truth_rows(self, species: np.ndarray) -> np.ndarray:
        """Ground truth [len(species), C] of the given species ids."""
        return self.truth[self.species_index(species)]


def graph_inputs(ws: Workspace, domain: Domain) -> GraphInputs:
    vocab = domain.vocabulary(ws.species)
    names = sorted(ws.anchor_f)
    local = None
    if names and all(n in ws.anchor_local_f for n in names):
        local = np.concatenate([l2_normalise(ws.anchor_local_f[n], axis=2) for n in names], axis=2)
    return GraphInputs(vocab, ws.species["species_id"].to_numpy(), domain.concept_truth(ws.species, vocab),
                       np.hstack([l2_normalise(ws.anchor_f[n], axis=1) for n in names]), ws.anchors["species_id"].to_numpy(),
                       np.hstack([l2_normalise(ws.query_f[n], axis=1) for n in names]), ws.queries["species_id"].to_numpy(),
                       domain.truth_notes(ws.species), local, ws)
