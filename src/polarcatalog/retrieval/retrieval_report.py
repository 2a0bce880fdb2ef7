"""What the retrieve stage and the λ / top-k axes show a reader: the comparison table (VR-RAG Tables 2 and 5
layout), its markdown, the per-query audit log, and the sweep figures (Figs. 3 and 2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from polarcatalog.eval.bootstrap import Interval
from polarcatalog.eval.metrics import RANK_METRICS, chance, gold_ranks
from polarcatalog.eval.protocol import Protocol, ci_text, diff_text
from polarcatalog.retrieval.vrrag import Ranking

CAPTIONS = {  # how to read each ablation table (the markdown written by 05_ablate)
    "lam": "s = λ·s_m + (1−λ)·s_i (VR-RAG Eq. 2): λ = 1 is retrieval only, λ = 0 re-rank only. With the configured "
           "`anchors` chunks, s_m is itself an image similarity, so this curve weighs one CNN's anchor similarity "
           "against another's: it is not the paper's trade-off. The paper's Fig. 3 setting is the `multimodal` rows "
           "(s_m from text + image chunks vs the image-only re-rank), swept beside it. An interior optimum means both "
           "scores carry information. λ is chosen on dev; its test number is reported with a CI.\n\n",
    "top_k": "Recall@k of the species list passed on (Fig. 2): the bound on any reader's accuracy at that k. Nothing is "
             "chosen here (recall can only grow with k). With `reader.model` set, the MLLM reader's accuracy at each k "
             "is beside it (the paper's Fig. 2 itself); without one, the answerer is the visual re-ranker, whose "
             "accuracy is R@1.\n\n",
}


def audit_table(queries: pd.DataFrame, ranking: Ranking, keep: int = 10) -> pd.DataFrame:
    """Per-query evidence: split, gold, ranked species with each component's score, and the gold's rank
    (pessimistic ties, as every metric)."""
    gold = queries["species_id"].to_numpy()
    ranks = gold_ranks(ranking.species_ids, gold, ranking.s)
    top = slice(0, keep)
    return pd.DataFrame({
        "query_id": queries["query_id"].tolist(),
        "split": queries["split"].tolist(),
        "variant": queries["variant"].tolist(),
        "gold_species_id": gold,
        "gold_rank": ranks,
        "ranked_species_ids": [r[top].tolist() for r in ranking.species_ids],
        "s_m": [r[top].round(5).tolist() for r in ranking.s_m],
        "s_i": [r[top].round(5).tolist() for r in ranking.s_i],
        "s": [r[top].round(5).tolist() for r in ranking.s],
    })


@dataclass
class Row:
    """One configuration of the comparison table and its per-query metric values ([Q, len(RANK_METRICS)]). A `lever`
    row is a choice (a robustness lever kept or not on dev): it shows dev only, never a test number."""

    label: str
    config: Mapping[str, Any]
    values: np.ndarray
    lever: bool = False


def comparison_table(rows: list[Row], protocol: Protocol, baseline: str, n_species: int) -> pd.DataFrame:
    """VR-RAG Tables 2/5 layout, read the protocol's way: `dev mRR@1` is what choices read; every other column is
    `test` with its 95 % CI, and each row's difference to the baseline row is paired (* = CI excludes 0). The last
    row is chance level."""
    base = next(r for r in rows if r.label == baseline).values
    m1 = RANK_METRICS.index("mRR@1")
    out = []
    for r in rows:
        cfg = r.config
        row = {"configuration": r.label, "ensemble": "+".join(cfg["ensemble"]), "chunks": cfg["chunks"],
               "re-ranker": cfg["reranker"] or "—", "λ": cfg["lam"] if cfg["reranker"] else float("nan"),
               "dev mRR@1": round(100 * protocol.mean(r.values[:, m1], "dev"), 1),
               "test mRR@1 [95% CI]": "— (a lever: dev only)" if r.lever else ci_text(protocol.interval(r.values[:, m1])),
               "Δ vs baseline": "baseline" if r.label == baseline else "—" if r.lever else
               diff_text(protocol.difference(r.values[:, m1], base[:, m1]))}
        for g in protocol.group_names[1:]:
            row[f"test {g} mRR@1"] = float("nan") if r.lever else round(100 * protocol.interval(r.values[:, m1], group=g).value, 1)
        for name in ("mRR@10", "R@10"):
            row[f"test {name}"] = float("nan") if r.lever else round(100 * protocol.interval(r.values[:, RANK_METRICS.index(name)]).value, 1)
        out.append(row)
    c = chance(n_species)
    out.append({"configuration": "chance (uniform random ranking)", "ensemble": "—", "chunks": "—", "re-ranker": "—",
                "λ": float("nan"), "dev mRR@1": round(100 * c["mRR@1"], 1), "test mRR@1 [95% CI]": f"{100 * c['mRR@1']:.1f}",
                "Δ vs baseline": "—", **{f"test {g} mRR@1": round(100 * c["mRR@1"], 1) for g in protocol.group_names[1:]},
                "test mRR@10": round(100 * c["mRR@10"], 1), "test R@10": round(100 * c["R@10"], 1)})
    return pd.DataFrame(out)


def plot_name(config: Mapping[str, Any], configured: Mapping[str, Any]) -> str:
    """A row's short name for `dvc plots diff`: what the row is relative to the configured pipeline, never the values
    it ran with, so that the same row of two revisions (say λ 0.5 and 0.7) lands on the same bar."""
    if dict(config) == dict(configured):
        return "configured"
    if {k for k in config if config[k] != configured.get(k)} == {"query_centre"}:
        return f"configured · {config['query_centre']} protocol"
    ensemble = list(config["ensemble"])
    encoders = ("configured encoders" if ensemble == list(configured["ensemble"]) else
                ensemble[0] if len(ensemble) == 1 else f"{len(ensemble)}-encoder ensemble")
    return f"{encoders} · {config['chunks']}" + (" + re-rank" if config["reranker"] else "")


def plot_data(rows: list[Row], protocol: Protocol, baseline: str) -> pd.DataFrame:
    """The figure's data (a DVC plot, committed): dev mRR@1, test mRR@1 with its CI, and the paired difference to the
    baseline row with its CI, per configuration; at full precision (`write_csv` keeps 6 places), so that a table built
    from it rounds once, as the retrieve stage's own table does. `row` is the short name the DVC plot shows
    (`plot_name`); `configuration` the table's full label."""
    m1 = RANK_METRICS.index("mRR@1")
    configured = next(r for r in rows if r.label == baseline)
    base = configured.values[:, m1]
    rows = [r for r in rows if not r.lever]  # a lever is a choice: dev only, in the table, never plotted on test
    ivs = [protocol.interval(r.values[:, m1]) for r in rows]
    diffs = [protocol.difference(r.values[:, m1], base) for r in rows]
    return pd.DataFrame({"row": [plot_name(r.config, configured.config) for r in rows],
                         "configuration": [r.label for r in rows], "baseline": [r.label == baseline for r in rows],
                         "dev mRR@1": [protocol.mean(r.values[:, m1], "dev") for r in rows],
                         "test mRR@1": [iv.value for iv in ivs], "ci_low": [iv.ci_low for iv in ivs],
                         "ci_high": [iv.ci_high for iv in ivs], "delta": [d.value for d in diffs],
                         "delta_low": [d.ci_low for d in diffs], "delta_high": [d.ci_high for d in diffs]})


