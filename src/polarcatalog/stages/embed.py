"""The embed stage (notebook 02): which views each image is encoded in, and the stage's headline numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from polarcatalog.config import Params
from polarcatalog.encoders.preprocess import Preprocess
from polarcatalog.features.embedding import EmbedResult, Views, embed_all, query_content_scale, resolve_anchor_scale
from polarcatalog.from_params import query_view
from polarcatalog.io import read_table


def embed_views(params: Params, query_paths: list[str]) -> Views:
    """Anchors scale-matched to the queries (`encoders.anchor_scale`: auto measures `query_paths`), flips of both.
    The pipeline passes its dev queries only: the scale is chosen on dev, never on the test queries it reports."""
    e = params.encoders
    measured = query_content_scale(query_paths, seed=params.dataset.seed) if e.anchor_scale == "auto" or e.compare_scale_ratios else 0
    scale = resolve_anchor_scale(e.anchor_scale, measured, e.anchor_scale_ratio)
    compare = tuple(Preprocess(e.content_box, px) for px in dict.fromkeys(round(r * measured) for r in e.compare_scale_ratios)
                    if px != scale)
    return Views(Preprocess(e.content_box, scale), query_view(params), e.local_grid, e.flips, compare)


def run_embed(params: Params, processed: Path, out: Path, cache_root: Path) -> EmbedResult:
    e = params.encoders
    queries = read_table(processed / "queries.parquet").merge(read_table(processed / "splits.parquet"), on="species_id")
    views = embed_views(params, queries.loc[queries["split"] == "dev", "path"].tolist())
    return embed_all(processed, out, cache_root, e.image, e.text, views, e.device, e.batch_size, e.runtime,
                     colour_basis_for=params.retrieval.colour_invariant)


def headline(d: dict[str, Any]) -> dict[str, Any]:
    return {"anchor_scale_px": d["anchor_scale_px"]}  # its item counts are the curate stage's
