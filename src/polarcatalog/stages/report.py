"""The report stage: every stage's committed results gathered into one short results section (`reports/README.md`),
plus the two figures only this view can draw — accuracy per stratum (Pokémon generation) and the failure cases.

It reads metrics files and plot data, never features: rerunning it costs seconds. Every number it prints comes
from a file another stage wrote, with the split it was measured on."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any, Mapping

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import yaml

from polarcatalog.config import Params, flatten, read_params_yaml
from polarcatalog.encoders import has_text_tower, parse_encoder
from polarcatalog.data.images import BadImageError, decode_rgb
from polarcatalog.eval.bootstrap import Interval
from polarcatalog.eval.protocol import Protocol, diff_text, long_rows
from polarcatalog.stages import memory_quality


def code_commit(root: Path, code: list[str]) -> str:
    """The last commit that changed `code`, the report stage's own code (its notebook and the files its code manifest
    lists, `code_deps.stage_code`): exactly what reruns this stage, so a fresh clone of the same code rewrites the same report. Commit code before `make repro`: a run on
    uncommitted code is reported as such (and its report will not match a fresh clone's)."""
    git = lambda *args: subprocess.run(["git", *args], cwd=root, capture_output=True, text=True).stdout.strip()  # noqa: E731
    commit = git("log", "-1", "--format=%H", "--", *code)
    if not commit:
        return "unknown (not a git checkout)"
    return commit + (" + uncommitted changes" if git("status", "--porcelain", "--", *code) else "")


def params_overrides(root: Path) -> dict[str, Any]:
    """The params.yaml keys whose value differs from the committed file's: a DVC experiment's `-S` values (a profile's
    overlay), or an uncommitted edit. Empty outside git or when the file is as committed."""
    head = subprocess.run(["git", "show", "HEAD:params.yaml"], cwd=root, capture_output=True, text=True)
    if head.returncode != 0:
        return {}
    base, mine = flatten(yaml.safe_load(head.stdout) or {}), flatten(read_params_yaml(root / "params.yaml"))
    return {k: mine.get(k) for k in sorted(set(base) | set(mine)) if base.get(k) != mine.get(k)}


def run_text(commit: str, overrides: dict[str, Any], experiment: str | None = None) -> str:
    """How this report was produced, for its first line: the command (a DVC experiment is named; DVC sets
    DVC_EXP_NAME for its stages), the code commit, and every params value that is not the committed file's."""
    experiment = experiment if experiment is not None else os.environ.get("DVC_EXP_NAME")
    how = f"DVC experiment `{experiment}` (`dvc exp run`)" if experiment else "`make repro` (`dvc repro`)"
    changed = ("as committed" if not overrides else "as committed except "
               + ", ".join(f"`{k}={json.dumps(v, ensure_ascii=False)}`" for k, v in overrides.items()))
    return f"Produced by {how} at code commit `{commit}`, with `params.yaml` {changed}"


def load_reports(reports: Path) -> dict[str, Any]:
    names = ["retrieval", "ablate_lam", "ablate_top_k", "ablate_constraint", "ablate_coverage", "memory_quality", "graph",
             "curation", "kg"]
    return {n: json.loads((reports / f"{n}.json").read_text()) for n in names}


def strata_rows(audit: pd.DataFrame, strata: pd.Series, protocol: Protocol) -> pd.DataFrame:
    """Test accuracy@1 of the configured pipeline per stratum and query group, with CIs (tidy rows)."""
    label = audit["gold_species_id"].map(strata).to_numpy()
    hit = (audit["gold_rank"].to_numpy() <= 1).astype(np.float64)
    rows = []
    for s in sorted(pd.unique(label)):
        rows += long_rows(protocol, {"acc@1": np.where(label == s, hit, np.nan)}, splits=("test",), stratum=s)
    return pd.DataFrame(rows)


def strata_figure(df: pd.DataFrame, name: str) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(8, 3.4))
    groups = list(dict.fromkeys(df["queries"]))
    strata = list(dict.fromkeys(df["stratum"]))
    width = 0.8 / len(groups)
    for i, g in enumerate(groups):
        d = df[df["queries"] == g].set_index("stratum").reindex(strata)
        x = np.arange(len(strata)) + (i - (len(groups) - 1) / 2) * width
        ax.bar(x, d["value"], width, label=g, yerr=[d["value"] - d["ci_low"], d["ci_high"] - d["value"]], capsize=2)
    ax.set_xticks(np.arange(len(strata)), strata)
    ax.set_ylabel("test accuracy@1 (95% CI)")
    ax.set_title(f"Configured pipeline per {name}")
    ax.legend(fontsize=8)
    return fig


