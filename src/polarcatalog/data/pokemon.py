"""The embedded Pokémon domain: species metadata, artwork, box sprites and (optionally) PokeAPI facts."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

ENGLISH = 9  # PokeAPI language id


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
