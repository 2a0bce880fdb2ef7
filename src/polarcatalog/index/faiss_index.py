"""One function for every index the project builds: exact flat inner product by default, IVF for scale,
moved to the GPU when faiss-gpu is installed (the `gpu` extra) and a GPU is visible."""

from __future__ import annotations

import warnings
from typing import Any, Literal

import numpy as np

from polarcatalog.numerics import single_threaded_faiss


def _faiss() -> Any:
    try:
        import faiss  # optional: the `cpu` or `gpu` extra; a clear message when neither is installed
    except ImportError as exc:
        raise ImportError("faiss is not installed: `make venv` installs faiss-cpu (extra `cpu`), "
                          "or use EXTRAS=gpu,dev on a GPU machine") from exc
    single_threaded_faiss(faiss)  # the same scores whatever the machine's core count (polarcatalog.numerics)
    return faiss


def faiss_version() -> str:
    """The installed faiss's version (faiss-cpu or faiss-gpu): its kernels shape a search's low bits."""
    return _faiss().__version__


def gpu_available() -> bool:
    faiss = _faiss()
    return hasattr(faiss, "get_num_gpus") and faiss.get_num_gpus() > 0


def build_index(vectors: np.ndarray, kind: Literal["flat", "ivf"] = "flat", nlist: int = 256,
                use_gpu: bool | None = None, seed: int = 0) -> Any:
    """Inner-product index over l2-normalised rows (IP = cosine). IVF trains on the vectors themselves."""
    faiss = _faiss()
    x = np.ascontiguousarray(vectors, dtype=np.float32)
    d = x.shape[1]
    if kind == "flat":
        index = faiss.IndexFlatIP(d)
    elif kind == "ivf":
        cap = max(1, len(x) // 39)  # FAISS wants >= 39 training points per list
        if nlist > cap:  # said, not silent: the run's configuration line would otherwise name a value it did not use
            warnings.warn(f"retrieval.ivf_nlist = {nlist}: {len(x)} vectors train at most {cap} IVF lists (39 points "
                          f"per list), so {cap} are used; set retrieval.ivf_nlist <= {cap}, or retrieval.index: flat "
                          "(exact, and as fast at this size)", stacklevel=2)
            nlist = cap
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, nlist, faiss.METRIC_INNER_PRODUCT)
        index.cp.seed = seed
        index.train(x)
        index.nprobe = max(1, nlist // 8)
    else:
        raise ValueError(f"unknown index kind {kind!r}; allowed: flat, ivf")
    if use_gpu is None:
        use_gpu = gpu_available()
    if use_gpu:
        index = faiss.index_cpu_to_all_gpus(index)
    index.add(x)
    return index


def search(index: Any, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(scores [q, k], ids [q, k]); ids are -1 where fewer than k items exist."""
    k = min(k, index.ntotal)
    return index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
