"""The λ and top-k sweeps (VR-RAG Figs. 3 and 2). Candidates are computed once per axis; each value is a
re-sort of the same top-r list, so a sweep point costs a sort, not an encoding or a search."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from polarcatalog.eval.metrics import gold_ranks, group_masks, mrr_at_k, recall_at_k, summarize
from polarcatalog.retrieval.vrrag import VRRAG, Candidates


def sweep_lambda(vr: VRRAG, cands: Candidates, gold: np.ndarray, groups: Sequence[str], lams: Sequence[float]) -> pd.DataFrame:
    """One row per (λ, query group) with mRR@1/5/10, R@1/5/10 and accuracy@1."""
    masks = group_masks(groups)
    rows = []
    for lam in lams:
        ranks = gold_ranks(vr.rank(cands, lam, vr.r).species_ids, gold)
        rows += [{"lam": lam, "queries": g, **summarize(ranks[mask])} for g, mask in masks.items()]
    return pd.DataFrame(rows)


def sweep_top_k(vr: VRRAG, cands: Candidates, gold: np.ndarray, groups: Sequence[str], ks: Sequence[int], lam: float) -> pd.DataFrame:
    """One row per (k, query group): Recall@k of the species list passed on, and mRR@k."""
    ranks = gold_ranks(vr.rank(cands, lam, max(ks)).species_ids, gold)
    masks = group_masks(groups)
    return pd.DataFrame([{"k": k, "queries": g, "R@k": recall_at_k(ranks[mask], k), "mRR@k": mrr_at_k(ranks[mask], k),
                          "n": int(mask.sum())} for k in ks for g, mask in masks.items()])
