"""The stage notebooks as JupyterLab sees them: opened, run and saved without making `dvc repro` stale.

Every notebook under `notebooks/` is a DVC dependency of its stage, byte for byte. Three things would change those
bytes without a person editing anything, and each is handled here:
- **Opening.** Lab writes the running kernel's description into the notebook (`kernelspec` with Lab's display name,
  `language_info` with the Python version). The committed notebooks carry exactly what this project's kernel
  reports, so opening changes nothing (`KERNELSPEC`, `LANGUAGE_INFO`; a test checks them against a real kernel).
- **Running cells interactively.** Outputs and execution counts. The executed copies under `reports/notebooks/`
  (papermill's) keep outputs; the sources do not.
- **Another machine's kernel** (another Python patch version): its `language_info` is not source either.

`pre_save` is a jupyter_server pre-save hook, installed for this venv's JupyterLab by `make venv`
(`.venv/etc/jupyter/jupyter_server_config.py`). It applies only to `notebooks/*.ipynb` of a
folder holding `dvc.yaml`: outputs and execution counts are dropped, and the kernel description already on disk is
kept. An edit to a cell's source is saved as usual, and makes its stage stale, as it should.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
LANGUAGE_INFO = {"codemirror_mode": {"name": "ipython", "version": 3}, "file_extension": ".py", "mimetype": "text/x-python",
                 "name": "python", "nbconvert_exporter": "python", "pygments_lexer": "ipython3", "version": "3.11.7"}
_VOLATILE_CELL_METADATA = ("execution", "collapsed", "scrolled")


def is_stage_notebook(path: Path) -> bool:
    """A notebook in the `notebooks/` folder of a DVC project (not an executed copy under reports/)."""
    return path.suffix == ".ipynb" and path.parent.name == "notebooks" and (path.parent.parent / "dvc.yaml").is_file()


def normalise(nb: dict[str, Any], on_disk: dict[str, Any] | None = None) -> dict[str, Any]:
    """`nb` (nbformat JSON) as a stage source: no outputs or execution counts, and the kernel description of the
    notebook on disk (or this project's, for a new notebook)."""
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
        for key in _VOLATILE_CELL_METADATA:
            cell.get("metadata", {}).pop(key, None)
    meta = nb.setdefault("metadata", {})
    meta.pop("widgets", None)
    disk = (on_disk or {}).get("metadata", {})
    meta["kernelspec"] = disk.get("kernelspec", KERNELSPEC)
    meta["language_info"] = disk.get("language_info", LANGUAGE_INFO)
    return nb


def pre_save(model: dict[str, Any], path: str, contents_manager: Any, **_: Any) -> None:
    """jupyter_server pre-save hook (see the module docstring)."""
    if model.get("type") != "notebook" or not isinstance(model.get("content"), dict):
        return
    os_path = Path(contents_manager._get_os_path(path))  # the documented way for FileContentsManager hooks
    if not is_stage_notebook(os_path):
        return
    on_disk = json.loads(os_path.read_text()) if os_path.is_file() else None
    normalise(model["content"], on_disk)
