"""`polarcatalog evaluate`: the configured retriever on a folder of new query images, scored if labelled."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from polarcatalog.config import Params
from polarcatalog.data.images import Quarantine
from polarcatalog.encoders import create_image_encoder
from polarcatalog.eval.metrics import gold_ranks, summarize
from polarcatalog.features.embed import views_for
from polarcatalog.features.encode import encode_image_files
from polarcatalog.retrieval import experiment as ex
from polarcatalog.retrieval.queries import read_query_folder
from polarcatalog.retrieval.vrrag import prepare_queries, retriever_queries_needed


@dataclass
class EvaluateResult:
    predictions: pd.DataFrame
    metrics: dict | None
    quarantined: list[dict]

    def render(self, show: int = 5) -> str:
        lines = []
        for row in self.predictions.itertuples():
            gold = f" (gold: {row.gold_name}, rank {row.gold_rank:g})" if isinstance(row.gold_name, str) else ""
            lines.append(f"{row.query_id}: {', '.join(row.predicted_names[:show])}{gold}")
        if self.quarantined:
            lines.append(f"{len(self.quarantined)} unreadable image(s) skipped: " + "; ".join(f"{q['path']}: {q['reason']}" for q in self.quarantined))
        if self.metrics:
            m = self.metrics["labelled"]
            lines.append(f"\n{m['n']} labelled queries: mRR@1 {m['mRR@1']:.3f}  mRR@5 {m['mRR@5']:.3f}  mRR@10 {m['mRR@10']:.3f}  "
                         f"R@10 {m['R@10']:.3f}  acc@1 {m['acc@1']:.3f}")
            if self.metrics["unknown_labels"]:
                lines.append(f"{self.metrics['unknown_labels']} image(s) with a label that names no catalog species (not scored)")
        return "\n".join(lines)


def evaluate_folder(params: Params, root: Path, folder: Path, labels: Path | None, out: Path) -> EvaluateResult:
    ws = ex.load_workspace(root / "data/features", root / "data/processed")
    rp = params.retrieval
    missing = [n for n in retriever_queries_needed(rp) if n not in ws.anchor_f]
    if missing:
        raise ValueError(f"the catalog has no features for {missing}; add them to encoders.image and run `dvc repro embed`")
    q = read_query_folder(folder, ws.species, labels)
    _, query_views = views_for(params, None)
    quarantine = Quarantine(out / "quarantine")
    feats, ok = {}, np.ones(len(q), bool)
    for i, name in enumerate(retriever_queries_needed(rp)):
        enc = create_image_encoder(name, params.encoders.device)
        feats[name], ok_n = encode_image_files(enc, q["path"].tolist(), root / "data/cache/features", query_views,
                                               batch_size=params.encoders.batch_size, quarantine=quarantine if i == 0 else None)
        ok &= ok_n
    q = q[ok].reset_index(drop=True)
    feats = {n: f[ok] for n, f in feats.items()}
    catalog = ex.catalog_for(ws, rp)
    vr = ex.retriever(catalog, rp)
    ranking = vr.rank(vr.candidates(prepare_queries(feats, catalog, rp.center, rp.min_center_batch)), rp.lam, max(rp.r, 10))
    names = ws.species.set_index("species_id")["name"]
    gold = q["species_id"].fillna(-1).astype(int).to_numpy()
    ranks = gold_ranks(ranking.species, gold)
    pred = pd.DataFrame({
        "query_id": q["query_id"],
        "label": q["label"],
        "gold_species_id": q["species_id"],
        "gold_name": q["species_id"].map(names),
        "gold_rank": np.where(gold >= 0, ranks, np.nan),
        "predicted_ids": [r[: max(rp.k, 10)].tolist() for r in ranking.species],
        "predicted_names": [[names.get(s, "?") for s in r[: max(rp.k, 10)]] for r in ranking.species],
        "s": [r[: max(rp.k, 10)].round(4).tolist() for r in ranking.s],
    })
    labelled = gold >= 0
    metrics = None
    if q["label"].notna().any():
        metrics = {"labelled": summarize(ranks[labelled]), "unknown_labels": int((q["label"].notna() & ~labelled).sum()),
                   "unlabelled": int(q["label"].isna().sum()), "quarantined": len(quarantine.rows),
                   "retrieval": rp.model_dump(), "catalog_species": int(len(ws.species))}
    out.mkdir(parents=True, exist_ok=True)
    pred.to_csv(out / "predictions.csv", index=False)
    (out / "metrics.json").write_text(json.dumps(metrics or {"labelled": None, "queries": len(q)}, indent=2, default=str) + "\n")
    return EvaluateResult(pred, metrics, quarantine.rows)
