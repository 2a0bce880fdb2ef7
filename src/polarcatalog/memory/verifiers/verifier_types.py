"""What every verifier returns (`Scores`, saved by the graph stage) and the protocol it follows."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TYPE_CHECKING

import numpy as np

from polarcatalog.data.concepts import Concept

if TYPE_CHECKING:  # annotations only: the inputs module pulls in the data layer (scikit-image)
    from polarcatalog.memory.inputs import GraphInputs


@dataclass
class Scores:
    """Verifier scores: catalog images [A, C], query images [Q, C], local views of catalog images [A, V, C] or None."""

    anchor: np.ndarray
    query: np.ndarray
    anchor_local: np.ndarray | None = None


class Verifier(Protocol):
    def score(self, inputs: GraphInputs) -> Scores:
        """Scores of every catalog image (and its local views, when embedded) and every query image."""
        ...

    def describe(self) -> str:
        """One sentence for the graph report: what scored the concepts, and whether it was trained."""
        ...

    def calls_per_image(self, n_concepts: int) -> float:
        """Backend calls per catalog image (PolarMem Table 7's cost column)."""
        ...


def save_scores(path: str | Path, vocab: list[Concept], scores: Scores) -> None:
    """npz of plain arrays (read back with allow_pickle=False); no local views = an empty [A, 0, C] array."""
    local = scores.anchor_local if scores.anchor_local is not None else np.zeros((len(scores.anchor), 0, scores.anchor.shape[1]))
    np.savez(path, anchor=scores.anchor, query=scores.query, anchor_local=local, concepts=np.array([c.id for c in vocab]))


def load_scores(path: str | Path, vocab: list[Concept]) -> Scores:
    """The graph stage's verifier scores, checked against the vocabulary they were written for."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path} is missing: run the graph stage first (`dvc repro graph`)")
    with np.load(path, allow_pickle=False) as z:
        if z["concepts"].tolist() != [c.id for c in vocab]:
            raise ValueError(f"{path} was written for another vocabulary; rerun the graph stage")
        local = z["anchor_local"] if "anchor_local" in z.files and z["anchor_local"].shape[1] else None
        return Scores(z["anchor"], z["query"], local)
