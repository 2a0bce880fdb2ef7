"""What the graph stage and the PolarMem axes show a reader: the per-stage cost table (Table 7 layout), the graph
report, and the constraint / coverage figures and captions."""

from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from polarcatalog.memory.polar_graph import PolarGraph
from polarcatalog.memory.partition import HAS, NOT_HAS

CAPTIONS = {  # how to read each ablation table (the markdown written by 05_ablate)
    "constraint": "Constrained queries: Q+ is a concept the target has; Q− one it lacks that a similar species has. "
                  "**Primary set**: the similar species is one of the target's nearest catalog neighbours (artwork ↔ "
                  "artwork), chosen without looking at the ranking being scored; the **secondary** set takes it from that "
                  "ranking (tailored, reported for comparison). Q+ is true of the target, so a constraint is partial "
                  "label information: the **oracle** memory (edges = ground truth) shows how far that information alone "
                  "carries the answer, the **random** memory (per concept as dense as the configured memory where the queries read it, random species) what "
                  "a memory without knowledge does, and `none` is the unconstrained accuracy. Conflict@k is the share of "
                  "contradictory candidates in the final top-k; the filter rate is, of the contradictory candidates in "
                  "the unconstrained top-`graph.filter_pool`, the share kept out of the top-k (PolarMem Fig. 3); both per "
                  "query, then averaged. By the memory's own states, Conflict@k is what hard retrieval guarantees (0 "
                  "whenever ≥ k compatible candidates exist); by ground truth, what the imperfect graph achieves. "
                  "`none` is the do-nothing baseline of every Conflict@k and filter rate. `graph.constraint` is chosen "
                  "on dev by one objective, stated here: target accuracy@1 on the primary set with the configured memory "
                  "(a constraint must not cost the user the answer); `reports/memory_quality.md` shows how good the "
                  "memory must be before a constraint raises it.\n\n",
    "coverage": "Table 2 layout. Every budgeted proposer proposes exactly K concepts per catalog image (column 2), so "
                "rows with the same K compare strategies at equal cost: `top_n` the single prompt on the global view, "
                "`multi_prompt` one prompt per facet merged round-robin, `global_local` the global view and its local "
                "views merged round-robin, `random_n` no information. Score = target accuracy@1 under the configured "
                "constraint strength, without completion except in the last row (completion: the query's concepts join "
                "each candidate's proposal set before partition); a query is covered when its constraint concepts "
                "were proposed on the target's and the distractor's catalog images. Edge precision / recall are "
                "measured on the pairs the queries read (pool candidates × constraint concepts); `catalog` columns "
                "are properties of the memory, not means over queries. `graph.proposer` is chosen on dev by the overall "
                "score (the completion row is a variant, not a value of the proposer).\n\n",
}


def _peak_rss_reset() -> bool:
    """Reset this process's resident-memory high-water mark (Linux: /proc/self/clear_refs, "5"); False where absent."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _peak_rss_mb() -> float:
    """VmHWM of /proc/self/status: the process's peak resident memory since the last reset, in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@contextmanager
def measured(costs: list[dict], stage: str, episodes: int, calls: float = 0.0) -> Iterator[None]:
    """Time and peak memory of one stage, reported per episode (one catalog image), Table 7 style.

    Memory is the process's peak resident set during the stage (the kernel's high-water mark, reset at the stage's
    start): it counts the models' native buffers too, which a Python-heap tracer misses, and costs nothing, where
    tracemalloc slowed allocation-heavy steps (model loading, tokenising) about 3x. NaN where /proc is absent."""
    tracked = _peak_rss_reset()
    t0 = time.perf_counter()
    try:
        yield
    finally:
        seconds = time.perf_counter() - t0
        peak = _peak_rss_mb() if tracked else float("nan")
        costs.append({"stage": stage, "time per episode (ms)": 1000 * seconds / max(episodes, 1),
                      "backend calls per episode": calls, "peak memory (MB)": peak, "total (s)": seconds})


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


