"""VR-RAG retrieval (Neural Catalog §5): multimodal chunk vectors, encoder ensemble, visual re-rank.

    m   = (f(t) + 1/K sum_i g(a_i)) / 2                  Eq. 1, l2-normalised
    s_m = mean over ensemble encoders of g(q) . m        §5.1 (score average)
    s_i = h(q) . (1/K sum_i h(a_i))                      Eq. 2
    s   = lam * s_m + (1 - lam) * s_i                    Eq. 2

The ensemble score is one inner product: with the query [g_1(q), ..., g_E(q)] / E and the chunk
[m_1, ..., m_E], q.m = 1/E sum_e g_e(q).m_e exactly, so a single FAISS index returns the ensemble's top-r.
Candidates (top-r chunks -> species, s_m, s_i) are computed once per query set; re-ranking for any λ or k
is then a sort (the λ and top-k ablations cost no encoding and no search).

Departure (documented): the paper re-ranks chunks and then maps them to species; here chunks are first
reduced to their species (max s_m), then species are re-ranked. Because s_i is a species-level score,
max over a species' chunks of λ s_m + (1-λ) s_i equals λ max s_m + (1-λ) s_i: the order is identical.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from polarcatalog import vectors
from polarcatalog.content_cache import ContentCache
from polarcatalog.eval import splits
from polarcatalog.eval.splits import species_folds
from polarcatalog.index import build_index, search
from polarcatalog.retrieval.hubness import csls_penalty
from polarcatalog.vectors import frozen, group_sums, l2_normalise


def species_means(vectors: np.ndarray, owner: np.ndarray, n_species: int) -> np.ndarray:
    """Mean of each species' anchor vectors (1/K sum_i g(a_i)), l2-normalised."""
    sums = group_sums(vectors, owner, n_species)
    counts = np.bincount(owner, minlength=n_species)[:, None]
    return l2_normalise(sums / np.maximum(counts, 1))


def fit_bridge(text: np.ndarray, target: np.ndarray, chunk_species: np.ndarray, folds: int, alpha: float,
               seed: int, cache: Path | None = None) -> tuple[np.ndarray, float]:
    """Ridge map text -> image space, cross-fitted by species folds: a chunk is mapped by a model that never
    saw its species (open-vocabulary honesty). Returns (bridged chunk vectors, mean held-out cosine).

    The bias is a column of ones penalised like every other weight (no separate intercept), solved by Cholesky.
    `cache`: a folder where the bridged vectors are kept by the content of the inputs and the code (`ContentCache`;
    every stage builds the catalog, and a λ experiment rebuilds it with the same inputs)."""
    def fit() -> dict[str, np.ndarray]:
        X = np.hstack([text, np.ones((len(text), 1), text.dtype)]).astype(np.float64)
        return {"bridged": l2_normalise(ridge_cross_fit(X, target.astype(np.float64),
                                                        species_folds(chunk_species, folds, seed), alpha))}

    # the code: this file, the species folds and the normalisation it calls; scikit-learn solves what Cholesky refuses
    kept = ContentCache(cache, [Path(__file__), splits, vectors], scipy=version("scipy"), sklearn=version("scikit-learn"))
    out = kept.get({"folds": folds, "alpha": alpha, "seed": seed}, (text, target, chunk_species), fit,
                   lambda k: k["bridged"].shape == (len(text), target.shape[1]))["bridged"]
    return out, float(np.mean(np.sum(out * l2_normalise(target), axis=1)))


