"""open_clip with the project's own architectures: every `models/open_clip_configs/*.json` (open_clip's model-config
format) is registered before an open_clip name is resolved, in whichever process resolves it (a stage's kernel, the
CLI, a test), so that `open_clip:<custom name>:<weights>` in params.yaml means the same model everywhere."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from types import ModuleType

from polarcatalog.paths import repo_root

PROJECT_CONFIGS = Path("models/open_clip_configs")  # relative to the repository root; committed (see .gitignore)


@lru_cache(maxsize=None)
def _register(folder: Path) -> None:
    import open_clip  # heavy: torch

    if folder.is_dir() and any(folder.glob("*.json")):
        open_clip.add_model_config(folder)


def open_clip_library(root: Path | None = None) -> ModuleType:
    """The open_clip module, with the project's configs registered (once per process and folder)."""
    import open_clip  # heavy: torch

    _register((root or repo_root()) / PROJECT_CONFIGS)
    return open_clip