def table_figure(data: pd.DataFrame, chance_level: float) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(data) + 1))
    y = np.arange(len(data))
    ax.barh(y, 100 * data["test mRR@1"], color="steelblue",
            xerr=[100 * (data["test mRR@1"] - data["ci_low"]), 100 * (data["ci_high"] - data["test mRR@1"])], capsize=3)
    ax.axvline(100 * chance_level, color="grey", ls=":", label="chance")
    ax.set_yticks(y, data["configuration"])
    ax.invert_yaxis()
    ax.set_xlabel("test mRR@1 (%) with 95% CI, whole catalog")
    ax.legend(loc="lower right", fontsize=8)
    return fig


def retrieval_metrics(rows: list[Row], protocol: Protocol, configured: str, query_protocols: dict[str, str], query_centre: str,
                      n_species: int, anchor_scale: dict[str, Any], bridge_cosine: dict[str, float]) -> dict[str, Any]:
    """The retrieve stage's metrics file: headline numbers are `test` with CIs; `best_on_dev` records a choice made on
    dev and what it gives on test. `query_protocols`: the row label of the configured pipeline under each query-side
    protocol (`retrieval.query_centre` value -> label); `query_statistics_gain` is what the configured protocol's query
    statistics add over none at all (the catalog-mean protocol), paired on test."""
    m1 = RANK_METRICS.index("mRR@1")
    by = {r.label: r.values for r in rows}
    groups = protocol.group_names[1:]
    protocols = {mode: {"configuration": label, "dev_mRR@1": round(protocol.mean(by[label][:, m1], "dev"), 4),
                        "mRR@1": protocol.interval(by[label][:, m1]).record("test"),
                        **{g: protocol.interval(by[label][:, m1], group=g).record("test") for g in groups}}
                 for mode, label in query_protocols.items()}
    gain = ({"query_statistics_gain": protocol.difference(by[configured][:, m1], by[query_protocols["catalog"]][:, m1]).record("test")}
            if "catalog" in query_protocols and query_centre != "catalog" else {})
    # a choice (its test number is not read); a tie goes to the configured row, as in the selection pipeline
    best = max(rows, key=lambda r: (round(protocol.mean(r.values[:, m1], "dev"), 12), r.label == configured))
    test = lambda v, g="all": {m: protocol.interval(v[:, i], group=g).record("test") for i, m in enumerate(RANK_METRICS)}  # noqa: E731
    return {
        "protocol": protocol.describe(),
        "configured": {"all": test(by[configured]), **{g: {"mRR@1": protocol.interval(by[configured][:, m1], group=g).record("test")}
                                                       for g in protocol.group_names[1:]}},
        "configured_dev_mRR@1": round(protocol.mean(by[configured][:, m1], "dev"), 4),
        "query_centre": query_centre,
        "query_protocols": protocols,
        **gain,
        "best_on_dev": {"configuration": best.label, "chosen_on": "dev", "dev_mRR@1": round(protocol.mean(best.values[:, m1], "dev"), 4),
                        "is_configured": best.label == configured},
        "anchor_scale_px": anchor_scale,
        "chance": {k: round(v, 6) for k, v in chance(n_species).items()},
        "bridge_cosine": {k: round(v, 4) for k, v in bridge_cosine.items()},
        "queries": int(len(protocol.split)), "species": int(n_species),
    }


