"""`polarcatalog evaluate` on query folders of growing size: wall time and peak memory, cold (every image new to the
feature cache, so the encoders are built and run) and warm (the same folder again: every vector from the cache).

    .venv/bin/python benchmarks/evaluate_memory.py [--root <checkout after make repro>] [--sizes 30 300 1000]

Each folder holds 40x40 PNGs of a coloured square on white, labelled as one species; their pixels carry a random
salt so that a rerun of this benchmark is cold again (memory and time do not depend on which colours they are).
Each `evaluate` runs as its own process under a small wrapper that reads the child's peak resident set
(`getrusage(RUSAGE_CHILDREN).ru_maxrss`). Writes reports/benchmarks/evaluate_memory.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
WRAPPER = """
import resource, subprocess, sys
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def make_folder(folder: Path, n: int, salt: int) -> None:
    rng = np.random.default_rng(salt)
    (folder / "pikachu").mkdir(parents=True)
    for i in range(n):
        a = np.full((40, 40, 3), 255, np.uint8)
        x, y = rng.integers(0, 20, 2)
        a[y:y + 20, x:x + 20] = rng.integers(0, 256, 3)
        Image.fromarray(a).save(folder / "pikachu" / f"{i:05d}.png")


def run(root: Path, folder: Path, out: Path) -> dict[str, float]:
    cli = str(Path(sys.executable).parent / "polarcatalog")
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", WRAPPER, cli, "evaluate", "--queries", str(folder), "--out", str(out),
                           "--anchor-scale", "catalog"], cwd=root, capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - start
    rc, kib = (int(x) for x in proc.stdout.split())
    if rc != 0:
        raise RuntimeError(f"evaluate on {folder} exited {rc}")
    return {"seconds": round(seconds, 1), "peak_gib": round(kib / 2**20, 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", type=Path, default=ROOT, help="a checkout where `make repro` ran")
    ap.add_argument("--sizes", type=int, nargs="+", default=[30, 300, 1000])
    args = ap.parse_args()
    rows = []
    salt = int.from_bytes(os.urandom(4), "little")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            folder = Path(tmp) / f"q{n}"
            make_folder(folder, n, salt + n)
            cold = run(args.root, folder, Path(tmp) / f"out{n}")
            warm = run(args.root, folder, Path(tmp) / f"out{n}")
            rows.append({"images": n, "cold_seconds": cold["seconds"], "cold_peak_gib": cold["peak_gib"],
                         "warm_seconds": warm["seconds"], "warm_peak_gib": warm["peak_gib"]})
            print(rows[-1], flush=True)
    out = ROOT / "reports" / "benchmarks"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=args.root, capture_output=True, text=True).stdout.strip()
    meta = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores", "commit": commit, "rows": rows}
    (out / "evaluate_memory.json").write_text(json.dumps(meta, indent=2) + "\n")
    lines = ["# `polarcatalog evaluate`: time and peak memory by folder size", "",
             f"`benchmarks/evaluate_memory.py` on a checkout of commit {commit} after `make repro` (the default catalog: three EfficientNet "
             "encoders in ONNX Runtime); 40x40 PNGs; cold = every image new to the feature cache (the encoders are "
             "built and run), warm = the same folder again (every vector from the cache, no encoder built). One "
             f"machine ({meta['machine']}): compare rows, not machines.", "",
             "| images | cold time (s) | cold peak (GiB) | warm time (s) | warm peak (GiB) |", "|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['images']} | {r['cold_seconds']} | {r['cold_peak_gib']} | {r['warm_seconds']} | {r['warm_peak_gib']} |"
              for r in rows]
    lines += ["", "Cold minus warm is what building and running the three encoders adds; the warm column is the "
              "workspace and the imports. `evaluate` runs ONNX Runtime without its CPU memory arena "
              "(`encoders.onnx_runtime.lean_memory`), so each batch's buffers are freed after it and the peak does not "
              "grow with the folder once a batch (`encoders.batch_size`) is full."]
    (out / "evaluate_memory.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
