"""The floor under a notebook stage: what DVC, papermill with its kernel, and a stage's imports cost before any work.

    .venv/bin/python benchmarks/stage_floor.py [--stages 9] [--repeats 3]

A one-value experiment reruns nine notebook stages (`repro_time.md`); issue targets ask for it in 30 s and for at most
3 s of overhead around a stage whose own compute is under a second. This measures what no stage can go below, in a
temporary DVC project holding a chain of `--stages` stages (each reads the previous one's output, so all run), each
layer added to the one before:

1. `dvc`: the command is `python -c` writing its output — DVC's own work per stage (lock, hashing, caching) and a
   Python start;
2. `+ papermill`: `polarcatalog run-notebook` of a notebook with a parameters cell and one line writing the output —
   papermill, Jupyter's client and a fresh kernel;
3. `+ imports`: that notebook also imports what every stage's setup cell imports before its work (`IMPORTS`: the
   stage modules and their numpy / pandas / matplotlib / seaborn / scikit-learn / torch), with no data read and no
   MLflow run;
4. `+ imports, forked`: the same notebook, each stage's runner and kernel forked from a warm process that has done
   those imports (`runner/warm_kernel.py`, the default; layers 2 and 3 set `POLARCATALOG_WARM_KERNEL=0` for fresh
   processes).

Each layer is run `--repeats` times with `dvc repro -f` (every stage forced); the per-stage figure is the median over
repeats of the total divided by the stage count, and DVC's start-up (its time before the first stage) is reported
apart. Writes reports/benchmarks/stage_floor.{json,md}.
"""

from __future__ import annotations

from polarcatalog.numerics import pin_process

pin_process()  # before numpy loads, as the `polarcatalog` command does

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pandas as pd
import yaml

from polarcatalog.io import write_json

sys.path.insert(0, str(Path(__file__).resolve().parent))
from repro_time import timed_repro  # noqa: E402  (benchmarks/ is not a package)

ROOT = Path(__file__).resolve().parents[1]
# What the λ-reading stages' setup cells import before any work (notebooks 04-08), in one cell
IMPORTS = """\
import os
import time
from IPython.display import Markdown, display
from polarcatalog.runner.tracking import start_stage
from polarcatalog.config import load_params
from polarcatalog.features.workspace import load_workspace
from polarcatalog.from_params import protocol_for
from polarcatalog.io import write_csv, write_json
from polarcatalog.paths import FEATURES, FIGURES, HEADLINES, PLOTS, PROCESSED, REPORTS, repo_root
from polarcatalog.retrieval.query_side import catalog_for, run_retrieval
from polarcatalog.stages import ablate, kg, memory_quality, retrieve
import matplotlib.pyplot as plt
import seaborn as sns
"""
LAYERS = ("dvc", "+ papermill", "+ imports", "+ imports, forked")


def notebook(with_imports: bool) -> nbformat.NotebookNode:
    params = nbformat.v4.new_code_cell('executed_notebook = None\nparams_file = "params.yaml"\nsource = ""\ntarget = ""')
    params.metadata["tags"] = ["parameters"]
    body = (IMPORTS if with_imports else "") + "open(target, 'w').write(open(source).read() + '.')\n"
    return nbformat.v4.new_notebook(cells=[params, nbformat.v4.new_code_cell(body)])


