"""The embed stage: every configured encoder encodes anchors, queries and chunks once (through the cache),
and the stage writes one matrix per (encoder, item set) in the row order of the processed tables. With
`Views.local_grid` > 0 the anchors (catalog images, the memory's visual nodes) are also encoded as local
views, [anchors, grid², dim], for PolarMem's global + local proposer; queries are not (a 4x cost per query)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Sequence

import numpy as np

from polarcatalog.data.images import BadImageError, load_rgb
from polarcatalog.data.regions import content_box
from polarcatalog.encoders import EncoderSpec, create_encoder, has_text_tower
from polarcatalog.encoders.preprocess import Preprocess, local_views
from polarcatalog.features.encode import encode_image_files, encode_texts
from polarcatalog.io import read_table, safe_name


@dataclass(frozen=True)
class Views:
    """What the encoders see: anchors (content box, scale-matched to the queries, mirrored), queries (content box),
    and `local_grid`² local cells of every anchor (0 = none)."""

    anchor: Preprocess
    query: Preprocess
    local_grid: int = 0


def query_content_scale(paths: list[str], sample: int = 400, seed: int = 0) -> int:
    """Median longest side (px) of the queries' content boxes: the scale anchors are shrunk to."""
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(paths), size=min(sample, len(paths)), replace=False) if paths else []
    sides = []
    for i in pick:
        try:
            sides.append(max(content_box(load_rgb(paths[i]), pad_frac=0.0).size))
        except BadImageError:
            continue
    if not sides:
        raise ValueError("no readable query image to measure the query scale from; set encoders.anchor_scale to a number")
    return int(np.median(sides))


def resolve_anchor_scale(setting: Literal["auto"] | int | None, query_paths: list[str], seed: int = 0) -> int | None:
    """`auto` measures the queries' content size; a number is taken as is; None leaves anchors at full size."""
    if setting is None:
        return None
    return query_content_scale(query_paths, seed=seed) if setting == "auto" else int(setting)


@dataclass
class EmbedResult:
    manifest: dict[str, Any]
    cache_stats: dict[str, dict[str, int]]


def embed_all(processed: Path, out: Path, cache_root: Path, image: Sequence[EncoderSpec], text: EncoderSpec | None,
              views: Views, device: str = "auto", batch_size: int = 64) -> EmbedResult:
    anchors = read_table(processed / "anchors.parquet")
    queries = read_table(processed / "queries.parquet")
    chunks = read_table(processed / "chunks.parquet")
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {"anchor_scale": views.anchor.scale_to, "anchor_views": views.anchor.key(),
                                "query_views": views.query.key(), "anchor_ids": anchors["candidate_id"].tolist(),
                                "query_ids": queries["query_id"].tolist(), "chunk_ids": chunks["chunk_id"].tolist(),
                                "local_grid": views.local_grid, "image": {}, "text": None}
    stats: dict[str, dict[str, int]] = {}
    for spec in image:
        name = spec.name
        enc = create_encoder(spec, "image", device)
        st = stats.setdefault(name, {})
        a, a_ok = encode_image_files(enc, anchors["path"].tolist(), cache_root, views.anchor, batch_size=batch_size, stats=st)
        q, q_ok = encode_image_files(enc, queries["path"].tolist(), cache_root, views.query,
                                     shas=queries["sha256"].tolist(), batch_size=batch_size, stats=st)
        if not (a_ok.all() and q_ok.all()):
            bad = [p for p, ok in zip(list(anchors["path"]) + list(queries["path"]), np.r_[a_ok, q_ok]) if not ok]
            raise BadImageError(bad[0], f"{len(bad)} curated image(s) no longer load; rerun the curate stage")
        entry = {"id": enc.id, "dim": enc.dim, "anchors": f"{safe_name(name)}__anchors.npy", "queries": f"{safe_name(name)}__queries.npy"}
        np.save(out / entry["anchors"], a, allow_pickle=False)
        np.save(out / entry["queries"], q, allow_pickle=False)
        if views.local_grid:
            local = [encode_image_files(enc, anchors["path"].tolist(), cache_root, v, batch_size=batch_size, stats=st)[0]
                     for v in local_views(views.anchor, views.local_grid)]
            entry["anchors_local"] = f"{safe_name(name)}__anchors_local.npy"
            np.save(out / entry["anchors_local"], np.stack(local, axis=1), allow_pickle=False)
        if has_text_tower(spec):
            entry["chunks"] = f"{safe_name(name)}__chunks.npy"
            np.save(out / entry["chunks"], encode_texts(enc, chunks["text"].tolist(), cache_root, batch_size, st), allow_pickle=False)
        manifest["image"][name] = entry
    if text and any("chunks" not in v for v in manifest["image"].values()):
        tenc = create_encoder(text, "text", device)
        manifest["text"] = {"name": text.name, "id": tenc.id, "dim": tenc.dim, "chunks": f"{safe_name(text.name)}__chunks.npy"}
        st = stats.setdefault(text.name, {})
        np.save(out / manifest["text"]["chunks"], encode_texts(tenc, chunks["text"].tolist(), cache_root, batch_size, st), allow_pickle=False)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return EmbedResult(manifest, stats)
