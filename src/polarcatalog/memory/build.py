"""The graph stage's steps: inputs and ground truth, verification, proposal + partition, the graph, its cost."""

from __future__ import annotations

import time
import tracemalloc
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pandas as pd

from polarcatalog.memory.concepts import Concept, pokemon_labels, pokemon_vocabulary
from polarcatalog.memory.graph import PolarGraph, align_edges
from polarcatalog.memory.partition import partition
from polarcatalog.memory.propose import propose
from polarcatalog.memory.verify import ProbeVerifier
from polarcatalog.retrieval.experiment import Workspace


@dataclass
class GraphInputs:
    vocab: list[Concept]
    species_ids: np.ndarray
    truth: np.ndarray  # [S, C] ground truth per species
    anchor_x: np.ndarray
    anchor_species: np.ndarray
    query_x: np.ndarray
    query_species: np.ndarray
    colour_truth: str  # "pokedex" | "measured"
    anchor_local_x: np.ndarray | None = None  # [anchors, views, dim] local views of the catalog images, or None

    @property
    def groups(self) -> list[str]:
        """The facet of each concept: the multi_prompt proposer's prompts."""
        return [c.group for c in self.vocab]

    def species_index(self, species: np.ndarray) -> np.ndarray:
        """Row of `species_ids` for each species id (-1 for ids outside the catalog or padding), vectorised."""
        lookup = np.full(int(max(self.species_ids.max(), np.max(species, initial=0))) + 1, -1)
        lookup[self.species_ids] = np.arange(len(self.species_ids))
        species = np.asarray(species)
        return np.where(species >= 0, lookup[np.maximum(species, 0)], -1)


def graph_inputs(ws: Workspace, size_bins: list[float]) -> GraphInputs:
    """Vocabulary and truth from the species table; features = every embedded image encoder, each l2-normalised."""
    with_pokeapi = "shape" in ws.species.columns and ws.species["shape"].notna().any()
    vocab = pokemon_vocabulary(with_pokeapi=with_pokeapi)
    truth = pokemon_labels(ws.species, vocab, size_bins)
    norm = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True).clip(1e-12)  # noqa: E731
    names = sorted(ws.anchor_f)
    local = None
    if names and all(n in ws.anchor_local_f for n in names):
        norm3 = lambda x: x / np.linalg.norm(x, axis=2, keepdims=True).clip(1e-12)  # noqa: E731
        local = np.concatenate([norm3(ws.anchor_local_f[n]) for n in names], axis=2)
    return GraphInputs(vocab, ws.species["species_id"].to_numpy(), truth,
                       np.hstack([norm(ws.anchor_f[n]) for n in names]), ws.anchors["species_id"].to_numpy(),
                       np.hstack([norm(ws.query_f[n]) for n in names]), ws.queries["species_id"].to_numpy(),
                       "pokedex" if with_pokeapi else "measured", local)


def truth_rows(inputs: GraphInputs, species: np.ndarray) -> np.ndarray:
    return inputs.truth[inputs.species_index(species)]


@dataclass
class Scores:
    """Verifier scores: catalog images [A, C], query images [Q, C], local views of catalog images [A, V, C] or None."""

    anchor: np.ndarray
    query: np.ndarray
    anchor_local: np.ndarray | None = None


def verify_all(inputs: GraphInputs, folds: int, c: float, seed: int, dim: int | None = 256) -> Scores:
    """Cross-fitted probe scores for every anchor (catalog node), every query image and every local view of an
    anchor. Probes are trained on global views only; a local view is scored by the probes of its image's fold."""
    v = ProbeVerifier(folds, c, seed, dim)
    y = truth_rows(inputs, inputs.anchor_species)
    a, q = len(inputs.anchor_x), len(inputs.query_x)
    xs, ss = [inputs.anchor_x, inputs.query_x], [inputs.anchor_species, inputs.query_species]
    if inputs.anchor_local_x is not None:
        views = inputs.anchor_local_x.shape[1]
        xs.append(inputs.anchor_local_x.reshape(a * views, -1))
        ss.append(np.repeat(inputs.anchor_species, views))
    scores = v.cross_fit(inputs.anchor_x, y, inputs.anchor_species, np.vstack(xs), np.concatenate(ss))
    local = scores[a + q:].reshape(a, -1, scores.shape[1]) if inputs.anchor_local_x is not None else None
    return Scores(scores[:a], scores[a: a + q], local)