def project(folder: Path, layer: str, stages: int) -> None:
    """A DVC project of `stages` chained stages for `layer` (see the module's docstring)."""
    folder.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=folder, check=True)
    subprocess.run([str(ROOT / ".venv/bin/dvc"), "init", "-q"], cwd=folder, check=True)
    (folder / "out").mkdir()
    (folder / "out/s0.txt").write_text("x")
    if layer != "dvc":
        nbformat.write(notebook(layer.startswith("+ imports")), folder / "stage.ipynb")
    (folder / "params.yaml").write_text("{}\n")
    declared = {}
    for i in range(1, stages + 1):
        src, dst = f"out/s{i - 1}.txt", f"out/s{i}.txt"
        if layer == "dvc":
            cmd = f"python -c \"open('{dst}', 'w').write(open('{src}').read() + '.')\""
            deps = [src]
        else:
            cmd = f"polarcatalog run-notebook stage.ipynb out/s{i}.ipynb -p source={src} -p target={dst}"
            deps = [src, "stage.ipynb"]
        declared[f"s{i}"] = {"cmd": cmd, "deps": deps, "outs": [dst]}
    (folder / "dvc.yaml").write_text(yaml.safe_dump({"stages": declared}, sort_keys=False))
    subprocess.run(["git", "add", "-A"], cwd=folder, check=True)
    subprocess.run(["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-qm", "floor"],
                   cwd=folder, check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stages", type=int, default=9)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="polarcatalog-floor-"))
    bin_dir = str(ROOT / ".venv/bin")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT / "src"),
           "PYTHONUNBUFFERED": "1"}
    dvc = str(ROOT / ".venv/bin/dvc")
    rows = []
    try:
        for layer in LAYERS:
            folder = tmp / layer.strip("+ ").replace(", ", "-").replace(" ", "-")
            project(folder, layer, args.stages)
            layer_env = env if layer.endswith("forked") else {**env, "POLARCATALOG_WARM_KERNEL": "0"}
            # warm: DVC's and the OS's caches (and the forked layer's warm process, as a run's first stage starts it)
            subprocess.run([dvc, "repro", "-q"], cwd=folder, env=layer_env, check=True)
            for repeat in range(args.repeats):
                start = time.perf_counter()
                marks = timed_repro(folder, layer_env, [dvc, "repro", "-f"])
                total = time.perf_counter() - start
                startup = next(r["seconds"] for r in marks if r["stage"] == "dvc start-up")
                rows.append({"layer": layer, "repeat": repeat, "total": round(total, 2), "dvc start-up": startup,
                             "per stage": round((total - startup) / args.stages, 2)})
                print(rows[-1], flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    df = pd.DataFrame(rows)
    summary = df.groupby("layer", sort=False)[["total", "dvc start-up", "per stage"]].median().reset_index()
    summary["added per stage"] = summary["per stage"].diff().fillna(summary["per stage"]).round(2)
    meta = {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(), "stages": args.stages,
            "repeats": args.repeats, "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                                              capture_output=True, text=True).stdout.strip()}
    out = ROOT / "reports/benchmarks"
    write_json({"meta": meta, "rows": rows, "summary": summary.to_dict("records")}, out / "stage_floor.json")
    floor = summary.set_index("layer")["per stage"]
    (out / "stage_floor.md").write_text(
        "# The floor under a notebook stage\n\n"
        f"Commit {meta['commit']}, {meta['cpus']} CPU cores. A temporary DVC project with a chain of {args.stages} "
        "stages, each forced (`dvc repro -f`), each layer adding to the one before: `dvc` (a `python -c` command: "
        "DVC's own work per stage and a Python start), `+ papermill` (`polarcatalog run-notebook` of a two-cell "
        "notebook: papermill, Jupyter's client, a fresh kernel), `+ imports` (that notebook also imports what the "
        "λ-reading stages' setup cells import, no data read, no MLflow run), `+ imports, forked` (each stage's runner "
        "and kernel forked from a warm process that has done those imports, the default; the layers above it run "
        "fresh processes). "
        "Medians of "
        f"{args.repeats} repeats, seconds. Command: `.venv/bin/python benchmarks/stage_floor.py`.\n\n"
        + summary.to_markdown(index=False) + "\n\n"
        f"A notebook stage that does nothing costs **{floor['+ imports']:.1f} s** before its own work with a fresh "
        f"kernel ({floor['dvc']:.1f} s of it DVC and a Python start), **{floor['+ imports, forked']:.1f} s** "
        f"with a forked one; nine of them, as a one-value experiment reruns, "
        f"**{args.stages * floor['+ imports']:.0f} s** and **{args.stages * floor['+ imports, forked']:.0f} s** "
        "plus DVC's start-up. What a real stage adds on top — loading the workspace, the MLflow run and its "
        "artifacts, the compute — is in `repro_time.md`.\n\n"
        "Timings vary run to run: a measurement, not a metric DVC tracks.\n")
    print(summary.to_string(index=False))


if __name__ == "__main__":
    main()
