"""Candidate concept proposal C_prop per image (PolarMem §3 and Table 2): which concepts get verified at all.

Coverage = strategy and budget N, written `top_n:6` (params `graph.proposer`; the axis
`ablations.coverage`), parsed once into a `ProposerSpec`; `create_proposer` turns it into a `Proposer`.
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
applied at query time: see `memories.CompletedMemory`. A concept outside C_prop gets no edge: its state is
unknown, not NOT_HAS.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np


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


@dataclass(frozen=True)
class Proposer:
    """Proposes `n` concepts per image (all of them when `n` is None) in the order its strategy ranks them."""

    strategy: str
    n: int | None = None
    seed: int = 0
    groups: tuple[str, ...] = ()  # the facet of each concept (multi_prompt's prompts)

    def __call__(self, scores: np.ndarray, local: np.ndarray | None = None) -> np.ndarray:
        """Boolean mask [images, concepts]; `local`: scores of the local views [images, views, concepts] (global_local)."""
        m, c = scores.shape
        if self.n is None or self.n >= c:
            return np.ones((m, c), bool)
        order = PROPOSERS[self.strategy](self, scores, local)
        mask = np.zeros((m, c), bool)
        np.put_along_axis(mask, order[:, : self.n], True, axis=1)
        return mask


def _by_score(p: Proposer, scores: np.ndarray, local: np.ndarray | None) -> np.ndarray:
    return np.argsort(-scores, axis=1, kind="stable")


def _round_robin_facets(p: Proposer, scores: np.ndarray, local: np.ndarray | None) -> np.ndarray:
    """Every facet's best, then every facet's second best, ...; within a round the higher score first."""
    return np.lexsort((-scores, _facet_ranks(scores, p.groups)), axis=1)


def _round_robin_views(p: Proposer, scores: np.ndarray, local: np.ndarray | None) -> np.ndarray:
    """Every view's best (global view first), then every view's second best, ...; ties by score."""
    best, view = _view_ranks(scores, local)
    return np.lexsort((-scores, view, best), axis=1)


def _shuffled(p: Proposer, scores: np.ndarray, local: np.ndarray | None) -> np.ndarray:
    return np.argsort(np.random.default_rng(p.seed).random(scores.shape), axis=1)


# One name -> one ordering of every image's concepts; a budget N takes the first N (`all` is never cut).
PROPOSERS: dict[str, Callable[[Proposer, np.ndarray, np.ndarray | None], np.ndarray]] = {
    "top_n": _by_score, "multi_prompt": _round_robin_facets, "global_local": _round_robin_views,
    "random_n": _shuffled, "all": _by_score}


@dataclass(frozen=True)
class ProposerSpec:
    """A strategy and its budget, parsed once from `top_n:6` / `multi_prompt:12` / `all`."""

    strategy: str
    n: int | None = None

    @classmethod
    def parse(cls, spec: "str | ProposerSpec") -> "ProposerSpec":
        if isinstance(spec, ProposerSpec):
            return spec
        strategy, _, n = str(spec).partition(":")
        budgeted = [name for name in PROPOSERS if name != "all"]
        if spec == "all":
            return cls("all")
        if strategy in budgeted and n.isdigit() and int(n) >= 1:
            return cls(strategy, int(n))
        raise ValueError(f"proposer {spec!r}; allowed: all, " + ", ".join(f"{b}:<N>" for b in budgeted) + " (N >= 1)")

    def __str__(self) -> str:
        return "all" if self.strategy == "all" else f"{self.strategy}:{self.n}"


def create_proposer(spec: str | ProposerSpec, seed: int = 0, groups: Sequence[str] = ()) -> Proposer:
    """`create_proposer("top_n:6")`; `groups` (one facet per concept) is what `multi_prompt` prompts by."""
    spec = ProposerSpec.parse(spec)
    return Proposer(spec.strategy, spec.n, seed, tuple(groups))


def proposal_recall(mask: np.ndarray, truth: np.ndarray) -> float:
    """Proposal Recall@K (Table 2): mean over images of |C_prop ∩ C_true| / |C_true| (images with no true concept skipped)."""
    has = truth.sum(1) > 0
    return float(((mask & truth).sum(1)[has] / truth.sum(1)[has]).mean()) if has.any() else float("nan")
