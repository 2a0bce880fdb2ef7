"""Each stage's wiring: validated params -> the library's typed calls. The notebooks call these (and the CLI's
folder evaluation reuses them), so a stage notebook reads top to bottom as narrative plus a few calls."""

from __future__ import annotations

from pathlib import Path

from polarcatalog.config import Params, Retrieval
from polarcatalog.data.domain import Domain, create_domain
from polarcatalog.encoders.preprocess import Preprocess
from polarcatalog.features.embed import EmbedResult, Views, embed_all, resolve_anchor_scale
from polarcatalog.features.workspace import Workspace
from polarcatalog.io import read_table
from polarcatalog.memory.evaluate import make_constrained_queries
from polarcatalog.memory.inputs import GraphInputs, graph_inputs
from polarcatalog.memory.propose import Proposer, create_proposer
from polarcatalog.memory.sweeps import PolarSetup
from polarcatalog.memory.verifiers import Verifier, create_verifier, load_scores
from polarcatalog.paths import RAW
from polarcatalog.retrieval.vrrag import VRRAG, Candidates, Catalog, Ranking, build_catalog, prepare_queries, query_encoders


def domain_for(params: Params, raw: Path = RAW) -> Domain:
    return create_domain(params.dataset.domain, raw=raw, size_bins=tuple(params.curate.size_bins_m))


# -- embed ----------------------------------------------------------------------------------------------------
def query_view(params: Params) -> Preprocess:
    """How a query image is seen: its content box (no scaling, no mirror)."""
    return Preprocess(params.encoders.content_box, None, False)


def embed_views(params: Params, query_paths: list[str]) -> Views:
    """Anchors scale-matched to the queries (`encoders.anchor_scale`: auto measures `query_paths`), mirrored."""
    e = params.encoders
    scale = resolve_anchor_scale(e.anchor_scale, query_paths, params.dataset.seed)
    return Views(Preprocess(e.content_box, scale, e.mirror_anchors), query_view(params), e.local_grid)


def run_embed(params: Params, processed: Path, out: Path, cache_root: Path) -> EmbedResult:
    e = params.encoders
    views = embed_views(params, read_table(processed / "queries.parquet")["path"].tolist())
    return embed_all(processed, out, cache_root, e.image, e.text, views, e.device, e.batch_size)


# -- retrieve -------------------------------------------------------------------------------------------------
def catalog_for(ws: Workspace, rp: Retrieval) -> Catalog:
    return build_catalog(ws.species["species_id"].to_numpy(), ws.anchors["species_id"].to_numpy(),
                         ws.chunks["species_id"].to_numpy(), ws.anchor_f, ws.native_text, ws.bridge_text,
                         rp.center, rp.bridge_folds, rp.bridge_alpha, rp.seed)


def retriever(catalog: Catalog, rp: Retrieval) -> VRRAG:
    return VRRAG(catalog, list(rp.ensemble), rp.chunks, rp.reranker, rp.r, rp.index, rp.ivf_nlist, rp.seed)


def run_retrieval(ws: Workspace, catalog: Catalog, rp: Retrieval, k: int | None = None) -> tuple[VRRAG, Candidates, Ranking]:
    """One configuration on the workspace queries; the ranking keeps the full candidate list (k = r)."""
    vr = retriever(catalog, rp)
    q = prepare_queries({n: ws.query_f[n] for n in query_encoders(rp.ensemble, rp.reranker)}, catalog, rp.center, rp.min_center_batch)
    cands = vr.candidates(q)
    return vr, cands, vr.rank(cands, rp.lam, k or rp.r)


def table5_configurations(rp: Retrieval, image_encoders: list[str]) -> list[tuple[str, Retrieval]]:
    """VR-RAG's Table 5 as configurations: chunk type (text / multimodal Eq. 1 / anchors), the re-ranker, single
    encoders and the score ensemble of every embedded image encoder. Components that hurt stay in."""
    ens = list(rp.ensemble)
    name = "+".join(ens)
    rows: list[tuple[str, Retrieval]] = []
    for mode in ("text", "multimodal", "anchors"):
        rows.append((f"{name} · {mode}", rp.model_copy(update={"chunks": mode, "reranker": None})))
    if rp.reranker:
        rows.append((f"{name} · {rp.chunks} + re-rank {rp.reranker} λ={rp.lam} (configured)", rp))
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
    return rows


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
    cq = make_constrained_queries(target, cand, inputs.truth, inputs.vocab, gp.seed)
    return PolarSetup(inputs, ws.anchors["candidate_id"].tolist(), scores, cand, ranking.s, target, cq,
                      memory_proposer(params, inputs), gp.kappa, gp.critical_completion, gp.strength(),
                      gp.adaptive_max_penalty, gp.constraint_k, gp.adaptive_temperature)
