"""Shared fixtures. Reference data lives in ../shared/data (never copied here); tests needing it skip cleanly."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


TINY_CLIP = {"embed_dim": 16,
             "vision_cfg": {"image_size": 64, "layers": 2, "width": 32, "head_width": 16, "patch_size": 16},
             "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 2}}


@pytest.fixture(scope="session")
def tiny_clip_name(tmp_path_factory):
    """A tiny random open_clip architecture registered under a name (open_clip's own config mechanism)."""
    import json

    import open_clip

    folder = tmp_path_factory.mktemp("oc_cfg")
    (folder / "pc-tiny-clip.json").write_text(json.dumps(TINY_CLIP))
    open_clip.add_model_config(folder)
    return "pc-tiny-clip"


def shared(sub: str) -> Path:
    path = SHARED_DATA / sub
    if not path.exists():
        pytest.skip(f"reference data {path} is absent (it lives beside the repo, in ../shared/data)")
    return path


@pytest.fixture
def solid_image():
    """A colour block on a white canvas: the foreground is exactly the block."""

    def make(colours: list[tuple[int, int, int]], size: int = 64, margin: int = 8) -> Image.Image:
        a = np.full((size, size, 3), 255, np.uint8)
        inner = size - 2 * margin
        for i, c in enumerate(colours):
            x0 = margin + i * inner // len(colours)
            x1 = margin + (i + 1) * inner // len(colours)
            a[margin : size - margin, x0:x1] = c
        return Image.fromarray(a)

    return make
