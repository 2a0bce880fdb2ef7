"""The embedded Pokémon domain: species metadata, artwork, box sprites and (optionally) PokeAPI facts; the
concept vocabulary (types, colours, size classes, body shapes, habitats) with its ground truth.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from polarcatalog.data.colours import COLOUR_TABLE
from polarcatalog.data.concepts import Concept

ENGLISH = 9  # PokeAPI language id
SIZE_NAMES = ("tiny", "small", "medium-sized", "large", "huge")
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


def size_class(height_m: float, bins: Sequence[float]) -> str:
    """tiny / small / medium-sized / large / huge from the height and 4 cut points (params: curate.size_bins_m)."""
    if height_m != height_m:  # NaN
        return "unknown-size"
    return SIZE_NAMES[sum(height_m >= b for b in bins)]


def load_species(raw: Path, limit: int | None = None) -> pd.DataFrame:
    """One row per species from the `pokemon` package: id, name, types, height, weight, abilities, artwork."""
    meta = json.loads((raw / "pokemon" / "pokemons.json").read_text())
    rows = []
    for key, m in meta.items():
        sid = int(m.get("id", key))
        rows.append({
            "species_id": sid,
            "name": str(m["name"]),
            "types": [str(t) for t in m.get("type", [])],
            "height_m": float(m["height"]) if m.get("height") is not None else float("nan"),
            "weight_kg": float(m["weight"]) if m.get("weight") is not None else float("nan"),
            "abilities": [str(a) for a in m.get("abilities", [])],
            "artwork": str(raw / "pokemon" / "images" / f"{sid}.jpg"),
        })
    df = pd.DataFrame(rows).sort_values("species_id").reset_index(drop=True)
    return df.head(limit).reset_index(drop=True) if limit else df


def sprite_index(raw: Path, variants: list[str]) -> tuple[pd.DataFrame, list[int]]:
    """Base-form box sprites per species and variant, and the species ids the package lists without a file.

    Alternate forms (Alolan, Mega, female) are left out: they are other looks, not the species' default.
    """
    root = raw / "pokesprite" / "package"
    table = json.loads((root / "data" / "pokemon.json").read_text())
    rows, missing = [], []
    for idx, entry in table.items():
        sid, slug = int(idx), entry["slug"]["eng"]
        for variant in variants:
            path = root / "pokemon-gen8" / variant / f"{slug}.png"
            if path.is_file():
                rows.append({"species_id": sid, "slug": slug, "variant": variant, "path": str(path)})
            else:
                missing.append(sid)
    return pd.DataFrame(rows, columns=["species_id", "slug", "variant", "path"]), sorted(set(missing))


def item_icons(raw: Path) -> list[Path]:
    """Item icons shipped beside the sprites: real, off-domain images used as anchor distractors."""
    return sorted((raw / "pokesprite" / "package" / "items").rglob("*.png"))


def _clean(text: str) -> str:
    text = text.replace("\u00ad\n", "").replace("\x0c", " ").replace("\n", " ")
    return re.sub(r"\s+", " ", text).strip()


def load_pokeapi(folder: str | Path) -> pd.DataFrame:
    """Genus, Pokédex colour, body shape (+ its description), habitat and English Pokédex text per species.

    Raises FileNotFoundError naming the missing CSV, so a wrong `curate.pokeapi_dir` is obvious.
    """
    folder = Path(folder)
    need = ["pokemon_species.csv", "pokemon_species_names.csv", "pokemon_color_names.csv",
            "pokemon_shape_prose.csv", "pokemon_habitat_names.csv", "pokemon_species_flavor_text_2014.csv"]
    for name in need:
        if not (folder / name).is_file():
            raise FileNotFoundError(f"curate.pokeapi_dir={folder}: {name} is missing (expected PokeAPI's data/v2/csv layout)")
    sp = pd.read_csv(folder / "pokemon_species.csv")
    names = pd.read_csv(folder / "pokemon_species_names.csv").query("local_language_id == @ENGLISH")
    colours = pd.read_csv(folder / "pokemon_color_names.csv").query("local_language_id == @ENGLISH")
    shapes = pd.read_csv(folder / "pokemon_shape_prose.csv").query("local_language_id == @ENGLISH")
    habitats = pd.read_csv(folder / "pokemon_habitat_names.csv").query("local_language_id == @ENGLISH")
    flavor = pd.read_csv(folder / "pokemon_species_flavor_text_2014.csv").query("language_id == @ENGLISH")
    flavor = flavor.assign(flavor_text=flavor["flavor_text"].astype(str).map(_clean))
    texts = (flavor.drop_duplicates(["species_id", "flavor_text"]).sort_values(["species_id", "version_id"])
             .groupby("species_id")["flavor_text"].agg(list))
    out = pd.DataFrame({"species_id": sp["id"]})
    out["genus"] = sp["id"].map(names.set_index("pokemon_species_id")["genus"])
    out["pokedex_colour"] = sp["color_id"].map(colours.set_index("pokemon_color_id")["name"]).str.lower()
    out["shape"] = sp["shape_id"].map(shapes.set_index("pokemon_shape_id")["name"]).str.lower()
    out["shape_description"] = sp["shape_id"].map(shapes.set_index("pokemon_shape_id")["description"])
    out["habitat"] = sp["habitat_id"].map(habitats.set_index("pokemon_habitat_id")["name"])
    out["pokedex_texts"] = out["species_id"].map(texts).map(lambda v: v if isinstance(v, list) else [])
    return out.astype(object).where(out.notna(), None)


def pokemon_vocabulary(with_pokeapi: bool = False) -> list[Concept]:
    """18 types, the colour names, 5 size classes; with PokeAPI data also 14 body shapes and 9 habitats."""
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


def pokemon_labels(species: pd.DataFrame, vocab: list[Concept], size_bins: Sequence[float]) -> np.ndarray:
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


def _with_pokeapi(species: pd.DataFrame) -> bool:
    return "shape" in species.columns and bool(species["shape"].notna().any())


@dataclass(frozen=True)
class PokemonDomain:
    """The embedded default: 1,008 species from the `pokemon` package, box-sprite queries from pokesprite."""

    raw: Path = Path("data/raw")
    size_bins: Sequence[float] = field(default=(0.5, 1.0, 2.0, 4.0))
    name: str = "pokemon"

    def load_catalog(self, limit: int | None = None) -> pd.DataFrame:
        return load_species(Path(self.raw), limit)

    def load_queries(self, variants: Sequence[str]) -> tuple[pd.DataFrame, list[int]]:
        return sprite_index(Path(self.raw), list(variants))

    def vocabulary(self, species: pd.DataFrame) -> list[Concept]:
        return pokemon_vocabulary(with_pokeapi=_with_pokeapi(species))

    def concept_truth(self, species: pd.DataFrame, vocab: list[Concept]) -> np.ndarray:
        return pokemon_labels(species, vocab, self.size_bins)

    def truth_notes(self, species: pd.DataFrame) -> dict[str, str]:
        return {"colour_truth": "pokedex" if _with_pokeapi(species) else "measured"}

    def strata(self, species: pd.DataFrame) -> pd.Series:
        return generation(species["species_id"])


# First National Pokédex number of each generation (games: Red/Blue ... Scarlet/Violet).
GENERATION_STARTS = (1, 152, 252, 387, 494, 650, 722, 810, 906)


def generation(species_id: pd.Series) -> pd.Series:
    """`gen 1` ... `gen 9` from the National Pokédex number."""
    gen = np.searchsorted(np.array(GENERATION_STARTS), species_id.to_numpy(), side="right")
    return pd.Series([f"gen {g}" for g in gen], index=species_id.index, name="generation")
