"""Candidate concept proposal C_prop per image (PolarMem §3 and Table 2): which concepts get verified at all.

Strategies (coverage = N and strategy, params `graph.proposer`, `graph.proposer_n`):
- `top_n`: the N concepts the verifier rates highest on the image (one pass, the single-prompt analogue);
- `random_n`: N random concepts (seeded), a no-information baseline that shows what ranking buys;
- `all`: the whole vocabulary (coverage 1 by construction).
Critical-concept completion (adding the query's own concepts at query time) is applied at retrieval:
see `polarcatalog.retrieval.polar`. A concept outside C_prop gets no edge: its state is unknown, not NOT_HAS.
"""

from __future__ import annotations

import numpy as np

STRATEGIES = ("top_n", "random_n", "all")


def propose(scores: np.ndarray, strategy: str = "top_n", n: int | None = None, seed: int = 0) -> np.ndarray:
    """Boolean mask [images, concepts] of proposed concepts."""
    m, c = scores.shape
    if strategy == "all" or n is None or n >= c:
        return np.ones((m, c), bool)
    mask = np.zeros((m, c), bool)
    if strategy == "top_n":
        top = np.argsort(-scores, axis=1, kind="stable")[:, :n]
    elif strategy == "random_n":
        rng = np.random.default_rng(seed)
        top = np.argsort(rng.random((m, c)), axis=1)[:, :n]
    else:
        raise ValueError(f"unknown proposer {strategy!r}; allowed: {', '.join(STRATEGIES)}")
    np.put_along_axis(mask, top, True, axis=1)
    return mask


def proposal_recall(mask: np.ndarray, truth: np.ndarray) -> float:
    """Proposal Recall@K (Table 2): mean over images of |C_prop ∩ C_true| / |C_true| (images with no true concept skipped)."""
    has = truth.sum(1) > 0
    return float(((mask & truth).sum(1)[has] / truth.sum(1)[has]).mean()) if has.any() else float("nan")