def verify_zero_shot(ws: Workspace, inputs: GraphInputs, encoder: str, device: str, cache_root) -> Scores:
    """Zero-shot scores from one CLIP-like encoder's own image features (the embed stage's, global and local views)
    against its text tower's prompt vectors (encoded once, through the feature cache)."""
    from polarcatalog.encoders import create_text_encoder, has_text_tower
    from polarcatalog.features.encode import encode_texts
    from polarcatalog.memory.verify import ZeroShotVerifier

    if encoder not in ws.anchor_f:
        raise ValueError(f"graph.zero_shot_encoder {encoder!r} has no features in data/features; add it to encoders.image "
                         "and rerun the embed stage")
    if not has_text_tower(encoder):
        raise ValueError(f"graph.zero_shot_encoder {encoder!r} has no text tower (no aligned space); use graph.verifier probe")
    enc = create_text_encoder(encoder, device)
    v = ZeroShotVerifier(lambda texts: encode_texts(enc, texts, cache_root))
    names = [c.name for c in inputs.vocab]
    local = ws.anchor_local_f.get(encoder)
    return Scores(v.scores(ws.anchor_f[encoder], names), v.scores(ws.query_f[encoder], names),
                  v.scores(local, names) if local is not None else None)


def verify_vlm(ws: Workspace, inputs: GraphInputs, model: str, device: str, n_templates: int, local_grid: int = 0) -> Scores:
    """VLM verifier scores (GPU profile): every concept x template of an image in one batch on a shared prefix;
    with `local_grid` the catalog images' local views are asked too (the global + local proposer's input)."""
    from tqdm.auto import tqdm

    from polarcatalog.data.images import load_rgb
    from polarcatalog.encoders.preprocess import content_box, grid_cell
    from polarcatalog.memory.verify import TEMPLATES, VLMVerifier

    v = VLMVerifier(model, device, TEMPLATES[:n_templates])
    names = [c.name for c in inputs.vocab]
    cells = [(r, c) for r in range(local_grid) for c in range(local_grid)]
    anchor, local = [], []
    for p in tqdm(ws.anchors["path"].tolist(), desc="VLM verify catalog images"):
        im = load_rgb(p)  # decoded once for the global view and its local views
        anchor.append(v.scores(im, names))
        local.append([v.scores(grid_cell(content_box(im), local_grid, r, c), names) for r, c in cells])
    query = [v.scores(load_rgb(p), names) for p in tqdm(ws.queries["path"].tolist(), desc="VLM verify queries")]
    return Scores(np.stack(anchor), np.stack(query), np.array(local) if local_grid else None)


def query_image_concepts(query_scores: np.ndarray, strategy: str, n: int | None, kappa: float, seed: int,
                         groups: list[str] | None = None) -> tuple[list[list[int]], list[list[int]]]:
    """The query image's own verified concepts (proposed, then partitioned like a catalog image): HAS -> Q+, NOT_HAS -> Q−.
    Queries have no local views (the embed stage encodes those for catalog images only), so `global_local`
    proposes from the query's global view: top_n with the same N."""
    strategy = "top_n" if strategy == "global_local" else strategy
    proposed = propose(query_scores, strategy, n, seed, groups)
    pos, neg = [], []
    for q in range(len(query_scores)):
        idx = np.flatnonzero(proposed[q])
        st = partition(query_scores[q, idx], kappa).states
        pos.append(idx[st == 1].tolist())
        neg.append(idx[st == -1].tolist())
    return pos, neg


def build_graph(inputs: GraphInputs, anchor_ids: list[str], scores: np.ndarray, strategy: str, n: int | None,
                kappa: float, seed: int, chunk_ids: list[str] | None = None, chunk_species: np.ndarray | None = None,
                chunk_texts: list[str] | None = None, local_scores: np.ndarray | None = None) -> PolarGraph:
    """Propose (from the global and, for global_local, the local-view scores) -> partition each image's proposed
    global-view scores (τ*, δ per image) -> polarized graph."""
    proposed = propose(scores, strategy, n, seed, inputs.groups, local_scores)
    states = np.zeros(scores.shape, np.int8)
    tau, delta = np.zeros(len(scores)), np.zeros(len(scores))
    for v in range(len(scores)):
        p = partition(scores[v, proposed[v]], kappa)
        states[v, proposed[v]] = p.states
        tau[v], delta[v] = p.tau_star, p.delta
    texts = chunk_texts or []
    align = align_edges(texts, inputs.vocab)
    return PolarGraph(inputs.vocab, anchor_ids, inputs.anchor_species, states, proposed, scores,
                      list(chunk_ids or []), np.asarray(chunk_species if chunk_species is not None else []), align, tau, delta)


