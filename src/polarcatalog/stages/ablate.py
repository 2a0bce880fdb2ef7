"""The ablate stage (notebook 05, one DVC stage per axis): the axes it sweeps, one registry entry each (`AXES[name]`): λ and top-k (VR-RAG Figs. 3
and 2) over the configured retriever's candidates, constraint strength and proposer coverage (PolarMem Fig. 3 /
Table 3, Table 2) over the graph stage's scores. Adding an axis: a sweep, a figure, a caption and its values in
`ablations` (params), then a `foreach` item in dvc.yaml.

Every sweep returns the protocol's tidy rows (value, split, query group, metric, point value, CI), written as the
axis's plot data; the detail file keeps the test numbers with CIs and the value chosen on dev; the headline file
(`dvc exp show`) keeps the test numbers at the axis's marks (the configured value and its reference), never a best
over test values."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from polarcatalog.from_params import polar_setup
from polarcatalog.config import Params
from polarcatalog.data.images import load_rgb
from polarcatalog.eval.protocol import CI_HIGH, CI_LOW, Protocol
from polarcatalog.features.workspace import Workspace
from polarcatalog.kg import kg_report
from polarcatalog.kg.bridge_sweep import bridge_rows
from polarcatalog.kg.facts import reader_facts
from polarcatalog.kg.knowledge_graph import species_links
from polarcatalog.kg.triples import read_triples
from polarcatalog.memory import polar_report
from polarcatalog.memory.constraints import Strength
from polarcatalog.memory.propose import ProposerSpec
from polarcatalog.memory.polar_sweeps import constraint_axis, coverage_axis
from polarcatalog.parallel import fork_map
from polarcatalog.reader.accuracy import reader_rows
from polarcatalog.reader.answers import SpeciesMatcher
from polarcatalog.reader.mllm import MLLMReader
from polarcatalog.retrieval import retrieval_report
from polarcatalog.retrieval.query_side import Retriever, run_retrieval, species_scores
from polarcatalog.retrieval.vrrag_sweeps import sweep_lambda, sweep_top_k
from polarcatalog.retrieval.vrrag import VRRAG, Candidates, Ranking

LONG = ("split", "queries", "metric", "value", "ci_low", "ci_high", "n")  # the protocol's columns; the rest identify a row


@dataclass
class Sweep:
    """What every axis starts from: the configured retriever's candidates, computed once per axis."""

    ws: Workspace
    params: Params
    vr: VRRAG
    cands: Candidates
    ranking: Ranking
    protocol: Protocol
    scores_path: Path  # the graph stage's verifier scores (PolarMem axes)
    triples_path: Path = Path("data/processed/kg/triples.parquet")  # the kg stage's graph (the bridge axis)

    @property
    def gold(self) -> np.ndarray:
        return self.ws.queries["species_id"].to_numpy()


@dataclass(frozen=True)
class Axis:
    name: str  # params `ablations.<name>`, the dvc.yaml foreach item
    key: str  # the column holding the swept value
    metric: str  # the metric a choice on dev reads (and the report leads with)
    choose: bool  # whether the best value on dev is a choice (λ: yes; top-k: more is always more)
    caption: str
    sweep: Callable[[Sweep], pd.DataFrame]
    figure: Callable[[pd.DataFrame, Params], plt.Figure]
    # The swept values the headline reports, the configured one first (then its reference: no constraint, every
    # concept proposed, twice the paper's k). Read from the axis's own params only (the stage's read audit).
    marks: Callable[[Params], tuple[Any, ...]]
    point: Callable[[Any], dict[str, Any]]  # a swept value → the params it stands for (dotted keys), for child runs
    table_metrics: tuple[str, ...] = ()  # test metrics the markdown table shows (regexes; empty = all)
    recorded: tuple[str, ...] = ()  # test metrics the detail file records (regexes; empty = `metric`)
    across: tuple[str, ...] = ()  # id columns the detail file keeps every value of (e.g. the control memories)
    headline_metrics: tuple[str, ...] = ()  # test metrics the headline file shows at each mark (regexes; empty = `metric`)


