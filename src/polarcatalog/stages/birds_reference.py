"""The birds_reference stage (notebook 11, `birds/dvc.yaml`): what VR-RAG's bird setting can honestly run without
photos, on the catalog the birds_catalog stage wrote, and the data paths its photo runs start from.

- `text_retrieval`: CUB's per-class visual descriptors as text queries against the whole catalog (open world) and
  against CUB's 200 species (closed world), mRR@k with the results protocol's CIs;
- `filter_eval`: the anchor filter (ImageNet P(bird)) on clip-art birds vs non-bird photos;
- `benchmark_table`: the five benchmarks' split lists matched to the catalog (and their photos counted, when given).

Nothing here is chosen on these numbers: there is no knob to tune, so dev and test are both reported, test first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from polarcatalog.config import Birds, Params
from polarcatalog.curate.anchors import ImageNetBirdFilter, VLMFilter, create_anchor_filter
from polarcatalog.curate.pipeline import bird_filter_eval
from polarcatalog.data.bird_benchmarks import load_benchmark
from polarcatalog.data.birds import BirdCatalog
from polarcatalog.data.cub import cub_labels, cub_vocabulary
from polarcatalog.data.images import Quarantine
from polarcatalog.encoders import create_encoder
from polarcatalog.eval.bootstrap import Bootstrap, Interval
from polarcatalog.data import bird_reference
from polarcatalog.eval.metrics import chance, gold_ranks, per_query
from polarcatalog.eval.protocol import Protocol, ci_text, headline_with_ci, long_rows
from polarcatalog.eval.splits import dev_test_split
from polarcatalog.index.faiss_index import build_index, search

METRICS = ("mRR@1", "mRR@5", "mRR@10", "R@10")


def reference(bp: Birds, *parts: str) -> Path:
    """A file or folder of the reference data, or an error naming `birds.reference_dir` and what must be in it."""
    root = Path(bp.reference_dir)
    path = root.joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: {bird_reference.explain(bp.reference_dir, ['/'.join(parts)])}")
    return path


def text_queries(bp: Birds, cat: BirdCatalog, species: pd.DataFrame) -> pd.DataFrame:
    """CUB's descriptors per class, matched to catalog species (the loader's matching); classes whose species is not
    in this catalog (a `species_limit` run, or unmatched) are listed with `species_id` -1."""
    descriptors = json.loads(reference(bp, "cub", "descriptors_cub.json").read_text(encoding="utf-8"))
    row_of = dict(zip(species["scientific"], species["species_id"]))
    rows = []
    for cls, items in descriptors.items():
        m = cat.match(cls)
        rows.append({"class": cls, "species": m.species, "how": m.how, "species_id": int(row_of.get(m.species, -1)),
                     "descriptors": list(items),
                     # the a-priori query forms (none chosen on results): every descriptor in one sentence
                     "joined": "A bird with " + "; ".join(items) + "."})
    return pd.DataFrame(rows)


def cub_attribute_texts(bp: Birds, cat: BirdCatalog, species: pd.DataFrame) -> pd.DataFrame:
    """Each CUB class's attribute profile as a sentence (the attributes seen on at least half its images, `data.cub`),
    for the catalog species it matches: visual text from a source independent of the descriptors (annotators' labels
    vs a language model's phrases), the text a catalog would need for the closed-world row to measure retrieval."""
    vocab = cub_vocabulary(reference(bp, "cub", "attributes.txt"))
    labels = cub_labels(reference(bp, "cub", "class_attribute_labels_continuous.txt"))
    classes = [line.split(maxsplit=1)[1].split(".", 1)[1]
               for line in reference(bp, "cub", "classes.txt").read_text().splitlines() if line.strip()]
    row_of = dict(zip(species["scientific"], species["species_id"]))
    out = []
    for cls, on in zip(classes, labels):
        m = cat.match(cls)
        if m.species in row_of:
            out.append({"species_id": int(row_of[m.species]), "class": cls,
                        "text": "A bird with " + "; ".join(c.name for c, yes in zip(vocab, on) if yes) + "."})
    return pd.DataFrame(out, columns=["species_id", "class", "text"])


def text_retrieval(galleries: list[tuple[str, np.ndarray, np.ndarray]], joined_vecs: np.ndarray,
                   descriptor_vecs: list[np.ndarray], queries: pd.DataFrame, params: Params) -> pd.DataFrame:
    """mRR@k of each class's species in each gallery (name, species ids, their text vectors), for two fixed query
    forms: the descriptors joined in one text, and the mean of the descriptors' similarities (one vector each, as
    classification by description scores a class). The protocol's rows. `queries` are the classes whose species is
    in the catalog (`species_id` >= 0), in the order of the vectors; a gold species missing from a gallery ranks last
    (scores 0)."""
    gold = queries["species_id"].to_numpy()
    if (gold < 0).any():
        raise ValueError("text_retrieval takes the queries whose species is in the catalog (species_id >= 0)")
    if not len(gold):  # a small catalog (`birds.species_limit`) may hold none of CUB's classes: nothing to score
        return pd.DataFrame(columns=ROW_COLUMNS)
    ev = params.eval
    protocol = Protocol.of(gold, dev_test_split(gold, ev.dev_fraction, ev.seed), ["cub"] * len(gold),
                           ev.bootstrap, ev.seed, ev.confidence)
    rows = []
    for gallery, gids, gvecs in galleries:
        scores, pos = search(build_index(gvecs, use_gpu=False), joined_vecs, len(gids))
        ranks = gold_ranks(np.where(pos >= 0, gids[np.maximum(pos, 0)], -1), gold, scores)
        rows += long_rows(protocol, dict(zip(METRICS, per_query(ranks, METRICS).T)), query="descriptors joined",
                          gallery=gallery, species=len(gids))
        mean_sim = np.stack([(v @ gvecs.T).mean(0) for v in descriptor_vecs])  # [Q, G]: the mean over a class's descriptors
        order = np.argsort(-mean_sim, axis=1, kind="stable")
        ranks = gold_ranks(gids[order], gold, np.take_along_axis(mean_sim, order, 1))
        rows += long_rows(protocol, dict(zip(METRICS, per_query(ranks, METRICS).T)), query="mean over descriptors",
                          gallery=gallery, species=len(gids))
    return pd.DataFrame(rows)


def anchor_filter(params: Params) -> ImageNetBirdFilter | VLMFilter:
    """The bird anchor filter: the paper's VLM question with `curate.anchor_filter: vlm` (GPU), else ImageNet P(bird)."""
    cur, enc = params.curate, params.encoders
    if cur.anchor_filter == "vlm":
        return create_anchor_filter("vlm", vlm_model=cur.vlm_model, vlm_threshold=cur.vlm_threshold, domain="birds",
                                    device=enc.device, batch_size=cur.batch_size)
    return ImageNetBirdFilter(create_encoder(cur.filter_encoder, "image", enc.device, enc.runtime), cur.bird_threshold, cur.batch_size)


def filter_eval(bp: Birds, bird_filter: ImageNetBirdFilter | VLMFilter, quarantine: Quarantine, resamples: int, seed: int,
                level: float) -> tuple[pd.DataFrame, dict[str, object]]:
    """The filter on every clip-art bird vs scikit-image's non-bird photos; precision/recall with image-bootstrap CIs
    and the rank AUC (threshold-free)."""
    images, pr = bird_filter_eval(reference(bp, "openclipart_birds"), bird_filter, quarantine)
    keep, is_bird = images["keep"].to_numpy(), images["is_bird"].to_numpy()
    boot = Bootstrap.over(np.arange(len(images)), resamples, seed, level)
    recall = boot.subset(is_bird).interval(keep.astype(float))
    precision = boot.subset(keep).interval(is_bird.astype(float)) if keep.any() else None
    pos, neg = images.loc[is_bird, "score"].to_numpy(), images.loc[~is_bird, "score"].to_numpy()
    auc = float(((pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])).mean())
    model = {"model": bird_filter.model_name} if isinstance(bird_filter, VLMFilter) else {}  # the ImageNet filter's is fixed
    return images, {**pr, "filter": bird_filter.name, **model, "threshold": bird_filter.threshold, "birds": int(is_bird.sum()), "non_birds": int((~is_bird).sum()),
                    "recall_ci": [recall.ci_low, recall.ci_high],
                    "precision_ci": [precision.ci_low, precision.ci_high] if precision else None, "auc": round(auc, 4)}


