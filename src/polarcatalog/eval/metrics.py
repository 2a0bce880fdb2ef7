"""mRR@k, Recall@k, accuracy@1 (VR-RAG §6.1 "Metrics").

mRR@k = mean over queries of 1/rank of the first correct species when rank <= k, else 0. A query whose
gold species is absent from the ranked list (or from the catalog) has rank = inf and scores 0 everywhere.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np


def gold_ranks(ranked: np.ndarray, gold: np.ndarray, keys: np.ndarray | tuple[np.ndarray, ...] | None = None) -> np.ndarray:
    """1-based rank of `gold[q]` in `ranked[q]` (species ids, -1 = padding), inf if absent.

    With `keys` (the sort key(s) of `ranked`, in ranked order, e.g. the fused score s), ties are pessimistic: the
    gold ranks after every item that has exactly its key, so an arbitrary tie order (catalog position, duplicated
    artwork) never helps the method. Without keys the rank is the position."""
    ranked = np.asarray(ranked)
    hit = ranked == np.asarray(gold)[:, None]
    found = hit.any(1)
    pos = hit.argmax(1)
    if keys is None:
        return np.where(found, pos + 1.0, np.inf)
    keys = keys if isinstance(keys, tuple) else (keys,)
    rows = np.arange(len(ranked))
    tied = ranked >= 0
    for key in keys:
        key = np.asarray(key)
        tied &= key == key[rows, pos][:, None]
    last = ranked.shape[1] - np.argmax(tied[:, ::-1], axis=1)  # 1-based index of the last item tied with gold
    return np.where(found, np.maximum(last, pos + 1).astype(np.float64), np.inf)


def mrr_at_k(ranks: np.ndarray, k: int) -> float:
    ranks = np.asarray(ranks, dtype=np.float64)
    return float(np.mean(np.where(ranks <= k, 1.0 / ranks, 0.0))) if len(ranks) else float("nan")


def recall_at_k(ranks: np.ndarray, k: int) -> float:
    ranks = np.asarray(ranks, dtype=np.float64)
    return float(np.mean(ranks <= k)) if len(ranks) else float("nan")


RANK_METRICS = ("mRR@1", "mRR@5", "mRR@10", "R@10")


def per_query(ranks: np.ndarray, names: tuple[str, ...] = RANK_METRICS) -> np.ndarray:
    """[Q, len(names)] per-query values whose means are the metrics (`mRR@k`: 1/rank within k; `R@k`: rank <= k):
    the form the bootstrap resamples."""
    r = np.asarray(ranks, dtype=np.float64)[:, None]
    ks = np.array([int(n.split("@")[1]) for n in names], dtype=np.float64)[None, :]
    reciprocal = np.array([n.startswith("mRR") for n in names])[None, :]
    inside = r <= ks
    return np.where(inside, np.where(reciprocal, 1.0 / r, 1.0), 0.0)


def chance(n_species: int, names: tuple[str, ...] = RANK_METRICS) -> dict[str, float]:
    """Each metric for a ranking drawn uniformly at random over `n_species`: the floor every table shows."""
    out = {}
    for name in names:
        k = min(int(name.split("@")[1]), n_species)
        out[name] = sum(1.0 / r for r in range(1, k + 1)) / n_species if name.startswith("mRR") else k / n_species
    return out


def summarize(ranks: np.ndarray, mrr_ks: Iterable[int] = (1, 5, 10), recall_ks: Iterable[int] = (1, 5, 10)) -> dict[str, float]:
    out = {f"mRR@{k}": mrr_at_k(ranks, k) for k in mrr_ks}
    out |= {f"R@{k}": recall_at_k(ranks, k) for k in recall_ks}
    out["acc@1"] = recall_at_k(ranks, 1)
    out["n"] = int(len(ranks))
    return out


def group_masks(groups: Sequence[str] | np.ndarray) -> dict[str, np.ndarray]:
    """`all` plus one boolean mask per query group (e.g. regular / shiny sprites), groups in sorted order."""
    g = np.asarray(groups)
    return {"all": np.ones(len(g), bool)} | {str(v): g == v for v in np.unique(g)}
