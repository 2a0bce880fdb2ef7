"""Cold `dvc repro` after install, of two commits timed in one sitting: did a change make a user's first run slower?
The machine's speed drifts by more than the difference sought between sittings, so the two are run back to back.

    .venv/bin/python benchmarks/cold_repro_ab.py --before <commit> [--after HEAD] [--order after,before]

Each run is a fresh clone of the commit, then `make venv` (its own venv from the package cache; install time is not
compared), then one `dvc repro` with empty feature, DVC and MLflow stores, timed from start to exit, then
`git status --short` (empty: the commit's committed results came back byte for byte on this CPU). Runs go in the
given order. Writes reports/benchmarks/cold_repro_ab.{json,md}.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pandas as pd

from polarcatalog.io import write_json

ROOT = Path(__file__).resolve().parents[1]


def commit_of(rev: str) -> str:
    return subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()


def cold_repro(commit: str, work: Path) -> dict[str, object]:
    """One fresh clone of `commit`, its venv installed untimed, one timed `dvc repro`."""
    clone = work / commit
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "checkout", "-q", commit], cwd=clone, check=True)
    subprocess.run(["make", "venv"], cwd=clone, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "VIRTUAL_ENV", "POLARCATALOG_ROOT")}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if Path(p) != ROOT / ".venv/bin")  # the clone's own
    start = time.perf_counter()
    done = subprocess.run([str(clone / ".venv/bin/dvc"), "repro"], cwd=clone, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    changed = subprocess.run(["git", "status", "--short"], cwd=clone, capture_output=True, text=True).stdout.splitlines()
    shutil.rmtree(clone)
    return {"commit": commit, "seconds": round(seconds, 1), "exit code": done.returncode,
            "files changed after the run": len(changed), "changed": ", ".join(line[3:] for line in changed)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="the commit to compare against")
    ap.add_argument("--after", default="HEAD")
    ap.add_argument("--order", default="after,before", help="comma-separated run order of `after` and `before`")
    args = ap.parse_args()
    commits = {"before": commit_of(args.before), "after": commit_of(args.after)}
    order = [name.strip() for name in args.order.split(",")]
    if not order or set(order) - set(commits):
        raise SystemExit(f"--order {args.order!r}: a comma-separated list of `after` and `before`")
    work = Path(tempfile.mkdtemp(prefix="polarcatalog-ab-"))
    rows = []
    for name in order:
        rows.append({"run": len(rows) + 1, "which": name} | cold_repro(commits[name], work))
        print(rows[-1], flush=True)
    shutil.rmtree(work, ignore_errors=True)
    df = pd.DataFrame(rows)
    mean = df.groupby("which")["seconds"].mean()
    meta = {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(), **commits,
            "after / before": round(float(mean["after"] / mean["before"]), 3) if {"after", "before"} <= set(mean.index) else None}
    out = ROOT / "reports/benchmarks"
    write_json({"meta": meta, "rows": rows}, out / "cold_repro_ab.json")
    (out / "cold_repro_ab.md").write_text(
        "# Cold `dvc repro` after install: two commits in one sitting\n\n"
        f"`before` = {commits['before']}, `after` = {commits['after']}, on {meta['cpus']} CPU cores, run in the order "
        "below. Each run: a fresh clone, `make venv` (not timed), one `dvc repro` with empty feature, DVC and MLflow "
        "stores, timed from start to exit; then `git status --short` (0 files: the commit's results reproduced on "
        "this CPU). Command: `.venv/bin/python benchmarks/cold_repro_ab.py --before "
        f"{commits['before']} --order {args.order}`.\n\n" + df.to_markdown(index=False) +
        (f"\n\n**after / before: {meta['after / before']:.3f}** (mean seconds per commit)." if meta["after / before"] else "")
        + "\n\nTimings vary run to run: a measurement, not a metric DVC tracks.\n")
    print(f"after / before: {meta['after / before']}")


if __name__ == "__main__":
    main()
