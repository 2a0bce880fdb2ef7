"""The birds_catalog stage (notebook 10, `birds/dvc.yaml`): AviList 2025's 11,131 species, each with a text (the
checklist's sentence offline; the Wikipedia article's summary with `birds.articles: wikipedia`), and the taxonomy
as a knowledge graph."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from polarcatalog.config import Params
from polarcatalog.curate.summarize import create_summarizer
from polarcatalog.data.birds import BirdCatalog
from polarcatalog.data.wikipedia import WikipediaFetcher
from polarcatalog.kg.knowledge_graph import KnowledgeGraph
from polarcatalog.kg.taxonomy import taxonomy_triples
from polarcatalog.kg.triples import table

WIKI_CACHE = Path("data/raw/wikipedia")


def catalog(params: Params, wiki_cache: Path = WIKI_CACHE) -> pd.DataFrame:
    """One row per species: `species_id`, `name` (common), `scientific`, `genus`, `family`, `order`, `text`,
    `text_source`, `summary` (what retrieval and a reader see)."""
    bp = params.birds
    cat = BirdCatalog()
    species = cat.species.head(bp.species_limit) if bp.species_limit else cat.species
    species = species.rename(columns={"common": "name"}).copy()
    taxonomy = cat.taxonomy_text()[: len(species)]
    if bp.articles == "taxonomy":
        species["text"], species["text_source"] = taxonomy, "avilist-2025"
        species["summary"] = species["text"]
        return species
    fetcher = WikipediaFetcher(wiki_cache, api=bp.wikipedia_api, min_interval_s=bp.wikipedia_interval_s)
    by_name = fetcher.articles(species["name"].tolist(), "Wikipedia articles (common name)")
    retry = [s for n, s in zip(species["name"], species["scientific"]) if by_name[n].missing]
    by_sci = fetcher.articles(retry, "Wikipedia articles (scientific name)") if retry else {}
    texts, sources = [], []
    for n, s, tax in zip(species["name"], species["scientific"], taxonomy):
        art = by_name[n] if not by_name[n].missing else by_sci.get(s)
        ok = art is not None and not art.missing and art.text.strip()
        texts.append(art.text if ok else tax)
        sources.append(f"wikipedia:{art.title}" if ok else "avilist-2025 (no article)")
    species["text"], species["text_source"] = texts, sources
    cur = params.curate
    summarizer = create_summarizer(cur.summarizer, max_words=cur.summary_max_words, model=cur.llm_model, domain="birds",
                                   max_new_tokens=cur.llm_max_new_tokens, device=params.encoders.device,
                                   batch_size=cur.llm_batch_size)
    species["summary"] = summarizer.summarize(species["name"].tolist(), texts)
    return species


def taxonomy_graph(species: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, object]]:
    """The catalog's taxonomy as triples and the graph's statistics (plus the mean number of congeners)."""
    rows = species.rename(columns={"name": "common"})[["scientific", "common", "genus", "family", "order"]]
    triples, _ = taxonomy_triples(rows)
    df = table(triples)
    stats = KnowledgeGraph(df).stats()
    per_genus = species.groupby("genus")["species_id"].transform("size")
    stats["congeners per species (mean)"] = round(float((per_genus - 1).mean()), 2)
    return df, stats
