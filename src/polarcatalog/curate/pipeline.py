"""The curate stage's steps, each a function the notebook calls in order (and tests call directly). The catalog
and its queries come from the domain (`polarcatalog.data.domain`); articles are composed the Pokémon way."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from polarcatalog.curate.anchors import AnchorFilter, precision_recall
from polarcatalog.curate.articles import compose_article
from polarcatalog.curate.summarize import Summarizer, word_count
from polarcatalog.data.colours import dominant_colours
from polarcatalog.data.domain import Domain
from polarcatalog.data.images import BadImageError, Quarantine, load_many, load_rgb
from polarcatalog.data.near_duplicates import dhash_hex
from polarcatalog.data.pokemon import PokemonDomain, item_icons, load_pokeapi, size_class
from polarcatalog.data.samples import non_bird_images
from polarcatalog.io import sha256_file
from polarcatalog.progress import progress


def build_species(domain: PokemonDomain, summarizer: Summarizer, quarantine: Quarantine, *, limit: int | None = None,
                  pokeapi_dir: str | Path | None = None, colour_min_fraction: float = 0.12,
                  colour_max_names: int = 3) -> tuple[pd.DataFrame, dict[int, Image.Image]]:
    """Species table with measured colours, size class, article and visual summary; plus the loaded artwork."""
    species = domain.load_catalog(limit)
    pokeapi = load_pokeapi(pokeapi_dir).set_index("species_id") if pokeapi_dir else None
    artwork: dict[int, Image.Image] = {}
    colours, articles = [], []
    records = species.to_dict("records")
    for row in progress(records, len(records), "articles", unit="species"):
        try:
            artwork[row["species_id"]] = load_rgb(row["artwork"])
            names = dominant_colours(artwork[row["species_id"]], colour_min_fraction, colour_max_names)
        except BadImageError as err:
            quarantine.add(row["artwork"], err.reason, "artwork")
            names = []
        facts = pokeapi.loc[row["species_id"]].to_dict() if pokeapi is not None and row["species_id"] in pokeapi.index else None
        colours.append(names)
        articles.append(compose_article(row, names, size_class(row["height_m"], domain.size_bins), facts))
    species["size_class"] = [size_class(h, domain.size_bins) for h in species["height_m"]]
    species["colours"] = colours
    if pokeapi is not None:
        species["pokedex_colour"] = species["species_id"].map(pokeapi["pokedex_colour"])
        species["shape"] = species["species_id"].map(pokeapi["shape"])
        species["habitat"] = species["species_id"].map(pokeapi["habitat"])
    species["article"] = articles
    species["summary"] = summarizer.summarize(species["name"].tolist(), articles)
    species["article_words"] = species["article"].map(word_count)
    species["summary_words"] = species["summary"].map(word_count)
    return species, artwork


def anchor_candidates(species: pd.DataFrame, raw: Path, distractor_fraction: float, seed: int) -> pd.DataFrame:
    """Artwork (target) per species plus off-domain item icons assigned to random species (seeded).

    The icons stand in for what a web crawl drags in (logos, maps, other objects): a labelled mix on
    which the filter's precision and recall are measured every run.
    """
    rng = np.random.default_rng(seed)
    rows = [{"species_id": s, "path": p, "source": "artwork", "is_target": True} for s, p in zip(species["species_id"], species["artwork"])]
    icons = item_icons(raw)
    n_distractors = round(distractor_fraction * len(species))
    if n_distractors and icons:
        picks = rng.choice(len(icons), size=min(n_distractors, len(icons)), replace=False)
        owners = rng.choice(species["species_id"].to_numpy(), size=len(picks))
        rows += [{"species_id": int(o), "path": str(icons[i]), "source": "item_icon", "is_target": False} for i, o in zip(picks, owners)]
    df = pd.DataFrame(rows)
    df.insert(0, "candidate_id", [f"c{i:05d}" for i in range(len(df))])
    return df


def filter_anchors(candidates: pd.DataFrame, anchor_filter: AnchorFilter, quarantine: Quarantine,
                   artwork: dict[int, Image.Image] | None = None) -> pd.DataFrame:
    """Score every loadable candidate; `keep` per the filter; species left with none keep their best (`fallback`)."""
    cand = candidates.copy()
    images, idx = [], []
    to_load = []
    for i, row in enumerate(cand.itertuples()):
        if artwork is not None and row.source == "artwork":
            if row.species_id in artwork:  # decoded once by build_species; a failed one is already quarantined
                images.append(artwork[row.species_id])
                idx.append(i)
        else:
            to_load.append(i)
    ok, loaded = load_many([cand["path"].iloc[i] for i in to_load], quarantine, "anchor_candidate")
    images += loaded
    idx += [to_load[j] for j in ok]
    result = anchor_filter(images)
    cand["loaded"] = False
    cand["score"] = np.nan
    cand["keep"] = False
    pos = cand.index[idx]
    cand.loc[pos, "loaded"] = True
    cand.loc[pos, "score"] = result.scores
    cand.loc[pos, "keep"] = result.keep
    cand["fallback"] = False
    # what the kg stage's leakage check compares queries with: each loaded image's bytes and its near-duplicate hash
    cand["sha256"] = None
    cand["dhash"] = None
    cand.loc[pos, "sha256"] = [sha256_file(cand["path"].iloc[i]) for i in idx]
    cand.loc[pos, "dhash"] = [dhash_hex(im) for im in images]
    cand.attrs["threshold"] = result.threshold
    kept_species = set(cand.loc[cand["keep"], "species_id"])
    for sid, grp in cand[cand["loaded"]].groupby("species_id"):
        if sid not in kept_species:
            best = grp["score"].idxmax()
            cand.loc[best, ["keep", "fallback"]] = True
    return cand


def build_queries(domain: Domain, variants: list[str], species_ids: set[int], quarantine: Quarantine) -> tuple[pd.DataFrame, list[int]]:
    """The domain's labelled query images (Pokémon: box sprites); returns (queries, catalog species with none at all)."""
    sprites, _ = domain.load_queries(variants)
    sprites = sprites[sprites["species_id"].isin(species_ids)].reset_index(drop=True)
    ok, images = load_many(sprites["path"].tolist(), quarantine, "query")
    q = sprites.iloc[ok].reset_index(drop=True)
    q.insert(0, "query_id", q["variant"] + "/" + q["slug"])
    q["sha256"] = [sha256_file(p) for p in q["path"]]
    q["width"] = [im.size[0] for im in images]
    q["height"] = [im.size[1] for im in images]
    q["dhash"] = [dhash_hex(im) for im in images]
    without = sorted(species_ids - set(q["species_id"]))
    return q, without