def benchmark_table(bp: Birds, cat: BirdCatalog) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """Per benchmark: classes, matched (by tier), images, and (with `birds.image_root`) the photos found."""
    rows, missing = [], {}
    for name in bp.benchmarks:
        root = Path(bp.image_root) / name if bp.image_root else None
        b = load_benchmark(name, reference(bp, "vrrag_splits"), cat, image_root=root)
        s = b.summary()
        if root is not None:
            s["photos_found"] = len(b.images)
            missing[name] = b.missing_files[:20]
        rows.append(s)
    return pd.DataFrame(rows), missing


ROW_COLUMNS = ["query", "gallery", "species", "split", "queries", "metric", "value", "ci_low", "ci_high", "n"]
NO_CLASS = "no CUB class in the catalog"


def scored(rows: pd.DataFrame) -> pd.DataFrame:
    """The test rows over all queries: empty when no CUB class is a catalog species (or none fell on the test side)."""
    return rows[(rows["split"] == "test") & (rows["queries"] == "all")]


def retrieval_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Test rows first, then dev: point [CI] per metric, and the chance floor of each gallery."""
    if rows.empty:
        return pd.DataFrame([{"split": "-", "gallery": "-", "query": NO_CLASS, "classes": 0}])
    out = []
    for (split, gallery, query), g in rows.groupby(["split", "gallery", "query"], sort=False):
        g = g[g["queries"] == "all"].set_index("metric")
        rec = {"split": split, "gallery": f"{gallery} ({int(g['species'].iloc[0]):,})", "query": query,
               "classes": int(g["n"].iloc[0])}
        for m in METRICS:
            r = g.loc[m]
            rec[m] = ci_text(Interval(r["value"], r["ci_low"], r["ci_high"], int(r["n"])))
        out.append(rec)
    for gallery, n in rows.groupby("gallery", sort=False)["species"].first().items():
        c = chance(int(n), METRICS)
        out.append({"split": "chance", "gallery": f"{gallery} ({n:,})", "query": "uniform random ranking", "classes": "",
                    **{m: f"{100 * c[m]:.2f}" for m in METRICS}})
    df = pd.DataFrame(out)
    return pd.concat([df[df["split"] == "test"], df[df["split"] == "dev"], df[df["split"] == "chance"]], ignore_index=True)


def retrieval_figure(rows: pd.DataFrame):
    """Test mRR@1 and R@10 per gallery and query form, each with its bootstrap CI as the error bar."""
    import matplotlib.pyplot as plt  # heavy: figures only in the notebook
    import seaborn as sns  # heavy (same)

    t = scored(rows)
    t = t[t["metric"].isin(["mRR@1", "R@10"])]
    galleries = list(dict.fromkeys(t["gallery"]))
    series = list(dict.fromkeys(zip(t["query"], t["metric"])))
    colours = sns.color_palette("deep", len(series))
    fig, ax = plt.subplots(figsize=(7, 3.4))
    if t.empty:
        ax.text(0.5, 0.5, f"{NO_CLASS}'s test split: raise birds.species_limit", ha="center", va="center")
        ax.set_axis_off()
        return fig
    width = 0.8 / len(series)
    for j, ((query, metric), colour) in enumerate(zip(series, colours)):
        s = t[(t["query"] == query) & (t["metric"] == metric)].set_index("gallery").loc[galleries]
        x = np.arange(len(galleries)) + (j - (len(series) - 1) / 2) * width
        ax.bar(x, 100 * s["value"], width, color=colour, label=f"{query} · {metric}")
        ax.errorbar(x, 100 * s["value"], yerr=[100 * (s["value"] - s["ci_low"]), 100 * (s["ci_high"] - s["value"])],
                    fmt="none", ecolor="black", capsize=2, lw=0.8)
    ax.set_xticks(np.arange(len(galleries)), galleries)
    ax.set_ylabel("test value, % (95% CI)")
    ax.set_title("CUB descriptors as text queries → AviList species")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def filter_figure(images: pd.DataFrame, threshold: float, name: str):
    """The filter's score of every clip-art bird and non-bird photo against the threshold."""
    import matplotlib.pyplot as plt  # heavy: figures only in the notebook
    import seaborn as sns  # heavy (same)

    fig, ax = plt.subplots(figsize=(6, 2.6))
    # a swarm, not a jittered strip: the strip's jitter draws from numpy's global generator, so the same numbers gave a
    # different PNG on every run (and a changed dvc.lock)
    sns.swarmplot(data=images.assign(kind=images["is_bird"].map({True: "clip-art bird", False: "non-bird photo"})),
                  x="score", y="kind", hue="keep", ax=ax, size=4)
    ax.axvline(threshold, color="grey", ls="--", lw=1)
    ax.set_xlabel("ImageNet P(bird) (sum over its bird classes)" if name == "imagenet_bird" else f"{name}: P(Yes)")
    ax.set_ylabel("")
    ax.set_xscale("symlog", linthresh=0.01)
    fig.tight_layout()
    return fig


