"""The configured retrieval over a workspace: the catalog, the VR-RAG retriever and the query-side policy (colour
projection, centring, CSLS), in one place for the pipeline, the CLI's folder evaluation and the KG experiment:
`Retriever.build(ws, rp).rank(features)`.

`rp` is the validated `retrieval` params section (`polarcatalog.config.Retrieval`); this module reads its fields
and never parses params itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from polarcatalog import vectors
from polarcatalog.content_cache import ContentCache
from polarcatalog.eval import splits
from polarcatalog.eval.metrics import gold_ranks, per_query
from polarcatalog.eval.splits import species_folds
from polarcatalog.features.workspace import Workspace
from polarcatalog.index import faiss_index
from polarcatalog.index.faiss_index import faiss_version, gpu_available
from polarcatalog.retrieval import hubness, vrrag
from polarcatalog.retrieval.vrrag import (VRRAG, Candidates, Catalog, Ranking, batch_statistics, build_catalog,
                                          prepare_queries, query_encoders)
from polarcatalog.vectors import frozen, l2_normalise

RetrievalParams = Any  # polarcatalog.config.Retrieval (config sits above the library: not imported here)


def project_out(features: np.ndarray, basis: np.ndarray, dim: int) -> np.ndarray:
    """Features without their component in the first `dim` basis directions, l2-normalised again."""
    if dim > len(basis):
        raise ValueError(f"retrieval.colour_invariant_dim is {dim}, but the embed stage kept {len(basis)} directions "
                         "(3 per catalog anchor at most): lower retrieval.colour_invariant_dim, or embed more anchors")
    b = np.asarray(basis[:dim], np.float64)
    f = np.asarray(features, np.float64)
    return l2_normalise((f - (f @ b.T) @ b).astype(np.float32))


def colour_invariant(features: Mapping[str, np.ndarray], bases: Mapping[str, np.ndarray], names: Sequence[str],
                     dim: int) -> dict[str, np.ndarray]:
    """`features` with the colour nuisance projected out of the encoders `names` (the others unchanged); the one rule
    for the catalog's anchors, the pipeline's queries, the dev reference queries and a user's folder."""
    missing = [n for n in names if n in features and n not in bases]
    if missing:
        raise ValueError(f"retrieval.colour_invariant names {missing}, but the embed stage kept no colour basis for them: "
                         "rerun the embed stage (`dvc repro embed`) with this params.yaml")
    return {n: project_out(f, bases[n], dim) if n in names else f for n, f in features.items()}


def retrieval_features(features: dict[str, np.ndarray], ws: Workspace, rp: RetrievalParams) -> dict[str, np.ndarray]:
    """Image features as the retrieval reads them: the colour nuisance projected out of `retrieval.colour_invariant`'s
    encoders (the graph's probes keep the colours: colour concepts are among the ones they verify)."""
    return colour_invariant(features, ws.colour_basis, rp.colour_invariant, rp.colour_invariant_dim)


def catalog_for(ws: Workspace, rp: RetrievalParams) -> Catalog:
    """The workspace's catalog under `rp`, kept by content in the workspace's derived folder (`ContentCache`): every
    stage of a λ experiment builds the same catalog (the colour projection, the species means, the bridges), and the
    retrieve stage's table builds each of its configurations' again."""
    def build() -> Catalog:
        return build_catalog(ws.species["species_id"].to_numpy(), ws.anchors["species_id"].to_numpy(),
                             ws.chunks["species_id"].to_numpy(), retrieval_features(ws.anchor_f, ws, rp), ws.native_text,
                             ws.bridge_text, rp.center, rp.bridge_folds, rp.bridge_alpha, rp.seed,
                             None if ws.derived is None else ws.derived / "bridges")

    if ws.derived is None:
        return build()
    names = list(ws.anchor_f)
    projected = [n for n in names if n in rp.colour_invariant and n in ws.colour_basis]
    knobs = {"encoders": names, "colour_invariant": list(rp.colour_invariant), "colour_bases": sorted(ws.colour_basis),
             "colour_invariant_dim": rp.colour_invariant_dim, "native_text": [ws.native_text.get(n) is not None for n in names],
             "bridge_text": ws.bridge_text is not None, "center": rp.center, "bridge_folds": rp.bridge_folds,
             "bridge_alpha": rp.bridge_alpha, "seed": rp.seed}
    arrays = [ws.species["species_id"].to_numpy(), ws.anchors["species_id"].to_numpy(), ws.chunks["species_id"].to_numpy(),
              *(ws.anchor_f[n] for n in names), *(ws.colour_basis[n] for n in projected),
              *(t for t in (*(ws.native_text.get(n) for n in names), ws.bridge_text) if t is not None)]
    # the code: this module (the colour projection), the catalog's (means, bridges), the species folds and the vectors'
    kept = ContentCache(ws.derived / "catalogs", [Path(__file__), vrrag, splits, vectors], scipy=version("scipy"),
                        sklearn=version("scikit-learn"))
    return catalog_from_arrays(kept.get(knobs, arrays, lambda: catalog_arrays(build())))


