"""The ablation axes notebook 05 sweeps, one registry entry each (`AXES[name]`): λ and top-k (VR-RAG Figs. 3
and 2) over the configured retriever's candidates, constraint strength and proposer coverage (PolarMem Fig. 3 /
Table 3, Table 2) over the graph stage's scores. Adding an axis: a sweep, a figure, a caption and its values in
`ablations` (params), then a `foreach` item in dvc.yaml."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from polarcatalog.app.workflows import polar_setup
from polarcatalog.config import Params
from polarcatalog.features.workspace import Workspace
from polarcatalog.memory import report as polar_report
from polarcatalog.memory.sweeps import constraint_axis, coverage_axis
from polarcatalog.retrieval import report as retrieval_report
from polarcatalog.retrieval.sweeps import sweep_lambda, sweep_top_k
from polarcatalog.retrieval.vrrag import VRRAG, Candidates, Ranking


@dataclass
class Sweep:
    """What every axis starts from: the configured retriever's candidates, computed once per axis."""

    ws: Workspace
    params: Params
    vr: VRRAG
    cands: Candidates
    ranking: Ranking
    scores_path: Path  # the graph stage's verifier scores (PolarMem axes)

    @property
    def gold(self) -> np.ndarray:
        return self.ws.queries["species_id"].to_numpy()

    @property
    def groups(self) -> np.ndarray:
        return self.ws.queries["variant"].to_numpy()


@dataclass(frozen=True)
class Axis:
    name: str  # params `ablations.<name>`, the dvc.yaml foreach item
    key: str  # the column holding the swept value
    metric: str  # the column the report's `best` reads
    per_group: bool  # one row per query group (regular / shiny / all) for each value
    caption: str
    sweep: Callable[[Sweep], pd.DataFrame]
    figure: Callable[[pd.DataFrame, Params], plt.Figure]


def _lam(s: Sweep) -> pd.DataFrame:
    if s.params.retrieval.reranker is None:
        raise ValueError("the λ axis needs retrieval.reranker (λ weighs s_m against the re-ranker's s_i)")
    return sweep_lambda(s.vr, s.cands, s.gold, s.groups, s.params.ablations.lam)


def _top_k(s: Sweep) -> pd.DataFrame:
    return sweep_top_k(s.vr, s.cands, s.gold, s.groups, s.params.ablations.top_k, s.params.retrieval.lam)


def _constraint(s: Sweep) -> pd.DataFrame:
    return constraint_axis(polar_setup(s.ws, s.params, s.scores_path, s.ranking), s.params.ablations.constraint)


def _coverage(s: Sweep) -> pd.DataFrame:
    return coverage_axis(polar_setup(s.ws, s.params, s.scores_path, s.ranking), s.params.ablations.coverage)


AXES: dict[str, Axis] = {
    "lam": Axis("lam", "lam", "mRR@1", True, retrieval_report.CAPTIONS["lam"], _lam,
                lambda df, params: retrieval_report.lambda_figure(df)),
    "top_k": Axis("top_k", "k", "R@k", True, retrieval_report.CAPTIONS["top_k"], _top_k,
                  lambda df, params: retrieval_report.top_k_figure(df)),
    "constraint": Axis("constraint", "spec", "target mRR@1", False, polar_report.CAPTIONS["constraint"], _constraint,
                       lambda df, params: polar_report.constraint_figure(df, params.graph.constraint_k)),
    "coverage": Axis("coverage", "setting", "overall score", False, polar_report.CAPTIONS["coverage"], _coverage,
                     lambda df, params: polar_report.coverage_figure(df)),
}


def axis_named(name: str) -> Axis:
    if name not in AXES:
        raise ValueError(f"unknown ablation axis {name!r}; allowed: {', '.join(AXES)}")
    return AXES[name]


def child_runs(df: pd.DataFrame, axis: Axis) -> list[tuple[Any, dict[str, Any]]]:
    """(value, metrics) for one MLflow child run per swept value; per-group axes nest metrics by query group."""
    out = []
    for value, grp in df.groupby(axis.key, sort=False):
        if axis.per_group:
            out.append((value, {row["queries"]: row.drop(["queries", axis.key]).to_dict() for _, row in grp.iterrows()}))
        else:
            out.append((value, grp.drop(columns=[axis.key]).iloc[0].to_dict()))
    return out


def summary(df: pd.DataFrame, axis: Axis) -> dict[str, Any]:
    """The axis's metrics file: its values, the metric per value, the best value, the table (all-queries rows)."""
    overall = df[df["queries"] == "all"] if axis.per_group else df
    best = overall.loc[overall[axis.metric].idxmax()]
    key, metric = axis.key, axis.metric
    return {"axis": axis.name, "values": overall[key].tolist(), metric: overall[metric].round(4).tolist(),
            "best": {key: best[key] if isinstance(best[key], str) else float(best[key]), metric: float(best[metric])},
            "table": overall.round(4).to_dict(orient="records")}


def markdown(df: pd.DataFrame, axis: Axis) -> str:
    return f"# Ablation: {axis.name}\n\n" + axis.caption + df.round(4).to_markdown(index=False) + "\n"
