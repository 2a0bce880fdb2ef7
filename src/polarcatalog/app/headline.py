"""Each stage's headline numbers: the DVC metrics file that `dvc exp show` and `dvc metrics diff` compare.

A stage writes two files. Its detail file (`reports/<stage>.json`, a plain committed output) has every number, with
CIs, that its report and the results section read. Its headline file (`reports/metrics/<stage>.json`, the stage's
declared `metrics:`) has the few numbers a person compares across experiments, flat and rounded, so that the table
of every stage's headlines stays readable in a terminal. A key is used by one stage only: DVC then shows it without
its file's path as the column name. Test numbers are the protocol's test split; dev numbers are labelled `dev`.
The ablation axes' headlines are `app.axes.headline` (each axis names its marks).
"""

from __future__ import annotations

from typing import Any

from polarcatalog.paths import REPORTS

HEADLINES = REPORTS / "metrics"


def _value(record: dict[str, Any]) -> float:
    return round(float(record["value"]), 4)


def _with_ci(name: str, record: dict[str, Any]) -> dict[str, float]:
    return {name: _value(record), f"{name} lo": round(float(record["ci_low"]), 4),
            f"{name} hi": round(float(record["ci_high"]), 4)}


def fetch(d: dict[str, Any]) -> dict[str, Any]:
    return {k: d[k] for k in ("species_metadata", "sprites_regular", "sprites_shiny")}


def curate(d: dict[str, Any]) -> dict[str, Any]:
    out = {k: d[k] for k in ("species", "anchors", "queries", "quarantined")}
    return out | {f"filter {k}": round(float(d["anchor_filter"][k]), 4) for k in ("precision", "recall")
                  if d["anchor_filter"].get(k) is not None}


def embed(d: dict[str, Any]) -> dict[str, Any]:
    return {"anchor_scale_px": d["anchor_scale_px"]}  # its item counts are the curate stage's


def retrieval(d: dict[str, Any]) -> dict[str, Any]:
    c = d["configured"]
    groups = {g: _value(c[g]["mRR@1"]) for g in c if g != "all"}
    return {**_with_ci("test mRR@1", c["all"]["mRR@1"]), **{f"test {g} mRR@1": v for g, v in groups.items()},
            "dev mRR@1": d["configured_dev_mRR@1"], "test non-transductive mRR@1": _value(d["non_transductive"]["mRR@1"])}


def graph(d: dict[str, Any]) -> dict[str, Any]:
    e = d["evaluated_edges"]["with critical completion"]
    return {**{k.replace("_", " "): round(float(e[k]), 4) for k in ("has_precision", "has_recall", "not_has_precision",
                                                                    "not_has_recall")},
            "proposal recall": round(float(d["proposal_recall"]), 4)}


def kg(d: dict[str, Any]) -> dict[str, Any]:
    """Completeness at the configured B (all test queries), and +KGret minus the budget-matched control where it
    matters, the evidence-deficit stratum, with its CI."""
    t = d["test"]
    gain = d["kgret_minus_budget_matched_completeness"].get("evidence deficit")
    out = {"kg entities": d["graph"]["entities"],
           **{f"test completeness ({s})": _value(t[f"all queries/{s}/completeness"]) for s in ("baseline", "budget-matched", "+KGret")}}
    return out | (_with_ci("test +KGret - matched completeness (deficit)", gain) if gain else {})


def birds(d: dict[str, Any]) -> dict[str, Any]:
    """The bird reference run: open-world text retrieval (descriptors joined, all species) and the same queries
    against CUB's species described by their attributes (the control), each with its CI; the anchor filter's AUC."""
    t = d["text_retrieval"]
    return {"bird species": d["catalog"]["species"],
            **_with_ci("test text mRR@1 (all species)", t["all catalog species/descriptors joined/mRR@1"]),
            **_with_ci("test text mRR@1 (CUB attribute texts)", t["CUB's species, text = CUB attributes/descriptors joined/mRR@1"]),
            "anchor filter AUC": d["anchor_filter"]["auc"]}
