"""Content-addressed feature cache: every (encoder, item) is encoded once, ever.

Key = sha256(encoder id | view options | content sha256). One folder per encoder holds `index.parquet`
(key -> shard, row) and float32 `.npy` shards, loaded with allow_pickle=False (nothing is unpickled).
A new λ, k or retrieval switch reads vectors from here; only a new encoder, new views or new content
encodes anything.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd

from polarcatalog.io import safe_name


def item_key(encoder_id: str, views: str, content_sha256: str) -> str:
    return hashlib.sha256(f"{encoder_id}|{views}|{content_sha256}".encode()).hexdigest()


def text_sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class FeatureCache:
    def __init__(self, root: str | Path, encoder_id: str):
        self.folder = Path(root) / f"{safe_name(encoder_id)[:60]}-{hashlib.sha256(encoder_id.encode()).hexdigest()[:10]}"
        self.encoder_id = encoder_id
        self.hits = self.misses = 0
        self._index: pd.DataFrame | None = None

    @property
    def index(self) -> pd.DataFrame:
        if self._index is None:
            path = self.folder / "index.parquet"
            empty = pd.DataFrame({"key": pd.Series([], dtype=str), "shard": pd.Series([], dtype=str),
                                  "row": pd.Series([], dtype=np.int64)})
            self._index = pd.read_parquet(path) if path.is_file() else empty
        return self._index

    def get(self, keys: list[str]) -> tuple[np.ndarray, np.ndarray | None]:
        """(found mask, vectors of the found keys in order) — None when nothing is found."""
        idx = self.index.drop_duplicates("key").set_index("key")
        found = np.array([k in idx.index for k in keys], dtype=bool)
        self.hits += int(found.sum())
        self.misses += int((~found).sum())
        if not found.any():
            return found, None
        rows = idx.loc[[k for k, f in zip(keys, found) if f]]  # in request order; repeated keys repeat
        shards, row = rows["shard"].to_numpy(), rows["row"].to_numpy(dtype=np.int64)
        out = None
        for shard in dict.fromkeys(shards):
            data = np.load(self.folder / f"{shard}.npy", allow_pickle=False, mmap_mode="r")
            if out is None:
                out = np.empty((len(rows), data.shape[1]), np.float32)
            mask = shards == shard
            out[mask] = data[row[mask]]
        return found, out

    def put(self, keys: list[str], vectors: np.ndarray) -> None:
        if not keys:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        shard = f"shard_{len(set(self.index['shard'])):05d}"
        np.save(self.folder / f"{shard}.npy", np.ascontiguousarray(vectors, dtype=np.float32), allow_pickle=False)
        new = pd.DataFrame({"key": keys, "shard": shard, "row": np.arange(len(keys))})
        self._index = pd.concat([self.index, new], ignore_index=True)
        self._index.to_parquet(self.folder / "index.parquet", index=False)
