"""How close the embed stage's image path comes to the bare model: views/s of the pipeline's encode path (one decode
per image, content box, scale, flip, preprocess, channels_last forward, through a cold feature cache) beside the same
model's channels_last forward on random tensors of the same shape (the roofline), per encoder, in one run. The
default-format forward is timed too: what the stage ran before it moved to channels_last.

    .venv/bin/python benchmarks/embed_throughput.py [--images 256] [--batch 64]

Needs a finished curate stage (it reads data/processed/anchors.parquet and the images it lists). Writes
reports/benchmarks/embed_throughput.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch

from polarcatalog.config import load_params
from polarcatalog.encoders import create_encoder
from polarcatalog.encoders.preprocess import Preprocess
from polarcatalog.features.encode import encode_image_views
from polarcatalog.io import read_table, write_json

ROOT = Path(__file__).resolve().parents[1]


def forward_rate(model: torch.nn.Module, size: int, batch: int, repeats: int, channels_last: bool) -> float:
    """Images/s of the bare forward (features + head) on random input, after one warm-up batch."""
    x = torch.randn(batch, 3, size, size)
    m = model
    if channels_last:
        x, m = x.contiguous(memory_format=torch.channels_last), model.to(memory_format=torch.channels_last)
    with torch.inference_mode():
        m.forward_head(m.forward_features(x), pre_logits=True)
        start = time.perf_counter()
        for _ in range(repeats):
            m.forward_head(m.forward_features(x), pre_logits=True)
        seconds = time.perf_counter() - start
    model.to(memory_format=torch.contiguous_format)
    return batch * repeats / seconds


def pipeline_rate(encoder, paths: list[str], views: list[Preprocess], batch: int) -> tuple[float, float]:
    """(images/s, views/s) of the pipeline path on a cold cache: every image decoded once, all its views encoded."""
    with tempfile.TemporaryDirectory() as cache:
        start = time.perf_counter()
        encode_image_views(encoder, paths, cache, views, batch_size=batch)
        seconds = time.perf_counter() - start
    return len(paths) / seconds, len(paths) * len(views) / seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=256)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()
    os.chdir(ROOT)
    params = load_params("params.yaml")
    e = params.encoders
    anchors = read_table(ROOT / "data/processed/anchors.parquet")
    paths = anchors["path"].tolist()[: args.images]
    scale = json.loads((ROOT / "data/features/manifest.json").read_text())["anchor_scale"]
    view = Preprocess(e.content_box, scale)
    views = [view, view.flipped()] if e.flips else [view]
    rows = []
    for spec in e.image:
        enc = create_encoder(spec, "image", "cpu")
        if not hasattr(getattr(enc, "model", None), "forward_features"):
            print(f"{spec.name}: not a timm model (the embedded EfficientNets are); skipped")
            continue
        size = getattr(enc, "input_size", 224)
        repeats = max(1, args.images // args.batch)
        bare = forward_rate(enc.model, size, args.batch, repeats, channels_last=False)
        bare_cl = forward_rate(enc.model, size, args.batch, repeats, channels_last=True)
        images_s, views_s = pipeline_rate(enc, paths, views, args.batch)
        rows.append({"encoder": spec.name, "input px": size, "bare forward, default format (img/s)": round(bare, 1),
                     "bare forward, channels_last (img/s)": round(bare_cl, 1), "pipeline (images/s)": round(images_s, 1),
                     "pipeline (views/s)": round(views_s, 1), "pipeline / bare channels_last": round(views_s / bare_cl, 3)})
    df = pd.DataFrame(rows)
    out = ROOT / "reports/benchmarks"
    meta = {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "images": len(paths), "batch": args.batch, "views per image": len(views), "anchor scale px": scale}
    write_json({"meta": meta, "rows": rows}, out / "embed_throughput.json")
    (out / "embed_throughput.md").write_text(
        "# Embed throughput: the pipeline's image path vs the bare model\n\n"
        f"{meta['images']} catalog images, anchor views (content box, scaled to {scale} px, {meta['views per image']} views per "
        f"image: the view and its flip, from one decode), batch {args.batch}, cold feature cache, CPU ({meta['cpus']} cores, "
        f"{meta['torch_threads']} torch threads). `pipeline / bare channels_last` compares the pipeline's views/s with the "
        "bare forward it runs (channels_last) on random tensors of the same shape; the target is >= 0.8.\n\n" + df.to_markdown(index=False) + "\n\nTimings vary run to run: a measurement, not a metric "
        "DVC tracks.\n")
    print(df.to_string(index=False))


if __name__ == "__main__":
    main()
