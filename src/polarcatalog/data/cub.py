"""CUB-200-2011's 312 binary attributes as a concept vocabulary with per-class ground truth: the bird domain's
concepts (reference data; the bird domain itself is not embedded yet)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from polarcatalog.data.concepts import Concept


def _readable(attribute: str) -> str:
    """`has_bill_shape::curved_(up_or_down)` -> `curved (up or down) bill shape`."""
    part, value = attribute.split("::")
    return f"{value.replace('_', ' ')} {part.removeprefix('has_').replace('_', ' ')}"


def cub_vocabulary(attributes_txt: str | Path) -> list[Concept]:
    out = []
    for line in Path(attributes_txt).read_text().splitlines():
        if not line.strip():
            continue
        idx, attr = line.split(maxsplit=1)
        name = _readable(attr.strip())
        out.append(Concept(f"cub:{int(idx)}", attr.split("::")[0].removeprefix("has_"), name, (name,)))
    return out


def cub_labels(continuous_txt: str | Path, threshold: float = 50.0) -> np.ndarray:
    """[200, 312] bool: the attribute is seen in at least `threshold` % of the class's images."""
    return np.loadtxt(continuous_txt) >= threshold