def catalog_arrays(catalog: Catalog) -> dict[str, np.ndarray]:
    """A catalog as named arrays (`ContentCache` keeps arrays), in its dicts' order; `catalog_from_arrays` inverts it."""
    out = {"species_ids": catalog.species_ids, "chunk_species": catalog.chunk_species}
    for field_name in ("anchor_mean", "chunk_text", "centre"):
        out |= {f"{field_name}/{n}": v for n, v in getattr(catalog, field_name).items()}
    return out | {f"bridge_cosine/{n}": np.float64(v) for n, v in catalog.bridge_cosine.items()}


def catalog_from_arrays(arrays: Mapping[str, np.ndarray]) -> Catalog:
    parts: dict[str, dict[str, Any]] = {"anchor_mean": {}, "chunk_text": {}, "centre": {}, "bridge_cosine": {}}
    for key, value in arrays.items():
        field_name, _, name = key.partition("/")
        if name:
            parts[field_name][name] = float(value) if field_name == "bridge_cosine" else frozen(value)
    return Catalog(frozen(arrays["species_ids"]), frozen(arrays["chunk_species"]), parts["anchor_mean"], parts["chunk_text"],
                   parts["centre"], parts["bridge_cosine"])


def retriever(catalog: Catalog, rp: RetrievalParams) -> VRRAG:
    return VRRAG(catalog, list(rp.ensemble), rp.chunks, rp.reranker, rp.r, rp.index, rp.ivf_nlist, rp.seed)


@dataclass
class Retriever:
    """One retrieval configuration on a workspace's catalog: `rank(queries)` applies the query-side policy
    (`query_side`), searches (`VRRAG.candidates`) and re-ranks at the configured λ. `queries`: image features by
    encoder (the workspace's own queries when None; a user's folder passes its own), or a `QuerySide` already
    prepared by `side`."""

    ws: Workspace
    rp: RetrievalParams
    catalog: Catalog
    vr: VRRAG

    @classmethod
    def build(cls, ws: Workspace, rp: RetrievalParams, catalog: Catalog | None = None) -> "Retriever":
        catalog = catalog_for(ws, rp) if catalog is None else catalog
        return cls(ws, rp, catalog, retriever(catalog, rp))

    def side(self, features: Mapping[str, np.ndarray]) -> "QuerySide":
        """A batch of new queries (a user's folder) as the configured policy prepares them."""
        return query_side(dict(features), self.catalog, self.rp, self.ws)

    def candidates(self, queries: "Mapping[str, np.ndarray] | QuerySide | None" = None, full_depth: bool = False) -> Candidates:
        """The top-r candidates; `full_depth`: every chunk, so that a species bridged in later always has its scores.
        The workspace's own queries (`queries` None) are scored by the protocol's groups (`statistics_groups`), so
        that no test query enters a statistic that scores a dev query, and dev is scored the way test is."""
        if full_depth:
            self.vr.r = len(self.vr.m)
        if queries is None:
            return self._workspace_candidates()
        return (queries if isinstance(queries, QuerySide) else self.side(queries)).candidates(self.vr)

    def _workspace_candidates(self) -> Candidates:
        """Kept by content (`CandidateCache`): every stage that reads the configured retrieval, and every λ or k of an
        experiment, searches the same queries against the same catalog; the first computes, the others read."""
        cache = CandidateCache(self.ws.derived)
        kept = cache.get(cache.knobs(self.rp, self.vr.r), cache.inputs(self.ws, self.catalog, self.rp),
                         lambda: vars(self._search_workspace()),
                         lambda kept: len(kept["species_idx"]) == len(self.ws.queries)
                         and kept["species_idx"].shape == kept["s_m"].shape == kept["s_i"].shape)
        return Candidates(kept["species_idx"], kept["s_m"], kept["s_i"])

    def _search_workspace(self) -> Candidates:
        names = query_encoders(self.rp.ensemble, self.rp.reranker)
        parts = []
        for rows, reference in statistics_groups(self.ws, self.rp):
            rp, ref = self.rp, None if reference is None else {n: f[reference] for n, f in self.ws.query_f.items()}
            if reference is not None and not len(reference):  # a single dev species: no other species to lend statistics
                rp, ref = rp.model_copy(update={"query_centre": "catalog"}), None
            side = query_side({n: self.ws.query_f[n][rows] for n in names}, self.catalog, rp, self.ws, ref)
            parts.append((rows, side.candidates(self.vr)))
        return _merged(parts, len(self.ws.queries))

    def rank(self, queries: "Mapping[str, np.ndarray] | QuerySide | None" = None, k: int | None = None) -> Ranking:
        return self.vr.rank(self.candidates(queries), self.rp.lam, k or self.rp.r)