def ridge_cross_fit(X: np.ndarray, Y: np.ndarray, fold: np.ndarray, alpha: float) -> np.ndarray:
    """Each row predicted by a ridge regression fitted on the other folds' rows: the arithmetic of scikit-learn's
    `cross_val_predict(Ridge(alpha, fit_intercept=False, solver="cholesky"), X, Y, cv=PredefinedSplit(fold))`,
    operation for operation, primal or (more features than rows) dual, so the same bits (tests/test_retrieval.py
    holds them side by side), without importing scikit-learn into every stage's kernel (about a second). A system
    Cholesky cannot solve is handed to scikit-learn itself, which falls back to its SVD solver."""
    from scipy import linalg  # heavy: scipy.linalg, for the solve only

    out = np.empty((len(X), Y.shape[1]), np.float64)
    try:
        for f in np.unique(fold[fold != -1]):
            test, train = np.flatnonzero(fold == f), np.flatnonzero(fold != f)
            x, y = X[train], Y[train]
            if x.shape[1] > x.shape[0]:  # the kernel form: (x x^T + alpha I) dual = y, coef = (x^T dual)^T
                K = x @ x.T
                K.flat[:: K.shape[0] + 1] += np.float64(alpha)
                coef = (x.T @ linalg.solve(K, y, assume_a="pos", overwrite_a=False)).T
            else:  # (x^T x + alpha I) coef^T = x^T y
                A = x.T @ x
                xy = x.T @ y
                A.flat[:: A.shape[1] + 1] += np.float64(alpha)
                coef = linalg.solve(A, xy, assume_a="pos", overwrite_a=True).T
            out[test] = X[test] @ coef.T + 0.0  # + the intercept scikit-learn adds without one, 0.0
    except linalg.LinAlgError:
        from sklearn.linear_model import Ridge  # heavy: only for a system the Cholesky solve refused
        from sklearn.model_selection import PredefinedSplit, cross_val_predict

        return cross_val_predict(Ridge(alpha, fit_intercept=False, solver="cholesky"), X, Y, cv=PredefinedSplit(fold))
    return out


@dataclass
class Catalog:
    """Per-encoder catalog vectors, ready for retrieval (centered, bridged, normalised)."""

    species_ids: np.ndarray  # [S] species id of each catalog row
    chunk_species: np.ndarray  # [C] index into species_ids
    anchor_mean: dict[str, np.ndarray]  # name -> [S, d]
    chunk_text: dict[str, np.ndarray]  # name -> [C, d] f(t) in the encoder's space
    centre: dict[str, np.ndarray]  # name -> [d] the catalog's mean anchor (per-domain centering)
    bridge_cosine: dict[str, float] = field(default_factory=dict)

    def chunk_vectors(self, name: str, mode: str) -> np.ndarray:
        a = self.anchor_mean[name][self.chunk_species]
        if mode == "anchors":
            return a
        if mode == "text":
            return self.chunk_text[name]
        if mode == "multimodal":
            return l2_normalise((self.chunk_text[name] + a) / 2.0)  # Eq. 1
        raise ValueError(f"unknown chunk mode {mode!r}; allowed: text, multimodal, anchors")


def build_catalog(species_ids: np.ndarray, anchor_species: np.ndarray, chunk_species: np.ndarray,
                  anchors: dict[str, np.ndarray], native_text: dict[str, np.ndarray | None], bridge_text: np.ndarray | None,
                  center: bool, folds: int, alpha: float, seed: int, cache: Path | None = None) -> Catalog:
    """anchor_species / chunk_species: species id per anchor row / chunk row. `cache`: where the bridges are kept
    (`fit_bridge`)."""
    pos = {s: i for i, s in enumerate(species_ids)}
    a_idx = np.array([pos[s] for s in anchor_species])
    c_idx = np.array([pos[s] for s in chunk_species])
    means, texts, centres, quality = {}, {}, {}, {}
    for name, vecs in anchors.items():
        m = species_means(vecs, a_idx, len(species_ids))
        centres[name] = m.mean(0) if center else np.zeros(m.shape[1], np.float32)
        means[name] = l2_normalise(m - centres[name])
        if native_text.get(name) is not None:
            texts[name] = l2_normalise(native_text[name])
        elif bridge_text is not None:
            texts[name], quality[name] = fit_bridge(bridge_text, means[name][c_idx], c_idx, folds, alpha, seed, cache)
    ro = lambda d: {n: frozen(v) for n, v in d.items()}  # noqa: E731  # read by every configuration's lookups
    return Catalog(frozen(np.array(species_ids)), frozen(c_idx), ro(means), ro(texts), ro(centres), quality)


