"""Encode image files and texts through the cache: batched, `inference_mode` inside the encoders, progress on the
terminal (`polarcatalog.progress`)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from polarcatalog.data.images import BadImageError, Quarantine, load_rgb
from polarcatalog.encoders import ImageEncoder, TextEncoder
from polarcatalog.encoders.preprocess import Preprocess, apply
from polarcatalog.features.cache import FeatureCache, item_key, text_sha
from polarcatalog.io import sha256_file
from polarcatalog.progress import progress
from polarcatalog.vectors import l2_normalise


def _count(stats: dict[str, int] | None, found: np.ndarray) -> None:
    if stats is not None:
        stats["hits"] = stats.get("hits", 0) + int(found.sum())
        stats["misses"] = stats.get("misses", 0) + int((~found).sum())


def encode_image_files(encoder: ImageEncoder, paths: Sequence[str | Path], cache_root: str | Path, views: Preprocess,
                       shas: Sequence[str] | None = None, batch_size: int = 64,
                       quarantine: Quarantine | None = None, stats: dict[str, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(vectors [n, d] l2-normalised, ok mask). Mirrored views are averaged; unreadable files give ok=False."""
    cache = FeatureCache(cache_root, encoder.id)
    shas = list(shas) if shas is not None else [sha256_file(p) if Path(p).is_file() else "missing" for p in paths]
    keys = [item_key(encoder.id, views.key(), s) for s in shas]
    found, cached = cache.get(keys)
    _count(stats, found)
    out = np.zeros((len(keys), encoder.dim), np.float32)
    ok = np.ones(len(keys), dtype=bool)
    if cached is not None:
        out[found] = cached
    todo = np.flatnonzero(~found)
    if len(todo):
        loaded, images = [], []
        for i in progress(todo, len(todo), f"decode + views ({encoder.id})", unit="img", disable=len(todo) < 2 * batch_size):
            try:
                images.append(apply(load_rgb(paths[i]), views))
                loaded.append(i)
            except BadImageError as err:
                ok[i] = False
                if quarantine is not None:
                    quarantine.add(paths[i], err.reason, "query")
        if loaded:
            n_views = len(images[0])
            flat = [v for vs in images for v in vs]
            vecs = encoder.encode_images(flat, batch_size).reshape(len(loaded), n_views, -1).mean(1)
            vecs = l2_normalise(vecs)
            out[loaded] = vecs
            cache.put([keys[i] for i in loaded], vecs)
    return out, ok


def encode_texts(encoder: TextEncoder, texts: Sequence[str], cache_root: str | Path, batch_size: int = 64,
                 stats: dict[str, int] | None = None) -> np.ndarray:
    cache = FeatureCache(cache_root, encoder.id)
    keys = [item_key(encoder.id, "text", text_sha(t)) for t in texts]
    found, cached = cache.get(keys)
    _count(stats, found)
    out = np.zeros((len(keys), encoder.dim), np.float32)
    if cached is not None:
        out[found] = cached
    todo = np.flatnonzero(~found)
    if len(todo):
        vecs = l2_normalise(encoder.encode_texts([texts[i] for i in todo], batch_size))
        out[todo] = vecs
        cache.put([keys[i] for i in todo], vecs)
    return out