class CandidateCache(ContentCache):
    """The workspace queries' top-r candidates, kept by the content of all they are computed from: the catalog's and
    the queries' vectors of the encoders the configuration reads, the colour bases it projects out, the dev/test
    split and species (the query-side groups), every retrieval knob but λ and k (a re-sort of the candidates), r,
    the search's code, faiss's version and the index device (with numpy's and the pins, `ContentCache`)."""

    CODE = [Path(__file__), vrrag, hubness, faiss_index, vectors, splits]

    def __init__(self, derived: Path | None):
        super().__init__(None if derived is None else derived / "candidates", self.CODE, faiss=faiss_version())

    @staticmethod
    def knobs(rp: RetrievalParams, r: int) -> dict[str, Any]:
        knobs = {k: v for k, v in rp.model_dump(mode="json").items() if k not in ("lam", "k")}
        return knobs | {"r": r, "gpu": gpu_available()}

    @staticmethod
    def inputs(ws: Workspace, catalog: Catalog, rp: RetrievalParams) -> list[np.ndarray]:
        names = query_encoders(rp.ensemble, rp.reranker)
        arrays = [catalog.species_ids, catalog.chunk_species, ws.queries["species_id"].to_numpy(),
                  (ws.queries["split"].to_numpy() == "dev")]
        for n in names:
            arrays += [catalog.anchor_mean[n], catalog.centre[n], ws.query_f[n]]
            if rp.chunks != "anchors" and n in catalog.chunk_text:
                arrays.append(catalog.chunk_text[n])
            if n in rp.colour_invariant:
                arrays.append(ws.colour_basis[n])
        return arrays


def run_retrieval(ws: Workspace, catalog: Catalog, rp: RetrievalParams, k: int | None = None) -> tuple[VRRAG, Candidates, Ranking]:
    """One configuration on the workspace queries, with the candidates every λ and k of a sweep re-sorts; the ranking
    keeps the full candidate list (k = r)."""
    r = Retriever.build(ws, rp, catalog)
    cands = r.candidates()
    return r.vr, cands, r.vr.rank(cands, rp.lam, k or rp.r)


def query_values(ranking: Ranking, gold: np.ndarray) -> np.ndarray:
    """Per-query metric values (RANK_METRICS) of a ranking, pessimistic ties on the fused score."""
    return per_query(gold_ranks(ranking.species_ids, gold, ranking.s))


def statistics_groups(ws: Workspace, rp: RetrievalParams) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """How the workspace's queries are scored: (rows scored together, rows lending them reference statistics or None).
    No test query ever enters a statistic that scores a dev query, and dev is scored the way test is:
    - `query_centre: reference`: test with every dev query as reference; each dev fold (`retrieval.reference_folds`
      folds of the dev species) with the other dev folds as reference, so no dev query calibrates itself;
    - `batch` (transductive): each split is its own batch; test queries centre (and CSLS-correct) each other, dev
      queries each other;
    - `catalog` (or no centring): every query alone, no query statistics at all.
    Dev and test rows are never searched in one call either, so even the float rounding of a batched search of dev
    queries cannot depend on the test queries."""
    split = ws.queries["split"].to_numpy()
    dev, test = np.flatnonzero(split == "dev"), np.flatnonzero(split != "dev")
    if not rp.center or rp.query_centre in ("catalog", "batch"):
        return [(rows, None) for rows in (dev, test) if len(rows)]
    dev_species = ws.queries["species_id"].to_numpy()[dev]
    folds = min(rp.reference_folds, len(np.unique(dev_species)))  # a tiny run: one species per fold at most
    fold = species_folds(dev_species, max(folds, 1), rp.seed)
    groups = [(test, dev)] if len(test) else []
    return groups + [(dev[fold == f], dev[fold != f]) for f in range(max(folds, 1)) if (fold == f).any()]