def failure_cases(audit: pd.DataFrame, n: int = 8) -> pd.DataFrame:
    """The worst test queries: gold ranked lowest (absent first), one query per gold species before any species
    repeats, ties in a fixed hash order of the query id (stable, and not the id's alphabetical order, which would show
    one generation's first species only)."""
    test = audit[audit["split"] == "test"].copy()
    test["rank_key"] = test["gold_rank"].replace(np.inf, 1e9)
    test["tie"] = [hashlib.sha256(str(q).encode()).hexdigest() for q in test["query_id"]]
    test = test.sort_values(["rank_key", "tie"], ascending=[False, True])
    first = test.drop_duplicates("gold_species_id")
    return pd.concat([first, test.drop(first.index)]).head(n).drop(columns=["tie"])


def absent_text(audit: pd.DataFrame, r: int) -> str:
    """How many test queries never reach the candidates the re-rank (and a reader) choose from."""
    test = audit[audit["split"] == "test"]
    absent = int((~np.isfinite(test["gold_rank"].to_numpy(dtype=float))).sum())
    return (f"{absent} of {len(test)} test queries ({100 * absent / max(len(test), 1):.1f} %) never reach the top-{r} "
            "candidates: their gold species is absent before the re-rank, so no re-ranker or reader can recover them.")


def failure_figure(cases: pd.DataFrame, species: pd.DataFrame, anchors: pd.DataFrame, queries: pd.DataFrame,
                   images: Mapping[str, bytes]) -> plt.Figure:
    """One row per failure: the query sprite, the gold species' artwork, then its top-3 predictions' artwork. Each
    image is decoded from the curate stage's image pack (`images`, by the sha256 its tables record), as `load_rgb`
    would decode its file."""
    names = species.set_index("species_id")["name"]
    art = anchors.drop_duplicates("species_id").set_index("species_id")["sha256"]
    sprite = queries.set_index("query_id")["sha256"]
    path = {**dict(zip(anchors["sha256"], anchors["path"])), **dict(zip(queries["sha256"], queries["path"]))}
    fig, axes = plt.subplots(len(cases), 5, figsize=(9, 1.9 * max(len(cases), 1)), squeeze=False)
    for row, (_, c) in zip(axes, cases.iterrows()):
        rank = "absent" if not np.isfinite(c["gold_rank"]) else f"rank {int(c['gold_rank'])}"
        panels = [(sprite[c["query_id"]], f"query\n{c['query_id']}"),
                  (art.get(c["gold_species_id"]), f"gold: {names.get(c['gold_species_id'], '?')}\n({rank})")]
        panels += [(art.get(s), f"#{i + 1} {names.get(s, '?')}") for i, s in enumerate(list(c["ranked_species_ids"])[:3])]
        for ax, (sha, title) in zip(row, panels):
            ax.axis("off")
            ax.set_title(title, fontsize=7)
            try:
                shown = decode_rgb(images[sha], path[sha]) if isinstance(sha, str) and sha in images else None
            except BadImageError:
                shown = None
            ax.imshow(np.ones((8, 8, 3)) if shown is None else shown, interpolation="nearest")
    fig.suptitle("Worst test queries: query, gold artwork, top-3 predictions")
    fig.tight_layout()
    return fig