def reading(rows: pd.DataFrame, catalog_stats: dict) -> str:
    """What the text-retrieval table says, from its own test numbers (mRR@1, descriptors joined)."""
    t = scored(rows)
    t = t[(t["metric"] == "mRR@1") & (t["query"] == "descriptors joined")].set_index("gallery")
    if t.empty or t["n"].max() == 0:
        return (f"Nothing to read: {NO_CLASS}'s test split at {catalog_stats['species']:,} species (CUB's classes are "
                "spread over the whole checklist; raise `birds.species_limit`).")
    cell = lambda g: ci_text(Interval(t.at[g, "value"], t.at[g, "ci_low"], t.at[g, "ci_high"], int(t.at[g, "n"])))  # noqa: E731
    closed, control = "CUB's species", "CUB's species, text = CUB attributes"
    n_closed = int(t.at[closed, "species"])
    overlap = t.at[control, "ci_low"] <= t.at[closed, "ci_high"] and t.at[closed, "ci_low"] <= t.at[control, "ci_high"]
    source = ("the checklist's sentence (names and taxa, nothing about how a bird looks)"
              if set(catalog_stats["text_sources"]) == {"avilist-2025"} else "its summary")
    return (f"Reading it (test, mRR@1 of the joined descriptors): with {source} as each species' text, the open world "
            f"gives {cell('all catalog species')} against a chance of {100 * chance(int(t.at['all catalog species', 'species']), ('mRR@1',))['mRR@1']:.2f}; "
            f"among CUB's {n_closed} species it gives {cell(closed)} (chance {100 / n_closed:.2f}), and with CUB's "
            f"attribute profiles as the texts {cell(control)}"
            + (" — the CIs overlap: in this text encoder's space a list of descriptor phrases and a list of attribute "
               "labels are no closer than a name is, so this run bounds what the encoder can do with text alone, and "
               "the paper's setting (Wikipedia summaries, CLIP-family text towers, photos) is what it leaves to measure."
               if overlap else "."))


