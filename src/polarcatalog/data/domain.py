"""The domain seam: what a catalog is *about*. A domain says which species exist, which labelled query images
come with them, and which visual concepts can be verified on them (with ground truth where the data has it).

Pokémon (`polarcatalog.data.pokemon.PokemonDomain`) is the one implementation; a bird domain (VR-RAG's setting)
is one more entry in `DOMAINS` once its data path exists. `dataset.domain` in params.yaml names an entry.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence

import numpy as np
import pandas as pd

from polarcatalog.data.concepts import Concept
from polarcatalog.data.pokemon import PokemonDomain


class Domain(Protocol):
    name: str

    def load_catalog(self, limit: int | None = None) -> pd.DataFrame:
        """One row per species: `species_id`, `name`, `artwork` (the path of its reference image) and domain facts."""
        ...

    def load_queries(self, variants: Sequence[str]) -> tuple[pd.DataFrame, list[int]]:
        """Labelled query images (`species_id`, `slug`, `variant`, `path`) and the species listed without one."""
        ...

    def vocabulary(self, species: pd.DataFrame) -> list[Concept]:
        """The concepts the memory may verify, given the facts the species table carries."""
        ...

    def concept_truth(self, species: pd.DataFrame, vocab: list[Concept]) -> np.ndarray:
        """Ground truth [species, concepts] (bool), rows in table order."""
        ...

    def truth_notes(self, species: pd.DataFrame) -> dict[str, str]:
        """Where the ground truth comes from, for reports (e.g. catalogued vs measured colours)."""
        ...

    def strata(self, species: pd.DataFrame) -> pd.Series:
        """A label per species (table order, named) the report breaks accuracy down by (e.g. the Pokémon generation)."""
        ...


DOMAINS: dict[str, Callable[..., Domain]] = {"pokemon": PokemonDomain}


def create_domain(name: str, **options: Any) -> Domain:
    """`create_domain("pokemon", raw=Path("data/raw"), size_bins=[0.5, 1.0, 2.0, 4.0])`."""
    if name not in DOMAINS:
        raise ValueError(f"unknown domain {name!r}; allowed: {', '.join(sorted(DOMAINS))}")
    return DOMAINS[name](**options)
