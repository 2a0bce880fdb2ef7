"""Vector helpers shared by every layer that compares features by cosine."""

from __future__ import annotations

import numpy as np
from scipy import sparse


def l2_normalise(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Unit rows along `axis` as float32 (inner product = cosine); an all-zero row stays zero instead of NaN. The
    quotient is a new array already: float32 input is returned as it is, not copied once more."""
    return (x / np.linalg.norm(x, axis=axis, keepdims=True).clip(1e-12)).astype(np.float32, copy=False)


def frozen(x: np.ndarray) -> np.ndarray:
    """`x`, read-only from now on, with the memory it views (np.load's arrays are views of the array read from the
    file): what a stage derives once and only reads (the workspace's features, a catalog's vectors). An in-place
    write then raises instead of changing the input of every later use, and the content cache hashes such an array
    once (`content_cache.array_digest`)."""
    base = x
    while isinstance(base, np.ndarray):
        base.flags.writeable = False
        base = base.base
    return x


def group_sums(x: np.ndarray, group: np.ndarray, n_groups: int) -> np.ndarray:
    """[n_groups, d] float64 sums of the rows of `x` [N, d] by `group` [N] (e.g. a species' anchor vectors). A 0/1
    group-by-row matrix times `x`: scipy adds each group's rows in row order, as `np.add.at` does, so the bits are
    np.add.at's (tests/test_retrieval.py), in one pass over the rows instead of one Python-level add per row."""
    x = np.asarray(x, np.float64)
    group = np.asarray(group)
    member = sparse.csr_matrix((np.ones(len(group)), (group, np.arange(len(group)))), shape=(n_groups, len(group)))
    return member @ x if x.shape[1] else np.zeros((n_groups, 0))
