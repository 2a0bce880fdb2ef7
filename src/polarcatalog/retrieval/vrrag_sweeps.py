"""The λ and top-k sweeps (VR-RAG Figs. 3 and 2). Candidates are computed once per axis; each value is a
re-sort of the same top-r list, so a sweep point costs a sort, not an encoding or a search.

Both return the protocol's tidy rows (`long_rows`): dev rows are what a choice (the best λ) reads, test rows with
CIs are what the report shows."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from polarcatalog.eval.metrics import gold_ranks, per_query
from polarcatalog.eval.protocol import Protocol, long_rows
from polarcatalog.parallel import fork_map
from polarcatalog.retrieval.vrrag import VRRAG, Candidates

LAMBDA_METRICS = ("mRR@1", "mRR@5", "mRR@10")


def sweep_lambda(vr: VRRAG, cands: Candidates, gold: np.ndarray, protocol: Protocol, lams: Sequence[float]) -> pd.DataFrame:
    """Every λ re-sorts the same candidates: the values are independent, and the machine's other core takes half of
    them (`fork_map`)."""
    def at(lam: float) -> list[dict]:
        ranking = vr.rank(cands, lam, vr.r)
        values = per_query(gold_ranks(ranking.species_ids, gold, ranking.s), LAMBDA_METRICS)
        return long_rows(protocol, dict(zip(LAMBDA_METRICS, values.T)), lam=float(lam))

    return pd.DataFrame([row for rows in fork_map(at, lams) for row in rows])


def sweep_top_k(vr: VRRAG, cands: Candidates, gold: np.ndarray, protocol: Protocol, ks: Sequence[int], lam: float) -> pd.DataFrame:
    """Recall@k of the species list passed on, and mRR@k."""
    ranking = vr.rank(cands, lam, max(ks))
    ranks = gold_ranks(ranking.species_ids, gold, ranking.s)
    rows = []
    for k in ks:
        values = per_query(ranks, (f"R@{k}", f"mRR@{k}"))
        rows += long_rows(protocol, {"R@k": values[:, 0], "mRR@k": values[:, 1]}, k=int(k))
    return pd.DataFrame(rows)