def graph_markdown(graph: PolarGraph, verifier: str, notes: dict[str, str], quality: dict, evaluated: pd.DataFrame,
                   per_group: pd.DataFrame, stats: dict, cost: pd.DataFrame) -> str:
    """`verifier`: the verifier's own one-sentence description; `notes`: where the ground truth comes from."""
    return "\n".join([
        "# Polarized graph (PolarMem) on the embedded catalog", "",
        f"{len(graph.visual_ids)} visual nodes, {len(graph.text_ids)} text nodes, {len(graph.vocab)} concept nodes. "
        f"Verifier: {verifier} Ground truth: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in notes.items()) + ".", "",
        "## Edge quality against ground truth", "", "Every edge of the graph as proposed:", "",
        pd.DataFrame([quality]).round(3).to_markdown(index=False), "",
        "The memory the constraint axis evaluates, on the pairs it reads (each primary constrained query's target and "
        "look-alike neighbourhood × its constraint concepts), as proposed and with critical completion (the query's "
        "concepts join each candidate's proposal set before partition):", "",
        evaluated.round(3).to_markdown(), "",
        "## Probe AUC per concept group", "", per_group.round(3).to_markdown(), "",
        "## Graph statistics (PolarMem B.2)", "", pd.DataFrame([stats]).round(3).T.rename(columns={0: "value"}).to_markdown(), "",
        "## Per-stage cost per episode (one catalog image; Table 7 layout)", "",
        cost[["stage", "backend calls per episode"]].to_markdown(index=False), "",
        "Time and peak memory per episode vary from run to run, so they are kept out of this committed file: they are in "
        "the stage's MLflow run (`tables/cost.md`, metric `cost_total_ms_per_image`) and in the executed notebook.", "",
        "GraphML: `data/processed/graph/polar_graph.graphml` (opens in Gephi; Neo4j via APOC import).", "",
    ])


def _grouped_bars(ax: plt.Axes, d: pd.DataFrame, x: str, hue: str) -> None:
    """Bars of `value` per x (in order of appearance) and hue, with the CI as error bars."""
    xs, hues = list(dict.fromkeys(d[x])), list(dict.fromkeys(d[hue]))
    width = 0.8 / max(len(hues), 1)
    for i, h in enumerate(hues):
        sub = d[d[hue] == h].set_index(x).reindex(xs)
        pos = np.arange(len(xs)) + (i - (len(hues) - 1) / 2) * width
        ax.bar(pos, sub["value"], width, label=h,
               yerr=[(sub["value"] - sub["ci_low"]).clip(lower=0), (sub["ci_high"] - sub["value"]).clip(lower=0)], capsize=2)
    ax.set_xticks(np.arange(len(xs)), xs, rotation=30, ha="right")


def constraint_figure(df: pd.DataFrame, k: int) -> plt.Figure:
    """Test, all queries, primary constrained set: accuracy, ground-truth Conflict@k and filter rate per strength, the
    configured memory beside the oracle and random controls (95 % CI bars)."""
    d = df[(df["split"] == "test") & (df["queries"] == "all") & (df["set"] == df["set"].iloc[0])
           & ~df["strength"].str.contains("query-image")]
    metrics = ["target mRR@1", f"Conflict@{k} (ground truth)", "Filter rate (ground truth)"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 3.8))
    for ax, m in zip(axes, metrics):
        _grouped_bars(ax, d[d["metric"] == m], "strength", "memory")
        ax.set_title(m)
    axes[0].legend(fontsize=7)
    fig.suptitle("Constraint strength × memory (cf. PolarMem Fig. 3), test queries, 95% CI")
    fig.tight_layout()
    return fig


def coverage_figure(df: pd.DataFrame) -> plt.Figure:
    """Left: Proposal Recall@K against the budget, one line per strategy; right: test score against Proposal Recall@K."""
    cat = df[df["split"] == "catalog"].pivot(index="setting", columns="metric", values="value")
    test = df[(df["split"] == "test") & (df["queries"] == "all") & (df["metric"] == "overall score")].set_index("setting")
    d = cat.join(test[["value", "ci_low", "ci_high"]]).reset_index()
    d = d[~d["setting"].str.contains("completion")]
    d["strategy"] = d["setting"].str.split(":").str[0]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    sns.lineplot(d, x="concepts proposed per image", y="Proposal Recall@K", hue="strategy", style="strategy",
                 markers=True, dashes=False, ax=left)
    left.set_title("Coverage per budget (equal K)")
    for strategy, g in d.groupby("strategy", sort=False):
        right.errorbar(g["Proposal Recall@K"], g["value"], yerr=[g["value"] - g["ci_low"], g["ci_high"] - g["value"]],
                       fmt="o", capsize=3, label=strategy)
    right.set_xlabel("Proposal Recall@K")
    right.set_ylabel("test accuracy@1 under constraints")
    right.set_title("Score vs coverage (cf. PolarMem Table 2), 95% CI")
    fig.tight_layout()
    return fig