def _diff_record(r: dict[str, Any]) -> str:
    return diff_text(Interval(r["value"], r["ci_low"], r["ci_high"], r.get("n", 0)))


def retrieval_markdown(table: pd.DataFrame, metrics: dict, configured: Mapping[str, Any]) -> str:
    """`configured`: the configured pipeline's {ensemble, chunks, reranker, lam, r}."""
    c, b, p = metrics["configured"], metrics["best_on_dev"], metrics["protocol"]
    groups = [k for k in c if k != "all"]
    cell = lambda r: f"**{100 * r['value']:.1f}** [{100 * r['ci_low']:.1f}, {100 * r['ci_high']:.1f}]"  # noqa: E731
    scale = metrics["anchor_scale_px"]
    return "\n".join([
        "# Retrieval: VR-RAG components on the embedded catalog", "",
        f"{metrics['queries']} sprite queries of {metrics['species']} species, each ranked against the whole catalog. "
        f"Protocol: {p['dev_species']} **dev** species ({p['dev_queries']} queries) make every choice; {p['test_species']} "
        f"**test** species ({p['test_queries']} queries) report it. Values in %, 95 % CIs from a paired bootstrap over "
        f"species ({p['bootstrap']} resamples; a species' regular and shiny sprites are resampled together). "
        "Ties are pessimistic: the gold ranks after every species with the same score. mRR@k and R@k rank **species**: "
        "each species' chunks are reduced to its best one before ranking, so a species counts once (VR-RAG ranks chunks, "
        "where one species can fill several places). Layout of VR-RAG Tables 2 and 5.", "",
        f"**Configured pipeline** (`params.yaml` retrieval: ensemble {'+'.join(configured['ensemble'])}, chunks "
        f"{configured['chunks']}, re-ranker {configured['reranker']}, λ={configured['lam']}, r={configured['r']}): "
        f"test mRR@1 {cell(c['all']['mRR@1'])}, mRR@10 {cell(c['all']['mRR@10'])}, R@10 {cell(c['all']['R@10'])} "
        "(" + "; ".join(f"{g}: {cell(c[g]['mRR@1'])}" for g in groups) + ").", "",
        f"**Best row on dev**: {b['configuration']} (dev mRR@1 {100 * b['dev_mRR@1']:.1f})"
        + (": the configured pipeline." if b["is_configured"] else
           f"; the configured pipeline's dev mRR@1 is {100 * metrics['configured_dev_mRR@1']:.1f}. A choice is read on dev "
           "only: the configured values come from the selection pipeline's dev search ([selection/retrieval.md]"
           "(selection/retrieval.md)), whose grid this table's rows are part of."), "",
        *([f"**Query-side protocols** (`retrieval.query_centre`, configured: `{metrics['query_centre']}`): test mRR@1 "
           + "; ".join(f"{mode} {cell(q['mRR@1'])}" for mode, q in metrics["query_protocols"].items()) + ". "
           + (f"The configured protocol's query statistics add {_diff_record(metrics['query_statistics_gain'])} over none at all "
              "(each query centred by the catalog mean, VR-RAG's protocol): that share of the headline comes from the "
              "query domain's statistics, not from a VR-RAG component." if "query_statistics_gain" in metrics else ""), ""]
          if metrics.get("query_protocols") else []),
        table.to_markdown(index=False), "",
        "Reading the table honestly:",
        "- `Δ vs baseline` is paired (same test queries, same resamples); `*` marks a difference whose CI excludes 0. "
        "Anything else is within noise at this test size.",
        "- **Query statistics.** No test query enters a statistic that scores a dev query. `reference`: each query is "
        "scored alone, centred and CSLS-corrected by a fixed, label-free set of dev queries; test by every dev query, and "
        "each of `retrieval.reference_folds` folds of the dev species by the other folds, so dev is scored the way test "
        "is and no query calibrates itself. `catalog`: each query alone, centred by the catalog mean, no CSLS (VR-RAG's "
        "protocol). `batch` (transductive): each split's queries centre and CSLS-correct each other.",
        f"- The anchors are shrunk to {scale['value']} px: {scale.get('ratio', 1.0):g} x the median subject size of the **dev** "
        f"queries (`encoders.anchor_scale: {scale['setting']}`, `anchor_scale_ratio`); the test queries never chose it.",
        "- **Robustness levers** (rows `· no ...` and `· anchors at ...`): each takes one lever out of the configured "
        "pipeline, kept because it helped on dev: the test-time query flip (a query averaged with its mirror image), the "
        "anchor mirror, the anchor scale (compared without the anchor mirror, so against the `no anchor mirror` row) "
        "and the hubness correction (CSLS, `retrieval.hubness`, over the same query statistics as the centring). "
        "A lever is a choice, so its row shows dev only (no test number is read for a setting that is not "
        "configured). The `no colour-nuisance projection` row (when `retrieval.colour_invariant` is set) is the one lever chosen "
        "jointly with the ensemble members on dev rather than on its own (`reports/selection/retrieval.md`, the "
        "selection pipeline's dev-only search).",
        "- `text` rows use the chunk text alone. The embedded encoders have no text tower, so chunk text reaches "
        "their space through a ridge map from MiniLM fitted on other species only (cross-fitted by species folds); "
        f"its held-out cosine to the true anchor means is {', '.join(f'{k}: {v:.3f}' for k, v in metrics['bridge_cosine'].items())}. "
        "It is near chance, and mixing it into the chunk vector (Eq. 1, `multimodal`) costs accuracy here; with "
        "CLIP-like encoders (`open_clip:...`) the text tower is native and Eq. 1 is the paper's setting.",
        "- The configured pipeline's per-query rankings, with s_m, s_i and s, are in `data/processed/audit/retrieve_queries.parquet`.",
        "",
    ])


