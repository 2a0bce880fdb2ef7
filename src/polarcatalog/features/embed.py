"""The embed stage: every configured encoder encodes anchors, queries and chunks once (through the cache),
and the stage writes one matrix per (encoder, item set) in the row order of the processed tables. With
`encoders.local_grid` > 0 the anchors (catalog images, the memory's visual nodes) are also encoded as local
views, [anchors, grid², dim], for PolarMem's global + local proposer; queries are not (a 4x cost per query)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from polarcatalog.config import Params
from polarcatalog.data.images import BadImageError, load_rgb
from polarcatalog.encoders import create_image_encoder, create_text_encoder, has_text_tower
from polarcatalog.encoders.preprocess import Preprocess, content_box, local_views
from polarcatalog.features.encode import encode_image_files, encode_texts


def safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


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


def views_for(params: Params, anchor_scale: int | None) -> tuple[Preprocess, Preprocess]:
    e = params.encoders
    anchor = Preprocess(e.content_box, anchor_scale, e.mirror_anchors)
    query = Preprocess(e.content_box, None, False)
    return anchor, query


def resolve_anchor_scale(params: Params, query_paths: list[str]) -> int | None:
    s = params.encoders.anchor_scale
    if s is None:
        return None
    return query_content_scale(query_paths, seed=params.dataset.seed) if s == "auto" else int(s)


@dataclass
class EmbedResult:
    manifest: dict[str, Any]
    cache_stats: dict[str, dict[str, int]]


def embed_all(params: Params, processed: Path, out: Path, cache_root: Path) -> EmbedResult:
    anchors = pd.read_parquet(processed / "anchors.parquet")
    queries = pd.read_parquet(processed / "queries.parquet")
    chunks = pd.read_parquet(processed / "chunks.parquet")
    e = params.encoders
    scale = resolve_anchor_scale(params, queries["path"].tolist())
    anchor_views, query_views = views_for(params, scale)
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {"anchor_scale": scale, "anchor_views": anchor_views.key(), "query_views": query_views.key(),
                                "anchor_ids": anchors["candidate_id"].tolist(), "query_ids": queries["query_id"].tolist(),
                                "chunk_ids": chunks["chunk_id"].tolist(), "local_grid": e.local_grid, "image": {}, "text": None}
    stats: dict[str, dict[str, int]] = {}
    for name in e.image:
        enc = create_image_encoder(name, e.device)
        st = stats.setdefault(name, {})
        a, a_ok = encode_image_files(enc, anchors["path"].tolist(), cache_root, anchor_views, batch_size=e.batch_size, stats=st)
        q, q_ok = encode_image_files(enc, queries["path"].tolist(), cache_root, query_views,
                                     shas=queries["sha256"].tolist(), batch_size=e.batch_size, stats=st)
        if not (a_ok.all() and q_ok.all()):
            bad = [p for p, ok in zip(list(anchors["path"]) + list(queries["path"]), np.r_[a_ok, q_ok]) if not ok]
            raise BadImageError(bad[0], f"{len(bad)} curated image(s) no longer load; rerun the curate stage")
        entry = {"id": enc.id, "dim": enc.dim, "anchors": f"{safe_name(name)}__anchors.npy", "queries": f"{safe_name(name)}__queries.npy"}
        np.save(out / entry["anchors"], a, allow_pickle=False)
        np.save(out / entry["queries"], q, allow_pickle=False)
        if e.local_grid:
            local = [encode_image_files(enc, anchors["path"].tolist(), cache_root, v, batch_size=e.batch_size, stats=st)[0]
                     for v in local_views(anchor_views, e.local_grid)]
            entry["anchors_local"] = f"{safe_name(name)}__anchors_local.npy"
            np.save(out / entry["anchors_local"], np.stack(local, axis=1), allow_pickle=False)
        if has_text_tower(name):
            entry["chunks"] = f"{safe_name(name)}__chunks.npy"
            np.save(out / entry["chunks"], encode_texts(enc, chunks["text"].tolist(), cache_root, e.batch_size, st), allow_pickle=False)
        manifest["image"][name] = entry
    if e.text and any("chunks" not in v for v in manifest["image"].values()):
        tenc = create_text_encoder(e.text, e.device)
        manifest["text"] = {"name": e.text, "id": tenc.id, "dim": tenc.dim, "chunks": f"{safe_name(e.text)}__chunks.npy"}
        st = stats.setdefault(e.text, {})
        np.save(out / manifest["text"]["chunks"], encode_texts(tenc, chunks["text"].tolist(), cache_root, e.batch_size, st), allow_pickle=False)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return EmbedResult(manifest, stats)
