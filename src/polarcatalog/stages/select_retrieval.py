"""The select_retrieval stage (notebook 09, `selection/dvc.yaml`): the retrieval's configured values, chosen on dev.

Every configuration is scored on the **dev** queries only, the way test will be scored (`retrieval.query_centre`:
each dev fold calibrated by the other folds; `retrieval.query_side.statistics_groups`); no test query is read here.
Three searches, each over the values in `selection`:
- the joint grid of ensemble members, re-ranker, λ and the colour-nuisance projection (size d; on the ensemble or on
  every encoder): one or two members and a re-ranker, or all encoders as one score ensemble;
- then, at the grid's winner, the CSLS neighbourhood `retrieval.hubness_k` and the anchor scale ratio
  `encoders.anchor_scale_ratio` (anchors re-encoded at each scale through the feature cache), one at a time.
A tie on dev goes to the configured value: a value changes only on a strictly better dev score. The report says
whether params.yaml holds the winners, and how optimistic a winner's dev score is (the winner's curse): dev is
halved by species many times, a winner is chosen on one half and scored on the other.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from polarcatalog.config import Params, Retrieval
from polarcatalog.encoders import image_encoder
from polarcatalog.encoders.preprocess import Preprocess
from polarcatalog.eval.metrics import RANK_METRICS
from polarcatalog.eval.splits import species_folds
from polarcatalog.features.colour_nuisance import learn_basis
from polarcatalog.features.embedding import encode_anchor_views, query_content_scale
from polarcatalog.features.workspace import Workspace
from polarcatalog.retrieval.query_side import catalog_for, query_values, run_retrieval

CHOSEN = ("ensemble", "reranker", "lam", "colour_invariant", "colour_invariant_dim")


def short(name: str) -> str:
    return name.split("@")[0].removeprefix("efficientnet_")


@dataclass(eq=False)  # compared by identity: a trial holds an array
class Trial:
    label: str
    retrieval: Retrieval
    dev: np.ndarray  # [dev queries] mRR@1 per query
    ratio: float | None = None  # encoders.anchor_scale_ratio, for the scale search


def colour_bases(ws: Workspace, params: Params, cache: Path) -> dict[str, np.ndarray]:
    """Every encoder's colour-nuisance basis: the embed stage's where it kept one, else learnt the same way here."""
    e = params.encoders
    view = Preprocess(e.content_box, ws.manifest["anchor_scale"])
    out = dict(ws.colour_basis)
    for name in (n for n in ws.anchor_f if n not in out):
        enc = image_encoder(e.spec(name), e.device, e.runtime)  # built only on a cache miss
        out[name] = learn_basis(enc, ws.anchors["path"].tolist(), cache, view, e.batch_size)
    return out


def grid(names: list[str], base: Retrieval, lams: list[float], dims: list[int]) -> list[tuple[str, Retrieval]]:
    """The joint grid: (label, configuration) for every members × re-ranker × λ × projection (d 0 = off)."""
    out = []
    members = [(list(ens), rr) for k in (1, 2) for ens in itertools.combinations(names, k) for rr in names if rr not in ens]
    scopes = [(0, "-")] + [(d, scope) for d in dims if d for scope in ("ensemble", "all")]
    for d, scope in scopes:
        for ens, rr in members:
            projected = [] if d == 0 else (list(ens) if scope == "ensemble" else list(names))
            for lam in lams:
                cfg = base.model_copy(update={"ensemble": ens, "reranker": rr, "lam": lam, "colour_invariant": projected,
                                              "colour_invariant_dim": d or base.colour_invariant_dim})
                out.append((f"{'+'.join(map(short, ens))} · re-rank {short(rr)} · λ {lam} · projection "
                            f"{'off' if d == 0 else f'd {d} on {scope}'}", cfg))
        if scope == "ensemble":
            continue  # with no re-ranker the ensemble is every encoder: its `all` row is the same configuration
        cfg = base.model_copy(update={"ensemble": list(names), "reranker": None, "lam": 1.0,
                                      "colour_invariant": [] if d == 0 else list(names),
                                      "colour_invariant_dim": d or base.colour_invariant_dim})
        out.append((f"{'+'.join(map(short, names))} · no re-rank · projection {'off' if d == 0 else f'd {d} on all'}", cfg))
    return out


def scorer(ws: Workspace) -> Callable[[Workspace, Retrieval], np.ndarray]:
    """(workspace, configuration) -> per-query mRR@1 of the dev queries."""
    dev = ws.queries["split"].to_numpy() == "dev"
    m1 = RANK_METRICS.index("mRR@1")

    def score(w: Workspace, rp: Retrieval) -> np.ndarray:
        _, _, ranking = run_retrieval(w, catalog_for(w, rp), rp)
        return query_values(ranking, w.queries["species_id"].to_numpy())[dev, m1]
    return score


def scale_views(ws: Workspace, params: Params, ratios: list[float], cache: Path) -> dict[float, Workspace]:
    """The workspace with its anchors re-encoded at each ratio x the dev queries' median subject size."""
    e = params.encoders
    dev_paths = ws.queries.loc[ws.queries["split"] == "dev", "path"].tolist()
    measured = query_content_scale(dev_paths, seed=params.dataset.seed)
    encoders = {n: image_encoder(e.spec(n), e.device, e.runtime) for n in ws.anchor_f}  # built only on a cache miss
    out = {}
    for ratio in ratios:
        views = encode_anchor_views(encoders, ws.anchors["path"].tolist(), cache, Preprocess(e.content_box, round(ratio * measured)),
                                    ws.has_flips, e.batch_size)
        out[ratio] = ws.with_anchor_views(views)
    return out