def _lam(s: Sweep) -> pd.DataFrame:
    """The configured chunks and, beside them, the paper's setting (multimodal chunks: text + image vs image)."""
    rp = s.params.retrieval
    if rp.reranker is None:
        raise ValueError("the λ axis needs retrieval.reranker (λ weighs s_m against the re-ranker's s_i)")
    out = [sweep_lambda(s.vr, s.cands, s.gold, s.protocol, s.params.ablations.lam).assign(chunks=rp.chunks)]
    if rp.chunks != "multimodal":
        vr, cands, _ = run_retrieval(s.ws, s.vr.catalog, rp.model_copy(update={"chunks": "multimodal"}))
        out.append(sweep_lambda(vr, cands, s.gold, s.protocol, s.params.ablations.lam).assign(chunks="multimodal"))
    return pd.concat(out, ignore_index=True)


def _top_k(s: Sweep) -> pd.DataFrame:
    """Recall@k of the list passed on; with `reader.model`, the reader's accuracy at each k too (Fig. 2)."""
    rows = sweep_top_k(s.vr, s.cands, s.gold, s.protocol, s.params.ablations.top_k, s.params.retrieval.lam)
    rp = s.params.reader
    if rp.model is None:
        return rows  # no reader: the answerer is the re-ranker, whose accuracy is R@1
    reader = MLLMReader(rp.model, s.params.encoders.device, rp.batch_size, rp.max_new_tokens)
    species = s.ws.species
    matcher = SpeciesMatcher(dict(zip(species["species_id"], species["name"])), threshold=rp.fuzzy_threshold)
    facts = reader_facts(read_triples(s.triples_path), species) if rp.facts else None
    ranked = s.vr.rank(s.cands, s.params.retrieval.lam, max(s.params.ablations.top_k)).species_ids
    images = [load_rgb(p) for p in s.ws.queries["path"]]
    read = lambda ims, prompts: reader.read(ims, prompts, desc="reader")  # noqa: E731
    acc = reader_rows(read, images, ranked, species, s.gold, matcher, s.protocol, s.params.ablations.top_k,
                      s.params.dataset.domain, facts)
    return pd.concat([rows, acc], ignore_index=True)


def _constraint(s: Sweep) -> pd.DataFrame:
    return constraint_axis(polar_setup(s.ws, s.params, s.scores_path, s.ranking), s.params.ablations.constraint, s.protocol)


def _coverage(s: Sweep) -> pd.DataFrame:
    return coverage_axis(polar_setup(s.ws, s.params, s.scores_path, s.ranking), s.params.ablations.coverage, s.protocol)


def _bridge(s: Sweep) -> pd.DataFrame:
    """+KGret against its budget-matched control at every B (the graph-RAG paper's budget of two chunks, varied)."""
    kp = s.params.kg
    base, answer, ids = species_scores(Retriever.build(s.ws, s.params.retrieval, s.vr.catalog))  # the sweep's catalog
    index = {int(x): i for i, x in enumerate(ids)}
    gold = np.array([index.get(int(x), -1) for x in s.gold])
    links = species_links(read_triples(s.triples_path), ids, kp.links)
    # one budget at a time, the machine's other core taking half of them (`fork_map`): each budget's rows are its own
    parts = fork_map(lambda b: bridge_rows(base, answer, gold, links, s.params.retrieval.k, [b], kp.hops, s.protocol,
                                           splits=("dev", "test"), systems=("+KGret", "budget-matched"))[0],
                     s.params.ablations.bridge)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def _plain(v: Any) -> Any:
    return v if isinstance(v, str) else (int(v) if float(v).is_integer() and not isinstance(v, float) else float(v))


def _constraint_point(label: str) -> dict[str, Any]:
    base, plus, extra = str(label).partition(" + ")  # `hard + query-image concepts` (memory.sweeps.constraint_axis)
    st = Strength.from_label(base)
    return {"graph.constraint": str(st), **({"ablation.variant": extra} if plus else {})}


def _coverage_point(setting: str) -> dict[str, Any]:
    """Every row holds critical-concept completion off, but the last (memory.sweeps.coverage_axis)."""
    base, plus, _ = str(setting).partition(" + critical completion")
    spec = ProposerSpec.parse(base)
    return {"graph.proposer": str(spec), "graph.critical_completion": bool(plus)}


