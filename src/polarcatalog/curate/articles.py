"""A species *article*: everything known about it, visual or not, as plain prose (the paper's Wikipedia page).

The embedded domain has no encyclopedia, so the article is composed from the package metadata, the
colours measured from the artwork and, when given, PokeAPI's genus / colour / shape / habitat / Pokédex text.
Like a real article it mixes appearance with facts that do not help recognition (abilities, weight, lore);
the summarizer's job is to distil the visual part.
"""

from __future__ import annotations

from typing import Any, Sequence


def _join(words: Sequence[str]) -> str:
    words = [w for w in words if w]
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " and " + words[-1]


def _pretty(s: str) -> str:
    return s.replace("-", " ").title()


def compose_article(sp: dict[str, Any], colours: Sequence[str], size: str, pokeapi: dict[str, Any] | None = None) -> str:
    """Prose article for one species; `sp` is a row of data.pokemon.load_species."""
    name = sp["name"]
    types = "/".join(_pretty(t) for t in sp["types"]) or "unknown"
    genus = (pokeapi or {}).get("genus")
    article = "an" if types[0].lower() in "aeiou" else "a"
    s = [f"{name} is {article} {types}-type Pokémon" + (f" known as the {genus}." if genus else ".")]
    if sp["height_m"] == sp["height_m"]:
        s.append(f"{name} is a {size} Pokémon, standing {sp['height_m']:g} m tall.")
    if sp["weight_kg"] == sp["weight_kg"]:
        s.append(f"It weighs {sp['weight_kg']:g} kg.")
    if sp["abilities"]:
        s.append(f"Its abilities are {_join([_pretty(a) for a in sp['abilities']])}.")
    if colours:
        rest = f", with {_join(list(colours[1:]))} markings" if len(colours) > 1 else ""
        s.append(f"In its official artwork its body is mostly {colours[0]}{rest}.")
    if pokeapi:
        if pokeapi.get("pokedex_colour"):
            s.append(f"The Pokédex lists its colour as {pokeapi['pokedex_colour']}.")
        if pokeapi.get("shape"):
            desc = (pokeapi.get("shape_description") or "").rstrip(".")
            s.append(f"Its body shape is {pokeapi['shape']}" + (f": {desc[0].lower() + desc[1:]}." if desc else "."))
        if pokeapi.get("habitat"):
            s.append(f"It is usually found in {pokeapi['habitat'].replace('-', ' ')} habitats.")
        for text in pokeapi.get("pokedex_texts") or []:
            s.append(text if text.endswith((".", "!", "?")) else text + ".")
    return " ".join(s)
