"""Content-addressed feature cache: every (encoder, item) is encoded once, ever.

Key = sha256(encoder id | view options | content sha256). One folder per encoder holds `index.parquet`
(key -> shard, row, the shard's sha256) and float32 `.npy` shards, loaded with allow_pickle=False (nothing is
unpickled). A new λ, k or retrieval switch reads vectors from here; only a new encoder, new views or new content
encodes anything.

What holds when several processes write at once (two `polarcatalog evaluate` runs, parallel queue workers):
- A shard is named by the sha256 of its bytes, written to a temporary file and renamed into place (`os.replace`), so
  it is complete or absent, and two writers never share a name.
- The index is updated under an exclusive lock (`fcntl.flock` on `index.lock`): read from disk, appended to,
  written to a temporary file, renamed. No writer's entries are lost.
- Every shard is checked when read: its sha256 against the index, and every value finite. A damaged shard fails with
  `CacheError`, naming the file and the fix; it is never used.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd

from polarcatalog.io import safe_name

COLUMNS = {"key": str, "shard": str, "row": np.int64, "sha256": str}


class CacheError(RuntimeError):
    """A cache file that cannot be trusted."""


def item_key(encoder_id: str, views: str, content_sha256: str) -> str:
    return hashlib.sha256(f"{encoder_id}|{views}|{content_sha256}".encode()).hexdigest()


def text_sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class FeatureCache:
    def __init__(self, root: str | Path, encoder_id: str):
        self.folder = Path(root) / f"{safe_name(encoder_id)[:60]}-{hashlib.sha256(encoder_id.encode()).hexdigest()[:10]}"
        self.encoder_id = encoder_id
        self.hits = self.misses = 0
        self._index: pd.DataFrame | None = None
        self._by_key: pd.DataFrame | None = None
        # Shards are named by their content hash and never rewritten, so one verified read per instance is enough: a
        # stage asks for the same shards once per view, and re-hashing them each time cost more than the lookup.
        self._verified: dict[tuple[str, str], np.ndarray] = {}

    def _fix(self) -> str:
        return f"the feature cache is derived data: delete {self.folder} (or `make clean-features`) and rerun"

    def _read_index(self) -> pd.DataFrame:
        path = self.folder / "index.parquet"
        if not path.is_file():
            return pd.DataFrame({c: pd.Series([], dtype=t) for c, t in COLUMNS.items()})
        try:
            index = pd.read_parquet(path)
        except Exception as err:  # pyarrow raises several types for a damaged file
            raise CacheError(f"{path}: unreadable ({err}); {self._fix()}") from None
        if "sha256" not in index:  # written before shards were checksummed: still checked for finite values
            index["sha256"] = ""
        return index

    @property
    def index(self) -> pd.DataFrame:
        if self._index is None:
            self._index = self._read_index()
        return self._index

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / "index.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _load_shard(self, shard: str, sha256: str) -> np.ndarray:
        path = self.folder / f"{shard}.npy"
        try:
            raw = path.read_bytes()
        except OSError as err:
            raise CacheError(f"{path}: missing or unreadable ({err.strerror}); {self._fix()}") from None
        if sha256 and hashlib.sha256(raw).hexdigest() != sha256:
            raise CacheError(f"{path}: contents differ from the checksum in the index (damaged or overwritten); {self._fix()}")
        try:
            data = np.load(path, allow_pickle=False)
        except (ValueError, EOFError, OSError) as err:
            raise CacheError(f"{path}: not a complete .npy array ({err}); {self._fix()}") from None
        if data.ndim != 2 or not np.isfinite(data).all():
            raise CacheError(f"{path}: shape {data.shape} or non-finite values; {self._fix()}")
        self._verified[shard, sha256] = data
        return data

    def get(self, keys: list[str]) -> tuple[np.ndarray, np.ndarray | None]:
        """(found mask, vectors of the found keys in order) — None when nothing is found."""
        if self._by_key is None:
            self._by_key = self.index.drop_duplicates("key").set_index("key")
        idx = self._by_key
        found = np.array([k in idx.index for k in keys], dtype=bool)
        self.hits += int(found.sum())
        self.misses += int((~found).sum())
        if not found.any():
            return found, None
        rows = idx.loc[[k for k, f in zip(keys, found) if f]]  # in request order; repeated keys repeat
        shards, row = rows["shard"].to_numpy(), rows["row"].to_numpy(dtype=np.int64)
        out = None
        for shard, sha in dict.fromkeys(zip(shards, rows["sha256"].to_numpy())):
            data = self._verified.get((shard, sha))
            if data is None:
                data = self._load_shard(shard, sha)
            if out is None:
                out = np.empty((len(rows), data.shape[1]), np.float32)
            mask = shards == shard
            if row[mask].max() >= len(data):
                raise CacheError(f"{self.folder / shard}.npy: fewer rows than the index says; {self._fix()}")
            out[mask] = data[row[mask]]
        return found, out

    def put(self, keys: list[str], vectors: np.ndarray) -> None:
        if not keys:
            return
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if len(keys) != len(vectors) or not np.isfinite(vectors).all():
            raise ValueError(f"{self.encoder_id}: {len(keys)} keys for {len(vectors)} vectors, or non-finite values: "
                             "not cached")
        self.folder.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        np.save(buffer, vectors, allow_pickle=False)
        raw = buffer.getvalue()
        sha = hashlib.sha256(raw).hexdigest()
        shard = f"shard_{sha[:24]}"
        _atomic_write(self.folder / f"{shard}.npy", raw)
        new = pd.DataFrame({"key": keys, "shard": shard, "row": np.arange(len(keys), dtype=np.int64), "sha256": sha})
        with self._locked():  # read-modify-write of the index: whatever other writers added since is kept
            index = pd.concat([self._read_index(), new], ignore_index=True)
            _atomic_write(self.folder / "index.parquet", _parquet_bytes(index))
        self._index, self._by_key = index, None


def _parquet_bytes(df: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    df.to_parquet(buffer, index=False)
    return buffer.getvalue()
