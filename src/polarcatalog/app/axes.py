"""The ablation axes notebook 05 sweeps, one registry entry each (`AXES[name]`): λ and top-k (VR-RAG Figs. 3
and 2) over the configured retriever's candidates, constraint strength and proposer coverage (PolarMem Fig. 3 /
Table 3, Table 2) over the graph stage's scores. Adding an axis: a sweep, a figure, a caption and its values in
`ablations` (params), then a `foreach` item in dvc.yaml.

Every sweep returns the protocol's tidy rows (value, split, query group, metric, point value, CI), written as the
axis's plot data; the metrics file keeps the test numbers with CIs and the value chosen on dev."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from polarcatalog.app.workflows import polar_setup, run_retrieval
from polarcatalog.config import Params
from polarcatalog.eval.protocol import Protocol
from polarcatalog.features.workspace import Workspace
from polarcatalog.memory import report as polar_report
from polarcatalog.memory.sweeps import constraint_axis, coverage_axis
from polarcatalog.retrieval import report as retrieval_report
from polarcatalog.retrieval.sweeps import sweep_lambda, sweep_top_k
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
    table_metrics: tuple[str, ...] = ()  # test metrics the markdown table shows (regexes; empty = all)
    headline: tuple[str, ...] = ()  # test metrics the metrics file records (regexes; empty = `metric`)
    across: tuple[str, ...] = ()  # id columns the metrics file keeps every value of (e.g. the control memories)


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
    return sweep_top_k(s.vr, s.cands, s.gold, s.protocol, s.params.ablations.top_k, s.params.retrieval.lam)


def _constraint(s: Sweep) -> pd.DataFrame:
    return constraint_axis(polar_setup(s.ws, s.params, s.scores_path, s.ranking), s.params.ablations.constraint, s.protocol)


def _coverage(s: Sweep) -> pd.DataFrame:
    return coverage_axis(polar_setup(s.ws, s.params, s.scores_path, s.ranking), s.params.ablations.coverage, s.protocol)


AXES: dict[str, Axis] = {
    "lam": Axis("lam", "lam", "mRR@1", True, retrieval_report.CAPTIONS["lam"], _lam,
                lambda df, params: retrieval_report.lambda_figure(df, params.retrieval.chunks), (r"mRR@1", r"mRR@10")),
    "top_k": Axis("top_k", "k", "R@k", False, retrieval_report.CAPTIONS["top_k"], _top_k,
                  lambda df, params: retrieval_report.top_k_figure(df), (r"R@k",)),
    "constraint": Axis("constraint", "strength", "target mRR@1", False, polar_report.CAPTIONS["constraint"], _constraint,
                       lambda df, params: polar_report.constraint_figure(df, params.graph.constraint_k),
                       (r"target mRR@1", r"Conflict@\d+ \(ground truth\)", r"Filter rate \(ground truth\)"),
                       (r"target mRR@1", r"Conflict@\d+ \(ground truth\)", r"Filter rate \(ground truth\)"), ("memory",)),
    "coverage": Axis("coverage", "setting", "overall score", False, polar_report.CAPTIONS["coverage"], _coverage,
                     lambda df, params: polar_report.coverage_figure(df), (r"overall score", r"score \(.*")),
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


def _plain(v: Any) -> Any:
    return v if isinstance(v, str) else (int(v) if float(v).is_integer() and not isinstance(v, float) else float(v))


def point_params(axis: str, value: Any) -> dict[str, Any]:
    """The params one swept value stands for, as dotted keys (`coverage` `top_n:6` is a proposer and its N): a child
    run logs the stage's params with these put in, so it carries its point's whole effective configuration."""
    if axis == "coverage":  # every row without critical-concept completion, but the last (memory.sweeps.coverage_axis)
        setting, plus, _ = str(value).partition(" + critical completion")
        proposer, _, n = setting.partition(":")
        return {"graph.proposer": proposer, **({"graph.proposer_n": int(n)} if n else {}),
                "graph.critical_completion": bool(plus)}
    key = {"lam": "retrieval.lam", "top_k": "retrieval.k", "constraint": "graph.constraint"}[axis]
    return {key: _plain(value)}


def child_runs(df: pd.DataFrame, axis: Axis) -> list[tuple[Any, dict[str, Any]]]:
    """(value, metrics) for one MLflow child run per swept value: every split / group / metric (and other id column)."""
    ids = _ids(df, axis)
    out = []
    for value, grp in df.groupby(axis.key, sort=False):
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
    test = _primary(df, axis, axis.headline or None)
    test = test[test["split"] == "test"]
    out: dict[str, Any] = {"axis": axis.name, "metric": axis.metric, "test": {}}
    for _, r in test.iterrows():
        name = "/".join([*(str(r[c]) for c in axis.across), str(_plain(r[axis.key]))])
        out["test"].setdefault(r["metric"], {})[name] = _record(r)
    out |= {c: str(df[c].iloc[0]) for c in _ids(df, axis) if c not in axis.across}
    if axis.choose:
        sel = _primary(df, axis)
        dev = sel[sel["split"] == "dev"].reset_index(drop=True)
        best = dev.loc[dev["value"].idxmax()]
        chosen = _plain(best[axis.key])
        out["chosen_on_dev"] = {axis.key: chosen, "dev": round(float(best["value"]), 4),
                                "test": out["test"][axis.metric][str(chosen)], "configured": configured}
    return out


def curve(df: pd.DataFrame, axis: Axis) -> pd.DataFrame:
    """The axis's DVC plot: test value of its metric (all queries, configured setting) with the CI, per swept value."""
    sel = df[(df["queries"] == "all") & (df["metric"] == axis.metric) & (df["split"] == "test")]
    for col in _ids(df, axis):
        sel = sel[sel[col] == df[col].iloc[0]]
    return sel[[axis.key, "value", "ci_low", "ci_high"]].rename(columns={"value": f"test {axis.metric}"})


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