def _constraint_marks(p: Params) -> tuple[str, str]:
    return p.graph.constraint.label(), "none"


def _coverage_marks(p: Params) -> tuple[str, str]:
    return str(p.graph.proposer) + (" + critical completion" if p.graph.critical_completion else ""), "all"


AXES: dict[str, Axis] = {
    "lam": Axis("lam", "lam", "mRR@1", True, retrieval_report.CAPTIONS["lam"], _lam,
                lambda df, params: retrieval_report.lambda_figure(df, params.retrieval.chunks),
                marks=lambda p: (p.retrieval.lam,), point=lambda v: {"retrieval.lam": _plain(v)},
                table_metrics=(r"mRR@1", r"mRR@10")),
    "top_k": Axis("top_k", "k", "R@k", False, retrieval_report.CAPTIONS["top_k"], _top_k,
                  lambda df, params: retrieval_report.top_k_figure(df),
                  marks=lambda p: (p.retrieval.k, 2 * p.retrieval.k), point=lambda v: {"retrieval.k": _plain(v)},
                  table_metrics=(r"R@k", r"reader accuracy"), recorded=(r"R@k", r"reader accuracy"),
                  headline_metrics=(r"R@k", r"reader accuracy")),
    "constraint": Axis("constraint", "strength", "target mRR@1", True, polar_report.CAPTIONS["constraint"], _constraint,
                       lambda df, params: polar_report.constraint_figure(df, params.graph.constraint_k),
                       marks=_constraint_marks, point=_constraint_point,
                       table_metrics=(r"target mRR@1", r"Conflict@\d+ \(ground truth\)", r"Filter rate \(ground truth\)",
                                      r"Δ .* vs none"),
                       recorded=(r"target mRR@1", r"Conflict@\d+ \(ground truth\)", r"Filter rate \(ground truth\)",
                                 r"Δ .* vs none"),
                       across=("memory",),
                       # the filter rate is 0 without a constraint by construction: the detail file has it
                       headline_metrics=(r"target mRR@1", r"Conflict@\d+ \(ground truth\)")),
    "coverage": Axis("coverage", "setting", "overall score", True, polar_report.CAPTIONS["coverage"], _coverage,
                     lambda df, params: polar_report.coverage_figure(df), marks=_coverage_marks, point=_coverage_point,
                     table_metrics=(r"overall score", r"score \(.*", r"Proposal Recall@K \(query-critical\)")),
    "bridge": Axis("bridge", "B", "completeness", False, kg_report.CAPTION, _bridge,
                   lambda df, params: kg_report.budget_figure(df), marks=lambda p: (p.kg.bridge, 0),
                   point=lambda v: {"kg.bridge": _plain(v)}, table_metrics=(r"completeness", r"Recall@\d+", r"accuracy"),
                   across=("system",)),
}


def axis_named(name: str) -> Axis:
    if name not in AXES:
        raise ValueError(f"unknown ablation axis {name!r}; allowed: {', '.join(AXES)}")
    return AXES[name]


def _ids(df: pd.DataFrame, axis: Axis) -> list[str]:
    return [c for c in df.columns if c not in LONG and c != axis.key]


def _primary(df: pd.DataFrame, axis: Axis, metrics: tuple[str, ...] | None = None) -> pd.DataFrame:
    """The rows a choice and the headline read: all queries, the axis's metric(s), and the first value of every other
    identifying column (the configured chunks, the configured memory, the primary constrained set) except those the
    axis keeps `across`."""
    sel = df[(df["queries"] == "all") & df["metric"].map(lambda m: _matches(m, metrics or (re.escape(axis.metric),)))]
    for col in _ids(df, axis):
        if col not in axis.across:
            sel = sel[sel[col] == df[col].iloc[0]]
    return sel


def _matches(metric: str, patterns: tuple[str, ...]) -> bool:
    return any(re.fullmatch(p, metric) for p in patterns)