def _ci(r: dict[str, Any], scale: float = 100.0) -> str:
    return f"{scale * r['value']:.1f} [{scale * r['ci_low']:.1f}, {scale * r['ci_high']:.1f}]"


def _table(plot: pd.DataFrame, index: list[str], columns: dict[str, tuple[str, str, bool]]) -> str:
    """Pick cells from tidy plot data: column name -> (queries, metric, with CI); values in %."""
    out = plot[index].drop_duplicates().reset_index(drop=True)
    for name, (group, metric, ci) in columns.items():
        sel = plot[(plot["split"] == "test") & (plot["queries"] == group) & (plot["metric"] == metric)]
        cells = {tuple(r[index]): (_ci(r) if ci else f"{100 * r['value']:.1f}") for _, r in sel.iterrows()}
        out[name] = [cells.get(tuple(r), "—") for _, r in out[index].iterrows()]
    return out.to_markdown(index=False)


def _strata_table(df: pd.DataFrame) -> str:
    """Per stratum: test accuracy@1 over all queries with its 95 % CI, each query group as a point value (in %)."""
    d = df.assign(cell=[_ci(r) if r["queries"] == "all" else f"{100 * r['value']:.1f}" for _, r in df.iterrows()])
    wide = d.pivot_table(index="stratum", columns="queries", values="cell", aggfunc="first", sort=False)
    return wide.rename(columns={"all": "all [95% CI]"}).reset_index().to_markdown(index=False)


def _kg_section(kg: dict[str, Any]) -> list[str]:
    """The graph-RAG paper's question on this catalog: completeness of each system at the configured B, and +KGret
    against the budget-matched control per stratum, whichever way it goes."""
    t, b = kg["test"], kg["bridge"]
    cells = {s: _ci(t[f"all queries/{s}/completeness"]) for s in ("baseline", "budget-matched", "+KGret")}
    gains = "; ".join(f"{s}: {100 * iv['value']:+.1f} [{100 * iv['ci_low']:+.1f}, {100 * iv['ci_high']:+.1f}] (n = {iv['n']})"
                      for s, iv in kg["kgret_minus_budget_matched_completeness"].items())
    return ["## Knowledge graph: +KG and +KGret (graph-RAG paper, Tables 3, 4, 8)", "",
            f"Completeness (the gold species is among the candidates passed on), test, B = {b}: baseline top-{kg['k']} "
            f"{cells['baseline']}, budget-matched top-{kg['k'] + b} {cells['budget-matched']}, +KGret "
            f"{cells['+KGret']}. +KGret minus the budget-matched control, in points: {gains}. The full table by evidence "
            "stratum (MRR, accuracy, accuracy conditioned on completeness), the graph's statistics and what the answerer "
            "is: [kg.md](kg.md); figure `figures/kg_bridge.png`.", ""]


def _verdict(holds: bool) -> str:
    return "**reproduces**" if holds else "**does not reproduce**"


