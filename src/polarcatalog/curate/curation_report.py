"""The curation report: counts, quarantine list with reasons, summary lengths, filter precision/recall."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns


def curation_metrics(species: pd.DataFrame, chunks: pd.DataFrame, candidates: pd.DataFrame, anchors: pd.DataFrame,
                     queries: pd.DataFrame, species_without_query: list[int], quarantine: pd.DataFrame,
                     filter_pr: dict[str, Any], anchor_filter: str, colour_agreement: dict | None,
                     bird_filter_pr: dict[str, Any] | None) -> dict[str, Any]:
    m: dict[str, Any] = {
        "species": int(len(species)),
        "species_with_summary": int((species["summary_words"] > 0).sum()),
        "article_words_mean": float(species["article_words"].mean()),
        "summary_words_mean": float(species["summary_words"].mean()),
        "summary_words_max": int(species["summary_words"].max()),
        "chunks": int(len(chunks)),
        "chunks_per_species_mean": float(len(chunks) / max(len(species), 1)),
        "anchor_candidates": int(len(candidates)),
        "anchor_candidates_distractors": int((~candidates["is_target"]).sum()),
        "anchors": int(len(anchors)),
        "anchors_fallback": int(anchors["fallback"].sum()),
        "species_with_anchor": int(anchors["species_id"].nunique()),
        "anchor_filter": {"name": anchor_filter, "threshold": float(candidates.attrs.get("threshold", math.nan)), **filter_pr},
        "queries": int(len(queries)),
        "queries_by_variant": {str(k): int(v) for k, v in queries["variant"].value_counts().sort_index().items()},
        "species_with_query": int(queries["species_id"].nunique()),
        "species_without_query": int(len(species_without_query)),
        "quarantined": int(len(quarantine)),
        "quarantined_by_role": {str(k): int(v) for k, v in quarantine["role"].value_counts().items()} if len(quarantine) else {},
    }
    if colour_agreement:
        m["colour_vs_pokedex"] = colour_agreement
    if bird_filter_pr:
        m["bird_filter"] = bird_filter_pr
    return m


def _fmt(v: Any) -> str:
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def curation_markdown(m: dict[str, Any], quarantine: pd.DataFrame, species_without_query: list[int], figures: list[str]) -> str:
    f = m["anchor_filter"]
    lines = [
        "# Curation report", "",
        "Produced by the `curate` stage (`notebooks/01_curate.ipynb`); numbers from `reports/curation.json`.", "",
        "## Catalog", "",
        "| what | count |", "|---|---|",
        f"| species | {m['species']} |",
        f"| species with a non-empty summary | {m['species_with_summary']} |",
        f"| chunks (retrieval text units) | {m['chunks']} ({m['chunks_per_species_mean']:.2f} per species) |",
        f"| anchor candidates (of which distractors) | {m['anchor_candidates']} ({m['anchor_candidates_distractors']}) |",
        f"| anchors kept (fallbacks) | {m['anchors']} ({m['anchors_fallback']}) |",
        f"| species with >= 1 anchor | {m['species_with_anchor']} |",
        f"| sprite queries | {m['queries']} ({', '.join(f'{k}: {v}' for k, v in m['queries_by_variant'].items())}) |",
        f"| species with >= 1 query | {m['species_with_query']} |",
        f"| species without any sprite (counted, not dropped) | {m['species_without_query']} |",
        f"| quarantined files | {m['quarantined']} |", "",
        "## Summary distillation", "",
        f"Mean words per species: article **{m['article_words_mean']:.1f}** -> summary **{m['summary_words_mean']:.1f}** "
        f"(max {m['summary_words_max']}). The paper reports 552 -> 127 on Wikipedia bird articles.", "",
        "## Anchor filter", "",
        f"Filter `{f['name']}`, threshold {_fmt(f['threshold'])}, on the labelled candidate mix "
        "(artwork = target, off-domain distractors = not). Precision/recall of the filter's own decision:", "",
        "| precision | recall | tp | fp | fn | tn |", "|---|---|---|---|---|---|",
        f"| {_fmt(f['precision'])} | {_fmt(f['recall'])} | {f['tp']} | {f['fp']} | {f['fn']} | {f['tn']} |", "",
    ]
    if "bird_filter" in m:
        b = m["bird_filter"]
        lines += ["ImageNet P(bird) filter on birds (`curate.bird_eval_dir`) vs scikit-image non-bird photos:", "",
                  "| precision | recall | tp | fp | fn | tn |", "|---|---|---|---|---|---|",
                  f"| {_fmt(b['precision'])} | {_fmt(b['recall'])} | {b['tp']} | {b['fp']} | {b['fn']} | {b['tn']} |", ""]
    if "colour_vs_pokedex" in m:
        c = m["colour_vs_pokedex"]
        lines += ["## Measured colours vs the Pokédex colour", "",
                  f"The Pokédex colour is the first measured colour for {c['top1']:.1%} of {c['n']} species and among the "
                  f"measured colours for {c['any']:.1%}.", ""]
    lines += ["## Quarantine", ""]
    if len(quarantine):
        lines += ["| file | role | reason |", "|---|---|---|"]
        lines += [f"| `{r.path}` | {r.role} | {r.reason} |" for r in quarantine.itertuples()]
    else:
        lines.append("No file was quarantined.")
    lines += ["", "## Species without a sprite query", "",
              ", ".join(map(str, species_without_query)) if species_without_query else "None.", ""]
    if figures:
        lines += ["## Figures", ""] + [f"![{Path(p).stem}]({Path(p).relative_to('reports').as_posix()})" for p in figures] + [""]
    return "\n".join(lines)


def summary_length_figure(species: pd.DataFrame) -> plt.Figure:
    long = pd.concat([pd.DataFrame({"words": species["article_words"], "text": "article"}),
                      pd.DataFrame({"words": species["summary_words"], "text": "summary"})])
    fig, ax = plt.subplots(figsize=(6, 3.2))
    sns.histplot(long, x="words", hue="text", bins=40, ax=ax, element="step")
    ax.set_title("Words per species: article vs distilled summary")
    return fig


def filter_score_figure(candidates: pd.DataFrame, name: str) -> plt.Figure:
    c = candidates[candidates["loaded"]]
    fig, ax = plt.subplots(figsize=(6, 3.2))
    sns.histplot(c, x="score", hue="source", bins=50, ax=ax, element="step", stat="density", common_norm=False)
    thr = candidates.attrs.get("threshold")
    if thr is not None and math.isfinite(thr):
        ax.axvline(thr, color="k", ls="--", lw=1, label="threshold")
    ax.set_title(f"Anchor filter `{name}`: scores of targets vs distractors")
    return fig


def colour_figure(species: pd.DataFrame) -> plt.Figure:
    first = species["colours"].map(lambda c: c[0] if len(c) else "none")
    fig, ax = plt.subplots(figsize=(6, 3.2))
    order = first.value_counts().index.tolist()
    sns.countplot(y=first, order=order, ax=ax, color="steelblue")
    ax.set_title("Dominant measured colour per species")
    ax.set_ylabel("")
    return fig