def _record(row: pd.Series) -> dict[str, Any]:
    return {"value": round(float(row["value"]), 6), "ci_low": round(float(row["ci_low"]), 6),
            "ci_high": round(float(row["ci_high"]), 6), "n": int(row["n"]), "split": row["split"]}


def child_runs(df: pd.DataFrame, axis: Axis) -> list[tuple[Any, dict[str, Any]]]:
    """(value, metrics) for one MLflow child run per swept value: every split / metric (and other id column) on all
    queries, with its CI: what the compare view lines the values up by. The query groups' rows (regular, shiny) stay in
    the axis's tidy table, which the parent run carries as an artifact: three times the rows in every child, each a row
    MLflow's store writes while the stage's `finish()` waits (the constraint and bridge axes' children held ~800 each)."""
    ids = _ids(df, axis)
    out = []
    for value, grp in df[df["queries"] == "all"].groupby(axis.key, sort=False):
        metrics = {}
        for _, row in grp.iterrows():
            name = "/".join([*(str(row[c]) for c in ids), row["split"], row["queries"], row["metric"]])
            metrics[name] = row["value"]
            metrics[name + " ci_low"], metrics[name + " ci_high"] = row["ci_low"], row["ci_high"]
        out.append((value, metrics))
    return out


def summary(df: pd.DataFrame, axis: Axis, configured: Any = None) -> dict[str, Any]:
    """The axis's metrics file: the test value (with CI) of its metric at every swept value and, for an axis that is a
    choice, the value chosen on dev and its test number."""
    test = _primary(df, axis, axis.recorded or None)
    test = test[test["split"] == "test"]
    out: dict[str, Any] = {"axis": axis.name, "metric": axis.metric, "test": {}}
    for _, r in test.iterrows():
        name = "/".join([*(str(r[c]) for c in axis.across), str(_plain(r[axis.key]))])
        out["test"].setdefault(r["metric"], {})[name] = _record(r)
    out |= {c: str(df[c].iloc[0]) for c in _ids(df, axis) if c not in axis.across}
    if axis.choose:  # the configured setting of every other column, the across columns too; variant rows are no value
        sel = _primary(df, axis)
        for col in axis.across:
            sel = sel[sel[col] == df[col].iloc[0]]
        sel = sel[~sel[axis.key].astype(str).str.contains(" + ", regex=False)]
        dev = sel[sel["split"] == "dev"].reset_index(drop=True)
        best = dev.loc[dev["value"].idxmax()]
        chosen = _plain(best[axis.key])
        key = "/".join([*(str(df[c].iloc[0]) for c in axis.across), str(chosen)])  # as the test records are named
        out["chosen_on_dev"] = {axis.key: chosen, "dev": round(float(best["value"]), 4),
                                "test": out["test"][axis.metric][key], "configured": configured}
    return out


def headline(df: pd.DataFrame, axis: Axis, out: dict[str, Any], params: Params) -> dict[str, float]:
    """The axis's few numbers for `dvc exp show` (keys unique across stages): for a choice, the value
    chosen on dev and its test number with the CI; otherwise each headline metric's test value at each mark, and the
    CI of the axis's metric at the configured mark. Rows: all queries, every other id column at its first value (the
    configured memory and chunks, the primary constrained set)."""
    r4 = lambda x: round(float(x), 4)  # noqa: E731
    if axis.choose:
        c = out["chosen_on_dev"]
        t = c["test"]
        name = f"test {axis.metric} at chosen {axis.key}"
        chosen = {f"chosen {axis.key} (dev)": c[axis.key]} if isinstance(c[axis.key], (int, float)) else {}  # metrics are numbers
        return {**chosen, name: r4(t["value"]), f"{name} lo": r4(t["ci_low"]), f"{name} hi": r4(t["ci_high"])}
    sel = df[(df["split"] == "test") & (df["queries"] == "all")
             & df["metric"].map(lambda m: _matches(m, axis.headline_metrics or (re.escape(axis.metric),)))]
    for col in _ids(df, axis):
        sel = sel[sel[col] == df[col].iloc[0]]
    marks = [str(_plain(m)) for m in axis.marks(params)]
    res: dict[str, float] = {}
    for metric, rows in sel.groupby("metric", sort=False):
        by_value = {str(_plain(v)): r for v, (_, r) in zip(rows[axis.key], rows.iterrows())}
        for i, mark in enumerate(marks):
            if mark in by_value:  # a mark outside the swept values (e.g. 2k) is simply not reported
                name = f"test {metric.split(' (')[0]} ({mark})"
                res[name] = r4(by_value[mark]["value"])
                if i == 0 and metric == axis.metric:
                    res |= {f"{name} lo": r4(by_value[mark]["ci_low"]), f"{name} hi": r4(by_value[mark]["ci_high"])}
    return res


