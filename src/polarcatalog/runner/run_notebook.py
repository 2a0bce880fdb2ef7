"""How every DVC stage executes its notebook: papermill, with what a stage run needs around it.

`dvc.yaml` calls `polarcatalog run-notebook notebooks/01_curate.ipynb reports/notebooks/01_curate.ipynb`, not bare
`papermill`, for six reasons:
- The kernel imports `polarcatalog` from *this* checkout's `src/`. The editable install points at the main
  workspace, which is the wrong code for a `dvc exp run --temp` or queued experiment, whose copy lives under
  `.dvc/tmp/exps/` and may differ from the workspace by the time the queue runs.
- `params_file` and `executed_notebook` are injected the same way for every stage.
- The kernel's own log is silenced: its start-up warning (ipykernel's "running over TCP without encryption",
  printed for every stage; the kernel listens on 127.0.0.1 only, for the one client that started it) and its
  shutdown-time "KeyboardInterrupt caught" (see below).
- The terminal gets one line per code cell (its number, first line and time); long cells also draw their own progress
  bars there (`polarcatalog.progress`), with count, rate and ETA.
- The kernel's BLAS is pinned (`polarcatalog.numerics`), so a stage's numbers do not depend on the machine.
- The kernel, and this runner itself, are forked from a warm process that has done the stages' imports
  (`runner.warm_kernel`).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from polarcatalog.numerics import stage_env
from polarcatalog.runner import warm_kernel
from polarcatalog.runner.nbfile import import_nbformat


def _kernel_env(root: Path) -> None:
    """The kernel inherits this process's environment: put the checkout's src/ first on its import path."""
    src = str((root / "src").resolve())
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != src]
    os.environ["PYTHONPATH"] = os.pathsep.join([src, *parts])
    os.environ.update(stage_env(os.environ))  # machine-independent BLAS (polarcatalog.numerics), whatever the shell set


def run_forked(args: list[str], module: str = "polarcatalog.cli.run_notebook_command") -> None:
    """`polarcatalog run-notebook ARGS` (or `python -m <module> ARGS`: the `check` stage's command), forked from the
    warm process serving this checkout, which has papermill, Jupyter's client and the params schema imported
    (`warm_kernel.run_forked`); returns, having done nothing, when none serves it yet (the first stage of a run starts
    one)."""
    root = Path.cwd().resolve()
    _kernel_env(root)  # the environment the warm process was keyed on
    warm_kernel.run_forked(root, module, args)


def run_notebook(notebook: Path, output: Path, parameters: dict[str, Any], root: Path | None = None) -> None:
    """Execute `notebook` into `output` with papermill, with `params_file` and `executed_notebook` injected."""
    nbformat = import_nbformat()  # before papermill, which imports nbformat: without jsonschema's IRI grammar
    import papermill  # heavy: papermill and Jupyter's client, for this command only

    root = (root or Path.cwd()).resolve()
    _kernel_env(root)
    warm = warm_kernel.ensure(root)  # after the environment is final: it is part of the warm process's key
    if warm:
        os.environ[warm_kernel.SOCKET_VAR] = str(warm)  # the kernel's MLflow companion is forked there too
    output.parent.mkdir(parents=True, exist_ok=True)
    params = {"params_file": "params.yaml", "executed_notebook": str(output), **parameters}
    cells = [c for c in nbformat.read(notebook, as_version=4).cells if c.cell_type == "code"]
    stage = os.environ.get("DVC_STAGE", notebook.stem)
    print(f"[{stage}] executing {notebook} ({len(cells)} code cells) -> {output}", file=sys.stderr, flush=True)
    start = time.perf_counter()
    clock: dict[str, float] = {}
    done = [0]  # code cells finished: numbered by position, so two cells with the same source keep their numbers

    def cell_started(cell: Any, cell_index: int, **_: Any) -> None:
        clock["cell"] = time.perf_counter()

    def cell_done(cell: Any, cell_index: int, **_: Any) -> None:
        if cell.cell_type != "code" or "injected-parameters" in cell.metadata.get("tags", []):
            return
        first = next((line for line in cell.source.splitlines() if line.strip() and not line.startswith("#")), "")
        done[0] += 1
        print(f"[{stage}] cell {done[0]}/{len(cells)} {time.perf_counter() - clock['cell']:6.1f} s  {first[:70]}",
              file=sys.stderr, flush=True)

    papermill.execute_notebook(
        str(notebook), str(output), parameters=params, kernel_name="python3", language="python", cwd=str(root),
        progress_bar=False,
        # The kernel's own log is noise for a stage: its TCP-transport warning on every start, and at shutdown
        # "KeyboardInterrupt caught in kernel." at ERROR, because jupyter_client always sends SIGINT before its
        # shutdown request and, on a busy machine, the kernel can still be in the tail of the last cell's handler.
        # A failing cell still surfaces in full: papermill raises with its traceback and the executed notebook has it.
        extra_arguments=["--IPKernelApp.log_level=CRITICAL"], on_cell_start=cell_started, on_cell_executed=cell_done,
        # When the last cell returns, a stage's work is done: its files are written and closed, and `run.finish()`
        # (or the failure hook) has ended its MLflow run. A graceful shutdown would only run the interpreter's
        # teardown of torch, ONNX Runtime and MLflow, seconds of every stage (benchmarks/repro_time.py).
        shutdown_kernel="immediate",
        # A kernel forked from a warm process holding the stages' imports (runner/warm_kernel.py), else a fresh one.
        **({"kernel_manager_class": warm_kernel.kernel_manager_class(warm)} if warm else {}),
    )
    print(f"[{stage}] done in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
