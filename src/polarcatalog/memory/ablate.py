"""PolarMem ablation axes: constraint strength (Fig. 3 / Table 3) and proposer coverage (Table 2)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from polarcatalog.eval.metrics import gold_ranks
from polarcatalog.memory.build import PolarSetup, query_image_concepts, truth_rows
from polarcatalog.memory.evaluate import covered, evaluate_strengths
from polarcatalog.memory.graph import edge_quality
from polarcatalog.memory.propose import parse_coverage, proposal_recall
from polarcatalog.retrieval.polar import Strength, candidate_states, reorder


CAPTIONS = {  # how to read each report table (the markdown written by 05_ablate)
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


def constraint_axis(setup: PolarSetup, gp, specs: list[str]) -> pd.DataFrame:
    has, not_has = setup.memory(gp)
    strengths = [Strength.parse(s, gp.adaptive_max_penalty) for s in specs]
    df = evaluate_strengths(setup.cand, setup.s, setup.target, setup.queries, has, not_has, setup.inputs.truth,
                            strengths, gp.constraint_k, gp.adaptive_temperature)
    df.insert(0, "spec", specs)
    # the configured strength again, with the query image's own verified concepts as extra constraints
    extra = query_image_concepts(setup.scores.query, gp.proposer, gp.proposer_n, gp.kappa, gp.seed, setup.inputs.groups)
    row = evaluate_strengths(setup.cand, setup.s, setup.target, setup.queries, has, not_has, setup.inputs.truth,
                             [Strength.parse(gp.constraint, gp.adaptive_max_penalty)], gp.constraint_k,
                             gp.adaptive_temperature, extra=extra)
    row.insert(0, "spec", f"{gp.constraint} + query-image concepts")
    row["strength"] = row["strength"] + " + query-image concepts"
    return pd.concat([df, row], ignore_index=True)


def coverage_axis(setup: PolarSetup, gp, specs: list[str]) -> pd.DataFrame:
    """Table 2 layout: Proposal Recall@K, score on covered vs missed queries, overall; score = target accuracy@1
    under the configured constraint strength, without completion (so that coverage is what varies), plus a final
    row with critical-concept completion on the configured proposer (`graph.proposer`, `graph.proposer_n`)."""
    truth_nodes = truth_rows(setup.inputs, setup.inputs.anchor_species)
    nodes: dict[int, list[int]] = {}
    for v, row in enumerate(setup.inputs.species_index(setup.inputs.anchor_species)):
        nodes.setdefault(int(row), []).append(v)
    strength = Strength.parse(gp.constraint, gp.adaptive_max_penalty)
    cq = setup.queries
    c, sc, tg = setup.cand[cq.rows], setup.s[cq.rows], setup.target[cq.rows]
    rows = []
    configured = "all" if gp.proposer == "all" else f"{gp.proposer}:{gp.proposer_n}"
    for spec in [*specs, f"{configured} + critical completion"]:
        base = spec.replace(" + critical completion", "")
        strategy, n = parse_coverage(base)
        g = setup.graph(strategy, n, gp.kappa, gp.seed)
        if spec.endswith("critical completion"):
            g = g.completed()
        has, not_has = g.species_incidence(setup.inputs.species_ids)
        states = candidate_states(c, has, not_has, cq.q_pos, cq.q_neg)
        ranks = gold_ranks(np.take_along_axis(c, reorder(states, sc, strength, gp.adaptive_temperature), 1), tg)
        hit = ranks <= 1
        cov = covered(cq, g.proposed, setup.target, nodes)
        eq = edge_quality(g, truth_nodes)
        rows.append({"setting": spec, "concepts proposed per image": float(g.proposed.sum(1).mean()),
                     "Proposal Recall@K": proposal_recall(g.proposed, truth_nodes),
                     "score (covered)": float(hit[cov].mean()) if cov.any() else float("nan"),
                     "score (missed)": float(hit[~cov].mean()) if (~cov).any() else float("nan"),
                     "overall score": float(hit.mean()), "covered queries": float(cov.mean()),
                     "HAS precision": eq["has_precision"], "HAS recall": eq["has_recall"],
                     "NOT_HAS precision": eq["not_has_precision"], "NOT_HAS recall": eq["not_has_recall"]})
    return pd.DataFrame(rows)


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
