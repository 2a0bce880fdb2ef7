"""What MiniLM's CPU-independent numpy path costs: texts/s of each runtime on the catalog's chunk texts, one text per
forward as the embed stage encodes them, through the same call the stage makes (`MiniLMEncoder.encode_texts` on blocks
of `features.encode.TEXT_BLOCK` texts; numpy runs a block on one thread per core).

    .venv/bin/python benchmarks/text_encoders.py [--texts 400]

Needs a finished curate stage (it reads data/processed/chunks.parquet). Writes reports/benchmarks/text_encoders.{json,md}.
"""

from __future__ import annotations

from polarcatalog.numerics import pin_process

pin_process()  # before numpy loads, as the `polarcatalog` command does

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np
import pandas as pd

from polarcatalog.encoders.minilm import MiniLMEncoder
from polarcatalog.features.encode import TEXT_BLOCK
from polarcatalog.io import write_json

ROOT = Path(__file__).resolve().parents[1]
RUNTIMES = {"auto": "numpy: the same AVX2 code on every CPU (the default on CPU)",
            "onnxruntime": "ONNX Runtime: kernels chosen by the CPU's instruction set",
            "torch": "sentence-transformers in torch: the reference"}


def texts_per_second(encoder: MiniLMEncoder, texts: list[str]) -> tuple[float, np.ndarray]:
    encoder.encode_texts(texts[:4], 1)  # warm-up: the first call loads what it loads lazily
    start = time.perf_counter()
    # batch_size 1: one text per forward in every runtime (numpy runs a block's texts side by side)
    out = np.vstack([encoder.encode_texts(texts[i:i + TEXT_BLOCK], 1) for i in range(0, len(texts), TEXT_BLOCK)])
    return len(texts) / (time.perf_counter() - start), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--texts", type=int, default=400, help="first N chunk texts")
    args = ap.parse_args()
    os.chdir(ROOT)
    texts = pd.read_parquet("data/processed/chunks.parquet")["text"].tolist()[: args.texts]
    rows, reference = [], None
    for runtime, what in RUNTIMES.items():
        encoder = MiniLMEncoder("cpu", runtime)
        rate, vectors = texts_per_second(encoder, texts)
        reference = vectors if runtime == "torch" else reference
        rows.append({"runtime": encoder.runtime, "what": what, "texts/s": round(rate, 1),
                     "ms per text": round(1000 / rate, 1), "_vectors": vectors})
    for row in rows:
        row["max |Δ| vs torch"] = float(np.abs(row.pop("_vectors") - reference).max())
    table = pd.DataFrame(rows)
    out = ROOT / "reports" / "benchmarks"
    write_json({"texts": len(texts), "words_mean": round(float(np.mean([len(t.split()) for t in texts])), 1),
                "machine": platform.machine(), "cores": os.cpu_count(), "rows": table.to_dict(orient="records")},
               out / "text_encoders.json")
    (out / "text_encoders.md").write_text(
        "# Text encoders: MiniLM's runtimes on the CPU\n\n"
        f"The first {len(texts)} chunk texts of the catalog (mean {np.mean([len(t.split()) for t in texts]):.1f} words), "
        f"one text per forward as the embed stage encodes them, {os.cpu_count()} cores. `max |Δ| vs torch`: the largest "
        "difference of any vector component from sentence-transformers' (vectors are unit length).\n\n"
        + table.to_markdown(index=False, floatfmt=("", "", ".1f", ".1f", ".1e")) + "\n\nTimings vary run to run: a measurement, not a metric DVC tracks.\n")
    print(table.to_string(index=False))


if __name__ == "__main__":
    main()