def curve(df: pd.DataFrame, axis: Axis) -> pd.DataFrame:
    """The axis's DVC plot: test value of its metric (all queries, configured setting) with the CI, per swept value.
    The CI columns extend the metric's name: DVC dashes a plot's fields in name order, so the metric, a prefix of
    both, is the solid line and its CI bounds the dashed ones."""
    sel = df[(df["queries"] == "all") & (df["metric"] == axis.metric) & (df["split"] == "test")]
    for col in _ids(df, axis):
        sel = sel[sel[col] == df[col].iloc[0]]
    name = f"test {axis.metric}"
    return sel[[axis.key, "value", "ci_low", "ci_high"]].rename(
        columns={"value": name, "ci_low": f"{name} {CI_LOW}", "ci_high": f"{name} {CI_HIGH}"})


def table(df: pd.DataFrame, axis: Axis) -> pd.DataFrame:
    """Markdown layout: one row per value (and other id column); the dev point value of the axis's metric, then test
    values (all queries with the 95 % CI, each query group as a point value), then catalog properties."""
    ids = [*_ids(df, axis), axis.key]
    shown = lambda m: not axis.table_metrics or _matches(m, axis.table_metrics)  # noqa: E731
    keep = ((df["split"] == "dev") & (df["queries"] == "all") & (df["metric"] == axis.metric)) | \
        ((df["split"] == "test") & df["metric"].map(shown)) | (df["split"] == "catalog")
    d = df[keep]
    with_ci = (d["split"] == "test") & (d["queries"] == "all")
    scale = np.where(d["metric"].str.contains("per image"), 1.0, 100.0)  # counts stay counts; shares in %
    cell = [f"{x * v:.1f} [{x * lo:.1f}, {x * hi:.1f}]" if ci else f"{x * v:.1f}"
            for v, lo, hi, ci, x in zip(d["value"], d["ci_low"], d["ci_high"], with_ci, scale)]
    column = np.where(d["split"] == "catalog", d["metric"], d["split"] + " " + d["queries"] + " " + d["metric"])
    first = {m: i for i, m in enumerate(dict.fromkeys(d["metric"]))}
    d = d.assign(cell=cell, column=column, rank=d["metric"].map(first)).sort_values("rank", kind="stable")
    order = list(dict.fromkeys(d["column"]))
    wide = d.pivot_table(index=ids, columns="column", values="cell", aggfunc="first", sort=False)
    return wide[[c for c in order if c in wide.columns]].reset_index()


def markdown(df: pd.DataFrame, axis: Axis, out: dict[str, Any], n_species: int) -> str:
    """`n_species`: the catalog size, for the chance level every table states."""
    chosen = out.get("chosen_on_dev")
    note = ""
    if chosen:
        t = chosen["test"]
        note = (f"**Chosen on dev**: {axis.key} = {chosen[axis.key]} (dev {axis.metric} {100 * chosen['dev']:.1f}); its test "
                f"{axis.metric}: {100 * t['value']:.1f} [{100 * t['ci_low']:.1f}, {100 * t['ci_high']:.1f}]. "
                f"Configured: {chosen['configured']}.\n\n")
    return (f"# Ablation: {axis.name}\n\n" + axis.caption + note +
            "Values in %; `dev` columns are point values (what a choice reads), `test` columns carry 95 % CIs (paired "
            f"species bootstrap). Chance level (a uniform random ranking of the {n_species} catalog species): "
            f"accuracy@1 = mRR@1 = {100 / n_species:.2f} %, Recall@k = k / {n_species}.\n\n"
            + table(df, axis).to_markdown(index=False) + "\n")
