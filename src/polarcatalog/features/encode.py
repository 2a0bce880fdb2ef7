"""Encode image files and texts through the cache: batched, `inference_mode` inside the encoders, each image decoded
once for all its views, progress on the terminal (`polarcatalog.progress`)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from PIL import Image

from polarcatalog.data.images import BadImageError, Quarantine, blank_reason, load_rgb
from polarcatalog.encoders import ImageEncoder, TextEncoder
from polarcatalog.encoders.encoder_types import PreparingEncoder
from polarcatalog.encoders.preprocess import Preprocess, derive
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
    """(vectors [n, d] l2-normalised, ok mask) of one view; see `encode_image_views`."""
    vecs, ok = encode_image_views(encoder, paths, cache_root, [views], shas, batch_size, quarantine, stats)
    return vecs[0], ok


def decode_size(views: Sequence[Preprocess]) -> int | None:
    """The smallest image side every view of a request can be cut from without losing detail: views that all shrink
    the subject to `scale_to` px need about 3x that (the subject rarely fills the image); any other view needs the full
    decode."""
    return 3 * max(v.scale_to for v in views) if views and all(v.scale_to for v in views) else None


def cached_view_key(view: Preprocess, decode: int | None) -> str:
    """A view's cache key, naming the decode it is cut from when that is a reduced one: a JPEG decoded at another size
    gives other pixels, so the same view cut from another decode is another vector, never a cache hit. (A request's
    views share one decode, `decode_size` of them all, so what a request returns never depends on what the cache held.)"""
    return view.key() if decode is None else f"{view.key()}|decode>={decode}"


def encode_image_views(encoder: ImageEncoder, paths: Sequence[str | Path], cache_root: str | Path,
                       views: Sequence[Preprocess], shas: Sequence[str] | None = None, batch_size: int = 64,
                       quarantine: Quarantine | None = None, stats: dict[str, int] | None = None,
                       role: str = "query", refuse_blank: bool = False) -> tuple[list[np.ndarray], np.ndarray]:
    """([n, d] l2-normalised vectors per view, ok mask); an unreadable file gives ok=False (and a quarantine entry).

    Only (image, view) pairs missing from the cache are encoded. Each image with anything missing is decoded once
    and all its views are cut from that decode (`derive`). The work streams in chunks of about one batch of views: the
    next chunk is decoded (and, for a `PreparingEncoder`, preprocessed) on a second thread while the encoder runs on
    this one, so the first forward starts after one chunk, not after every decode, and the progress bar counts images
    with a rate and an ETA. `refuse_blank`: a one-colour image is quarantined like an unreadable one (a user's query
    folder; the curated catalog has its own checks)."""
    cache = FeatureCache(cache_root, encoder.id)
    shas = list(shas) if shas is not None else [sha256_file(p) if Path(p).is_file() else "missing" for p in paths]
    at = decode_size(views)
    keys = [[item_key(encoder.id, cached_view_key(v, at), s) for s in shas] for v in views]
    lookups = [cache.get(vkeys) for vkeys in keys]
    missing = np.array([~found for found, _ in lookups], bool).reshape(len(views), len(shas))
    todo = np.flatnonzero(missing.any(0))
    # the width from the cache when it holds everything: a deferred encoder (registry.image_encoder) is then never built
    dim = next((c.shape[1] for _, c in lookups if c is not None), None) if not len(todo) else None
    out = [np.zeros((len(shas), dim or encoder.dim), np.float32) for _ in views]
    for j, (found, cached) in enumerate(lookups):
        _count(stats, found)
        if cached is not None:
            out[j][found] = cached
    ok = np.ones(len(shas), dtype=bool)
    if not len(todo):
        return out, ok
    done: list[list[int]] = [[] for _ in views]
    fresh: list[list[np.ndarray]] = [[] for _ in views]

    prepares = isinstance(encoder, PreparingEncoder)

    def decode(chunk: np.ndarray) -> tuple[list[tuple[int, list[Image.Image]]], Any]:
        """The chunk's views, and (for an encoder that can) its preprocessed batch: all off the forward's thread."""
        loaded = []
        for i in chunk:
            want = [v for j, v in enumerate(views) if missing[j, i]]
            try:
                im = load_rgb(paths[i], at_least=at)
                blank = blank_reason(im) if refuse_blank else None
                if blank:
                    raise BadImageError(paths[i], blank)
                loaded.append((int(i), derive(im, want)))
            except BadImageError as err:
                ok[i] = False
                if quarantine is not None:
                    quarantine.add(paths[i], err.reason, role)
        flat = [im for _, per_view in loaded for im in per_view]
        return loaded, encoder.prepare(flat) if prepares and flat else flat

    step = max(1, batch_size // len(views))  # a chunk is about one batch of forwards
    chunks = [todo[i : i + step] for i in range(0, len(todo), step)]
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(decode, chunks[0])
        for n, chunk in enumerate(progress(chunks, len(todo), f"encode {encoder.id}", unit="img",
                                           weights=(len(c) for c in chunks), disable=len(todo) < 2 * batch_size)):
            loaded, batch = pending.result()
            if n + 1 < len(chunks):
                pending = pool.submit(decode, chunks[n + 1])
            if not loaded:
                continue
            vecs = iter(encoder.encode_prepared(batch) if prepares else encoder.encode_images(batch, batch_size))
            for i, per_view in loaded:
                for j in np.flatnonzero(missing[:, i]):
                    done[j].append(i)
                    fresh[j].append(next(vecs))
    for j, rows in enumerate(done):
        if rows:
            vecs = l2_normalise(np.stack(fresh[j]))
            out[j][rows] = vecs
            cache.put([keys[j][i] for i in rows], vecs)
    return out, ok


TEXT_BLOCK = 32  # texts handed to the encoder per call (each still encoded alone): progress steps, thread-pool work
TEXT_VIEW = "text:one-by-one"  # the cache key's view: how a text vector was computed (see encode_texts)


def encode_texts(encoder: TextEncoder, texts: Sequence[str], cache_root: str | Path, batch_size: int = 64,
                 stats: dict[str, int] | None = None) -> np.ndarray:
    """Text vectors through the cache, each text encoded on its own. A transformer's padded batch changes the low bits
    of a text's vector with the other texts in its batch (measured: up to 8e-8 for MiniLM), and the cache decides
    which texts share a batch, so a warm cache and a fresh clone disagreed bit for bit. One text per forward
    (`batch_size` 1 to the encoder, which may still run several texts side by side on separate threads, as MiniLM's
    numpy path does), a vector depends on its text alone (`batch_size` here is kept for the API)."""
    cache = FeatureCache(cache_root, encoder.id)
    keys = [item_key(encoder.id, TEXT_VIEW, text_sha(t)) for t in texts]
    found, cached = cache.get(keys)
    _count(stats, found)
    out = np.zeros((len(keys), encoder.dim), np.float32)
    if cached is not None:
        out[found] = cached
    todo = np.flatnonzero(~found)
    if len(todo):
        blocks = [todo[i:i + TEXT_BLOCK] for i in range(0, len(todo), TEXT_BLOCK)]
        vecs = l2_normalise(np.vstack([encoder.encode_texts([texts[i] for i in block], 1) for block in progress(
            blocks, len(todo), f"encode {encoder.id}", unit="text", weights=map(len, blocks), disable=len(todo) < 200)]))
        out[todo] = vecs
        cache.put([keys[i] for i in todo], vecs)
    return out
