"""Near-duplicate search between two image sets: the leakage check that can fail.

A byte-identical copy is only the crudest leak; a query that is a resized, re-encoded or re-coloured copy of a
catalog image leaks its label just as well. Each image's subject (`regions.content_box`) is reduced to a 64-bit
difference hash (dHash: a 9 x 8 grey thumbnail, one bit per horizontal neighbour pair, brighter or not), which
survives resizing, JPEG and small colour changes; two images are near-duplicates when their hashes differ in at most
`max_distance` of the 64 bits. Hashes of unreadable images are None and match nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
from PIL import Image

from polarcatalog.data.images import BadImageError, load_rgb
from polarcatalog.data.regions import content_box

# Of 64 bits. Set from the catalog alone: a third-size JPEG (q70) of a catalog image lies 0-4 bits from it.
MAX_DISTANCE = 6


def dhash(image: Image.Image) -> int:
    """The subject's 64-bit difference hash."""
    grey = np.asarray(content_box(image).convert("L").resize((9, 8), Image.Resampling.LANCZOS), np.int16)
    bits = (grey[:, 1:] > grey[:, :-1]).ravel()
    return int(np.packbits(bits).view(">u8")[0])


def dhash_hex(image: Image.Image) -> str:
    """`dhash` as 16 hex digits: how the curate stage keeps each image's hash in its tables (exact, unlike a float
    column, and None where the image did not load), so that later stages compare images without reading them."""
    return f"{dhash(image):016x}"


def parse_hashes(values: Sequence[str | None]) -> np.ma.MaskedArray:
    """[n] uint64 hashes from `dhash_hex` strings; a missing one (None, NaN) is masked, as in `hashes`."""
    ok = np.array([isinstance(v, str) for v in values], bool)
    out = np.array([int(v, 16) if isinstance(v, str) else 0 for v in values], np.uint64)
    return np.ma.masked_array(out, ~ok)


def hashes(paths: Sequence[str | Path]) -> np.ma.MaskedArray:
    """[n] uint64 hashes; an unreadable image is masked (it matches nothing)."""
    out, ok = np.zeros(len(paths), np.uint64), np.ones(len(paths), bool)
    for i, p in enumerate(paths):
        try:
            out[i] = dhash(load_rgb(p))
        except (BadImageError, OSError):
            ok[i] = False
    return np.ma.masked_array(out, ~ok)


def near_duplicates(queries: np.ma.MaskedArray, catalog: np.ma.MaskedArray, max_distance: int = MAX_DISTANCE) -> tuple[np.ndarray, np.ndarray]:
    """(flag [Q], nearest catalog index [Q]): a query is flagged when some catalog hash lies within `max_distance`
    bits of its own. Masked (unreadable) hashes match nothing."""
    q, c = np.ma.getdata(queries).astype(np.uint64), np.ma.getdata(catalog).astype(np.uint64)
    dist = np.bitwise_count(q[:, None] ^ c[None, :]).astype(np.int16)  # [Q, C] Hamming distances
    dist[np.ma.getmaskarray(queries)] = 65
    dist[:, np.ma.getmaskarray(catalog)] = 65
    nearest = dist.argmin(1) if dist.size else np.zeros(len(q), int)
    flag = dist.min(1) <= max_distance if dist.size else np.zeros(len(q), bool)
    return flag, nearest
