"""How the anchor scale ratio and the hubness neighbourhood were chosen: dev mRR@1 of the configured retrieval for
each candidate, read on the **dev** split only (test is never looked at here), with the embed stage's query features
and the catalog's anchors re-encoded at each scale through the feature cache.

    .venv/bin/python benchmarks/dev_sweep.py [--ratios 1.0 1.6 1.9 2.6] [--hubness-k 5 10 20 40]

Needs a finished embed stage. Writes reports/benchmarks/dev_sweep.{json,md}. A ratio costs one encoding of the catalog
per encoder (about 10-15 s each here with ONNX Runtime); a second run reads every vector from the cache.
"""

from __future__ import annotations

from polarcatalog.numerics import pin_process

pin_process()  # before numpy loads, as the `polarcatalog` command does

import argparse
import os
from pathlib import Path

import pandas as pd

from polarcatalog.from_params import protocol_for
from polarcatalog.retrieval.query_side import catalog_for, query_values, run_retrieval
from polarcatalog.config import load_params
from polarcatalog.encoders import create_encoder
from polarcatalog.encoders.preprocess import Preprocess
from polarcatalog.eval.metrics import RANK_METRICS
from polarcatalog.features.embedding import encode_anchor_views, query_content_scale
from polarcatalog.features.workspace import load_workspace
from polarcatalog.io import write_json
from polarcatalog.paths import FEATURE_CACHE, FEATURES, PROCESSED
from polarcatalog.retrieval.vrrag import query_encoders

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ratios", type=float, nargs="+", default=[1.0, 1.6, 1.9, 2.6])
    ap.add_argument("--hubness-k", type=int, nargs="+", default=[5, 10, 20, 40])
    args = ap.parse_args()
    os.chdir(ROOT)
    params = load_params("params.yaml")
    e, rp = params.encoders, params.retrieval
    ws = load_workspace(FEATURES, PROCESSED)
    protocol = protocol_for(ws, params)
    gold = ws.queries["species_id"].to_numpy()
    dev_paths = ws.queries.loc[ws.queries["split"] == "dev", "path"].tolist()
    measured = query_content_scale(dev_paths, seed=params.dataset.seed)
    names = query_encoders(rp.ensemble, rp.reranker)
    encoders = {n: create_encoder(e.spec(n), "image", e.device, e.runtime) for n in names}
    m1 = RANK_METRICS.index("mRR@1")

    def dev_row(setting: str, value: float, px: int | None, variant, retrieval) -> dict:
        _, _, ranking = run_retrieval(variant, catalog_for(variant, retrieval), retrieval)
        values = query_values(ranking, gold)[:, m1]
        return {"setting": setting, "value": value, "anchor px": px,
                **{f"dev {g} mRR@1": round(100 * protocol.mean(values, "dev", g), 1) for g in ("all", "regular", "shiny")}}

    rows = []
    for ratio in args.ratios:
        px = round(ratio * measured)
        views = encode_anchor_views(encoders, ws.anchors["path"].tolist(), ROOT / FEATURE_CACHE, Preprocess(e.content_box, px),
                                    ws.has_flips, e.batch_size)
        rows.append(dev_row("encoders.anchor_scale_ratio", ratio, px, ws.with_anchor_views(views), rp))
    for k in args.hubness_k:
        rows.append(dev_row("retrieval.hubness_k", k, ws.manifest["anchor_scale"], ws, rp.model_copy(update={"hubness": "csls", "hubness_k": k})))
    df = pd.DataFrame(rows)
    out = ROOT / "reports/benchmarks"
    write_json({"dev_median_subject_px": measured, "configured": {"anchor_scale_ratio": e.anchor_scale_ratio,
                                                                  "hubness_k": rp.hubness_k}, "rows": rows}, out / "dev_sweep.json")
    (out / "dev_sweep.md").write_text(
        "# Dev sweep: anchor scale ratio and CSLS neighbourhood\n\n"
        f"Dev split only ({protocol.describe()['dev_queries']} queries; test is not read). The configured retrieval "
        f"({'+'.join(rp.ensemble)}, re-ranker {rp.reranker}, λ = {rp.lam}) with the embed stage's query features; anchors "
        f"re-encoded at ratio x the dev queries' median subject ({measured} px). Configured: ratio {e.anchor_scale_ratio}, "
        f"hubness_k {rp.hubness_k}.\n\n" + df.to_markdown(index=False) + "\n")
    print(df.to_string(index=False))


if __name__ == "__main__":
    main()