def _band(ax: plt.Axes, d: pd.DataFrame, x: str, label: str, **style: Any) -> None:
    d = d.sort_values(x)
    ax.plot(d[x], d["value"], marker="o", label=label, **style)
    ax.fill_between(d[x], d["ci_low"], d["ci_high"], alpha=0.2, color=ax.lines[-1].get_color())


def lambda_figure(df: pd.DataFrame, configured_chunks: str) -> plt.Figure:
    """Test mRR@1 with its 95 % CI band against λ: the configured chunks per query group, and the paper's setting
    (multimodal chunks) beside them."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.6), sharey=True)
    test = df[(df["split"] == "test") & (df["metric"] == "mRR@1")]
    for g in test["queries"].unique():
        _band(left, test[(test["chunks"] == configured_chunks) & (test["queries"] == g)], "lam", g)
    left.set_title(f"configured: {configured_chunks} chunks")
    for chunks in test["chunks"].unique():
        _band(right, test[(test["chunks"] == chunks) & (test["queries"] == "all")], "lam", f"{chunks} chunks")
    right.set_title("paper's setting (multimodal) vs configured, all queries")
    for ax in (left, right):
        ax.set_xlabel("λ  (s = λ·s_m + (1−λ)·s_i)")
        ax.legend(fontsize=8)
    left.set_ylabel("test mRR@1 (95% CI band)")
    fig.suptitle("Impact of varying λ (cf. VR-RAG Fig. 3)")
    fig.tight_layout()
    return fig


def top_k_figure(df: pd.DataFrame) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(6, 3.4))
    reader = bool((df["metric"] == "reader accuracy").any())
    for metric in ("R@k", "reader accuracy"):
        test = df[(df["split"] == "test") & (df["metric"] == metric)]
        for g in test["queries"].unique():
            _band(ax, test[test["queries"] == g], "k", f"{g}, {metric}" if reader else g)
    ax.set_xlabel("k (species passed on)")
    ax.set_ylabel("test value (95% CI band)")
    ax.set_title("Impact of top-k (cf. VR-RAG Fig. 2" + ("; MLLM reader)" if reader else "; no reader model: retrieval recall)"))
    ax.legend(fontsize=8)
    return fig
