"""Concept vocabularies per domain, with ground-truth concept labels per species where the data has them.

Pokémon: the 18 types (package metadata), the colour names of the Pokédex / our colour table, the size classes
(from height) and, with PokeAPI data, the 14 body shapes and 9 habitats. Birds: CUB-200's 312 attributes in
readable form. Each concept has aliases, used by the text query parser.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from polarcatalog.curate.articles import SIZE_NAMES, size_class
from polarcatalog.curate.colours import COLOUR_TABLE

POKEMON_TYPES = ("normal", "fire", "water", "grass", "electric", "ice", "fighting", "poison", "ground", "flying",
                 "psychic", "bug", "rock", "ghost", "dragon", "dark", "steel", "fairy")
POKEAPI_SHAPES = ("ball", "squiggle", "fish", "arms", "blob", "upright", "legs", "quadruped", "wings", "tentacles",
                  "heads", "humanoid", "bug-wings", "armor")
POKEAPI_HABITATS = ("cave", "forest", "grassland", "mountain", "rare", "rough-terrain", "sea", "urban", "waters-edge")
SHAPE_ALIASES = {"wings": ["wings", "winged", "a pair of wings"], "bug-wings": ["bug wings", "insect wings"],
                 "quadruped": ["quadruped", "four legs", "four-legged"], "tentacles": ["tentacles"],
                 "humanoid": ["humanoid"], "fish": ["fish-shaped", "fish shape"], "armor": ["armor", "armour", "armored"],
                 "squiggle": ["serpentine", "snake-like"], "heads": ["multiple heads", "several heads"],
                 "ball": ["only a head", "ball-shaped"], "arms": ["arms"], "blob": ["blob"], "upright": ["upright"],
                 "legs": ["legs"]}


@dataclass(frozen=True)
class Concept:
    id: str  # "group:name", stable across runs
    group: str
    name: str  # readable
    aliases: tuple[str, ...] = field(default_factory=tuple)


def pokemon_vocabulary(with_pokeapi: bool = False) -> list[Concept]:
    out = [Concept(f"type:{t}", "type", f"{t} type", (f"{t} type", f"{t}-type", f"{t} pokémon", f"{t} pokemon", t))
           for t in POKEMON_TYPES]
    colours = [*COLOUR_TABLE, "grey"]
    out += [Concept(f"colour:{c}", "colour", c, (c, "grey") if c == "gray" else (c,)) for c in colours if c != "grey"]
    out += [Concept(f"size:{s}", "size", s, (s, s.replace("-sized", ""))) for s in SIZE_NAMES]
    if with_pokeapi:
        out += [Concept(f"shape:{s}", "shape", s.replace("-", " "), tuple(SHAPE_ALIASES.get(s, [s]))) for s in POKEAPI_SHAPES]
        out += [Concept(f"habitat:{h}", "habitat", h.replace("-", " "), (h.replace("-", " ") + " habitat", f"lives in the {h.replace('-', ' ')}"))
                for h in POKEAPI_HABITATS]
    return out


def pokemon_labels(species: pd.DataFrame, vocab: list[Concept], size_bins: list[float]) -> np.ndarray:
    """Ground truth [S, C] (bool): types from the package; colour = PokeAPI's Pokédex colour when present, else the
    dominant colours measured from the artwork (pixel statistics, independent of the image features the verifier
    uses, but noisier: reports say which); size from height; shape / habitat from PokeAPI."""
    index = {c.id: j for j, c in enumerate(vocab)}
    y = np.zeros((len(species), len(vocab)), bool)
    for i, row in enumerate(species.to_dict("records")):
        ids = [f"type:{t}" for t in row["types"]] + [f"size:{size_class(row['height_m'], size_bins)}"]
        if not isinstance(row.get("pokedex_colour"), str) and row.get("colours") is not None:
            ids += [f"colour:{c}" for c in row["colours"]]
        for col, group in (("pokedex_colour", "colour"), ("shape", "shape"), ("habitat", "habitat")):
            value = row.get(col)
            if isinstance(value, str):
                ids.append(f"{group}:{value}")
        for cid in ids:
            if cid in index:
                y[i, index[cid]] = True
    return y


def _readable_cub(attribute: str) -> str:
    """`has_bill_shape::curved_(up_or_down)` -> `curved (up or down) bill shape`."""
    part, value = attribute.split("::")
    return f"{value.replace('_', ' ')} {part.removeprefix('has_').replace('_', ' ')}"


def cub_vocabulary(attributes_txt: str | Path) -> list[Concept]:
    out = []
    for line in Path(attributes_txt).read_text().splitlines():
        if not line.strip():
            continue
        idx, attr = line.split(maxsplit=1)
        name = _readable_cub(attr.strip())
        out.append(Concept(f"cub:{int(idx)}", attr.split("::")[0].removeprefix("has_"), name, (name,)))
    return out


def cub_labels(continuous_txt: str | Path, threshold: float = 50.0) -> np.ndarray:
    """[200, 312] bool: the attribute is seen in at least `threshold` % of the class's images."""
    data = np.loadtxt(continuous_txt)
    return data >= threshold


def normalise_text(text: str) -> str:
    return re.sub(r"\s+", " ", text.lower().replace("é", "e")).strip()