def polarmem_claims(conf: pd.DataFrame, coverage: pd.DataFrame, mq: dict[str, Any], k: int) -> list[str]:
    """One sentence per PolarMem claim this catalog can test, with its numbers and whether it holds here (a change
    counts only when its paired CI excludes 0). `conf`: the constraint axis's rows of the primary set."""
    def cell(memory: str, strength: str, metric: str) -> dict[str, Any]:
        sel = conf[conf["memory"].str.startswith(memory) & (conf["strength"] == strength) & (conf["split"] == "test")
                   & (conf["queries"] == "all") & (conf["metric"] == metric)]
        return sel.iloc[0].to_dict()

    conflict, filt, acc = f"Conflict@{k} (ground truth)", "Filter rate (ground truth)", "target mRR@1"
    d = {m: cell("configured", "hard", f"Δ {m} vs none") for m in (conflict, filt, acc)}
    diff = lambda r: diff_text(Interval(r["value"], r["ci_low"], r["ci_high"], int(r["n"])))  # noqa: E731
    order = (conf[conf["memory"].str.startswith("configured") & (conf["split"] == "test") & (conf["queries"] == "all")
                  & (conf["metric"] == acc)].sort_values("value", ascending=False)["strength"].tolist())
    cov = coverage.dropna(subset=["Proposal Recall@K"])
    cov = cov[~cov.index.str.startswith("random_n")]  # the no-information control is not a proposer of the claim
    lo, hi = cov["Proposal Recall@K"].idxmin(), cov["Proposal Recall@K"].idxmax()
    sep = cov.loc[hi, "score"]["ci_low"] > cov.loc[lo, "score"]["ci_high"]
    even = mq["break_even"].get("both")
    return [
        f"- Fig. 3, constraints filter contradictory evidence (Conflict@3 0.067 → 0.033, filter rate 0.875 → 0.938 in the "
        f"paper): {_verdict(d[conflict]['ci_high'] < 0 and d[filt]['ci_low'] > 0)} — with the configured memory, hard "
        f"constraints change Conflict@{k} by {diff(d[conflict])} and the filter rate by {diff(d[filt])} points against the "
        "do-nothing baseline.",
        f"- Table 3, hard retrieval is the most effective on retrieval-intensive tasks: {_verdict(d[acc]['ci_low'] >= 0 and order[0] == 'hard')} "
        f"— hard changes target accuracy@1 by {diff(d[acc])} points against no constraint; by test accuracy the "
        f"strengths rank {' > '.join(order)}; with the oracle memory hard reaches {_ci(cell('oracle', 'hard', acc))}.",
        f"- Table 2, higher proposal coverage gives a higher score: {_verdict(bool(sep))} — among the informed proposers "
        "(the `random_n` control aside), Proposal Recall@K on the query-critical concepts goes from "
        f"{100 * cov.loc[lo, 'Proposal Recall@K']:.1f} ({lo}) to {100 * cov.loc[hi, 'Proposal Recall@K']:.1f} ({hi}) while "
        f"the score goes from {_ci(cov.loc[lo, 'score'])} to {_ci(cov.loc[hi, 'score'])}.",
        "- Memory quality (not in the paper): " + (
            f"hard starts to beat no constraint on dev at t = {even['t']:g} of the path from the configured memory's edge "
            f"quality to the oracle's (NOT_HAS recall {100 * even['not_has_recall']:.1f} %, NOT_HAS precision "
            f"{100 * even['not_has_precision']:.1f} %, HAS precision {100 * even['has_precision']:.1f} %)"
            if even else "hard beats no constraint on dev at no point of the path from the configured memory to the oracle")
        + "; [memory_quality.md](memory_quality.md) has the curve along precision and recall separately." + _levers_text(mq),
    ]


def _levers_text(mq: dict[str, Any]) -> str:
    """What the dev-only probe levers did to the memory (memory_quality.md): the best dev gain and whether any CI
    clears 0."""
    levers = mq.get("memory_levers_dev") or []
    if len(levers) < 2:
        return ""
    best = max(levers[1:], key=lambda r: r["dev gain"]["value"])
    up = memory_quality.lever_gains_above_zero(levers)
    return (f" The probe levers tried on dev ({', '.join(r['probe'] for r in levers[1:])}, each against the memory as "
            f"configured) reach at best {memory_quality.gain_text(best['dev gain'])} points of dev accuracy under the "
            f"configured strength ({best['probe']}); "
            + (f"{', '.join(up)} clear 0." if up else "none clears 0, and none brings the memory near that break-even."))


