"""Where things live. Every path the pipeline writes is relative to the repository root."""

from __future__ import annotations

import os
from pathlib import Path


def repo_root(start: Path | None = None) -> Path:
    """The folder holding params.yaml: notebooks run with cwd=notebooks/ in JupyterLab, repo root under DVC."""
    env = os.environ.get("POLARCATALOG_ROOT")
    if env:
        return Path(env).resolve()
    here = (start or Path.cwd()).resolve()
    for p in (here, *here.parents):
        if (p / "params.yaml").is_file() and (p / "dvc.yaml").is_file():
            return p
    return here


RAW = Path("data/raw")
INTERIM = Path("data/interim")
PROCESSED = Path("data/processed")
REPORTS = Path("reports")
FIGURES = REPORTS / "figures"
HEADLINES = REPORTS / "metrics"  # each stage's headline numbers: its DVC `metrics:` file (`dvc exp show`)
PLOTS = REPORTS / "plots"  # the data behind each figure: committed, declared as DVC plots (`dvc plots diff`)
FEATURES = Path("data/features")
FEATURE_CACHE = Path("data/cache/features")
MODELS = Path("models")  # derived model files (e.g. ONNX exports of the packaged models): rebuilt on demand, never committed
