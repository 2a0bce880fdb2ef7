"""Derived arrays kept on disk by the content of everything they are computed from: the input arrays, the knobs, the
source of the code that computes them (every module the caller names: the computation's own and the helpers whose
arithmetic it uses), the libraries' versions and the numerics pins in effect (they choose kernels, so low bits). A
stage rerun for a param the computation does not read (a retrieval λ, say) reads the arrays back instead of
recomputing them; any change to an input is a new key. Each entry holds its own key and is served only under it, so a
file renamed or copied over another is recomputed, not read. Derived data only: a missing or damaged file is
recomputed, and files are read with `allow_pickle=False`.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import weakref
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from polarcatalog.numerics import in_effect


LIMIT_BYTES = 1 << 30  # per folder: past it, the least recently used entries go (each is recomputed on its next use)


KEY = "__key__"  # the entry's own key, stored beside its arrays

_DIGESTS: dict[int, bytes] = {}  # id -> digest of a live read-only array that owns its memory (`array_digest`)


def array_digest(a: np.ndarray) -> bytes:
    """sha256 of an array's dtype, shape and bytes. A key hashes its inputs on every lookup, and a stage looks up
    many configurations of the same workspace (the retrieve stage's table: every row's candidates): an array that is
    read-only down to the array owning its memory (`vectors.frozen`: the workspace's features, a catalog's vectors)
    cannot change while it lives, so its digest is kept until it is freed; any other array is hashed each time."""
    a = np.asarray(a)
    kept = _immutable(a)
    if kept and id(a) in _DIGESTS:
        return _DIGESTS[id(a)]
    c = np.ascontiguousarray(a)
    h = hashlib.sha256(f"{c.dtype.str}{c.shape}".encode())
    h.update(c.view(np.uint8).reshape(-1) if c.size else b"")
    digest = h.digest()
    if kept:
        _DIGESTS[id(a)] = digest
        weakref.finalize(a, _DIGESTS.pop, id(a), None)
    return digest


def _immutable(a: np.ndarray) -> bool:
    """Read-only all the way down to the array that owns the memory (a view of a writable array may still change)."""
    while isinstance(a, np.ndarray):
        if a.flags.writeable:
            return False
        if a.base is None:
            return bool(a.flags.owndata)
        a = a.base
    return False  # memory held by another kind of object (a buffer, a memory map): it may change


class ContentCache:
    """`folder`: where the arrays are kept (None: compute every time). `code`: the modules (or source files) whose
    text is part of every key: the computation's and every helper it calls that shapes its numbers. `versions`:
    library versions that shape the numbers (numpy's and the numerics pins are always in). `limit_bytes`: the folder's
    size past which the least recently used entries are removed after a write (every code change and every
    configuration adds entries; nothing else would ever remove them)."""

    def __init__(self, folder: Path | None, code: Sequence[Path | ModuleType] = (), limit_bytes: int = LIMIT_BYTES,
                 **versions: str):
        self.folder = None if folder is None else Path(folder)
        self.limit_bytes = limit_bytes
        self.versions = {"numpy": np.__version__, "pins": in_effect(), **versions}
        self._code = sorted(str(Path(c.__file__ if isinstance(c, ModuleType) else c)) for c in code)
        self.hits = self.misses = 0

    def key(self, knobs: Mapping[str, Any], arrays: Iterable[np.ndarray]) -> str:
        h = hashlib.sha256(json.dumps({"knobs": knobs, "versions": self.versions}, sort_keys=True, default=str).encode())
        for path in self._code:
            h.update(Path(path).read_bytes())
        for a in arrays:
            h.update(array_digest(a))
        return h.hexdigest()

    def get(self, knobs: Mapping[str, Any], arrays: Iterable[np.ndarray],
            compute: Callable[[], dict[str, np.ndarray]],
            valid: Callable[[dict[str, np.ndarray]], bool] = lambda kept: True) -> dict[str, np.ndarray]:
        """The arrays `compute()` returns for these inputs: read back when kept (and `valid`), else computed and kept."""
        if self.folder is None:
            return compute()
        key = self.key(knobs, arrays)
        path = self.folder / f"{key}.npz"
        kept = _read(path, key)
        if kept is not None and valid(kept):
            self.hits += 1
            _touch(path)  # recently used: the last to go
            return kept
        self.misses += 1
        out = compute()
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=self.folder, suffix=".tmp", delete=False) as tmp:
                np.savez(tmp, **out, **{KEY: np.array(key)})
            os.replace(tmp.name, path)  # whole or not at all: two stages writing the same key write the same bytes
        except OSError:  # a read-only or full disk: the result stands, it is only not kept
            if "tmp" in locals():
                Path(tmp.name).unlink(missing_ok=True)
            return out
        self._trim(keep=path)
        return out

    def _trim(self, keep: Path) -> None:
        """Remove the least recently used entries (oldest modification time; a hit renews it) past `limit_bytes`."""
        entries = []
        for f in self.folder.glob("*.npz"):  # type: ignore[union-attr]
            try:
                st = f.stat()
            except OSError:  # removed meanwhile by another process's trim
                continue
            entries.append((st.st_mtime_ns, st.st_size, f))
        total = sum(size for _, size, _ in entries)
        for _, size, f in sorted(entries, key=lambda e: e[:1]):
            if total <= self.limit_bytes:
                break
            if f != keep:
                f.unlink(missing_ok=True)
                total -= size


def _touch(path: Path) -> None:
    try:
        os.utime(path)
    except OSError:  # a read-only cache still serves its entries
        pass


def _read(path: Path, key: str) -> dict[str, np.ndarray] | None:
    """The entry's arrays when it holds `key` (not a file of another key copied over it), else None."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            kept = {name: z[name] for name in z.files}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):  # damaged: recomputed and written again
        return None
    return kept if str(kept.pop(KEY, "")) == key else None
