"""What the graph stage and the PolarMem axes show a reader: the per-stage cost table (Table 7 layout), the graph
report, and the constraint / coverage figures and captions."""

from __future__ import annotations

import time
import tracemalloc
from contextlib import contextmanager
from typing import Iterator

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from polarcatalog.memory.graph import PolarGraph
from polarcatalog.memory.partition import HAS, NOT_HAS

CAPTIONS = {  # how to read each ablation table (the markdown written by 05_ablate)
    "constraint": "Constrained queries (Q+: a concept the target has; Q−: one a similar species has and it lacks). "
                  "Conflict@k by the memory's own states is what hard retrieval guarantees (0 whenever ≥ k compatible "
                  "candidates exist); by ground truth, what the imperfect graph achieves (Fig. 3).\n\n",
    "coverage": "Table 2 layout. Every budgeted proposer proposes exactly K concepts per catalog image (column 2), so "
                "rows with the same K compare strategies at equal cost: `top_n` the single prompt on the global view, "
                "`multi_prompt` one prompt per facet merged round-robin, `global_local` the global view and its local "
                "views merged round-robin, `random_n` no information. Score = target accuracy@1 under the configured "
                "constraint strength, without completion except in the last row; a query is covered when its "
                "constraint concepts were proposed on the target's and the distractor's catalog images.\n\n",
}


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


def edges_figure(graph: PolarGraph, title: str) -> plt.Figure:
    """HAS and NOT_HAS edges per catalog image."""
    fig, ax = plt.subplots(figsize=(6, 3.2))
    counts = pd.DataFrame({"HAS": (graph.proposed & (graph.states == HAS)).sum(1),
                           "NOT_HAS": (graph.proposed & (graph.states == NOT_HAS)).sum(1)}).melt(var_name="edge", value_name="per image")
    sns.histplot(counts, x="per image", hue="edge", discrete=True, ax=ax, element="step")
    ax.set_title(title)
    return fig


def graph_markdown(graph: PolarGraph, verifier: str, notes: dict[str, str], quality: dict, per_group: pd.DataFrame,
                   stats: dict, cost: pd.DataFrame) -> str:
    """`verifier`: the verifier's own one-sentence description; `notes`: where the ground truth comes from."""
    return "\n".join([
        "# Polarized graph (PolarMem) on the embedded catalog", "",
        f"{len(graph.visual_ids)} visual nodes, {len(graph.text_ids)} text nodes, {len(graph.vocab)} concept nodes. "
        f"Verifier: {verifier} Ground truth: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in notes.items()) + ".", "",
        "## Edge quality against ground truth", "", pd.DataFrame([quality]).round(3).to_markdown(index=False), "",
        "## Probe AUC per concept group", "", per_group.round(3).to_markdown(), "",
        "## Graph statistics (PolarMem B.2)", "", pd.DataFrame([stats]).round(3).T.rename(columns={0: "value"}).to_markdown(), "",
        "## Per-stage cost per episode (one catalog image; Table 7 layout; CPU)", "", cost.to_markdown(index=False), "",
        "GraphML: `data/processed/graph/polar_graph.graphml` (opens in Gephi; Neo4j via APOC import).", "",
    ])


def constraint_figure(df: pd.DataFrame, k: int) -> plt.Figure:
    cols = [f"Conflict@{k} (memory)", f"Conflict@{k} (ground truth)", "target mRR@1"]
    long = df.melt(id_vars=["strength"], value_vars=cols, var_name="metric")
    fig, ax = plt.subplots(figsize=(7, 3.4))
    sns.barplot(long, x="strength", y="value", hue="metric", ax=ax)
    ax.set_xlabel("constraint strength")
    ax.set_title("Constraint strength: conflicts kept in the top-k vs accuracy (cf. PolarMem Fig. 3)")
    ax.legend(bbox_to_anchor=(1.02, 1), loc="upper left", fontsize=8)
    plt.setp(ax.get_xticklabels(), rotation=30, ha="right")
    return fig


def coverage_figure(df: pd.DataFrame) -> plt.Figure:
    """Left: Proposal Recall@K against the budget, one line per strategy; right: score against Proposal Recall@K."""
    d = df[~df["setting"].str.contains("completion")].copy()
    d["strategy"] = d["setting"].str.split(":").str[0]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    sns.lineplot(d, x="concepts proposed per image", y="Proposal Recall@K", hue="strategy", style="strategy",
                 markers=True, dashes=False, ax=left)
    left.set_title("Coverage per budget (equal K)")
    sns.scatterplot(d, x="Proposal Recall@K", y="overall score", hue="strategy", style="strategy", s=60, ax=right, legend=False)
    right.set_ylabel("target accuracy@1 under constraints")
    right.set_title("Score vs coverage (cf. PolarMem Table 2)")
    fig.tight_layout()
    return fig
