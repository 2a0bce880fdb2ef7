"""The id that names an encoder's weights and numerics in every feature-cache key, written once per family and
computable without building the model, so that a caller who finds every vector in the cache never builds one
(`registry.image_encoder`)."""

from __future__ import annotations

import os
from pathlib import Path


EFFICIENTNET_INPUT_PX = {"efficientnet_lite0": 224, "efficientnet_lite1": 240, "efficientnet_lite2": 260}  # each model's own


def efficientnet_id(name: str, input_size: int, onnx: bool) -> str:
    # The weights are fixed by the pinned package version: the name identifies them. The runtime is part of the id:
    # ONNX Runtime and torch channels_last agree to ~1e-5, not bit for bit, so their vectors are cached apart.
    return f"{name}@pypi:{input_size}px:{'ort' if onnx else 'cl'}"


def open_clip_weights(pretrained: str | None) -> str | None:
    """An open_clip spec's pretrained part as open_clip takes it: a tag or checkpoint file, or None for random weights."""
    return None if pretrained in (None, "", "none", "random") else pretrained


def open_clip_id(model: str, pretrained: str | None) -> str:
    """A local checkpoint is named by its file name, size and mtime: replacing the file is a new id."""
    weights = open_clip_weights(pretrained)
    if weights and Path(weights).is_file():
        st = os.stat(weights)
        return f"open_clip:{model}:{Path(weights).name}:{st.st_size}:{int(st.st_mtime)}"
    return f"open_clip:{model}:{weights or 'random'}"