def _lam_text(chunks: str, curves: list[str]) -> str:
    """What the λ trade-off mixes under the configured chunks, and which other curves the figure shows."""
    others = [c for c in curves if c != chunks]
    beside = f" (`figures/ablate_lam.png` also shows {', '.join(f'`{c}`' for c in others)})" if others else ""
    if chunks == "anchors":
        return ("With the configured `anchors` chunks both terms are image similarities; the paper's text + image vs "
                "image trade-off is the `multimodal` curve beside it (`figures/ablate_lam.png`)."
                if "multimodal" in others else f"With the configured `anchors` chunks both terms are image similarities{beside}.")
    what = "the chunk text's and the anchors' similarities averaged (Eq. 1)" if chunks == "multimodal" else "the chunk text's similarity"
    return f"With the configured `{chunks}` chunks, s_m is {what}, against the re-ranker's image similarity: the paper's trade-off{beside}."


def _reader_text(params: Params, top_k: dict[str, Any]) -> str:
    """The reader's accuracy at the configured k, VR-RAG's headline, when a reader ran."""
    acc = top_k.get("reader accuracy")
    if not params.reader.model or not acc:
        return ""
    k = str(params.retrieval.k) if str(params.retrieval.k) in acc else max(acc, key=int)  # the configured k, if swept
    at = acc[k]
    return (f"Reader `{params.reader.model}` (VR-RAG Table 3: the MLLM reads the query with the top-{k} summaries"
            + (" and the knowledge graph's facts" if params.reader.facts else "")
            + f" and names the species): test accuracy **{_ci(at)}** (n = {at['n']} queries); per k in "
            "[ablate_top_k.md](ablate_top_k.md). ")


def models_section(params: Params) -> list[str]:
    """What this run's models can and cannot show, from the configuration it ran with."""
    cpu_default = (all(parse_encoder(n).family in ("efficientnet", "minilm") for n in params.encoders.names)
                   and params.graph.verifier == "probe" and not params.reader.model)
    if cpu_default:
        return ["## What the embedded models can and cannot show", "",
                "The default run uses three small ImageNet CNNs (EfficientNet-Lite0/1/2) and MiniLM, offline on a CPU. They can show "
                "the method's mechanics and its relative effects with honest uncertainty: the anchor-based retrieval, the visual "
                "re-rank, the score ensemble, constraint enforcement against oracle and random memories, coverage. They cannot "
                "show the papers' absolute numbers: without a text tower the chunk text reaches image space only through a weak "
                "ridge bridge (near-chance `text` rows), so the paper's text + image trade-off (Fig. 3) is not reproduced; the concept "
                "verifier is a linear probe, not a VLM; and there is no reader model, so top-k reports retrieval recall, the bound on "
                "any reader. The GPU profile's models (CLIP-like encoders, a Qwen2.5-VL-class verifier and reader) are the paper's setting.",
                ""]
    rp, g, cur = params.retrieval, params.graph, params.curate
    bridged = [n for n in rp.ensemble if not has_text_tower(n)]
    verifier = {"probe": "linear probes on the encoders' features (not a VLM)",
                "zero_shot": f"zero-shot prompts of `{g.zero_shot_encoder}`", "vlm": f"the VLM `{g.vlm_model}`'s P(Yes)"}[g.verifier]
    return ["## This run's models", "",
            f"- Retrieval g (Eq. 1): {', '.join(f'`{n}`' for n in rp.ensemble)}; chunks `{rp.chunks}`; "
            + (f"text bridged by a ridge map for {', '.join(f'`{n}`' for n in bridged)} (no text tower)" if bridged
               else "every member's own text tower") + ".",
            f"- Re-ranker h (Eq. 2): " + (f"`{rp.reranker}`, λ = {rp.lam}." if rp.reranker else "none."),
            f"- Concept verifier (PolarMem): {verifier}.",
            "- Reader: " + (f"`{params.reader.model}`: the recognition accuracy above is its answer." if params.reader.model
                            else "none, so top-k reports retrieval recall, the bound on any reader."),
            "- Species text: " + (f"distilled by `{cur.llm_model}` (VR-RAG §3)." if cur.summarizer == "llm"
                                  else "the extractive summarizer (no LLM)."),
            "- Anchor filter: " + (f"`{cur.vlm_model}`'s yes/no answer (VR-RAG §3)." if cur.anchor_filter == "vlm"
                                   else f"`{cur.anchor_filter}` on `{cur.filter_encoder}` features."),
            ""]