@contextmanager
def measured(costs: list[dict], stage: str, episodes: int, calls: float = 0.0) -> Iterator[None]:
    """Time and Python-heap peak of one stage, reported per episode (one catalog image), Table 7 style."""
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        yield
    finally:
        seconds = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        costs.append({"stage": stage, "time per episode (ms)": 1000 * seconds / max(episodes, 1),
                      "backend calls per episode": calls, "peak memory (MB)": peak / 2**20, "total (s)": seconds})


def cost_table(costs: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(costs)
    total = {"stage": "Total", "time per episode (ms)": df["time per episode (ms)"].sum(),
             "backend calls per episode": df["backend calls per episode"].sum(),
             "peak memory (MB)": df["peak memory (MB)"].max(), "total (s)": df["total (s)"].sum()}
    return pd.concat([df, pd.DataFrame([total])], ignore_index=True).round(3)


@dataclass
class PolarSetup:
    """Everything the constraint and coverage axes share: graph inputs, verifier scores, VR-RAG candidates."""

    inputs: GraphInputs
    anchor_ids: list[str]
    scores: Scores  # verifier scores of catalog images, their local views and query images
    cand: np.ndarray  # [Q, L] species index of each VR-RAG candidate (-1 = none)
    s: np.ndarray  # [Q, L] fused VR-RAG score
    target: np.ndarray  # [Q] species index of each query
    queries: "object"  # ConstrainedQueries

    def memory(self, gp) -> tuple:
        """The configured memory's HAS / NOT_HAS incidence per species (see `species_memory`)."""
        return species_memory(self.inputs, self.anchor_ids, self.scores, gp)

    def graph(self, strategy: str, n: int | None, kappa: float, seed: int) -> PolarGraph:
        return build_graph(self.inputs, self.anchor_ids, self.scores.anchor, strategy, n, kappa, seed,
                           local_scores=self.scores.anchor_local)


def save_scores(path, inputs: GraphInputs, scores: Scores) -> None:
    """npz of plain arrays (read back with allow_pickle=False); no local views = an empty [A, 0, C] array."""
    local = scores.anchor_local if scores.anchor_local is not None else np.zeros((len(scores.anchor), 0, scores.anchor.shape[1]))
    np.savez(path, anchor=scores.anchor, query=scores.query, anchor_local=local, concepts=np.array([c.id for c in inputs.vocab]))


def load_scores(path, inputs: GraphInputs) -> Scores:
    """The graph stage's verifier scores, checked against the vocabulary they were written for."""
    from pathlib import Path

    if not Path(path).is_file():
        raise FileNotFoundError(f"{path} is missing: run the graph stage first (`dvc repro graph`)")
    with np.load(path, allow_pickle=False) as z:
        if z["concepts"].tolist() != [c.id for c in inputs.vocab]:
            raise ValueError(f"{path} was written for another vocabulary; rerun the graph stage")
        local = z["anchor_local"] if "anchor_local" in z.files and z["anchor_local"].shape[1] else None
        return Scores(z["anchor"], z["query"], local)


def species_memory(inputs: GraphInputs, anchor_ids: list[str], scores: Scores, gp) -> tuple:
    """The configured memory (graph.proposer / proposer_n / kappa, completion if graph.critical_completion) as
    HAS / NOT_HAS incidence per catalog species, rows in `inputs.species_ids` order."""
    g = build_graph(inputs, anchor_ids, scores.anchor, gp.proposer, gp.proposer_n, gp.kappa, gp.seed, local_scores=scores.anchor_local)
    return (g.completed() if gp.critical_completion else g).species_incidence(inputs.species_ids)


def polar_setup(ws: Workspace, params, scores_path, ranking=None) -> PolarSetup:
    """`ranking`: the configured VR-RAG ranking of ws.queries when the caller already has it (not recomputed)."""
    from polarcatalog.memory.evaluate import make_constrained_queries
    from polarcatalog.retrieval import experiment as ex

    inputs = graph_inputs(ws, params.curate.size_bins_m)
    scores = load_scores(scores_path, inputs)
    if ranking is None:
        _, _, ranking = ex.run(ws, ex.catalog_for(ws, params.retrieval), params.retrieval)
    cand = inputs.species_index(ranking.species)
    target = inputs.species_index(ws.queries["species_id"].to_numpy())
    cq = make_constrained_queries(target, cand, inputs.truth, inputs.vocab, params.graph.seed)
    return PolarSetup(inputs, ws.anchors["candidate_id"].tolist(), scores, cand, ranking.s, target, cq)
