"""Evidence-conditioned evaluation (§4.4 and Tables 3, 4, 8 of the graph-RAG paper), per query, for the protocol's
bootstrap: completeness (the gold species is in the final candidate set; with one gold item per query this is the
paper's Completeness and its Recall@k at once), MRR of the gold in the answerer's order, accuracy (the answerer's
first species is the gold), and accuracy conditioned on completeness: the complete stratum, and the incomplete one,
the floor that no retrieved evidence explains.

The stratum values are NaN outside their stratum, so the protocol's means and CIs are over the stratum alone. With
the visual re-ranker as the answerer, it can only pick from the final set, so incomplete-stratum accuracy is 0 by
construction; the column matters once a reader model names species on its own (the GPU profile).
"""

from __future__ import annotations

from pathlib import PurePath

import numpy as np

from polarcatalog.data.names import name_key
from polarcatalog.eval.metrics import gold_ranks

METRICS = ("completeness", "Recall@k", "MRR", "accuracy", "accuracy (complete)", "accuracy (incomplete)")


def answer_order(final: np.ndarray, answer_scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(final candidates in the answerer's order, their scores): padding (-1) last."""
    s = np.where(final >= 0, np.take_along_axis(answer_scores, np.maximum(final, 0), 1), -np.inf)
    order = np.argsort(-s, axis=1, kind="stable")
    return np.take_along_axis(final, order, 1), np.take_along_axis(s, order, 1)


def evidence_values(final: np.ndarray, answer_scores: np.ndarray, gold: np.ndarray, k: int) -> dict[str, np.ndarray]:
    """Per query, `METRICS` (Recall@k named with its k): `final` [n, m] catalog indices (-1 padding), `answer_scores`
    [n, S] the answerer's score of every species, `gold` [n] catalog index (-1: not in the catalog, never complete).
    Recall@k: the gold among the answerer's first k of the set (the paper's Recall@k over what the reader is shown
    first). Ties are pessimistic."""
    ranked, keys = answer_order(final, answer_scores)
    ranks = gold_ranks(ranked, gold, keys)
    complete = np.isfinite(ranks)
    correct = (ranks == 1).astype(np.float64)
    return {"completeness": complete.astype(np.float64), f"Recall@{k}": (ranks <= k).astype(np.float64),
            "MRR": np.where(complete, 1.0 / ranks, 0.0),
            "accuracy": correct, "accuracy (complete)": np.where(complete, correct, np.nan),
            "accuracy (incomplete)": np.where(complete, np.nan, correct)}


def deficit(base_top: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """[n] True where the base retriever's top-k lacks the gold species: the evidence-deficit stratum, where bridging
    can help (the paper's bridge questions); False is the control (its comparison questions)."""
    return ~(base_top == gold[:, None]).any(1)


def leakage(query_paths: list[str], gold_names: list[str], query_sha: list[str], catalog_sha: set[str]) -> dict[str, np.ndarray]:
    """Per query, the ways its label can be had without recognising the image (the paper's integrity checks, §4.2.1):
    - `label in file path`: the species' name (any spelling, `data.names.name_key`) is the file's stem or a folder of
      its path: recoverable by anything that reads paths;
    - `copy of a catalog image`: the file's bytes equal a catalog image's (sha256): recoverable by lookup.
    Whether a flag matters depends on what the pipeline reads: features are keyed by content hash, never by path."""
    named = []
    for path, name in zip(query_paths, gold_names):
        parts = [name_key(p) for p in (*PurePath(path).parent.parts[-2:], PurePath(path).stem)]
        named.append(bool(name) and name_key(name) in parts)
    return {"label in file path": np.array(named, bool),
            "copy of a catalog image": np.array([s in catalog_sha for s in query_sha], bool)}
