"""Small file helpers every stage shares: JSON reports, parquet tables, content hashes, file-safe names."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


def write_json(obj: Any, path: str | Path) -> None:
    """Sorted keys and a trailing newline, so that identical runs write identical bytes (DVC metrics diff cleanly)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(obj, indent=2, sort_keys=True, default=float) + "\n")


def write_csv(df: "pd.DataFrame", path: str | Path) -> Path:
    """A committed data file (DVC plot data): floats rounded to 6 places so reruns write identical bytes."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    df.round(6).to_csv(path, index=False, lineterminator="\n")
    return Path(path)


def read_table(path: str | Path) -> pd.DataFrame:
    """A parquet table a stage reads. Opened by Python's `open`, not by pyarrow's C++ filesystem, so that the read
    shows up as an `open` audit event, which the read audit (`tests/read_audit.py`) records."""
    import pandas as pd  # heavy: keep `import polarcatalog.io` light

    with open(path, "rb") as f:
        return pd.read_parquet(f)


def sha256_file(path: str | Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def safe_name(name: str) -> str:
    """`open_clip:ViT-B-32-quickgelu:openai` -> `open_clip_ViT-B-32-quickgelu_openai`: a name usable as a file name."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
