"""Cold `dvc repro` time split by stage, with each stage's peak memory, then the no-op repro: what a user waits for
after install on a fresh clone.

    .venv/bin/python benchmarks/repro_time.py [--keep]

It clones this repository's HEAD into a temporary folder, links the installed `.venv` (install time is not counted),
and runs the stages one by one in pipeline order (`dvc repro -s <stage>`) with an empty feature cache, an empty DVC
cache and a fresh MLflow store: a cold run. Each stage runs under a small wrapper process whose children's peak
resident memory (`getrusage(RUSAGE_CHILDREN).ru_maxrss`: the largest single process, i.e. the stage's kernel) is the
stage's peak memory. Writes reports/benchmarks/repro_time.{json,md}.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

from polarcatalog.io import write_json

ROOT = Path(__file__).resolve().parents[1]
PEAK = ("import resource, subprocess, sys; rc = subprocess.call(sys.argv[1:]); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(rc)")


def stage_names(dvc_yaml: Path) -> list[str]:
    """dvc.yaml's stages in file order (which is pipeline order here), foreach entries expanded like `dvc stage list`."""
    names = []
    for name, stage in yaml.safe_load(dvc_yaml.read_text())["stages"].items():
        items = stage.get("foreach")
        names += [f"{name}@{item}" for item in items] if items else [name]
    return names


def run_stage(clone: Path, env: dict[str, str], args: list[str]) -> tuple[float, float]:
    """(seconds, peak MiB) of one command in the clone."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PEAK, *args], cwd=clone, env=env, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{' '.join(args)} failed in {clone}:\n{done.stderr[-3000:]}")
    return seconds, int(done.stderr.strip().splitlines()[-1]) / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", action="store_true", help="keep the temporary clone (its path is printed)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="polarcatalog-repro-"))
    clone = tmp / "repo"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    (clone / ".venv").symlink_to(ROOT / ".venv")
    bin_dir = str(ROOT / ".venv" / "bin")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "MLFLOW_TRACKING_URI": f"sqlite:///{clone}/mlflow.db",
           "PYTHONUNBUFFERED": "1"}
    dvc = str(ROOT / ".venv/bin/dvc")
    rows = []
    for stage in stage_names(clone / "dvc.yaml"):
        seconds, peak = run_stage(clone, env, [dvc, "repro", "-q", "-s", stage])
        rows.append({"stage": stage, "seconds": round(seconds, 1), "peak memory (MiB)": round(peak)})
        print(f"{stage:28s} {seconds:7.1f} s {peak:8.0f} MiB", flush=True)
    noop, _ = run_stage(clone, env, [dvc, "repro", "-q"])
    total = sum(r["seconds"] for r in rows)
    df = pd.DataFrame(rows)
    meta = {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(), "commit": subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True, text=True).stdout.strip(),
        "cold_total_seconds": round(total, 1), "noop_seconds": round(noop, 1)}
    out = ROOT / "reports/benchmarks"
    write_json({"meta": meta, "rows": rows}, out / "repro_time.json")
    (out / "repro_time.md").write_text(
        "# Cold `dvc repro` after install, by stage\n\n"
        f"A fresh clone of commit {meta['commit']} with the installed venv linked, empty feature, DVC and MLflow stores; "
        f"stages run one by one in pipeline order on {meta['cpus']} CPU cores. Peak memory is the largest process of the "
        "stage (its notebook kernel).\n\n" + df.to_markdown(index=False) +
        f"\n\n**Total: {total / 60:.1f} min** ({total:.0f} s). A no-op `dvc repro` afterwards: {noop:.1f} s.\n\n"
        "Timings vary run to run: a measurement, not a metric DVC tracks.\n")
    print(f"total {total:.1f} s, no-op {noop:.1f} s")
    if args.keep:
        print(f"kept {clone}")
    else:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
