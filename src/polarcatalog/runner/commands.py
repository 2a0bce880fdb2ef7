"""The commands of this environment (`mlflow`, `dvc`) as a subprocess should run them."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def venv_command(name: str) -> str:
    """`name` on PATH, else beside this Python: an unactivated venv has its commands there and not on PATH."""
    return shutil.which(name) or str(Path(sys.executable).parent / name)