def colour_agreement(species: pd.DataFrame) -> dict[str, float] | None:
    """How often the measured colours contain PokeAPI's single Pokédex colour (needs curate.pokeapi_dir)."""
    if "pokedex_colour" not in species:
        return None
    has = species.dropna(subset=["pokedex_colour"])
    top1 = np.mean([bool(c) and c[0] == gold for c, gold in zip(has["colours"], has["pokedex_colour"])])
    anyk = np.mean([gold in c for c, gold in zip(has["colours"], has["pokedex_colour"])])
    return {"top1": float(top1), "any": float(anyk), "n": int(len(has))}


def filter_quality(candidates: pd.DataFrame) -> dict[str, float | int]:
    """Precision/recall of the filter's own decision (before fallbacks) on the labelled candidate mix."""
    c = candidates[candidates["loaded"]]
    kept = c["keep"] & ~c["fallback"]
    return precision_recall(kept.to_numpy(), c["is_target"].to_numpy())


def bird_filter_eval(bird_dir: str | Path, anchor_filter: AnchorFilter, quarantine: Quarantine) -> tuple[pd.DataFrame, dict[str, float | int]]:
    """The bird filter on a labelled mix: every image in `bird_dir` (birds) vs scikit-image's non-bird photos."""
    paths = sorted(p for p in Path(bird_dir).iterdir() if p.suffix.lower() in {".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp"})
    ok, birds = load_many(paths, quarantine, "bird_eval")
    others = non_bird_images()
    result = anchor_filter(birds + list(others.values()))
    table = pd.DataFrame({
        "image": [paths[i].name for i in ok] + [f"skimage:{n}" for n in others],
        "is_bird": [True] * len(birds) + [False] * len(others),
        "score": result.scores, "keep": result.keep,
    })
    return table, precision_recall(table["keep"].to_numpy(), table["is_bird"].to_numpy())