def optimism(trials: list[Trial], species: np.ndarray, splits: int, seed: int) -> dict[str, float]:
    """The winner's curse, measured on dev alone: `splits` times, halve the dev species at random, choose the best
    configuration on one half and score it on the other. Returns the mean (and 10th / 90th percentile) of the
    winner's score on its choosing half minus its score on the held-out half, in mRR@1."""
    values = np.stack([t.dev for t in trials])  # [T, Q]
    gaps = []
    for i in range(splits):
        half = species_folds(species, 2, seed + i) == 0
        a, b = values[:, half].mean(1), values[:, ~half].mean(1)
        w = int(np.argmax(a))
        gaps.append(a[w] - b[w])
    g = np.asarray(gaps)
    return {"mean": round(float(g.mean()), 6), "p10": round(float(np.quantile(g, 0.1)), 6),
            "p90": round(float(np.quantile(g, 0.9)), 6), "splits": splits}


def best(trials: list[Trial], configured: Callable[[Trial], bool]) -> Trial:
    """The best trial on dev; a tie goes to the configured one (a value changes only on a strictly better dev score)."""
    return max(trials, key=lambda t: (round(float(t.dev.mean()), 12), configured(t)))


def table(trials: list[Trial], configured: Callable[[Trial], bool], top: int = 25) -> pd.DataFrame:
    rows = sorted(trials, key=lambda t: -t.dev.mean())
    keep = [t for i, t in enumerate(rows) if i < top or configured(t)]
    return pd.DataFrame({"rank": [rows.index(t) + 1 for t in keep], "configuration": [t.label for t in keep],
                         "dev mRR@1": [round(100 * t.dev.mean(), 2) for t in keep],
                         "params.yaml": ["configured" if configured(t) else "" for t in keep]})


def same(a: Retrieval, b: Retrieval, keys: tuple[str, ...] = CHOSEN) -> bool:
    norm = lambda rp, k: (sorted(getattr(rp, k)) if k == "colour_invariant" else getattr(rp, k))  # noqa: E731
    return all(norm(a, k) == norm(b, k) for k in keys if not (k == "colour_invariant_dim" and not a.colour_invariant
                                                               and not b.colour_invariant))


def summary(params: Params, joint: list[Trial], hubness: list[Trial], scale: list[Trial], gap: dict[str, float],
            n_dev: int) -> dict[str, Any]:
    rp, e = params.retrieval, params.encoders
    top = best(joint, lambda t: same(t.retrieval, rp))
    top_k = best(hubness, lambda t: t.retrieval.hubness_k == rp.hubness_k)
    top_r = best(scale, lambda t: t.ratio == e.anchor_scale_ratio)
    chosen = {k: v for k, v in top.retrieval.model_dump(mode="json").items() if k in CHOSEN}
    if not chosen["colour_invariant"]:
        chosen.pop("colour_invariant_dim")  # no projection: its size means nothing
    chosen |= {"hubness_k": top_k.retrieval.hubness_k, "anchor_scale_ratio": top_r.ratio}
    return {"dev_queries": n_dev, "configurations": len(joint) + len(hubness) + len(scale),
            "chosen": chosen, "chosen_dev_mRR@1": round(float(top.dev.mean()), 6),
            "configured_is_chosen": {"joint": same(top.retrieval, rp), "hubness_k": top_k.retrieval.hubness_k == rp.hubness_k,
                                     "anchor_scale_ratio": top_r.ratio == e.anchor_scale_ratio},
            "optimism": gap}


def markdown(out: dict[str, Any], joint: pd.DataFrame, hubness: pd.DataFrame, scale: pd.DataFrame) -> str:
    ok = out["configured_is_chosen"]
    agree = all(ok.values())
    g = out["optimism"]
    return "\n".join([
        "# Choosing the retrieval on dev", "",
        __doc__.split("\n\n", 1)[1].strip(), "",
        f"{out['configurations']} configurations, each scored on the {out['dev_queries']} dev queries (mRR@1 in %). "
        "Test is not read here: the report stage reads it once, for the configured pipeline.", "",
        f"**Chosen**: {', '.join(f'{k} = {v}' for k, v in out['chosen'].items())} (dev mRR@1 "
        f"{100 * out['chosen_dev_mRR@1']:.2f}). "
        + ("params.yaml holds every chosen value." if agree else
           "**params.yaml does not hold every chosen value** (" + ", ".join(k for k, v in ok.items() if not v)
           + "): update params.yaml and rerun the pipeline, or say why not."), "",
        f"**Winner's curse.** Choosing on half of the dev species and scoring on the other half, {g['splits']} times: the "
        f"winner's score is optimistic by {100 * g['mean']:+.2f} points on average (10th-90th percentile "
        f"{100 * g['p10']:+.2f} to {100 * g['p90']:+.2f}). Read every dev number here with that in mind; the test "
        "number in the report stage is the honest one.", "",
        "## The joint grid (best first; the configured row always shown)", "", joint.to_markdown(index=False), "",
        "## CSLS neighbourhood at the grid's winner", "", hubness.to_markdown(index=False), "",
        "## Anchor scale ratio at the grid's winner", "", scale.to_markdown(index=False), "",
    ])