def _merged(parts: list[tuple[np.ndarray, Candidates]], n: int) -> Candidates:
    """Candidates of row groups put back in the workspace's query order."""
    width = parts[0][1].species_idx.shape[1]
    out = Candidates(np.full((n, width), -1, parts[0][1].species_idx.dtype), np.full((n, width), -np.inf, np.float32),
                     np.full((n, width), np.nan, np.float32))
    for rows, c in parts:
        out.species_idx[rows], out.s_m[rows], out.s_i[rows] = c.species_idx, c.s_m, c.s_i
    return out


def reference_queries(ws: Workspace) -> dict[str, np.ndarray]:
    """The pipeline's dev queries: a fixed, label-free sample of the query domain whose statistics (mean, CSLS
    neighbourhoods) `retrieval.query_centre: reference` lends to queries scored one by one."""
    dev = ws.queries["split"].to_numpy() == "dev"
    return {n: f[dev] for n, f in ws.query_f.items()}


@dataclass(frozen=True)
class QuerySide:
    """Queries ready for `VRRAG.candidates`: centred and normalised, with CSLS's neighbourhood size (None = off) and
    the prepared queries CSLS reads (None = the queries themselves)."""

    queries: dict[str, np.ndarray]
    by: str  # what centred them: batch | catalog | reference | none
    hubness_k: int | None
    hubness_ref: dict[str, np.ndarray] | None = None

    def candidates(self, vr: VRRAG) -> Candidates:
        return vr.candidates(self.queries, hubness_k=self.hubness_k, hubness_ref=self.hubness_ref)


def query_side(features: dict[str, np.ndarray], catalog: Catalog, rp: RetrievalParams, ws: Workspace,
               reference: dict[str, np.ndarray] | None = None) -> QuerySide:
    """The one place that reads `retrieval.query_centre` and `retrieval.hubness`: by the batch (transductive), by the
    catalog mean, or by reference queries (`reference`, by default every dev query: `reference_queries`). A batch under
    `min_center_batch` (a user's small folder) is too small to be its own statistics: it falls back to
    `small_batch_centre`, the reference queries or the catalog mean (no CSLS)."""
    csls = rp.hubness_k if rp.hubness == "csls" else None
    features = retrieval_features(features, ws, rp)
    n = len(next(iter(features.values())))
    by = rp.query_centre
    if rp.center and by == "batch" and n < rp.min_center_batch:
        by = rp.small_batch_centre
    if rp.center and by == "reference":
        reference = reference_queries(ws) if reference is None else reference
        ref = retrieval_features({name: v for name, v in reference.items() if name in features}, ws, rp)
        prep = lambda f: prepare_queries(f, catalog, rp.center, rp.min_center_batch, "reference", ref)  # noqa: E731
        return QuerySide(prep(features), "reference", csls, prep(ref))
    batch = batch_statistics(n, rp.center, rp.min_center_batch, by)
    return QuerySide(prepare_queries(features, catalog, rp.center, rp.min_center_batch, by),
                     "batch" if batch else "catalog" if rp.center else "none", csls if batch else None)


def score_matrices(cands: Candidates, n_species: int, lam: float, rerank: bool) -> tuple[np.ndarray, np.ndarray]:
    """(base [Q, S], answer [Q, S]) from candidates searched to full depth: every species' first-stage score s_m (the
    base retriever) and fused re-rank score (VR-RAG Eq. 2, the answerer); -inf for a species not scored."""
    rows = np.broadcast_to(np.arange(cands.species_idx.shape[0])[:, None], cands.species_idx.shape)
    ok = cands.species_idx >= 0
    base = np.full((cands.species_idx.shape[0], n_species), -np.inf)
    answer = np.full_like(base, -np.inf)
    base[rows[ok], cands.species_idx[ok]] = cands.s_m[ok]
    fused = lam * cands.s_m + (1 - lam) * cands.s_i if rerank else cands.s_m
    answer[rows[ok], cands.species_idx[ok]] = fused[ok]
    return base, answer


def species_scores(retriever: Retriever, queries: "Mapping[str, np.ndarray] | QuerySide | None" = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(base [Q, S], answer [Q, S], catalog species ids [S]) for the queries (as `Retriever.candidates` takes them),
    searched to full depth: what the KG bridge reads."""
    rp, ids = retriever.rp, np.asarray(retriever.catalog.species_ids)
    base, answer = score_matrices(retriever.candidates(queries, full_depth=True), len(ids), rp.lam, rp.reranker is not None)
    return base, answer, ids