def results_markdown(params: Params, commit: str, m: dict[str, Any], plots: dict[str, pd.DataFrame], k: int,
                     overrides: dict[str, Any] | None = None, experiment: str | None = None,
                     audit: pd.DataFrame | None = None) -> str:
    """`commit`: the code commit (`code_commit`); `overrides`: params values that are not the committed file's
    (`params_overrides`); `experiment`: the DVC experiment's name (default: DVC_EXP_NAME); `audit`: the retrieve
    stage's per-query table (the failure section's counts)."""
    r, lam, cons = m["retrieval"], m["ablate_lam"]["chosen_on_dev"], plots["constraint"]
    p = r["protocol"]
    retrieval = plots["retrieval"]
    conf = cons[(cons["set"] == cons["set"].iloc[0]) & ~cons["strength"].str.contains("query-image")]
    by = lambda mem, st: conf[(conf["memory"].str.startswith(mem)) & (conf["strength"] == st) & (conf["split"] == "test")  # noqa: E731
                              & (conf["queries"] == "all") & (conf["metric"] == "target mRR@1")].iloc[0]
    none, hard, oracle, rand = by("configured", "none"), by("configured", "hard"), by("oracle", "hard"), by("random", "hard")
    cov = plots["coverage"]
    cov_cat = cov[cov["split"] == "catalog"].pivot_table(index="setting", columns="metric", values="value", sort=False)
    cov_test = cov[(cov["split"] == "test") & (cov["queries"] == "all") & (cov["metric"] == "overall score")].set_index("setting")
    critical = cov[(cov["split"] == "test") & (cov["queries"] == "all") & (cov["metric"] == "Proposal Recall@K (query-critical)")]
    critical = critical.set_index("setting")["value"].reindex(cov_cat.index)
    claims = polarmem_claims(conf, pd.DataFrame({"Proposal Recall@K": critical,
                                                 "score": [r.to_dict() for _, r in cov_test.reindex(cov_cat.index).iterrows()]},
                                                index=cov_cat.index), m["memory_quality"], k)
    coverage = pd.DataFrame({"concepts per image": cov_cat["concepts proposed per image"].round(1),
                             "Proposal Recall@K (every concept)": (100 * cov_cat["Proposal Recall@K"]).round(1),
                             "Proposal Recall@K (query-critical, test)": (100 * critical).round(1),
                             "test accuracy@1 under constraints": [_ci(r) for _, r in cov_test.reindex(cov_cat.index).iterrows()]})
    g = m["graph"]
    quality = pd.DataFrame({"every edge (as proposed)": g["edges"], **g["evaluated_edges"]}).T.drop(columns=["pairs"], errors="ignore")
    top_k = plots["top_k"]
    rp = params.retrieval
    return "\n".join([
        "# Results", "",
        f"{run_text(commit, overrides or {}, experiment)}: "
        f"retrieval ensemble {'+'.join(rp.ensemble)}, chunks `{rp.chunks}`, re-ranker {rp.reranker}, λ = {rp.lam}, r = {rp.r}, "
        f"k = {rp.k}, colour-nuisance projection "
        + (f"on {'+'.join(rp.colour_invariant)} (d {rp.colour_invariant_dim})" if rp.colour_invariant else "off")
        + f"; graph verifier `{params.graph.verifier}`, proposer `{params.graph.proposer}`, κ = {params.graph.kappa}, "
        f"constraint `{params.graph.constraint}`; encoders {', '.join(params.encoders.names)}. Every table below is regenerated "
        "byte-for-byte by that command; `dvc metrics diff` / `dvc plots diff` compare it with any other commit or experiment.", "",
        "**Protocol.** The query species are split by a hash of the species id into "
        f"**dev** ({p['dev_species']} species, {p['dev_queries']} queries) and **test** ({p['test_species']} species, "
        f"{p['test_queries']} queries; `eval.dev_fraction` = {params.eval.dev_fraction}). Every choice is made on dev — the best "
        "row, λ, the anchor scale (`encoders.anchor_scale: auto` measures the dev queries only), the constraint strength "
        "(by target accuracy on the primary constrained set), the proposer (by its overall score under constraints), the "
        "probe verifier's PCA size (the memory levers of [memory_quality.md](memory_quality.md)), "
        "and in the selection pipeline (`make select`, "
        "[selection/retrieval.md](selection/retrieval.md)) the ensemble members, re-ranker, colour projection, CSLS's k and "
        "the anchor scale ratio; the query-side statistics of every dev score contain no test image. Fixed a priori, "
        f"not chosen: κ = {params.graph.kappa} (PolarMem gives no value), the bridge budget B = {params.kg.bridge} (the "
        "graph-RAG paper's two chunks) and the link rules, the encoders' input size, and "
        f"`retrieval.reference_folds` = {params.retrieval.reference_folds} — and every number here is "
        f"test, with a 95 % CI from a paired bootstrap over species ({p['bootstrap']} resamples; a species' regular and shiny "
        "sprites move together). A difference is called one only when its CI excludes 0. Ties are pessimistic."
        + (" The values in the first line's exceptions are this run's own (a profile's overlay or an experiment's `-S`), "
           "not dev choices." if overrides else ""), "",
        "## Recognition (VR-RAG Tables 2 and 5 analog)", "",
        _reader_text(params, m["ablate_top_k"]["test"])
        + f"Configured pipeline: test mRR@1 **{_ci(r['configured']['all']['mRR@1'])}**, R@10 {_ci(r['configured']['all']['R@10'])}; "
        + "; ".join(f"{grp} {_ci(v['mRR@1'])}" for grp, v in r["configured"].items() if grp != "all")
        + f". Chance: mRR@1 {100 * r['chance']['mRR@1']:.2f}. Every query is scored alone, with query-side statistics "
        f"(`retrieval.query_centre: {r['query_centre']}`) that contain no test image. "
        + "Under the other query-side protocols: " + "; ".join(f"{mode} {_ci(q['mRR@1'])}" for mode, q in r["query_protocols"].items()
                                                               if mode != r["query_centre"])
        + (f". The configured protocol's query statistics add {diff_text(Interval(**{k: r['query_statistics_gain'][k] for k in ('value', 'ci_low', 'ci_high')}, n=0))} "
           "over none (catalog-mean centring, VR-RAG's protocol)" if "query_statistics_gain" in r else "")
        + f". Best row on dev: {r['best_on_dev']['configuration']}"
        + (" (the configured pipeline)." if r["best_on_dev"]["is_configured"] else
           f" (dev mRR@1 {100 * r['best_on_dev']['dev_mRR@1']:.1f} against the configured pipeline's "
           f"{100 * r['configured_dev_mRR@1']:.1f}; a choice, so its test number is not read)."), "",
        pd.DataFrame({"configuration": retrieval["configuration"], "dev mRR@1": (100 * retrieval["dev mRR@1"]).round(1),
                      "test mRR@1 [95% CI]": [_ci({"value": v, "ci_low": lo, "ci_high": hi}) for v, lo, hi in
                                              zip(retrieval["test mRR@1"], retrieval["ci_low"], retrieval["ci_high"])],
                      "Δ vs configured [95% CI]": ["baseline" if base else diff_text(Interval(d, lo, hi, 0)) for base, d, lo, hi in
                                                   zip(retrieval["baseline"], retrieval["delta"], retrieval["delta_low"],
                                                       retrieval["delta_high"])]})
        .to_markdown(index=False), "",
        "Full table (per variant, mRR@10, R@10): [retrieval.md](retrieval.md). Figure: `figures/retrieval_table.png`.", "",
        "## λ (VR-RAG Fig. 3) and top-k (Fig. 2)", "",
        f"λ chosen on dev: **{lam['lam']}** (dev mRR@1 {100 * lam['dev']:.1f}); its test mRR@1 {_ci(lam['test'])}; configured "
        f"λ = {lam['configured']}. " + _lam_text(rp.chunks, list(dict.fromkeys(plots["lam"]["chunks"]))), "",
        _table(plots["lam"], ["chunks", "lam"], {"test mRR@1 [95% CI]": ("all", "mRR@1", True),
                                                  **{f"{grp}": (grp, "mRR@1", False) for grp in ("regular", "shiny")}}), "",
        _table(top_k, ["k"], {"test R@k [95% CI]": ("all", "R@k", True), "regular": ("regular", "R@k", False),
                              "shiny": ("shiny", "R@k", False),
                              **({"test reader accuracy [95% CI]": ("all", "reader accuracy", True)}
                                 if (top_k["metric"] == "reader accuracy").any() else {})}), "",
        "## Constraints with controls (PolarMem Fig. 3 / Table 3)", "",
        f"Primary constrained set (Q− from the target's catalog look-alikes, independent of the ranking scored); test queries; "
        f"Conflict@{k} and filter rate per query over the unconstrained top-{params.graph.filter_pool}. Accuracy under "
        f"constraints: hard {_ci(hard)} vs unconstrained {_ci(none)}; under hard the oracle memory reaches {_ci(oracle)} and "
        f"the random memory {_ci(rand)}. "
        "What the constraints reveal: Q+ is a true concept of the target, so a constraint is partial label information — "
        "the oracle row is what that information alone is worth, and the gap between it and the configured memory is "
        "what the imperfect graph loses. Full table (both sets, dev, regular / shiny): [ablate_constraint.md](ablate_constraint.md).", "",
        _table(conf, ["memory", "strength"], {"accuracy@1 [95% CI]": ("all", "target mRR@1", True),
                                              "regular": ("regular", "target mRR@1", False), "shiny": ("shiny", "target mRR@1", False),
                                              f"Conflict@{k} (ground truth)": ("all", f"Conflict@{k} (ground truth)", True),
                                              "Filter rate (ground truth)": ("all", "Filter rate (ground truth)", True)}), "",
        "**Which of PolarMem's claims reproduce here**, each on test with its paired CI against the do-nothing baseline:", "",
        *claims, "",
        "## Proposer coverage (PolarMem Table 2)", "", coverage.reset_index().to_markdown(index=False), "",
        "## Graph quality", "",
        "Edge precision / recall against ground truth: every edge of the graph, and the pairs the constraint axis reads "
        "(as proposed and with critical completion; [graph.md](graph.md) has statistics and per-stage cost).", "",
        (100 * quality).round(1).to_markdown(), "",
        "**Cost** (PolarMem Table 7 layout), backend calls per catalog image: "
        + "; ".join(f"{stage} {calls:g}" for stage, calls in g["backend_calls_per_episode"].items())
        + ". Time and memory per image vary run to run, so they live in the graph stage's MLflow run, not in committed files.", "",
        *_kg_section(m["kg"]),
        "## Per generation and failure cases", "",
        "Test accuracy@1 of the configured pipeline per generation (data: `plots/generation.csv`; figure "
        "`figures/report_generation.png`). The worst test queries beside their gold artwork and top-3 (one per gold "
        "species, ties in a fixed hash order): `figures/report_failures.png`."
        + (" " + absent_text(audit, params.retrieval.r) if audit is not None else ""), "",
        _strata_table(plots["generation"]), "",
        *models_section(params),
    ])
