"""scripts/device_check.py runs on a bare GPU machine's Python: no network, no project install, only torch, transformers
and a few stock packages. Here it runs as a subprocess on the CPU with every package such a machine lacks made
unimportable (a `sitecustomize` that hides them from every import finder and from `importlib.metadata`, as if they were
not installed) and with src/ taken off the path that the editable install puts it on, so the script must find the
package in the checkout itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "device_check.py"
# What a bare GPU machine does not have, as top-level import names (`x*`: every name starting with x). scikit-image is
# among them: the machine's stock packages are torch, transformers and its needs, Pillow, timm, onnxruntime, pandas,
# scikit-learn and scipy.
BARE_MACHINE_LACKS = ("faiss", "mlflow*", "dvc", "dvc_*", "papermill", "pydantic", "pydantic_*", "networkx", "typer",
                      "pyarrow", "nbformat", "jupyter*", "sentence_transformers", "seaborn", "matplotlib", "mpl_toolkits",
                      "polarcatalog_tools", "skimage", "scikit_image")

# Runs at interpreter start (site imports `sitecustomize` from the first PYTHONPATH entry): every import finder is
# wrapped so that a hidden name is found by none of them (`import x` raises ModuleNotFoundError, find_spec gives None)
# and its distribution metadata is not listed. Each attempt to import a hidden name is logged with its importer.
SITECUSTOMIZE = '''
import os, sys, traceback

HIDDEN = tuple(n for n in os.environ["BLOCK_IMPORTS"].split(",") if n)
LOG = os.environ.get("BLOCK_LOG")


def hidden(name):
    top = name.partition(".")[0].lower().replace("-", "_")
    return any(top.startswith(h[:-1]) if h.endswith("*") else top == h for h in HIDDEN)


def importer():
    frames = [f for f in traceback.extract_stack() if not f.filename.startswith("<")
              and "/importlib/" not in f.filename and f.filename != __file__]
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"


class Hide:
    def __init__(self, inner):
        self.inner = inner

    def find_spec(self, name, path=None, target=None):
        if hidden(name):
            if LOG:
                with open(LOG, "a") as f:
                    f.write(f"{name}\\t{importer()}\\n")
            return None
        find = getattr(self.inner, "find_spec", None)
        return find(name, path, target) if find else None

    def find_distributions(self, *args, **kwargs):
        find = getattr(self.inner, "find_distributions", None)
        return [] if find is None else [d for d in find(*args, **kwargs) if not hidden(d.metadata["Name"] or "")]

    def invalidate_caches(self):
        if hasattr(self.inner, "invalidate_caches"):
            self.inner.invalidate_caches()


sys.meta_path[:] = [Hide(f) for f in sys.meta_path]
drop = os.environ.get("BLOCK_DROP_PATH")
sys.path[:] = [p for p in sys.path if not drop or os.path.abspath(p) != drop]
'''


def run_bare(tmp_path: Path, *args: str, also_hide: tuple[str, ...] = ()) -> tuple[subprocess.CompletedProcess, dict, list[str]]:
    """(the process, its device_check.json, the logged attempts to import a hidden package) of one CPU run."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    log = tmp_path / "hidden-imports.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env |= {"PYTHONPATH": str(site), "BLOCK_IMPORTS": ",".join(BARE_MACHINE_LACKS + also_hide),
            "BLOCK_DROP_PATH": str(ROOT / "src"), "BLOCK_LOG": str(log), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "PYTHONDONTWRITEBYTECODE": "1"}
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--out", str(out), *args], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    attempts = log.read_text().splitlines() if log.exists() else []
    return proc, json.loads((out / "device_check.json").read_text()), attempts


def assert_no_hidden_imports(report: dict, attempts: list[str]) -> None:
    """The run imported no hidden package, and no polarcatalog module so much as tried (only the script's own optional
    imports and third-party packages' optional ones may)."""
    assert not [m for m in report["imports"] if any(m == h.rstrip("*") or (h.endswith("*") and m.startswith(h[:-1]))
                                                    for h in BARE_MACHINE_LACKS)]
    src = str(ROOT / "src" / "polarcatalog")
    assert not [a for a in attempts if src in a.partition("\t")[2]], attempts


@pytest.mark.slow
def test_device_check_runs_on_a_bare_machine(tmp_path):
    proc, report, attempts = run_bare(tmp_path)
    checks = report["checks"]
    print(proc.stdout)
    assert report["machine"]["polarcatalog"] == str(ROOT / "src" / "polarcatalog")  # found in the checkout, not installed
    assert report["failed"] == [] and all(c["ok"] for c in checks.values()), checks
    assert set(checks) == {"open_clip image+text on device = cpu", "DINOv2 (transformers) on device = cpu",
                           "VLM verifier prefix reuse = one by one (fp32)", "bf16 vs fp32 P(Yes)",
                           "VLM verifier time per episode (tiny model; 12 concepts x 3 templates)",
                           "MLLM reader batched = one by one", "FAISS GPU index = CPU",
                           "curate stage: VLM anchor filter, batched = one by one"}
    assert [n for n, c in checks.items() if "skipped" in c] == ["FAISS GPU index = CPU"]
    assert "faiss is not importable" in checks["FAISS GPU index = CPU"]["skipped"]
    stage = checks["curate stage: VLM anchor filter, batched = one by one"]
    assert stage["images"] == len(stage["scores"]) == 6 and all(0 < s < 1 for s in stage["scores"])
    assert stage["max_abs_batched_vs_single"] < 1e-4 and stage["threshold"] == 0.5
    assert stage["kept"] == sum(s >= 0.5 for s in stage["scores"])
    assert checks["VLM verifier prefix reuse = one by one (fp32)"]["max_abs"] < 1e-4
    assert_no_hidden_imports(report, attempts)


@pytest.mark.slow
def test_without_open_clip_its_check_is_skipped_with_the_wheels_to_carry(tmp_path):
    _, report, attempts = run_bare(tmp_path, "--only", "encoders", also_hide=("open_clip",))
    checks = report["checks"]
    note = checks["open_clip image+text on device = cpu"]["skipped"]
    pins = [line for line in (ROOT / "constraints.txt").read_text().splitlines()
            if line.partition("==")[0] in ("open_clip_torch", "ftfy", "wcwidth")]
    assert len(pins) == 3 and all(p in note for p in pins), note
    dino = checks["DINOv2 (transformers) on device = cpu"]
    assert dino["ok"] and dino["max_abs"] < 1e-3
    assert report["failed"] == [] and "open_clip" not in report["imports"]
    assert_no_hidden_imports(report, attempts)
