"""The λ and top-k ablation axes (VR-RAG Figs. 3 and 2). Candidates are computed once per axis; each value
is a re-sort of the same top-r list, so a sweep point costs a sort, not an encoding or a search."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from polarcatalog.eval.metrics import gold_ranks, mrr_at_k, recall_at_k, summarize
from polarcatalog.retrieval.vrrag import VRRAG, Candidates


CAPTIONS = {  # how to read each report table (the markdown written by 05_ablate)
    "lam": "s = λ·s_m + (1−λ)·s_i (VR-RAG Eq. 2): λ = 1 is retrieval only, λ = 0 re-rank only; an interior optimum "
           "means both similarities carry information (Fig. 3). Rows per query group.\n\n",
    "top_k": "Recall@k of the species list passed on (Fig. 2): the bound on any reader's accuracy at that k.\n\n",
}


def _groups(groups: pd.Series) -> dict[str, np.ndarray]:
    out = {"all": np.ones(len(groups), bool)}
    out |= {str(g): (groups == g).to_numpy() for g in sorted(groups.unique())}
    return out


def sweep_lambda(vr: VRRAG, cands: Candidates, gold: np.ndarray, groups: pd.Series, lams: list[float]) -> pd.DataFrame:
    rows = []
    for lam in lams:
        ranks = gold_ranks(vr.rank(cands, lam, vr.r).species, gold)
        for g, mask in _groups(groups).items():
            rows.append({"lam": lam, "queries": g, **summarize(ranks[mask])})
    return pd.DataFrame(rows)


def sweep_top_k(vr: VRRAG, cands: Candidates, gold: np.ndarray, groups: pd.Series, ks: list[int], lam: float) -> pd.DataFrame:
    ranks = gold_ranks(vr.rank(cands, lam, max(ks)).species, gold)
    rows = []
    for k in ks:
        for g, mask in _groups(groups).items():
            rows.append({"k": k, "queries": g, "R@k": recall_at_k(ranks[mask], k), "mRR@k": mrr_at_k(ranks[mask], k),
                         "n": int(mask.sum())})
    return pd.DataFrame(rows)


def lambda_figure(df: pd.DataFrame) -> plt.Figure:
    long = df.melt(id_vars=["lam", "queries"], value_vars=["mRR@1", "mRR@5", "mRR@10"], var_name="metric")
    fig, ax = plt.subplots(figsize=(6, 3.4))
    sns.lineplot(long, x="lam", y="value", hue="metric", style="queries", marker="o", ax=ax)
    ax.set_xlabel("λ  (s = λ·s_m + (1−λ)·s_i)")
    ax.set_ylabel("mRR")
    ax.set_title("Impact of varying λ (cf. VR-RAG Fig. 3)")
    ax.legend(bbox_to_anchor=(1.02, 1), loc="upper left", fontsize=8)
    return fig


def top_k_figure(df: pd.DataFrame) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(6, 3.4))
    sns.lineplot(df, x="k", y="R@k", hue="queries", marker="o", ax=ax)
    ax.set_ylabel("Recall@k (gold among the k species passed on)")
    ax.set_title("Impact of top-k (cf. VR-RAG Fig. 2; no reader model: retrieval recall)")
    ax.legend(bbox_to_anchor=(1.02, 1), loc="upper left", fontsize=8)
    return fig
