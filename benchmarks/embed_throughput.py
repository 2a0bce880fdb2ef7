"""How close the embed stage's image path comes to the bare model: views/s of the pipeline's encode path (one decode
per image, content box, scale, flip, preprocess on the decode thread, forward in the configured runtime, through a
cold feature cache) beside the same runtime's forward on random tensors of the same shape (the roofline), per
encoder, in one run. Torch's forward is timed too, in the default memory format and in channels_last.

    .venv/bin/python benchmarks/embed_throughput.py [--images N] [--batch 64]

Needs a finished embed stage (it reads data/processed/anchors.parquet, queries.parquet and the images they list).
Writes reports/benchmarks/embed_throughput.{json,md}.
"""

from __future__ import annotations

from polarcatalog.numerics import pin_process

pin_process()  # before numpy loads, as the `polarcatalog` command does

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Callable

import pandas as pd
import torch

from polarcatalog.from_params import query_view
from polarcatalog.config import load_params
from polarcatalog.encoders import create_encoder
from polarcatalog.encoders.preprocess import Preprocess
from polarcatalog.features.colour_nuisance import recoloured_views
from polarcatalog.features.encode import encode_image_views
from polarcatalog.io import read_table, write_json

ROOT = Path(__file__).resolve().parents[1]


def rate(run: Callable[[], object], images: int, repeats: int) -> float:
    """Images/s of `run` (one batch of `images`), after one warm-up call."""
    run()
    start = time.perf_counter()
    for _ in range(repeats):
        run()
    return images * repeats / (time.perf_counter() - start)


def torch_rate(model: torch.nn.Module, x: torch.Tensor, repeats: int, channels_last: bool) -> float:
    m = model.to(memory_format=torch.channels_last if channels_last else torch.contiguous_format)
    x = x.contiguous(memory_format=torch.channels_last) if channels_last else x.contiguous()
    with torch.inference_mode():
        return rate(lambda: m.forward_head(m.forward_features(x), pre_logits=True), len(x), repeats)


def pipeline_rate(encoder: object, paths: list[str], views: list[Preprocess], batch: int) -> tuple[float, float]:
    """(images/s, views/s) of the pipeline path on a cold cache: every image decoded once, all its views encoded."""
    with tempfile.TemporaryDirectory() as cache:
        start = time.perf_counter()
        encode_image_views(encoder, paths, cache, views, batch_size=batch)
        seconds = time.perf_counter() - start
    return len(paths) / seconds, len(paths) * len(views) / seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=None, help="first N images of each set (default: all, as the stage)")
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()
    os.chdir(ROOT)
    params = load_params("params.yaml")
    e = params.encoders
    manifest = json.loads((ROOT / "data/features/manifest.json").read_text())
    scale = manifest["anchor_scale"]
    view = Preprocess(e.content_box, scale)
    compare = [Preprocess(e.content_box, int(px)) for px in next(iter(manifest["image"].values())).get("anchors_at", {})]
    flip = lambda v: [v, v.flipped()] if e.flips else [v]  # noqa: E731
    # the embed stage's own work: every anchor view (view, flip, the scale lever's views, and the recoloured views of the
    # encoders the retrieval makes colour-invariant) and query view (view, flip)
    anchor_paths = read_table(ROOT / "data/processed/anchors.parquet")["path"].tolist()[: args.images]
    query_paths = read_table(ROOT / "data/processed/queries.parquet")["path"].tolist()[: args.images]
    rows = []
    for spec in e.image:
        recoloured = recoloured_views(view) if spec.name in params.retrieval.colour_invariant else []
        sets = {"anchors": (anchor_paths, [*flip(view), *compare, *recoloured]), "queries": (query_paths, flip(query_view(params)))}
        enc = create_encoder(spec, "image", "cpu", e.runtime)
        if not hasattr(enc, "encode_prepared"):
            print(f"{spec.name}: not a packaged EfficientNet; skipped")
            continue
        size = enc.input_size
        x = torch.randn(args.batch, 3, size, size)
        repeats = 8  # batches of the bare forward timed
        bare = rate(lambda: enc.encode_prepared(x), args.batch, repeats)
        default, cl = torch_rate(enc.model, x, repeats, False), torch_rate(enc.model, x, repeats, True)
        total_views = total_seconds = 0.0
        for name, (paths, views) in sets.items():
            images_s, views_s = pipeline_rate(enc, paths, views, args.batch)
            total_views += len(paths) * len(views)
            total_seconds += len(paths) / images_s
            rows.append({"encoder": spec.name, "runtime": enc.runtime, "input px": size, "images": f"{len(paths)} {name}",
                         "views per image": len(views), "bare forward (img/s)": round(bare, 1),
                         "torch default format (img/s)": round(default, 1), "torch channels_last (img/s)": round(cl, 1),
                         "pipeline (images/s)": round(images_s, 1), "pipeline (views/s)": round(views_s, 1),
                         "pipeline / bare": round(views_s / bare, 3)})
        rows.append({"encoder": spec.name, "runtime": enc.runtime, "input px": size, "images": "embed stage (both)",
                     "views per image": round(total_views / sum(len(p) for p, _ in sets.values()), 2),
                     "bare forward (img/s)": round(bare, 1), "torch default format (img/s)": round(default, 1),
                     "torch channels_last (img/s)": round(cl, 1), "pipeline (images/s)": None,
                     "pipeline (views/s)": round(total_views / total_seconds, 1),
                     "pipeline / bare": round(total_views / total_seconds / bare, 3)})
    df = pd.DataFrame(rows)
    out = ROOT / "reports/benchmarks"
    meta = {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "images": args.images or "all", "batch": args.batch, "anchor scale px": scale}
    write_json({"meta": meta, "rows": rows}, out / "embed_throughput.json")
    (out / "embed_throughput.md").write_text(
        "# Embed throughput: the pipeline's image path vs the bare model\n\n"
        f"The embed stage's work per encoder: every catalog image (anchor view: content box scaled to {scale} px, its flip, "
        "the scale lever's views, and for the encoders in `retrieval.colour_invariant` its three recoloured views) and "
        "every query sprite (native pixels, content box, and its flip), all views of an "
        "image from one decode; batch "
        f"{args.batch}, cold feature cache, CPU ({meta['cpus']} cores, {meta['torch_threads']} threads). `bare forward` is "
        "the configured runtime on random tensors of the input shape; `pipeline / bare` compares the pipeline's views/s "
        "with it (target >= 0.8). Torch's own forward is shown for reference.\n\n" + df.to_markdown(index=False)
        + "\n\nTimings vary run to run: a measurement, not a metric DVC tracks.\n")
    print(df.to_string(index=False))


if __name__ == "__main__":
    main()
