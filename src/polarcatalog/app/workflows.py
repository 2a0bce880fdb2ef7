"""Each stage's wiring: validated params -> the library's typed calls. The notebooks call these (and the CLI's
folder evaluation reuses them), so a stage notebook reads top to bottom as narrative plus a few calls."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from polarcatalog.config import Params, Retrieval
from polarcatalog.data.domain import Domain, create_domain
from polarcatalog.encoders.preprocess import Preprocess
from polarcatalog.eval.metrics import gold_ranks, per_query
from polarcatalog.eval.protocol import Protocol
from polarcatalog.features.colour_nuisance import colour_invariant
from polarcatalog.features.embed import EmbedResult, Views, embed_all, query_content_scale, resolve_anchor_scale
from polarcatalog.features.workspace import Workspace
from polarcatalog.io import read_table
from polarcatalog.memory.evaluate import ConstrainedQueries, catalog_neighbours, make_constrained_queries
from polarcatalog.memory.graph import PolarGraph
from polarcatalog.memory.inputs import GraphInputs, graph_inputs
from polarcatalog.memory.memories import edge_quality, pad_concepts
from polarcatalog.memory.propose import Proposer, create_proposer
from polarcatalog.memory.sweeps import PolarSetup
from polarcatalog.memory.verifiers import Verifier, create_verifier, load_scores
from polarcatalog.paths import RAW
from polarcatalog.retrieval.vrrag import (VRRAG, Candidates, Catalog, Ranking, batch_statistics, build_catalog, prepare_queries,
                                          query_encoders)


def domain_for(params: Params, raw: Path = RAW) -> Domain:
    return create_domain(params.dataset.domain, raw=raw, size_bins=tuple(params.curate.size_bins_m))


# -- embed ----------------------------------------------------------------------------------------------------
def query_view(params: Params) -> Preprocess:
    """How a query image is seen: at its native pixels (an enlarged sprite unblocked), its content box, no scaling."""
    return Preprocess(params.encoders.content_box, None, unblock=True)


def embed_views(params: Params, query_paths: list[str]) -> Views:
    """Anchors scale-matched to the queries (`encoders.anchor_scale`: auto measures `query_paths`), flips of both.
    The pipeline passes its dev queries only: the scale is chosen on dev, never on the test queries it reports."""
    e = params.encoders
    measured = query_content_scale(query_paths, seed=params.dataset.seed) if e.anchor_scale == "auto" or e.compare_scale_ratios else 0
    scale = resolve_anchor_scale(e.anchor_scale, measured, e.anchor_scale_ratio)
    compare = tuple(Preprocess(e.content_box, px) for px in dict.fromkeys(round(r * measured) for r in e.compare_scale_ratios)
                    if px != scale)
    return Views(Preprocess(e.content_box, scale), query_view(params), e.local_grid, e.flips, compare)


def run_embed(params: Params, processed: Path, out: Path, cache_root: Path) -> EmbedResult:
    e = params.encoders
    queries = read_table(processed / "queries.parquet").merge(read_table(processed / "splits.parquet"), on="species_id")
    views = embed_views(params, queries.loc[queries["split"] == "dev", "path"].tolist())
    return embed_all(processed, out, cache_root, e.image, e.text, views, e.device, e.batch_size, e.runtime,
                     colour_basis_for=params.retrieval.colour_invariant)


# -- retrieve -------------------------------------------------------------------------------------------------
def retrieval_features(features: dict[str, np.ndarray], ws: Workspace, rp: Retrieval) -> dict[str, np.ndarray]:
    """Image features as the retrieval reads them: the colour nuisance projected out of `retrieval.colour_invariant`'s
    encoders (the graph's probes keep the colours: colour concepts are among the ones they verify)."""
    return colour_invariant(features, ws.colour_basis, rp.colour_invariant, rp.colour_invariant_dim)


def catalog_for(ws: Workspace, rp: Retrieval) -> Catalog:
    return build_catalog(ws.species["species_id"].to_numpy(), ws.anchors["species_id"].to_numpy(),
                         ws.chunks["species_id"].to_numpy(), retrieval_features(ws.anchor_f, ws, rp), ws.native_text, ws.bridge_text,
                         rp.center, rp.bridge_folds, rp.bridge_alpha, rp.seed)


def retriever(catalog: Catalog, rp: Retrieval) -> VRRAG:
    return VRRAG(catalog, list(rp.ensemble), rp.chunks, rp.reranker, rp.r, rp.index, rp.ivf_nlist, rp.seed)


def run_retrieval(ws: Workspace, catalog: Catalog, rp: Retrieval, k: int | None = None) -> tuple[VRRAG, Candidates, Ranking]:
    """One configuration on the workspace queries; the ranking keeps the full candidate list (k = r)."""
    vr = retriever(catalog, rp)
    cands = query_side({n: ws.query_f[n] for n in query_encoders(rp.ensemble, rp.reranker)}, catalog, rp, ws).candidates(vr)
    return vr, cands, vr.rank(cands, rp.lam, k or rp.r)


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


def query_side(features: dict[str, np.ndarray], catalog: Catalog, rp: Retrieval, ws: Workspace) -> QuerySide:
    """The one place that reads `retrieval.query_centre` and `retrieval.hubness`, for the pipeline, the CLI and the KG
    experiment: by the batch (transductive), by the catalog mean, or by the reference queries (`reference_queries`).
    A batch under `min_center_batch` (a user's small folder) is too small to be its own statistics: it falls back to
    `small_batch_centre`, the reference queries or the catalog mean (no CSLS)."""
    csls = rp.hubness_k if rp.hubness == "csls" else None
    features = retrieval_features(features, ws, rp)
    n = len(next(iter(features.values())))
    by = rp.query_centre
    if rp.center and by == "batch" and n < rp.min_center_batch:
        by = rp.small_batch_centre
    if rp.center and by == "reference":
        ref = retrieval_features({name: v for name, v in reference_queries(ws).items() if name in features}, ws, rp)
        prep = lambda f: prepare_queries(f, catalog, rp.center, rp.min_center_batch, "reference", ref)  # noqa: E731
        return QuerySide(prep(features), "reference", csls, prep(ref))
    batch = batch_statistics(n, rp.center, rp.min_center_batch, by)
    return QuerySide(prepare_queries(features, catalog, rp.center, rp.min_center_batch, by),
                     "batch" if batch else "catalog" if rp.center else "none", csls if batch else None)


def configured_label(rp: Retrieval) -> str:
    rerank = f" + re-rank {rp.reranker} λ={rp.lam}" if rp.reranker else ""
    return f"{'+'.join(rp.ensemble)} · {rp.chunks}{rerank} (configured)"


def non_transductive(rp: Retrieval) -> tuple[str, Retrieval]:
    """The configured pipeline with every query centred alone by the catalog mean: no use of the test batch."""
    return f"{configured_label(rp).removesuffix(' (configured)')} · catalog-mean centring (non-transductive)", \
        rp.model_copy(update={"query_centre": "catalog"})


def reference_statistics(rp: Retrieval) -> tuple[str, Retrieval]:
    """The configured pipeline with every query scored alone, centred and hubness-corrected by the dev queries'
    statistics (`query_centre: reference`): non-transductive on test (dev queries are their own reference)."""
    return f"{configured_label(rp).removesuffix(' (configured)')} · dev-query statistics (non-transductive on test)", \
        rp.model_copy(update={"query_centre": "reference"})


def table5_configurations(rp: Retrieval, image_encoders: list[str]) -> list[tuple[str, Retrieval]]:
    """VR-RAG's Table 5 as configurations: chunk type (text / multimodal Eq. 1 / anchors), the re-ranker, single
    encoders and the score ensemble of every embedded image encoder, and the configured pipeline without the
    transductive query-batch centring. Components that hurt stay in. The configured row is always present."""
    ens = list(rp.ensemble)
    name = "+".join(ens)
    rows: list[tuple[str, Retrieval]] = []
    for mode in ("text", "multimodal", "anchors"):
        rows.append((f"{name} · {mode}", rp.model_copy(update={"chunks": mode, "reranker": None})))
    if rp.reranker:
        rows.append((configured_label(rp), rp))
    for enc in image_encoders:
        if [enc] != ens:
            rows.append((f"{enc} · anchors", rp.model_copy(update={"ensemble": [enc], "chunks": "anchors", "reranker": None})))
    if len(image_encoders) > 1 and list(image_encoders) != ens:
        everyone = "+".join(image_encoders)
        for mode in ("multimodal", "anchors"):
            rows.append((f"ensemble {everyone} · {mode}", rp.model_copy(update={"ensemble": list(image_encoders), "chunks": mode, "reranker": None})))
        if rp.reranker:
            rows.append((f"ensemble {everyone} · anchors + re-rank {rp.reranker} λ={rp.lam}",
                         rp.model_copy(update={"ensemble": list(image_encoders), "chunks": "anchors"})))
    rows = [(configured_label(rp) if cfg == rp else label, cfg) for label, cfg in rows]
    if not any(cfg == rp for _, cfg in rows):
        rows.insert(0, (configured_label(rp), rp))
    if rp.center and rp.query_centre == "batch":
        rows += [non_transductive(rp), reference_statistics(rp)]
    return rows


@dataclass(frozen=True)
class Lever:
    """One row of the lever table: the configured pipeline with one robustness lever changed."""

    label: str
    retrieval: Retrieval
    anchor_mirror: bool = True
    query_flip: bool = True
    anchor_scale: int | None = None  # px of anchors encoded for comparison (embed's compare_scale_ratios); None = configured

    def workspace(self, ws: Workspace) -> Workspace:
        out = ws.with_flips(self.anchor_mirror and ws.has_flips, self.query_flip and ws.has_flips)
        if self.anchor_scale is not None:
            out = out.with_anchor_views({n: (a, None) for n, a in ws.anchor_scales[self.anchor_scale].items()})
        return out


def lever_configurations(rp: Retrieval, ws: Workspace) -> list[Lever]:
    """The configured pipeline with one robustness lever taken out at a time. Each lever was kept because it helped
    on dev; these rows show its effect on test, with a CI. Anchors at another scale are compared without the anchor
    mirror (the embed stage encodes them as one view), so their row pairs with the `no anchor mirror` row."""
    base = configured_label(rp).removesuffix(" (configured)")
    rows: list[Lever] = []
    if ws.has_flips:
        rows += [Lever(f"{base} · no test-time query flip", rp, query_flip=False),
                 Lever(f"{base} · no anchor mirror", rp, anchor_mirror=False),
                 Lever(f"{base} · no flips at all", rp, anchor_mirror=False, query_flip=False)]
    for px in sorted(ws.anchor_scales):
        rows.append(Lever(f"{base} · anchors at {px} px (configured {ws.manifest['anchor_scale']} px), no anchor mirror", rp,
                          anchor_mirror=False, anchor_scale=px))
    if rp.hubness != "none":
        rows.append(Lever(f"{base} · no hubness correction", rp.model_copy(update={"hubness": "none"})))
    if rp.colour_invariant:
        rows.append(Lever(f"{base} · no colour-nuisance projection", rp.model_copy(update={"colour_invariant": []})))
    return rows


def protocol_for(ws: Workspace, params: Params) -> Protocol:
    """dev / test by species (the curate stage's split), query groups = sprite variants, the eval section's bootstrap."""
    e, q = params.eval, ws.queries
    return Protocol.of(q["species_id"].to_numpy(), q["split"].to_numpy(), q["variant"].to_numpy(), e.bootstrap, e.seed, e.confidence)


def query_values(ranking: Ranking, gold: np.ndarray) -> np.ndarray:
    """Per-query metric values (RANK_METRICS) of a ranking, pessimistic ties on the fused score."""
    return per_query(gold_ranks(ranking.species_ids, gold, ranking.s))


# -- graph and the PolarMem axes ------------------------------------------------------------------------------
def verifier_for(params: Params, cache_root: Path) -> Verifier:
    """graph.verifier with its own knobs (each verifier takes different ones)."""
    gp, device = params.graph, params.encoders.device
    options = {"probe": {"folds": gp.probe_folds, "c": gp.probe_c, "seed": gp.seed, "dim": gp.probe_dim},
               "zero_shot": {"encoder": gp.zero_shot_encoder and params.encoders.spec(gp.zero_shot_encoder), "device": device,
                             "cache_root": cache_root},
               "vlm": {"model": gp.vlm_model, "device": device, "templates": gp.templates, "local_grid": params.encoders.local_grid}}
    return create_verifier(gp.verifier, **options[gp.verifier])


def memory_proposer(params: Params, inputs: GraphInputs) -> Proposer:
    """The configured proposer (graph.proposer, graph.proposer_n) over the vocabulary's facets."""
    return create_proposer(params.graph.proposer_spec, params.graph.seed, inputs.groups)


def polar_setup(ws: Workspace, params: Params, scores_path: Path, ranking: Ranking | None = None) -> PolarSetup:
    """`ranking`: the configured VR-RAG ranking of ws.queries when the caller already has it (not recomputed)."""
    gp = params.graph
    inputs = graph_inputs(ws, domain_for(params))
    scores = load_scores(scores_path, inputs.vocab)
    if ranking is None:
        _, _, ranking = run_retrieval(ws, catalog_for(ws, params.retrieval), params.retrieval)
    cand = inputs.species_index(ranking.species_ids)
    target = inputs.species_index(ws.queries["species_id"].to_numpy())
    primary, secondary = constrained_sets(inputs, target, cand, gp.seed)
    return PolarSetup(inputs, ws.anchors["candidate_id"].tolist(), scores, cand, ranking.s, target, primary, secondary,
                      memory_proposer(params, inputs), gp.kappa, gp.critical_completion, gp.strength(),
                      gp.adaptive_max_penalty, gp.constraint_k, gp.filter_pool, gp.adaptive_temperature, gp.seed)


def evaluated_edge_quality(inputs: GraphInputs, graph: PolarGraph, params: Params) -> pd.DataFrame:
    """Edge quality of the memory the constraint axis evaluates, with and without critical completion, on the pairs it
    reads: each primary constrained query's target and look-alike neighbourhood (graph.filter_pool species) × its
    constraint concepts. Needs no ranking, so the graph stage reports it."""
    gp = params.graph
    target = inputs.species_index(inputs.query_species)
    neighbours = catalog_lookalikes(inputs)
    cq, _ = constrained_sets(inputs, target, None, gp.seed, neighbours)
    t = target[cq.rows]
    cand = np.hstack([t[:, None], neighbours[t][:, : max(gp.filter_pool - 1, 0)]])
    concepts = pad_concepts([p + n for p, n in zip(cq.q_pos, cq.q_neg)])
    return pd.DataFrame({name: edge_quality(graph.memory(inputs.species_ids, gp.kappa, completion), cand, concepts, inputs.truth)
                         for name, completion in (("as proposed", False), ("with critical completion", True))}).T


def catalog_lookalikes(inputs: GraphInputs) -> np.ndarray:
    """[S, n] each catalog species' nearest other species by artwork features."""
    return catalog_neighbours(inputs.anchor_x, inputs.species_index(inputs.anchor_species), len(inputs.species_ids))


def constrained_sets(inputs: GraphInputs, target: np.ndarray, cand: np.ndarray | None, seed: int,
                     neighbours: np.ndarray | None = None) -> tuple[ConstrainedQueries, ConstrainedQueries | None]:
    """(primary, secondary): Q− from the target's catalog look-alikes, and (given a ranking) from the ranking's."""
    neighbours = catalog_lookalikes(inputs) if neighbours is None else neighbours
    primary = make_constrained_queries(target, neighbours[target], inputs.truth, inputs.vocab, seed)
    return primary, None if cand is None else make_constrained_queries(target, cand, inputs.truth, inputs.vocab, seed)
