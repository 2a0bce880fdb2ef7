"""Validated params -> the library objects that more than one stage builds the same way (the domain, the results
protocol, the query view, the verifier, the proposer, PolarMem's evaluation setup). A stage's own wiring lives in its
`polarcatalog.stages` module; what two stages (or a stage and the CLI) share lives here, once."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from polarcatalog.config import Params
from polarcatalog.data.domain import Domain, create_domain
from polarcatalog.encoders.preprocess import Preprocess
from polarcatalog.eval.protocol import Protocol
from polarcatalog.features.workspace import Workspace
from polarcatalog.memory.constrained import ConstrainedQueries, catalog_neighbours, make_constrained_queries
from polarcatalog.memory.inputs import GraphInputs, graph_inputs
from polarcatalog.memory.polar_sweeps import PolarSetup
from polarcatalog.memory.propose import Proposer, create_proposer
from polarcatalog.memory.verifiers import Verifier, create_verifier, load_scores
from polarcatalog.paths import RAW
from polarcatalog.retrieval.query_side import catalog_for, run_retrieval
from polarcatalog.retrieval.vrrag import Ranking


def domain_for(params: Params, raw: Path = RAW) -> Domain:
    return create_domain(params.dataset.domain, raw=raw, size_bins=tuple(params.curate.size_bins_m))


def protocol_for(ws: Workspace, params: Params) -> Protocol:
    """dev / test by species (the curate stage's split), query groups = sprite variants, the eval section's bootstrap."""
    e, q = params.eval, ws.queries
    return Protocol.of(q["species_id"].to_numpy(), q["split"].to_numpy(), q["variant"].to_numpy(), e.bootstrap, e.seed, e.confidence)


def query_view(params: Params) -> Preprocess:
    """How a query image is seen: at its native pixels (an enlarged sprite unblocked), its content box, no scaling."""
    return Preprocess(params.encoders.content_box, None, unblock=True)


def verifier_for(params: Params, cache_root: Path) -> Verifier:
    """graph.verifier with its own knobs (each verifier takes different ones)."""
    gp, device = params.graph, params.encoders.device
    options = {"probe": {"folds": gp.probe_folds, "c": gp.probe_c, "seed": gp.seed, "dim": gp.probe_dim},
               "zero_shot": {"encoder": gp.zero_shot_encoder and params.encoders.spec(gp.zero_shot_encoder), "device": device,
                             "cache_root": cache_root},
               "vlm": {"model": gp.vlm_model, "device": device, "templates": gp.templates, "local_grid": params.encoders.local_grid}}
    return create_verifier(gp.verifier, **options[gp.verifier])


def memory_proposer(params: Params, inputs: GraphInputs) -> Proposer:
    """The configured proposer (graph.proposer) over the vocabulary's facets."""
    return create_proposer(params.graph.proposer, params.graph.seed, inputs.groups)


def catalog_lookalikes(inputs: GraphInputs) -> np.ndarray:
    """[S, n] each catalog species' nearest other species by artwork features."""
    return catalog_neighbours(inputs.anchor_x, inputs.species_index(inputs.anchor_species), len(inputs.species_ids))


def constrained_sets(inputs: GraphInputs, target: np.ndarray, cand: np.ndarray | None, seed: int,
                     neighbours: np.ndarray | None = None) -> tuple[ConstrainedQueries, ConstrainedQueries | None]:
    """(primary, secondary): Q− from the target's catalog look-alikes, and (given a ranking) from the ranking's."""
    neighbours = catalog_lookalikes(inputs) if neighbours is None else neighbours
    primary = make_constrained_queries(target, neighbours[target], inputs.truth, inputs.vocab, seed)
    return primary, None if cand is None else make_constrained_queries(target, cand, inputs.truth, inputs.vocab, seed)


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
                      memory_proposer(params, inputs), gp.kappa, gp.critical_completion, gp.constraint,
                      gp.constraint_k, gp.filter_pool, gp.adaptive_temperature, gp.seed)
