"""Candidate concept proposal C_prop per image (PolarMem §3 and Table 2): which concepts get verified at all.

Coverage = strategy and budget N (params `graph.proposer`, `graph.proposer_n`; the axis `ablations.coverage`).
Every budgeted strategy proposes exactly N concepts per image, so Proposal Recall@K compares strategies at equal K:
- `top_n`: the N concepts the verifier rates highest on the global image (the paper's single-prompt proposer);
- `multi_prompt`: one proposer "prompt" per facet of the vocabulary (type, colour, size, shape, habitat: the
  facets prompt card C11 asks a VLM to cover), their ranked lists merged round-robin — every facet's best, then
  every facet's second best, ... (ties within a round by score) — until N distinct concepts. This keeps one facet
  whose scores run high (size classes are common, types rare) from filling the whole budget;
- `global_local`: one ranked list per view — the global image, then its local views in raster order (the
  embed stage's `encoders.local_grid` cells of the catalog image) — merged round-robin, global view first, until
  N distinct concepts: a concept that a local view sees clearly gets proposed even when the global view ranks it low;
- `random_n`: N random concepts (seeded), a no-information baseline that shows what ranking buys;
- `all`: the whole vocabulary (coverage 1 by construction).
Proposal only decides *which* concepts are verified; the states come from the global-view scores (prompt card
C12 verifies on the global view). Critical-concept completion (adding the query's own concepts at query time) is
applied at retrieval: see `polarcatalog.retrieval.polar`. A concept outside C_prop gets no edge: its state is
unknown, not NOT_HAS.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

STRATEGIES = ("top_n", "multi_prompt", "global_local", "random_n", "all")


def parse_coverage(spec: str) -> tuple[str, int | None]:
    """'top_n:6' -> ('top_n', 6); 'all' -> ('all', None). Specs are validated in `polarcatalog.config`."""
    if spec == "all":
        return "all", None
    strategy, n = spec.split(":")
    return strategy, int(n)


def _ranks(scores: np.ndarray) -> np.ndarray:
    """0-based rank of every concept within its row (highest score = 0, ties by concept order), along the last axis."""
    order = np.argsort(-scores, axis=-1, kind="stable")
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(scores.shape[-1]), axis=-1)
    return ranks


def _facet_ranks(scores: np.ndarray, groups: Sequence[str]) -> np.ndarray:
    groups = np.asarray(groups)
    if len(groups) != scores.shape[1]:
        raise ValueError(f"multi_prompt needs one facet per concept: {len(groups)} facets for {scores.shape[1]} concepts")
    ranks = np.empty(scores.shape, np.int64)
    for g in np.unique(groups):  # a handful of facets: the loop is over prompts, not candidates
        cols = np.flatnonzero(groups == g)
        ranks[:, cols] = _ranks(scores[:, cols])
    return ranks


def _view_ranks(scores: np.ndarray, local: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(best rank of each concept over the views, first view that reaches it; view 0 = global)."""
    if local is None or local.ndim != 3 or local.shape[0] != scores.shape[0] or local.shape[2] != scores.shape[1]:
        got = None if local is None else local.shape
        raise ValueError(f"global_local needs local-view scores [images, views, concepts] matching {scores.shape}, got {got}; "
                         "set encoders.local_grid > 0 and rerun the embed and graph stages")
    ranks = _ranks(np.concatenate([scores[:, None], local], axis=1))
    best = ranks.min(1)
    return best, np.argmax(ranks == best[:, None], axis=1)


def propose(scores: np.ndarray, strategy: str = "top_n", n: int | None = None, seed: int = 0,
            groups: Sequence[str] | None = None, local: np.ndarray | None = None) -> np.ndarray:
    """Boolean mask [images, concepts] of proposed concepts. `groups`: the facet of each concept (multi_prompt);
    `local`: scores of the local views [images, views, concepts] (global_local)."""
    m, c = scores.shape
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown proposer {strategy!r}; allowed: {', '.join(STRATEGIES)}")
    if strategy == "all" or n is None or n >= c:
        return np.ones((m, c), bool)
    if strategy == "top_n":
        order = np.argsort(-scores, axis=1, kind="stable")
    elif strategy == "random_n":
        order = np.argsort(np.random.default_rng(seed).random((m, c)), axis=1)
    elif strategy == "multi_prompt":  # round-robin over facets; within a round the higher score first
        order = np.lexsort((-scores, _facet_ranks(scores, groups if groups is not None else [])), axis=1)
    else:  # global_local: round-robin over views, global first
        best, view = _view_ranks(scores, local)
        order = np.lexsort((-scores, view, best), axis=1)
    mask = np.zeros((m, c), bool)
    np.put_along_axis(mask, order[:, :n], True, axis=1)
    return mask


def proposal_recall(mask: np.ndarray, truth: np.ndarray) -> float:
    """Proposal Recall@K (Table 2): mean over images of |C_prop ∩ C_true| / |C_true| (images with no true concept skipped)."""
    has = truth.sum(1) > 0
    return float(((mask & truth).sum(1)[has] / truth.sum(1)[has]).mean()) if has.any() else float("nan")