def markdown(catalog_stats: dict, table_md: str, rows: pd.DataFrame, filt: dict, bench: pd.DataFrame, figures: list[str]) -> str:
    """The bird reference report: what ran, its numbers with CIs, and what needs photos."""
    pr = lambda v: "n/a" if v is None else f"{100 * v:.1f}"  # noqa: E731
    ci = lambda c: "" if not c else f" [{100 * c[0]:.1f}, {100 * c[1]:.1f}]"  # noqa: E731
    cols = ["benchmark", "classes", "matched", "by_exact", "by_compact", "by_checklist", "by_table", "shared_species",
            "images", "images_matched", "misses"] + (["photos_found"] if "photos_found" in bench else [])
    filter_text = "ImageNet P(bird)" if filt["filter"] == "imagenet_bird" else f"The VLM {filt.get('model')}'s P(Yes)"
    return "\n".join([
        "# Birds: the reference run without photos",
        "",
        f"VR-RAG's bird setting, as far as it runs without photos. Catalog: **{catalog_stats['species']:,} AviList 2025 "
        f"species**; each species' text is {catalog_stats['text']}. Nothing below is chosen on these numbers (no knob is "
        "tuned here), so the test split is the headline and dev is shown beside it; the split is by species, as in the "
        "Pokémon pipeline.",
        "",
        "## Taxonomy graph",
        "",
        f"{catalog_stats['graph']['entities']:,} entities, {catalog_stats['graph']['triples']:,} triples "
        f"({', '.join(f'{v:,} {k}' for k, v in catalog_stats['graph']['triples per relation'].items())}); "
        f"{catalog_stats['graph']['components']} components (one per order); "
        f"{catalog_stats['graph']['congeners per species (mean)']} congeners per species on average: the look-alikes a "
        "+KGret bridge would add.",
        "",
        "## Text query → species (CUB descriptors)",
        "",
        "Each CUB class's visual descriptors (a list of short phrases) is a query, matched by name to its AviList species. "
        "Two fixed query forms: all descriptors in one sentence, and the mean of each descriptor's similarity. Galleries: "
        "every catalog species (the open world of Table 1), CUB's own species (closed), and a control: CUB's species "
        "with their CUB attribute profile as the text (annotators' labels, a source independent of the descriptors), "
        "which shows what the same retrieval does once the catalog's text is visual. mRR@k and Recall@k in %, 95% "
        "species-bootstrap CIs; the chance rows are a uniformly random ranking.",
        "",
        table_md,
        "",
        reading(rows, catalog_stats),
        "",
        "## Anchor filter (is there a bird?)",
        "",
        f"{filter_text} ≥ {filt['threshold']} on {filt['birds']} clip-art birds vs {filt['non_birds']} non-bird photos: "
        f"recall {pr(filt['recall'])}{ci(filt['recall_ci'])}, precision {pr(filt['precision'])}{ci(filt['precision_ci'])} "
        f"(image bootstrap), rank AUC {filt['auc']:.3f}. "
        + ("Clip-art is a harder domain than Wikipedia photos for an ImageNet classifier; on GPU the filter is the "
           "paper's VLM question (`curate.anchor_filter: vlm`)." if filt["filter"] == "imagenet_bird" else
           "The question is the paper's (VR-RAG §3: 'Is there a bird present in the Image? Reply only with Yes or No')."),
        "",
        "## Benchmarks: split lists matched to the catalog",
        "",
        "Class names are matched in tiers (exact name, name without spaces/possessive, another checklist's name for the "
        "same scientific name, a hand table for lumps, splits and short names); `shared_species` counts classes that land "
        "on one AviList species (lumps); misses are listed, never relabelled.",
        "",
        bench[cols].to_markdown(index=False),
        "",
        "## What needs photos",
        "",
        "- Image-query retrieval and re-ranking (VR-RAG Tables 2-3) on the five benchmarks: their photos "
        "(`birds.image_root`) and anchor images (the Wikipedia articles' images, `data.wikipedia.WikipediaFetcher."
        "image_urls`), neither of which exists on this machine.",
        "- The MLLM reader's accuracy (Table 3, Fig. 2): the photos, and a Qwen2.5-VL-class model (`reader.model`).",
        *(["- Wikipedia article summaries as the species text (`birds.articles: wikipedia`, network; the LLM summarizer "
           "on GPU) instead of the checklist's sentence."] if set(catalog_stats["text_sources"]) == {"avilist-2025"} else []),
        "- PolarMem on birds: CUB's 312 attributes are the concept vocabulary with per-class ground truth "
        "(`data.cub`), verified on photos.",
        "",
        *[f"![{Path(f).stem}](../figures/{Path(f).name})" for f in figures],  # the report sits in reports/birds/
        "",
    ])


def headline(d: dict[str, Any]) -> dict[str, Any]:
    """The bird reference run: open-world text retrieval (descriptors joined, all species) and the same queries
    against CUB's species described by their attributes (the control), each with its CI; the anchor filter's AUC."""
    t = d["text_retrieval"]  # no CUB class in the catalog's test split: the headline has no text numbers
    out = {"bird species": d["catalog"]["species"]}
    for name, key in (("test text mRR@1 (all species)", "all catalog species/descriptors joined/mRR@1"),
                      ("test text mRR@1 (CUB attribute texts)", "CUB's species, text = CUB attributes/descriptors joined/mRR@1")):
        if t.get(key, {}).get("n"):
            out |= headline_with_ci(name, t[key])
    return out | {"anchor filter AUC": d["anchor_filter"]["auc"]}