def prepare_queries(queries: dict[str, np.ndarray], catalog: Catalog, center: bool, min_center_batch: int,
                    by: str = "batch", reference: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Per-domain centering, then l2-normalised. `by="batch"`: by the queries' own mean when there are at least
    `min_center_batch` of them (label-free but transductive: the batch being scored shapes every query's vector);
    otherwise, and with `by="catalog"`, by the catalog's mean (each query on its own). `by="reference"`: by the mean of
    `reference`, a fixed sample of the query domain (the pipeline's dev queries): each query on its own, yet centred
    on its domain."""
    if by == "reference" and center and reference is None:
        raise ValueError("retrieval.query_centre reference needs reference queries (the pipeline's dev queries)")
    out = {}
    for name, q in queries.items():
        if not center:
            out[name] = l2_normalise(q)
        elif by == "reference":
            out[name] = l2_normalise(q - reference[name].mean(0))
        elif batch_statistics(len(q), center, min_center_batch, by):
            out[name] = l2_normalise(q - q.mean(0))
        else:
            out[name] = l2_normalise(q - catalog.centre[name])
    return out


def batch_statistics(n_queries: int, center: bool, min_center_batch: int, by: str) -> bool:
    """Are these queries scored as a batch (centred by their own mean, hubness over the batch)? The one rule that
    `prepare_queries` and the hubness correction share."""
    return center and by == "batch" and n_queries >= min_center_batch


def query_encoders(ensemble: Sequence[str], reranker: str | None) -> list[str]:
    """Image encoders a query must pass through for a retrieval config: the ensemble and the re-ranker."""
    return list(dict.fromkeys([*ensemble, *([reranker] if reranker else [])]))


@dataclass
class Candidates:
    """Top-r species per query before re-ranking: catalog row of each species (-1 = none), s_m and s_i."""

    species_idx: np.ndarray  # [Q, L] int, rows of Catalog.species_ids
    s_m: np.ndarray  # [Q, L]
    s_i: np.ndarray  # [Q, L] (NaN without a re-ranker)


@dataclass
class Ranking:
    """Re-ranked top-k: species *ids* (-1 = none) with each component's score."""

    species_ids: np.ndarray  # [Q, k]
    s_m: np.ndarray
    s_i: np.ndarray
    s: np.ndarray


class VRRAG:
    """The retriever of one configuration: ensemble g over chunk vectors (FAISS), visual re-ranker h."""

    def __init__(self, catalog: Catalog, ensemble: list[str], chunks: str = "multimodal", reranker: str | None = None,
                 r: int = 100, index: str = "flat", nlist: int = 256, seed: int = 0):
        missing = [n for n in [*ensemble, reranker] if n and n not in catalog.anchor_mean]
        if missing:
            raise ValueError(f"encoders {missing} have no catalog features; embed them first (encoders.image)")
        self.catalog, self.ensemble, self.chunks, self.reranker, self.r = catalog, ensemble, chunks, reranker, r
        self.kind, self.nlist, self.seed = index, nlist, seed
        self.m = np.hstack([catalog.chunk_vectors(n, chunks) for n in ensemble])
        self._index = None  # built on first use without the hubness correction (with it, each batch has its own)

    @property
    def index(self) -> Any:  # a FAISS index
        if self._index is None:
            self._index = build_index(self.m, self.kind, self.nlist, seed=self.seed)
        return self._index

    def candidates(self, queries: dict[str, np.ndarray], block: int = 1024, hubness_k: int | None = None,
                   hubness_ref: dict[str, np.ndarray] | None = None) -> Candidates:
        """`hubness_k`: CSLS (`retrieval.hubness`), both for s_m and for s_i, over this query batch or, when given, over
        `hubness_ref` (prepared reference queries of the same domain: each query is then scored on its own)."""
        E = len(self.ensemble)
        q = np.hstack([queries[n] for n in self.ensemble]) / E
        hub = hubness_ref if hubness_ref is not None else queries
        if hubness_k:
            # the per-chunk penalty enters the inner product as one more column: FAISS still returns the exact top-r
            penalty = np.mean([csls_penalty(hub[n], self.catalog.chunk_vectors(n, self.chunks), hubness_k) for n in self.ensemble], axis=0)
            index = build_index(np.hstack([self.m, -penalty[:, None]]), self.kind, self.nlist, seed=self.seed)
            q = np.hstack([q, np.ones((len(q), 1), q.dtype)])
        else:
            index = self.index
        s_m, ids = search(index, q, self.r)
        sp = np.where(ids >= 0, self.catalog.chunk_species[np.maximum(ids, 0)], -1)
        species, s_m = _first_per_species(sp, s_m, len(self.catalog.species_ids))
        if self.reranker is None:
            return Candidates(species, s_m, np.full_like(s_m, np.nan))
        h_q, h_a = queries[self.reranker], self.catalog.anchor_mean[self.reranker]
        penalty = csls_penalty(hub[self.reranker], h_a, hubness_k) if hubness_k else np.zeros(len(h_a), np.float32)
        s_i = np.full(species.shape, np.nan, np.float32)
        for i in range(0, len(q), block):  # full [block, S] matmul, then gather: no per-candidate loop
            full = h_q[i : i + block] @ h_a.T - penalty
            sp_b = species[i : i + block]
            s_i[i : i + block] = np.where(sp_b >= 0, np.take_along_axis(full, np.maximum(sp_b, 0), 1), np.nan)
        return Candidates(species, s_m, s_i)

    def rank(self, cands: Candidates, lam: float, k: int) -> Ranking:
        return rank(cands, lam, k, self.catalog.species_ids, rerank=self.reranker is not None)


def rank(cands: Candidates, lam: float, k: int, species_ids: np.ndarray, rerank: bool = True) -> Ranking:
    """Eq. 2 and a stable sort (ties keep the s_m order); top-k species ids out."""
    valid = cands.species_idx >= 0
    with np.errstate(invalid="ignore"):  # padding holds -inf / NaN; masked on the next line
        s = lam * cands.s_m + (1.0 - lam) * cands.s_i if rerank else cands.s_m.copy()
    s = np.where(valid, s, -np.inf)
    order = np.argsort(-s, axis=1, kind="stable")[:, :k]
    take = lambda a: np.take_along_axis(a, order, 1)  # noqa: E731
    sp = take(cands.species_idx)
    ids = np.where(sp >= 0, np.asarray(species_ids)[np.maximum(sp, 0)], -1)
    return Ranking(ids, take(cands.s_m), take(cands.s_i), take(s))


def _first_per_species(sp: np.ndarray, scores: np.ndarray, n_species: int) -> tuple[np.ndarray, np.ndarray]:
    """Keep each species' first (= best, rows are sorted) chunk per row; compact rows left. Vectorised."""
    Q, L = sp.shape
    key = np.where(sp >= 0, np.arange(Q)[:, None] * (n_species + 1) + sp, -1 - np.arange(Q * L).reshape(Q, L))
    _, first = np.unique(key.ravel(), return_index=True)
    keep = np.zeros(Q * L, bool)
    keep[first] = True
    keep = keep.reshape(Q, L) & (sp >= 0)
    order = np.argsort(~keep, axis=1, kind="stable")
    species = np.where(np.take_along_axis(keep, order, 1), np.take_along_axis(sp, order, 1), -1)
    s = np.where(species >= 0, np.take_along_axis(scores, order, 1), -np.inf).astype(np.float32)
    return species, s
